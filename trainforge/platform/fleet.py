"""Fleet: the Pulumi side of a MultiKueue fleet (`trainforge:fleet`, docs/fleet.md).

Why: a region can be out of the GPUs a job needs while another has them. Kueue's MultiKueue
(beta and on by default since Kueue v0.9: pkg/features/kube_features.go at release-0.19)
lets a manager cluster's Kueue dispatch a job to worker clusters: the job is created on the
manager, Kueue copies it to every worker that may admit it and keeps the copy that is
admitted first (kubernetes-sigs/kueue release-0.19 site/content/en/docs/concepts/multikueue.md).
A fleet here is ordinary trainforge stacks: each worker stack is a regional cluster, the
manager stack names them and reads what it needs with Pulumi StackReferences.

A worker (role: worker) declares, for its manager's Kueue, what upstream's
`create-multikueue-kubeconfig.sh` creates by hand (site/static/examples/multikueue at
release-0.19): a ServiceAccount `multikueue-sa` in `kueue-system`, a ClusterRole with
upstream's rules for the job kinds this cluster runs (`worker_rules`: the script's list, and
for TrainJob the rule of test/util/multikueue.go, which the script lacks; nothing more), its
binding, and a long-lived token Secret. It exports `fleetKubeconfig` (a secret: the API
endpoint, its CA and that token; no exec plugin, which MultiKueue refuses) and `fleetRegion`.
EKS authenticates a ServiceAccount token itself (the API server's service-account
authenticator); an access entry is only for IAM principals, so the token needs none, and
Kubernetes RBAC (the ClusterRole) is what authorizes it. The worker's public endpoint
allow-list also admits its manager's `fleetEgressCidrs` (endpoint.py, cluster.py), its team
roles are granted their prefix of the manager's checkpoint bucket (`fleetCheckpoints`), and it
declares the manager's jobs' code ConfigMaps (`fleetJobConfigMaps`): MultiKueue copies the job
object alone, which names both.

A manager (role: manager) exports `fleetEgressCidrs` (its NAT gateways' addresses, /32) and
declares, per worker whose stack exports a kubeconfig, a Secret `<name>-kubeconfig` (key
`kubeconfig`) in `kueue-system` and a MultiKueueCluster `<name>`; one MultiKueueConfig and
one AdmissionCheck `trainforge-fleet` (controllerName `kueue.x-k8s.io/multikueue`), which
every team ClusterQueue lists (kueue.py), and its jobs carry `managedBy:
kueue.x-k8s.io/multikueue` (jobs/backends.py) so the manager's controllers leave them to
MultiKueue.

Kueue's configuration needs nothing more on either side: the MultiKueue gate is on by
default (beta since v0.9), and the dispatch of each of our job kinds is the MultiKueue adapter
of its integration (pkg/controller/jobs/{job,kubeflow/jobs/pytorchjob,trainjob}/
*_multikueue_adapter.go at release-0.19), active because kueue.py's `integrations.frameworks`
always lists all three (batch/job, kubeflow.org/pytorchjob, trainer.kubeflow.org/trainjob).
Kueue's webhook would default a queued job's managedBy on a manager itself
(jobframework/defaults.go ApplyDefaultForManagedBy), but only for a job with a queue label;
the emitters set it explicitly, and MultiKueue dispatches only a job whose managedBy is its own
(admissionchecks/multikueue/workload.go, IsJobManagedByKueue). The controllers that must then
leave the manager's copy alone: the Job controller (spec.managedBy, KEP-4368, GA in
Kubernetes 1.35), training-operator v1.9.4 (skips a PyTorchJob whose runPolicy.managedBy is
not its own: pkg/controller.v1/pytorch/pytorchjob_controller.go). Kubeflow Trainer v2.2.1
accepts `spec.managedBy: kueue.x-k8s.io/multikueue` (a CEL enum, immutable:
pkg/apis/trainer/v1alpha1/trainjob_types.go) but its TrainJob controller does not read it
(pkg/controller/trainjob_controller.go Reconcile at v2.2.1; the check came in v2.3.0,
kubeflow/trainer#3681): the manager's Trainer would build a dispatched TrainJob's JobSet on the
manager. So a manager with the trainjob backend is refused (trainforge.stack.fleet
trainjob_refusal) while the pinned Trainer is older than v2.3.0.

Bootstrap: a worker stack not yet `up`'d exports no kubeconfig; the manager then skips it
with a warning naming the order to run (`pulumi up` the worker, then the manager again). The
ClusterQueues list the check even then: with no worker the check is inactive and jobs wait,
they never run on the manager (which has no GPU capacity of its own).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.jobs import backends
from trainforge.platform.checkpoint_bucket import team_policy
from trainforge.stack.fleet import KEY, MULTIKUEUE_CONTROLLER, FleetConfig

NAMESPACE = "kueue-system"  # where Kueue reads MultiKueueCluster Secrets (its own namespace)
SERVICE_ACCOUNT = "multikueue-sa"  # the names upstream's script uses
CLUSTER_ROLE = f"{SERVICE_ACCOUNT}-role"
BINDING = f"{SERVICE_ACCOUNT}-crb"
TOKEN_SECRET = SERVICE_ACCOUNT
CHECK = "trainforge-fleet"  # the AdmissionCheck and the MultiKueueConfig
SECRET_KEY = "kubeconfig"  # kueue v1beta2 MultiKueueConfigSecretKey
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version of the vendored CRDs
KUBECONFIG_OUTPUT = "fleetKubeconfig"
REGION_OUTPUT = "fleetRegion"
EGRESS_OUTPUT = "fleetEgressCidrs"
# manager -> workers: its checkpoint bucket (bucketName, bucketArn, kmsKeyArn, region)
CHECKPOINTS_OUTPUT = "fleetCheckpoints"
# manager -> workers: the ConfigMaps its jobs' pods read (their shipped code): MultiKueue copies
# the job object alone, so each worker declares them from this output
CONFIGMAPS_OUTPUT = "fleetJobConfigMaps"

# The verbs upstream's script grants on a job kind the manager dispatches, and on its status.
JOB_VERBS = ("create", "delete", "get", "list", "watch")
# Kueue's own objects on the worker (the script's rules, verbatim).
KUEUE_RULES: tuple[dict[str, Any], ...] = (
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"],
    },
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["clusterqueues", "localqueues"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads/status"],
        "verbs": ["get", "patch", "update"],
    },
)
# backend -> the (group, plural) of the object MultiKueue copies to the worker
BACKEND_KINDS = backends.RESOURCES


def worker_rules(backends: Iterable[str]) -> list[dict[str, Any]]:
    """The ClusterRole rules the manager's identity needs on a worker that runs `backends`:
    Kueue's, then per job kind upstream's pair (the kind, its status), in BACKEND_KINDS order."""
    wanted = set(backends)
    rules = [dict(r, verbs=list(r["verbs"])) for r in KUEUE_RULES]
    for backend, (group, plural) in BACKEND_KINDS.items():
        if backend in wanted:
            rules.append({"apiGroups": [group], "resources": [plural], "verbs": list(JOB_VERBS)})
            rules.append(
                {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get"]}
            )
    return rules


def worker_objects(backends: Iterable[str]) -> list[dict[str, Any]]:
    """The worker's objects for its manager: ServiceAccount, ClusterRole, binding, token."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": CLUSTER_ROLE},
            "rules": worker_rules(backends),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": BINDING},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": CLUSTER_ROLE,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
            ],
        },
        {
            # a long-lived token (Kubernetes' token controller fills `data.token`); the
            # manager's kubeconfig carries it
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": TOKEN_SECRET,
                "namespace": NAMESPACE,
                "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT},
            },
        },
    ]


