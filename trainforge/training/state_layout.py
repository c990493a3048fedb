"""The layout of the state a checkpoint holds: DCP key -> (shape, dtype), with no weights.

`CheckpointManager` saves `{"model": ..., "optim": ...}` from `get_state_dict`, which DCP
flattens into keys like `model.blocks.0.fc.weight` and `optim.state.blocks.0.fc.weight.exp_avg`
(fully qualified names: the same for DDP, FSDP2 and a single process). Whether a changed job
can resume from an old checkpoint is whether these layouts agree, so `trainforge plan` compares
them at preview (trainforge.plan.ckpt_compat), and own code can return the same description
from its `checkpoint.fingerprint` function:

    def state_layout(args):                      # checkpoint.fingerprint: train:state_layout
        with torch.device("meta"):
            model = build_model(args)
        return describe(model, torch.optim.Adam(model.parameters()))

Build the model on the meta device: nothing is allocated, so a 350M-parameter model costs
well under a second. The optimizer's lazy state (AdamW's moments) is created by one step on
empty gradients. torch is imported by the functions that build, so that a plan can read
`mismatches` (the restore's rule) without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# optimizer param-group settings that a restore brings back from the checkpoint
SETTING_KEYS = ("lr", "initial_lr", "weight_decay", "betas", "eps")
Tensors = dict[str, tuple[tuple[int, ...], str]]  # DCP key -> (shape, dtype)


def layout(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[Tensors, dict[str, Any]]:
    """(tensors, settings): DCP key -> (shape, dtype) of every tensor the checkpoint saves,
    and the param-group settings it restores. Steps the optimizer once on empty gradients."""
    import torch
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict
    from torch.distributed.checkpoint.state_dict import get_state_dict

    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.empty_like(p)
    optimizer.step()  # Adam(W) creates its state (exp_avg, exp_avg_sq, step) lazily
    model_sd, optim_sd = get_state_dict(model, optimizer)
    flat, _ = flatten_state_dict({"model": model_sd, "optim": optim_sd})
    tensors: dict[str, tuple[tuple[int, ...], str]] = {}
    settings: dict[str, Any] = {}
    for key, value in flat.items():
        if isinstance(value, torch.Tensor):
            tensors[key] = (tuple(value.shape), str(value.dtype).removeprefix("torch."))
        elif key.rsplit(".", 1)[-1] in SETTING_KEYS:
            settings[key] = list(value) if isinstance(value, tuple) else value
    return tensors, settings


def describe(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, list]:
    """JSON-able {key: [shape, dtype]}: what a `checkpoint.fingerprint` function returns."""
    tensors, _ = layout(model, optimizer)
    return {k: [list(shape), dtype] for k, (shape, dtype) in tensors.items()}


def built(cfg: Any) -> tuple[Tensors, dict[str, Any]]:
    """`layout` of the runtime's own model, optimizer and scheduler for a TrainConfig, built on
    the meta device."""
    import torch

    from trainforge.training.loop import build_optimizer, build_scheduler
    from trainforge.training.models import build_model

    with torch.device("meta"):
        model = build_model(cfg)
    optimizer = build_optimizer(model, cfg, torch.device("cpu"))
    build_scheduler(optimizer, cfg)  # sets initial_lr in the param groups, as the runtime does
    return layout(model, optimizer)


def mismatches(saved: Tensors, state: Tensors) -> list[str]:
    """What `CheckpointManager.restore` (`dcp.load` into `state`) trips on in a checkpoint of
    layout `saved`: a key missing either way, another shape or dtype. None: it restores."""
    out: list[str] = []
    for key, (shape, dtype) in state.items():
        if key not in saved:
            out.append(f"{key} {list(shape)} is not in the checkpoint")
        elif tuple(saved[key][0]) != tuple(shape):
            out.append(f"{key} {list(saved[key][0])} -> {list(shape)}")
        elif saved[key][1] != dtype:
            out.append(f"{key} {saved[key][1]} -> {dtype}")
    gone = [(k, s) for k, (s, _) in saved.items() if k not in state]
    return out + [f"{k} {list(s)} is in the checkpoint but not in the model" for k, s in gone]
