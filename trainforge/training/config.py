"""The runtime's settings, each declared once: a field of `TrainConfig` or `CheckpointConfig`.

A field made with `setting(...)` carries its flag's help, group, choices and bounds; the
argparse parser of `python -m trainforge.training` is generated from the fields, their bounds
are checked the same way whether a value comes from a flag or from a job spec, and
`settings(cls)` lists them for other readers (the job spec's keys, docs, schemas). Standard
library only: pods and `pulumi preview` import it before (or without) torch.

The API, for code that derives its own keys from the runtime's::

    from trainforge.training.config import CheckpointConfig, TrainConfig, settings

    for s in settings(TrainConfig):   # the model/optimisation/... flags and the checkpoint ones
        s.path, s.flag, s.type, s.optional, s.default, s.help, s.group, s.choices, s.gt, s.ge, s.le
    settings(CheckpointConfig)        # just the checkpoint settings (path "every", flag
                                      # "--checkpoint-every"; under TrainConfig "checkpoint.every")
    s.error(value)                    # None, or the one-line message a bad value gets
    cfg = from_flat(TrainConfig, {"steps": 5, "checkpoint_dir": "/ckpt"})  # keys: Setting.dest
    as_dict(cfg)                      # the flat form back (summary.json's "config")
    to_argv(cfg)                      # ["--steps", "5", "--checkpoint-dir", "/ckpt"]
    check_values(cfg)                 # bounds and cross-field rules, no files, no torch
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import types
import typing
from typing import Any

from trainforge.core.contract import MAX_PORT
from trainforge.training.layout import CheckpointError
from trainforge.training.timeouts import DEFAULT_HANG_TIMEOUT_S, MAX_HANG_TIMEOUT_S


class ConfigError(ValueError):
    """A bad flag or an impossible combination; the message names the flag and what is valid."""


def setting(default: Any, help: str, **declared: Any) -> Any:  # noqa: A002 - argparse's word
    """A dataclass field that is a runtime setting; `declared` holds its other `Setting` fields
    (group, flag -- `--field-name` when absent --, choices, gt/ge/le bounds as pydantic's
    `Field` names them, metavar). `help` is one plain line."""
    return dataclasses.field(default=default, metadata={"help": help, **declared})


@dataclasses.dataclass(frozen=True)
class Setting:
    """One runtime setting as its field declares it."""

    path: str  # the field's path from the listed class: "steps", "checkpoint.every"
    flag: str  # "--steps", "--checkpoint-every"
    type: type  # int, float, str or bool (None is allowed as well when `optional`)
    optional: bool
    default: Any
    help: str
    group: str = ""
    choices: tuple[str, ...] = ()
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    metavar: str | None = None
    # What a checkpoint holds of it: "shape" (the saved tensors' shapes follow from it: a
    # restore under another value fails), "restored" (a param-group setting a restore brings
    # back over the flag), "" (nothing). Read by `checkpointed` (the runtime's restore error,
    # the plan's layout key).
    state: str = ""

    @property
    def dest(self) -> str:
        """The flag's argparse name ("checkpoint_every"); the key of `from_flat`/`as_dict`."""
        return self.flag[2:].replace("-", "_")

    def bounds(self) -> str:
        """'> 0', '>= 0 and <= 3600', or '' when unbounded."""
        pairs = ((">", self.gt), (">=", self.ge), ("<=", self.le))
        return " and ".join(f"{op} {b:g}" for op, b in pairs if b is not None)

    def error(self, value: Any, shown: str | None = None) -> str | None:
        """The one-line message for a bad value (naming the flag and what is valid), or None."""
        shown = str(value) if shown is None else shown
        if value is None:
            return None if self.optional else f"{self.flag} must be set"
        if self.choices and value not in self.choices:
            return f"{self.flag} must be one of {', '.join(self.choices)}, got {shown!r}"
        if self.type is float and not math.isfinite(value):
            return f"{self.flag} must be a finite number, got {shown}"
        if (
            (self.gt is not None and not value > self.gt)
            or (self.ge is not None and not value >= self.ge)
            or (self.le is not None and not value <= self.le)
        ):
            return f"{self.flag} must be {self.bounds()}, got {shown}"
        return None

    def parse(self, text: str) -> Any:
        """argparse's `type`: the value of `text`, or ArgumentTypeError with `error`'s line."""
        try:
            value = self.type(text)
        except ValueError:
            what = "an integer" if self.type is int else "a number"
            raise argparse.ArgumentTypeError(f"{self.flag} must be {what}, got {text!r}") from None
        message = self.error(value, text)
        if message:
            raise argparse.ArgumentTypeError(message)
        return value