def token_kubeconfig(cluster: str, server: str, ca_data: str, token: str) -> str:
    """A kubeconfig with a bearer token (what upstream's script writes): no exec plugin."""
    user = f"{cluster}-{SERVICE_ACCOUNT}"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster,
                    "cluster": {"server": server, "certificate-authority-data": ca_data},
                }
            ],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
            "current-context": cluster,
            "users": [{"name": user, "user": {"token": token}}],
        },
        indent=2,
    )


def _endpoint_and_ca(cluster_kubeconfig: Any) -> tuple[str, str]:
    """The API endpoint and CA of the cluster's own kubeconfig (pulumi-eks `kubeconfigJson`)."""
    doc = (
        json.loads(cluster_kubeconfig)
        if isinstance(cluster_kubeconfig, str)
        else cluster_kubeconfig
    )
    entry = doc["clusters"][0]["cluster"]
    return entry["server"], entry["certificate-authority-data"]


def manager_objects(workers: Iterable[str]) -> list[dict[str, Any]]:
    """The manager's MultiKueue objects for the workers it can reach (their Secrets aside):
    a MultiKueueCluster each, the MultiKueueConfig listing them (none: no config, which
    needs at least one cluster) and the AdmissionCheck the ClusterQueues list."""
    names = list(workers)
    out: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE_API,
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Secret", "location": secret_name(name)}
                }
            },
        }
        for name in names
    ]
    if names:
        out.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "MultiKueueConfig",
                "metadata": {"name": CHECK},
                "spec": {"clusters": names},
            }
        )
    out.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": CHECK,
                },
            },
        }
    )
    return out


