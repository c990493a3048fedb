"""Stack config for the platform services (FSx, checkpoints, operator, plugins, monitoring, teams).

Why: every mistake a user can make in `Pulumi.<stack>.yaml` for these services must be
reported at preview, all at once, with the key path, the bad value and what is valid, before
any resource is declared. `parse_services_config` therefore never raises: it appends one
message per problem to `errors` and returns a config built from the valid parts (defaults
standing in for invalid values) so the caller can report everything together.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from trainforge.core.contract import BACKENDS, DEFAULT_BACKEND

NS = "trainforge"

FSX_DEPLOYMENT_TYPES = ("PERSISTENT_2", "SCRATCH_2")
# MB/s per TiB for PERSISTENT_2 (SSD). SCRATCH_2 has a fixed 200 MB/s/TiB baseline.
FSX_THROUGHPUT_TIERS = (125, 250, 500, 1000)
FSX_CAPACITY_RULE = "1200 GiB or a multiple of 2400 GiB (1200, 2400, 4800, 7200, 9600, ...)"
MONITORING_MODES = ("managed", "external")
MLFLOW_BACKENDS = ("pvc", "sqlite-ephemeral")

# Namespaces the platform itself uses; a team may not take them.
RESERVED_NAMESPACES = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "kubeflow",
        "kubeflow-system",  # Kubeflow Trainer v2 and JobSet (backend trainjob)
        "monitoring",
        "mlflow",
        "kueue-system",
        "node-agents",
        "fsx-admin",
    }
)

# Kueue (trainforge.platform.kueue): ClusterQueue policies, as Kueue v0.19's CRD spells them.
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
BORROW_WITHIN_COHORT = ("Never", "LowerPriority")
# Job priorities (the job key `priority`), each a Kueue WorkloadPriorityClass of this value.
PRIORITIES = {"high": 10000, "normal": 1000, "low": 100}
DEFAULT_COHORT = "trainforge"
# Team UIDs/GIDs: above the system and login ranges, below the 2^31 limit of runAsUser.
MIN_TEAM_ID = 10000
MAX_TEAM_ID = 2**31 - 1
_DEFAULT_ID_BASE = 100000
_DEFAULT_ID_SPAN = 900000

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Kubernetes resource.Quantity (apimachinery): a signed decimal with an optional suffix.
_QUANTITY = re.compile(r"^\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_K8S_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")


# ----------------------------------------------------------------------------------------------
# Dataclasses


@dataclass(frozen=True)
class DataRepositoryConfig:
    """An S3 data repository association (PERSISTENT_2 only): lazy import and auto export."""

    data_repository_path: str  # s3://bucket[/prefix]
    file_system_path: str = "/s3"
    import_events: tuple[str, ...] = ("NEW", "CHANGED", "DELETED")
    export_events: tuple[str, ...] = ("NEW", "CHANGED", "DELETED")
    batch_import_meta_data_on_create: bool = False


@dataclass(frozen=True)
class FsxConfig:
    enabled: bool = True
    deployment_type: str = "PERSISTENT_2"
    storage_capacity_gib: int = 1200
    per_unit_storage_throughput: int | None = 125
    mount_path: str = "/fsx"
    data_repository: DataRepositoryConfig | None = None
    # daily automatic backups kept this many days (PERSISTENT_2; FSx backs up no scratch type)
    backup_retention_days: int | None = 7


@dataclass(frozen=True)
class CheckpointConfig:
    enabled: bool = True
    noncurrent_version_expiration_days: int = 30
    abort_incomplete_multipart_days: int = 7
    # Destroying a stack keeps a non-empty bucket (checkpoints are weeks of GPU time).
    force_destroy: bool = False


@dataclass(frozen=True)
class HelmChartRef:
    """A user's chart: a classic Helm repository (https://, its index.yaml lists the chart) or
    an OCI registry path (oci://). pulumi-kubernetes resolves the two differently: an OCI
    chart is given whole as the Release's `chart` with no `repository_opts` (a `repo` is
    always fetched as `<repo>/index.yaml`, which a registry does not serve)."""

    repository: str
    version: str
    name: str = "training-operator"

    @property
    def is_oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def release_chart(self) -> str:
        """The Release's `chart`: the OCI reference (registry path + chart name), or the
        chart's name in the classic repository."""
        if not self.is_oci:
            return self.name
        base = self.repository.rstrip("/")
        return base if base.rsplit("/", 1)[-1] == self.name else f"{base}/{self.name}"

    @property
    def release_repo(self) -> str | None:
        """The Release's `repository_opts.repo`: the classic repository URL; None for OCI."""
        return None if self.is_oci else self.repository


@dataclass(frozen=True)
class TrainingOperatorConfig:
    enabled: bool = True
    namespace: str = "kubeflow"
    # None: the pinned upstream kustomize overlay. Set: a Helm release from that repository.
    chart: HelmChartRef | None = None


@dataclass(frozen=True)
class DevicePluginsConfig:
    nvidia: bool = True
    efa: bool = True


