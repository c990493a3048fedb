"""Meta-device start: every strategy and world size starts from the same seeded weights.

The runtime builds the model on the meta device, shards (FSDP2) or replicates (DDP) it, and
each rank draws only its own part (trainforge/training/models/init.py). These tests hold the
drawn parts to the full model a single process builds, bit for bit: unit tests of the block
scheme over simulated shards of every width, and real 2-rank jobs through the runtime's own
`build_model` and `parallelize`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from runtime_helpers import ROOT, run_ranks_raw
from torch import nn

from trainforge.training import agreement
from trainforge.training.config import parse_args
from trainforge.training.models import build_model, init
from trainforge.training.models.init import Init, fill, init_weights

SHAPES = [(301, 48), (10, 128), (7,), (1, 5), (64, 3, 2)]


def _full(shape: tuple[int, ...], spec: Init, seed: int = 3) -> torch.Tensor:
    t = torch.empty(shape)
    fill(t, 0, shape, "p", spec, seed)
    return t


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("spec", [Init.normal(0.0, 0.02), Init.uniform(-0.1, 0.1)])
def test_shards_of_any_width_are_rows_of_the_full_draw(monkeypatch, shape, block, spec) -> None:
    """Each rank's torch.chunk rows, drawn alone, equal the same rows of the whole tensor
    drawn by one process, for world sizes 1..5 (uneven, empty shards) and block sizes that
    put block edges inside shards."""
    monkeypatch.setattr(init, "BLOCK_ELEMENTS", block)
    full = _full(shape, spec)
    assert full.std() > 0
    for world in range(1, 6):
        for r, expected in enumerate(agreement.shard_slices(full, world)):
            start = min(r * -(-shape[0] // world), shape[0])
            local = torch.full(expected.shape, float("nan"))
            fill(local, start, shape, "p", spec, 3)
            assert torch.equal(local, expected), (world, r)


def test_the_draw_depends_on_seed_and_name_and_has_the_declared_law(monkeypatch) -> None:
    a = _full((512, 256), Init.normal(0.0, 0.02))
    assert torch.equal(a, _full((512, 256), Init.normal(0.0, 0.02)))
    assert not torch.equal(a, _full((512, 256), Init.normal(0.0, 0.02), seed=4))
    other = torch.empty(512, 256)
    fill(other, 0, (512, 256), "q", Init.normal(0.0, 0.02), 3)
    assert not torch.equal(a, other)
    assert abs(float(a.std()) - 0.02) < 2e-4 and abs(float(a.mean())) < 2e-4
    u = _full((512, 256), Init.uniform(-0.5, 0.25))
    assert float(u.min()) >= -0.5 and float(u.max()) < 0.25 and float(u.min()) < -0.49
    assert torch.equal(_full((4, 4), Init.constant(1.0)), torch.ones(4, 4))
    monkeypatch.setattr(init, "BLOCK_ELEMENTS", 48)  # one row per block: each its own draw
    rows = _full((301, 48), Init.normal(0.0, 1.0))
    assert len(torch.unique(rows, dim=0)) == 301


def _cfg(*flags: str):
    return parse_args(list(flags))


GPT_ODD = ["--model", "gpt", "--layers", "2", "--d-model", "48", "--heads", "3",
           "--seq-len", "40", "--vocab-size", "301", "--seed", "5"]  # fmt: skip


def test_build_model_gives_the_model_s_declared_init() -> None:
    """GPT-2's init (residual projections scaled by 1/sqrt(2L), norms at 1 and 0) and the
    MLP's nn.Linear default bounds, drawn per parameter."""
    cfg = _cfg("--model", "gpt", "--layers", "8", "--d-model", "256", "--vocab-size", "1024")
    m = build_model(cfg)
    p = dict(m.named_parameters())
    assert p["blocks.0.attn.qkv.weight"].std().item() == pytest.approx(0.02, rel=0.02)
    assert p["blocks.3.attn.proj.weight"].std().item() == pytest.approx(0.02 / 4, rel=0.02)
    assert p["blocks.3.out.weight"].std().item() == pytest.approx(0.02 / 4, rel=0.02)
    assert p["tok.weight"].std().item() == pytest.approx(0.02, rel=0.02)
    assert torch.equal(p["ln_f.weight"], torch.ones(256))
    assert torch.equal(p["blocks.1.ln2.bias"], torch.zeros(256))
    mlp = dict(build_model(_cfg("--model", "mlp")).named_parameters())
    bound = 1 / math.sqrt(784)
    w = mlp["blocks.0.fc.weight"]
    assert -bound <= w.min().item() < -0.98 * bound and 0.98 * bound < w.max().item() < bound
    assert mlp["blocks.2.fc.bias"].abs().max().item() <= 1 / math.sqrt(128)


