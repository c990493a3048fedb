"""A resume on another world size says what it does to the data order, in the plan's words.

Real runs through `trainforge run-local`: 2 gloo workers train 10 steps and checkpoint, then 1
worker resumes the same directory. With the same --batch-size the global batch halves, which
the plan's resume check (plan/ckpt_compat.py) calls a data-order reset; with
--global-batch-size the global batch is kept and so are the samples of every step.
"""

from __future__ import annotations

from pathlib import Path

from trainforge.plan import ckpt_compat as CC
from trainforge.training import data_order

ROOT = Path(__file__).resolve().parents[2]


def _resume_line(logs: str) -> str:
    line = next(line for line in logs.splitlines() if "checkpoint: resumed from" in line)
    # docs/checkpointing.md shows what this resume prints after its timing
    said = line[line.index("s; world size") + 3 :]
    assert said in (ROOT / "docs/checkpointing.md").read_text(), said
    return line


def test_fewer_workers_same_batch_size_says_the_data_order_resets(resumable_run) -> None:
    resumable_run(2, 10, "--seed", "3", "--batch-size", "8")
    line = _resume_line(resumable_run(1, 12, "--seed", "3", "--batch-size", "8"))
    assert "at step 10 (data position 10)" in line
    # the plan's own wording for this change, from the one place both read
    expected = data_order.reset([data_order.global_batch_change(16, 8)])
    assert line.endswith(f"; world size 2 -> 1; {expected}"), line
    assert "data order: global batch 16 -> 8; step s now reads other samples" in line


def test_fewer_workers_same_global_batch_keeps_the_data_order(resumable_run) -> None:
    resumable_run(2, 10, "--seed", "3", "--global-batch-size", "16")
    line = _resume_line(resumable_run(1, 12, "--seed", "3", "--global-batch-size", "16"))
    assert line.endswith("; world size 2 -> 1, global batch 16 kept: step s reads the same samples")


def test_resume_note_cases() -> None:
    assert data_order.resume_note(2, 2, 16, 16) is None
    assert data_order.resume_note(None, 1, None, 8) is None  # nothing recorded, nothing said
    assert data_order.resume_note(2, 2, 16, 32) == data_order.reset(["global batch 16 -> 32"])
    old = data_order.resume_note(2, 1, None, 8)  # a checkpoint from before global_batch
    assert old is not None and old.startswith("world size 2 -> 1; the checkpoint does not")


def test_plan_resume_check_uses_the_same_wording() -> None:
    """The plan's verdict for the first test's change names the same reset."""
    args = ["--model", "mlp", "--batch-size", "8", "--dataset-size", "256", "--seed", "3"]
    old = CC.JobState(args=args, world_size=2, checkpoint_dir="/ckpt")
    new = CC.JobState(args=args, world_size=1, checkpoint_dir="/ckpt")
    compat = CC.classify(old, new)
    assert compat.resets == [data_order.reset([data_order.global_batch_change(16, 8)])]
