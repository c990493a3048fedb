"""Data order (a pure function of seed, epoch, rank, world size and step), the LR schedule,
the GPT's context limit, and the Prometheus endpoint."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import torch

from trainforge.training.data import ShardedOrder, synthetic_classification
from trainforge.training.loop import lr_factor
from trainforge.training.metrics import Gauges, MetricsServer
from trainforge.training.models import GPT, GPTConfig


def _order(rank: int, world: int, batch: int, accum: int = 1, seed: int = 5) -> ShardedOrder:
    return ShardedOrder(
        100, seed=seed, rank=rank, world_size=world, batch_size=batch, grad_accum=accum
    )


def test_global_batch_is_the_same_samples_for_any_world_size() -> None:
    one = _order(0, 1, 16)
    ranks = [_order(r, 2, 4, accum=2) for r in range(2)]
    for step in (0, 1, 5, 6, 13):  # 6 steps per epoch: crosses epochs
        mine = torch.cat([o.indices(step, m) for o in ranks for m in range(2)])
        assert sorted(mine.tolist()) == sorted(one.indices(step, 0).tolist())
        assert len(set(mine.tolist())) == 16  # ranks never share a sample in a step


def test_order_is_a_pure_function_of_the_step() -> None:
    a, b = _order(1, 2, 8), _order(1, 2, 8)
    forward = [a.indices(s, 0).tolist() for s in range(20)]
    backward = [b.indices(s, 0).tolist() for s in reversed(range(20))][::-1]
    assert forward == backward  # a resumed run can start anywhere
    assert a.position_for_step(13).epoch == 2 and a.position_for_step(13).batch_in_epoch == 1
    e0, e1 = a.permutation(0), a.permutation(1)
    assert not torch.equal(e0, e1) and sorted(e0.tolist()) == sorted(e1.tolist())
    assert not torch.equal(_order(1, 2, 8, seed=6).permutation(0), e0)


def test_synthetic_data_is_deterministic() -> None:
    a, b = synthetic_classification(64, seed=3), synthetic_classification(64, seed=3)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert len(set(a.targets.tolist())) > 3


def test_lr_schedule_warmup_then_cosine_to_ten_percent() -> None:
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(1.0)
    assert lr_factor(10, 10, 100) == pytest.approx(1.0)
    assert lr_factor(55, 10, 100) == pytest.approx(0.55)
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)
    assert lr_factor(4, 50, 5) == pytest.approx(1.0)  # warmup longer than the run: capped


def test_gpt_rejects_sequences_longer_than_its_context() -> None:
    m = GPT(GPTConfig(layers=1, d_model=16, heads=2, seq_len=8, vocab_size=32))
    assert m(torch.zeros(2, 8, dtype=torch.long)).shape == (2, 8, 32)
    with pytest.raises(ValueError, match="exceeds the model's --seq-len 8"):
        m(torch.zeros(2, 9, dtype=torch.long))


def test_metrics_endpoint_serves_prometheus_text() -> None:
    gauges = Gauges()
    gauges.update({"step": 40, "loss": 1.25, "samples_per_second": 900.5})
    server = MetricsServer(gauges, 0, labels={"run": "demo"})  # 0: any free port (tests)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        assert "# TYPE trainforge_step gauge" in text
        assert 'trainforge_loss{run="demo"} 1.25' in text
        # the checkpoint code sets its gauges the same way; the next scrape shows them
        gauges.update({"checkpoint_blocked_seconds": 0.5, "checkpoint_step": 40})
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        assert 'trainforge_checkpoint_blocked_seconds{run="demo"} 0.5' in text
        assert "# HELP trainforge_checkpoint_step step of the last checkpoint" in text
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/nope", timeout=10)
    finally:
        server.close()


def test_reporter_publishes_what_it_logs(tmp_path, capsys) -> None:
    """The loop's reporter feeds the endpoint, metrics.jsonl and summary.json."""
    import json

    from tests.ports import start_on_free_port
    from trainforge.training.metrics import Reporter

    rep = start_on_free_port(
        lambda p: Reporter(
            enabled=True, total_steps=20, samples_per_step=64, tokens_per_sample=1,
            flops_per_sample=1.0, world_size=2, peak=None, output_dir=tmp_path, metrics_port=p,
            run_name="r1", params={"lr": 0.1},
        )
    )  # fmt: skip
    port = rep.server.port
    try:
        rep.start_loop(0)
        rep.record(10, 2.5, 0.1, {"checkpoint_step": 10.0})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'trainforge_step{run="r1"} 10.0' in text
        assert 'trainforge_loss{run="r1"} 2.5' in text
        assert 'trainforge_world_size{run="r1"} 2.0' in text
        assert 'trainforge_checkpoint_step{run="r1"} 10.0' in text
        assert "trainforge_samples_per_second" in text and "trainforge_mfu" not in text  # CPU
    finally:
        rep.close()
    assert "step 10/20 | loss 2.5000" in capsys.readouterr().out
    line = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert line["step"] == 10 and line["loss"] == 2.5
