"""Built-in models. Each exposes ``blocks`` (the units FSDP2 shards, activation checkpointing
recomputes and torch.compile compiles), ``loss_from_logits(logits, y)``, ``flops_per_sample()``
for MFU and ``init_specs()`` (how each parameter starts; drawn by models/init.py)."""

from __future__ import annotations

import torch

from trainforge.training.config import TrainConfig
from trainforge.training.models.gpt import GPT, GPTConfig
from trainforge.training.models.init import init_weights, materialize, on_meta
from trainforge.training.models.mlp import MLP


def construct(cfg: TrainConfig) -> torch.nn.Module:
    """The model's modules on the current default device, weights not yet set (on the meta
    device: nothing allocated)."""
    if cfg.model == "mlp":
        return MLP()
    if cfg.model == "gpt":
        return GPT(
            GPTConfig(
                layers=cfg.layers,
                d_model=cfg.d_model,
                heads=cfg.heads,
                seq_len=cfg.seq_len,
                vocab_size=cfg.vocab_size,
            )
        )
    raise ValueError(f"--model {cfg.model!r}: expected mlp or gpt")


def build_model(cfg: TrainConfig, device: torch.device | str | None = None) -> torch.nn.Module:
    """The model initialised from --seed on ``device`` (default: torch's default device),
    with the same weights every strategy and world size start from (models/init.py).

    On the meta device (``device="meta"``, or inside ``with torch.device("meta")``) nothing
    is allocated or drawn: the runtime shards that model, then ``materialize``s it."""
    target = torch.device(device) if device is not None else torch.get_default_device()
    with torch.device("meta"):
        model = construct(cfg)
    if target.type == "meta":
        return model
    return materialize(model, target, cfg.seed)


__all__ = [
    "GPT", "GPTConfig", "MLP", "build_model", "construct", "init_weights", "materialize",
    "on_meta",
]  # fmt: skip
