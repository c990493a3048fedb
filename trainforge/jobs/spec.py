"""The job model: what to run, where and how big, independent of any Kubernetes object.

`JobSpec` is what a user declares (in Python or under `trainforge:jobs` in stack config).
Emitters, one per backend (`pytorchjob.py`: Kubeflow v1 PyTorchJob, `trainjob.py`: Kubeflow
Trainer v2 TrainJob, `indexed_job.py`: a plain indexed batch/v1 Job), turn a *resolved* spec
plus the platform wiring (`contract.JobTarget`) into objects; `backend` only picks the emitter.

`parse_job(raw, where)` accepts the stack-config dict (camelCase keys; snake_case also
accepted so Python callers can pass keyword-style dicts) and raises `JobConfigError` naming
`where.field`, the bad value and what is valid. Unknown keys are errors: a typo such as
`gpuPerWorker` must not silently fall back to a default at GPU prices.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any, Literal

from trainforge.core.contract import BACKENDS
from trainforge.core.errors import JobConfigError
from trainforge.training.contract import CONTRACT_VARIABLES

# checkpoint.fingerprint: a dotted module path and a function name
FINGERPRINT_RE = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"

Strategy = Literal["ddp", "fsdp"]
Preset = Literal["ddp", "fsdp", "elastic"]
CodeSource = Literal["configmap", "image"]
EntrypointKind = Literal["runtime", "script", "module", "command", "function"]

STRATEGIES = ("ddp", "fsdp")
PRESETS = ("ddp", "fsdp", "elastic")
CODE_SOURCES = ("configmap", "image")
MODELS = ("mlp", "gpt")
DATASETS = ("synthetic", "tokens")
PRECISIONS = ("auto", "bf16", "fp32")
RESTART_POLICIES = ("OnFailure", "ExitCode", "Never")
CLEAN_POD_POLICIES = ("None", "Running", "All")
NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
PRIORITIES = ("high", "normal", "low")  # Kueue WorkloadPriorityClasses (platform.queues)
TOPOLOGY_MODES = ("preferred", "layer-1", "layer-2", "layer-3", "none")  # jobs.tenancy

# Kubernetes object names of a job's pods and services are `<job>-worker-<index>`, and
# Services (which the operator creates per pod) must be DNS-1035 labels of at most 63
# characters. Leave room for at least three index digits so a job can grow to 1000 pods.
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63
POD_SUFFIX = "-worker-"
MIN_INDEX_DIGITS = 3

# A container image reference: [registry[:port]/]path[:tag][@sha256:<64 hex>].
_IMAGE_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9][a-zA-Z0-9.-]*(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


@dataclass(frozen=True)
class ModelFlags:
    """Training-runtime flags (issue 2's CLI). None means "the runtime's default"."""

    model: str | None = None
    layers: int | None = None
    d_model: int | None = None
    heads: int | None = None
    seq_len: int | None = None
    vocab_size: int | None = None
    dataset: str | None = None
    data_path: str | None = None
    dataset_size: int | None = None
    steps: int | None = None
    batch_size: int | None = None
    grad_accum: int | None = None
    lr: float | None = None
    warmup_steps: int | None = None
    weight_decay: float | None = None
    seed: int | None = None
    log_every: int | None = None
    compile: bool = False
    activation_checkpointing: bool = False
    precision: str | None = None


@dataclass(frozen=True)
class ModelSize:
    """What the planner needs to know about a model it cannot build from flags (user code).

    Used only by the memory and step-time estimate (`trainforge.jobs.estimate`), which
    assumes a GPT-style decoder trained with AdamW: `parameters` defaults to that shape's
    count (12 * layers * dModel^2 plus untied embeddings and head), and `heads` only sizes
    the small attention statistics. Nothing here is passed to the code that runs.
    """

    # The GPT form: a decoder of this shape (all four, or none of them).
    layers: int | None = None
    d_model: int | None = None
    seq_len: int | None = None
    vocab_size: int | None = None
    parameters: int | None = None
    heads: int | None = None
    batch_size: int = 1  # samples per GPU per micro-step
    grad_accum: int = 1
    steps: int | None = None
    activation_checkpointing: bool = False
    # The declared form, for any model that is not a GPT decoder: what the planner needs,
    # stated (or measured by `trainforge calibrate --declared`): `parameters`, the training
    # FLOPs of one sample (or of one token x tokensPerSample), the activation bytes one sample
    # keeps for backward.
    flops_per_sample: float | None = None
    flops_per_token: float | None = None
    tokens_per_sample: int = 1
    activation_bytes_per_sample: int | None = None

    @property
    def declared(self) -> bool:
        """The declared form (no GPT shape)."""
        return self.layers is None


@dataclass(frozen=True)
class CheckpointSpec:
    """Where and how often the runtime checkpoints (issue 3's flags)."""

    every: int = 500
    keep_last: int = 3
    async_save: bool = True
    # Seconds the runtime gets to checkpoint after SIGTERM; the pod's
    # terminationGracePeriodSeconds is this plus a margin for process teardown.
    grace_period: int = 90
    # Mirror completed checkpoints to the platform's checkpoint bucket (team prefix). None =
    # auto: on for a job that names its own image (expected to carry boto3, i.e.
    # `trainforge[s3]`), off with the stock PyTorch image, which has no boto3.
    s3_mirror: bool | None = None
    resume: str = "auto"
    # The job's checkpoint directory; None = /fsx/checkpoints/<namespace>/<job> on the team's
    # FSx claim. Relative paths are on the team's FSx mount; absolute ones must lie on a
    # writable volume of the job (the FSx mount or one of `volumes`).
    directory: str | None = None
    # Own code: "module:function" in the job's code directory that returns the state layout
    # the code checkpoints (a JSON-able mapping) for the job's arguments; `trainforge plan
    # --diff` compares base and head with it. None = a replacement's resume is not checked.
    fingerprint: str | None = None


@dataclass(frozen=True)
class ElasticSpec:
    """torchrun elasticity: the job runs with any pod count in [min_workers, max_workers]."""

    min_workers: int
    max_workers: int
    max_restarts: int = 3


@dataclass(frozen=True)
class RunPolicySpec:
    """The run policy (a PyTorchJob's runPolicy; what the other backends support of it: see
    docs/jobs.md). Defaults free GPUs promptly but keep logs for a day."""

    # "Running": when the job finishes, pods still running (e.g. a hung worker) are
    # deleted so they stop holding GPUs; completed pods stay for `kubectl logs`.
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = 86400
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None


@dataclass(frozen=True)
class EntrypointSpec:
    """What a job runs when it is not the bundled runtime (issue 12).

    `script`, `code_dir` are paths relative to the project directory (where Pulumi and
    `run-local` run); `code_dir` is the directory shipped to the pods (for a script, the
    script's own directory unless given). A `function` entrypoint carries its generated
    source in `files` (see `trainforge.jobs.pyfunction`).
    """

    kind: EntrypointKind
    script: str | None = None
    module: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    code_dir: str | None = None
    exclude: tuple[str, ...] = ()
    function: str | None = None
    files: tuple[tuple[str, str], ...] = ()

    @property
    def ships_code(self) -> bool:
        """True when a directory (or a generated file) of the user's is shipped to the pods."""
        return self.code_dir is not None or bool(self.files)

    @property
    def entry_file(self) -> str | None:
        """The file `python` runs, relative to the shipped directory (script and function)."""
        if self.kind == "function":
            return self.files[0][0] if self.files else None
        if self.kind != "script" or self.script is None:
            return None
        return PurePosixPath(
            posixpath.relpath(_norm(self.script), _norm(self.code_dir or "."))
        ).as_posix()


@dataclass(frozen=True)
class VolumeSpec:
    """A further PersistentVolumeClaim of the job's team, mounted in every pod."""

    claim: str
    mount_path: str
    read_only: bool = False
    sub_path: str | None = None


@dataclass(frozen=True)
class JobSpec:
    """A training job. `gpus_per_worker`, `cpu`, `memory`, `shm_size` and `efa` may be None
    until `wiring.resolve_job` fills them from the pool the job runs on."""

    name: str
    team: str
    pool: str
    strategy: Strategy = "ddp"
    preset: Preset = "ddp"
    workers: int = 1
    gpus_per_worker: int | None = None
    procs_per_worker: int | None = None
    cpu: str | None = None
    memory: str | None = None
    shm_size: str | None = None
    efa: bool | None = None
    image: str | None = None
    code_source: CodeSource = "configmap"
    # What the job's own image carries (`imageFacts`; trainforge.jobs.image_facts.ImageFacts);
    # resolved jobs on a runtime image carry that image's facts.
    image_facts: Any = None
    training: ModelFlags = field(default_factory=ModelFlags)
    model_size: ModelSize | None = None
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    elastic: ElasticSpec | None = None
    run_policy: RunPolicySpec = field(default_factory=RunPolicySpec)
    # ExitCode: the runtime's exit code says whether a failure is worth a restart
    # (trainforge/training/exits.py: 1-127 permanent, 128-255 retryable), so a bug stops the
    # job while a hang, an NCCL error or a preemption restarts it. OnFailure restarts every
    # failure (up to backoffLimit) in place, on the same node. Unset (None): ExitCode, except
    # on a PyTorchJob whose pods cannot count their attempts (trainforge.jobs.wiring).
    restart_policy: str | None = None
    # Watchdog floor in seconds (`--hang-timeout`; 0 = off; None = the runtime's default,
    # 300). Collective, NCCL heartbeat and rendezvous timeouts derive from it.
    hang_timeout: int | None = None
    metrics_port: int = 9090
    nccl_debug: str = "WARN"
    env: tuple[tuple[str, str], ...] = ()
    # Kueue: the job's WorkloadPriorityClass (high, normal, low) and, on pools with
    # topology-aware scheduling, how close its pods must be (trainforge.jobs.tenancy).
    priority: str = "normal"
    topology: str | None = None
    # None: the bundled runtime (`python -m trainforge.training`), the default.
    entrypoint: EntrypointSpec | None = None
    volumes: tuple[VolumeSpec, ...] = ()
    # Which controller runs the job (`contract.BACKENDS`); None = the platform's default
    # (`trainforge:jobBackend`). `wiring.resolve_job` fills it in.
    backend: str | None = None
    # Seconds one optimizer step takes on the job's pool, if the user knows (e.g. from a
    # previous run's summary). Only the plan's cost report reads it; the runtime does not.
    expected_step_seconds: float | None = None

    @property
    def procs(self) -> int:
        """Processes per pod: one per GPU, or `procs_per_worker` (default 1) on CPU."""
        if self.procs_per_worker is not None:
            return self.procs_per_worker
        return self.gpus_per_worker or 1

    @property
    def max_workers(self) -> int:
        return self.elastic.max_workers if self.elastic else self.workers

    @property
    def min_workers(self) -> int:
        return self.elastic.min_workers if self.elastic else self.workers

    @property
    def uses_torchrun(self) -> bool:
        """torchrun where a pod runs several processes or the job is elastic."""
        return self.elastic is not None or self.procs > 1


# --- parsing -------------------------------------------------------------------------------


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class _Reader:
    """Pops typed values out of one mapping; reports unknown keys with the valid ones."""

    def __init__(self, raw: Any, where: str, valid: list[str]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise JobConfigError(where, raw, "expected a mapping")
        self.where = where
        self.data: dict[str, Any] = {}
        for key, value in raw.items():
            snake = _snake(str(key))
            if snake not in valid:
                choices = ", ".join(_camel(k) for k in valid)
                raise JobConfigError(f"{where}.{key}", value, f"unknown key; valid keys: {choices}")
            self.data[snake] = value

    def path(self, key: str) -> str:
        return f"{self.where}.{_camel(key)}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def str_(self, key: str, default: Any = None, choices: tuple[str, ...] | None = None) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise JobConfigError(self.path(key), value, "expected a non-empty string")
        if choices and value not in choices:
            raise JobConfigError(self.path(key), value, f"valid values: {', '.join(choices)}")
        return value

    def int_(
        self, key: str, default: Any = None, minimum: int = 1, maximum: int | None = None
    ) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
                value = int(value)  # Pulumi config values set on the CLI arrive as strings
            else:
                raise JobConfigError(self.path(key), value, "expected an integer")
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise JobConfigError(self.path(key), value, f"expected an integer {bound}")
        return value

    def float_(self, key: str, default: Any = None, positive: bool = True) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            raise JobConfigError(self.path(key), value, "expected a number") from None
        if positive and not number > 0:
            raise JobConfigError(self.path(key), value, "expected a number > 0")
        if not positive and number < 0:
            raise JobConfigError(self.path(key), value, "expected a number >= 0")
        return number

    def bool_(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise JobConfigError(self.path(key), value, "expected true or false")
        return value

    def quantity(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise JobConfigError(
                self.path(key), value, "expected a Kubernetes quantity such as 8, 500m or 32Gi"
            )
        from trainforge.core.quantity import parse_quantity

        try:
            if parse_quantity(value) <= 0:
                raise ValueError
        except ValueError:
            raise JobConfigError(
                self.path(key),
                value,
                "expected a positive Kubernetes quantity such as 8, 500m or 32Gi",
            ) from None
        return value


_MODEL_INTS = (
    "layers",
    "d_model",
    "heads",
    "seq_len",
    "vocab_size",
    "dataset_size",
    "steps",
    "batch_size",
    "grad_accum",
    "log_every",
)
_MODEL_KEYS = [f.name for f in fields(ModelFlags)]
_TOP_KEYS = [
    "name",
    "team",
    "pool",
    "strategy",
    "preset",
    "workers",
    "gpus_per_worker",
    "procs_per_worker",
    "cpu",
    "memory",
    "shm_size",
    "efa",
    "image",
    "code_source",
    "image_facts",
    "checkpoint",
    "elastic",
    "run_policy",
    "restart_policy",
    "hang_timeout",
    "metrics_port",
    "nccl_debug",
    "env",
    "priority",
    "topology",
    "entrypoint",
    "volumes",
    "model_size",
    "backend",
    "expected_step_seconds",
    *_MODEL_KEYS,
]
_MODEL_SIZE_KEYS = [f.name for f in fields(ModelSize)]
# Flags that size the bundled model; a job states either these or `modelSize`, not both.
_BUNDLED_SIZE_FLAGS = ("model", "layers", "d_model", "heads", "seq_len", "vocab_size")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the platform or the operator; a user override would silently break the job.
_RESERVED_ENV = {
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "PYTHONPATH",
    "MLFLOW_TRACKING_URI",
    # the team's MLflow identity (trainforge.jobs.tenancy.PLATFORM_ENV): a file under HOME,
    # which these would take precedence over
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_EXPERIMENT_NAME",
    # torchrun's SIGKILL delay after SIGTERM: it must be the checkpoint grace period
    # (`checkpoint.gracePeriod`), or a preempted job is killed mid-checkpoint.
    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
    *CONTRACT_VARIABLES,
}


def validate_name(name: Any, where: str, max_workers: int = 1) -> str:
    """A job name the operator accepts for every pod it will create."""
    if not isinstance(name, str) or not name:
        raise JobConfigError(where, name, "expected a non-empty job name")
    digits = max(MIN_INDEX_DIGITS, len(str(max(max_workers - 1, 0))))
    limit = MAX_LABEL - len(POD_SUFFIX) - digits
    if not DNS1035.match(name):
        raise JobConfigError(
            where,
            name,
            "a job name must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter and ending with a letter or digit",
        )
    if len(name) > limit:
        raise JobConfigError(
            where,
            name,
            f"at most {limit} characters ({len(name)} given): pod and service names "
            f"'<name>{POD_SUFFIX}<index>' must fit in {MAX_LABEL}",
        )
    return name


def validate_image(image: Any, where: str) -> str:
    """A pinned image reference: a tag other than `latest`, or a sha256 digest."""
    if not isinstance(image, str) or not _IMAGE_RE.match(image):
        raise JobConfigError(
            where,
            image,
            "expected an image reference such as pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime "
            "or registry/repo@sha256:<64 hex digits>",
        )
    m = _IMAGE_RE.match(image)
    assert m is not None
    if not m.group("digest") and (not m.group("tag") or m.group("tag") == "latest"):
        raise JobConfigError(
            where,
            image,
            "pin the image with a version tag (not 'latest') or a sha256 digest so that a "
            "restarted pod runs the same code",
        )
    return image


def _parse_model(r: _Reader) -> ModelFlags:
    values: dict[str, Any] = {k: r.int_(k) for k in _MODEL_INTS}
    values["model"] = r.str_("model", choices=MODELS)
    values["dataset"] = r.str_("dataset", choices=DATASETS)
    values["precision"] = r.str_("precision", choices=PRECISIONS)
    values["data_path"] = r.str_("data_path")
    values["lr"] = r.float_("lr")
    values["weight_decay"] = r.float_("weight_decay", positive=False)
    values["warmup_steps"] = r.int_("warmup_steps", minimum=0)
    values["seed"] = r.int_("seed", minimum=0)
    values["compile"] = r.bool_("compile", False)
    values["activation_checkpointing"] = r.bool_("activation_checkpointing", False)
    flags = ModelFlags(**values)
    if flags.dataset == "tokens" and not flags.data_path:
        raise JobConfigError(
            r.path("data_path"), None, "dataset 'tokens' needs dataPath (a uint16 token file)"
        )
    if flags.data_path and flags.dataset != "tokens":
        raise JobConfigError(
            r.path("data_path"),
            flags.data_path,
            f"only read with dataset: tokens (dataset is {flags.dataset or 'synthetic'})",
        )
    if flags.d_model and flags.heads and flags.d_model % flags.heads:
        raise JobConfigError(r.path("heads"), flags.heads, f"must divide dModel ({flags.d_model})")
    _runtime_check(flags, r)
    return flags


def _parse_model_size(raw: Any, where: str, flags: ModelFlags) -> ModelSize | None:
    if raw is None:
        return None
    r = _Reader(raw, where, _MODEL_SIZE_KEYS)
    # every value's type first (an error names its own key), then what is missing
    values: dict[str, Any] = {
        k: r.int_(k)
        for k in ("layers", "d_model", "seq_len", "vocab_size", "parameters", "heads", "steps")
    }
    values["batch_size"] = r.int_("batch_size", 1)
    values["tokens_per_sample"] = r.int_("tokens_per_sample", 1, minimum=1)
    values["activation_bytes_per_sample"] = r.int_("activation_bytes_per_sample")
    for key in ("flops_per_sample", "flops_per_token"):
        v = r.data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v <= 0):
            raise JobConfigError(r.path(key), v, "expected a number > 0 (FLOPs, e.g. 6.1e9)")
        values[key] = None if v is None else float(v)
    values["grad_accum"] = r.int_("grad_accum", 1)
    values["activation_checkpointing"] = r.bool_("activation_checkpointing", False)
    bundled = [_camel(k) for k in _BUNDLED_SIZE_FLAGS if getattr(flags, k) is not None]
    if bundled:
        first = next(iter(r.data), None)  # the first key stated under modelSize
        raise JobConfigError(
            r.path(first) if first else where,
            r.data.get(first) if first else raw,
            f"modelSize states the size of your own code's model; the bundled model is sized "
            f"by {', '.join(bundled)}. Set one or the other",
        )
    gpt = ("layers", "d_model", "seq_len", "vocab_size")
    declared = ("flops_per_sample", "flops_per_token", "activation_bytes_per_sample")
    if any(values[k] is not None for k in gpt):
        for key in gpt:
            if values[key] is None:
                raise JobConfigError(
                    r.path(key),
                    None,
                    "the GPT form of modelSize needs layers, dModel, seqLen and vocabSize (the "
                    "planner sizes activations and logits from them); for another model state "
                    "parameters, flopsPerSample (or flopsPerToken) and activationBytesPerSample",
                )
        for key in declared:
            if values[key] is not None:
                raise JobConfigError(
                    r.path(key), values[key], "belongs to the declared form, not the GPT form"
                )
    else:
        if values["flops_per_sample"] is None and values["flops_per_token"] is not None:
            values["flops_per_sample"] = values["flops_per_token"] * values["tokens_per_sample"]
        for key in ("parameters", "flops_per_sample", "activation_bytes_per_sample"):
            if values[key] is None:
                raise JobConfigError(
                    r.path(key),
                    None,
                    "modelSize states your model: parameters, flopsPerSample (or flopsPerToken "
                    "and tokensPerSample) and activationBytesPerSample (`trainforge calibrate "
                    "--declared` measures them from a local run), or the GPT form (layers, "
                    "dModel, seqLen, vocabSize)",
                )
    size = ModelSize(**values)
    if size.heads and size.d_model % size.heads:
        raise JobConfigError(r.path("heads"), size.heads, f"must divide dModel ({size.d_model})")
    return size


def _runtime_check(flags: ModelFlags, r: _Reader) -> None:
    """Run the runtime's own value checks (trainforge.training.config.check_values, torch-free)
    on the job's flags, so that a job the runtime would reject at start is refused at preview.
    The runtime names a flag (`--vocab-size`); the error names the job key (`vocabSize`)."""
    import dataclasses as dc

    from trainforge.training.config import ConfigError, TrainConfig, check_values

    known = {f.name for f in dc.fields(TrainConfig)}
    values = {
        k: v
        for k, v in dc.asdict(flags).items()
        if k in known and v is not None and k not in ("compile", "activation_checkpointing")
    }
    try:
        check_values(TrainConfig(**values))
    except ConfigError as e:
        m = re.search(r"--([a-z][a-z-]*)", str(e))
        key = m.group(1).replace("-", "_") if m else "model"
        raise JobConfigError(
            r.path(key), r.data.get(key), f"the training runtime refuses it: {e}"
        ) from None


def _parse_checkpoint(raw: Any, where: str) -> CheckpointSpec:
    r = _Reader(
        raw,
        where,
        [
            "every",
            "keep_last",
            "async",
            "grace_period",
            "s3_mirror",
            "resume",
            "dir",
            "fingerprint",
        ],
    )
    directory = r.str_("dir")
    if directory is not None:
        if ".." in PurePosixPath(directory).parts:
            raise JobConfigError(r.path("dir"), directory, "a path without '..' components")
        directory = posixpath.normpath(directory)
    resume = r.str_("resume", "auto")
    if resume not in ("auto", "never") and not resume.startswith("/"):
        raise JobConfigError(
            r.path("resume"), resume, "valid values: auto, never, or an absolute path"
        )
    fingerprint = r.str_("fingerprint")
    if fingerprint is not None and not re.fullmatch(FINGERPRINT_RE, fingerprint):
        raise JobConfigError(
            r.path("fingerprint"), fingerprint, "module:function, e.g. layout:state_layout"
        )
    return CheckpointSpec(
        every=r.int_("every", 500),
        keep_last=r.int_("keep_last", 3),
        async_save=r.bool_("async", True),
        grace_period=r.int_("grace_period", 90, maximum=3600),
        s3_mirror=r.bool_("s3_mirror", None),
        resume=resume,
        directory=directory,
        fingerprint=fingerprint,
    )


def _parse_elastic(raw: Any, where: str, workers: int | None) -> ElasticSpec:
    r = _Reader(raw, where, ["min_workers", "max_workers", "max_restarts"])
    hi = r.int_("max_workers", workers)
    lo = r.int_("min_workers", hi)
    if hi is None:
        raise JobConfigError(
            r.path("max_workers"), None, "an elastic job needs maxWorkers (or workers)"
        )
    if lo > hi:
        raise JobConfigError(r.path("min_workers"), lo, f"must be <= maxWorkers ({hi})")
    return ElasticSpec(
        min_workers=lo, max_workers=hi, max_restarts=r.int_("max_restarts", 3, minimum=0)
    )


def _parse_run_policy(raw: Any, where: str) -> RunPolicySpec:
    r = _Reader(
        raw,
        where,
        [
            "clean_pod_policy",
            "ttl_seconds_after_finished",
            "backoff_limit",
            "active_deadline_seconds",
        ],
    )
    return RunPolicySpec(
        clean_pod_policy=r.str_("clean_pod_policy", "Running", CLEAN_POD_POLICIES),
        ttl_seconds_after_finished=r.int_("ttl_seconds_after_finished", 86400, minimum=0),
        backoff_limit=r.int_("backoff_limit", 6, minimum=0),
        active_deadline_seconds=r.int_("active_deadline_seconds"),
    )


def _parse_env(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise JobConfigError(where, raw, "expected a mapping of NAME: value")
    out = []
    for key, value in sorted(raw.items()):
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise JobConfigError(
                f"{where}.{key}", key, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            )
        if key == "HOME":
            raise JobConfigError(
                f"{where}.{key}",
                value,
                "HOME is /tmp in every pod (the team's MLflow credentials are mounted at "
                "$HOME/.mlflow); move caches with XDG_CACHE_HOME, TORCH_HOME or HF_HOME instead",
            )
        if key in _RESERVED_ENV or key.startswith("PET_"):
            raise JobConfigError(
                f"{where}.{key}",
                key,
                "set by the operator or the platform; it cannot be overridden",
            )
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise JobConfigError(f"{where}.{key}", value, "expected a string or number")
        out.append((key, str(value)))
    return tuple(out)


_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# A PersistentVolumeClaim name (a DNS-1123 subdomain).
_CLAIM_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ENTRYPOINT_KINDS = ("script", "module", "command", "function")


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/"))


PATH_RULE = (
    "a path relative to the project directory (where Pulumi and run-local run) and inside it "
    "(no leading /, no drive letter, no .. above it), so every machine that deploys or runs "
    "the job finds the same file"
)


def project_relative(value: Any, where: str, what: str) -> str:
    """The one path rule for files of the project (`script`, `codeDir`, `--program`):
    relative to the project directory and inside it; normalised."""
    if not isinstance(value, str) or not value.strip():
        raise JobConfigError(where, value, f"expected {what}: {PATH_RULE}")
    norm = _norm(value)
    if (
        value.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", value)
        or norm == ".."
        or norm.startswith("../")
    ):
        raise JobConfigError(where, value, f"expected {what}: {PATH_RULE}")
    return norm


_relative_path = project_relative


def _strings(raw: Any, where: str, what: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise JobConfigError(where, raw, f"expected a list of {what}")
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            hint = (
                ' (quote numbers and booleans in YAML: "1")' if not isinstance(item, dict) else ""
            )
            raise JobConfigError(f"{where}[{i}]", item, f"expected a string{hint}")
    return tuple(raw)


def _parse_entrypoint(raw: Any, where: str, image: str | None) -> EntrypointSpec:
    r = _Reader(
        raw,
        where,
        ["script", "module", "command", "function", "args", "code_dir", "exclude", "function_args"],
    )
    args = _strings(r.data.get("args"), r.path("args"), "arguments")
    exclude = _strings(r.data.get("exclude"), r.path("exclude"), "glob patterns")
    code_dir = None
    if r.data.get("code_dir") is not None:
        code_dir = _relative_path(r.data["code_dir"], r.path("code_dir"), "a directory")
    given = [k for k in ENTRYPOINT_KINDS if r.data.get(k) is not None]
    if len(given) > 1:
        raise JobConfigError(
            r.path(given[1]),
            r.data[given[1]],
            f"set exactly one of script, module, command (or, in Python, function); "
            f"{_camel(given[0])} is set too",
        )
    if not given:
        # Name what was given: it is the key the user is editing.
        key = next((k for k in ("code_dir", "args", "exclude") if r.has(k)), None)
        raise JobConfigError(
            r.path(key) if key else where,
            r.data.get(key) if key else raw,
            "nothing to run: set one of script, module, command (or, in Python, function)",
        )
    kind = given[0]
    if kind == "script":
        script = _relative_path(r.data["script"], r.path("script"), "a file")
        code_dir = code_dir if code_dir is not None else (posixpath.dirname(script) or ".")
        if posixpath.relpath(script, code_dir).startswith(".."):
            raise JobConfigError(
                r.path("script"),
                r.data["script"],
                f"the script must lie inside codeDir ({code_dir}), which is what is shipped",
            )
        return EntrypointSpec(
            "script", script=script, args=args, code_dir=code_dir, exclude=exclude
        )
    if kind == "module":
        module = r.data["module"]
        if not isinstance(module, str) or not _MODULE_RE.match(module):
            raise JobConfigError(
                r.path("module"), module, "expected a dotted module name such as pkg.train"
            )
        if code_dir is None and image is None:
            raise JobConfigError(
                where.rsplit(".", 1)[0] + ".image",
                None,
                f"module {module!r} without codeDir runs from your image, so name that image "
                "(or set entrypoint.codeDir to ship the package from this repository)",
            )
        return EntrypointSpec(
            "module", module=module, args=args, code_dir=code_dir, exclude=exclude
        )
    if kind == "command":
        command = _strings(r.data["command"], r.path("command"), "strings (the argv)")
        if not command:
            raise JobConfigError(
                r.path("command"), [], "expected the argv to run, e.g. [torchrun, train.py]"
            )
        if image is None:
            raise JobConfigError(
                where.rsplit(".", 1)[0] + ".image",
                None,
                "entrypoint.command runs a program of your image, so name that image (the stock "
                "PyTorch image has none of yours; use entrypoint.script to ship a file)",
            )
        if args:
            raise JobConfigError(
                r.path("args"), list(args), "put a command's arguments in command itself"
            )
        return EntrypointSpec("command", command=command, code_dir=code_dir, exclude=exclude)
    # A Python function (the Python API only: stack config cannot hold one).
    if code_dir is not None or exclude or args:
        raise JobConfigError(
            where,
            raw,
            "a function entrypoint ships the function's own source; codeDir, exclude and args "
            "do not apply (pass values with function_args)",
        )
    from trainforge.jobs.pyfunction import ship_function

    filename, source = ship_function(
        r.data["function"], r.data.get("function_args"), r.path("function")
    )
    return EntrypointSpec(
        "function", function=r.data["function"].__name__, files=((filename, source),)
    )


def _parse_volumes(raw: Any, where: str) -> tuple[VolumeSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise JobConfigError(where, raw, "expected a list of {claim, mountPath, readOnly, subPath}")
    out: list[VolumeSpec] = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        r = _Reader(item, at, ["claim", "mount_path", "read_only", "sub_path"])
        claim = r.str_("claim")
        if claim is None or not _CLAIM_RE.match(claim) or len(claim) > 253:
            raise JobConfigError(
                r.path("claim"), claim, "expected the name of a PersistentVolumeClaim of the team"
            )
        mount = r.str_("mount_path")
        if mount is None or not mount.startswith("/") or ":" in mount or _norm(mount) == "/":
            raise JobConfigError(
                r.path("mount_path"), mount, "expected an absolute path other than / (e.g. /data)"
            )
        sub = r.str_("sub_path")
        if sub is not None and (sub.startswith("/") or ".." in PurePosixPath(sub).parts):
            raise JobConfigError(
                r.path("sub_path"), sub, "expected a relative path inside the claim, without '..'"
            )
        volume = VolumeSpec(claim, _norm(mount), r.bool_("read_only", False), sub)
        for j, other in enumerate(out):
            if other.claim == volume.claim and other.sub_path == volume.sub_path:
                raise JobConfigError(
                    r.path("claim"), claim, f"already mounted by volumes[{j}]; mount it once"
                )
            if _nested(other.mount_path, volume.mount_path):
                raise JobConfigError(
                    r.path("mount_path"),
                    mount,
                    f"overlaps volumes[{j}].mountPath ({other.mount_path}); use separate paths",
                )
        out.append(volume)
    return tuple(out)


def _nested(a: str, b: str) -> bool:
    """True when one absolute path is the other or lies below it."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _check_runtime_only_keys(r: _Reader, where: str, entry: str) -> None:
    """Runtime flags mean nothing to the user's code: refuse them rather than ignore them.
    `entry` is the entrypoint key that asks for the user's code (named in the message)."""
    flags = [k for k in _MODEL_KEYS if r.data.get(k) not in (None, False)]
    if r.has("strategy"):
        flags.insert(0, "strategy")
    if flags:
        key = flags[0]
        raise JobConfigError(
            r.path(key),
            r.data[key],
            f"configures the bundled runtime, which a job with {entry} does not run; pass your "
            "code its settings with entrypoint.args",
        )
    size = r.data.get("model_size")
    if r.has("expected_step_seconds") and not (isinstance(size, dict) and size.get("steps")):
        raise JobConfigError(
            r.path("expected_step_seconds"),
            r.data["expected_step_seconds"],
            f"is multiplied by the job's steps, which a job with {entry} states only in "
            "modelSize.steps; set that, or bound the run's cost with "
            "runPolicy.activeDeadlineSeconds",
        )
    if r.data.get("preset") == "fsdp":
        raise JobConfigError(
            r.path("preset"),
            "fsdp",
            f"with {entry} your code chooses its own parallelism; use preset ddp "
            "(one process per GPU) or elastic",
        )


def parse_job(raw: Any, where: str = "job") -> JobSpec:
    """Parse one job declaration; every error names `where.<field>`."""
    r = _Reader(raw, where, _TOP_KEYS)
    preset = r.str_("preset", None, PRESETS)
    if preset is None:
        preset = "elastic" if r.has("elastic") else (r.str_("strategy", "ddp", STRATEGIES))
    strategy = r.str_("strategy", "fsdp" if preset == "fsdp" else "ddp", STRATEGIES)
    if preset == "fsdp" and strategy != "fsdp":
        raise JobConfigError(r.path("strategy"), strategy, "the fsdp preset runs strategy fsdp")
    if preset != "elastic" and r.has("elastic"):
        # fsdp jobs used to drop the block silently
        raise JobConfigError(
            r.path("elastic"),
            r.data["elastic"],
            f"elastic settings need preset: elastic (got {preset})",
        )
    workers = r.int_("workers", None)
    elastic = None
    if preset == "elastic":
        elastic = _parse_elastic(r.data.get("elastic"), r.path("elastic"), workers)
        if workers is not None and not elastic.min_workers <= workers <= elastic.max_workers:
            raise JobConfigError(
                r.path("workers"),
                workers,
                f"must lie within elastic minWorkers..maxWorkers ({elastic.min_workers}..{elastic.max_workers})",
            )
        workers = workers if workers is not None else elastic.max_workers
    workers = workers if workers is not None else 1
    name = validate_name(
        r.str_("name"), r.path("name"), elastic.max_workers if elastic else workers
    )
    code_source = r.str_("code_source", "configmap", CODE_SOURCES)
    image = r.str_("image")
    if image is not None:
        validate_image(image, r.path("image"))
    if code_source == "image" and image is None:
        raise JobConfigError(
            r.path("image"),
            None,
            "codeSource: image runs trainforge from your image, so name that image",
        )
    image_facts = None
    if r.has("image_facts"):
        from trainforge.jobs.image_facts import parse_declared  # noqa: PLC0415

        if image is None:
            raise JobConfigError(
                r.path("image_facts"),
                r.data["image_facts"],
                "imageFacts describe your own image, so name that image (the runtime image's "
                "facts come from its Dockerfile)",
            )
        image_facts = parse_declared(r.data["image_facts"], r.path("image_facts"))
    entrypoint = None
    if r.has("entrypoint"):
        entrypoint = _parse_entrypoint(r.data["entrypoint"], r.path("entrypoint"), image)
        kind_key = {"code_dir": "codeDir"}.get(entrypoint.kind, entrypoint.kind)
        _check_runtime_only_keys(r, where, f"{r.path('entrypoint')}.{kind_key}")
    team = r.str_("team")
    pool = r.str_("pool")
    training = _parse_model(r)
    if team is None:
        raise JobConfigError(r.path("team"), None, "every job needs the team it runs as")
    if pool is None:
        raise JobConfigError(r.path("pool"), None, "every job needs the node pool it runs on")
    return JobSpec(
        name=name,
        team=team,
        pool=pool,
        strategy=strategy,
        preset=preset,
        workers=workers,
        gpus_per_worker=r.int_("gpus_per_worker", None, minimum=0),
        procs_per_worker=r.int_("procs_per_worker", None),
        cpu=r.quantity("cpu"),
        memory=r.quantity("memory"),
        shm_size=r.quantity("shm_size"),
        efa=r.bool_("efa"),
        image=image,
        code_source=code_source,
        image_facts=image_facts,
        training=training,
        model_size=_parse_model_size(r.data.get("model_size"), r.path("model_size"), training),
        checkpoint=_parse_checkpoint(r.data.get("checkpoint"), r.path("checkpoint")),
        elastic=elastic,
        run_policy=_parse_run_policy(r.data.get("run_policy"), r.path("run_policy")),
        restart_policy=r.str_("restart_policy", None, RESTART_POLICIES),
        hang_timeout=r.int_("hang_timeout", None, minimum=0, maximum=86400),
        # Off by default for user code: a PodMonitor scraping a port nothing serves would be a
        # down target (and kube-prometheus-stack's TargetDown alert) for every plain script.
        metrics_port=r.int_(
            "metrics_port", 9090 if entrypoint is None else 0, minimum=0, maximum=65535
        ),
        nccl_debug=r.str_("nccl_debug", "WARN", NCCL_DEBUG_LEVELS),
        env=_parse_env(r.data.get("env"), r.path("env")),
        priority=r.str_("priority", "normal", PRIORITIES),
        topology=r.str_("topology", None, TOPOLOGY_MODES),
        entrypoint=entrypoint,
        volumes=_parse_volumes(r.data.get("volumes"), r.path("volumes")),
        backend=r.str_("backend", None, BACKENDS),
        expected_step_seconds=r.float_("expected_step_seconds"),
    )


def parse_jobs(raw: Any, where: str = "trainforge:jobs") -> list[JobSpec]:
    """Parse the `trainforge:jobs` list; names must be unique per team (one namespace)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise JobConfigError(where, raw, "expected a list of jobs")
    jobs = [parse_job(item, f"{where}[{i}]") for i, item in enumerate(raw)]
    seen: dict[tuple[str, str], int] = {}
    for i, job in enumerate(jobs):
        key = (job.team, job.name)
        if key in seen:
            raise JobConfigError(
                f"{where}[{i}].name",
                job.name,
                f"already used by {where}[{seen[key]}] in team {job.team!r}; names must be unique per team",
            )
        seen[key] = i
    return jobs


# --- presets --------------------------------------------------------------------------------


def ddp(name: str, team: str, pool: str, **kwargs: Any) -> JobSpec:
    """Data-parallel job: a Master and `workers - 1` Workers, each a full model replica."""
    return parse_job({"name": name, "team": team, "pool": pool, "preset": "ddp", **kwargs}, name)


def fsdp(name: str, team: str, pool: str, **kwargs: Any) -> JobSpec:
    """FSDP2 job: parameters, gradients and optimizer state sharded over all ranks."""
    return parse_job({"name": name, "team": team, "pool": pool, "preset": "fsdp", **kwargs}, name)


def elastic(
    name: str, team: str, pool: str, min_workers: int, max_workers: int, **kwargs: Any
) -> JobSpec:
    """torchrun-elastic job: Workers only, c10d rendezvous, survives pod loss down to min."""
    el = {"min_workers": min_workers, "max_workers": max_workers}
    if "max_restarts" in kwargs:
        el["max_restarts"] = kwargs.pop("max_restarts")
    return parse_job(
        {"name": name, "team": team, "pool": pool, "preset": "elastic", "elastic": el, **kwargs},
        name,
    )


def function_job(
    name: str,
    fn: Any,
    team: str,
    pool: str,
    *,
    function_args: dict[str, Any] | None = None,
    **kwargs: Any,
) -> JobSpec:
    """A job that calls `fn(**function_args)` in every process, as the Kubeflow SDK's
    `CustomTrainer(func=...)` does: its source and what it uses are shipped (see
    `trainforge.jobs.pyfunction`), the distributed environment is set (RANK, WORLD_SIZE,
    MASTER_ADDR, ... and the trainforge contract), and the function initialises its process
    group itself (or calls `trainforge.training.init_distributed()`)."""
    entry = {"function": fn, "function_args": function_args}
    return parse_job(
        {"name": name, "team": team, "pool": pool, "entrypoint": entry, **kwargs}, name
    )
