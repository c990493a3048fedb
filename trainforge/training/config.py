"""The runtime's flags: one argparse parser, one frozen dataclass, one validation pass.

Every flag of `python -m trainforge.training` is declared here (the checkpoint flags come from
`checkpoint.add_checkpoint_arguments`, which owns their meaning) so `--help` is the complete CLI
and `run-local` can validate a command line before it starts any process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any


class ConfigError(ValueError):
    """A bad flag or an impossible combination; the message names the flag and what is valid."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    strategy: str = "ddp"
    model: str = "mlp"
    layers: int = 4
    d_model: int = 256
    heads: int = 4
    seq_len: int = 128
    vocab_size: int = 512
    dataset: str = "synthetic"
    data_path: str | None = None
    dataset_size: int = 8192
    steps: int = 100
    batch_size: int = 32
    global_batch_size: int = 0
    grad_accum: int = 1
    lr: float = 1e-3
    warmup_steps: int = 10
    weight_decay: float = 0.01
    seed: int = 0
    log_every: int = 10
    compile: bool = False
    activation_checkpointing: bool = False
    precision: str = "auto"
    metrics_port: int = 0
    output_dir: str | None = None
    run_name: str | None = None
    # checkpointing: parsed here, implemented in checkpoint.py
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    keep_last: int = 3
    resume: str = "auto"
    async_checkpoint: bool = False
    checkpoint_s3: str | None = None
    grace_period: float = 90.0
    # reliability: the watchdog floor; every other timeout derives from it
    hang_timeout: float = 300.0

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