def secret_name(worker: str) -> str:
    return f"{worker}-kubeconfig"


def admission_checks(fleet: FleetConfig | None) -> tuple[str, ...]:
    """The admission checks a stack's team ClusterQueues list: the fleet's on a manager."""
    return (CHECK,) if fleet is not None and fleet.manager_role else ()


def read_output(ref: pulumi.StackReference, name: str) -> Any:
    """The value of another stack's output `name` now, at program time (None: the stack has
    not exported it yet). What to declare depends on it (a worker not yet `up`'d is skipped),
    so it is awaited here rather than carried as an Output."""
    from pulumi.runtime.sync_await import _sync_await  # noqa: PLC0415 - the engine's helper

    try:
        details = _sync_await(ref.get_output_details(name))
    except AttributeError:  # a reference answered without any outputs (nothing exported)
        return None
    value = details.secret_value if details.secret_value is not None else details.value
    return value


@dataclass(frozen=True)
class ManagerReads:
    """What a worker reads of its manager's outputs (one StackReference): its egress CIDRs
    and its checkpoint bucket (None: not exported yet, or the manager has no bucket)."""

    cidrs: tuple[str, ...] = ()
    checkpoints: dict[str, str] | None = None
    config_maps: tuple[dict[str, Any], ...] = ()


def _checkpoints_value(value: Any) -> dict[str, str] | None:
    """The manager's `fleetCheckpoints` when it names a bucket, its key and its region."""
    if not isinstance(value, dict):
        return None
    keys = ("bucketName", "bucketArn", "kmsKeyArn", "region")
    if not all(isinstance(value.get(k), str) and value.get(k) for k in keys):
        return None
    return {k: str(value[k]) for k in keys}


