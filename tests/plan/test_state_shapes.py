"""The torch-free state layout the plan reads (training/state_shapes) equals the layout the runtime's own
model, optimizer and scheduler build with torch: every key in order, shape, dtype and every
restored setting. A change to a bundled model, loop.build_optimizer or torch's AdamW state
fails here instead of making a plan judge resumes against the wrong layout."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from trainforge.plan import ckpt_compat as CC
from trainforge.training import state_layout as runtime
from trainforge.training import state_shapes
from trainforge.training.config import TrainConfig

CONFIGS = [
    TrainConfig(model="mlp"),
    TrainConfig(model="mlp", lr=0.3, weight_decay=0.0),
    TrainConfig(model="gpt"),
    # the prod stack's gpt-350m-fsdp
    TrainConfig(model="gpt", layers=24, d_model=1024, heads=16, seq_len=1024, vocab_size=32768),
    # odd sizes; a schedule without warmup and one past its warmup's first step
    TrainConfig(
        model="gpt", layers=1, d_model=8, heads=2, seq_len=3, vocab_size=7, lr=0.02,
        weight_decay=0.5, warmup_steps=0, steps=5,
    ),
    TrainConfig(model="gpt", layers=3, d_model=48, heads=3, warmup_steps=1, steps=1),
]  # fmt: skip


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.model}-{c.layers}x{c.d_model}")
def test_derived_layout_equals_the_torch_build(cfg: TrainConfig) -> None:
    built = CC.Layout(*runtime.built(cfg))
    tensors, settings = state_shapes.layout(cfg)
    assert list(tensors.items()) == list(built.tensors.items())
    assert list(settings.items()) == list(built.settings.items())


def test_lr_factor_is_the_runtimes() -> None:
    from trainforge.training.loop import lr_factor

    for warmup, total in ((0, 1), (0, 5), (1, 1), (10, 100), (10, 5), (200, 20000)):
        for step in (0, 1, 4, 9, 10, 50, 99, 100, 5000):
            assert state_shapes.lr_factor(step, warmup, total) == lr_factor(step, warmup, total)


def test_optimizer_settings_come_from_the_runtimes_config() -> None:
    """The real optimizer's param groups and the plan's prediction both hold the config's
    AdamW constants (one source: a changed value moves both, a literal in either fails)."""
    import torch

    from trainforge.training.config import ADAMW_BETAS, ADAMW_EPS
    from trainforge.training.loop import build_optimizer
    from trainforge.training.models import build_model

    cfg = CONFIGS[2]
    with torch.device("meta"):
        model = build_model(cfg)
    groups = build_optimizer(model, cfg, torch.device("cpu")).state_dict()["param_groups"]
    _, settings = state_shapes.layout(cfg)
    assert len(groups) == 2
    for i, group in enumerate(groups):
        assert tuple(group["betas"]) == ADAMW_BETAS and group["eps"] == ADAMW_EPS
        assert settings[f"optim.param_groups.{i}.betas"] == list(ADAMW_BETAS)
        assert settings[f"optim.param_groups.{i}.eps"] == ADAMW_EPS


def test_a_changed_model_is_caught() -> None:
    """The comparison can fail: a layout one block short differs from the build."""
    cfg = CONFIGS[2]
    short = dataclasses.replace(cfg, layers=cfg.layers - 1)
    assert state_shapes.layout(short)[0] != runtime.built(cfg)[0]


def test_unknown_model_falls_back_to_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def unknown(cfg):
        raise state_shapes.UnknownModel(cfg.model)

    monkeypatch.setattr(state_shapes, "layout", unknown)
    monkeypatch.setattr(runtime, "built", lambda cfg: calls.append(cfg) or ("built", {}))
    cfg = TrainConfig(model="gpt", layers=5)
    CC.state_layout.cache_clear()
    try:
        assert CC.state_layout(cfg).tensors == "built" and calls == [cfg]
    finally:
        CC.state_layout.cache_clear()


def test_layout_for_the_bundled_runtime_imports_no_torch() -> None:
    code = (
        "import sys; from trainforge.plan import ckpt_compat as CC; "
        "CC.layout_for_args(['--model', 'gpt', '--layers', '2']); "
        "CC.layout_for_args(['--model', 'mlp']); "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
