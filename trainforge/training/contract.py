"""The job contract as a training process sees it: the environment every job's code gets.

One contract for all code (the bundled runtime, your script, module, command or function),
set by the emitter in every pod and by `trainforge run-local` on a laptop:

* the distributed environment of torchrun and the Kubeflow training operator: RANK,
  WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (read by
  `init_distributed`, or by `torch.distributed.init_process_group("env://")` directly);
* the `TRAINFORGE_*` variables below: where to checkpoint and write outputs, how often and
  how many checkpoints to keep, the S3 mirror, the SIGTERM grace period, the metrics port;
* `MLFLOW_TRACKING_URI` when the platform runs MLflow.

The names are defined here once: the job emitter (`trainforge.jobs.entrypoint`) imports
them, and the library pieces (`CheckpointManager.from_env`, `PreemptionHandler.from_env`,
`MetricsReporter.from_env`) read them. Standard library only: the emitter imports it too.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from trainforge.core.contract import MAX_PORT
from trainforge.training.config import CheckpointConfig
from trainforge.training.timeouts import DEFAULT_HANG_TIMEOUT_S, MAX_HANG_TIMEOUT_S

_CK = CheckpointConfig()  # the checkpoint settings' defaults, declared in config.py

JOB_NAME = "TRAINFORGE_JOB_NAME"
CHECKPOINT_DIR = "TRAINFORGE_CHECKPOINT_DIR"
OUTPUT_DIR = "TRAINFORGE_OUTPUT_DIR"
CHECKPOINT_EVERY = "TRAINFORGE_CHECKPOINT_EVERY"
KEEP_LAST = "TRAINFORGE_KEEP_LAST"
RESUME = "TRAINFORGE_RESUME"
ASYNC_CHECKPOINT = "TRAINFORGE_ASYNC_CHECKPOINT"
CHECKPOINT_S3 = "TRAINFORGE_CHECKPOINT_S3"
GRACE_PERIOD = "TRAINFORGE_GRACE_PERIOD"
METRICS_PORT = "TRAINFORGE_METRICS_PORT"
# The job's `hangTimeout` in seconds (0 = off): the floor of the hang watchdog
# (`Watchdog.from_env`); the collective timeout of `init_distributed` derives from it.
HANG_TIMEOUT = "TRAINFORGE_HANG_TIMEOUT"
# Your own code's exceptions that a restart may fix (the job's `entrypoint.retryOn`), comma
# separated: `trainforge.training.usercode` exits 205 (retryable) for them instead of 1.
RETRY_ON = "TRAINFORGE_RETRY_ON"
# What the job's controller does after a pod exits, for each class of exit code (the
# operator's: permanent 1-127, retryable 128-255), in words: "permanent=the job fails;
# retryable=the pod is re-created, not counted against backoffLimit", and for a PyTorchJob,
# which succeeds once its Master has, ";succeeded=once the Master has exited 0 the job has
# succeeded: no pod is re-created, and by cleanPodPolicy ..." (a Worker's exit may follow it).
# The emitter sets it in its pods from the model of its own objects (its `launch`:
# trainforge.jobs.restarts.on_exit over its `outcome`); the exit line prints it
# (trainforge.training.exits.exit_line). run-local sets it for a stack's job as its pods get
# it (jobs/local.py), not for an ad-hoc run.
ON_EXIT = "TRAINFORGE_ON_EXIT"
MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
# Set by `trainforge run-local` alone (never in a pod, not one of CONTRACT_VARIABLES): its
# processes stand in for the job's pods on this machine's CPU, so GPUs that CUDA cannot see
# here are expected, not a node's fault (`init_distributed` trains on CPU there).
RUN_LOCAL = "TRAINFORGE_RUN_LOCAL"
# run-local alone too: its [pod path, local directory, claim] stand-ins (JSON), for the exit line
# of a file missing there (trainforge.training.usercode, jobs/entrypoint.stand_ins_env)
LOCAL_STAND_INS = "TRAINFORGE_LOCAL_STAND_INS"

# Every variable the platform sets for a job's code; a job's `env` may not override them.
CONTRACT_VARIABLES = (
    JOB_NAME,
    CHECKPOINT_DIR,
    OUTPUT_DIR,
    CHECKPOINT_EVERY,
    KEEP_LAST,
    RESUME,
    ASYNC_CHECKPOINT,
    CHECKPOINT_S3,
    GRACE_PERIOD,
    METRICS_PORT,
    HANG_TIMEOUT,
    RETRY_ON,
    ON_EXIT,
)


class ContractError(ValueError):
    """A contract variable holds a value its reader cannot use (names the variable)."""


def _int(name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ContractError(f"{name}={raw!r}: expected an integer") from None
    if value < minimum:
        raise ContractError(f"{name}={raw!r}: expected an integer >= {minimum}")
    if maximum is not None and value > maximum:
        raise ContractError(f"{name}={raw!r}: expected an integer <= {maximum}")
    return value


def _seconds(
    name: str, default: float, zero_is_off: bool = False, maximum: float | None = None
) -> float:
    """Seconds from `name`: > 0, or >= 0 where 0 switches the feature off."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ContractError(f"{name}={raw!r}: expected a number of seconds") from None
    if zero_is_off and value < 0:
        raise ContractError(f"{name}={raw!r}: expected a number of seconds >= 0 (0 = off)")
    if not zero_is_off and not value > 0:
        raise ContractError(f"{name}={raw!r}: expected a number of seconds > 0")
    if maximum is not None and not value <= maximum:
        raise ContractError(f"{name}={raw!r}: expected a number of seconds <= {maximum:g}")
    return value


