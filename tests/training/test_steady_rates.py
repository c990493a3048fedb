"""The summary's headline rates are the steady state: start-up windows left out, and named.

Why: on an H200 the 1.3B GPT ran at 53-55% MFU in its steady windows while summary.json said
26.7% (the whole run, compilation included), and `trainforge calibrate` would have recorded
that, doubling every plan's duration and cost on H200. Here the first step is made 4 s longer
on a fake clock (deterministic; nothing is timed): the summary must stay within 20% of the
steady windows, and say which windows it left out.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from trainforge.training import loop
from trainforge.training.config import parse_args

STEP_S = 0.05  # fake seconds per micro-step
ARGS = ["--model", "mlp", "--dataset-size", "512", "--batch-size", "8", "--warmup-steps", "1"]


@pytest.fixture
def slow_first_step(monkeypatch):
    """A clock that moves only when a micro-step runs: STEP_S each, 4 s more for the first."""
    clock = {"t": 1000.0, "calls": 0}
    real_micro, real_clock = loop.micro_step, time.perf_counter

    def micro(*args, **kwargs):
        clock["calls"] += 1
        clock["t"] += STEP_S + (4.0 if clock["calls"] == 1 else 0.0)
        return real_micro(*args, **kwargs)

    monkeypatch.setattr(loop, "micro_step", micro)
    # the real clock at a millionth of its pace keeps it moving between steps (never backwards)
    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"] + real_clock() * 1e-6)
    return clock


def _windows(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_first_step_4s_longer_leaves_summary_samples_per_s_within_20pct_of_the_steady_windows(
    tmp_path, slow_first_step, capsys
) -> None:
    out = tmp_path / "o"
    args = [*ARGS, "--steps", "40", "--log-every", "5", "--output-dir", str(out)]
    assert loop.train(parse_args(args)) == 0
    s = json.loads((out / "summary.json").read_text())
    windows = _windows(out)
    steady = [w["samples_per_second"] for w in windows if not w["startup_window"]]
    assert [w["startup_window"] for w in windows] == [1.0] + [0.0] * 7
    assert len(steady) == 7
    mean = sum(steady) / len(steady)
    assert s["samples_per_second"] == pytest.approx(mean, rel=0.2)
    assert s["samples_per_second"] == pytest.approx(8 / STEP_S, rel=1e-3)  # the fake pace
    # ... and says what it is: steady steps 6-40; start-up (steps 1-5, 4 s + 5 steps) apart
    assert s["rates_basis"] == "steady"
    assert (s["steady"]["from_step"], s["steady"]["to_step"], s["steady"]["windows"]) == (6, 40, 7)
    assert s["startup"]["windows"] == [[1, 5]]
    assert s["startup"]["seconds"] == pytest.approx(4.0 + 5 * STEP_S, rel=1e-3)
    assert s["startup"]["setup_seconds"] == s["setup_seconds"]
    # the whole loop's rate, start-up included, is kept beside it and is far lower
    assert s["whole_run"]["samples_per_second"] < 0.5 * s["samples_per_second"]
    assert s["steps_per_second"] == pytest.approx(1 / STEP_S, rel=1e-3)
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("summary: steps")]
    assert len(line) == 1
    assert "160.0 samples/s" in line[0] and "(steady: steps 6-40, 7 windows)" in line[0]
    assert re.search(r"start-up: setup \d+\.\ds, steps 1-5 4\.[23]s", line[0])  # 4.25 s
    assert "whole loop " in line[0]


def test_a_run_no_longer_than_its_start_up_says_its_rates_include_it(
    tmp_path, slow_first_step, capsys
) -> None:
    out = tmp_path / "o"
    assert loop.train(parse_args([*ARGS, "--steps", "2", "--output-dir", str(out)])) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["rates_basis"] == "whole_run" and s["steady"]["windows"] == 0
    assert s["samples_per_second"] == s["whole_run"]["samples_per_second"]
    assert "(whole run: no steady window" in capsys.readouterr().out


def test_with_log_every_1_the_first_two_steps_are_start_up(tmp_path, slow_first_step) -> None:
    out = tmp_path / "o"
    args = [*ARGS, "--steps", "6", "--log-every", "1", "--output-dir", str(out)]
    assert loop.train(parse_args(args)) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["startup"]["windows"] == [[1, 1], [2, 2]]
    assert (s["steady"]["from_step"], s["steady"]["to_step"]) == (3, 6)


def test_a_model_without_tokens_reports_samples_per_s_and_no_tokens_per_s(
    tmp_path, slow_first_step, capsys
) -> None:
    """The MLP's samples are feature vectors: a tokens/s equal to samples/s would be a rate of
    nothing. metrics.jsonl, the gauges, the log lines and summary.json say samples/s only
    (summary.json's tokens_per_second is null); a GPT's tokens/s is tests/training/test_runtime.py's."""
    out = tmp_path / "o"
    args = [*ARGS, "--steps", "20", "--log-every", "5", "--output-dir", str(out)]
    assert loop.train(parse_args(args)) == 0
    windows = _windows(out)
    assert windows and all("tokens_per_second" not in w for w in windows)
    assert all(w["samples_per_second"] > 0 for w in windows)
    s = json.loads((out / "summary.json").read_text())
    assert s["samples_per_second"] > 0 and s["tokens_per_second"] is None
    assert s["steady"]["tokens_per_second"] is None and s["whole_run"]["tokens_per_second"] is None
    text = capsys.readouterr().out
    steps = [ln for ln in text.splitlines() if ln.startswith(("step ", "summary: steps"))]
    assert len(steps) == 5 and all("samples/s" in ln for ln in steps)
    assert not any("tokens/s" in ln for ln in steps), steps