def _positive(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{flag} must be > 0, got {value}")
        return value

    return parse


def _non_negative(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be >= 0, got {value}")
        return value

    return parse


def _non_negative_float(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number, got {text!r}") from None
        if not value >= 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{flag} must be a number >= 0, got {text}")
        return value

    return parse


def build_parser(prog: str = "python -m trainforge.training") -> argparse.ArgumentParser:
    d = TrainConfig()
    p = argparse.ArgumentParser(
        prog=prog,
        description="trainforge training runtime: DDP/FSDP2 training of a built-in model. "
        "Reads MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK/LOCAL_RANK (torchrun, Kubeflow) and "
        "runs as a single process when they are unset.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("parallelism")
    g.add_argument(
        "--strategy",
        choices=["ddp", "fsdp"],
        default=d.strategy,
        help="ddp: replicate the model, all-reduce gradients; fsdp: shard parameters, "
        "gradients and optimizer state per block (FSDP2 fully_shard)",
    )
    g.add_argument("--compile", action="store_true", help="torch.compile each block (GPU speed)")
    g.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute each block's activations in backward (less memory, ~30%% more compute)",
    )
    g.add_argument(
        "--precision",
        choices=["auto", "bf16", "fp32"],
        default=d.precision,
        help="auto: bf16 compute on GPUs that support it, fp32 on CPU",
    )

    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        choices=["mlp", "gpt"],
        default=d.model,
        help="mlp: the seed's 784-256-128-10 classifier; gpt: a decoder-only transformer "
        "sized by the flags below",
    )
    g.add_argument("--layers", type=_positive("--layers"), default=d.layers, help="gpt blocks")
    g.add_argument(
        "--d-model", type=_positive("--d-model"), default=d.d_model, help="gpt hidden width"
    )
    g.add_argument(
        "--heads", type=_positive("--heads"), default=d.heads, help="gpt attention heads"
    )
    g.add_argument(
        "--seq-len",
        type=_positive("--seq-len"),
        default=d.seq_len,
        help="gpt context length (tokens per sample); the model cannot attend further",
    )
    g.add_argument(
        "--vocab-size",
        type=_positive("--vocab-size"),
        default=d.vocab_size,
        help="gpt vocabulary; a token file must hold ids below it (max 65536, uint16)",
    )

    g = p.add_argument_group("data")
    g.add_argument(
        "--dataset",
        choices=["synthetic", "tokens"],
        default=d.dataset,
        help="synthetic: deterministic in-memory data from --seed; tokens: a memory-mapped "
        "uint16 token file (--data-path), gpt only",
    )
    g.add_argument(
        "--data-path",
        default=None,
        metavar="PATH",
        help="flat little-endian uint16 token file (e.g. on FSx) for --dataset tokens",
    )
    g.add_argument(
        "--dataset-size",
        type=_positive("--dataset-size"),
        default=d.dataset_size,
        help="samples in the synthetic dataset (ignored for --dataset tokens)",
    )

    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=_positive("--steps"), default=d.steps, help="optimizer steps")
    g.add_argument(
        "--batch-size",
        type=_positive("--batch-size"),
        default=d.batch_size,
        help="samples per rank per micro-step; global batch = batch-size x world size x grad-accum",
    )
    g.add_argument(
        "--global-batch-size",
        type=_non_negative("--global-batch-size"),
        default=0,
        help="if set, samples per optimizer step across all ranks; --batch-size is derived "
        "from it (must divide by world size x grad-accum); 0 = use --batch-size",
    )
    g.add_argument(
        "--grad-accum",
        type=_positive("--grad-accum"),
        default=d.grad_accum,
        help="micro-steps per optimizer step (gradients all-reduced once, on the last)",
    )
    g.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (AdamW)")
    g.add_argument(
        "--warmup-steps",
        type=_non_negative("--warmup-steps"),
        default=d.warmup_steps,
        help="linear warmup steps (capped at --steps), then cosine decay to 10%% of --lr at --steps",
    )
    g.add_argument(
        "--weight-decay",
        type=float,
        default=d.weight_decay,
        help="AdamW weight decay on matrices (not on biases/norms)",
    )
    g.add_argument(
        "--seed",
        type=_non_negative("--seed"),
        default=d.seed,
        help="seeds the model init, the synthetic data and the data order",
    )

    g = p.add_argument_group("observability")
    g.add_argument(
        "--log-every",
        type=_positive("--log-every"),
        default=d.log_every,
        help="log (and sync the loss to the host) every N optimizer steps",
    )
    g.add_argument(
        "--metrics-port",
        type=_non_negative("--metrics-port"),
        default=d.metrics_port,
        help="serve Prometheus text metrics on this port from rank 0 (0 = off)",
    )
    g.add_argument(
        "--output-dir",
        default=None,
        metavar="DIR",
        help="where rank 0 writes summary.json and metrics.jsonl (default ./runs/<run-name>)",
    )
    g.add_argument(
        "--run-name",
        default=None,
        metavar="NAME",
        help="run name for the output dir and MLflow (default <model>-<strategy>-<time>)",
    )

    g.add_argument(
        "--self-check",
        nargs="?",
        const="",
        default=None,
        metavar="FEATURES",
        help="print what this image can do for the job's features (MLflow, S3 mirror, NCCL "
        "over EFA) and exit 1 when a configured one cannot work; FEATURES (mlflow,s3,efa) "
        "checks those as if configured (docs/images.md)",
    )

    from trainforge.training.checkpoint_config import add_checkpoint_arguments

    add_checkpoint_arguments(p)

    g = p.add_argument_group("reliability")
    g.add_argument(
        "--hang-timeout",
        type=_non_negative_float("--hang-timeout"),
        default=d.hang_timeout,
        metavar="SECONDS",
        help="watchdog floor: a step that makes no progress for max(10 x the mean recent step "
        "time, this) seconds (3x this for the first steps, restore and checkpoints) dumps "
        "every thread's stack and the collective flight recorder, then exits 201 so the job "
        "restarts from its last checkpoint; collective, NCCL heartbeat and rendezvous "
        "timeouts derive from it (docs/reliability.md). 0 = watchdog off",
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
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in vars(ns).items() if k in fields})


# The largest vocabulary a token file can address: ids are stored as uint16.
MAX_VOCAB_SIZE = 65536


def validate(cfg: TrainConfig) -> TrainConfig:
    """Checks that need no process group or device; world-size checks are in `check_world`."""
    check_values(cfg)
    if cfg.dataset == "tokens" and cfg.data_path and not os.path.isfile(cfg.data_path):
        raise ConfigError(f"--data-path {cfg.data_path}: no such file")
    from trainforge.training.checkpoint_config import CheckpointError, config_from_args

    try:
        config_from_args(cfg).validate()
    except CheckpointError as e:
        raise ConfigError(str(e)) from None
    return cfg


def check_values(cfg: TrainConfig) -> TrainConfig:
    """The checks of flag values alone: no files, no torch. `pulumi preview` runs these on every
    job's flags (trainforge.jobs.spec), so a job the runtime would reject never deploys."""
    if cfg.lr <= 0:
        raise ConfigError(f"--lr must be > 0, got {cfg.lr}")
    if cfg.weight_decay < 0:
        raise ConfigError(f"--weight-decay must be >= 0, got {cfg.weight_decay}")
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


def as_dict(cfg: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
