"""TrainforgeJobStalled reads `trainforge_step` (and `trainforge_progress`): they must move
with every optimizer step, whatever --log-every is.

Why: they moved only when a log window closed (`Reporter.record`). With `logEvery: 500` on
gpt-small-fsdp (~477 ms a step) a healthy job left them still for 238 s, and a
`stalledAfter: 2m` alert saying "made no optimizer step for 2m" paged it. Here the real loop
runs a tiny MLP for 6 steps with --log-every 100 (no window closes before the last step), and
the gauges the metrics endpoint serves are read at the start of every step.
"""

from __future__ import annotations

import re

from trainforge.training import loop
from trainforge.training.config import parse_args

ARGS = ["--model", "mlp", "--dataset-size", "256", "--batch-size", "8", "--warmup-steps", "1"]
STEPS = 6


def _value(text: str, metric: str) -> float | None:
    m = re.search(rf"^trainforge_{metric}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_step_and_progress_gauges_move_every_step_with_log_every_larger_than_the_run(
    tmp_path, monkeypatch, capsys
) -> None:
    reporters: list[loop.Reporter] = []
    seen: list[tuple[float | None, float | None, float | None]] = []
    real_reporter, real_micro = loop.Reporter, loop.micro_step

    def reporter(*args, **kwargs):
        reporters.append(real_reporter(*args, **kwargs))
        return reporters[-1]

    def micro(*args, **kwargs):  # one micro-step a step: the gauges as a scrape sees them now
        text = reporters[0].gauges.render({"run": "r"})  # what GET /metrics serves
        seen.append((_value(text, "step"), _value(text, "progress"), _value(text, "loss")))
        return real_micro(*args, **kwargs)

    monkeypatch.setattr(loop, "Reporter", reporter)
    monkeypatch.setattr(loop, "micro_step", micro)
    args = [*ARGS, "--steps", str(STEPS), "--log-every", "100", "--output-dir", str(tmp_path)]
    assert loop.train(parse_args(args)) == 0
    # before step k+1 runs, a scrape says k steps are done, and the share of the run
    assert [s[0] for s in seen] == [float(k) for k in range(STEPS)]
    assert [s[1] for s in seen] == [k / STEPS for k in range(STEPS)]
    # the window's figures stay per log window: no loss is reported before the first window
    assert {s[2] for s in seen} == {None}
    final = reporters[0].gauges.snapshot()
    assert final["step"] == STEPS and final["progress"] == 1.0 and "loss" in final
    # one log line, at the last step: --log-every still decides what is logged
    assert capsys.readouterr().out.count(f"step {STEPS}/{STEPS} | loss") == 1
