"""A true report: the restart at the step actually resumed from, rates only in logged units.

The kill -9 rehearsal of docs/checkpointing.md (examples/resumable, checkpoints every 10, a
SIGKILL after step 17, metrics every 2 steps) resumes at step 10: the run prints it, the run
ledger records it (CheckpointManager.restore -> ledger.note_resumed), and `trainforge report`
draws the restart there and shades steps 10-16 as redone, not at step 12 where logging
picked up again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainforge import report

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kill9")
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "examples", root / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TRAINFORGE_TEST_FAULT="1:17:KILL")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainforge",
            "run-local",
            "--stack",
            "dev",
            "resumable",
            "--max-restarts",
            "2",
            "--log-every",
            "2",
            "--epochs",
            "1",
        ],  # fmt: skip
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "resumed from" in out and "at step 10 " in out  # what the run printed
    # the kill came after step 10's checkpoint committed (the hook waits for a save in flight)
    assert out.index("step_000010 (periodic)") < out.index("resumed from"), out[-4000:]
    return root / "runs" / "resumable"


def test_the_kill9_report_marks_the_resume_at_the_checkpoints_step(killed_run, monkeypatch):
    run = report.load_run(killed_run)
    ledger = run.ledger_attempts
    assert [a.get("resumed_step") for a in ledger] == [0, 10]  # the ledger knows it
    (r,) = report.resumes(run)
    assert (r.at, r.after, r.logged_from, r.redone) == (10, 16, 12, 6)
    text = report.summary_text(run)
    # killed after step 17 (TRAINFORGE_TEST_FAULT 1:17:KILL), logged every 2nd step: the report
    # said "after step 16 ... (6 steps redone)", the last logged step as where it died, though
    # 7 were redone; a killed attempt's last logged step is a lower bound, and said so
    assert "restarts: 1: after logged step 16, resumed at step 10 (at least 6 steps redone)" in (
        text
    )

    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    lines: list[tuple[float, str | None]] = []
    spans: list[tuple[float, float, str | None]] = []
    real_vline, real_span = Axes.axvline, Axes.axvspan

    def vline(self, x=0, *a, **kw):
        lines.append((x, kw.get("label")))
        return real_vline(self, x, *a, **kw)

    def vspan(self, x0, x1, *a, **kw):
        spans.append((x0, x1, kw.get("label")))
        return real_span(self, x0, x1, *a, **kw)

    monkeypatch.setattr(Axes, "axvline", vline)
    monkeypatch.setattr(Axes, "axvspan", vspan)
    report.plot(run, killed_run / "check.png")
    restart_x = {x for x, label in lines if label and label.startswith("restart")}
    assert restart_x == {10}
    assert {(x0, x1) for x0, x1, _ in spans} == {(10, 16)}


def _write(folder: Path, records: list[dict], ledger: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if ledger is not None:
        (folder / "checkpoints" / ".trainforge").mkdir(parents=True)
        (folder / "checkpoints" / ".trainforge" / "run.json").write_text(json.dumps(ledger))
    return folder


def test_the_ledgers_step_wins_over_where_logging_resumed(tmp_path):
    """Checkpoints every 100, killed near 120, logged every 10: the restart is at 100."""
    steps = [*range(10, 130, 10), *range(110, 210, 10)]
    ledger = {
        "version": 1,
        "attempts": [
            {"attempt": 0, "resumed_step": 0, "last_step": 120, "exit": {"reason": "node_lost"}},
            {"attempt": 1, "resumed_step": 100, "last_step": 200, "finished": True},
        ],
    }
    run = report.load_run(_write(tmp_path / "r", [{"step": s, "loss": 1.0} for s in steps], ledger))
    assert report.resumes(run) == [report.Resume(100, 120, 110)]
    assert "after logged step 120, resumed at step 100 (at least 20 steps redone)" in (
        report.summary_text(run)
    )
    # without the ledger nothing says which checkpoint: said so, not guessed as 110
    bare = report.load_run(_write(tmp_path / "b", [{"step": s, "loss": 1.0} for s in steps]))
    assert report.resumes(bare) == [report.Resume(None, 120, 110)]
    text = report.summary_text(bare)
    assert "logging again from step 110 (the resumed step is not recorded)" in text
    assert "resumed at step 110" not in text


def test_rates_only_in_the_units_the_run_logs(tmp_path):
    cnn = [{"step": s, "loss": 1.0, "samples_per_second": 250.0} for s in range(1, 6)]
    text = report.summary_text(report.load_run(_write(tmp_path / "cnn", cnn)))
    assert "throughput: median 250 samples/s over 5 log windows" in text
    assert "tokens/s" not in text
    gpt = [{**r, "tokens_per_second": 250.0 * 1024} for r in cnn]
    text = report.summary_text(report.load_run(_write(tmp_path / "gpt", gpt)))
    assert "median 250 samples/s, 256,000 tokens/s over 5 log windows" in text


def _runtime(out: Path, steps: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    argv = ["--steps", str(steps), "--checkpoint-every", "10", "--output-dir", str(out),
            "--checkpoint-dir", str(out / "ck"), "--dataset-size", "512"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge.training", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout + proc.stderr


def test_more_steps_after_a_finished_run_continue_it_in_log_ledger_goodput_and_report(tmp_path):
    """--steps 20, then the same with --steps 30: it resumed from step 20 yet said 'the ledger
    has no record of step 20', counted goodput on the second process alone, and the report said
    'attempts: 1 ... restarts: 0' beside loss from step 10 and checkpoints 10, 20, 30."""
    _runtime(tmp_path, 20)
    out = _runtime(tmp_path, 30)
    assert "resumed from" in out and "at step 20 " in out
    assert "no record of step 20" not in out
    ledger = json.loads((tmp_path / "ck" / ".trainforge" / "run.json").read_text())
    first, second = ledger["attempts"]
    assert first["finished"] and second["finished"] and second["continued_from"] == 20
    summary = json.loads((tmp_path / "summary.json").read_text())
    gp = summary["goodput"]
    assert gp["restarts"] == 0
    # both processes' steps are productive; wall time spans both (not the pause between them)
    steps = first["step_seconds"] + second["step_seconds"]
    assert gp["productive_seconds"] == pytest.approx(steps, rel=1e-6)
    ran = (first["updated_at"] - first["started_at"]) + (
        second["updated_at"] - second["started_at"]
    )
    assert ran * 0.9 < gp["wall_seconds"] < ran * 1.1
    text = report.summary_text(report.load_run(tmp_path, tmp_path / "ck"))
    assert "attempts: 2 (run ledger; attempt 2 continued the finished run from step 20; " in text
    assert "restarts: 0" in text
