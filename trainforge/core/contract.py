"""The typed contract between the platform and the jobs.

The platform publishes one `PlatformContract` (its node pools, its teams, its storage, the
checkpoint bucket, the MLflow address and which job backends it installed); every job, every
emitter, the Python API, the component provider and the offline plan read that one object.
Nothing reads the platform component's attributes by guessing their names.

`TrainingPlatform.contract` is the live one (bucket name and MLflow address may be Pulumi
Outputs). `trainforge.platform.published.contract_from_config(config)` builds the same object
from stack config alone, before any resource exists, so that every job is checked before the
first resource is registered. Tests and programs without our platform build it directly.

This module imports no Pulumi: `run-local` and the plan's rehearsals use it too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from trainforge.core import catalog
from trainforge.core.errors import JobConfigError

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# The job backends: which controller runs a job and which object a job becomes.
#   pytorchjob   kubeflow.org/v1 PyTorchJob (Kubeflow training operator v1)
#   trainjob     trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2)
#   indexed-job  batch/v1 Job, completionMode Indexed, plus a headless Service (no operator)
BACKENDS = ("pytorchjob", "trainjob", "indexed-job")
DEFAULT_BACKEND = "pytorchjob"

# Instance families whose EFA supports GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA=1). On other
# EFA types (g5, g6, c5n ...) libfabric refuses the setting, so it is only set for these.
# From the GPU/instance catalog (core/data/gpu_catalog.json, families.*.rdma).
RDMA_FAMILIES = catalog.rdma_families()

# The highest TCP port (a port is 16 bits): the job model's metricsPort and the runtime's
# --metrics-port / TRAINFORGE_METRICS_PORT refuse anything above it, before a socket sees it.
MAX_PORT = 65535

# The UID/GID training containers run as unless the team config says otherwise.
DEFAULT_TRAINING_UID = 1000


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str = "NoSchedule"
    value: str | None = None


@dataclass(frozen=True)
class PoolLimits:
    """A Karpenter NodePool's `limits` (None = unlimited)."""

    cpu: str | None = None
    memory: str | None = None
    gpus: int | None = None


@dataclass(frozen=True)
class NodeShape:
    """One instance type of a pool as the scheduler sees a node of it (see
    `trainforge.jobs.node_facts`, which builds these from the AMI's kubelet formulas)."""

    instance_type: str
    vcpus: int
    memory_mib: int  # EC2's memory size
    capacity_memory_mib: int  # memory the node reports (Karpenter's estimate)
    max_pods: int
    kube_reserved_cpu_m: int
    kube_reserved_memory_mib: int
    eviction_memory_mib: int
    gpus: int = 0
    efa: int = 0

    @property
    def allocatable_cpu_m(self) -> int:
        return self.vcpus * 1000 - self.kube_reserved_cpu_m

    @property
    def allocatable_memory_mib(self) -> int:
        return self.capacity_memory_mib - self.kube_reserved_memory_mib - self.eviction_memory_mib


@dataclass(frozen=True)
class DaemonSetLoad:
    """A DaemonSet pod that runs on every node of a pool, and what it requests there."""

    name: str
    cpu_m: int = 0
    memory_mib: int = 0
    source: str = ""  # where the requests come from (chart/add-on and version)


@dataclass(frozen=True)
class NodeType:
    """One instance type of a pool, as its nodes come (capacity, not allocatable)."""

    name: str
    vcpus: int
    memory_mib: int
    gpus: int = 0
    # What the step-time estimate reads of this type alone (PoolFacts.only): its GPU model,
    # the memory of one GPU, its sustained bandwidth (all cards, the primary card). Unknown
    # (None, 0): the pool's shared figures stand in.
    gpu_name: str | None = None
    gpu_memory_mib: int = 0
    network_gbps: float = 0.0
    primary_network_gbps: float = 0.0