@functools.cache
def settings(cls: type) -> tuple[Setting, ...]:
    """Every setting of the dataclass `cls`, in declaration order; a field whose type is itself
    such a dataclass contributes its settings under `<field>.` (TrainConfig's checkpoint)."""
    hints = typing.get_type_hints(cls)
    out: list[Setting] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            out += [dataclasses.replace(s, path=f"{f.name}.{s.path}") for s in settings(hint)]
            continue
        if "help" not in f.metadata:
            continue
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = next(a for a in args if a is not type(None))
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        declared = {**f.metadata, "flag": flag, "default": f.default}
        out.append(Setting(path=f.name, type=base, optional=type(None) in args, **declared))
    return tuple(out)


def checkpointed(*kinds: str) -> tuple[Setting, ...]:
    """The TrainConfig settings a checkpoint's state depends on, of `kinds` ("shape",
    "restored"; none given: both): read from the table, so a new model flag is named by the
    runtime's restore error and keyed by the plan's layout (plan/ckpt_compat.py) at once."""
    wanted = kinds or ("shape", "restored")
    return tuple(s for s in settings(TrainConfig) if s.state in wanted)


# How to train with flags the newest checkpoint was not saved with, in a job's keys: the
# remedies plan --diff gives (plan/checks/resume.py TF_CKPT_CANNOT_RESUME) and the runtime's
# restore error names (training/checkpoint.py), kept in one place.
FRESH_BY_RENAME = "rename the job (a fresh run in a new checkpoint directory)"
FRESH_BY_DIR = "set checkpoint.dir to a new directory of its own"
FRESH_BY_RESUME = "set checkpoint.resume: never (every start, restarts included, begins at step 0)"


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> dict[str, Any]:
    """Add a flag per setting of `cls` (argparse groups by `Setting.group`); returns the groups."""
    groups: dict[str, Any] = {}
    for s in settings(cls):
        g = groups.get(s.group) or groups.setdefault(s.group, parser.add_argument_group(s.group))
        help_ = s.help.replace("%", "%%")
        if s.type is bool:
            g.add_argument(s.flag, dest=s.dest, action="store_true", help=help_)
            continue
        kw: dict[str, Any] = {"choices": list(s.choices)} if s.choices else {"type": s.parse}
        g.add_argument(s.flag, dest=s.dest, default=s.default, metavar=s.metavar, help=help_, **kw)
    return groups


def from_flat(cls: type, values: Any) -> Any:
    """An instance of `cls` from a mapping (or argparse namespace) keyed by `Setting.dest`;
    absent keys keep their defaults."""
    get = values.get if isinstance(values, dict) else lambda k, d: getattr(values, k, d)
    kw: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    flat = {s.path: s for s in settings(cls)}
    missing = object()
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            kw[f.name] = from_flat(hints[f.name], values)
        elif f.name in flat and (v := get(flat[f.name].dest, missing)) is not missing:
            kw[f.name] = v
    return cls(**kw)


def check_bounds(obj: Any, error: type[Exception] = ConfigError) -> None:
    """Raise `error` with the first bad value of `obj`'s own (not nested) settings."""
    for s in settings(type(obj)):
        if "." not in s.path and (message := s.error(getattr(obj, s.path))):
            raise error(message)


