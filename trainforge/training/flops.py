"""Parameter counts and model FLOPs of the built-in models, without torch.

Why a pure module: the runtime's MFU (metrics.py, loop.py) and the planner's step-time
estimate (`trainforge.jobs.estimate`, which runs inside `pulumi preview` where torch is not
installed) must count FLOPs the same way, so both call these functions. The models call them
with their real parameter counts; the planner with counts derived from the flags, which
`gpt_param_shapes` reproduces exactly (a test compares it with the built model).

FLOP convention (PaLM appendix B / nanoGPT): a training step costs 6 FLOPs per parameter per
token (2 forward, 4 backward) for every matmul weight, plus 12 * layers * d_model * seq_len
per token for attention (QK^T and AV, forward and backward); embeddings (table lookups) are
not counted. Recomputation by activation checkpointing is *not* counted: MFU measures model
FLOPs, not hardware FLOPs.
"""

from __future__ import annotations

MLP_SIZES = (784, 256, 128, 10)


Shapes = list[tuple[int, ...]]


def gpt_param_shapes(
    layers: int, d_model: int, seq_len: int, vocab_size: int
) -> tuple[list[Shapes], Shapes]:
    """Parameter shapes of `models.gpt.GPT` grouped as FSDP2 shards them: one list per block
    (``layers`` of them) and the root's (embeddings, final norm, untied head)."""
    d = d_model
    block: Shapes = [
        (d,),  # ln1.weight
        (d,),  # ln1.bias
        (3 * d, d),  # attn.qkv.weight
        (d, d),  # attn.proj.weight
        (d,),  # ln2.weight
        (d,),  # ln2.bias
        (4 * d, d),  # fc.weight
        (d, 4 * d),  # out.weight
    ]
    root: Shapes = [
        (vocab_size, d),  # tok.weight
        (seq_len, d),  # pos.weight
        (d,),  # ln_f.weight
        (d,),  # ln_f.bias
        (vocab_size, d),  # head.weight
    ]
    return [list(block) for _ in range(layers)], root


def mlp_param_shapes(sizes: tuple[int, ...] = MLP_SIZES) -> tuple[list[Shapes], Shapes]:
    """Parameter shapes of `models.mlp.MLP`: each Linear (weight, bias) is a block; no root."""
    blocks = [[(b, a), (b,)] for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    return blocks, []


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def gpt_embedding_params(d_model: int, seq_len: int, vocab_size: int) -> int:
    """Token and position embedding tables: lookups, not matmuls, so not in 6N."""
    return (vocab_size + seq_len) * d_model


def gpt_flops_per_sample(
    non_embedding_params: int, layers: int, d_model: int, seq_len: int
) -> float:
    """Model FLOPs of one training sample (``seq_len`` tokens): (6N + 12*L*d*T) * T."""
    per_token = 6 * non_embedding_params + 12 * layers * d_model * seq_len
    return float(per_token * seq_len)


def dense_flops_per_sample(params: int) -> float:
    """Forward + backward of a dense network on one sample: 6 FLOPs per parameter."""
    return 6.0 * params