@dataclasses.dataclass(frozen=True)
class JobEnv:
    """The `TRAINFORGE_*` part of the contract, with laptop defaults when a variable is unset
    (a script run as plain `python train.py` still works: no checkpoints, outputs in ./runs)."""

    job_name: str = "local"
    checkpoint_dir: str | None = None
    output_dir: str = "runs/local"
    checkpoint_every: int = _CK.every
    keep_last: int = _CK.keep_last
    resume: str = _CK.resume
    async_checkpoint: bool = _CK.async_save
    checkpoint_s3: str | None = None
    grace_period: float = _CK.grace_period
    metrics_port: int = 0
    mlflow_tracking_uri: str | None = None
    hang_timeout: float = DEFAULT_HANG_TIMEOUT_S  # 0 = the watchdog is off
    retry_on: tuple[str, ...] = ()  # exception names a restart may fix (entrypoint.retryOn)

    @property
    def output_path(self) -> Path:
        return Path(self.output_dir)


def job_env() -> JobEnv:
    """Read the contract's variables from this process's environment."""
    name = os.environ.get(JOB_NAME) or "local"
    return JobEnv(
        job_name=name,
        checkpoint_dir=os.environ.get(CHECKPOINT_DIR) or None,
        output_dir=os.environ.get(OUTPUT_DIR) or f"runs/{name}",
        checkpoint_every=_int(CHECKPOINT_EVERY, _CK.every),
        keep_last=_int(KEEP_LAST, _CK.keep_last),
        resume=os.environ.get(RESUME) or _CK.resume,
        async_checkpoint=os.environ.get(ASYNC_CHECKPOINT, "").strip() in ("1", "true"),
        checkpoint_s3=os.environ.get(CHECKPOINT_S3) or None,
        grace_period=_seconds(GRACE_PERIOD, _CK.grace_period),
        metrics_port=_int(METRICS_PORT, 0, maximum=MAX_PORT),
        mlflow_tracking_uri=os.environ.get(MLFLOW_TRACKING_URI) or None,
        hang_timeout=_seconds(
            HANG_TIMEOUT, DEFAULT_HANG_TIMEOUT_S, zero_is_off=True, maximum=MAX_HANG_TIMEOUT_S
        ),
        retry_on=retry_on(),
    )


def retry_on() -> tuple[str, ...]:
    """The exception names of RETRY_ON (`entrypoint.retryOn`), in their order."""
    return tuple(n.strip() for n in os.environ.get(RETRY_ON, "").split(",") if n.strip())
