"""Pulumi mocks that know the AWS catalog, for the platform tests and the offline plan
(docs/architecture.md, "Mocks"): provider functions answered from moto's bundled EC2 catalog,
resources given plausible ids and ARNs (`preview=True`: no id, inputs back, as a first preview).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import importlib.util
import json
import os
import pathlib
import runpy
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi

from trainforge.plan.resource_types import EKS_COMPONENT, HELM_RELEASE
from trainforge.stack import file as stack_file

DEFAULT_REGION = "us-west-2"
DEFAULT_ACCOUNT = "123456789012"
# Stand-ins shaped like the S3 managed prefix list (com.amazonaws.<region>.s3; AWS's
# ip-ranges.json, service S3); a real run reads the list.
S3_PREFIX_LIST_CIDRS = {
    "us-west-2": ["18.34.48.0/20", "18.34.244.0/22", "3.5.76.0/22", "3.5.80.0/21",
                  "52.218.128.0/17", "52.92.128.0/17"],
    "us-east-1": ["16.182.0.0/16", "18.34.0.0/19", "18.34.232.0/21", "3.5.0.0/19",
                  "52.216.0.0/15", "54.231.0.0/16"],
}  # fmt: skip


class UnknownInstanceType(LookupError):
    """The instance type is not in the EC2 catalog."""


def moto_file(*parts: str) -> pathlib.Path:
    """A file of the installed moto package (its bundled AWS data), found without importing
    moto (~0.3 CPU s with boto3), which only the IAM rehearsal's child process needs
    (plan/registry.py `APART`). The one reader of moto's data: the EC2 tables here, the AWS
    managed policies (plan/checks/iam_reference.py)."""
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'moto'", name="moto")
    return pathlib.Path(spec.submodule_search_locations[0]).joinpath(*parts)


@functools.cache
def _moto_json(*parts: str) -> Any:
    """One of moto's bundled EC2 tables (`ec2/resources/...`), None when moto has none."""
    path = moto_file("ec2", "resources", *parts)
    if not path.is_file():
        return None
    with gzip.open(path) as f:
        return json.load(f)


@functools.cache
def _offerings(region: str) -> dict[str, tuple[str, ...]]:
    """instance type -> the zones of `region` offering it (DescribeInstanceTypeOfferings)."""
    out: dict[str, list[str]] = {}
    for row in (
        _moto_json("instance_type_offerings", "availability-zone", f"{region}.json.gz") or []
    ):
        out.setdefault(row["InstanceType"], []).append(row["Location"])
    return {k: tuple(sorted(v)) for k, v in out.items()}


@functools.cache
def _region_offerings(region: str) -> frozenset[str] | None:
    """The instance types offered in `region`; None when moto has no table for it."""
    rows = _moto_json("instance_type_offerings", "region", f"{region}.json.gz")
    return None if rows is None else frozenset(row["InstanceType"] for row in rows)


