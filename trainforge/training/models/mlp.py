"""The seed's classifier: 784-256-128-10 with ReLU, as a stack of blocks."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainforge.training.flops import MLP_SIZES, dense_flops_per_sample
from trainforge.training.models.blocks import run_block
from trainforge.training.models.init import Init


class MLPBlock(nn.Module):
    def __init__(self, d_in: int, d_out: int, act: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        return F.relu(x) if self.act else x


class MLP(nn.Module):
    sizes = MLP_SIZES
    decay_all_params = True  # weight decay on biases too, as the seed's AdamW did

    def __init__(self) -> None:
        super().__init__()
        n = len(self.sizes) - 1
        self.blocks = nn.ModuleList(
            MLPBlock(a, b, act=i < n - 1)
            for i, (a, b) in enumerate(zip(self.sizes[:-1], self.sizes[1:], strict=True))
        )
        self.activation_checkpointing = False

    def init_specs(self) -> dict[str, Init]:
        """nn.Linear's own default (kaiming_uniform with a=sqrt(5): U(+-1/sqrt(fan_in)) for
        weight and bias), drawn by models/init.py so that it is the same for every sharding."""
        out: dict[str, Init] = {}
        for i, block in enumerate(self.blocks):
            bound = 1.0 / math.sqrt(block.fc.in_features)
            out[f"blocks.{i}.fc.weight"] = Init.uniform(-bound, bound)
            out[f"blocks.{i}.fc.bias"] = Init.uniform(-bound, bound)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = run_block(block, x, self.activation_checkpointing)
        return x

    @staticmethod
    def loss_from_logits(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), y)

    def flops_per_sample(self) -> float:
        """Forward + backward ~ 6 x parameters per sample (flops.py, shared with the planner)."""
        return dense_flops_per_sample(sum(p.numel() for p in self.parameters()))

    @property
    def tokens_per_sample(self) -> int | None:
        """None: a sample is a feature vector, not a token sequence, so the runtime reports
        samples/s only (a tokens/s equal to samples/s would be a rate of nothing)."""
        return None