_ckpt = functools.partial(setting, group="checkpointing")


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """What the training flags ask of checkpointing (``--checkpoint-*``, ``--resume``...);
    `CheckpointManager` takes it (`trainforge.training.checkpoint` re-exports it)."""

    directory: str | None = _ckpt(
        None,
        "directory for step_NNNNNN checkpoints, shared by all ranks (off if unset)",
        flag="--checkpoint-dir",
        metavar="DIR",
    )
    every: int = _ckpt(
        0,
        "save every N optimizer steps (0 = only at the end and on SIGTERM)",
        flag="--checkpoint-every",
        ge=0,
        metavar="N",
    )
    keep_last: int = _ckpt(
        3, "keep the newest N complete checkpoints (0 = keep all)", ge=0, metavar="N"
    )
    resume: str = _ckpt(
        "auto",
        "auto: newest complete checkpoint in --checkpoint-dir (or S3); never: start fresh; "
        "PATH: that step_NNNNNN directory",
        metavar="auto|never|PATH",
    )
    async_save: bool = _ckpt(
        False,
        "write checkpoints in the background (training waits only for staging)",
        flag="--async-checkpoint",
    )
    s3_uri: str | None = _ckpt(
        None,
        "mirror complete checkpoints to S3; download the newest when the local dir has none "
        "(needs boto3)",
        flag="--checkpoint-s3",
        metavar="s3://bucket/prefix",
    )
    grace_period: float = _ckpt(
        90.0, "time budget to checkpoint and exit after SIGTERM", gt=0, metavar="SECONDS"
    )

    def validate(self) -> None:
        """Fail fast with the flag name, the bad value and what is valid."""
        check_bounds(self, CheckpointError)
        if self.directory is None:
            for flag, value in (
                ("--checkpoint-every", self.every),
                ("--async-checkpoint", self.async_save),
                ("--checkpoint-s3", self.s3_uri),
            ):
                if value:
                    raise CheckpointError(f"{flag} {value} needs --checkpoint-dir DIR")
        if self.s3_uri is not None and not self.s3_uri.startswith("s3://"):
            raise CheckpointError(
                f"--checkpoint-s3 must look like s3://bucket/prefix, got {self.s3_uri!r}"
            )

    @property
    def enabled(self) -> bool:
        return self.directory is not None


# The largest vocabulary a token file can address: ids are stored as uint16.
MAX_VOCAB_SIZE = 65536

_par = functools.partial(setting, group="parallelism")
_model = functools.partial(setting, group="model", state="shape")
_data = functools.partial(setting, group="data")
_opt = functools.partial(setting, group="optimisation")
_obs = functools.partial(setting, group="observability")