def test_same_seed_same_weights_and_meta_builds_allocate_nothing() -> None:
    cfg = _cfg(*GPT_ODD)
    a, b = build_model(cfg), build_model(cfg)
    for (n, x), (_, y) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(x, y), n
    c = build_model(_cfg(*GPT_ODD[:-1], "6"))
    assert not torch.equal(a.head.weight, c.head.weight)
    with torch.device("meta"):  # the plan's state-layout checks build this way
        assert all(p.is_meta for p in build_model(cfg).parameters())
    assert all(p.is_meta for p in build_model(cfg, device="meta").parameters())


def test_a_parameter_without_a_declared_init_is_refused() -> None:
    """to_empty leaves garbage: a parameter no init_specs() entry covers must not train."""
    m = build_model(_cfg("--model", "mlp"), device="meta")
    m.extra = nn.Parameter(torch.empty(3, device="meta"))
    m.to_empty(device="cpu")
    with pytest.raises(ValueError, match=r"missing \['extra'\]"):
        init_weights(m, 0)


def _digests(model: nn.Module) -> dict[str, list]:
    d = {n: list(agreement.tensor_digest(p.detach())) for n, p in model.named_parameters()}
    return json.loads(json.dumps(d))  # as the probe's JSON holds them


CASES = [
    ("fsdp", 97, GPT_ODD),  # 301-row tables: 151 + 150 rows, blocks across the shard edge
    ("fsdp", 1 << 20, ["--model", "mlp", "--seed", "2"]),
    ("ddp", 97, GPT_ODD),
]


def test_two_rank_jobs_start_from_the_single_process_weights(monkeypatch, tmp_path: Path) -> None:
    """2 ranks built the runtime's way (meta, parallelize, materialise per rank) hold, bit for
    bit, the weights one process builds on the CPU: FSDP's shards and DDP's replicas."""
    out = tmp_path / "digests.json"
    probe = str(ROOT / "tests" / "training" / "init_probe.py")
    args = [str(out), json.dumps(CASES)]
    results = run_ranks_raw(2, args, timeout=300, entry=(probe,))
    for rank, (code, log) in enumerate(results):
        assert code == 0, f"rank {rank}:\n{log[-3000:]}"
    for (strategy, block, flags), got in zip(CASES, json.loads(out.read_text()), strict=True):
        monkeypatch.setattr(init, "BLOCK_ELEMENTS", block)
        expected = _digests(build_model(_cfg(*flags)))
        assert got["digests"] == expected, (strategy, flags)
        if strategy == "fsdp":  # really sharded: each rank drew only its own rows
            r0, r1 = got["rows"]
            assert all(r0[n] + r1[n] == expected[n][1][0] for n in r0 if expected[n][1])
            assert max(r0[n] for n in r0) < max(e[1][0] for e in expected.values() if e[1])
    first = json.loads(out.read_text())[0]["rows"]
    assert (first[0]["tok.weight"], first[1]["tok.weight"]) == (151, 150)