@dataclass(frozen=True)
class MonitoringConfig:
    mode: str = "managed"  # managed: kube-prometheus-stack; external: an existing Prometheus
    namespace: str = "monitoring"
    dcgm_exporter: bool = True
    # DCGM profiling (DCP) metrics, DCGM_FI_PROF_* (tensor-core, SM, DRAM activity, PCIe
    # bytes), need CAP_SYS_ADMIN in the exporter. Off: the exporter runs without it and
    # collects the device metrics only (utilisation, memory, power, clocks, XID errors).
    dcgm_profiling_metrics: bool = False
    retention: str = "15d"
    storage_size: str = "50Gi"
    storage_class: str | None = None  # None: the encrypted gp3 class trainforge declares
    # Off by default: the chart's default admin password is public. When on, the admin
    # credentials come from a Secret `grafana-admin` the operator creates in the namespace.
    grafana: bool = False
    # Alert thresholds (trainforge.platform.alerts) and where alerts go (Alertmanager).
    alerts: AlertsConfig = field(default_factory=lambda: AlertsConfig())
    receivers: tuple[ReceiverConfig, ...] = ()


RECEIVER_TYPES = ("slack", "pagerduty", "webhook")
SEVERITIES = ("critical", "warning")
_PROM_DURATION = re.compile(r"\d+(ms|s|m|h|d|w|y)")


@dataclass(frozen=True)
class AlertsConfig:
    """Thresholds of trainforge's alerts (Prometheus durations, counts, ratios)."""

    # no optimizer step for this long while the run is not finished
    stalled_after: str = "15m"
    # this many restarts within `restart_storm_window`
    restart_storm_count: int = 3
    restart_storm_window: str = "1h"
    # training progress since the last checkpoint (steps x step time) older than this
    checkpoint_max_age: str = "2h"
    # goodput below this, once the run's wall time is past `goodput_after`
    goodput_min: float = 0.7
    goodput_after: str = "1h"
    # a team queue with pending workloads and no admission for this long
    queue_pending_for: str = "1h"
    # where the runbook links point: the docs/ folder of this repository as a URL
    runbook_base_url: str = "https://github.com/trainforge/trainforge/blob/main/docs/"


@dataclass(frozen=True)
class ReceiverConfig:
    """One Alertmanager receiver; `secret` (Slack webhook URL, PagerDuty routing key, webhook
    URL) is set with `pulumi config set --secret --path` and reaches the chart as a secret."""

    name: str
    type: str
    secret: str
    channel: str | None = None  # slack only
    severities: tuple[str, ...] = SEVERITIES
    teams: tuple[str, ...] = ()  # empty: every team's alerts and the platform's


@dataclass(frozen=True)
class MlflowConfig:
    enabled: bool = False
    backend: str = "pvc"  # pvc: SQLite + artifacts on a PVC; sqlite-ephemeral: emptyDir (dev)
    storage_size: str = "20Gi"
    storage_class: str | None = None  # None: the encrypted gp3 class trainforge declares


@dataclass(frozen=True)
class PoolQuota:
    """An amount of GPUs, CPU and memory in one node pool (None: not given)."""

    gpus: str | None = None
    cpu: str | None = None
    memory: str | None = None


@dataclass(frozen=True)
class TeamQuotaConfig:
    gpus: str = "0"
    cpu: str = "16"
    memory: str = "64Gi"
    pods: str = "50"
    # An explicit nominal (guaranteed) quota per node pool; pools not listed get the totals
    # above, GPU pools with the CPU and memory their GPUs bring
    # (trainforge.platform.queues.nominal_quotas).
    pools: tuple[tuple[str, PoolQuota], ...] = ()
    # The most the team may borrow from its cohort in any one pool beyond its nominal quota
    # there; None per resource = as much as the cohort has idle.
    borrowing_limit: PoolQuota = field(default_factory=PoolQuota)


@dataclass(frozen=True)
class KueueConfig:
    """Queueing with gang admission (trainforge.platform.kueue)."""

    enabled: bool = True
    queueing_strategy: str = "BestEffortFIFO"
    # A team's higher-priority job may preempt the same team's lower-priority jobs.
    within_cluster_queue: str = "LowerPriority"
    # A team reclaiming its nominal quota preempts whatever other teams borrowed there.
    reclaim_within_cohort: str = "Any"
    # A job that must borrow may preempt other teams' borrowing jobs of a lower priority, up
    # to `low` (low-priority jobs are the ones that soak up idle capacity for anyone).
    borrow_within_cohort: str = "LowerPriority"
    # Evict and requeue an admitted job whose pods are not all running after this long
    # (Kueue waitForPodsReady); None: never.
    pods_ready_timeout: str | None = "30m"


@dataclass(frozen=True)
class ContainerDefaults:
    """LimitRange defaults for containers that do not say what they need."""

    cpu_request: str = "500m"
    memory_request: str = "1Gi"
    cpu_limit: str = "2"
    memory_limit: str = "4Gi"


POD_SECURITY_LEVELS = ("baseline", "restricted")


