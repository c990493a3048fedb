"""`trainforge report` of what docs/checkpointing.md's kill rehearsal of examples/resumable
leaves (`TRAINFORGE_TEST_FAULT=1:17:KILL run-local --stack dev resumable`, the shipped dev
stack: metrics every 10 steps, a checkpoint every 10 and a final one at 64): the folder as that
run left it, rebuilt here. Two lines said what had not happened: "after step 0, resumed at
step 10" (the killed attempt reached 17; your own code's ledger notes only the step an attempt
resumed from, 0 for the first) and "60 steps" (the last step logged; the run saved step 64)."""

from __future__ import annotations

import json

from trainforge import report

NODE_LOST = {
    "reason": "node_lost",
    "code": None,
    "rank": 1,
    "step": None,
    "detail": "rank(s) 1 left no exit record: killed (SIGKILL/OOM killer) or node lost; the "
    "others: peer_lost",
}


def _rehearsal(tmp_path):
    run = tmp_path / "runs" / "resumable"
    ckpt = run / "checkpoints"
    for step in (50, 60, 64):
        (ckpt / f"step_{step:06d}").mkdir(parents=True)
        (ckpt / f"step_{step:06d}" / ".metadata").write_bytes(b"x")
    (ckpt / ".trainforge").mkdir()
    attempts = [  # run.json as the rehearsal wrote it (CheckpointManager.restore's notes)
        {"attempt": 0, "started_at": 1.0, "resumed_step": 0, "last_step": 0, "finished": False,
         "exit": NODE_LOST},
        {"attempt": 1, "started_at": 9.0, "resumed_step": 10, "last_step": 10, "finished": True,
         "exit": None},
    ]  # fmt: skip
    doc = {"version": 1, "started_at": 1.0, "attempts": attempts, "productive_by_step": {}}
    (ckpt / ".trainforge" / "run.json").write_text(json.dumps(doc))
    # MetricsReporter every 10 steps: step 10 before the kill (after 17), 20-60 after the
    # resume at 10: no step went back
    losses = {10: 2.3235, 20: 2.2735, 30: 2.1854, 40: 1.7719, 50: 1.6886, 60: 1.5428}
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": float(s), "loss": v}) + "\n" for s, v in losses.items())
    )
    return run


def test_the_report_says_only_what_the_run_recorded(tmp_path):
    text = report.summary_text(report.load_run(_rehearsal(tmp_path)))
    lines = text.splitlines()
    assert (
        lines[0]
        == "run resumable: step 64 saved, logged up to step 60 (finished, per the run ledger)"
    ), text
    assert "checkpoints: 3 (steps 50, 60, 64) in " in text
    (restart,) = [ln for ln in lines if ln.startswith("restarts: ")]
    assert restart.startswith("restarts: 1: resumed at step 10, attempt 0 ended with node_lost")
    assert "after step 0" not in text and "steps redone" not in text


def test_a_recorded_last_step_at_or_past_the_resume_is_still_shown(tmp_path):
    """The runtime's ledger records each attempt's steps (Goodput): where the failed attempt's
    last step is at least the resumed one it is where it got, and the redone steps follow (at
    least: a killed attempt's last step is its ledger's last flush, report.py)."""
    run = _rehearsal(tmp_path)
    path = run / "checkpoints" / ".trainforge" / "run.json"
    doc = json.loads(path.read_text())
    doc["attempts"][0]["last_step"] = 17
    path.write_text(json.dumps(doc))
    text = report.summary_text(report.load_run(run))
    assert (
        "restarts: 1: after logged step 17, resumed at step 10 (at least 7 steps redone), " in text
    ), text
