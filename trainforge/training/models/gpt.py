"""A GPT-style decoder (nanoGPT shape): pre-norm blocks, causal SDPA attention, 4x GELU MLP."""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from trainforge.training.flops import gpt_flops_per_sample
from trainforge.training.models.blocks import run_block
from trainforge.training.models.init import Init


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    layers: int = 4
    d_model: int = 256
    heads: int = 4
    seq_len: int = 128
    vocab_size: int = 512


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.proj = nn.Linear(c.d_model, c.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c.d_model)
        self.attn = CausalSelfAttention(c)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc = nn.Linear(c.d_model, 4 * c.d_model, bias=False)
        self.out = nn.Linear(4 * c.d_model, c.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.config = c
        self.max_seq_len = c.seq_len
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        # Untied head: tying would put one parameter in two FSDP groups' reach.
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.activation_checkpointing = False

    def init_specs(self) -> dict[str, Init]:
        """GPT-2's init: N(0, 0.02) for linear and embedding weights, N(0, 0.02/sqrt(2L)) for
        the residual projections, LayerNorm at 1 and 0. Drawn by models/init.py (weights are
        set there, not here, so that a meta-built and sharded model initialises per shard)."""
        out: dict[str, Init] = {}
        residual = Init.normal(0.0, 0.02 / math.sqrt(2 * self.config.layers))
        for mname, m in self.named_modules():
            prefix = f"{mname}." if mname else ""
            if isinstance(m, nn.Linear | nn.Embedding):
                scaled = mname.endswith(("attn.proj", ".out"))
                out[prefix + "weight"] = residual if scaled else Init.normal(0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    out[prefix + "bias"] = Init.constant(0.0)
            elif isinstance(m, nn.LayerNorm):
                out[prefix + "weight"] = Init.constant(1.0)
                out[prefix + "bias"] = Init.constant(0.0)
        return out

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.max_seq_len:
            raise ValueError(
                f"sequence of {t} tokens exceeds the model's --seq-len {self.max_seq_len}"
            )
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = run_block(block, x, self.activation_checkpointing)
        return self.head(self.ln_f(x))

    @staticmethod
    def loss_from_logits(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))

    def flops_per_sample(self) -> float:
        """PaLM/nanoGPT estimate (see flops.py): 6N per token (non-embedding) + 12*L*d*T
        attention, x T tokens. The planner's estimate calls the same function."""
        c = self.config
        n = sum(p.numel() for p in self.parameters()) - self.pos.weight.numel()
        n -= self.tok.weight.numel()
        return gpt_flops_per_sample(n, c.layers, c.d_model, c.seq_len)

    @property
    def tokens_per_sample(self) -> int:
        return self.config.seq_len
