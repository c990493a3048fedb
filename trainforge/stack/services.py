"""The cluster services' keys: FSx, checkpoints, the training operator, device plugins,
monitoring and alerts, MLflow, Kueue, teams and their quotas, and the job backends.

Each key is declared once, here: a field with its type, default and bounds, and the docstring
below it as its one-line description. These models are the config objects trainforge/platform
reads (trainforge/platform/services_config.py validates a stack through them). Rules between
keys sit next to the fields they relate. Rules that need another area's names (the node pools a
quota names, the teams a receiver names, the backends stack jobs name) read them from the
validation context `services_context(raw)` builds from the whole `trainforge:` mapping; a model
built in Python has none and skips them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from trainforge.core import names, platform_names
from trainforge.core.contract import BACKENDS, DEFAULT_BACKEND, fsx_claim_name
from trainforge.core.quantity import parse_quantity
from trainforge.stack.base import (
    MISSING,
    Bool,
    Float,
    Int,
    Memory,
    Namespace,
    Problems,
    Quantity,
    StackModel,
    matching,
    one_of,
)

# MB/s per TiB for PERSISTENT_2 (SSD). SCRATCH_2 has a fixed 200 MB/s/TiB baseline.
FSX_THROUGHPUT_TIERS = (125, 250, 500, 1000)
FSX_CAPACITY_RULE = "1200 GiB or a multiple of 2400 GiB (1200, 2400, 4800, 7200, 9600, ...)"
DEFAULT_COHORT = "trainforge"
# Team UIDs/GIDs: above the system and login ranges, below the 2^31 limit of runAsUser.
MIN_TEAM_ID = 10000
MAX_TEAM_ID = 2**31 - 1
_DEFAULT_ID_BASE = 100000
_DEFAULT_ID_SPAN = 900000


# ---------------------------------------------------------------------------------------------
# Value types: what a key holds, and the error's "what is valid"


def _whole(value: str) -> str:
    if not re.fullmatch(r"\d+", value):
        raise ValueError("a whole number (extended resources such as GPUs are not divisible)")
    return value


def _team_id(value: Any) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_TEAM_ID <= value <= MAX_TEAM_ID
    ):
        raise ValueError(
            f"an integer from {MIN_TEAM_ID} to {MAX_TEAM_ID} (a POSIX id for the team)"
        )
    return value


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def prometheus_seconds(duration: str) -> float:
    """A Prometheus duration as the stack takes one (`15m`, `32d`: `PromDuration`) in seconds."""
    m = re.fullmatch(_DURATION, duration)
    if not m:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    unit = m.group(1)
    return int(duration[: -len(unit)]) * _UNITS[unit]


# Kueue's waitForPodsReady.timeout, a Go duration (metav1.Duration) in whole h/m/s
_TIMEOUT = r"(\d+(h|m|s))+"


def _pods_ready_timeout(value: Any) -> str | None:
    if value in (None, False) or (isinstance(value, str) and value.lower() == "false"):
        return None
    if not isinstance(value, str) or not re.fullmatch(_TIMEOUT, value):
        raise ValueError("a duration such as 30m or 1h30m, or false")
    return value


def _backend_list(value: Any) -> Any:
    if not isinstance(value, list | tuple) or any(b not in BACKENDS for b in value):
        raise ValueError(f"a list drawn from {', '.join(BACKENDS)}")
    return value


_PATH = r"/[A-Za-z0-9._/-]*"
_DURATION = r"\d+(ms|s|m|h|d|w|y)"
NonEmpty = matching(r".+", "a non-empty string")
TeamName = matching(
    names.DNS1123_LABEL,
    "a DNS-1123 label: at most 63 lowercase letters, digits or '-', "
    "starting and ending with a letter or digit (it becomes the namespace)",
    names.DNS1123_LABEL_MAX,
)
Cohort = matching(
    names.DNS1123_LABEL, "a DNS-1123 label naming the cohort teams share", names.DNS1123_LABEL_MAX
)
ClaimName = matching(
    names.DNS1123_SUBDOMAIN,
    "a PersistentVolumeClaim name (a DNS-1123 subdomain: dot-separated DNS-1123 labels)",
    names.DNS1123_SUBDOMAIN_MAX,
)
S3Url = matching(
    r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?", "an S3 URL such as s3://my-datasets/imagenet"
)
HelmRepository = matching(
    r"(https?|oci)://.+",
    "a Helm repository URL (https://... for a classic repository, or oci://... "
    "for a registry path: its chart is then oci://<path>/<name>)",
)
IamPrincipal = matching(
    r"arn:aws[\w-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+",
    "an IAM role or user ARN such as arn:aws:iam::111122223333:role/MlEngineer",
)
PromDuration = matching(_DURATION, "a Prometheus duration such as 30s, 15m or 2h")
Count = Annotated[Quantity, AfterValidator(_whole)]  # a whole quantity
TeamId = Annotated[
    int,
    BeforeValidator(_team_id),
    WithJsonSchema({"type": "integer", "minimum": MIN_TEAM_ID, "maximum": MAX_TEAM_ID}),
]
# An encrypted value read from the stack file itself (the plan reads it undecrypted).
Secret = Annotated[
    str,
    BeforeValidator(lambda v: "[secret]" if isinstance(v, dict) and set(v) == {"secure"} else v),
]
Backend = Literal[BACKENDS]  # type: ignore[valid-type]
Event = Literal["NEW", "CHANGED", "DELETED"]
_TIMEOUT_SCHEMA = {"anyOf": [{"type": "string", "pattern": f"^{_TIMEOUT}$"}, {"const": False}]}


# ---------------------------------------------------------------------------------------------
# FSx for Lustre and the checkpoint bucket


def valid_fsx_capacity(gib: int) -> bool:
    """SCRATCH_2 and PERSISTENT_2 (SSD): 1200 GiB, or any multiple of 2400 GiB."""
    return gib == 1200 or (gib > 0 and gib % 2400 == 0)


class DataRepositoryConfig(StackModel):
    """An S3 data repository association (PERSISTENT_2 only): lazy import and auto export."""

    data_repository_path: S3Url
    """an S3 URL such as `s3://bucket[/prefix]`: the bucket linked to the file system."""
    file_system_path: matching(
        f"(?!/$){_PATH}", "an absolute directory other than / such as /s3"
    ) = "/s3"
    """Directory of the file system the bucket appears under."""
    import_events: tuple[Event, ...] = ("NEW", "CHANGED", "DELETED")
    """Automatic import from S3 of these changes (may be `[]`)."""
    export_events: tuple[Event, ...] = ("NEW", "CHANGED", "DELETED")
    """Automatic export to S3 of these changes (may be `[]`)."""
    batch_import_meta_data_on_create: Bool = Field(False, alias="batchImport")
    """Import all object metadata when the association is created."""


class FsxConfig(StackModel):
    """FSx for Lustre: one file system, a directory and a claim per team."""

    enabled: Bool = True
    """Declare the file system, CSI add-on and per-team claims."""
    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = "PERSISTENT_2"
    """`PERSISTENT_2` (replicated, customer KMS key) or `SCRATCH_2` (dev: no replication, AWS-managed key)."""
    storage_capacity_gib: Int = Field(1200, alias="storageCapacityGiB", ge=1)
    """1200 or a multiple of 2400 (AWS rule for both types)."""
    per_unit_storage_throughput: Int | None = Field(None, validate_default=True)
    """MB/s per TiB for `PERSISTENT_2`: 125 (unset), 250, 500 or 1000. Must be unset for `SCRATCH_2`."""
    mount_path: matching(_PATH, "an absolute path such as /fsx") = "/fsx"
    """Where jobs mount the team's claim."""
    data_repository: DataRepositoryConfig | None = None
    """An S3 bucket linked to the file system (`PERSISTENT_2` only)."""
    backup_retention_days: Int | None = Field(None, validate_default=True)
    """Days FSx keeps its daily automatic backups, 0-90 (unset: 7; 0: none; a final backup is still taken on delete). `PERSISTENT_2` only; must be unset for `SCRATCH_2` (FSx backs up no scratch file system)."""

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, gib: int, info: ValidationInfo) -> int:
        if not valid_fsx_capacity(gib):
            dtype = info.data.get("deployment_type")
            raise ValueError(f"for {dtype}: {FSX_CAPACITY_RULE}" if dtype else FSX_CAPACITY_RULE)
        return gib

    @field_validator("per_unit_storage_throughput", "backup_retention_days", "data_repository")
    @classmethod
    def _persistent_only(cls, value: Any, info: ValidationInfo) -> Any:
        """PERSISTENT_2's defaults and bounds; SCRATCH_2 has none of these."""
        key = info.field_name
        if info.data.get("deployment_type") == "SCRATCH_2":
            if value is not None:
                raise ValueError(f"unset for SCRATCH_2 ({_SCRATCH_HAS_NO[key]})")
            return None
        if key == "per_unit_storage_throughput":
            value = 125 if value is None else value
            if value not in FSX_THROUGHPUT_TIERS:
                tiers = ", ".join(map(str, FSX_THROUGHPUT_TIERS))
                raise ValueError(f"one of {tiers} (MB/s per TiB, PERSISTENT_2)")
        elif key == "backup_retention_days":
            value = 7 if value is None else value
            if not 0 <= value <= 90:
                raise ValueError("an integer 0-90 (days; 0: no daily backups)")
        return value