def instance_type_result(name: str) -> dict[str, Any]:
    """The `aws:ec2/getInstanceType:getInstanceType` result (wire names): the fields
    trainforge.platform.instance_types reads."""
    raw = _moto_json("instance_types.json.gz").get(name)
    if raw is None:
        raise UnknownInstanceType(name)
    net, gpu = raw.get("NetworkInfo", {}), raw.get("GpuInfo", {})
    return {
        "defaultVcpus": raw.get("VCpuInfo", {}).get("DefaultVCpus", 0),
        "memorySize": raw.get("MemoryInfo", {}).get("SizeInMiB", 0),
        "gpuses": [
            {"count": g.get("Count", 0), "name": g.get("Name", ""),
             "manufacturer": g.get("Manufacturer", ""),
             "memorySize": g.get("MemoryInfo", {}).get("SizeInMiB", 0)}
            for g in gpu.get("Gpus", [])
        ],
        "hypervisor": raw.get("Hypervisor", ""),
        "supportedUsagesClasses": raw.get("SupportedUsageClasses", []),
        "totalGpuMemory": gpu.get("TotalGpuMemoryInMiB", 0),
        "instanceStorageSupported": bool(raw.get("InstanceStorageSupported", False)),
        "totalInstanceStorage": raw.get("InstanceStorageInfo", {}).get("TotalSizeInGB", 0),
        "efaSupported": bool(net.get("EfaSupported", False)),
        "efaMaximumInterfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0),
        "maximumNetworkInterfaces": net.get("MaximumNetworkInterfaces", 0),
        "maximumNetworkCards": net.get("MaximumNetworkCards", 1),
        "networkCards": [
            {"index": c.get("NetworkCardIndex", 0),
             "baselineBandwidth": c.get("BaselineBandwidthInGbps", 0.0)}
            for c in net.get("NetworkCards", [])
        ],
        "maximumIpv4AddressesPerInterface": net.get("Ipv4AddressesPerInterface", 0),
        "supportedArchitectures": raw.get("ProcessorInfo", {}).get("SupportedArchitectures", []),
    }  # fmt: skip


@dataclass
class MockedResource:
    """One registered resource as the mocks saw it; urn, parent and the resource options the
    engine saw (ignoreChanges, dependsOn, ...) are filled in by run_mocked's monitor."""

    type: str
    name: str
    inputs: dict[str, Any]
    id: str | None
    outputs: dict[str, Any]
    provider: str | None = None
    custom: bool | None = None
    urn: str | None = None
    parent: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class MockedCall:
    token: str
    args: dict[str, Any]


# what a fleet worker's plan names apart from its manager's (TrainforgeMocks.stack_tag)
_PER_STACK = ("aws:s3/bucket:", "aws:s3/bucketV2:", "aws:kms/key:")
# type -> (id prefix, modulus, hex digits, ARN service, ARN resource): the cloud's own ids
_HASHED_IDS = {
    "aws:kms/key:": ("mrk", 10**12, 12, "kms", "key"),
    "aws:ec2/vpc:": ("vpc", 10**8, 8, "ec2", "vpc"),
    "aws:ec2/subnet:": ("subnet", 10**8, 8, "ec2", "subnet"),
    "aws:ec2/securityGroup:": ("sg", 10**8, 8, "ec2", "security-group"),
    "aws:ec2/launchTemplate:": ("lt", 10**12, 12, "ec2", "launch-template"),
    "aws:fsx/lustreFileSystem:": ("fs", 16**17, 17, "fsx", "file-system"),
}
# type -> (the output naming it, ARN service, ARN resource prefix, whether the name is its id)
_NAMED = {
    "aws:cloudwatch/eventRule:": ("name", "events", "rule", False),
    "aws:ec2/placementGroup:": ("name", "ec2", "placement-group", True),
    "aws:eks/nodeGroup:": ("nodeGroupName", "eks", "nodegroup", False),
}
_REGION_ANSWERS = {  # lookups answered from the region alone
    "aws:index/getAvailabilityZones:getAvailabilityZones": lambda m: {
        "names": m.availability_zones},
    "aws:index/getCallerIdentity:getCallerIdentity": lambda m: {"accountId": DEFAULT_ACCOUNT},
    "aws:index/getRegion:getRegion": lambda m: {"region": m.region},
    "aws:index/getPartition:getPartition": lambda m: {"partition": "aws"},
    "aws:ec2/getVpc:getVpc": lambda m: {"cidrBlock": "10.0.0.0/16"},
    "aws:ec2/getManagedPrefixList:getManagedPrefixList": lambda m: {"entries": [
        {"cidr": c}
        for c in S3_PREFIX_LIST_CIDRS.get(m.region, S3_PREFIX_LIST_CIDRS[DEFAULT_REGION])
    ]},
    # ECR's docker login (platform/image_cache.py): user always AWS, a stand-in password
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": lambda m: {
        "userName": "AWS", "password": "standin-ecr-token"},
}  # fmt: skip


