"""The bundled training runtime (`python -m trainforge.training`), and its pieces as a library
for your own training code (docs/jobs.md, "Using trainforge's pieces in your code")::

    from trainforge.training import (
        CheckpointManager, MetricsReporter, PreemptionHandler, Watchdog, init_distributed,
    )

    env = init_distributed()                     # RANK/WORLD_SIZE/... -> process group, device
    ckpt = CheckpointManager.from_env()          # TRAINFORGE_CHECKPOINT_DIR, keep-last, S3 mirror
    stop = PreemptionHandler.from_env()          # SIGTERM -> agree at a step -> checkpoint -> 143
    metrics = MetricsReporter.from_env()         # Prometheus port, metrics.jsonl, MLflow
    watchdog = Watchdog.from_env().start()       # a hung step -> stacks, flight recorder, 201

Every piece reads the job contract's variables (`trainforge.training.contract`) by default,
so the same script behaves the same under `trainforge run-local` and in its pods. The public
API is `__all__`.

Names resolve lazily (PEP 562): importing this package does not import torch, so the job
emitter can read `trainforge.training.contract` without it.
"""

from __future__ import annotations

# No module-level import but __future__: `python -m trainforge.training.launch` and `.usercode`
# import this package first, before they can refuse a file of yours that shadows a module
# (a `typing.py` would break `import typing` here; see trainforge/training/shadowing.py).

# public name -> (module, attribute)
_EXPORTS: dict[str, tuple[str, str]] = {
    "init_distributed": ("trainforge.training.distributed", "init_distributed"),
    "cleanup_distributed": ("trainforge.training.distributed", "cleanup"),
    "DistEnv": ("trainforge.training.distributed", "DistEnv"),
    "CheckpointManager": ("trainforge.training.checkpoint", "CheckpointManager"),
    "CheckpointConfig": ("trainforge.training.config", "CheckpointConfig"),
    "CheckpointError": ("trainforge.training.checkpoint", "CheckpointError"),
    "PreemptionHandler": ("trainforge.training.preemption", "PreemptionHandler"),
    "PREEMPTED_EXIT_CODE": ("trainforge.training.preemption", "PREEMPTED_EXIT_CODE"),
    "MetricsReporter": ("trainforge.training.metrics", "MetricsReporter"),
    "JobEnv": ("trainforge.training.contract", "JobEnv"),
    "job_env": ("trainforge.training.contract", "job_env"),
    "Watchdog": ("trainforge.training.watchdog", "Watchdog"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'trainforge.training' has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - see the imports above

    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
