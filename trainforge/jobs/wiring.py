"""What a job takes from the platform, and the checks that need it.

`JobTarget` is the platform side of a job: the team's namespace, ServiceAccount, FSx claim,
checkpoint bucket, MLflow address and the facts of the node pool it runs on. Tests and
non-Python programs build it directly; `target_from_platform` reads it off a
`TrainingPlatform` component defensively (that component is developed separately, so this
adapter accepts the few attribute spellings it may use and says which one it missed).

`resolve_job` fills a JobSpec's pool-dependent defaults (GPUs, CPU, memory, /dev/shm, EFA)
and rejects what can never run there: more GPUs than the pool's instance types have, EFA
on a pool without it, a pod bigger than the node, a job bigger than the team's quota.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from trainforge.jobs.errors import JobConfigError
from trainforge.jobs.quantity import format_mebibytes, parse_quantity
from trainforge.jobs.spec import JobSpec

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# Instance families whose EFA supports GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA=1). On other
# EFA types (g5, g6, c5n ...) libfabric refuses the setting, so it is only set for these.
RDMA_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6", "p6e", "trn1", "trn1n", "trn2")

# Fallback sizes when the pool does not say how big its nodes are: small enough to fit
# every GPU instance type (g4dn.xlarge has 4 vCPU / 16 GiB) and useful for tests.
_FALLBACK_CPU_PER_SHARE = 3
_FALLBACK_MEM_PER_SHARE = 12 * 2**30
_SHM_FRACTION = Fraction(1, 4)
_SHM_MAX = 64 * 2**30


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str | None = None


@dataclass(frozen=True)
class PoolFacts:
    """A node pool as a job sees it. Sizes are per node; None when the platform does not say."""

    name: str
    instance_types: tuple[str, ...] = ()
    gpus_per_node: int = 0
    efa_interfaces: int = 0
    taints: tuple[Taint, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    capacity_type: str = "on-demand"
    vcpus_per_node: int | None = None
    memory_mib_per_node: int | None = None

    @property
    def rdma(self) -> bool:
        return bool(self.instance_types) and all(
            t.split(".")[0] in RDMA_FAMILIES for t in self.instance_types
        )


@dataclass(frozen=True)
class TeamQuota:
    """The team's ResourceQuota limits that a single job must fit in (None = unlimited)."""

    gpus: str | None = None
    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None


@dataclass(frozen=True)
class JobTarget:
    """Where a job runs. `checkpoint_bucket` and `mlflow_tracking_uri` may be Pulumi Outputs."""

    namespace: str
    service_account: str
    # The team's FSx claim; None when the platform has no FSx (the volume is then an
    # emptyDir: checkpoints survive container restarts, and pod loss only via the S3 mirror).
    claim_name: str | None
    pool: PoolFacts
    fsx_mount_path: str = "/fsx"
    # The team's directory on a file system shared between teams (`volumeMounts[].subPath`).
    fsx_sub_path: str | None = None
    checkpoint_bucket: Any = None
    checkpoint_prefix: str = ""
    mlflow_tracking_uri: Any = None
    quota: TeamQuota = field(default_factory=TeamQuota)


def _share(job: JobSpec, pool: PoolFacts, gpus: int) -> Fraction:
    """The fraction of a node one pod gets: its GPUs over the node's, or the whole node."""
    if gpus and pool.gpus_per_node:
        return Fraction(gpus, pool.gpus_per_node)
    return Fraction(1)