def _h(name: str) -> int:
    """A stable number for a name (hash() is salted per process)."""
    return zlib.crc32(name.encode())


def _arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


class TrainforgeMocks(pulumi.runtime.Mocks):
    """Mocks answering the AWS functions the platform calls and recording every resource
    (`resources`, `calls`: in registration order)."""

    def __init__(
        self,
        *,
        preview: bool = False,
        region: str | None = None,
        capacity_reservations: dict[str, dict[str, Any]] | None = None,
        offerings: dict[str, list[str]] | None = None,
        subnet_zones: dict[str, str] | None = None,
        references: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.preview = preview
        # stack name -> what a StackReference to it reads (name, outputs, secretOutputNames):
        # a fleet manager's workers as planned (plan/fleet.py); one not listed exported nothing
        self.references = dict(references or {})
        # a fleet worker planned beside its manager: its S3 buckets and KMS keys get ids of
        # its own stack (AWS names each stack's apart), so the plan tells them apart
        self.stack_tag = ""
        # cr-id -> {availabilityZone, placementGroupArn, reservationType, instanceType}
        self.capacity_reservations = dict(capacity_reservations or {})
        self.offerings = dict(offerings or {})  # type -> zones (overrides moto's catalog)
        self.subnet_zones = dict(subnet_zones or {})  # subnet id -> zone (default: from id)
        self._region = region
        self.resources: list[MockedResource] = []
        self.calls: list[MockedCall] = []
        self.result: Any = None  # what run_mocked's program returned
        self.outputs: dict[str, Any] = {}  # its stack outputs (unknown ones None)

    @property
    def region(self) -> str:
        """The region given, else the stack's `aws:region` (as its provider would), else the
        default."""
        return self._region or pulumi.Config("aws").get("region") or DEFAULT_REGION

    @property
    def availability_zones(self) -> list[str]:
        return [f"{self.region}{s}" for s in "abcd"]

    def of_type(self, typ: str) -> list[MockedResource]:
        return [r for r in self.resources if r.type == typ]

    def find(self, typ: str, name: str) -> MockedResource:
        of_type = self.of_type(typ)
        if found := [r for r in of_type if r.name == name]:
            return found[0]
        raise KeyError(f"no {typ} named {name!r} (have: {sorted(r.name for r in of_type)})")

    def call(self, args: pulumi.runtime.MockCallArgs):
        """The fields the platform reads (trainforge/platform: network, cluster, ...)."""
        self.calls.append(MockedCall(args.token, dict(args.args)))
        tok, a = args.token, args.args
        if tok in _REGION_ANSWERS:
            return _REGION_ANSWERS[tok](self), []
        if tok == "aws:ec2/getInstanceType:getInstanceType":
            name = a.get("instanceType", "")
            try:
                return instance_type_result(name), []
            except UnknownInstanceType:  # as the AWS provider reports it
                return {}, [("instanceType", f"no EC2 instance type {name!r} in {self.region}")]
        if tok == "aws:ec2/getRouteTable:getRouteTable":
            subnet = a.get("subnetId") or "subnet-0mocked"
            return {"routeTableId": f"rtb-{_h(subnet) % 16**8:08x}"}, []
        if tok == "aws:eks/getAddonVersion:getAddonVersion":
            # EKS's default build for the minor; offline, the newest build a public record shows
            from trainforge.platform.addons import pin  # noqa: PLC0415

            name = a.get("addonName", "")
            try:
                return {"version": pin(name)}, []
            except KeyError:
                return {}, [("addonName", f"no EKS add-on {name!r}")]
        if tok == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            wanted = [
                v
                for f in a.get("filters") or []
                if f.get("name") == "instance-type"
                for v in f.get("values") or []
            ]
            if a.get("locationType") == "region" and a.get("region") not in (None, self.region):
                # another region (the provider's `region` argument): moto's table, or no answer
                other = _region_offerings(a["region"])
                if other is None:
                    return {}, [("region", f"no offerings known for region {a['region']!r}")]
                return {"instanceTypes": [t for t in wanted if t in other]}, []
            if a.get("locationType") == "region":
                offered = _region_offerings(self.region)
                types = [
                    t
                    for t in wanted
                    if (bool(self.offerings[t]) if t in self.offerings else
                        offered is None or t in offered)
                ]  # fmt: skip
                return {"instanceTypes": types}, []
            catalog = _offerings(self.region)
            pairs = [(t, z) for t in wanted for z in self.offerings.get(t, catalog.get(t, ()))]
            return {"instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs]}, []
        if tok == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            # pulumi-aws 7.51.1's data source reads any reservation by id (an ODCR has type
            # "default"); an id EC2 does not know: its NotFound, as the provider words it
            rid = a.get("id") or ""
            if found := self.capacity_reservations.get(rid):
                return {"id": rid, **found}, []
            why = "reading EC2 Capacity Reservation: couldn't find resource "
            return {}, [("id", why + "(InvalidCapacityReservationId.NotFound)")]
        if tok == "aws:ec2/getSubnet:getSubnet":
            sid, zones = a.get("id") or "subnet-0mocked", self.availability_zones
            zone = self.subnet_zones.get(sid) or zones[_h(sid) % len(zones)]
            return {"availabilityZone": zone}, []
        return {}, []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        inputs = dict(args.inputs)
        custom, provider = args.custom, args.provider or None
        if args.typ == "pulumi:pulumi:StackReference":
            rid = args.resource_id or inputs.get("name") or args.name
            empty = {"name": rid, "outputs": {}, "secretOutputNames": []}
            outputs = dict(self.references.get(rid) or empty)
            custom, provider = True, None
        elif args.resource_id and args.typ == "aws:ec2/capacityReservation:CapacityReservation":
            # a read of an existing reservation (at preview too); one not stubbed: an
            # On-Demand Capacity Reservation in the region's first zone, in no placement group
            rid = args.resource_id
            state = self.capacity_reservations.get(rid) or {
                "availabilityZone": self.availability_zones[0],
                "placementGroupArn": "",
                "reservationType": "default",
            }
            outputs = {"id": rid, **state}
            custom, provider = True, None
        elif self.preview:
            rid, outputs = None, dict(inputs)
        else:
            rid, outputs = self._outputs(args.typ, args.name, inputs)
        self.resources.append(
            MockedResource(args.typ, args.name, inputs, rid, outputs, provider, custom)
        )
        return rid, outputs

    def _outputs(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict]:
        """Plausible outputs: inputs echoed plus the ids/ARNs/names the cloud would assign."""
        out = dict(inputs)
        region, acct = self.region, DEFAULT_ACCOUNT
        if self.stack_tag and typ.startswith(_PER_STACK):
            name = f"{name}-{self.stack_tag}"
        rid = f"{name}-id"
        pkg, _, kind = typ.partition(":")
        kind = kind.split(":")[-1]
        if pkg == "aws":
            physical = inputs.get("name") or f"{name}-mock"
            out.setdefault("id", rid)
            hashed = next((v for t, v in _HASHED_IDS.items() if typ.startswith(t)), None)
            named = next((v for t, v in _NAMED.items() if typ.startswith(t)), None)
            if hashed is not None:
                prefix, modulus, width, service, what = hashed
                rid = f"{prefix}-{_h(name) % modulus:0{width}x}"
                out["arn"] = _arn(service, region, acct, f"{what}/{rid}")
                if service == "kms":
                    out["keyId"] = rid
                if what == "launch-template":
                    out["latestVersion"] = 1
            elif named is not None:
                key, service, what, is_id = named
                out.setdefault(key, physical)
                rid = out[key] if is_id else rid
                out["arn"] = _arn(service, region, acct, f"{what}/{out[key]}")
            elif typ.startswith("aws:iam/role:"):
                out.setdefault("name", physical)
                out.setdefault("arn", f"arn:aws:iam::{acct}:role/{physical}")
                out.setdefault("uniqueId", f"AROA{_h(name) % 10**12:012d}")
            elif typ.startswith("aws:iam/policy:"):
                out.setdefault("arn", f"arn:aws:iam::{acct}:policy/{physical}")
            elif typ.startswith("aws:sqs/queue:"):
                out.setdefault("name", physical)
                rid = f"https://sqs.{region}.amazonaws.com/{acct}/{out['name']}"
                out["arn"] = _arn("sqs", region, acct, out["name"])
                out["url"] = rid
            else:
                out.setdefault("arn", _arn(pkg, region, acct, f"{kind.lower()}/{physical}"))
            out["id"] = rid
            return rid, out
        if typ == "random:index/randomPassword:RandomPassword":
            # a stand-in (never a real password): the Secrets built from it keep their keys
            out.setdefault("result", "standin-" + "x" * max(0, int(inputs.get("length") or 16) - 8))
            return rid, out
        if typ == EKS_COMPONENT:  # the outputs trainforge/platform/cluster.py reads
            cname = inputs.get("name") or f"{name}-eks"
            issuer = f"oidc.eks.{region}.amazonaws.com/id/MOCKED{_h(name) % 10**8}"
            server = f"https://{cname}.eks.{region}.amazonaws.com"
            kubeconfig = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": cname, "cluster": {
                    "server": server, "certificate-authority-data": "bW9jaw=="}}],
                "contexts": [{"name": cname, "context": {"cluster": cname, "user": cname}}],
                "current-context": cname,
                "users": [{"name": cname, "user": {"token": "mock"}}],
            }  # fmt: skip
            out["kubeconfigJson"] = json.dumps(kubeconfig)
            out["nodeSecurityGroupId"] = f"sg-node{_h(name) % 10**6:06x}"
            out["oidcProviderArn"] = f"arn:aws:iam::{acct}:oidc-provider/{issuer}"
            return f"{cname}-id", out
        if pkg == "kubernetes":
            meta = dict(inputs.get("metadata") or {})
            meta.setdefault("name", name)
            out["metadata"] = meta
            if typ == HELM_RELEASE:
                out.setdefault("status", {"status": "deployed", "name": inputs.get("name", name)})
            if inputs.get("type") == "kubernetes.io/service-account-token":
                # the token controller fills `data.token` (base64); a stand-in, so what is
                # built from it (a fleet worker's kubeconfig, plan/fleet.py) exists
                token = base64.b64encode(f"standin-token-{name}".encode()).decode()
                out["data"] = {**dict(inputs.get("data") or {}), "token": token}
            return f"{meta.get('namespace', 'default')}/{meta['name']}", out
        return rid, out