def periodic_saves_possible(config: CheckpointConfig, last_step: int | None) -> bool:
    """Whether a run that ends at step ``last_step`` (the runtime's --steps; None: not known,
    as for your own code's manager, which may save when it likes) can reach a periodic save.

    DCP's checkpoint process writes only the async periodic saves: the final and the SIGTERM
    saves are synchronous (``force_sync``). A run shorter than its first periodic save (the
    README's `run-local --stack dev gpt-small-fsdp --steps 5`: every 500) or one with
    --checkpoint-every 0 never hands that process a save, so starting it (a fresh interpreter
    importing torch on every rank, ~3-4 CPU s each, beside the ranks' training) is waste; nor
    does it stage any state in host memory. Here, torch-free, so that the plan's memory estimate
    (trainforge.jobs.estimate) asks the same rule with the job's --steps."""
    return last_step is None or 0 < config.every <= last_step


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every flag of `python -m trainforge.training`, validated (`parse_args`)."""

    strategy: str = _par(
        "ddp",
        "ddp: replicate the model, all-reduce gradients; fsdp: shard parameters, gradients and "
        "optimizer state per block (FSDP2 fully_shard)",
        choices=("ddp", "fsdp"),
    )
    compile: bool = _par(False, "torch.compile each block (GPU speed)")
    activation_checkpointing: bool = _par(
        False, "recompute each block's activations in backward (less memory, ~30% more compute)"
    )
    precision: str = _par(
        "auto",
        "auto: bf16 compute on GPUs with bf16 units (Ampere and newer), fp32 elsewhere (T4, CPU); "
        "fp8: bf16 with the Linear layers' matmuls in float8 (torchao; GPUs with FP8 Tensor "
        "Cores, compute capability 8.9+: L4, L40S, H100, H200, B200)",
        choices=("auto", "bf16", "fp32", "fp8"),
    )
    model: str = _model(
        "mlp",
        "mlp: the seed's 784-256-128-10 classifier; gpt: a decoder-only transformer sized by "
        "the flags below",
        choices=("mlp", "gpt"),
    )
    layers: int = _model(4, "gpt blocks", gt=0)
    d_model: int = _model(256, "gpt hidden width", gt=0)
    heads: int = _model(4, "gpt attention heads", gt=0)
    seq_len: int = _model(
        128, "gpt context length (tokens per sample); the model cannot attend further", gt=0
    )
    vocab_size: int = _model(
        512,
        f"gpt vocabulary; a token file must hold ids below it (max {MAX_VOCAB_SIZE}, uint16)",
        gt=0,
    )
    dataset: str = _data(
        "synthetic",
        "synthetic: deterministic in-memory data from --seed; tokens: a memory-mapped uint16 "
        "token file (--data-path), gpt only",
        choices=("synthetic", "tokens"),
    )
    data_path: str | None = _data(
        None,
        "flat little-endian uint16 token file (e.g. on FSx) for --dataset tokens",
        metavar="PATH",
    )
    dataset_size: int = _data(
        8192, "samples in the synthetic dataset (ignored for --dataset tokens)", gt=0
    )
    steps: int = _opt(100, "optimizer steps", gt=0)
    batch_size: int = _opt(
        32,
        "samples per rank per micro-step; global batch = batch-size x world size x grad-accum",
        gt=0,
    )
    global_batch_size: int = _opt(
        0,
        "if set, samples per optimizer step across all ranks; --batch-size is derived from it "
        "(must divide by world size x grad-accum); 0 = use --batch-size",
        ge=0,
    )
    grad_accum: int = _opt(
        1, "micro-steps per optimizer step (gradients all-reduced once, on the last)", gt=0
    )
    lr: float = _opt(1e-3, "peak learning rate (AdamW)", gt=0, state="restored")
    warmup_steps: int = _opt(
        10,
        "linear warmup steps (capped at --steps), then cosine decay to 10% of --lr at --steps",
        ge=0,
    )
    weight_decay: float = _opt(
        0.01,
        "AdamW weight decay (gpt: matrices only, not biases/norms; mlp: every parameter, as the seed)",
        ge=0,
        state="restored",
    )
    seed: int = _opt(0, "seeds the model init, the synthetic data and the data order", ge=0)
    log_every: int = _obs(10, "log (and sync the loss to the host) every N optimizer steps", gt=0)
    metrics_port: int = _obs(
        0,
        "serve Prometheus text metrics on this port from rank 0 (0 = off)",
        ge=0,
        le=MAX_PORT,
    )
    output_dir: str | None = _obs(
        None,
        "where rank 0 writes summary.json and metrics.jsonl (default ./runs/<run-name>)",
        metavar="DIR",
    )
    run_name: str | None = _obs(
        None,
        "run name for the output dir and MLflow (default <model>-<strategy>-<time>)",
        metavar="NAME",
    )
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
    hang_timeout: float = setting(
        DEFAULT_HANG_TIMEOUT_S,
        "watchdog floor: a step that makes no progress for max(10 x the mean recent step "
        "time, this) seconds (3x this for the first steps, restore and checkpoints) dumps "
        "every thread's stack and the collective flight recorder, then exits 201 so the job "
        "restarts from its last checkpoint; collective, NCCL heartbeat and rendezvous "
        "timeouts derive from it (docs/reliability.md). 0 = watchdog off",
        group="reliability",
        ge=0,
        le=MAX_HANG_TIMEOUT_S,
        metavar="SECONDS",
    )

    def global_batch(self, world_size: int) -> int:
        """Samples per optimizer step across all ranks."""
        return self.batch_size * world_size * self.grad_accum

    def with_world_size(self, world_size: int) -> TrainConfig:
        """Resolve --global-batch-size into the per-rank --batch-size for this world size."""
        if not self.global_batch_size:
            return self
        per_step = world_size * self.grad_accum
        if self.global_batch_size % per_step:
            raise ConfigError(
                f"--global-batch-size {self.global_batch_size} is not divisible by "
                f"world size {world_size} x --grad-accum {self.grad_accum} = {per_step}; "
                f"pick a multiple of {per_step}"
            )
        return dataclasses.replace(self, batch_size=self.global_batch_size // per_step)


def build_parser(prog: str = "python -m trainforge.training") -> argparse.ArgumentParser:
    """The runtime's parser, generated from `TrainConfig`'s settings (plus `--self-check`)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="trainforge training runtime: DDP/FSDP2 training of a built-in model. "
        "Reads MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK/LOCAL_RANK (torchrun, Kubeflow) and "
        "runs as a single process when they are unset.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    groups = add_arguments(p, TrainConfig)
    groups["observability"].add_argument(  # handled by selfcheck.main before parsing
        "--self-check",
        nargs="?",
        const="",
        default=None,
        metavar="FEATURES",
        help="print what this image can do for the job's features (MLflow, S3 mirror, NCCL "
        "over EFA) and exit 1 when a configured one cannot work; FEATURES (mlflow,s3,efa) "
        "checks those as if configured (docs/images.md)",
    )
    return p


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse and validate; argparse exits with status 2 and a usage line on bad flags."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return validate(config_from_namespace(ns))
    except ConfigError as e:
        parser.error(str(e))
    raise AssertionError("unreachable")


def config_from_namespace(ns: argparse.Namespace) -> TrainConfig:
    return from_flat(TrainConfig, ns)


