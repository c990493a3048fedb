"""Stack config (`trainforge:*` in Pulumi.<stack>.yaml) -> typed, validated, frozen dataclasses.

Why: a typo in a stack file must fail `pulumi preview` in a second with a message naming the
key, the bad value and what would be valid, not after EKS spent 15 minutes creating a
cluster. Every problem is collected and reported at once, before any resource is declared.
docs/configuration.md documents every key and its default.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi

# The node facts jobs see use the same taint and limit types as the config that declares them.
from trainforge.core.contract import PoolLimits, Taint
from trainforge.platform.services_config import SERVICE_KEYS, parse_services_config

NS = "trainforge"
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
CLUSTER_NAME = re.compile(r"^[a-zA-Z][-a-zA-Z0-9_]{0,99}$")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?$")
IAM_PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::[0-9]{12}:(role|user|assumed-role)/.+$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
NAT_MODES = ("single", "onePerAz")
GPU_TAINT_KEY = "nvidia.com/gpu"
POOL_LABEL = "trainforge.io/pool"
# CPU Karpenter pools are for jobs only (jobs tolerate their pool's taints, published in
# PoolFacts): CoreDNS, the CSI controllers and other add-ons stay on the system node group
# instead of holding a spot node up that `WhenEmpty` consolidation would never remove.
JOBS_TAINT_KEY = "trainforge.io/jobs-only"
# The FSx CSI driver's startup taint: its node plugin removes it once it is ready to mount
# (aws-fsx-csi-driver v1.5.0 pkg/driver/constants.go AgentNotReadyNodeTaintKey, docs/install.md
# "Configure node startup taint": NoExecute recommended), so pods wait for it.
FSX_AGENT_NOT_READY_TAINT = "fsx.csi.aws.com/agent-not-ready"


class ConfigError(ValueError):
    """One or more stack config problems; `errors` lists each as `trainforge:<key>: ...`."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"invalid stack configuration ({len(self.errors)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class NetworkConfig:
    """A new VPC (`vpcId` unset) or an existing one with its private subnets."""

    vpc_id: str | None = None
    private_subnet_ids: tuple[str, ...] = ()
    cidr: str = "10.0.0.0/16"
    availability_zones: int = 3
    nat_gateways: str = "single"
    # The S3 gateway endpoint and the interface endpoints nodes, controllers and jobs call
    # (trainforge.platform.network.INTERFACE_ENDPOINTS). Off for a VPC that already has them
    # (two interface endpoints with private DNS for one service cannot coexist in a VPC).
    vpc_endpoints: bool = True


@dataclass(frozen=True)
class EndpointConfig:
    """API endpoint: always private; public only for the listed CIDRs (empty = private only)."""

    public_access_cidrs: tuple[str, ...] = ()

    @property
    def public(self) -> bool:
        return bool(self.public_access_cidrs)


@dataclass(frozen=True)
class SystemNodeGroupConfig:
    instance_type: str = "m6i.large"
    min_size: int = 2
    desired_size: int = 2
    max_size: int = 3
    root_volume_gib: int = 50


@dataclass(frozen=True)
class AcceptanceTestConfig:
    """An on-demand acceptance test of a GPU pool's nodes (trainforge/platform/acceptance.py).

    Declared as suspended CronJobs; a platform engineer runs one with
    `kubectl create job --from=cronjob/<pool>-<test> ...` (docs/reliability.md)."""

    enabled: bool = False
    dcgm_level: int = 2  # dcgmi diag -r: 1 quick (~1 min) ... 4 extended (~1-2 h)
    nodes: int = 2  # nodes tested per run (the all-reduce needs 2)
    all_reduce: bool | None = None  # None: on for EFA pools
    min_bus_bandwidth_gbps: float | None = None  # None: the facts table's floor, if any


@dataclass(frozen=True)
class NodeHealthConfig:
    """GPU node health: the EKS node monitoring agent and automatic node repair."""

    monitoring_agent: bool = True
    auto_repair: bool = True


@dataclass(frozen=True)
class NodeGroupConfig:
    """A managed GPU node group (fixed capacity, e.g. a capacity reservation)."""

    name: str
    instance_types: tuple[str, ...]
    min_size: int = 0
    desired_size: int = 0
    max_size: int = 2
    efa: bool = False
    capacity_type: str = "ON_DEMAND"
    root_volume_gib: int = 200
    capacity_reservation_id: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    subnet_id: str | None = None
    acceptance: AcceptanceTestConfig = field(default_factory=AcceptanceTestConfig)


@dataclass(frozen=True)
class NodePoolConfig:
    """A Karpenter NodePool (scales from zero on demand, back to zero when empty)."""

    name: str
    instance_types: tuple[str, ...]
    capacity_types: tuple[str, ...] = ("on-demand",)
    gpu: bool | None = None  # None: inferred from the instance types
    efa: bool = False
    taints: tuple[Taint, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    limits: PoolLimits = field(default_factory=PoolLimits)
    consolidate_after: str = "10m"
    root_volume_gib: int = 100
    weight: int | None = None
    acceptance: AcceptanceTestConfig = field(default_factory=AcceptanceTestConfig)


@dataclass(frozen=True)
class KarpenterConfig:
    enabled: bool = True
    namespace: str = "kube-system"


@dataclass(frozen=True)
class ImagesConfig:
    """Where pods' images come from (docs/images.md): the ECR pull-through cache and the
    trainforge runtime images jobs run when they name no image of their own."""

    pull_through_cache: bool = True
    # Secrets Manager secrets (name prefix `ecr-pullthroughcache/`) holding the upstream's
    # credentials; without one, that upstream gets no cache rule and its images are not used.
    docker_hub_credential_arn: str | None = None
    github_credential_arn: str | None = None
    runtime: bool = True  # jobs without `image` run the trainforge runtime image
    # Prebuilt runtime images (built from images/runtime/Dockerfile elsewhere); unset: the
    # stack builds and pushes them.
    runtime_image: str | None = None
    runtime_efa_image: str | None = None


@dataclass(frozen=True)
class PlatformConfig:
    cluster: str
    network: NetworkConfig = field(default_factory=NetworkConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    admins: tuple[str, ...] = ()
    system_node_group: SystemNodeGroupConfig = field(default_factory=SystemNodeGroupConfig)
    node_groups: tuple[NodeGroupConfig, ...] = ()
    node_pools: tuple[NodePoolConfig, ...] = ()
    karpenter: KarpenterConfig = field(default_factory=KarpenterConfig)
    node_health: NodeHealthConfig = field(default_factory=NodeHealthConfig)
    tags: tuple[tuple[str, str], ...] = ()
    images: ImagesConfig = field(default_factory=ImagesConfig)
    # owned by the services engineer (trainforge/platform/services_config.py); None if absent
    services: Any = None

    @property
    def pool_names(self) -> list[str]:
        return [g.name for g in self.node_groups] + [p.name for p in self.node_pools]


# ---------------------------------------------------------------------------------------------
# Parsing helpers: each takes the key path and appends to `errors` instead of raising.


class _P:
    def __init__(self, errors: list[str]):
        self.errors = errors

    def err(self, path: str, value: Any, expected: str) -> None:
        self.errors.append(f"{NS}:{path}: {value!r} is not valid; expected {expected}")

    def mapping(self, raw: Any, path: str, known: set[str]) -> dict[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.err(path, raw, "a mapping")
            return {}
        for k in raw:
            if k not in known:
                self.err(f"{path}.{k}" if path else k, raw[k], f"one of the keys {sorted(known)}")
        return raw

    def string(self, raw: dict, key: str, path: str, default: Any, pattern=None, what=""):
        v = raw.get(key, default)
        if v is None or v is default:
            return v
        if not isinstance(v, str) or (pattern is not None and not pattern.match(v)):
            self.err(path, v, what or "a string")
            return default
        return v

    def integer(self, raw: dict, key: str, path: str, default: int, lo: int = 0, hi=None) -> int:
        v = raw.get(key, default)
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            rng = f"an integer >= {lo}" + (f" and <= {hi}" if hi is not None else "")
            self.err(path, v, rng)
            return default
        return v

    def boolean(self, raw: dict, key: str, path: str, default: Any) -> Any:
        v = raw.get(key, default)
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        if v is not None and not isinstance(v, bool):
            self.err(path, v, "true or false")
            return default
        return v

    def str_list(self, raw: dict, key: str, path: str, pattern=None, what="") -> tuple[str, ...]:
        v = raw.get(key)
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            self.err(path, v, "a list of strings")
            return ()
        out = []
        for i, item in enumerate(v):
            if not isinstance(item, str) or (pattern is not None and not pattern.match(item)):
                self.err(f"{path}[{i}]", item, what or "a string")
            else:
                out.append(item)
        return tuple(out)

    def labels(self, raw: dict, key: str, path: str) -> tuple[tuple[str, str], ...]:
        v = raw.get(key)
        if v is None:
            return ()
        if not isinstance(v, dict):
            self.err(path, v, "a mapping of label name to value")
            return ()
        out = []
        for k, val in v.items():
            if not isinstance(val, str | int | bool) or not re.match(
                r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", str(k)
            ):
                self.err(f"{path}.{k}", val, "a Kubernetes label name with a string value")
                continue
            out.append((str(k), str(val).lower() if isinstance(val, bool) else str(val)))
        return tuple(sorted(out))

    def taints(self, raw: dict, key: str, path: str) -> tuple[Taint, ...]:
        v = raw.get(key)
        if v is None:
            return ()
        if not isinstance(v, list):
            self.err(path, v, "a list of {key, value?, effect}")
            return ()
        out = []
        for i, t in enumerate(v):
            p = f"{path}[{i}]"
            if not isinstance(t, dict) or not isinstance(t.get("key"), str):
                self.err(p, t, "a mapping with a string `key`, optional `value` and `effect`")
                continue
            self.mapping(t, p, {"key", "value", "effect"})
            effect = t.get("effect", "NoSchedule")
            if effect not in TAINT_EFFECTS:
                self.err(f"{p}.effect", effect, f"one of {list(TAINT_EFFECTS)}")
                continue
            value = t.get("value")
            out.append(Taint(t["key"], effect, None if value is None else str(value)))
        return tuple(out)


def _parse_network(p: _P, raw: Any) -> NetworkConfig:
    path = "network"
    raw = p.mapping(
        raw,
        path,
        {"vpcId", "privateSubnetIds", "cidr", "availabilityZones", "natGateways", "vpcEndpoints"},
    )
    vpc_id = p.string(
        raw, "vpcId", f"{path}.vpcId", None, re.compile(r"^vpc-[0-9a-f]+$"), "a VPC id (vpc-...)"
    )
    subnets = p.str_list(
        raw,
        "privateSubnetIds",
        f"{path}.privateSubnetIds",
        re.compile(r"^subnet-[0-9a-f]+$"),
        "a subnet id (subnet-...)",
    )
    if vpc_id and len(subnets) < 2 and "privateSubnetIds" not in str(p.errors):
        p.err(
            f"{path}.privateSubnetIds",
            list(subnets),
            "at least 2 private subnets in different AZs when vpcId is set (EKS requires two AZs)",
        )
    if subnets and not vpc_id:
        p.err(f"{path}.vpcId", vpc_id, "the VPC id that holds privateSubnetIds")
    cidr = p.string(raw, "cidr", f"{path}.cidr", "10.0.0.0/16")
    try:
        net = ipaddress.ip_network(cidr)
        if net.version != 4 or not 16 <= net.prefixlen <= 20:
            raise ValueError
    except ValueError:
        p.err(f"{path}.cidr", cidr, "an IPv4 CIDR between /16 and /20")
        cidr = "10.0.0.0/16"
    azs = p.integer(raw, "availabilityZones", f"{path}.availabilityZones", 3, 2, 4)
    nat = raw.get("natGateways", "single")
    if nat not in NAT_MODES:
        p.err(f"{path}.natGateways", nat, f"one of {list(NAT_MODES)}")
        nat = "single"
    endpoints = p.boolean(raw, "vpcEndpoints", f"{path}.vpcEndpoints", True)
    return NetworkConfig(vpc_id, subnets, cidr, azs, nat, bool(endpoints))


def _parse_endpoint(p: _P, raw: Any) -> EndpointConfig:
    raw = p.mapping(raw, "endpoint", {"publicAccessCidrs"})
    cidrs = []
    for i, c in enumerate(p.str_list(raw, "publicAccessCidrs", "endpoint.publicAccessCidrs")):
        path = f"endpoint.publicAccessCidrs[{i}]"
        try:
            net = ipaddress.ip_network(c)
        except ValueError:
            p.err(path, c, "an IPv4 CIDR such as 203.0.113.0/24")
            continue
        if net.prefixlen == 0:
            p.err(
                path,
                c,
                "a specific allow-listed CIDR (0.0.0.0/0 would expose the API server to the internet)",
            )
            continue
        cidrs.append(str(net))
    return EndpointConfig(tuple(cidrs))


def _parse_system(p: _P, raw: Any) -> SystemNodeGroupConfig:
    path = "systemNodeGroup"
    raw = p.mapping(
        raw, path, {"instanceType", "minSize", "desiredSize", "maxSize", "rootVolumeGiB"}
    )
    it = p.string(
        raw,
        "instanceType",
        f"{path}.instanceType",
        "m6i.large",
        INSTANCE_TYPE,
        "an EC2 instance type such as m6i.large",
    )
    lo = p.integer(raw, "minSize", f"{path}.minSize", 2, 1, 20)
    hi = p.integer(raw, "maxSize", f"{path}.maxSize", max(3, lo), 1, 20)
    want = p.integer(raw, "desiredSize", f"{path}.desiredSize", lo, 1, 20)
    if not lo <= want <= hi:
        p.err(f"{path}.desiredSize", want, f"a size between minSize ({lo}) and maxSize ({hi})")
    disk = p.integer(raw, "rootVolumeGiB", f"{path}.rootVolumeGiB", 50, 20, 16384)
    return SystemNodeGroupConfig(it, lo, want, hi, disk)


def _instance_types(p: _P, raw: dict, path: str) -> tuple[str, ...]:
    """`instanceTypes` of a node group or pool: a non-empty list of EC2 instance type names."""
    types = p.str_list(
        raw,
        "instanceTypes",
        f"{path}.instanceTypes",
        INSTANCE_TYPE,
        "an EC2 instance type such as g5.xlarge",
    )
    item_errors = any(e.startswith(f"{NS}:{path}.instanceTypes[") for e in p.errors)
    if not types and not item_errors:
        # Missing, null or []: a group or pool needs at least one type to launch anything.
        p.err(
            f"{path}.instanceTypes",
            raw.get("instanceTypes"),
            "a non-empty list of EC2 instance types",
        )
    return types


def _unique_name(p: _P, raw: dict, path: str, seen: set[str]) -> str | None:
    name = raw.get("name")
    if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 40:
        p.err(
            f"{path}.name",
            name,
            "a DNS label of at most 40 characters (lowercase letters, digits, '-')",
        )
        return None
    if name in seen:
        p.err(f"{path}.name", name, "a name not used by another node group or node pool")
        return None
    seen.add(name)
    return name


def _parse_acceptance(p: _P, raw: Any, path: str) -> AcceptanceTestConfig:
    if raw is None:
        return AcceptanceTestConfig()
    if isinstance(raw, bool):
        return AcceptanceTestConfig(enabled=raw)
    raw = p.mapping(
        raw, path, {"enabled", "dcgmLevel", "nodes", "allReduce", "minBusBandwidthGBps"}
    )
    enabled = bool(p.boolean(raw, "enabled", f"{path}.enabled", True))
    level = p.integer(raw, "dcgmLevel", f"{path}.dcgmLevel", 2, 1, 4)
    nodes = p.integer(raw, "nodes", f"{path}.nodes", 2, 1, 64)
    all_reduce = p.boolean(raw, "allReduce", f"{path}.allReduce", None)
    floor = raw.get("minBusBandwidthGBps")
    if floor is not None:
        if isinstance(floor, bool) or not isinstance(floor, int | float) or floor <= 0:
            p.err(f"{path}.minBusBandwidthGBps", floor, "a number of GB/s > 0")
            floor = None
        else:
            floor = float(floor)
    if all_reduce and nodes < 2:
        p.err(f"{path}.nodes", nodes, "at least 2 when allReduce is on (it runs across nodes)")
    return AcceptanceTestConfig(enabled, level, nodes, all_reduce, floor)


def _parse_node_health(p: _P, raw: Any) -> NodeHealthConfig:
    raw = p.mapping(raw, "nodeHealth", {"monitoringAgent", "autoRepair"})
    return NodeHealthConfig(
        monitoring_agent=bool(
            p.boolean(raw, "monitoringAgent", "nodeHealth.monitoringAgent", True)
        ),
        auto_repair=bool(p.boolean(raw, "autoRepair", "nodeHealth.autoRepair", True)),
    )


_PTC_SECRET = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:ecr-pullthroughcache/[\w/+=.@-]+$"
)
_IMAGE_REF = re.compile(r"^[a-z0-9]+([._/:-][a-zA-Z0-9_.-]+)*(@sha256:[0-9a-f]{64})?$")


def _parse_images(p: _P, raw: Any) -> ImagesConfig:
    keys = {
        "pullThroughCache",
        "dockerHubCredentialArn",
        "githubCredentialArn",
        "runtime",
        "runtimeImage",
        "runtimeEfaImage",
    }
    raw = p.mapping(raw, "images", keys)
    secret = "the ARN of a Secrets Manager secret named ecr-pullthroughcache/<name> (ECR's rule)"
    ref = "a pinned image reference (registry/repository:tag or @sha256:<digest>)"
    return ImagesConfig(
        pull_through_cache=bool(
            p.boolean(raw, "pullThroughCache", "images.pullThroughCache", True)
        ),
        docker_hub_credential_arn=p.string(
            raw,
            "dockerHubCredentialArn",
            "images.dockerHubCredentialArn",
            None,
            _PTC_SECRET,
            secret,
        ),
        github_credential_arn=p.string(
            raw, "githubCredentialArn", "images.githubCredentialArn", None, _PTC_SECRET, secret
        ),
        runtime=bool(p.boolean(raw, "runtime", "images.runtime", True)),
        runtime_image=p.string(raw, "runtimeImage", "images.runtimeImage", None, _IMAGE_REF, ref),
        runtime_efa_image=p.string(
            raw, "runtimeEfaImage", "images.runtimeEfaImage", None, _IMAGE_REF, ref
        ),
    )


def _parse_node_group(p: _P, raw: Any, path: str, seen: set[str]) -> NodeGroupConfig | None:
    known = {
        "name",
        "instanceTypes",
        "minSize",
        "desiredSize",
        "maxSize",
        "efa",
        "capacityType",
        "rootVolumeGiB",
        "capacityReservationId",
        "labels",
        "taints",
        "subnetId",
        "acceptanceTest",
    }
    if not isinstance(raw, dict):
        p.err(path, raw, "a mapping describing a node group")
        return None
    p.mapping(raw, path, known)
    name = _unique_name(p, raw, path, seen)
    types = _instance_types(p, raw, path)
    lo = p.integer(raw, "minSize", f"{path}.minSize", 0, 0, 1000)
    hi = p.integer(raw, "maxSize", f"{path}.maxSize", max(2, lo), 1, 1000)
    want = p.integer(raw, "desiredSize", f"{path}.desiredSize", lo, 0, 1000)
    if lo > hi:
        p.err(f"{path}.minSize", lo, f"at most maxSize ({hi})")
    if not lo <= want <= hi:
        p.err(f"{path}.desiredSize", want, f"a size between minSize ({lo}) and maxSize ({hi})")
    efa = bool(p.boolean(raw, "efa", f"{path}.efa", False))
    cap = raw.get("capacityType", "ON_DEMAND")
    if cap not in ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK"):
        p.err(f"{path}.capacityType", cap, "one of ['ON_DEMAND', 'SPOT', 'CAPACITY_BLOCK']")
        cap = "ON_DEMAND"
    if efa and len(types) > 1:
        p.err(
            f"{path}.instanceTypes",
            list(types),
            "exactly one instance type for an EFA node group (interfaces are laid out per type)",
        )
    disk = p.integer(raw, "rootVolumeGiB", f"{path}.rootVolumeGiB", 200, 20, 16384)
    cr = p.string(
        raw,
        "capacityReservationId",
        f"{path}.capacityReservationId",
        None,
        re.compile(r"^cr-[0-9a-f]+$"),
        "a capacity reservation id (cr-...)",
    )
    if cap == "CAPACITY_BLOCK" and not cr:
        p.err(
            f"{path}.capacityReservationId",
            cr,
            "the capacity block reservation id (required with capacityType CAPACITY_BLOCK)",
        )
    subnet = p.string(
        raw,
        "subnetId",
        f"{path}.subnetId",
        None,
        re.compile(r"^subnet-[0-9a-f]+$"),
        "a subnet id (subnet-...)",
    )
    labels = p.labels(raw, "labels", f"{path}.labels")
    taints = p.taints(raw, "taints", f"{path}.taints")
    acceptance = _parse_acceptance(p, raw.get("acceptanceTest"), f"{path}.acceptanceTest")
    if name is None:
        return None
    return NodeGroupConfig(
        name=name,
        instance_types=types,
        min_size=lo,
        desired_size=want,
        max_size=hi,
        efa=efa,
        capacity_type=cap,
        root_volume_gib=disk,
        capacity_reservation_id=cr,
        labels=labels,
        taints=taints,
        subnet_id=subnet,
        acceptance=acceptance,
    )


def _parse_limits(p: _P, raw: Any, path: str) -> PoolLimits:
    raw = p.mapping(raw, path, {"cpu", "memory", "gpus"})
    vals: dict[str, Any] = {}
    for key in ("cpu", "memory"):
        v = raw.get(key)
        if v is None:
            continue
        if not QUANTITY.match(str(v)):
            p.err(f"{path}.{key}", v, "a Kubernetes quantity such as 64 or 256Gi")
            continue
        vals[key] = str(v)
    if raw.get("gpus") is not None:
        vals["gpus"] = p.integer(raw, "gpus", f"{path}.gpus", 0, 0, 100000)
    return PoolLimits(**vals)


def _parse_node_pool(p: _P, raw: Any, path: str, seen: set[str]) -> NodePoolConfig | None:
    known = {
        "name",
        "instanceTypes",
        "capacityTypes",
        "gpu",
        "efa",
        "taints",
        "labels",
        "limits",
        "consolidateAfter",
        "rootVolumeGiB",
        "weight",
        "acceptanceTest",
    }
    if not isinstance(raw, dict):
        p.err(path, raw, "a mapping describing a Karpenter node pool")
        return None
    p.mapping(raw, path, known)
    name = _unique_name(p, raw, path, seen)
    types = _instance_types(p, raw, path)
    caps = p.str_list(raw, "capacityTypes", f"{path}.capacityTypes") or ("on-demand",)
    for i, c in enumerate(caps):
        if c not in CAPACITY_TYPES:
            p.err(f"{path}.capacityTypes[{i}]", c, f"one of {list(CAPACITY_TYPES)}")
    gpu = p.boolean(raw, "gpu", f"{path}.gpu", None)
    efa = bool(p.boolean(raw, "efa", f"{path}.efa", False))
    after = raw.get("consolidateAfter", "10m")
    if not isinstance(after, str) or not DURATION.match(after):
        p.err(f"{path}.consolidateAfter", after, "a duration such as 30s, 10m or 1h")
        after = "10m"
    disk = p.integer(raw, "rootVolumeGiB", f"{path}.rootVolumeGiB", 100, 20, 16384)
    weight = raw.get("weight")
    if weight is not None:
        weight = p.integer(raw, "weight", f"{path}.weight", 0, 1, 100)
    labels = p.labels(raw, "labels", f"{path}.labels")
    taints = p.taints(raw, "taints", f"{path}.taints")
    limits = _parse_limits(p, raw.get("limits"), f"{path}.limits")
    acceptance = _parse_acceptance(p, raw.get("acceptanceTest"), f"{path}.acceptanceTest")
    if name is None:
        return None
    return NodePoolConfig(
        name=name,
        instance_types=types,
        capacity_types=tuple(caps),
        gpu=gpu,
        efa=efa,
        taints=taints,
        labels=labels,
        limits=limits,
        consolidate_after=after,
        root_volume_gib=disk,
        weight=weight,
        acceptance=acceptance,
    )


def _list(p: _P, raw: Any, path: str) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        p.err(path, raw, "a list")
        return []
    return raw


TOP_KEYS = {
    "cluster",
    "network",
    "endpoint",
    "admins",
    "systemNodeGroup",
    "nodeGroups",
    "nodePools",
    "karpenter",
    "nodeHealth",
    "tags",
    "images",
    # owned by other areas; parsed there (services_config / jobs)
    "teams",
    "jobs",
}


def parse_config(
    raw: dict[str, Any],
    *,
    extra_keys: set[str] | frozenset = frozenset(),
    lookups: bool = False,
    region: str | None = None,
) -> PlatformConfig:
    """Parse the `trainforge:` config (bare camelCase keys, values already decoded from JSON).

    Raises ConfigError listing every problem. `extra_keys` are tolerated (other areas' keys).
    With `lookups`, the instance types of every node group, pool and the system node group are
    also looked up (`aws.ec2.get_instance_type`: needs the Pulumi runtime or its mocks), so
    that type problems come in the same report as the parse problems, not on a second run.
    `region` (the stack's `aws:region`) is checked against the regions AWS has.
    """
    errors: list[str] = []
    p = _P(errors)
    if not isinstance(raw, dict):
        raise ConfigError(
            [f"{NS}: got {raw!r:.60}; expected a mapping of trainforge:<key> settings"]
        )
    raw = dict(raw or {})
    if region is not None:
        _check_region(errors, region)
    known = TOP_KEYS | set(extra_keys) | set(SERVICE_KEYS)
    for k in raw:
        if k not in known:
            p.err(k, raw[k], f"one of the keys {sorted(known)}")
    cluster = raw.get("cluster")
    if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
        p.err(
            "cluster",
            cluster,
            "a cluster name: a letter then letters, digits, '-' or '_' (at most 100)",
        )
        cluster = "invalid"
    network = _parse_network(p, raw.get("network"))
    endpoint = _parse_endpoint(p, raw.get("endpoint"))
    admins = p.str_list(
        raw,
        "admins",
        "admins",
        IAM_PRINCIPAL,
        "an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)",
    )
    system = _parse_system(p, raw.get("systemNodeGroup"))
    karpenter_raw = p.mapping(raw.get("karpenter"), "karpenter", {"enabled", "namespace"})
    karpenter = KarpenterConfig(
        enabled=bool(p.boolean(karpenter_raw, "enabled", "karpenter.enabled", True)),
        namespace=p.string(
            karpenter_raw,
            "namespace",
            "karpenter.namespace",
            "kube-system",
            DNS_LABEL,
            "a namespace name (DNS label)",
        ),
    )
    node_health = _parse_node_health(p, raw.get("nodeHealth"))
    images = _parse_images(p, raw.get("images"))
    seen: set[str] = set()
    groups = [
        _parse_node_group(p, g, f"nodeGroups[{i}]", seen)
        for i, g in enumerate(_list(p, raw.get("nodeGroups"), "nodeGroups"))
    ]
    pools = [
        _parse_node_pool(p, g, f"nodePools[{i}]", seen)
        for i, g in enumerate(_list(p, raw.get("nodePools"), "nodePools"))
    ]
    if pools and not karpenter.enabled:
        p.err("karpenter.enabled", False, "true while nodePools are declared (Karpenter runs them)")
    tags = (
        p.labels(raw, "tags", "tags")
        if isinstance(raw.get("tags"), dict) or raw.get("tags") is None
        else ()
    )
    if raw.get("tags") is not None and not isinstance(raw.get("tags"), dict):
        p.err("tags", raw.get("tags"), "a mapping of tag name to value")
    # the whole `trainforge:` mapping: services and teams live there
    services = parse_services_config(raw, errors)
    for team in getattr(services, "teams", ()) or ():
        for arn in sorted(set(team.access.principals) & set(admins)):
            errors.append(
                f"trainforge:teams: principal {arn!r} of team {team.name!r} is also in "
                "trainforge:admins; expected it in one of them (EKS has one access entry per "
                "principal, and admins already reach every namespace)"
            )
    if lookups:
        _lookup_instance_types(errors, system, groups, pools)
    if errors:
        raise ConfigError(errors)
    return PlatformConfig(
        cluster=cluster,
        network=network,
        endpoint=endpoint,
        admins=admins,
        system_node_group=system,
        node_groups=tuple(g for g in groups if g),
        node_pools=tuple(x for x in pools if x),
        karpenter=karpenter,
        node_health=node_health,
        tags=tags,
        images=images,
        services=services,
    )


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region of every AWS partition (botocore's bundled endpoint data, offline)."""
    import botocore.session  # noqa: PLC0415 - only the program needs it

    session = botocore.session.get_session()
    return frozenset(
        r
        for partition in session.get_available_partitions()
        for r in session.get_available_regions("ec2", partition)
    )


def _check_region(errors: list[str], region: Any) -> None:
    """`aws:region` must be a region AWS has."""
    known = aws_regions()
    if not isinstance(region, str) or region not in known:
        examples = ", ".join(sorted(r for r in known if r.startswith("us-"))[:4])
        errors.append(
            f"aws:region: {region!r} is not valid; expected an AWS region such as {examples}"
        )


def _lookup_instance_types(errors: list[str], system, groups, pools) -> None:
    """Type problems of every group and pool that parsed, and of the system node group."""
    from trainforge.platform.instance_types import (  # noqa: PLC0415 - imports pulumi_aws
        instance_type_facts,
        resolve_pool,
    )

    for i, g in enumerate(groups):
        if g is not None and g.instance_types:
            resolve_pool(g, f"{NS}:nodeGroups[{i}]", errors, node_group=True)
    for i, pool in enumerate(pools):
        if pool is not None and pool.instance_types:
            resolve_pool(pool, f"{NS}:nodePools[{i}]", errors)
    try:
        instance_type_facts(system.instance_type)
    except LookupError:
        errors.append(
            f"{NS}:systemNodeGroup.instanceType: {system.instance_type!r} is not valid; "
            "expected an EC2 instance type offered in this region"
        )


def resolve_all(config: PlatformConfig) -> dict[str, Any]:
    """Facts for every node group and pool; raises ConfigError listing every mismatch."""
    from trainforge.platform.instance_types import resolve_pool  # noqa: PLC0415 - imports pulumi_aws

    errors: list[str] = []
    out: dict[str, Any] = {}
    for i, g in enumerate(config.node_groups):
        f = resolve_pool(g, f"{NS}:nodeGroups[{i}]", errors, node_group=True)
        if f:
            out[g.name] = f
    for i, p in enumerate(config.node_pools):
        f = resolve_pool(p, f"{NS}:nodePools[{i}]", errors)
        if f:
            out[p.name] = f
    if errors:
        raise ConfigError(errors)
    return out


def decode_value(value: Any) -> Any:
    """A config value as the engine hands it over (JSON for structures), decoded."""
    return _decode(value)


def _decode(value: Any) -> Any:
    import json  # noqa: PLC0415

    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def load_config(config: pulumi.Config | None = None) -> PlatformConfig:
    """Read every `trainforge:` key of the current stack and parse it (see parse_config)."""
    from pulumi.runtime.config import CONFIG  # noqa: PLC0415 - the engine's config map

    config = config or pulumi.Config(NS)
    prefix = f"{config.name}:"
    raw: dict[str, Any] = {}
    for full in list(CONFIG.get().keys()):
        if full.startswith(prefix):
            key = full[len(prefix) :]
            raw[key] = _decode(config.get(key))
    return parse_config(raw, lookups=True, region=pulumi.Config("aws").get("region"))