_OPTIONS = ("deleteBeforeReplace", "replaceOnChanges", "protect", "retainOnDelete",
            "ignoreChanges", "remote", "dependencies")  # fmt: skip


def resource_options(request: Any) -> dict[str, Any]:
    """The resource options of a RegisterResource request that the engine acts on;
    `dependencies`: every URN the SDK waited for (depends_on expanded, input sources), which
    plan/checks/ordering.py follows. Sorted: the SDK gathers them in a set."""
    opts: dict[str, Any] = {}
    for key in _OPTIONS:
        if value := getattr(request, key, None):
            opts[key] = value if isinstance(value, bool) else list(value)
            if key == "dependencies":
                opts[key].sort()
    return opts


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Resources registered inside carry no stack trace, which mocks never read (~10% of the
    CPU of `plan --stack prod`: docs/performance.md). Restored after the run."""
    from pulumi.runtime import resource as sdk_resource  # noqa: PLC0415
    from pulumi.runtime.proto import source_pb2  # noqa: PLC0415

    saved = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = saved


def run_in_process(
    program: Callable[[], Any],
    mocks: pulumi.runtime.Mocks,
    monitor: Any,
    *,
    project: str,
    stack: str,
    preview: bool,
    config: dict[str, str],
    secret_keys: list[str] | None = None,
    logger: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Run `program` here under `mocks` and `monitor` and wait: a fresh root stack, config and
    program-run record (core/contract.py start_record), so nothing of a previous run leaks.
    Returns the record and the root stack's outputs (Outputs)."""
    from pulumi.runtime import settings  # noqa: PLC0415
    from pulumi.runtime.config import set_all_config  # noqa: PLC0415
    from pulumi.runtime.stack import run_pulumi_func  # noqa: PLC0415
    from pulumi.runtime.sync_await import _sync_await  # noqa: PLC0415

    from trainforge.core.contract import start_record  # noqa: PLC0415

    settings.ROOT.set(None)
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    set_all_config(dict(config), list(secret_keys or []))
    declared = start_record()
    with _no_stack_traces():
        pulumi.runtime.set_mocks(
            mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=logger
        )
        _sync_await(run_pulumi_func(program))
    return declared, dict(getattr(pulumi.runtime.get_root_resource(), "outputs", None) or {})


