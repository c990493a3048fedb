"""Built-in models. Each exposes ``blocks`` (the units FSDP2 shards, activation checkpointing
recomputes and torch.compile compiles), ``loss_from_logits(logits, y)`` and ``flops_per_sample()`` for MFU."""

from __future__ import annotations

import torch

from trainforge.training.config import TrainConfig
from trainforge.training.models.gpt import GPT, GPTConfig
from trainforge.training.models.mlp import MLP


def build_model(cfg: TrainConfig) -> torch.nn.Module:
    """Initialise on CPU from --seed (same weights on every rank, before any wrapping)."""
    torch.manual_seed(cfg.seed)
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


__all__ = ["GPT", "GPTConfig", "MLP", "build_model"]