def read_manager(fleet: FleetConfig, parent: pulumi.Resource | None) -> ManagerReads:
    """A worker's reads of its manager, before the cluster is declared: the egress CIDRs join
    the endpoint's allow-list, the checkpoint bucket is granted to the team roles (Fleet).
    Either missing: a warning naming the order to run, and nothing extra."""
    ref = pulumi.StackReference(
        f"fleet-manager-{fleet.manager}".replace("/", "-"),
        stack_name=fleet.manager,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    cidrs = read_output(ref, EGRESS_OUTPUT)
    if not cidrs:
        pulumi.log.warn(
            f"{KEY}.manager: stack {fleet.manager!r} exports no {EGRESS_OUTPUT} yet: this "
            "worker's API endpoint admits no manager address; `pulumi up` the manager stack, "
            "then this worker again"
        )
    checkpoints = _checkpoints_value(read_output(ref, CHECKPOINTS_OUTPUT))
    if checkpoints is None:
        pulumi.log.warn(
            f"{KEY}.manager: stack {fleet.manager!r} exports no {CHECKPOINTS_OUTPUT} yet "
            "(not `up`, or no trainforge:checkpoints bucket): this worker's team roles are "
            "granted nothing on the manager's checkpoint bucket, so a dispatched job that "
            "mirrors checkpoints there cannot save or resume here; `pulumi up` the manager "
            "stack, then this worker again"
        )
    maps = read_output(ref, CONFIGMAPS_OUTPUT)
    return ManagerReads(
        tuple(str(c) for c in cidrs or ()),
        checkpoints,
        tuple(_config_map(m) for m in maps or () if _config_map(m) is not None),
    )


def _config_map(value: Any) -> dict[str, Any] | None:
    """One entry of the manager's `fleetJobConfigMaps` (name, namespace, labels, data,
    binaryData), or None when it is not one."""
    meta = value.get("metadata") if isinstance(value, dict) else None
    if not isinstance(meta, dict) or not all(
        isinstance(meta.get(k), str) and meta.get(k) for k in ("name", "namespace")
    ):
        return None
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels") if meta.get(k)},
        "data": dict(value.get("data") or {}),
        "binaryData": dict(value.get("binaryData") or {}),
    }


def job_config_maps(jobs: Iterable[Any]) -> list[dict[str, Any]]:
    """The ConfigMaps a manager's jobs ship (their code: `codeSource: configmap`), as the
    workers declare them (`fleetJobConfigMaps`): immutable and named by their content's hash,
    so a worker's copy is the manager's."""
    out = []
    for job in jobs:
        emitted = getattr(job, "manifests", None)
        for cm in (getattr(emitted, "configmap", None), getattr(emitted, "user_configmap", None)):
            if cm is not None:
                meta = cm["metadata"]
                out.append(
                    {
                        "metadata": {
                            k: meta[k] for k in ("name", "namespace", "labels") if meta.get(k)
                        },
                        "data": dict(cm.get("data") or {}),
                        "binaryData": dict(cm.get("binaryData") or {}),
                    }
                )
    return out


