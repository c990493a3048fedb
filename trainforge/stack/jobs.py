"""The jobs' keys: `trainforge:jobs[]`, one model per block of a job (read by trainforge/jobs/spec.py).

The models ARE the job objects the code reads (`trainforge.jobs.spec.JobSpec` is `JobModel`):
each key is declared once here with its type, default, bounds and description. The bundled
runtime's flags (`model`, `layers`, ..., `precision`) and the checkpoint settings it shares with
the runtime are not repeated: their fields are derived from the runtime's own declaration
(`trainforge.training.config.settings`: type, choices, bounds, help), so a runtime flag is
declared in one place and a job refuses what the runtime's parser would. Rules that relate several keys are checked
in the model that holds them, and each problem names its own key (`ProblemList`).
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
import typing
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from trainforge.core import image_routes
from trainforge.core.contract import BACKENDS, MAX_PORT
from trainforge.core.errors import JobConfigError
from trainforge.core.expansion import dependency_order
from trainforge.core.names import DNS1035, DNS1035_LABEL_MAX
from trainforge.stack.base import (
    Bool,
    Float,
    Int,
    Section,
    StackError,
    StackModel,
    matching,
    memory_floor,
    pinned_image,
    refuse,
    unless_unparsed,
)
from trainforge.stack.services import ClaimName
from trainforge.training import config as runtime
from trainforge.training.contract import CONTRACT_VARIABLES
from trainforge.training.timeouts import MAX_HANG_TIMEOUT_S, MIN_HANG_TIMEOUT_S, STARTUP_MULTIPLE
from trainforge.training.torchrun_env import TORCHRUN_ENV

Strategy = Literal["ddp", "fsdp"]
Preset = Literal["ddp", "fsdp", "elastic"]
CodeSource = Literal["configmap", "image"]
EntrypointKind = Literal["runtime", "script", "module", "command", "function"]
# Job priorities (the job key `priority`), each a Kueue WorkloadPriorityClass of this value
# (platform.queues.priority_classes)
PRIORITY_VALUES = {"high": 10000, "normal": 1000, "low": 100}
Priority = Literal[tuple(PRIORITY_VALUES)]  # type: ignore[valid-type]
Topology = Literal["preferred", "layer-1", "layer-2", "layer-3", "none"]  # jobs.tenancy

# Kubernetes object names of a job's pods and services are `<job>-worker-<index>`, and
# Services (which the operator creates per pod) must be DNS-1035 labels of at most 63
# characters. Leave room for at least three index digits so a job can grow to 1000 pods.
MAX_LABEL = DNS1035_LABEL_MAX
POD_SUFFIX = "-worker-"
MIN_INDEX_DIGITS = 3
# checkpoint.fingerprint: a dotted module path and a function name
Fingerprint = matching(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", "module:function, e.g. layout:state_layout")
IMAGE_RE = image_routes.REFERENCE  # jobs/importer reads it here
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the platform or the operator; a user override would silently break the job.
RESERVED_ENV = {
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
    # torchrun's launch config (trainforge.training.torchrun_env): without it a torchrun
    # restart reuses the dead attempt's store keys and never regroups
    *TORCHRUN_ENV,
    *CONTRACT_VARIABLES,
}
PATH_RULE = (
    "a path relative to the project directory (where Pulumi and run-local run) and inside it "
    "(no leading /, no drive letter, no .. above it), so every machine that deploys or runs "
    "the job finds the same file"
)


class JobsError(JobConfigError, StackError):
    """Every problem of one or more job declarations (`errors`, one line each).

    A `StackError` for the stack's one reader, and a `JobConfigError` (its first line's
    `where`) for the callers of the Python API that catch that."""

    def __init__(self, errors: typing.Iterable[str]) -> None:
        StackError.__init__(self, errors)  # JobConfigError's (where, value, expected) is not used
        if len(self.errors) == 1:  # one problem: its line alone, as every JobConfigError reads
            self.args = (self.errors[0],)
        self.where, _, self.expected = (self.errors[0] if self.errors else "").partition(": ")
        self.value = None


class ProblemList(list):
    """The problems a rule that relates several keys finds, each `(loc, value, expected)` at
    its own key (`loc`, in the keys users write); raised by `refuse`. A collector, not the
    exception `base.Problems` (a pydantic validator raises that one)."""

    def add(self, loc: tuple[str | int, ...], value: Any, expected: str) -> None:
        self.append((loc, value, expected))

    def extend_at(self, other: ProblemList, *prefix: str | int) -> None:
        self.extend(((*prefix, *loc), value, expected) for loc, value, expected in other)

    def raise_if_any(self, title: str) -> None:
        refuse(title, self)


def whole_command_line(command: Any) -> str:
    """Why a container's command cannot start ("" when it can): its program, command[0],
    holding a whole command line. The container runtime execs command[0] as the program's path
    and no shell splits it, so `[torchrun train.py]` looks for a program named "torchrun
    train.py" and every pod fails to start. The one rule of the stack's entrypoint.command and
    of `trainforge import` (jobs/import_read.py)."""
    program = command[0] if isinstance(command, list | tuple) and command else None
    if not isinstance(program, str) or len(program.split()) < 2:
        return ""
    try:
        words = shlex.split(program)
    except ValueError:  # an unbalanced quote: the words as spaces part them
        words = program.split()
    return (
        "Kubernetes runs it as one program name, and no shell splits it: write each word as "
        f"its own item: [{', '.join(words)}]"
    )


def norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/"))


def project_relative(value: Any, where: str, what: str) -> str:
    """The one path rule for files of the project (`script`, `codeDir`, `--program`):
    relative to the project directory and inside it; normalised."""
    if not isinstance(value, str) or not value.strip() or _outside(value):
        raise JobConfigError(where, value, f"expected {what}: {PATH_RULE}")
    return norm(value)


def _outside(value: str) -> bool:
    n = norm(value)
    return (
        value.startswith(("/", "\\"))
        or bool(re.match(r"^[A-Za-z]:", value))
        or n == ".."
        or n.startswith("../")
    )


def _project_path(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not value.strip() or _outside(value):
            raise ValueError(f"{what}: {PATH_RULE}")
        return norm(value)

    return check


def _quantity(value: Any) -> Any:
    from trainforge.core.quantity import parse_quantity

    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    try:
        if not isinstance(value, str) or parse_quantity(value) <= 0:
            raise ValueError
    except ValueError:
        raise ValueError("a positive Kubernetes quantity such as 8, 500m or 32Gi") from None
    return value


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        hint = ' (quote numbers and booleans in YAML: "1")' if not isinstance(value, dict) else ""
        raise ValueError(f"a string{hint}")
    return value


Quantity = Annotated[
    str, BeforeValidator(_quantity), WithJsonSchema({"type": ["string", "number"]})
]
# a job's memory keys (memory, shmSize): positive, and no unitless figure under 1Mi (bytes)
Memory = Annotated[Quantity, AfterValidator(memory_floor(zero=False))]
Text = Annotated[str, BeforeValidator(_text), WithJsonSchema({"type": "string"})]
NonEmpty = Annotated[str, Field(min_length=1)]


# --- the bundled runtime's flags, from the runtime's own declaration ------------------------


_SETTINGS = {s.path: s for s in runtime.settings(runtime.TrainConfig)}


def runtime_field(path: str, annotation: Any = None, **override: Any) -> tuple[Any, Any]:
    """(annotation, Field) of a job key that IS the runtime setting `path` (`lr`,
    `checkpoint.every`): its type, choices, bounds and help come from the runtime's declaration
    (trainforge.training.config.settings); `override` states what the job key does differently
    (by default, unset means the runtime's default)."""
    s = _SETTINGS[path]
    if annotation is None:
        strict = {bool: Bool, int: Int, float: Float}.get(s.type, s.type)
        annotation = Literal[s.choices] if s.choices else strict
    default = override.pop("default", False if s.type is bool else None)
    bounds = {k: getattr(s, k) for k in ("gt", "ge", "le") if getattr(s, k) is not None}
    unset = "" if default is not None else "; default: the runtime's"
    description = override.pop("description", f"{s.help} (the runtime's {s.flag}{unset})")
    field = Field(default, description=description, **{**bounds, **override})
    return (annotation if default is not None else annotation | None), field


# Runtime flags that are not job keys: set by the platform (the run's name and output dir), a
# job key with pod semantics (`metricsPort`, `hangTimeout`), chosen with the preset
# (`strategy`), one the planner cannot size (`globalBatchSize`: the estimate reads
# `batchSize`), and the checkpoint settings (the `checkpoint` block).
NOT_JOB_FLAGS = {
    "strategy",
    "metrics_port",
    "hang_timeout",
    "output_dir",
    "run_name",
    "global_batch_size",
}
# The job's flags, the parallelism ones (precision, compile, ...) last: the order of the
# arguments every existing job's pods carry (trainforge.jobs.entrypoint.training_args).
FLAG_NAMES = tuple(
    s.path
    for s in sorted(_SETTINGS.values(), key=lambda s: s.group == "parallelism")
    if "." not in s.path and s.path not in NOT_JOB_FLAGS
)
FLAG_OF = {name: _SETTINGS[name].flag for name in FLAG_NAMES}  # "d_model" -> "--d-model"
# Flags that size the bundled model; a job states either these or `modelSize`, not both.
BUNDLED_SIZE_FLAGS = ("model", "layers", "d_model", "heads", "seq_len", "vocab_size")


class _Flags(Section):
    """The bundled runtime's flags of a job (None = the runtime's default)."""

    def flag_problems(self) -> ProblemList:
        """The runtime's own value checks, at preview: a job the runtime would reject at start
        is refused here, naming the job key (`vocabSize`) rather than the flag."""
        out = ProblemList()
        if self.dataset == "tokens" and not self.data_path:
            out.add(("dataPath",), None, "a uint16 token file: dataset 'tokens' needs dataPath")
        if self.data_path and "://" in self.data_path:  # else `/fsx/<team>/s3://...`: no file
            out.add(
                ("dataPath",),
                self.data_path,
                "a file the pods read (relative: on the team's FSx volume), not a URL: the "
                "runtime opens a local file; S3 data reaches FSx through fsx.dataRepository",
            )
        elif self.data_path and self.dataset != "tokens":
            out.add(
                ("dataPath",),
                self.data_path,
                f"no dataPath: it is only read with dataset: tokens (dataset is "
                f"{self.dataset or 'synthetic'})",
            )
        if self.d_model and self.heads and self.d_model % self.heads:
            out.add(("heads",), self.heads, f"a number that divides dModel ({self.d_model})")
        if out:
            return out
        values = {
            k: getattr(self, k)
            for k in FLAG_NAMES
            if getattr(self, k) is not None and k not in ("compile", "activation_checkpointing")
        }
        try:
            runtime.check_values(runtime.TrainConfig(**values))
        except runtime.ConfigError as e:
            m = re.search(r"--[a-z][a-z-]*", str(e))
            name = {f: n for n, f in FLAG_OF.items()}.get(m.group(0) if m else "", "model")
            key, value = _camel(name), getattr(self, name)
            out.add((key,), value, f"a value the training runtime accepts: {e}")
        return out


ModelFlags = create_model(
    "ModelFlags",
    __base__=_Flags,
    __doc__="The bundled runtime's flags of a job (None = the runtime's default).",
    **{n: runtime_field(n) for n in FLAG_NAMES},
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# --- the blocks of a job ----------------------------------------------------------------------


# The keys that state a model (ModelSize.shaped): the GPT form's and the declared form's.
_SHAPE_KEYS = (
    "layers",
    "d_model",
    "seq_len",
    "vocab_size",
    "heads",
    "parameters",
    "flops_per_sample",
    "flops_per_token",
    "activation_bytes_per_sample",
)


class ModelSize(Section):
    """What the planner needs to know about a model it cannot build from flags (user code).

    Read by the memory and step-time estimate (`trainforge.jobs.estimate`), which assumes
    a GPT-style decoder trained with AdamW unless the declared form is given, and `steps` by
    the expected run (`trainforge.jobs.duration`): `steps` alone, with no shape, next to the
    job's expectedStepSeconds, times the run and gives no estimate. Nothing here is passed to
    the code that runs.
    """

    layers: Int | None = Field(None, ge=1, description="GPT form: decoder blocks")
    d_model: Int | None = Field(None, ge=1, description="GPT form: hidden width")
    seq_len: Int | None = Field(None, ge=1, description="GPT form: tokens per sample")
    vocab_size: Int | None = Field(None, ge=1, description="GPT form: vocabulary size")
    parameters: Int | None = Field(
        None, ge=1, description="parameters (GPT form: default the decoder's count)"
    )
    heads: Int | None = Field(None, ge=1, description="GPT form: attention heads")
    batch_size: Int = Field(1, ge=1, description="samples per GPU per micro-step")
    grad_accum: Int = Field(1, ge=1, description="micro-steps per optimizer step")
    steps: Int | None = Field(None, ge=1, description="optimizer steps (the cost report's)")
    activation_checkpointing: Bool = Field(
        False, description="the code recomputes activations in backward"
    )
    flops_per_sample: Float | None = Field(
        None, gt=0, description="declared form: training FLOPs of one sample (e.g. 6.1e9)"
    )
    flops_per_token: Float | None = Field(
        None, gt=0, description="declared form: training FLOPs of one token"
    )
    tokens_per_sample: Int = Field(1, ge=1, description="declared form: tokens per sample")
    activation_bytes_per_sample: Int | None = Field(
        None, ge=1, description="declared form: activation bytes one sample keeps for backward"
    )

    @property
    def declared(self) -> bool:
        """The declared form (no GPT shape)."""
        return self.layers is None

    @property
    def shaped(self) -> bool:
        """Whether it states a model (a key of the GPT or the declared form). Without one it
        is the steps-only form, `modelSize: {steps: N}` next to `expectedStepSeconds`: how long
        your code runs, with nothing for the memory and step-time estimate to size."""
        return any(getattr(self, k) is not None for k in _SHAPE_KEYS)

    def form_problems(self, timed: bool = False) -> ProblemList:
        """The GPT form needs its four shape keys; the declared form its three facts; the
        steps-only form (no shape) `steps` and the job's `expectedStepSeconds` (`timed`).
        (Checked by the job, after its rule that modelSize and the bundled flags exclude
        each other.)"""
        if self.shaped:
            return self._shape_problems()
        out = ProblemList()
        if not timed:
            given = self.model_dump(by_alias=True, exclude_unset=True)
            out.add(
                (),
                given,
                "the model's shape (parameters, flopsPerSample (or flopsPerToken and "
                "tokensPerSample) and activationBytesPerSample, `trainforge calibrate "
                "--declared` measures them; or the GPT form: layers, dModel, seqLen, vocabSize), "
                "or expectedStepSeconds next to modelSize.steps (the seconds one step takes on "
                "its pool: `trainforge report` of a run prints the median)",
            )
            return out
        for key in sorted(
            self.model_fields_set - {"steps"}, key=list(ModelSize.model_fields).index
        ):
            out.add(
                (_camel(key),),
                getattr(self, key),
                "no such key in the steps-only form (modelSize.steps next to "
                "expectedStepSeconds): only the memory and step-time estimate reads it, and it "
                "needs the model's shape too",
            )
        return out

    @model_validator(mode="wrap")
    @classmethod
    def _per_sample(cls, data: Any, handler: Any) -> ModelSize:
        size = handler(data)
        if size.flops_per_sample is None and size.flops_per_token is not None:
            per_sample = size.flops_per_token * size.tokens_per_sample
            size = size.model_copy(update={"flops_per_sample": per_sample})
        return size

    def _shape_problems(self) -> ProblemList:
        out = ProblemList()
        gpt = ("layers", "d_model", "seq_len", "vocab_size")
        declared = ("flops_per_sample", "flops_per_token", "activation_bytes_per_sample")
        if any(getattr(self, k) is not None for k in gpt):
            for key in gpt:
                if getattr(self, key) is None:
                    out.add(
                        (_camel(key),),
                        None,
                        "layers, dModel, seqLen and vocabSize in the GPT form of modelSize (the "
                        "planner sizes activations and logits from them); for another model "
                        "state parameters, flopsPerSample (or flopsPerToken) and "
                        "activationBytesPerSample",
                    )
            for key in declared:
                if getattr(self, key) is not None:
                    out.add(
                        (_camel(key),), getattr(self, key), "no declared-form key in the GPT form"
                    )
            if self.heads and self.d_model and self.d_model % self.heads:
                out.add(("heads",), self.heads, f"a number that divides dModel ({self.d_model})")
            return out
        for key in ("parameters", "flops_per_sample", "activation_bytes_per_sample"):
            if getattr(self, key) is None:
                out.add(
                    (_camel(key),),
                    None,
                    "modelSize to state your model: parameters, flopsPerSample (or "
                    "flopsPerToken and tokensPerSample) and activationBytesPerSample "
                    "(`trainforge calibrate --declared` measures them from a local run), or "
                    "the GPT form (layers, dModel, seqLen, vocabSize)",
                )
        return out


def _checkpoint_dir(value: str) -> str:
    if ".." in PurePosixPath(value).parts:
        raise ValueError("a path without '..' components")
    return posixpath.normpath(value)


def _resume(value: str) -> str:
    if value not in ("auto", "never") and not value.startswith("/"):
        raise ValueError("auto, never, or an absolute path")
    return value


class _Checkpoint(Section):
    s3_mirror: Bool | None = Field(
        None,
        description="mirror checkpoints to the team's prefix of the platform's bucket (needs "
        "boto3 in the image); unset: on for a job's own image, off for the stock image",
    )
    fingerprint: Fingerprint | None = Field(
        None,
        description="own code: module:function in the job's code directory returning the state "
        "layout its checkpoints hold; `trainforge plan --diff` compares it",
    )


# The job's checkpointing: the runtime's settings with the platform's defaults (a job on the
# platform checkpoints every 500 steps, in the background) and bounds (at least every step;
# keep at least one; the grace period is whole seconds, as a pod's terminationGracePeriodSeconds
# is, and at most an hour). The S3 URI is the platform's to set (`s3Mirror` above).
CheckpointSpec = create_model(
    "CheckpointSpec",
    __base__=_Checkpoint,
    __doc__="Where and how often the runtime checkpoints (`checkpoint`).",
    every=runtime_field(
        "checkpoint.every",
        default=500,
        ge=1,
        description="save every N optimizer steps (the runtime's --checkpoint-every)",
    ),
    keep_last=runtime_field(
        "checkpoint.keep_last",
        default=3,
        ge=1,
        description="keep the newest N complete checkpoints (the runtime's --keep-last)",
    ),
    async_save=runtime_field("checkpoint.async_save", default=True, alias="async"),
    grace_period=runtime_field(
        "checkpoint.grace_period",
        Int,
        default=90,
        gt=None,
        ge=1,
        le=3600,
        description="seconds to checkpoint and exit after SIGTERM (the runtime's "
        "--grace-period); the pod's terminationGracePeriodSeconds is this plus 30",
    ),
    resume=runtime_field(
        "checkpoint.resume", Annotated[NonEmpty, AfterValidator(_resume)], default="auto"
    ),
    directory=runtime_field(
        "checkpoint.directory",
        Annotated[NonEmpty, AfterValidator(_checkpoint_dir)],
        alias="dir",
        description="the job's checkpoint directory (default /fsx/checkpoints/<namespace>/<job>)"
        ": relative = on the team's FSx mount; absolute = on a writable volume of the job",
    ),
)


class ElasticSpec(Section):
    """torchrun elasticity: the job runs with any pod count in [min_workers, max_workers]."""

    min_workers: Int | None = Field(None, ge=1, description="the fewest pods (default maxWorkers)")
    max_workers: Int | None = Field(None, ge=1, description="the most pods (default workers)")
    max_restarts: Int = Field(3, ge=0, description="torchrun restarts of the worker group")

    @model_validator(mode="wrap")
    @classmethod
    def _range(cls, data: Any, handler: Any) -> ElasticSpec:
        el = handler(data)
        if el.min_workers is None and el.max_workers is not None:
            el = el.model_copy(update={"min_workers": el.max_workers})
        if (
            el.max_workers is not None
            and el.min_workers is not None
            and el.min_workers > el.max_workers
        ):
            expected = f"a value <= maxWorkers ({el.max_workers})"
            refuse("elastic", [(("minWorkers",), el.min_workers, expected)])
        return el


class RunPolicySpec(Section):
    """The run policy (a PyTorchJob's runPolicy; what the other backends support of it: see
    docs/jobs.md). Defaults free GPUs promptly but keep logs for a day."""

    # "Running": when the job finishes, pods still running (e.g. a hung worker) are
    # deleted so they stop holding GPUs; completed pods stay for `kubectl logs`.
    clean_pod_policy: Literal["None", "Running", "All"] = Field(
        "Running", description="pods deleted when the job finishes"
    )
    ttl_seconds_after_finished: Int | None = Field(
        86400, ge=0, description="seconds the finished job (and its logs) stays"
    )
    backoff_limit: Int = Field(6, ge=0, description="restarts before the job fails")
    active_deadline_seconds: Int | None = Field(
        None, ge=1, description="seconds the job may run at most"
    )


def _shipped(value: Any) -> Any:
    if not isinstance(value, ShippedFunction | dict):
        raise ValueError(
            "a Python function (the Python API only: function_job or TrainingJob.function); "
            "stack config runs a script, module or command"
        )
    return value


class ShippedFunction(StackModel):
    """A Python function as the program that calls it (trainforge.jobs.pyfunction)."""

    name: str = Field(description="the function's name")
    files: tuple[tuple[str, str], ...] = Field(description="((file name, program text),)")


Shipped = Annotated[ShippedFunction, BeforeValidator(_shipped)]


class EntrypointSpec(Section):
    """What a job runs when it is not the bundled runtime: one of script, module, command
    (or, from Python, a function).

    `script`, `code_dir` are paths relative to the project directory (where Pulumi and
    `run-local` run); `code_dir` is the directory shipped to the pods (for a script, the
    script's own directory unless given). A `function` entrypoint carries its generated
    source in `files` (see `trainforge.jobs.pyfunction`).
    """

    script: Annotated[Text, AfterValidator(_project_path("a file"))] | None = Field(
        None, description="a file of the repository, run with python (or torchrun)"
    )
    module: Text | None = Field(
        None, description="python -m <module>: from codeDir, or from image (required without)"
    )
    command: tuple[Text, ...] = Field((), description="any argv of your image, run as written")
    args: tuple[Text, ...] = Field((), description="strings for the script or module")
    code_dir: Annotated[Text, AfterValidator(_project_path("a directory"))] | None = Field(
        None,
        description="the directory shipped in an immutable ConfigMap (default: the script's)",
    )
    exclude: tuple[Text, ...] = Field((), description="glob patterns not to ship")
    working_dir: Text | None = Field(
        None,
        description="the container's working directory for code of your image (command, or "
        "module without codeDir): an absolute path; shipped code runs from its own mount",
    )
    retry_on: tuple[Text, ...] = Field(
        (),
        description="your exceptions a restart may fix, e.g. [ConnectionError, "
        "mypkg.TransientError]: they exit 205 (retryable) instead of 1 (the job stops)",
    )
    function: SkipJsonSchema[Shipped | None] = Field(
        None, description="Python API only (TrainingJob.function, function_job): the function"
    )

    @field_validator("module")
    @classmethod
    def _dotted(cls, value: str | None) -> str | None:
        if value is not None and not MODULE_RE.match(value):
            raise ValueError("a dotted module name such as pkg.train")
        return value

    @field_validator("working_dir")
    @classmethod
    def _absolute_dir(cls, value: str | None) -> str | None:
        # an OCI process's cwd "MUST be an absolute path" (runtime-spec config.md, process)
        if value is not None and not value.startswith("/"):
            raise ValueError("an absolute path of your image, such as /app")
        return value if value is None else posixpath.normpath(value)

    @field_validator("retry_on")
    @classmethod
    def _exception_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [n for n in value if not MODULE_RE.match(n)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not an exception name: a class name such as ConnectionError, "
                "or module.Class such as mypkg.errors.TransientError"
            )
        return value

    @property
    def kind(self) -> str:
        return next(k for k in ("script", "module", "command", "function") if _set(self, k))

    @property
    def files(self) -> tuple[tuple[str, str], ...]:
        """A function entrypoint's generated program: ((file name, text),)."""
        return self.function.files if self.function is not None else ()

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
        return PurePosixPath(posixpath.relpath(self.script, self.code_dir or ".")).as_posix()

    @model_validator(mode="wrap")
    @classmethod
    def _one_kind(cls, data: Any, handler: Any) -> EntrypointSpec:
        ep = handler(data)
        out = ProblemList()
        given = [k for k in ("script", "module", "command", "function") if _set(ep, k)]
        if len(given) > 1:
            out.add(
                (given[1],),
                getattr(ep, given[1]),
                f"only one of script, module, command (or, in Python, function); "
                f"{given[0]} is set too",
            )
        elif "command" in ep.model_fields_set and not ep.command:
            out.add(("command",), [], "the argv to run, e.g. [torchrun, train.py]")
        elif not given:
            key = next((k for k in ("code_dir", "args", "exclude") if _set(ep, k)), None)
            out.add(
                (_camel(key),) if key else (),
                _plain(getattr(ep, key)) if key else data,
                "something to run: one of script, module, command (or, in Python, function)",
            )
        elif given[0] == "script" and ep.script is not None:
            code_dir = (
                ep.code_dir if ep.code_dir is not None else posixpath.dirname(ep.script) or "."
            )
            if posixpath.relpath(ep.script, code_dir).startswith(".."):
                out.add(
                    ("script",),
                    ep.script,
                    f"a script inside codeDir ({code_dir}), which is what is shipped",
                )
            ep = ep.model_copy(update={"code_dir": code_dir})
        elif given[0] == "command" and (why := whole_command_line(ep.command)):
            out.add(("command", 0), ep.command[0], f"a program, not a command line: {why}")
        elif given[0] == "command" and ep.args:
            out.add(
                ("args",), list(ep.args), "no args: put a command's arguments in command itself"
            )
        elif given[0] == "command" and ep.retry_on:
            out.add(
                ("retryOn",),
                list(ep.retry_on),
                "no retryOn: a command runs as written, so its exit code alone decides (exit "
                "205, or any code >= 128, to be retried); retryOn is for script, module and "
                "function",
            )
        elif given[0] == "function" and (ep.code_dir is not None or ep.exclude or ep.args):
            out.add(
                (),
                data,
                "no codeDir, exclude or args: a function entrypoint ships the function's own "
                "source (pass values with function_args)",
            )
        if (
            ep.working_dir is not None
            and given
            and (given[0] in ("script", "function") or ep.code_dir is not None)
        ):
            out.add(
                ("workingDir",),
                ep.working_dir,
                "no workingDir with shipped code: a script, function or codeDir runs from the "
                "shipped directory's mount; workingDir is for a command or module of your image",
            )
        out.raise_if_any("entrypoint")
        return ep


def _set(model: Any, key: str) -> bool:
    value = getattr(model, key)
    return value is not None and value != ()


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class VolumeSpec(Section):
    """A further PersistentVolumeClaim of the job's team, mounted in every pod."""

    claim: ClaimName = Field(description="the name of a PersistentVolumeClaim of the team")
    mount_path: str = Field(description="an absolute path other than / (e.g. /data)")
    read_only: Bool = Field(False, description="mount it read-only")
    sub_path: str | None = Field(None, description="a relative path inside the claim")

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ":" in value or norm(value) == "/":
            raise ValueError("an absolute path other than / (e.g. /data)")
        return norm(value)

    @field_validator("sub_path")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in PurePosixPath(value).parts):
            raise ValueError("a relative path inside the claim, without '..'")
        return value


def _piece(value: Any) -> Any:
    if not isinstance(value, bool | str):
        raise ValueError("true, false or a version string")
    return value


Piece = Annotated[
    bool | str,
    BeforeValidator(_piece),
    WithJsonSchema({"type": ["boolean", "string"]}),
]


def _version(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("a version string")
    return str(value)


Version = Annotated[str, BeforeValidator(_version), WithJsonSchema({"type": ["string", "number"]})]


def _cuda(value: Any) -> Any:
    """A CUDA release is MAJOR.MINOR (the `cuda<X.Y>` of a pytorch/pytorch tag): the image
    checks read its major for the driver it needs (jobs/images.build_problem)."""
    value = _version(value)
    if not re.fullmatch(r"\d+\.\d+", value):
        raise ValueError("a CUDA version MAJOR.MINOR, e.g. 12.6")
    return value


CudaVersion = Annotated[str, BeforeValidator(_cuda), WithJsonSchema({"type": ["string", "number"]})]


class ImageFactsKeys(Section):
    """What a job's own image carries (`imageFacts`): versions, and pieces as true, false or a
    version (trainforge.jobs.image_facts.ImageFacts holds them after parsing)."""

    torch: Version | None = Field(None, description="torch version")
    cuda: CudaVersion | None = Field(None, description="CUDA version")
    python: Version | None = Field(None, description="Python version")
    mlflow: Piece | None = Field(None, description="mlflow (true, false or a version)")
    boto3: Piece | None = Field(None, description="boto3 (true, false or a version)")
    libfabric: Piece | None = Field(None, description="libfabric (EFA)")
    aws_ofi_nccl: Piece | None = Field(None, description="the aws-ofi-nccl plugin (EFA)")
    trainforge: Piece | None = Field(
        None, description="the trainforge runtime library (no ConfigMap needed)"
    )
    torchao: Piece | None = Field(None, description="torchao (precision: fp8)")


def _env(raw: Any) -> Any:
    """NAME: value pairs in dependency order (core.expansion.dependency_order: a variable after
    the job's variables its `$(NAME)` refers to, else by name), so that Kubernetes, which
    expands a value only from the variables before it, resolves what the author meant: the
    mapping's own order does not reach the program under `pulumi up` (its engine sorts a
    config object's keys). Names the platform or the operator own are refused."""
    if not isinstance(raw, dict):
        raise ValueError("a mapping of NAME: value")
    out = ProblemList()
    pairs = []
    for key, value in raw.items():
        if not isinstance(key, str) or not ENV_NAME.match(key):
            out.add((str(key),), key, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        elif key == "HOME":
            out.add(
                (key,),
                value,
                "no HOME: it is /tmp in every pod (the team's MLflow credentials are mounted at "
                "$HOME/.mlflow); move caches with XDG_CACHE_HOME, TORCH_HOME or HF_HOME instead",
            )
        elif key in RESERVED_ENV or key.startswith("PET_"):
            out.add(
                (key,),
                key,
                "a name other than those set by the operator or the platform, which cannot be "
                "overridden",
            )
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            out.add((key,), value, "a string or number")
        else:
            pairs.append((key, str(value)))
    out.raise_if_any("env")
    return dependency_order(pairs)


Env = Annotated[
    tuple[tuple[str, str], ...],
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "number"]}}),
    BeforeValidator(_env),
]