@dataclass(frozen=True)
class PoolFacts:
    """A managed node group or Karpenter NodePool as a job sees it.

    Per-node sizes are what *every* instance type of the pool guarantees (the minimum over
    its types), so that a pod sized here fits whichever type is launched. None = unknown.
    """

    name: str
    kind: str = "karpenter"  # "karpenter" | "node-group"
    instance_types: tuple[str, ...] = ()
    gpus_per_node: int = 0
    gpu_name: str | None = None  # e.g. "A10G", "H100"; None on CPU pools
    gpu_memory_mib: int = 0  # per GPU (minimum over the pool's types)
    # Sustained network bandwidth per node in Gbit/s (EC2's baseline, minimum over the types):
    # all network cards (what EFA uses) and the primary card (a pod's TCP traffic). 0 = unknown.
    network_gbps: float = 0.0
    primary_network_gbps: float = 0.0
    efa_interfaces: int = 0
    taints: tuple[Taint, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    capacity_type: str = "on-demand"  # "spot" when the pool may use spot
    capacity_types: tuple[str, ...] = ()
    vcpus_per_node: int | None = None
    memory_mib_per_node: int | None = None
    architecture: str = "amd64"
    # Node group maxSize (the most nodes it ever has); None for Karpenter pools, which are
    # bounded by `limits` instead.
    max_nodes: int | None = None
    limits: PoolLimits = field(default_factory=PoolLimits)
    # Every instance type as a node (allocatable after the kubelet's reservations), and the
    # DaemonSet pods that land on this pool's nodes. Empty when the contract was built by
    # hand: the capacity checks then derive nodes from vcpus/memory above, without
    # DaemonSets (trainforge.jobs.capacity).
    nodes: tuple[NodeShape, ...] = ()
    daemonsets: tuple[DaemonSetLoad, ...] = ()
    # What decides which CUDA build the pool's nodes run (trainforge.jobs.images): each GPU
    # model of the pool's instance types with its compute capability (sm_XY as XY, 0 when
    # unknown), the node image and the NVIDIA driver branch it provides (None: unknown).
    gpu_models: tuple[str, ...] = ()
    gpu_archs: tuple[int, ...] = ()
    ami: str | None = None
    nvidia_driver: int | None = None
    # Kueue places a job's pods on this pool by network topology (trainforge.platform.queues:
    # EFA node groups), so jobs here carry a topology request (trainforge.jobs.tenancy).
    topology_aware: bool = False
    # Every instance type with its own size, in the pool's order (empty when unknown). The
    # cost report picks the type a job's pods land on from these.
    node_types: tuple[NodeType, ...] = ()

    def only(self, instance_type: str) -> PoolFacts:
        """This pool as a node of one of its types sees it: what a job runs on when the pool
        launches that type (its GPU model, GPU memory, bandwidth and size; the step-time
        estimate of that type reads it). The pool itself when it does not know the type."""
        t = next((t for t in self.node_types if t.name == instance_type), None)
        if t is None:
            return self
        gpu = t.gpu_name if t.gpus else None
        models = (gpu,) if gpu else self.gpu_models
        archs = self.gpu_archs
        if gpu and gpu in self.gpu_models and len(self.gpu_archs) == len(self.gpu_models):
            archs = (self.gpu_archs[self.gpu_models.index(gpu)],)
        return replace(
            self,
            instance_types=(t.name,),
            node_types=(t,),
            nodes=tuple(n for n in self.nodes if n.instance_type == t.name),
            gpus_per_node=t.gpus if self.gpus_per_node else 0,
            gpu_name=gpu or self.gpu_name,
            gpu_models=models,
            gpu_archs=archs,
            gpu_memory_mib=t.gpu_memory_mib or self.gpu_memory_mib,
            network_gbps=t.network_gbps or self.network_gbps,
            primary_network_gbps=t.primary_network_gbps or self.primary_network_gbps,
            vcpus_per_node=t.vcpus or self.vcpus_per_node,
            memory_mib_per_node=t.memory_mib or self.memory_mib_per_node,
        )

    @property
    def rdma(self) -> bool:
        return bool(self.instance_types) and all(
            t.split(".")[0] in RDMA_FAMILIES for t in self.instance_types
        )

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_node > 0


def efa_count(pool: PoolFacts, gpus: int) -> int:
    """EFA devices a pod requests: all of the node's for a full-node pod, else its GPU share."""
    if not pool.efa_interfaces:
        return 0
    if not gpus or not pool.gpus_per_node or gpus >= pool.gpus_per_node:
        return pool.efa_interfaces
    return max(1, pool.efa_interfaces * gpus // pool.gpus_per_node)


@dataclass(frozen=True)
class TeamQuota:
    """The team's ResourceQuota limits that a single job must fit in (None = unlimited)."""

    gpus: str | None = None
    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None


def fsx_claim_name(team: str) -> str:
    """The team's FSx claim in its namespace (trainforge.platform.fsx makes it; run-local's
    `--volume` names it to stand in for the team's FSx mount)."""
    return f"fsx-{team}"


@dataclass(frozen=True)
class TeamFacts:
    """What a job needs to run as a team."""

    name: str
    namespace: str
    service_account: str = "training"
    # The team's FSx claim; None when the platform has no FSx (the volume is then an
    # emptyDir: checkpoints survive container restarts, and pod loss only via the S3 mirror).
    claim_name: str | None = None
    fsx_mount_path: str = "/fsx"
    # The team's directory on a file system shared between teams (`volumeMounts[].subPath`).
    fsx_sub_path: str | None = None
    checkpoint_prefix: str = ""
    quota: TeamQuota = field(default_factory=TeamQuota)
    # What the team's config guarantees (its quota.gpus/cpu/memory as split over the pools);
    # `quota` above adds what it may borrow. None: the same as `quota` (no Kueue, or unknown).
    guarantee: TeamQuota | None = None
    # Further PersistentVolumeClaims of the team's namespace that its jobs may mount (datasets,
    # models), as the team config lists them (`trainforge:teams[].claims`): a job naming any
    # other claim is refused at preview (it would sit Pending, or name another team's data).
    claims: tuple[str, ...] = ()
    run_as_user: int = DEFAULT_TRAINING_UID
    run_as_group: int = DEFAULT_TRAINING_UID
    # The team's Kueue LocalQueue, which every job names (label kueue.x-k8s.io/queue-name);
    # None where the platform runs no Kueue.
    queue: str | None = None
    # The Secret in the team's namespace with the team's MLflow credentials and the experiment
    # its jobs log to; None without MLflow. `mlflow_credentials_key` is the Secret's key that
    # holds them as the MLflow client's credentials file (INI, section [mlflow]), which every
    # training pod mounts at $HOME/.mlflow/credentials (trainforge.jobs.tenancy).
    mlflow_secret: str | None = None
    mlflow_credentials_key: str = "credentials"
    mlflow_experiment: str | None = None
    # Pulumi resources a job of this team must wait for (e.g. the Job that makes the team's
    # FSx directory belong to the training UID). Not data: excluded from equality.
    ready: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    # What `quota` is computed from, as data (trainforge.jobs.quota.QuotaInputs: every team's
    # quota config, every pool, Kueue on or off): a job's quota refusal computes the stack keys
    # that lift it with the platform's own arithmetic. None where no stack config says it.
    quota_inputs: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class JobTarget:
    """Where one job runs: its team, its pool and the platform-wide facts it uses.

    `checkpoint_bucket` and `mlflow_tracking_uri` may be Pulumi Outputs.
    """

    team: TeamFacts
    pool: PoolFacts
    checkpoint_bucket: Any = None
    mlflow_tracking_uri: Any = None
    backend: str = DEFAULT_BACKEND  # the platform's default backend
    backends: tuple[str, ...] = (DEFAULT_BACKEND,)  # backends whose controllers are installed
    # The runtime images jobs without their own image run, and the pull-through cache
    # (trainforge.jobs.runtime_images.RuntimeImages); None: the stock PyTorch image.
    images: Any = None
    # The platform's CPU pools, named by a GPU pool's refusal of a CPU-only job (empty: not
    # known to this target, e.g. a Python program's TrainingJob: the refusal names none).
    cpu_pools: tuple[str, ...] = ()

    # The team's facts, read often by emitters.
    @property
    def namespace(self) -> str:
        return self.team.namespace

    @property
    def service_account(self) -> str:
        return self.team.service_account

    @property
    def claim_name(self) -> str | None:
        return self.team.claim_name

    @property
    def fsx_mount_path(self) -> str:
        return self.team.fsx_mount_path

    @property
    def fsx_sub_path(self) -> str | None:
        return self.team.fsx_sub_path

    @property
    def checkpoint_prefix(self) -> str:
        return self.team.checkpoint_prefix

    @property
    def quota(self) -> TeamQuota:
        return self.team.quota


@dataclass(frozen=True)
class PlatformContract:
    """Everything the platform offers jobs. Build it with `published.contract_from_config`
    (config only) or read `TrainingPlatform.contract` (the live one)."""

    pools: Mapping[str, PoolFacts]
    teams: Mapping[str, TeamFacts]
    backend: str = DEFAULT_BACKEND
    backends: tuple[str, ...] = (DEFAULT_BACKEND,)
    checkpoint_bucket: Any = None
    mlflow_tracking_uri: Any = None
    images: Any = None  # trainforge.jobs.runtime_images.RuntimeImages
    # A fleet manager's jobs name the controller that runs them elsewhere (MultiKueue:
    # `kueue.x-k8s.io/multikueue`) in their managedBy field; None: a single cluster.
    managed_by: str | None = None
    # The Kubernetes provider jobs are declared with, the platform resources every job waits
    # for, and those a job of one backend waits for (its controller, CRDs, webhook and, for
    # trainjob, the ClusterTrainingRuntimes). Not data: excluded from equality.
    k8s_provider: Any = field(default=None, compare=False, repr=False)
    ready: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    backend_ready: Mapping[str, tuple[Any, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # What a job's PodMonitor waits for: the release that installs the Prometheus operator's
    # CRDs (empty with `monitoring.mode: external`, whose cluster already has them).
    monitor_ready: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    def waits_for(self, backend: str) -> tuple[Any, ...]:
        """The platform resources a job of `backend` must be declared after."""
        return (*self.ready, *self.backend_ready.get(backend, ()))

    def team(self, name: str, where: str = "job") -> TeamFacts:
        if name not in self.teams:
            known = ", ".join(sorted(self.teams)) or "(none declared)"
            raise JobConfigError(f"{where}.team", name, f"known teams: {known}")
        return self.teams[name]

    def pool(self, name: str, where: str = "job") -> PoolFacts:
        if name not in self.pools:
            known = ", ".join(sorted(self.pools)) or "(none declared)"
            raise JobConfigError(f"{where}.pool", name, f"known node pools: {known}")
        return self.pools[name]

    def target(self, team: str, pool: str, where: str = "job") -> JobTarget:
        """The JobTarget for a job of `team` on `pool`; unknown names name the valid ones."""
        return JobTarget(
            team=self.team(team, where),
            pool=self.pool(pool, where),
            checkpoint_bucket=self.checkpoint_bucket,
            mlflow_tracking_uri=self.mlflow_tracking_uri,
            backend=self.backend,
            backends=self.backends,
            images=self.images,
            cpu_pools=tuple(n for n, p in self.pools.items() if not p.gpus_per_node),
        )


# --- what a program declared, for the offline plan ---------------------------------------------


@dataclass(frozen=True)
class DeclaredJob:
    """A job as declared: its resolved spec, its target and the objects it became."""

    spec: Any  # trainforge.jobs.spec.JobSpec (resolved)
    target: JobTarget
    emitted: Any  # the emitter's result
    resource_name: str = ""
    # what the component warned of this job (pulumi.log.warn: the plan prints them among the
    # program's warnings), kept for run-local, which shows the job's alone
    warnings: tuple[str, ...] = ()


@dataclass
class Declared:
    """The platform contracts and jobs one program run declared, in order.

    The offline plan owns it: it starts one per program run (`start_record`) and hands it
    to its checks, which then see typed objects instead of re-deriving them from rendered
    YAML. Components add themselves to the run's record (`record()`) as they are
    constructed; outside a plan there is none, so a deployment records and reads nothing.
    """

    contracts: list[PlatformContract] = field(default_factory=list)
    jobs: list[DeclaredJob] = field(default_factory=list)
    # The stack's pull-through cache the platform routed its images through
    # (trainforge.core.image_routes.routing): what the plan's checks rebuild pods with.
    image_routes: Any = None
    # Images components install inside a Helm chart or kustomize overlay, which the plan's
    # rendered pods never show (trainforge.core.image_routes.installed).
    installed_images: list[Any] = field(default_factory=list)
    # What the teams' quotas ask that the pools cannot hold (trainforge.platform.queues
    # .quota_plan): the Kueue component logs them, the plan's queue section repeats them.
    quota_warnings: list[str] = field(default_factory=list)

    def pool(self, name: str | None) -> PoolFacts | None:
        """The declared pool of that name (a Kueue flavor's: each pool is one flavor), from
        the first contract that declares it; None when no contract does."""
        return next((c.pools[name] for c in self.contracts if name in c.pools), None)


# The record of the plan run in progress, in this context (None: no plan runs it).
_RECORD: ContextVar[Declared | None] = ContextVar("trainforge_plan_record", default=None)


def record() -> Declared | None:
    """The plan run's record to add to; None outside a plan (a deployment records nothing)."""
    return _RECORD.get()


def start_record() -> Declared:
    """A fresh record for one program run of the offline plan (its runner calls this before
    the program), current until the plan starts the next one: its checks read it after."""
    rec = Declared()
    _RECORD.set(rec)
    return rec


@contextmanager
def recording(rec: Declared | None = None) -> Iterator[Declared]:
    """A record current for the block only (a test of a component outside a plan run)."""
    token = _RECORD.set(rec if rec is not None else Declared())
    try:
        yield _RECORD.get()  # type: ignore[misc]
    finally:
        _RECORD.reset(token)