_SCRATCH_HAS_NO = {
    "per_unit_storage_throughput": "its throughput is fixed at 200 MB/s per TiB",
    "backup_retention_days": "FSx takes no backups of scratch file systems",
    "data_repository": "data repository associations need PERSISTENT_2",
}


class CheckpointConfig(StackModel):
    """The checkpoint bucket and one Pod Identity role per team."""

    enabled: Bool = True
    """Declare the bucket and one Pod Identity role per team (access to `<team>/` only)."""
    noncurrent_version_expiration_days: Int = Field(30, ge=1)
    """Days before overwritten/deleted object versions expire."""
    abort_incomplete_multipart_days: Int = Field(7, ge=1)
    """Days before an unfinished multipart upload is aborted."""
    force_destroy: Bool = False
    """Let `pulumi destroy` delete a non-empty bucket (off: checkpoints are weeks of GPU time)."""


# ---------------------------------------------------------------------------------------------
# The training operator and the device plugins


class HelmChartRef(StackModel):
    """A user's chart: a classic Helm repository (https://, its index.yaml lists the chart) or
    an OCI registry path (oci://). pulumi-kubernetes resolves the two differently: an OCI
    chart is given whole as the Release's `chart` with no `repository_opts` (a `repo` is
    always fetched as `<repo>/index.yaml`, which a registry does not serve)."""

    repository: HelmRepository
    """the chart's repository. `https://...`: a classic repository whose `index.yaml` lists `name`; `oci://registry/path`: the chart `oci://registry/path/<name>` (a path already ending in `/<name>` is used as is)."""
    version: matching(r"(?!latest$|\*$).+", "a pinned chart version such as 1.9.4")
    """a pinned chart version such as 1.9.4 (never `latest`)."""
    name: NonEmpty = "training-operator"
    """The chart's name."""

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


