"""Your own code's job gets the stall alert when its MetricsReporter knows the run's length.

TrainforgeJobStalled pages a job whose `trainforge_step` stands still while
`trainforge_progress < 1` (platform/alerts.py). The runtime sets both; `MetricsReporter` (the
library for your own code) set only the step, so no own-code job was ever watched while
docs/troubleshooting.md spoke of every job. With `total_steps` its `log` sets the progress too:
the series it serves, replayed through promtool with the rendered rules, page a stuck run, and
a finished run stays quiet."""

from __future__ import annotations

from tests.platform.test_alerts import job, job_labels, needs_promtool, run_unit_tests
from trainforge.training.metrics import MetricsReporter


def _served(tmp_path, total_steps: int | None, steps: int) -> dict[str, list[float]]:
    """What rank 0's endpoint serves after each of `steps` calls of `log`, per gauge."""
    r = MetricsReporter(enabled=True, run_name="own", output_dir=tmp_path, total_steps=total_steps)
    seen: dict[str, list[float]] = {}
    for step in range(1, steps + 1):
        r.log(step, loss=1.0)
        for name, value in r.gauges.snapshot().items():
            seen.setdefault(name, []).append(value)
    r.close()
    return seen


def _series(name: str, values: list[float], flat: int) -> tuple[str, str]:
    """One sample a minute: `values`, then the last one `flat` more minutes (a hung run)."""
    return f"trainforge_{name}{job('own')}", " ".join(f"{v:g}" for v in values + values[-1:] * flat)


@needs_promtool
def test_a_stuck_own_code_run_with_total_steps_pages(tmp_path):
    seen = _served(tmp_path, total_steps=40, steps=20)
    assert seen["progress"][-1] == 0.5 and seen["total_steps"][-1] == 40
    case = (
        "TrainforgeJobStalled",
        [_series("step", seen["step"], 40), _series("progress", seen["progress"], 40)],
        [(30, []), (50, [job_labels("own", "critical")])],
    )
    res = run_unit_tests(tmp_path, [case])
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_a_finished_own_code_run_stays_quiet(tmp_path):
    seen = _served(tmp_path, total_steps=20, steps=20)
    assert seen["progress"][-1] == 1.0
    case = (
        "TrainforgeJobStalled",
        [_series("step", seen["step"], 40), _series("progress", seen["progress"], 40)],
        [(50, [])],
    )
    res = run_unit_tests(tmp_path, [case])
    assert res.returncode == 0, res.stdout + res.stderr


def test_without_total_steps_there_is_no_progress_and_so_no_stall_alert(tmp_path):
    """What docs/troubleshooting.md says of a reporter given no length."""
    assert "progress" not in _served(tmp_path, total_steps=None, steps=3)
