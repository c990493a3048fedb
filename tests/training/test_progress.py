"""Progress and ETA: what rank 0 logs, serves on /metrics and appends to metrics.jsonl."""

from __future__ import annotations

import json
import urllib.request

from tests.ports import start_on_free_port
from trainforge.training import metrics
from trainforge.training.metrics import Reporter, format_eta


def test_eta_formats_for_humans():
    assert [format_eta(s) for s in (4.4, 65, 3 * 3600 + 7 * 60, 2 * 86400 + 4 * 3600)] == [
        "4s",
        "1m05s",
        "3h07m",
        "2d04h",
    ]


def test_progress_and_eta_are_logged_served_and_recorded(tmp_path, capsys, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(metrics.time, "perf_counter", lambda: now[0])
    rep = start_on_free_port(
        lambda p: Reporter(
            enabled=True, total_steps=400, samples_per_step=8, tokens_per_sample=4,
            flops_per_sample=1.0, world_size=1, peak=None, output_dir=tmp_path, metrics_port=p,
            run_name="r", params={},
        )
    )  # fmt: skip
    port = rep.server.port
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            before = r.read().decode()
        assert 'trainforge_total_steps{run="r"} 400.0' in before
        assert 'trainforge_progress{run="r"} 0.0' in before
        rep.start_loop(40)  # resumed at step 40: only this process's steps time the ETA
        now[0] = 130.0  # the first log, 30 s later
        rep.record(100, 2.0, 1e-3, {})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        rep.close()
    # 60 steps in 30 s -> 0.5 s/step; 300 steps left -> 150 s
    assert 'trainforge_progress{run="r"} 0.25' in text
    assert 'trainforge_eta_seconds{run="r"} 150.0' in text
    assert "# HELP trainforge_eta_seconds estimated seconds until the last step" in text
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("step 100/400 | loss 2.0000") and line.endswith("| 25.0% | ETA 2m30s")
    recorded = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert recorded["progress"] == 0.25 and recorded["eta_seconds"] == 150.0
    assert recorded["total_steps"] == 400