class TrainingOperatorConfig(StackModel):
    """The Kubeflow training operator v1 (PyTorchJob)."""

    enabled: Bool = True
    """Install the training operator v1 (PyTorchJob) when `pytorchjob` is one of the job backends. `false`: the cluster already runs one."""
    namespace: Namespace = platform_names.TRAINING_OPERATOR_NAMESPACE
    """Namespace for a Helm install (the upstream overlay always uses `kubeflow`)."""
    chart: HelmChartRef | None = None
    """Install from this Helm chart (pinned version) instead of the upstream kustomize overlay at `v1.9.4`."""


class DevicePluginsConfig(StackModel):
    """Device plugins, each only where its devices exist."""

    nvidia: Bool = True
    """NVIDIA device plugin on GPU nodes (only when GPU capacity exists)."""
    efa: Bool = True
    """EFA device plugin on nodes labelled `vpc.amazonaws.com/efa.present=true` (only when EFA capacity exists)."""


# ---------------------------------------------------------------------------------------------
# Monitoring, alerts and where they go


class AlertsConfig(StackModel):
    """Thresholds of trainforge's alerts (trainforge.platform.alerts)."""

    stalled_after: PromDuration = "15m"
    """TrainforgeJobStalled: no optimizer step for this long while the run is unfinished; also how long rank 0's metrics may be unreachable."""
    restart_storm_count: Int = Field(3, ge=1)
    """TrainforgeRestartStorm: this many restarts (torchrun restarts and pod re-creations)..."""
    restart_storm_window: PromDuration = "1h"
    """...within this window."""
    checkpoint_max_age: PromDuration = "2h"
    """TrainforgeCheckpointTooOld: training since the last checkpoint (steps x step time) longer than this."""
    goodput_min: Float = Field(0.7, gt=0, lt=1)
    """TrainforgeGoodputLow: goodput below this fraction..."""
    goodput_after: PromDuration = "1h"
    """...once the run's wall time is past this (start-up makes early goodput low)."""
    queue_pending_for: PromDuration = "1h"
    """TrainforgeQueueStarved / TrainforgeQueueInadmissible: a team queue with workloads waiting and none admitted (or inadmissible) this long."""
    budget_fraction: Float = Field(0.8, gt=0, le=1)
    """TrainforgeTeamSpendOverBudget: a team's month-to-date spend (OpenCost) above this fraction of its monthly budget (`trainforge-policy:costCaps.teams.<team>.teamPerMonth`)."""
    runbook_base_url: matching(
        r"https?://\S+/", "an http(s) URL ending in / (the docs/ folder)"
    ) = "https://github.com/trainforge/trainforge/blob/main/docs/"
    """Where alerts' `runbook_url` links point: this repository's docs/ folder as a URL, ending in `/`."""


# The key holding each receiver type's secret.
_SECRET_KEY = {"slack": "url", "pagerduty": "routingKey", "webhook": "url"}


def receiver_name(receiver: Mapping[str, Any], index: int) -> str:
    """The name the receiver at `index` of `monitoring.receivers` goes by: its `name`, unset
    `<type>-<index>` (type unset: `webhook`). The model names unnamed receivers with it, and
    the plan, which reads the raw config (its URLs `[secret]`, which the model rejects), finds
    a receiver by the same name."""
    if "name" in receiver:
        return str(receiver["name"])
    kind = receiver.get("type", "webhook")
    return f"{kind if isinstance(kind, str) else 'receiver'}-{index}"


