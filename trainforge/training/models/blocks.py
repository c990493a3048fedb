"""Shared block plumbing: activation checkpointing without changing parameter names.

Recomputing inside ``forward`` (instead of wrapping modules) keeps state-dict keys identical
with and without ``--activation-checkpointing``, so checkpoints move between the two.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def run_block(block: nn.Module, x: torch.Tensor, recompute: bool) -> torch.Tensor:
    if recompute and torch.is_grad_enabled():
        return checkpoint(block, x, use_reentrant=False)
    return block(x)
