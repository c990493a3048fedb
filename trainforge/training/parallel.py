"""Wrap a model for DDP or FSDP2, with optional activation checkpointing and torch.compile.

DDP: ``gradient_as_bucket_view`` (gradients live in the all-reduce buckets: no copy, less
memory); the loop uses ``no_sync`` on all but the last micro-step of gradient accumulation.
FSDP2: ``fully_shard`` on every block, then the root (embeddings/head/remaining params), with
``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` when computing in bf16. The MLP
works with FSDP too (each Linear block is a shard unit); it is simply too small to gain from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from trainforge.training.config import TrainConfig
from trainforge.training.distributed import DistEnv
from trainforge.training.models.init import materialize, on_meta


def resolve_precision(cfg: TrainConfig, device: torch.device) -> torch.dtype:
    """`precision: auto` is bf16 only where the GPU has bf16 units (compute capability 8.0+).

    Why ``including_emulation=False``: plain ``is_bf16_supported()`` also answers True where
    a bf16 tensor can merely be created (a T4, a V100: emulated through fp32, slower than
    fp32 itself). The planner makes the same call from the GPU catalog's ``nativeBf16``
    (jobs/estimate/memory.py ``regime``), so the plan and the pod agree. The keyword exists
    in every torch the runtime supports (versions.py, 2.9 up): read in the 2.13.0 wheel's
    ``torch/cuda/__init__.py``, and cited as the CUDA API in pytorch/pytorch PR #152317
    (April 2025, before 2.9's release) -- both read 2026-11-27."""
    if cfg.precision == "fp32":
        return torch.float32
    if cfg.precision in ("bf16", "fp8"):  # fp8: float8 matmuls in Linear layers, bf16 around
        return torch.bfloat16
    if device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
        return torch.bfloat16
    return torch.float32


def _never_called(x: torch.Tensor) -> torch.Tensor:
    return x


def load_wrappers(cfg: TrainConfig) -> str | None:
    """Import what `parallelize` will use for this run, up front, so that the loop times the
    imports as their own set-up phase (seconds; the H200 run of 2026-11-29 could not tell
    them from the CUDA context: bf16 had both in its model phase, FP8 in its fp8 check) and
    runs them while the CUDA context is being created: torchao's float8 (fp8), torch._dynamo
    (every run: DDP's constructor, FSDP2 and ``to_empty`` import it at their first call),
    torch.compile's compiler and FSDP2 (DTensor). Returns why fp8 cannot run (torchao
    missing), None when everything imported.

    The compiler: ``torch.compile`` over a function that is never called imports exactly what
    each block's ``compile()`` would at its first call (torch._dynamo, inductor's compile_fx)
    and compiles nothing (compilation happens at the first call)."""
    import torch._dynamo  # noqa: F401, PLC0415 - see above

    if cfg.precision == "fp8":
        from trainforge.training import fp8  # noqa: PLC0415 - imports torchao

        if (why := fp8.torchao_problem()) is not None:
            return why
    if cfg.compile:
        torch.compile(_never_called)
    if cfg.strategy == "fsdp":
        from torch.distributed import fsdp  # noqa: F401, PLC0415 - see parallelize
    return None


def parallelize(
    model: nn.Module,
    cfg: TrainConfig,
    env: DistEnv,
    dtype: torch.dtype,
    device_ready: Callable[[], None] | None = None,
) -> nn.Module:
    """Returns the module the loop calls; ``unwrap`` gets back the model (``loss``, ``blocks``).

    ``model`` is either built on the meta device (the runtime's way: ``build_model(cfg,
    "meta")``), in which case it is sharded or replicated first and then allocated on
    ``env.device`` and initialised there from ``cfg.seed`` (models/init.py), or built with its
    weights already set (own code, benches), which are kept.

    ``device_ready`` is called once, right before the first allocation on ``env.device`` (the
    loop waits there for the CUDA context: distributed.DeviceContext)."""
    meta = on_meta(model)
    ready = device_ready or (lambda: None)
    model.activation_checkpointing = cfg.activation_checkpointing
    if cfg.precision == "fp8":
        # before compile and before sharding, as torchtitan converts (fp8.py); the names go
        # to the run's first line and its summary
        from trainforge.training import fp8  # noqa: PLC0415 - imports torchao

        model.float8_layers = fp8.convert(model, cfg.strategy, env.world_size)
    if cfg.compile:
        for block in model.blocks:  # per block, as torchtitan does: small graphs, fast compile
            block.compile()
    if cfg.strategy == "fsdp":
        # imported here: FSDP2 pulls in DTensor (seconds), which a DDP run never needs
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: PLC0415

        mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        if not meta:
            ready()  # fully_shard moves a weighted model's parameters to the device
        # A meta-built model is sharded first and then each rank allocates and draws its own
        # shard (materialize): no rank ever holds the whole model, on the host or the GPU.
        # A model built with weights is moved by fully_shard group by group (no model.to
        # first), so a GPU never holds the whole fp32 model either.
        for i, block in enumerate(model.blocks):
            # The last block's parameters are needed right away by backward: keep them gathered.
            fully_shard(block, mp_policy=mp, reshard_after_forward=i < len(model.blocks) - 1)
        fully_shard(model, mp_policy=mp)
        if meta:
            ready()
            materialize(model, env.device, cfg.seed)
        return model
    ready()
    if meta:
        materialize(model, env.device, cfg.seed)  # the full replica, drawn on the device
    model.to(env.device)
    return DDP(
        model,
        device_ids=[env.local_rank] if env.device.type == "cuda" else None,
        gradient_as_bucket_view=True,
    )


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, DDP) else model


def accumulation(model: nn.Module, last_micro: bool) -> contextlib.AbstractContextManager:
    """Skip the gradient all-reduce on non-final micro-steps (DDP no_sync / FSDP2 equivalent).

    Entered every micro-step, so it returns a ready context manager (no generator frame), and
    an FSDP2 module's gradient sync is switched only when it changes (the call walks every
    sharded module): off for non-final micro-steps, back on for the final one."""
    if isinstance(model, DDP):
        return contextlib.nullcontext() if last_micro else model.no_sync()
    # vars(): a plain attribute, read without nn.Module.__getattr__'s miss path
    sync_off = vars(model).get(_SYNC_OFF, False)
    if sync_off != (not last_micro) and hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(last_micro)
        setattr(model, _SYNC_OFF, not last_micro)
    return contextlib.nullcontext()


# set on an FSDP2 module while `accumulation` has its gradient sync turned off
_SYNC_OFF = "_trainforge_gradient_sync_off"


def autocast(
    device: torch.device, dtype: torch.dtype, strategy: str
) -> contextlib.AbstractContextManager:
    """bf16 autocast for DDP; FSDP2 casts through its MixedPrecisionPolicy instead."""
    if dtype == torch.float32 or strategy == "fsdp":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