def default_team_id(name: str) -> int:
    """A team's UID/GID when the config does not set one: derived from the team's name, so
    that it never changes when teams are added, removed or reordered (an index would, and
    every file the team wrote on FSx would then belong to someone else)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return _DEFAULT_ID_BASE + digest % _DEFAULT_ID_SPAN


@dataclass(frozen=True)
class TeamAccessConfig:
    """IAM principals (role or user ARNs) that get an EKS access entry in the team's
    Kubernetes group: read the team's jobs, workloads, pods and logs; create and delete jobs
    only with `create_jobs`."""

    principals: tuple[str, ...] = ()
    create_jobs: bool = False


_IAM_PRINCIPAL = re.compile(r"arn:aws[\w-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+")


def _team_access(r: _Reader) -> TeamAccessConfig:
    r.unknown({"principals", "createJobs"})
    raw = r.raw.get("principals", [])
    principals: list[str] = []
    if not isinstance(raw, list):
        r.err("principals", raw, "a list of IAM role or user ARNs")
    else:
        for i, arn in enumerate(raw):
            if not isinstance(arn, str) or not _IAM_PRINCIPAL.fullmatch(arn):
                r.err(
                    f"principals[{i}]",
                    arn,
                    "an IAM role or user ARN such as arn:aws:iam::111122223333:role/MlEngineer",
                )
            else:
                principals.append(arn)
    return TeamAccessConfig(tuple(principals), r.boolean("createJobs", False))


@dataclass(frozen=True)
class TeamConfig:
    name: str
    quota: TeamQuotaConfig = field(default_factory=TeamQuotaConfig)
    defaults: ContainerDefaults = field(default_factory=ContainerDefaults)
    # Enforced Pod Security level. `baseline` by default: the training operator injects an
    # `init-pytorch` container into Worker pods of Master/Worker PyTorchJobs without a
    # securityContext, which `restricted` rejects. `restricted` is always warned and audited.
    pod_security: str = "baseline"
    # PersistentVolumeClaims of the team's namespace (its datasets, models) that its jobs may
    # mount besides the FSx claim; the team creates them, the platform only lists them so that
    # a job's preview can refuse any other claim (see trainforge/jobs/storage.py).
    claims: tuple[str, ...] = ()
    # The UID/GID the team's pods run as and that owns its FSx directory (mode 0770); unique
    # across teams. None: default_team_id(name).
    uid: int | None = None
    gid: int | None = None
    # Teams in the same cohort lend each other idle quota (Kueue cohort).
    cohort: str = DEFAULT_COHORT
    # Who may use the cluster as this team (trainforge.platform.team_access).
    access: TeamAccessConfig = field(default_factory=lambda: TeamAccessConfig())

    @property
    def run_as_user(self) -> int:
        return self.uid if self.uid is not None else default_team_id(self.name)

    @property
    def run_as_group(self) -> int:
        if self.gid is not None:
            return self.gid
        return self.uid if self.uid is not None else default_team_id(self.name)


@dataclass(frozen=True)
class ServicesConfig:
    fsx: FsxConfig = field(default_factory=FsxConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    training_operator: TrainingOperatorConfig = field(default_factory=TrainingOperatorConfig)
    device_plugins: DevicePluginsConfig = field(default_factory=DevicePluginsConfig)
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    kueue: KueueConfig = field(default_factory=KueueConfig)
    teams: tuple[TeamConfig, ...] = ()
    # What jobs emit by default (`trainforge:jobBackend`) and every backend whose controller
    # the platform installs: the default, `trainforge:jobBackends`, and each stack job's own
    # `backend:` (in BACKENDS order).
    job_backend: str = DEFAULT_BACKEND
    job_backends: tuple[str, ...] = (DEFAULT_BACKEND,)


# ----------------------------------------------------------------------------------------------
# Helpers


def valid_fsx_capacity(gib: int) -> bool:
    """SCRATCH_2 and PERSISTENT_2 (SSD): 1200 GiB, or any multiple of 2400 GiB."""
    return gib == 1200 or (gib > 0 and gib % 2400 == 0)


def is_quantity(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value >= 0
    return isinstance(value, str) and bool(_QUANTITY.match(value))


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.match(value))


class _Reader:
    """Reads typed values from one config mapping, recording errors under `path`."""

    def __init__(self, raw: Any, path: str, errors: list[str]) -> None:
        self.path = path
        self.errors = errors
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.err("", raw, "a mapping")
            raw = {}
        self.raw = raw

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if name else self.path

    def err(self, name: str, value: Any, valid: str) -> None:
        self.errors.append(f"{self.key(name)}: invalid value {value!r}; expected {valid}")

    def unknown(self, known: set[str]) -> None:
        for k in self.raw:
            if k not in known:
                self.errors.append(
                    f"{self.key(k)}: unknown key; known keys: {', '.join(sorted(known))}"
                )

    def boolean(self, name: str, default: bool) -> bool:
        v = self.raw.get(name, default)
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        if not isinstance(v, bool):
            self.err(name, v, "true or false")
            return default
        return v

    def integer(self, name: str, default: int | None, minimum: int = 1) -> int | None:
        v = self.raw.get(name, default)
        if v is None:
            return None
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            self.err(name, v, f"an integer >= {minimum}")
            return default
        return v

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        v = self.raw.get(name, default)
        if v not in choices:
            self.err(name, v, f"one of {', '.join(choices)}")
            return default
        return v

    def string(self, name: str, default: str | None) -> str | None:
        v = self.raw.get(name, default)
        if v is not None and (not isinstance(v, str) or not v):
            self.err(name, v, "a non-empty string")
            return default
        return v

    def quantity(self, name: str, default: str, integer: bool = False) -> str:
        v = self.raw.get(name, default)
        if not is_quantity(v):
            self.err(name, v, "a Kubernetes quantity such as 8, 500m, 64Gi or 1.5")
            return default
        if integer and not re.fullmatch(r"\d+", str(v)):
            self.err(name, v, "a whole number (extended resources such as GPUs are not divisible)")
            return default
        return str(v)

    def sub(self, name: str) -> _Reader:
        return _Reader(self.raw.get(name), self.key(name), self.errors)


# ----------------------------------------------------------------------------------------------
# Sections


def _fsx(r: _Reader) -> FsxConfig:
    r.unknown(
        {
            "enabled",
            "deploymentType",
            "storageCapacityGiB",
            "perUnitStorageThroughput",
            "mountPath",
            "dataRepository",
            "backupRetentionDays",
        }
    )
    enabled = r.boolean("enabled", True)
    dtype = r.choice("deploymentType", "PERSISTENT_2", FSX_DEPLOYMENT_TYPES)
    cap = r.integer("storageCapacityGiB", 1200)
    if cap is not None and not valid_fsx_capacity(cap):
        r.err("storageCapacityGiB", cap, f"for {dtype}: {FSX_CAPACITY_RULE}")
        cap = 1200
    throughput: int | None
    if dtype == "PERSISTENT_2":
        throughput = r.raw.get("perUnitStorageThroughput", 125)
        if throughput not in FSX_THROUGHPUT_TIERS or isinstance(throughput, bool):
            r.err(
                "perUnitStorageThroughput",
                throughput,
                f"one of {', '.join(map(str, FSX_THROUGHPUT_TIERS))} (MB/s per TiB, PERSISTENT_2)",
            )
            throughput = 125
    else:
        if r.raw.get("perUnitStorageThroughput") is not None:
            r.err(
                "perUnitStorageThroughput",
                r.raw["perUnitStorageThroughput"],
                "unset for SCRATCH_2 (its throughput is fixed at 200 MB/s per TiB)",
            )
        throughput = None
    mount = r.string("mountPath", "/fsx") or "/fsx"
    if not _K8S_PATH.match(mount):
        r.err("mountPath", mount, "an absolute path such as /fsx")
        mount = "/fsx"
    repo = None
    if r.raw.get("dataRepository") is not None:
        if dtype != "PERSISTENT_2":
            r.err(
                "dataRepository",
                r.raw["dataRepository"],
                "unset for SCRATCH_2 (data repository associations need PERSISTENT_2)",
            )
        else:
            repo = _data_repository(r.sub("dataRepository"))
    retention: int | None = None
    if dtype == "PERSISTENT_2":
        retention = r.raw.get("backupRetentionDays", 7)
        if (
            isinstance(retention, bool)
            or not isinstance(retention, int)
            or not 0 <= retention <= 90
        ):
            r.err("backupRetentionDays", retention, "an integer 0-90 (days; 0: no daily backups)")
            retention = 7
    elif r.raw.get("backupRetentionDays") is not None:
        r.err(
            "backupRetentionDays",
            r.raw["backupRetentionDays"],
            "unset for SCRATCH_2 (FSx takes no backups of scratch file systems)",
        )
    return FsxConfig(enabled, dtype, cap or 1200, throughput, mount, repo, retention)


_EVENTS = ("NEW", "CHANGED", "DELETED")


def _data_repository(r: _Reader) -> DataRepositoryConfig | None:
    r.unknown(
        {"dataRepositoryPath", "fileSystemPath", "importEvents", "exportEvents", "batchImport"}
    )
    path = r.raw.get("dataRepositoryPath")
    ok = True
    if not isinstance(path, str) or not re.fullmatch(
        r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?", path
    ):
        r.err("dataRepositoryPath", path, "an S3 URL such as s3://my-datasets/imagenet")
        ok = False
    fs_path = r.string("fileSystemPath", "/s3") or "/s3"
    if fs_path == "/" or not _K8S_PATH.match(fs_path):
        r.err("fileSystemPath", fs_path, "an absolute directory other than / such as /s3")
        ok = False
    events = {}
    for key in ("importEvents", "exportEvents"):
        v = r.raw.get(key, list(_EVENTS))
        if not isinstance(v, list) or any(e not in _EVENTS for e in v):
            r.err(key, v, f"a list drawn from {', '.join(_EVENTS)} (may be empty)")
            ok = False
            v = list(_EVENTS)
        events[key] = tuple(v)
    batch = r.boolean("batchImport", False)
    if not ok:
        return None
    return DataRepositoryConfig(
        path, fs_path, events["importEvents"], events["exportEvents"], batch
    )


def _checkpoints(r: _Reader) -> CheckpointConfig:
    r.unknown(
        {
            "enabled",
            "noncurrentVersionExpirationDays",
            "abortIncompleteMultipartDays",
            "forceDestroy",
        }
    )
    return CheckpointConfig(
        enabled=r.boolean("enabled", True),
        noncurrent_version_expiration_days=r.integer("noncurrentVersionExpirationDays", 30) or 30,
        abort_incomplete_multipart_days=r.integer("abortIncompleteMultipartDays", 7) or 7,
        force_destroy=r.boolean("forceDestroy", False),
    )


def _training_operator(r: _Reader) -> TrainingOperatorConfig:
    r.unknown({"enabled", "namespace", "chart"})
    enabled = r.boolean("enabled", True)
    ns = r.string("namespace", "kubeflow") or "kubeflow"
    if not is_dns_label(ns):
        r.err("namespace", ns, "a DNS-1123 label (lowercase letters, digits, '-')")
        ns = "kubeflow"
    chart = None
    if r.raw.get("chart") is not None:
        c = r.sub("chart")
        c.unknown({"repository", "version", "name"})
        repo = c.raw.get("repository")
        version = c.raw.get("version")
        ok = True
        if not isinstance(repo, str) or not re.match(r"^(https?|oci)://", repo):
            c.err(
                "repository",
                repo,
                "a Helm repository URL (https://... for a classic repository, or oci://... "
                "for a registry path: its chart is then oci://<path>/<name>)",
            )
            ok = False
        if not isinstance(version, str) or not version or version in ("latest", "*"):
            c.err("version", version, "a pinned chart version such as 1.9.4")
            ok = False
        name = c.string("name", "training-operator") or "training-operator"
        if ok:
            chart = HelmChartRef(repository=repo, version=version, name=name)
    return TrainingOperatorConfig(enabled, ns, chart)


def _device_plugins(r: _Reader) -> DevicePluginsConfig:
    r.unknown({"nvidia", "efa"})
    return DevicePluginsConfig(nvidia=r.boolean("nvidia", True), efa=r.boolean("efa", True))


def _monitoring(r: _Reader) -> MonitoringConfig:
    r.unknown(
        {
            "mode",
            "namespace",
            "dcgmExporter",
            "dcgmProfilingMetrics",
            "retention",
            "storageSize",
            "storageClass",
            "grafana",
            "alerts",
            "receivers",
        }
    )
    mode = r.choice("mode", "managed", MONITORING_MODES)
    ns = r.string("namespace", "monitoring") or "monitoring"
    if not is_dns_label(ns):
        r.err("namespace", ns, "a DNS-1123 label")
        ns = "monitoring"
    retention = r.string("retention", "15d") or "15d"
    if not re.fullmatch(r"\d+(ms|s|m|h|d|w|y)", retention):
        r.err("retention", retention, "a Prometheus duration such as 15d or 720h")
        retention = "15d"
    return MonitoringConfig(
        mode=mode,
        namespace=ns,
        dcgm_exporter=r.boolean("dcgmExporter", True),
        dcgm_profiling_metrics=r.boolean("dcgmProfilingMetrics", False),
        retention=retention,
        storage_size=r.quantity("storageSize", "50Gi"),
        storage_class=r.string("storageClass", None),
        grafana=r.boolean("grafana", False),
        alerts=_alerts(r.sub("alerts")),
        receivers=_receivers(r),
    )


def _duration(r: _Reader, name: str, default: str) -> str:
    v = r.raw.get(name, default)
    if not isinstance(v, str) or not _PROM_DURATION.fullmatch(v):
        r.err(name, v, "a Prometheus duration such as 30s, 15m or 2h")
        return default
    return v


def _alerts(r: _Reader) -> AlertsConfig:
    d = AlertsConfig()
    r.unknown(
        {
            "stalledAfter",
            "restartStormCount",
            "restartStormWindow",
            "checkpointMaxAge",
            "goodputMin",
            "goodputAfter",
            "queuePendingFor",
            "runbookBaseUrl",
        }
    )
    goodput = r.raw.get("goodputMin", d.goodput_min)
    if isinstance(goodput, bool) or not isinstance(goodput, int | float) or not 0 < goodput < 1:
        r.err("goodputMin", goodput, "a fraction between 0 and 1 such as 0.7")
        goodput = d.goodput_min
    base = r.string("runbookBaseUrl", d.runbook_base_url) or d.runbook_base_url
    if not re.fullmatch(r"https?://\S+/", base):
        r.err("runbookBaseUrl", base, "an http(s) URL ending in / (the docs/ folder)")
        base = d.runbook_base_url
    return AlertsConfig(
        stalled_after=_duration(r, "stalledAfter", d.stalled_after),
        restart_storm_count=r.integer("restartStormCount", d.restart_storm_count) or 3,
        restart_storm_window=_duration(r, "restartStormWindow", d.restart_storm_window),
        checkpoint_max_age=_duration(r, "checkpointMaxAge", d.checkpoint_max_age),
        goodput_min=float(goodput),
        goodput_after=_duration(r, "goodputAfter", d.goodput_after),
        queue_pending_for=_duration(r, "queuePendingFor", d.queue_pending_for),
        runbook_base_url=base,
    )


_SECRET_KEY = {"slack": "url", "pagerduty": "routingKey", "webhook": "url"}


def _receivers(parent: _Reader) -> tuple[ReceiverConfig, ...]:
    raw = parent.raw.get("receivers", [])
    if not isinstance(raw, list):
        parent.err("receivers", raw, "a list of {name, type, ...} receivers")
        return ()
    out: list[ReceiverConfig] = []
    for i, item in enumerate(raw):
        r = _Reader(item, f"{parent.key('receivers')}[{i}]", parent.errors)
        r.unknown({"name", "type", "url", "routingKey", "channel", "severities", "teams"})
        kind = r.choice("type", "webhook", RECEIVER_TYPES)
        name = r.string("name", f"{kind}-{i}") or f"{kind}-{i}"
        if not is_dns_label(name):
            r.err("name", name, "a DNS-1123 label")
        want = _SECRET_KEY[kind]
        for other in {"url", "routingKey"} - {want}:
            if other in r.raw:
                r.err(other, r.raw[other], f"no {other} on a {kind} receiver (it takes {want})")
        secret = r.raw.get(want)
        if isinstance(secret, dict) and set(secret) == {"secure"}:
            secret = "[secret]"  # an encrypted value read from the stack file itself
        if not isinstance(secret, str) or not secret:
            r.err(want, secret, f"the {kind} {want}, set with `pulumi config set --secret`")
            secret = ""
        elif want == "url" and secret != "[secret]" and not re.fullmatch(r"https?://\S+", secret):
            r.err(want, secret, "an http(s) URL")
        channel = r.string("channel", None)
        if "channel" in r.raw and kind != "slack":
            r.err("channel", r.raw["channel"], "a channel on slack receivers only")
        severities = _str_list(r, "severities", SEVERITIES, SEVERITIES)
        teams = _str_list(r, "teams", (), None)
        out.append(ReceiverConfig(name, kind, secret, channel, severities, teams))
    names = [x.name for x in out]
    for n in sorted({n for n in names if names.count(n) > 1}):
        parent.err("receivers", n, "unique receiver names")
    return tuple(out)


def _str_list(
    r: _Reader, name: str, default: tuple[str, ...], choices: tuple[str, ...] | None
) -> tuple[str, ...]:
    v = r.raw.get(name, list(default))
    valid = f"a list of {', '.join(choices)}" if choices else "a list of team names"
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        r.err(name, v, valid)
        return default
    if choices and any(x not in choices for x in v):
        r.err(name, v, valid)
        return default
    return tuple(v)


def _mlflow(r: _Reader) -> MlflowConfig:
    r.unknown({"enabled", "backend", "storageSize", "storageClass"})
    return MlflowConfig(
        enabled=r.boolean("enabled", False),
        backend=r.choice("backend", "pvc", MLFLOW_BACKENDS),
        storage_size=r.quantity("storageSize", "20Gi"),
        storage_class=r.string("storageClass", None),
    )


def _pool_quota(r: _Reader) -> PoolQuota:
    for k in r.raw:
        if k not in ("gpus", "cpu", "memory"):
            r.err(str(k), r.raw[k], "one of the keys gpus, cpu, memory")
    out = {}
    for key in ("gpus", "cpu", "memory"):
        if r.raw.get(key) is None:
            out[key] = None
            continue
        before = len(r.errors)
        value = r.quantity(key, "0", integer=key == "gpus")
        out[key] = value if len(r.errors) == before else None
    return PoolQuota(**out)


def _raw_pool_names(raw: dict[str, Any]) -> list[str] | None:
    """Node group and Karpenter pool names as written (the core parser checks them)."""
    names = []
    for key in ("nodeGroups", "nodePools"):
        items = raw.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            return None
        names += [i.get("name") for i in items if isinstance(i, dict) and i.get("name")]
    return names


def _team_quota(r: _Reader, pool_names: list[str] | None) -> TeamQuotaConfig:
    r.unknown({"gpus", "cpu", "memory", "pods", "pools", "borrowingLimit"})
    quota = TeamQuotaConfig(
        gpus=r.quantity("gpus", "0", integer=True),
        cpu=r.quantity("cpu", "16"),
        memory=r.quantity("memory", "64Gi"),
        pods=r.quantity("pods", "50", integer=True),
    )
    pools: list[tuple[str, PoolQuota]] = []
    raw_pools = r.raw.get("pools")
    if raw_pools is not None:
        p = r.sub("pools")
        for name in p.raw:
            if pool_names is not None and name not in pool_names:
                p.err(
                    str(name),
                    p.raw[name],
                    f"a quota for one of the node pools ({', '.join(pool_names) or 'none declared'})",
                )
                continue
            pools.append((str(name), _pool_quota(p.sub(str(name)))))
        from trainforge.core.quantity import parse_quantity  # noqa: PLC0415 - pure, no pulumi

        for key in ("gpus", "cpu", "memory"):
            total = parse_quantity(getattr(quota, key))
            given = sum(
                (parse_quantity(v) for _, q in pools if (v := getattr(q, key)) is not None), 0
            )
            if given > total:
                p.err(
                    "",
                    {n: getattr(q, key) for n, q in pools if getattr(q, key) is not None},
                    f"per-pool {key} adding up to at most the team's quota.{key} "
                    f"({getattr(quota, key)}): the namespace's ResourceQuota would refuse pods "
                    "the queue admitted",
                )
    borrowing = PoolQuota()
    if r.raw.get("borrowingLimit") is not None:
        borrowing = _pool_quota(r.sub("borrowingLimit"))
    return TeamQuotaConfig(quota.gpus, quota.cpu, quota.memory, quota.pods, tuple(pools), borrowing)


def _team_id(r: _Reader, key: str) -> int | None:
    v = r.raw.get(key)
    if v is None:
        return None
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not MIN_TEAM_ID <= v <= MAX_TEAM_ID:
        r.err(key, v, f"an integer from {MIN_TEAM_ID} to {MAX_TEAM_ID} (a POSIX id for the team)")
        return None
    return v


def _teams(
    raw: Any, errors: list[str], pool_names: list[str] | None = None
) -> tuple[TeamConfig, ...]:
    path = f"{NS}:teams"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(f"{path}: invalid value {raw!r}; expected a list of teams ({{name, quota}})")
        return ()
    teams: list[TeamConfig] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        r = _Reader(item, f"{path}[{i}]", errors)
        r.unknown(
            {"name", "quota", "defaults", "podSecurity", "claims", "uid", "gid", "cohort", "access"}
        )
        name = r.raw.get("name")
        if not is_dns_label(name):
            r.err(
                "name",
                name,
                "a DNS-1123 label: at most 63 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit (it becomes the namespace)",
            )
            continue
        if name in RESERVED_NAMESPACES or name.startswith("kube-"):
            r.err(
                "name",
                name,
                f"a name other than {', '.join(sorted(RESERVED_NAMESPACES))} and kube-*",
            )
            continue
        if name in seen:
            r.err("name", name, "a unique team name (it is already used by another team)")
            continue
        seen.add(name)
        quota = _team_quota(r.sub("quota"), pool_names)
        d = r.sub("defaults")
        d.unknown({"cpuRequest", "memoryRequest", "cpuLimit", "memoryLimit"})
        defaults = ContainerDefaults(
            cpu_request=d.quantity("cpuRequest", "500m"),
            memory_request=d.quantity("memoryRequest", "1Gi"),
            cpu_limit=d.quantity("cpuLimit", "2"),
            memory_limit=d.quantity("memoryLimit", "4Gi"),
        )
        pod_security = r.choice("podSecurity", "baseline", POD_SECURITY_LEVELS)
        cohort = r.string("cohort", DEFAULT_COHORT) or DEFAULT_COHORT
        if not is_dns_label(cohort):
            r.err("cohort", cohort, "a DNS-1123 label naming the cohort teams share")
            cohort = DEFAULT_COHORT
        teams.append(
            TeamConfig(
                name,
                quota,
                defaults,
                pod_security,
                claims=_claims(r, name),
                uid=_team_id(r, "uid"),
                gid=_team_id(r, "gid"),
                cohort=cohort,
                access=_team_access(r.sub("access")),
            )
        )
    _unique_ids(teams, path, errors)
    _one_team_per_principal(teams, path, errors)
    return tuple(teams)


def _one_team_per_principal(teams: list[TeamConfig], path: str, errors: list[str]) -> None:
    """EKS allows one access entry per principal: a principal in two teams is an error."""
    owner: dict[str, str] = {}
    for t in teams:
        for arn in t.access.principals:
            if arn in owner:
                errors.append(
                    f"{path}: principal {arn!r} is given to teams {owner[arn]!r} and {t.name!r}; "
                    "expected each IAM principal in one team's access.principals (EKS has one "
                    "access entry per principal)"
                )
            owner.setdefault(arn, t.name)


def _unique_ids(teams: list[TeamConfig], path: str, errors: list[str]) -> None:
    """Two teams with one UID (or GID) share every file on FSx: refuse it, naming both. A GID
    that merely follows a clashing UID is not reported twice."""
    clashing_uid: set[int] = set()
    for kind, get in (("uid", lambda t: t.run_as_user), ("gid", lambda t: t.run_as_group)):
        owner: dict[int, str] = {}
        for i, t in enumerate(teams):
            value = get(t)
            if value not in owner:
                owner[value] = t.name
                continue
            if kind == "uid":
                clashing_uid.add(i)
            elif t.gid is None and i in clashing_uid:
                continue  # the gid is the uid reported above
            explicit = getattr(t, kind) is not None
            if explicit:
                how = ""
            elif kind == "gid" and t.uid is not None:
                how = " (the team's uid)"
            else:
                how = " (derived from the team name)"
            fix = f"choose another {kind}" if explicit else f"set {kind} explicitly"
            errors.append(
                f"{path}[{i}].{kind}: invalid value {value!r}{how}; expected a {kind} "
                f"no other team uses (team {owner[value]!r} has it): {fix}"
            )


def _kueue(r: _Reader) -> KueueConfig:
    r.unknown({"enabled", "queueingStrategy", "preemption", "podsReadyTimeout"})
    p = r.sub("preemption")
    p.unknown({"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"})
    reclaim = p.choice("reclaimWithinCohort", "Any", RECLAIM_WITHIN_COHORT)
    borrow = p.choice("borrowWithinCohort", "LowerPriority", BORROW_WITHIN_COHORT)
    if reclaim == "Never" and borrow != "Never":
        # the ClusterQueue CRD's own rule
        p.err(
            "borrowWithinCohort",
            borrow,
            "Never while reclaimWithinCohort is Never (Kueue refuses the combination)",
        )
        borrow = "Never"
    timeout: str | None = "30m"
    raw_timeout = r.raw.get("podsReadyTimeout", "30m")
    if raw_timeout is False or (isinstance(raw_timeout, str) and raw_timeout.lower() == "false"):
        timeout = None
    elif not isinstance(raw_timeout, str) or not re.fullmatch(r"(\d+(h|m|s))+", raw_timeout):
        r.err("podsReadyTimeout", raw_timeout, "a duration such as 30m or 1h30m, or false")
    else:
        timeout = raw_timeout
    return KueueConfig(
        enabled=r.boolean("enabled", True),
        queueing_strategy=r.choice("queueingStrategy", "BestEffortFIFO", QUEUEING_STRATEGIES),
        within_cluster_queue=p.choice("withinClusterQueue", "LowerPriority", WITHIN_CLUSTER_QUEUE),
        reclaim_within_cohort=reclaim,
        borrow_within_cohort=borrow,
        pods_ready_timeout=timeout,
    )


def _claims(r: _Reader, team: str) -> tuple[str, ...]:
    raw = r.raw.get("claims")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.err("claims", raw, "a list of PersistentVolumeClaim names in the team's namespace")
        return ()
    out: list[str] = []
    for i, claim in enumerate(raw):
        if not (isinstance(claim, str) and len(claim) <= 253 and _DNS_SUBDOMAIN.match(claim)):
            r.err(f"claims[{i}]", claim, "a PersistentVolumeClaim name (a DNS-1123 subdomain)")
        elif claim == f"fsx-{team}":  # trainforge.platform.fsx.claim_name (imports pulumi)
            r.err(f"claims[{i}]", claim, "another claim: the team's FSx claim is always mounted")
        elif claim in out:
            r.err(f"claims[{i}]", claim, "each claim once")
        else:
            out.append(claim)
    return tuple(out)


def _job_backends(raw: dict[str, Any], errors: list[str]) -> tuple[str, tuple[str, ...]]:
    """The default backend and the backends to install. Jobs declared in this stack's config
    name theirs (`backend:`), so their controllers are installed without being listed; jobs
    declared elsewhere (Python, another program) need `trainforge:jobBackends`. A bad job
    `backend:` is reported by the job parser, with the job's index."""
    default = raw.get("jobBackend", DEFAULT_BACKEND)
    if default not in BACKENDS:
        errors.append(
            f"{NS}:jobBackend: invalid value {default!r}; expected one of {', '.join(BACKENDS)}"
        )
        default = DEFAULT_BACKEND
    wanted = {default}
    extra = raw.get("jobBackends")
    if extra is not None:
        if not isinstance(extra, list) or any(b not in BACKENDS for b in extra):
            errors.append(
                f"{NS}:jobBackends: invalid value {extra!r}; expected a list drawn from "
                f"{', '.join(BACKENDS)}"
            )
        else:
            wanted |= set(extra)
    jobs = raw.get("jobs")
    for job in jobs if isinstance(jobs, list) else []:
        if isinstance(job, dict) and job.get("backend") in BACKENDS:
            wanted.add(job["backend"])
    return default, tuple(b for b in BACKENDS if b in wanted)