def validate(cfg: TrainConfig) -> TrainConfig:
    """Checks that need no process group or device; world-size checks are in `check_world`."""
    check_values(cfg)
    if cfg.dataset == "tokens" and cfg.data_path and not os.path.isfile(cfg.data_path):
        what = (
            "a folder; expected a uint16 token file"
            if os.path.isdir(cfg.data_path)
            else "no such file"
        )
        raise ConfigError(f"--data-path {cfg.data_path}: {what}")
    try:
        cfg.checkpoint.validate()
    except CheckpointError as e:
        raise ConfigError(str(e)) from None
    return cfg


def check_values(cfg: TrainConfig) -> TrainConfig:
    """The checks of flag values alone: no files, no torch. `pulumi preview` runs these on every
    job's flags (trainforge.jobs.spec), so a job the runtime would reject never deploys."""
    check_bounds(cfg)
    if cfg.model == "gpt":
        if cfg.d_model % cfg.heads:
            raise ConfigError(
                f"--d-model {cfg.d_model} is not divisible by --heads {cfg.heads}; "
                "each head gets d-model/heads channels"
            )
        if cfg.vocab_size > MAX_VOCAB_SIZE:
            raise ConfigError(
                f"--vocab-size {cfg.vocab_size} exceeds {MAX_VOCAB_SIZE}, the most a uint16 "
                "token id holds"
            )
    if cfg.dataset == "tokens":
        if cfg.model != "gpt":
            raise ConfigError(
                f"--dataset tokens needs --model gpt (token sequences), got --model {cfg.model}"
            )
        if not cfg.data_path:
            raise ConfigError("--dataset tokens needs --data-path PATH (a uint16 token file)")
    elif cfg.data_path:
        raise ConfigError(
            f"--data-path {cfg.data_path} is only read with --dataset tokens "
            f"(got --dataset {cfg.dataset})"
        )
    return cfg


def check_world(cfg: TrainConfig, world_size: int, dataset_len: int | None = None) -> TrainConfig:
    """Checks that need the world size (and the dataset length); returns the resolved config."""
    cfg = cfg.with_world_size(world_size)
    if dataset_len is not None:
        need = cfg.global_batch(world_size)
        if dataset_len < need:
            what = (
                f"--dataset-size {dataset_len}"
                if cfg.dataset == "synthetic"
                else f"token file {cfg.data_path} ({dataset_len} sequences of --seq-len "
                f"{cfg.seq_len} + 1)"
            )
            raise ConfigError(
                f"{what} is smaller than one global batch of {need} samples "
                f"(--batch-size {cfg.batch_size} x world size {world_size} x --grad-accum "
                f"{cfg.grad_accum}); use more data or a smaller batch"
            )
    return cfg


def as_dict(cfg: Any) -> dict[str, Any]:
    """The settings of `cfg` keyed by `Setting.dest` (flat; what summary.json records)."""
    out: dict[str, Any] = {}
    for s in settings(type(cfg)):
        obj = cfg
        for part in s.path.split("."):
            obj = getattr(obj, part)
        out[s.dest] = obj
    return out


def to_argv(values: Any) -> list[str]:
    """The flags that set `values` (a TrainConfig, or a mapping keyed by `Setting.dest` in which
    an absent or None value is the runtime's default): what a job emitter puts after
    `python -m trainforge.training`. Defaults are left out; `parse_args` gives `values` back."""
    flat = as_dict(values) if isinstance(values, TrainConfig) else values
    argv: list[str] = []
    for s in settings(TrainConfig):
        v = flat.get(s.dest)
        if v is not None and v != s.default:
            argv += [s.flag] if s.type is bool else [s.flag, str(v)]
    return argv


# The runtime's AdamW settings that are not flags: loop.build_optimizer builds the optimizer
# with them, and the torch-free checkpoint layout the plan reads (training/state_shapes) predicts the
# param-group settings a restore brings back from them.
ADAMW_BETAS = (0.9, 0.95)
ADAMW_EPS = 1e-08  # torch's AdamW default, passed explicitly so that both read the value in use


def lr_factor(step: int, warmup: int, total: int, floor: float = 0.1) -> float:
    """Linear warmup to 1, then cosine decay to ``floor`` at ``total`` (warmup capped at total)."""
    warmup = min(warmup, total)
    if warmup and step < warmup:
        return (step + 1) / warmup
    span = max(total - warmup, 1)
    progress = min(max(step - warmup, 0) / span, 1.0)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