def efa_count(pool: PoolFacts, gpus: int) -> int:
    """EFA devices a pod requests: all of the node's for a full-node pod, else its GPU share."""
    if not pool.efa_interfaces:
        return 0
    if not gpus or not pool.gpus_per_node or gpus >= pool.gpus_per_node:
        return pool.efa_interfaces
    return max(1, pool.efa_interfaces * gpus // pool.gpus_per_node)


def resolve_job(job: JobSpec, target: JobTarget, where: str = "job") -> JobSpec:
    """Fill pool-dependent defaults and check the job can ever run on `target`."""
    pool = target.pool
    gpus = job.gpus_per_worker
    if gpus is None:
        gpus = pool.gpus_per_node
    if gpus > pool.gpus_per_node:
        types = ", ".join(pool.instance_types) or "its instance types"
        if not pool.gpus_per_node:
            raise JobConfigError(
                f"{where}.gpusPerWorker",
                gpus,
                f"pool {pool.name!r} ({types}) has no GPUs per node; use 0 or a GPU pool",
            )
        # Pool facts are what every instance type of the pool guarantees (the smallest), so
        # that a pod sized here fits whichever type Karpenter launches.
        raise JobConfigError(
            f"{where}.gpusPerWorker",
            gpus,
            f"pool {pool.name!r} ({types}) has at most {pool.gpus_per_node} GPUs per node on its "
            f"smallest instance type; use 1 to {pool.gpus_per_node}, or a pool whose instance "
            "types all have enough GPUs",
        )
    if gpus == 0 and pool.gpus_per_node:
        raise JobConfigError(
            f"{where}.gpusPerWorker",
            gpus,
            f"pool {pool.name!r} is a GPU pool; a CPU-only pod would hold a GPU node without "
            f"using it. Use 1 to {pool.gpus_per_node}, or a CPU pool",
        )
    procs = job.procs_per_worker
    if gpus and procs is not None and procs != gpus:
        raise JobConfigError(
            f"{where}.procsPerWorker",
            procs,
            f"a GPU job runs one process per GPU; leave it unset or set it to gpusPerWorker ({gpus})",
        )

    efa = job.efa
    if efa and not pool.efa_interfaces:
        raise JobConfigError(
            f"{where}.efa",
            efa,
            f"pool {pool.name!r} has no EFA interfaces; set efa: false or use an EFA pool",
        )
    if efa and not gpus:
        raise JobConfigError(
            f"{where}.efa", efa, "EFA carries NCCL traffic, so it needs gpusPerWorker >= 1"
        )
    if efa is None:
        efa = bool(pool.efa_interfaces and gpus)
    if efa and job.image is None:
        raise JobConfigError(
            f"{where}.image",
            None,
            f"pool {pool.name!r} uses EFA, which needs libfabric and the aws-ofi-nccl plugin in the "
            "image; the stock PyTorch image has neither and NCCL would fail at start. Set image to "
            "one that has them (e.g. an AWS Deep Learning Container) or efa: false to use TCP",
        )

    mirror = job.checkpoint.s3_mirror
    if mirror and job.image is None and target.checkpoint_bucket is not None:
        raise JobConfigError(
            f"{where}.checkpoint.s3Mirror",
            mirror,
            "the S3 mirror needs boto3, which the stock PyTorch image does not have, so the job "
            "would fail at start. Set image to one with `trainforge[s3]` (or boto3) installed, "
            "or leave s3Mirror unset (off for the stock image; checkpoints stay on FSx)",
        )
    if mirror is None:
        mirror = job.image is not None

    share = _share(job, pool, gpus)
    vcpus, mem_mib = pool.vcpus_per_node, pool.memory_mib_per_node
    if job.cpu is not None:
        cpu = job.cpu
    elif vcpus:
        # Leave ~10% plus a core per node for kubelet, the CNI, CSI and device-plugin pods.
        cpu = str(max(1, int((vcpus * Fraction(9, 10) - 1) * share)))
    else:
        cpu = str(_FALLBACK_CPU_PER_SHARE * max(gpus, 1))
    if job.memory is not None:
        memory = job.memory
    elif mem_mib:
        # ~10% of a node's memory is reserved (kube-reserved, eviction threshold, OS).
        memory = format_mebibytes(int(mem_mib * 2**20 * Fraction(85, 100) * share))
    else:
        memory = format_mebibytes(_FALLBACK_MEM_PER_SHARE * max(gpus, 1))
    mem_bytes = parse_quantity(memory)
    if vcpus and parse_quantity(cpu) > vcpus:
        raise JobConfigError(f"{where}.cpu", cpu, f"nodes in pool {pool.name!r} have {vcpus} vCPUs")
    if mem_mib and mem_bytes > mem_mib * 2**20:
        raise JobConfigError(
            f"{where}.memory", memory, f"nodes in pool {pool.name!r} have {mem_mib}Mi of memory"
        )
    shm = job.shm_size
    if shm is None:
        shm = format_mebibytes(min(mem_bytes * _SHM_FRACTION, _SHM_MAX))
    elif parse_quantity(shm) >= mem_bytes:
        # /dev/shm is memory-backed and counted against the container's memory limit.
        raise JobConfigError(f"{where}.shmSize", shm, f"must be smaller than memory ({memory})")

    resolved = replace(
        job,
        gpus_per_worker=gpus,
        procs_per_worker=procs if procs is not None else (gpus or 1),
        cpu=cpu,
        memory=memory,
        shm_size=shm,
        efa=efa,
        checkpoint=replace(job.checkpoint, s3_mirror=mirror),
    )
    check_quota(resolved, target, where)
    return resolved


def check_quota(job: JobSpec, target: JobTarget, where: str) -> None:
    """Reject a job whose smallest runnable size exceeds the team's quota: it would sit in
    Created forever (the operator cannot create its pods) instead of failing at preview."""
    q = target.quota
    pods = job.min_workers
    asks = [
        ("gpus", q.gpus, Fraction(job.gpus_per_worker or 0) * pods, "gpusPerWorker"),
        ("cpu", q.cpu, parse_quantity(job.cpu or "0") * pods, "cpu"),
        ("memory", q.memory, parse_quantity(job.memory or "0") * pods, "memory"),
        ("pods", q.pods, Fraction(pods), "workers"),
    ]
    for name, limit, need, key in asks:
        if limit is None or need == 0:
            continue
        if need > parse_quantity(limit):
            raise JobConfigError(
                f"{where}.{key}",
                getattr(
                    job, {"gpusPerWorker": "gpus_per_worker", "workers": "workers"}.get(key, key)
                ),
                f"{pods} pod(s) need {name} {_fmt(need)} but team {job.team!r} has a quota of "
                f"{limit} in namespace {target.namespace!r}; the job could never start",
            )


def _fmt(value: Fraction) -> str:
    if value.denominator == 1:
        if value >= 2**30 and value % 2**30 == 0:
            return f"{value // 2**30}Gi"
        return str(value.numerator)
    return f"{float(value):g}"


# --- reading the platform component ---------------------------------------------------------


def _pick(obj: Any, *names: str, default: Any = None) -> Any:
    """First of `names` present on obj (attribute or mapping key)."""
    for name in names:
        if isinstance(obj, dict) and obj.get(name) is not None:
            return obj[name]
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _as_mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list | tuple):
        return {str(_pick(v, "name")): v for v in value}
    return dict(vars(value))