class ReceiverConfig(StackModel):
    """One Alertmanager receiver; its secret (Slack webhook URL, PagerDuty routing key, webhook
    URL) is set with `pulumi config set --secret --path` and reaches the chart as a secret."""

    name: matching(names.DNS1123_LABEL, "a DNS-1123 label", names.DNS1123_LABEL_MAX)
    """A DNS-1123 label, unique among receivers (unset: `<type>-<index>`)."""
    type: Literal["slack", "pagerduty", "webhook"] = "webhook"
    """`slack`, `pagerduty` or `webhook`: an Alertmanager receiver (with `mode: external` your Alertmanager routes the alerts, labelled `platform=trainforge`)."""
    url: Secret | None = None
    """The Slack incoming-webhook URL or the webhook URL (slack, webhook); a secret: `pulumi config set --secret --path`."""
    routing_key: Secret | None = None
    """The PagerDuty Events v2 integration key (pagerduty); a secret: `pulumi config set --secret --path`."""
    channel: NonEmpty | None = None
    """Slack channel (slack only; unset: the webhook's own)."""
    severities: tuple[Literal["critical", "warning"], ...] = ("critical", "warning")
    """Which alerts it gets: `critical` (GPUs idle or broken: page) and/or `warning`."""
    teams: tuple[NonEmpty, ...] = ()
    """Only alerts of these teams' jobs; team-less alerts (GPUs, nodes, queues) go to receivers without `teams`."""

    @property
    def secret(self) -> str:
        """The url or routing key, whichever this receiver's type takes."""
        return (self.url if _SECRET_KEY[self.type] == "url" else self.routing_key) or ""

    @field_validator("teams")
    @classmethod
    def _teams_exist(cls, teams: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known = (info.context or {}).get("team_names")
        if known is not None:
            Problems.raise_any(
                ((i,), t, one_of(t, known, "teams")) for i, t in enumerate(teams) if t not in known
            )
        return teams

    @model_validator(mode="before")
    @classmethod
    def _secrets_given(cls, data: Any) -> Any:
        """Both secret keys are validated (against the type) even when absent."""
        if not isinstance(data, dict):
            return data
        unset = [
            k
            for k, n in (("url", "url"), ("routingKey", "routing_key"))
            if k not in data and n not in data
        ]
        return {**data, **dict.fromkeys(unset)}

    @field_validator("url", "routing_key", "channel")
    @classmethod
    def _fits_the_type(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("type")
        if kind is None:
            return value  # a bad type is reported alone
        key = to_camel(info.field_name or "")
        want = _SECRET_KEY[kind]
        if key == "channel" and value is not None and kind != "slack":
            raise ValueError("a channel on slack receivers only")
        if key != want and key != "channel" and value is not None:
            raise ValueError(f"no {key} on a {kind} receiver (it takes {want})")
        if key == want and not value:
            expected = f"the {kind} {want}, set with `pulumi config set --secret`"
            raise Problems([((), MISSING if value is None else value, expected)])
        if (
            key == want == "url"
            and value != "[secret]"
            and not re.fullmatch(r"https?://\S+", value)
        ):
            raise ValueError("an http(s) URL")
        return value


# A month-to-date spend sums the month's samples: the longest month, and a day to spare.
MONTH_RETENTION_DAYS = 32


class OpenCostConfig(StackModel):
    """OpenCost: what each namespace (team) really costs, from the nodes its pods hold."""

    enabled: Bool = True
    """Install OpenCost (`mode: managed` only) on the platform's Prometheus: per-namespace cost from AWS's public on-demand prices (no AWS credential), a Grafana board and the team budget alert."""


class MonitoringConfig(StackModel):
    """Metrics, dashboards and alerts."""

    mode: Literal["managed", "external"] = "managed"
    """`managed`: kube-prometheus-stack selecting every ServiceMonitor/PodMonitor; `external`: use an existing Prometheus operator."""
    namespace: Namespace = platform_names.MONITORING_NAMESPACE
    """Namespace of the stack; team NetworkPolicies admit scraping from it."""
    dcgm_exporter: Bool = True
    """DCGM exporter + ServiceMonitor on GPU nodes (namespace `node-agents`)."""
    dcgm_profiling_metrics: Bool = False
    """Collect DCGM's profiling metrics (`DCGM_FI_PROF_*`: tensor-core, SM and DRAM activity, PCIe bytes), which need `CAP_SYS_ADMIN` in the exporter. Off: the exporter runs with no capability and collects the device metrics (utilisation, memory, power, clocks, XID errors)."""
    retention: matching(_DURATION, "a Prometheus duration such as 15d or 720h") = "32d"
    """Prometheus retention (a Prometheus duration); at least 32d while OpenCost is on (a month-to-date spend reads the whole month)."""
    storage_size: Quantity = "50Gi"
    """Prometheus volume size (a Kubernetes quantity)."""
    storage_class: NonEmpty | None = None
    """StorageClass of the Prometheus volume (unset: the encrypted gp3 class trainforge declares; EKS has no default class)."""
    grafana: Bool = False
    """Install Grafana. The stack creates its admin Secret `grafana-admin` (keys `admin-user`: admin, `admin-password`: generated) in the monitoring namespace before the release; the chart's default password is never used."""
    alerts: AlertsConfig = AlertsConfig()
    """Thresholds of trainforge's alerts."""
    receivers: tuple[ReceiverConfig, ...] = ()
    """Where alerts go (managed mode). No receivers: the alerts reach nobody, and the plan says so."""
    opencost: OpenCostConfig = OpenCostConfig()
    """OpenCost: real spend per namespace (team), on the platform's Prometheus."""

    @property
    def runs_opencost(self) -> bool:
        """OpenCost is installed: on, on the managed stack (it reads that Prometheus)."""
        return self.opencost.enabled and self.mode == "managed"

    @model_validator(mode="after")
    def _retention_holds_a_month(self) -> MonitoringConfig:
        if self.runs_opencost and prometheus_seconds(self.retention) < MONTH_RETENTION_DAYS * 86400:
            expected = (
                f"at least {MONTH_RETENTION_DAYS}d while opencost.enabled is true (a team's "
                "month-to-date spend sums the whole month's samples), or opencost.enabled: false"
            )
            raise Problems([(("retention",), self.retention, expected)])
        return self

    @field_validator("receivers", mode="before")
    @classmethod
    def _default_names(cls, receivers: Any) -> Any:
        if not isinstance(receivers, list):
            return receivers
        out = []
        for i, r in enumerate(receivers):
            if isinstance(r, dict) and "name" not in r:
                r = {**r, "name": receiver_name(r, i)}
            out.append(r)
        return out

    @field_validator("receivers")
    @classmethod
    def _unique_names(cls, receivers: tuple[ReceiverConfig, ...]) -> tuple[ReceiverConfig, ...]:
        names = [r.name for r in receivers]
        Problems.raise_any(
            ((i, "name"), n, "a name no other receiver has")
            for i, n in enumerate(names)
            if n in names[:i]
        )
        return receivers


class MlflowConfig(StackModel):
    """An MLflow tracking server with one user per team."""

    enabled: Bool = False
    """Run an MLflow tracking server in namespace `mlflow` with its built-in authentication (one user per team, default permission `NO_PERMISSIONS`); jobs get `MLFLOW_TRACKING_URI` and their team's credentials."""
    backend: Literal["pvc", "sqlite-ephemeral"] = "pvc"
    """`pvc` (SQLite + artifacts on a volume, survives restarts) or `sqlite-ephemeral` (emptyDir, dev only)."""
    storage_size: Quantity = "20Gi"
    """Volume size for `pvc`."""
    storage_class: NonEmpty | None = None
    """StorageClass for `pvc` (unset: the encrypted gp3 class trainforge declares)."""


# ---------------------------------------------------------------------------------------------
# Kueue


class KueuePreemption(StackModel):
    """Which running jobs a waiting job may preempt (Kueue v0.19 ClusterQueue `preemption`)."""

    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = (
        "LowerPriority"
    )
    """Which of the team's own running jobs a waiting job may preempt."""
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    """Which other teams' jobs, running on quota they borrowed, a team may preempt to get its nominal quota back."""
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "LowerPriority"
    """A job that must borrow may preempt other teams' borrowing jobs of lower priority, up to `low`. Must be `Never` when `reclaimWithinCohort` is `Never`."""

    @model_validator(mode="after")
    def _kueue_accepts_the_combination(self) -> KueuePreemption:
        if self.reclaim_within_cohort == "Never" and self.borrow_within_cohort != "Never":
            expected = "Never while reclaimWithinCohort is Never (Kueue refuses the combination)"
            raise Problems([(("borrowWithinCohort",), self.borrow_within_cohort, expected)])
        return self


class KueueConfig(StackModel):
    """Queueing with gang admission (trainforge.platform.kueue)."""

    enabled: Bool = True
    """Install Kueue, a ClusterQueue and LocalQueues `training` and `default` per team (jobs without a queue label are queued too), a Cohort, a ResourceFlavor per pool and the priority classes. `false`: jobs start as soon as they are created, capped by the namespace quota only."""
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    """`BestEffortFIFO` (a job that does not fit lets later jobs of the team try) or `StrictFIFO` (it blocks the team's queue)."""
    preemption: KueuePreemption = KueuePreemption()
    """Which running jobs a waiting job may preempt."""
    pods_ready_timeout: Annotated[
        str | None, BeforeValidator(_pods_ready_timeout), WithJsonSchema(_TIMEOUT_SCHEMA)
    ] = "30m"
    """An admitted job whose pods are not all running after this long is evicted and requeued; `false` turns this off (Kueue waitForPodsReady)."""

    @property
    def within_cluster_queue(self) -> str:
        return self.preemption.within_cluster_queue

    @property
    def reclaim_within_cohort(self) -> str:
        return self.preemption.reclaim_within_cohort

    @property
    def borrow_within_cohort(self) -> str:
        return self.preemption.borrow_within_cohort


# ---------------------------------------------------------------------------------------------
# Teams


class PoolQuota(StackModel):
    """An amount of GPUs, CPU and memory in one node pool (None: not given)."""

    gpus: Count | None = None
    """GPUs (a whole number)."""
    cpu: Quantity | None = None
    """CPU (a Kubernetes quantity)."""
    memory: Memory | None = None
    """Memory (a Kubernetes quantity)."""


class TeamQuotaConfig(StackModel):
    """A team's quota: its totals, an explicit split per pool, what it may borrow."""

    gpus: Count = "0"
    """The team's guaranteed GPUs (a whole number), split over the GPU pools in proportion to what each holds (or by `pools`); per pool, the teams' guarantees never add up to more than the pool holds (scaled down, with a plan warning). The CPU and memory that come with the GPUs follow them."""
    cpu: Quantity = "16"
    """Its guaranteed CPU (a Kubernetes quantity) for CPU-only work, split over the CPU pools like `gpus`."""
    memory: Memory = "64Gi"
    """Its guaranteed memory for CPU-only work, split over the CPU pools like `gpus`."""
    pods: Count = "50"
    """`pods` in the namespace's ResourceQuota (a whole number)."""
    # (pool, quota) pairs in the config object, so that a team stays hashable.
    pools: Annotated[
        Mapping[str, PoolQuota],
        BeforeValidator(lambda v: dict(v) if isinstance(v, tuple) else v),
        AfterValidator(lambda v: tuple(v.items())),
        PlainSerializer(dict),
    ] = Field({}, validate_default=True)
    """An explicit split: nominal quota per pool, `{<pool>: {gpus, cpu, memory}}` (0 keeps the team out of a pool; `gpus` only under a GPU pool); the pools it does not name share the rest of the totals; adding up to at most the totals."""
    borrowing_limit: PoolQuota = PoolQuota()
    """`{gpus, cpu, memory}`: the most the team may borrow from its cohort in any one pool beyond its nominal quota there (unset: whatever the cohort has idle)."""

    @field_validator("pools")
    @classmethod
    def _pools_exist(cls, pools: Any, info: ValidationInfo) -> Any:
        names = (info.context or {}).get("pool_names")
        if names is not None:
            Problems.raise_any(
                ((n,), n, one_of(n, names, "node pools")) for n, _ in pools if n not in names
            )
        # a CPU pool's gpus would count in the totals' check and be spent nowhere
        gpu_of = (info.context or {}).get("gpu_of") or {}
        gpu_pools = ", ".join(sorted(n for n, has in gpu_of.items() if has)) or "none declared"
        Problems.raise_any(
            ((n, "gpus"), q.gpus, f"no gpus for pool {n}, which has no GPUs (gpus only under "
             f"a GPU pool: {gpu_pools})")
            for n, q in pools
            if q.gpus is not None and gpu_of.get(n) is False
        )  # fmt: skip
        return pools

    @model_validator(mode="after")
    def _pools_fit_the_totals(self) -> TeamQuotaConfig:
        problems = []
        for key in ("gpus", "cpu", "memory"):
            given = {n: v for n, q in self.pools if (v := getattr(q, key)) is not None}
            total = getattr(self, key)
            if sum(map(parse_quantity, given.values()), 0) > parse_quantity(total):
                expected = (
                    f"per-pool {key} adding up to at most the team's quota.{key} ({total}): the "
                    "namespace's ResourceQuota would refuse pods the queue admitted"
                )
                problems.append((("pools",), given, expected))
        Problems.raise_any(problems)
        return self


class ContainerDefaults(StackModel):
    """LimitRange defaults for containers that do not say what they need."""

    cpu_request: Quantity = "500m"
    """LimitRange default CPU request for containers that set none."""
    memory_request: Memory = "1Gi"
    """LimitRange default memory request."""
    cpu_limit: Quantity = "2"
    """LimitRange default CPU limit."""
    memory_limit: Memory = "4Gi"
    """LimitRange default memory limit."""


class TeamAccessConfig(StackModel):
    """Who may use the cluster as the team (trainforge.platform.team_access)."""

    principals: tuple[IamPrincipal, ...] = ()
    """IAM role or user ARNs of the team's members (each in one team): each gets an EKS access entry in Kubernetes group `trainforge:team:<team>`, which may read the team's jobs, workloads, pods, logs and events in its namespace; never Secrets."""
    create_jobs: Bool = False
    """Also create, update and delete the team's jobs (PyTorchJob, TrainJob, batch Job) and their ConfigMaps/Services."""


def default_team_id(name: str) -> int:
    """A team's UID/GID when the config does not set one: derived from the team's name, so
    that it never changes when teams are added, removed or reordered (an index would, and
    every file the team wrote on FSx would then belong to someone else)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return _DEFAULT_ID_BASE + digest % _DEFAULT_ID_SPAN


class TeamConfig(StackModel):
    """A team: its namespace, quota, queue, identity on FSx and who may act as it."""

    # The reserved names are read from core.platform_names, the list the components that
    # create those namespaces and ClusterQueues read their own names from.
    name: TeamName = Field(
        description="the team's name, a DNS-1123 label, unique; it becomes the namespace and "
        "the ClusterQueue. Not "
        + ", ".join(f"`{n}`" for n in sorted(platform_names.RESERVED_TEAM_NAMES))
        + f", `{platform_names.KUBERNETES_PREFIX}*` (the platform's own namespaces and "
        "ClusterQueues)."
    )
    quota: TeamQuotaConfig = TeamQuotaConfig()
    """The team's quota (docs/teams.md, "Quotas")."""
    defaults: ContainerDefaults = ContainerDefaults()
    """LimitRange defaults for containers that set none."""
    # `baseline` by default: the training operator injects an `init-pytorch` container into
    # Worker pods of Master/Worker PyTorchJobs without a securityContext.
    pod_security: Literal["baseline", "restricted"] = "baseline"
    """Enforced Pod Security level (`restricted` is always warned and audited). `restricted` rejects the operator's `init-pytorch` container in the Workers of Master/Worker PyTorchJobs (the plan reports it: `TRAINFORGE_POD_SECURITY`): use it for teams whose jobs are elastic (Worker-only), TrainJobs or indexed Jobs."""
    claims: tuple[ClaimName, ...] = ()
    """PersistentVolumeClaims of the team's namespace (datasets, models) that its jobs may mount with `volumes` besides the FSx claim; the team creates them, a job naming any other is refused at preview. Not `fsx-<team>` (always mounted)."""
    uid: TeamId | None = None
    """The UID the team's pods run as and that owns its FSx directory (unique across teams). Unset: 100000 + (a hash of the name) mod 900000, which never changes when teams are added or reordered."""
    gid: TeamId | None = None
    """The team's GID (unique across teams; unset: the uid): group of its pods and its FSx directory (mode 0770)."""
    cohort: Cohort = DEFAULT_COHORT
    """Teams in the same cohort lend each other idle quota (a DNS-1123 label). Each pool's quota no team is guaranteed is shared out among the cohorts in proportion to their teams' guarantees there (evenly where none has one; a team with `borrowingLimit` 0 counts for nothing) and is its cohort's Kueue `Cohort` quota: any member may borrow it while idle, a team alone in its cohort too (docs/teams.md, "Borrowing")."""
    access: TeamAccessConfig = TeamAccessConfig()
    """Who may use the cluster as this team."""

    @field_validator("name")
    @classmethod
    def _not_the_platforms(cls, name: str) -> str:
        if platform_names.reserved_team_name(name):
            raise ValueError(platform_names.reserved_rule())
        return name

    @field_validator("claims")
    @classmethod
    def _claims(cls, claims: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        fsx = fsx_claim_name(str(info.data.get("name")))
        Problems.raise_any(
            ((i,), c, "another claim: the team's FSx claim is always mounted")
            if c == fsx
            else ((i,), c, "each claim once")
            for i, c in enumerate(claims)
            if c == fsx or c in claims[:i]
        )
        return claims

    @property
    def run_as_user(self) -> int:
        return self.uid if self.uid is not None else default_team_id(self.name)

    @property
    def run_as_group(self) -> int:
        return self.gid if self.gid is not None else self.run_as_user


def team_list_problems(teams: Sequence[TeamConfig | None]) -> list[tuple[tuple, Any, str]]:
    """The rules across teams, each problem at its team's index (None: a team that did not
    validate): unique names; unique UIDs and GIDs (two teams with one id share every file on
    FSx); each IAM principal in one team (EKS has one access entry per principal)."""
    problems: list[tuple[tuple, Any, str]] = []
    unique: list[TeamConfig | None] = []  # a team named twice is reported once, for its name
    for i, t in enumerate(teams):
        if t is not None and t.name in {u.name for u in unique if u}:
            problems.append(((i, "name"), t.name, "a unique team name (another team has it)"))
            t = None
        unique.append(t)
    clashing_uid: set[int] = set()
    for kind in ("uid", "gid"):
        owner: dict[int, str] = {}
        for i, t in enumerate(unique):
            value = t and (t.run_as_user if kind == "uid" else t.run_as_group)
            if t is None or owner.setdefault(value, t.name) == t.name:
                continue
            if kind == "uid":
                clashing_uid.add(i)
            elif t.gid is None and i in clashing_uid:
                continue  # the gid is the uid reported above
            if getattr(t, kind) is not None:
                origin, fix = "", f"choose another {kind}"
            else:
                derived = "its uid" if kind == "gid" and t.uid is not None else "its name"
                origin, fix = f"; this one is derived from {derived}", f"set {kind} explicitly"
            expected = f"a {kind} no other team uses (team {owner[value]!r} has it{origin}): {fix}"
            problems.append(((i, kind), value, expected))
    owner_of: dict[str, str] = {}
    for i, t in enumerate(unique):
        for j, arn in enumerate(t.access.principals if t else ()):
            if owner_of.setdefault(arn, t.name) != t.name:
                expected = (
                    f"a principal of one team only (team {owner_of[arn]!r} has it; EKS has one "
                    "access entry per principal)"
                )
                problems.append(((i, "access", "principals", j), arn, expected))
    return problems


# ---------------------------------------------------------------------------------------------
# The area's top-level keys


class ServiceKeys(StackModel):
    """The services' top-level `trainforge:` keys; validated, the services config itself."""

    fsx: FsxConfig = FsxConfig()
    """FSx for Lustre: one file system, a directory and a claim per team."""
    checkpoints: CheckpointConfig = CheckpointConfig()
    """The checkpoint bucket and one Pod Identity role per team."""
    training_operator: TrainingOperatorConfig = TrainingOperatorConfig()
    """The Kubeflow training operator v1 (backend `pytorchjob`)."""
    device_plugins: DevicePluginsConfig = DevicePluginsConfig()
    """NVIDIA and EFA device plugins."""
    monitoring: MonitoringConfig = MonitoringConfig()
    """Metrics, dashboards, alerts and where they go."""
    mlflow: MlflowConfig = MlflowConfig()
    """An MLflow tracking server with one user per team."""
    kueue: KueueConfig = KueueConfig()
    """Queueing with gang admission (docs/teams.md)."""
    teams: tuple[TeamConfig, ...] = ()
    """The teams: a namespace, quota, queue and FSx directory each."""
    job_backend: Backend = DEFAULT_BACKEND
    """What jobs without their own `backend:` become: `pytorchjob` (training operator v1 PyTorchJob), `trainjob` (Kubeflow Trainer v2 TrainJob) or `indexed-job` (a batch/v1 Indexed Job and a headless Service; no operator)."""
    # In the config object: every backend whose controller the platform installs (the
    # default, this list and each stack job's own `backend:`), in BACKENDS order.
    job_backends: Annotated[tuple[Backend, ...], BeforeValidator(_backend_list)] = Field(
        (), validate_default=True
    )
    """Further backends whose controllers to install, for jobs the stack config does not declare (Python, other programs); those of `jobBackend` and of every `trainforge:jobs` entry are installed anyway."""

    @field_validator("teams")
    @classmethod
    def _team_rules(cls, teams: tuple[TeamConfig, ...]) -> tuple[TeamConfig, ...]:
        Problems.raise_any(team_list_problems(teams))
        return teams

    @field_validator("job_backends")
    @classmethod
    def _installed(cls, extra: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        named = (info.context or {}).get("job_backends", ())
        wanted = {info.data.get("job_backend", DEFAULT_BACKEND), *extra, *named}
        return tuple(b for b in BACKENDS if b in wanted)

    @model_validator(mode="after")
    def _teams_leave_platform_namespaces(self, info: ValidationInfo) -> ServiceKeys:
        """The configurable platform namespaces (the fixed ones: `TeamConfig.name`)."""
        karpenter = (info.context or {}).get("karpenter_namespace")
        taken = {self.training_operator.namespace, self.monitoring.namespace}
        taken |= {karpenter} if isinstance(karpenter, str) else set()
        expected = f"a name other than the platform's namespaces ({', '.join(sorted(taken))})"
        Problems.raise_any(
            (("teams", i, "name"), t.name, expected)
            for i, t in enumerate(self.teams)
            if t.name in taken
        )
        return self


def services_context(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What the services' rules need from the rest of the `trainforge:` mapping, as written:
    the node pool names (nodeGroups and nodePools), the team names, the backends stack jobs
    name. A list that is not one is left out (its own area reports it)."""

    def names(*keys: str) -> list[str] | None:
        lists = [raw.get(k) or [] for k in keys]
        if not all(isinstance(x, list) for x in lists):
            return None
        return [
            i["name"]
            for x in lists
            for i in x
            if isinstance(i, dict) and isinstance(i.get("name"), str)
        ]

    jobs = raw.get("jobs") if isinstance(raw.get("jobs"), list) else []
    karpenter = raw.get("karpenter") if isinstance(raw.get("karpenter"), dict) else {}
    return {
        # Karpenter's namespace is the platform area's key; a team may not take it either
        "karpenter_namespace": karpenter.get("namespace")
        if karpenter.get("enabled", True) is not False
        else None,
        "pool_names": names("nodeGroups", "nodePools"),
        "team_names": names("teams"),
        "job_backends": {
            j["backend"] for j in jobs if isinstance(j, dict) and j.get("backend") in BACKENDS
        },
    }