SERVICE_KEYS = (
    "fsx",
    "checkpoints",
    "trainingOperator",
    "devicePlugins",
    "monitoring",
    "mlflow",
    "kueue",
    "teams",
    "jobBackend",
    "jobBackends",
)


def parse_services_config(raw: dict[str, Any], errors: list[str]) -> ServicesConfig:
    """Parse the services' keys of the whole `trainforge:` config; append problems to `errors`.

    Keys that belong to other parts of the config are ignored; unknown keys *inside* a services
    section are errors. Never raises on bad input.
    """
    raw = raw or {}
    job_backend, job_backends = _job_backends(raw, errors)
    config = ServicesConfig(
        fsx=_fsx(_Reader(raw.get("fsx"), f"{NS}:fsx", errors)),
        checkpoints=_checkpoints(_Reader(raw.get("checkpoints"), f"{NS}:checkpoints", errors)),
        training_operator=_training_operator(
            _Reader(raw.get("trainingOperator"), f"{NS}:trainingOperator", errors)
        ),
        device_plugins=_device_plugins(
            _Reader(raw.get("devicePlugins"), f"{NS}:devicePlugins", errors)
        ),
        monitoring=_monitoring(_Reader(raw.get("monitoring"), f"{NS}:monitoring", errors)),
        mlflow=_mlflow(_Reader(raw.get("mlflow"), f"{NS}:mlflow", errors)),
        kueue=_kueue(_Reader(raw.get("kueue"), f"{NS}:kueue", errors)),
        teams=_teams(raw.get("teams"), errors, _raw_pool_names(raw)),
        job_backend=job_backend,
        job_backends=job_backends,
    )
    team_names = {t.name for t in config.teams}
    for i, rcv in enumerate(config.monitoring.receivers):
        for team in rcv.teams:
            if team not in team_names:
                errors.append(
                    f"{NS}:monitoring.receivers[{i}].teams: got unknown team {team!r}; "
                    f"expected one of {', '.join(sorted(team_names)) or '(no teams)'}"
                )
    ns_used = {config.training_operator.namespace, config.monitoring.namespace}
    for t in config.teams:
        if t.name in ns_used:
            errors.append(
                f"{NS}:teams: team {t.name!r} collides with a platform namespace "
                f"({', '.join(sorted(ns_used))}); choose another name"
            )
    return config