def program_file(main: pathlib.Path, root: pathlib.Path) -> Callable[[], None]:
    """A program file as a program function: run as `__main__` in `root`, first on sys.path,
    as the Pulumi CLI runs it."""

    def program() -> None:
        sys.path.insert(0, str(root))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            os.chdir(cwd)
            if sys.path and sys.path[0] == str(root):
                sys.path.pop(0)

    return program


def run_mocked(
    program: Callable[[], Any] | str | os.PathLike,
    config: dict[str, Any] | None = None,
    *,
    project: str = "trainforge",
    stack: str = "test",
    preview: bool = False,
    mocks: TrainforgeMocks | None = None,
) -> TrainforgeMocks:
    """Run a program function (or a `__main__.py` path) under mocks and wait. `config` takes
    bare or namespaced keys (`aws:region`), structures as the engine passes them. Returns the
    mocks with `outputs` resolved and the program's `result`; its exceptions propagate."""
    from pulumi.runtime.mocks import MockMonitor  # noqa: PLC0415
    from pulumi.runtime.sync_await import _sync_await  # noqa: PLC0415

    engine_config = stack_file.engine_config(config or {}, project)
    region = engine_config.get("aws:region", DEFAULT_REGION)
    mocks = mocks or TrainforgeMocks(preview=preview, region=region)

    def record(request: Any, resp: Any, options: dict[str, Any] | None = None) -> None:
        for r in reversed(mocks.resources):
            if r.type == request.type and r.name == request.name and r.urn is None:
                r.urn, r.parent = resp.urn, request.parent or None
                r.options = r.options if options is None else options
                return

    class _Monitor(MockMonitor):
        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            resp = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                opts = resource_options(request)
                record(
                    request,
                    resp,
                    {**opts, "provider": request.provider} if request.provider else opts,
                )
            return resp

        def ReadResource(self, request):  # noqa: N802 - gRPC method name
            resp = super().ReadResource(request)
            record(request, resp)
            return resp

    main = None if callable(program) else pathlib.Path(program).resolve()
    fn = program if main is None else program_file(main, main.parent)

    def wrapped():
        mocks.result = fn()

    _, outputs = run_in_process(
        wrapped,
        mocks,
        _Monitor(mocks),
        project=project,
        stack=stack,
        preview=preview,
        config=engine_config,
    )
    mocks.outputs = {key: _sync_await(_resolve(value)) for key, value in outputs.items()}
    return mocks


async def _resolve(value: Any) -> Any:
    out = pulumi.Output.from_input(value)
    return await out.future() if await out.is_known() else None