@dataclass
class FleetArgs:
    fleet: FleetConfig
    cluster: str
    k8s_provider: k8s.Provider
    # worker: the cluster's own kubeconfig (its endpoint and CA), its region, its backends
    cluster_kubeconfig: pulumi.Input[str] | None = None
    region: str | None = None
    backends: tuple[str, ...] = ()
    # worker: the manager's checkpoint bucket (read_manager) and this stack's team roles
    # (team -> the role its training ServiceAccount runs as), granted their prefix there
    manager_checkpoints: dict[str, str] | None = None
    # worker: the manager's jobs' ConfigMaps (read_manager), declared here too, once the team
    # namespaces (`namespaces_ready`) exist
    manager_config_maps: tuple[dict[str, Any], ...] = ()
    namespaces_ready: list[pulumi.Resource] = field(default_factory=list)
    team_roles: dict[str, Any] = field(default_factory=dict)
    # manager: the NAT gateways' public IPs (None: a VPC this stack does not create)
    egress_ips: list[pulumi.Input[str]] | None = None
    # manager: its checkpoint bucket for the workers (bucketName, bucketArn, kmsKeyArn,
    # region); None: no bucket
    checkpoints: dict[str, pulumi.Input[str]] | None = None
    # what the manager's objects wait for (the Kueue release: its CRDs and webhooks)
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class Fleet(pulumi.ComponentResource):
    """A stack's part of a MultiKueue fleet: a worker's identity for its manager, or a
    manager's MultiKueue objects (see the module docstring)."""

    kubeconfig: pulumi.Output[str] | None
    """worker: the kubeconfig the manager uses (secret)."""
    region: pulumi.Output[str] | None
    """worker: its region."""
    egress_cidrs: pulumi.Output[list[str]] | None
    """manager: its egress addresses (/32)."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Fleet", name, None, opts)
        self.kubeconfig = self.region = self.egress_cidrs = None
        self.checkpoints: pulumi.Output[dict[str, str]] | None = None
        self.skipped: list[str] = []
        self.workers: list[str] = []
        child = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=list(args.depends_on)
        )
        if args.fleet.worker_role:
            self._worker(name, args, child)
            outputs = {"kubeconfig": self.kubeconfig, "region": self.region}
        else:
            self._manager(name, args, child)
            outputs = {"egressCidrs": self.egress_cidrs, "workers": self.workers}
        self.register_outputs(outputs)

    def outputs(self, jobs: Iterable[Any] = ()) -> dict[str, Any]:
        """The stack outputs the fleet's other stacks read (the fleet contract's names);
        `jobs`: a manager's declared jobs, whose ConfigMaps its workers declare too."""
        if self.egress_cidrs is not None:
            out: dict[str, Any] = {EGRESS_OUTPUT: self.egress_cidrs}
            if self.checkpoints is not None:
                out[CHECKPOINTS_OUTPUT] = self.checkpoints
            maps = job_config_maps(jobs)
            if maps:
                out[CONFIGMAPS_OUTPUT] = maps
            return out
        return {KUBECONFIG_OUTPUT: self.kubeconfig, REGION_OUTPUT: self.region}

    def _worker(self, name: str, args: FleetArgs, child: pulumi.ResourceOptions) -> None:
        sa, role, binding, token = worker_objects(args.backends)
        account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=sa["metadata"], opts=child)
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-role", metadata=role["metadata"], rules=role["rules"], opts=child
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[account, cluster_role])
            ),
        )
        # pulumi-kubernetes waits for the token controller to fill a service-account-token
        # Secret's data before it reports the Secret created (pulumi/pulumi-kubernetes#2048)
        secret = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=token["metadata"],
            type=token["type"],
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(depends_on=[account], additional_secret_outputs=["data"]),
            ),
        )

        def build(values: list[Any]) -> str | None:
            kubeconfig, data = values
            token_b64 = (data or {}).get("token")
            if not kubeconfig or not token_b64:
                return None
            server, ca = _endpoint_and_ca(kubeconfig)
            return token_kubeconfig(
                args.cluster, server, ca, base64.b64decode(token_b64).decode("ascii")
            )

        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args.cluster_kubeconfig, secret.data).apply(build)
        )
        self.region = pulumi.Output.from_input(args.region or "")
        self._grant_manager_bucket(name, args)
        self._manager_config_maps(name, args)

    def _manager_config_maps(self, name: str, args: FleetArgs) -> None:
        """The manager's jobs' ConfigMaps (their shipped code), as the manager declares them:
        a job MultiKueue dispatches here mounts them by name, and MultiKueue copies only the
        job object. Immutable, named by content hash: new code is a new ConfigMap, here after
        the manager's `up` and this worker's next one (docs/fleet.md, 'Bootstrap order')."""
        opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=list(args.namespaces_ready)
        )
        for cm in args.manager_config_maps:
            meta = cm["metadata"]
            k8s.core.v1.ConfigMap(
                f"{name}-cm-{meta['namespace']}-{meta['name']}",
                metadata=meta,
                data=cm["data"] or None,
                binary_data=cm["binaryData"] or None,
                immutable=True,
                opts=opts,
            )

    def _grant_manager_bucket(self, name: str, args: FleetArgs) -> None:
        """Each team role of this worker gets exactly what the manager's own role of that team
        gets on the manager's bucket (checkpoint_bucket.team_policy: its `<team>/` prefix, the
        bucket's key through S3 in the bucket's region): a job MultiKueue dispatches here
        mirrors its checkpoints to the bucket its object names, the manager's. Team A's role
        reaches team A's prefix only. Same account: the bucket policy restricts only the
        manager's own team roles (to its VPC endpoint) and the key has the default key policy
        (the account's IAM policies decide), so nothing on the manager admits these roles."""
        ckpt = args.manager_checkpoints
        if ckpt is None:
            return
        if not args.team_roles:
            pulumi.log.warn(
                f"{KEY}: this worker has no checkpoint bucket of its own (trainforge:"
                "checkpoints), so no team role to grant the manager's bucket "
                f"{ckpt['bucketName']!r}: a dispatched job cannot mirror its checkpoints here",
                self,
            )
            return
        for team, role in sorted(args.team_roles.items()):
            aws.iam.RolePolicy(
                f"{name}-{team}-manager-ckpt",
                role=role.id,
                policy=team_policy(ckpt["bucketArn"], ckpt["kmsKeyArn"], team, ckpt["region"]),
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _manager(self, name: str, args: FleetArgs, child: pulumi.ResourceOptions) -> None:
        if args.egress_ips is None:
            pulumi.log.warn(
                f"{KEY}: this manager's VPC is not created by its stack (trainforge:network."
                f"vpcId): {EGRESS_OUTPUT} is empty; list the VPC's NAT addresses in each "
                "worker's trainforge:endpoint.publicAccessCidrs"
            )
            self.egress_cidrs = pulumi.Output.from_input([])
        else:
            self.egress_cidrs = pulumi.Output.all(*args.egress_ips).apply(
                lambda ips: [f"{ip}/32" for ip in ips if ip]  # (an address not yet known: none)
            )
        if args.checkpoints is not None:
            self.checkpoints = pulumi.Output.all(**args.checkpoints).apply(dict)
        secrets: dict[str, k8s.core.v1.Secret] = {}
        for i, worker in enumerate(args.fleet.workers):
            ref = pulumi.StackReference(
                f"{name}-{worker.name}",
                stack_name=worker.stack,
                opts=pulumi.ResourceOptions(parent=self),
            )
            kubeconfig = read_output(ref, KUBECONFIG_OUTPUT)
            if not kubeconfig:
                pulumi.log.warn(
                    f"{KEY}.workers[{i}] ({worker.name}): stack {worker.stack!r} exports no "
                    f"{KUBECONFIG_OUTPUT} yet: MultiKueueCluster {worker.name!r} is skipped; "
                    f"`pulumi up` the worker stack {worker.stack!r}, then this manager again",
                    self,
                )
                self.skipped.append(worker.name)
                continue
            self.workers.append(worker.name)
            secrets[worker.name] = k8s.core.v1.Secret(
                f"{name}-{worker.name}-kubeconfig",
                metadata={"name": secret_name(worker.name), "namespace": NAMESPACE},
                type="Opaque",
                string_data={SECRET_KEY: pulumi.Output.secret(kubeconfig)},
                opts=child,
            )
        for doc in manager_objects(self.workers):
            kind, meta = doc["kind"], doc["metadata"]
            waits = [secrets[meta["name"]]] if kind == "MultiKueueCluster" else []
            k8s.apiextensions.CustomResource(
                f"{name}-{kind.lower()}-{meta['name']}",
                api_version=doc["apiVersion"],
                kind=kind,
                metadata=meta,
                spec=doc["spec"],
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=waits)),
            )


def worker_backends(services: Any) -> tuple[str, ...]:
    """The job kinds a worker runs: its installed backends and the indexed Job (no
    controller beyond Kubernetes' own)."""
    installed = tuple(getattr(services, "job_backends", ()) or ())
    return tuple(b for b in BACKEND_KINDS if b in installed or b == "indexed-job")


__all__ = [
    "CHECK",
    "Fleet",
    "FleetArgs",
    "job_config_maps",
    "ManagerReads",
    "admission_checks",
    "manager_objects",
    "read_manager",
    "worker_objects",
    "worker_rules",
]