def _taints(raw: Any) -> tuple[Taint, ...]:
    out = []
    for t in raw or ():
        if isinstance(t, Taint):
            out.append(t)
        else:
            out.append(
                Taint(
                    key=_pick(t, "key"),
                    effect=_pick(t, "effect", default="NoSchedule"),
                    value=_pick(t, "value"),
                )
            )
    return tuple(out)


def _count(value: Any) -> int:
    """An integer fact that may come per instance type ({type: n}): the largest applies."""
    if isinstance(value, dict):
        return max((int(v) for v in value.values()), default=0)
    return int(value or 0)


def _fields(value: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value if isinstance(value, dict) else dict(vars(value))


def pool_facts(name: str, raw: Any) -> PoolFacts:
    """PoolFacts from whatever the platform exposes for one pool."""
    if isinstance(raw, PoolFacts):
        return raw
    types = _pick(raw, "instance_types", "instanceTypes", default=()) or ()
    labels = _pick(raw, "node_selector", "nodeSelector", "labels", default=None)
    if not labels:
        # Karpenter labels every node it launches with the NodePool's name.
        labels = {"karpenter.sh/nodepool": name}
    capacity = _pick(
        raw, "capacity_type", "capacityType", "capacity_types", "capacityTypes", default="on-demand"
    )
    if isinstance(capacity, list | tuple):
        capacity = "spot" if "spot" in capacity else (capacity[0] if capacity else "on-demand")
    return PoolFacts(
        name=name,
        instance_types=tuple(types),
        gpus_per_node=_count(_pick(raw, "gpus_per_node", "gpusPerNode", "gpu_count", default=0)),
        efa_interfaces=_count(
            _pick(raw, "efa_interfaces", "efaInterfaces", "efa_count", default=0)
        ),
        taints=_taints(_pick(raw, "taints", default=())),
        node_selector=tuple(sorted(dict(labels).items())),
        capacity_type=str(capacity),
        vcpus_per_node=_pick(raw, "vcpus_per_node", "vcpusPerNode", "vcpus", default=None),
        memory_mib_per_node=_pick(
            raw, "memory_mib_per_node", "memoryMibPerNode", "memory_mib", default=None
        ),
    )


def target_from_platform(platform: Any, team: str, pool: str, where: str = "job") -> JobTarget:
    """The JobTarget for `team` on `pool` from a TrainingPlatform component (or a dict).

    Reads `teams` (name -> namespace, service_account, claim_name, quota) and `node_pools`
    (name -> pool facts), plus `checkpoint_bucket_name`/`checkpoint_bucket`,
    `mlflow_tracking_uri` and `fsx_mount_path` when present.
    """
    teams = _as_mapping(_pick(platform, "teams", "team_facts"))
    pools = _as_mapping(_pick(platform, "node_pools", "pools", "pool_facts"))
    if team not in teams:
        raise JobConfigError(
            f"{where}.team", team, f"known teams: {', '.join(sorted(teams)) or '(none declared)'}"
        )
    if pool not in pools:
        raise JobConfigError(
            f"{where}.pool",
            pool,
            f"known node pools: {', '.join(sorted(pools)) or '(none declared)'}",
        )
    t = teams[team]
    quota = _pick(t, "quota", default=None)
    if quota is not None and not isinstance(quota, TeamQuota):
        quota = quota_from_mapping(_fields(quota))
    # Team-level facts win over platform-level ones (the services layer sets both).
    bucket = _pick(t, "checkpoint_bucket", default=None)
    if bucket is None:
        bucket = _pick(platform, "checkpoint_bucket_name", "checkpoint_bucket_id", default=None)
    if bucket is None:
        b = _pick(platform, "checkpoint_bucket", default=None)
        bucket = (
            _pick(b, "bucket", "id", default=b) if b is not None and not isinstance(b, str) else b
        )
    claim = _present(t, "claim_name", "pvc_name", "claimName", "fsx_claim", default=f"fsx-{team}")
    return JobTarget(
        namespace=str(_pick(t, "namespace", default=team)),
        service_account=str(
            _pick(
                t, "service_account", "service_account_name", "serviceAccount", default="training"
            )
        ),
        claim_name=None if claim is None else str(claim),
        fsx_sub_path=_pick(t, "fsx_sub_path", "sub_path", default=None),
        pool=pool_facts(pool, pools[pool]),
        fsx_mount_path=str(
            _pick(t, "fsx_mount_path", default=None)
            or _pick(platform, "fsx_mount_path", default="/fsx")
        ),
        checkpoint_bucket=bucket,
        checkpoint_prefix=str(_pick(t, "checkpoint_prefix", default=f"{team}/")),
        mlflow_tracking_uri=_pick(t, "mlflow_tracking_uri", default=None)
        or _pick(platform, "mlflow_tracking_uri", "mlflow_uri", default=None),
        quota=quota or TeamQuota(),
    )


def _present(obj: Any, *names: str, default: Any = None) -> Any:
    """Like _pick, but an attribute that exists with value None means "none" (e.g. no FSx)."""
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if not isinstance(obj, dict) and hasattr(obj, name):
            return getattr(obj, name)
    return default


def quota_from_mapping(raw: dict[str, Any]) -> TeamQuota:
    """TeamQuota from config-style keys (gpus, cpu, memory, pods) or ResourceQuota `hard` keys."""
    aliases = {
        "gpus": ("gpus", "gpu", GPU_RESOURCE, f"requests.{GPU_RESOURCE}"),
        "cpu": ("cpu", "requests.cpu", "limits.cpu"),
        "memory": ("memory", "requests.memory", "limits.memory"),
        "pods": ("pods", "count/pods"),
    }
    values = {}
    for key, names in aliases.items():
        found = [str(raw[n]) for n in names if raw.get(n) is not None]
        values[key] = min(found, key=parse_quantity) if found else None
    return TeamQuota(**values)
