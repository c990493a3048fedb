"""The checkpoint state layout of the bundled models, derived without torch: the runtime's own
facts (its models' parameter names, its AdamW groups), so it lives beside the torch build
(state_layout.py); the plan reads it (plan/ckpt_compat.py) to judge a replaced job's resume.

Why without torch: building it on the meta device cost a plan ~2.5 s of imports (docs/performance.md)
for a few hundred shapes that follow from the flags: the parameter shapes of
`trainforge.training.flops`, in `named_parameters()` order, the runtime's AdamW param groups and
state, keyed as DCP flattens `get_state_dict`. tests/plan/test_state_shapes.py holds it equal to
the torch build (`training.state_layout.built`), which a model unknown here falls back to.
"""

from __future__ import annotations

from typing import Any

# lr_factor: LambdaLR applies it at creation; ADAMW_*: what loop.build_optimizer passes
from trainforge.training.config import ADAMW_BETAS, ADAMW_EPS, lr_factor
from trainforge.training.flops import MLP_SIZES, gpt_param_shapes, mlp_param_shapes

DTYPE = "float32"  # parameters are built in the default dtype; AdamW's step is a float32 scalar
GPT_BLOCK = (
    "ln1.weight",
    "ln1.bias",
    "attn.qkv.weight",
    "attn.proj.weight",
    "ln2.weight",
    "ln2.bias",
    "fc.weight",
    "out.weight",
)


class UnknownModel(LookupError):
    """A model whose structure this module does not describe (use the torch build)."""


def named_params(cfg: Any) -> tuple[list[tuple[str, tuple[int, ...]]], bool]:
    """(name, shape) of every parameter in `named_parameters()` order, and whether the
    model decays every parameter (one param group) as the MLP does."""
    if cfg.model == "gpt":
        blocks, root = gpt_param_shapes(cfg.layers, cfg.d_model, cfg.seq_len, cfg.vocab_size)
        names = ["tok.weight", "pos.weight"]
        shapes = list(root[:2])
        for i, block in enumerate(blocks):
            names += [f"blocks.{i}.{n}" for n in GPT_BLOCK]
            shapes += block
        names += ["ln_f.weight", "ln_f.bias", "head.weight"]
        shapes += root[2:]
        return list(zip(names, shapes, strict=True)), False
    if cfg.model == "mlp":
        blocks, _ = mlp_param_shapes(MLP_SIZES)
        out = []
        for i, (w, b) in enumerate(blocks):
            out += [(f"blocks.{i}.fc.weight", w), (f"blocks.{i}.fc.bias", b)]
        return out, True
    raise UnknownModel(cfg.model)


def layout(cfg: Any) -> tuple[dict[str, tuple[tuple[int, ...], str]], dict[str, Any]]:
    """(tensors, settings) as `trainforge.training.state_layout.layout` returns them for the
    runtime's model, optimizer and scheduler built from this TrainConfig."""
    params, decay_all = named_params(cfg)
    if decay_all:
        groups = [(params, cfg.weight_decay)]
    else:
        groups = [
            ([p for p in params if len(p[1]) >= 2], cfg.weight_decay),
            ([p for p in params if len(p[1]) < 2], 0.0),
        ]
    tensors: dict[str, tuple[tuple[int, ...], str]] = {
        f"model.{name}": (shape, DTYPE) for name, shape in params
    }
    for group, _ in groups:
        for name, shape in group:
            tensors[f"optim.state.{name}.step"] = ((), DTYPE)
            tensors[f"optim.state.{name}.exp_avg"] = (shape, DTYPE)
            tensors[f"optim.state.{name}.exp_avg_sq"] = (shape, DTYPE)
    lr = cfg.lr * lr_factor(0, cfg.warmup_steps, cfg.steps)
    settings: dict[str, Any] = {}
    for i, (_, decay) in enumerate(groups):
        key = f"optim.param_groups.{i}"
        settings[f"{key}.weight_decay"] = decay
        settings[f"{key}.lr"] = lr
        settings[f"{key}.betas"] = list(ADAMW_BETAS)
        settings[f"{key}.eps"] = ADAMW_EPS
        settings[f"{key}.initial_lr"] = cfg.lr
    return tensors, settings