def _name(value: str) -> str:
    if not DNS1035.match(value):
        raise ValueError(
            "a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and "
            "ending with a letter or digit"
        )
    return value


def name_limit(max_workers: int) -> int:
    """The longest job name whose pod and service names fit a DNS label at this pod count."""
    digits = max(MIN_INDEX_DIGITS, len(str(max(max_workers - 1, 0))))
    return MAX_LABEL - len(POD_SUFFIX) - digits


class JobModel(ModelFlags):  # type: ignore[misc,valid-type]
    """A training job (`trainforge:jobs[]`). `gpus_per_worker`, `cpu`, `memory`, `shm_size`
    and `efa` may be None until `wiring.resolve_job` fills them from the job's pool."""

    # Keys a PyTorchJob, a TrainJob, torchrun or a blog post spells otherwise, with what says
    # it here (an unknown key's line suggests it: base._meaning).
    KEY_MEANINGS: ClassVar[dict[str, tuple[str, str]]] = {
        "args": ("entrypoint.args", ""),
        "command": ("entrypoint.command", ""),
        "script": ("entrypoint.script", ""),
        "module": ("entrypoint.module", ""),
        "codeDir": ("entrypoint.codeDir", ""),
        "workingDir": ("entrypoint.workingDir", ""),
        "replicas": ("workers", "it counts pods"),
        "numWorkers": ("workers", "it counts pods"),
        "nodes": ("workers", "it counts pods, and a GPU pod takes a whole node's GPUs by default"),
        "numNodes": (
            "workers",
            "it counts pods, and a GPU pod takes a whole node's GPUs by default",
        ),
        "gpus": ("gpusPerWorker", ""),
        "numGpus": ("gpusPerWorker", ""),
        "nprocPerNode": ("procsPerWorker", "a GPU job runs one process per GPU"),
        "resources": ("cpu", "with memory and gpusPerWorker, per pod"),
        "namespace": ("team", "a team is a namespace"),
        "queue": ("team", "each team has its own queue"),
        "nodePool": ("pool", ""),
        "instanceType": ("pool", "a node pool of the stack, which lists its instance types"),
        "environment": ("env", ""),
        "backoffLimit": ("runPolicy.backoffLimit", ""),
        "maxRestarts": ("runPolicy.backoffLimit", ""),
        "activeDeadlineSeconds": ("runPolicy.activeDeadlineSeconds", ""),
        "framework": ("backend", "pytorchjob, trainjob or indexed-job"),
        "kind": ("backend", "pytorchjob, trainjob or indexed-job"),
    }

    name: Annotated[NonEmpty, AfterValidator(_name)] = Field(
        description="the job's name: a DNS-1035 label of at most 52 characters (fewer above "
        "1000 pods), unique per team"
    )
    team: NonEmpty = Field(description="the team the job runs as (every job needs one)")
    pool: NonEmpty = Field(description="the node pool the job runs on (every job needs one)")
    strategy: Strategy = Field("ddp", description="ddp or fsdp (default: from the preset)")
    preset: Preset = Field(
        "ddp", description="ddp, fsdp or elastic (default ddp; elastic with an elastic block)"
    )
    workers: Int = Field(1, ge=1, description="pods (default 1; elastic: maxWorkers)")
    gpus_per_worker: Int | None = Field(
        None, ge=0, description="GPUs per pod (default: the pool's GPUs per node)"
    )
    procs_per_worker: Int | None = Field(
        None, ge=1, description="processes per pod (default: the GPUs, or 1 on CPU)"
    )
    cpu: Quantity | None = Field(None, description="CPU per pod (default: the GPUs' share)")
    memory: Memory | None = Field(None, description="memory per pod (default: the GPUs' share)")
    shm_size: Memory | None = Field(
        None, description="memory-backed /dev/shm (default a quarter of memory, at most 64Gi)"
    )
    efa: Bool | None = Field(None, description="EFA (default: on when the pool has it and GPUs)")
    image: Annotated[NonEmpty, AfterValidator(pinned_image)] | None = Field(
        None, description="the container image, pinned (default: the runtime image of the pool)"
    )
    code_source: CodeSource = Field(
        "configmap", description="configmap: ship the runtime; image: your image contains it"
    )
    # What the job's own image carries; after parsing, a trainforge.jobs.image_facts.ImageFacts
    # (resolved jobs on a runtime image carry that image's facts).
    image_facts: ImageFactsKeys | None = Field(
        None, description="what your own image carries (versions, and pieces true or false)"
    )
    model_size: ModelSize | None = Field(
        None, description="own code: the model the planner sizes memory and step time for"
    )
    checkpoint: CheckpointSpec = Field(  # type: ignore[valid-type]
        default_factory=lambda: CheckpointSpec(), description="checkpointing"
    )
    elastic: ElasticSpec | None = Field(None, description="elastic pod counts (preset elastic)")
    run_policy: RunPolicySpec = Field(
        default_factory=lambda: RunPolicySpec(), description="the run policy"
    )
    # Unset: ExitCode, except on a PyTorchJob whose pods cannot count their attempts (wiring).
    restart_policy: Literal["OnFailure", "ExitCode", "Never"] | None = Field(
        None,
        description="ExitCode: the exit code decides (1-127 fail the job, 128-255 restart the "
        "pod); OnFailure: restart every failure in place; Never (default ExitCode)",
    )
    hang_timeout: Int | None = Field(
        None,
        ge=0,
        le=MAX_HANG_TIMEOUT_S,
        description="watchdog floor in seconds (the runtime's --hang-timeout; 0 = off; "
        "default the runtime's 300); collective and rendezvous timeouts derive from it",
    )
    # Off for user code: a PodMonitor on a port nothing serves is a down target (TargetDown).
    metrics_port: Int = Field(
        9090,
        ge=0,
        le=MAX_PORT,
        description="metrics port (0 = off; default 9090, 0 with an entrypoint)",
    )
    nccl_debug: Literal["VERSION", "WARN", "INFO", "TRACE"] = Field(
        "WARN", description="NCCL_DEBUG"
    )
    env: Env = Field(
        (),
        description="extra environment variables (NAME: value)",
        json_schema_extra={"default": {}},
    )
    priority: Priority = Field("normal", description="the job's Kueue WorkloadPriorityClass")
    topology: Topology | None = Field(
        None, description="how close the pods must be on topology-aware pools"
    )
    entrypoint: EntrypointSpec | None = Field(
        None, description="your own code (default: the bundled runtime)"
    )
    volumes: tuple[VolumeSpec, ...] = Field((), description="further claims of the team")
    # `wiring.resolve_job` fills in the platform's default (`trainforge:jobBackend`).
    backend: Literal[BACKENDS] | None = Field(  # type: ignore[valid-type]
        None, description="pytorchjob, trainjob or indexed-job (default: the platform's)"
    )
    expected_step_seconds: Float | None = Field(
        None, gt=0, description="seconds one optimizer step takes on this pool, if known"
    )

    @property
    def training(self) -> Any:
        """The bundled runtime's flags of the job (a ModelFlags)."""
        return ModelFlags.model_construct(**{k: getattr(self, k) for k in FLAG_NAMES})

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

    @model_validator(mode="wrap")
    @classmethod
    def _checked(cls, data: Any, handler: Any) -> JobModel:
        job = handler(data)
        given = set(job.model_fields_set)
        update: dict[str, Any] = {}
        out = ProblemList()
        preset, max_workers = job.preset, job.workers
        # each check of this rule apart: one that reads a wrong key waits (stack/base.py)
        with unless_unparsed():
            preset = job.preset
            if "preset" not in given:
                preset = "elastic" if job.elastic is not None else job.strategy
                update["preset"] = preset
            if preset == "fsdp" and "strategy" not in given:
                update["strategy"] = "fsdp"
            elif preset == "fsdp" and job.strategy != "fsdp":
                out.add(("strategy",), job.strategy, "fsdp: the fsdp preset runs strategy fsdp")
            max_workers = job.workers
            if preset != "elastic" and job.elastic is not None:
                out.add(
                    ("elastic",),
                    job.elastic.model_dump(by_alias=True, exclude_unset=True),
                    f"no elastic block: elastic settings need preset: elastic (got {preset})",
                )
            elif preset == "elastic":
                el = job.elastic or ElasticSpec()
                hi = el.max_workers or (job.workers if "workers" in given else None)
                if hi is None:
                    out.add(
                        ("elastic", "maxWorkers"),
                        None,
                        "maxWorkers: an elastic job needs maxWorkers (or workers)",
                    )
                else:
                    lo = el.min_workers or hi
                    if lo > hi:
                        out.add(("elastic", "minWorkers"), lo, f"a value <= maxWorkers ({hi})")
                    el = el.model_copy(update={"max_workers": hi, "min_workers": lo})
                    update["elastic"] = el
                    max_workers = hi
                    if "workers" not in given:
                        update["workers"] = hi
                    elif not lo <= job.workers <= hi:
                        out.add(
                            ("workers",),
                            job.workers,
                            f"a count within elastic minWorkers..maxWorkers ({lo}..{hi})",
                        )
        with unless_unparsed():
            if len(job.name) > name_limit(max_workers):
                limit = name_limit(max_workers)
                out.add(
                    ("name",),
                    job.name,
                    f"at most {limit} characters ({len(job.name)} given): pod and service names "
                    f"'<name>{POD_SUFFIX}<index>' must fit in {MAX_LABEL}",
                )
        with unless_unparsed():
            hang_problem = job._hang_timeout_problem()
            if hang_problem:
                out.add(("hangTimeout",), job.hang_timeout, hang_problem)
        with unless_unparsed():
            if job.code_source == "image" and job.image is None:
                out.add(
                    ("image",), None, "an image: codeSource: image runs trainforge from your image"
                )
        with unless_unparsed():
            if job.image_facts is not None and job.image is None:
                out.add(
                    ("imageFacts",),
                    job.image_facts.model_dump(by_alias=True, exclude_none=True),
                    "no imageFacts without image: they describe your own image (the runtime image's "
                    "facts come from its Dockerfile)",
                )
        with unless_unparsed():
            if job.entrypoint is not None:
                job._own_code_problems(out, given, preset)
                if "metrics_port" not in given:
                    update["metrics_port"] = 0
            else:
                out.extend(job.flag_problems())
        with unless_unparsed():
            size = job.model_size
            if size is not None:
                bundled = [_camel(k) for k in BUNDLED_SIZE_FLAGS if getattr(job, k) is not None]
                first = next(
                    (k for k in ModelSize.model_fields if k in size.model_fields_set), None
                )
                if bundled:
                    out.add(
                        ("modelSize", _camel(first)) if first else ("modelSize",),
                        getattr(size, first) if first else {},
                        f"modelSize or the bundled model's size ({', '.join(bundled)}), not both: "
                        "modelSize states the size of your own code's model",
                    )
                else:
                    timed = job.expected_step_seconds is not None
                    out.extend_at(size.form_problems(timed), "modelSize")
        with unless_unparsed():
            for i, volume in enumerate(job.volumes):
                for j, other in enumerate(job.volumes[:i]):
                    if other.claim == volume.claim and other.sub_path == volume.sub_path:
                        out.add(
                            ("volumes", i, "claim"),
                            volume.claim,
                            f"a claim not mounted yet (volumes[{j}] mounts it); mount it once",
                        )
                    if _nested(other.mount_path, volume.mount_path):
                        out.add(
                            ("volumes", i, "mountPath"),
                            volume.mount_path,
                            f"a path of its own: it overlaps volumes[{j}].mountPath "
                            f"({other.mount_path}); use separate paths",
                        )
        out.raise_if_any("job")
        return job.model_copy(update=update) if update else job

    def _hang_timeout_problem(self) -> str | None:
        """What is valid when `hangTimeout` is on but too short to let the job run (else None).

        Why: the watchdog's bound for the first steps after a (re)start is STARTUP_MULTIPLE x
        hangTimeout, with no step-time term (training/watchdog.py); below MIN_HANG_TIMEOUT_S
        it fires during NCCL setup or compilation, and below the job's own step time it fires
        on the first step: each restart hangs again, and the job burns its restarts."""
        hang = self.hang_timeout
        if not hang:  # unset (the runtime's 300) or 0 (off)
            return None
        step = self.expected_step_seconds or 0
        low = max(MIN_HANG_TIMEOUT_S, math.ceil(step))
        if hang >= low:
            return None
        why = (
            f"a step takes expectedStepSeconds ({step:g} s)"
            if step > MIN_HANG_TIMEOUT_S
            else "NCCL setup, compilation and cold data reads take minutes"
        )
        return (
            f"0 (watchdog off) or {low} to {MAX_HANG_TIMEOUT_S} seconds: the first steps after a (re)start get "
            f"{STARTUP_MULTIPLE:g} x hangTimeout and {why}; set hangTimeout: {max(low, 300)} "
            "(the default is 300) or leave it unset"
        )

    def _own_code_problems(self, out: ProblemList, given: set[str], preset: str) -> None:
        """Runtime flags mean nothing to the user's code: refuse them rather than ignore them."""
        ep = self.entrypoint
        assert ep is not None
        kind = ep.kind
        entry = f"entrypoint.{kind}"
        if kind == "module" and ep.code_dir is None and self.image is None:
            out.add(
                ("image",),
                None,
                f"an image: module {ep.module!r} without codeDir runs from your image, so name "
                "that image (or set entrypoint.codeDir to ship the package from this repository)",
            )
        if kind == "command" and self.image is None:
            out.add(
                ("image",),
                None,
                "an image: entrypoint.command runs a program of your image, so name that image "
                "(the stock PyTorch image has none of yours; use entrypoint.script to ship a file)",
            )
        flags = [k for k in FLAG_NAMES if getattr(self, k) not in (None, False)]
        if "strategy" in given:
            flags.insert(0, "strategy")
        for key in flags:
            out.add(
                (_camel(key),),
                getattr(self, key),
                f"no {_camel(key)}: it configures the bundled runtime, which a job with {entry} "
                "does not run; pass your code its settings with entrypoint.args",
            )
        size = self.model_size
        if self.expected_step_seconds is not None and not (size and size.steps):
            out.add(
                ("expectedStepSeconds",),
                self.expected_step_seconds,
                f"modelSize.steps too: it is multiplied by the job's steps, which a job with "
                f"{entry} states only in modelSize.steps (`modelSize: {{steps: N}}` alone is "
                "enough; or bound the run's cost with runPolicy.activeDeadlineSeconds)",
            )
        if preset == "fsdp" and "preset" in given:
            out.add(
                ("preset",),
                "fsdp",
                f"ddp (one process per GPU) or elastic: with {entry} your code chooses its own "
                "parallelism",
            )


def _nested(a: str, b: str) -> bool:
    """True when one absolute path is the other or lies below it."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def duplicate_names(jobs: list[tuple[int, JobModel]], where: str) -> list[tuple[int, str, str]]:
    """(index, name, what is valid) of each job whose name its team already uses: a job name
    is unique per team (a team is one namespace)."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for i, job in jobs:
        key = (job.team, job.name)
        if key in seen:
            out.append(
                (
                    i,
                    job.name,
                    f"a name not used yet in team {job.team!r} (already used by "
                    f"{where}[{seen[key]}]); names must be unique per team",
                )
            )
        seen.setdefault(key, i)
    return out


class JobKeys(StackModel):
    """The jobs' top-level `trainforge:` keys."""

    jobs: list[JobModel] = Field(
        default_factory=list, description="training jobs declared with the stack (docs/jobs.md)"
    )

    @field_validator("jobs")
    @classmethod
    def _unique(cls, jobs: list[JobModel]) -> list[JobModel]:
        out = ProblemList()
        for i, name, expected in duplicate_names(list(enumerate(jobs)), "trainforge:jobs"):
            out.add((i, "name"), name, expected)
        out.raise_if_any("jobs")
        return jobs
