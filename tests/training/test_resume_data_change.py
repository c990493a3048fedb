"""A resume with another --seed or dataset says the data order changed, in the plan's words.

The plan's resume check (plan/ckpt_compat.py) said "the runtime's resume line says the same"
for a seed or dataset change, but the checkpoint kept neither, so the resume line said nothing.
"""

from __future__ import annotations

from pathlib import Path

from trainforge.plan import ckpt_compat as CC
from trainforge.training import data_order
from trainforge.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def test_the_runtime_and_the_plan_word_a_data_change_alike() -> None:
    old, new = TrainConfig(seed=3), TrainConfig(seed=4, dataset_size=512)
    values = [{f: getattr(c, f) for f in data_order.DATA_FIELDS} for c in (old, new)]
    said = data_order.data_changes(*values)
    assert said == CC._changed(old, new, *data_order.DATA_FIELDS)
    assert said == ["--seed 3 -> 4", f"--dataset-size {old.dataset_size} -> 512"]
    assert data_order.resume_note(2, 2, 16, 16, *values) == data_order.reset(said)
    assert data_order.resume_note(2, 2, 16, 16, None, values[1]) is None  # an older checkpoint
    assert data_order.resume_note(2, 2, 16, 16, values[0], values[0]) is None


def test_a_resume_with_another_seed_says_the_data_order_changed(resumable_run) -> None:
    resumable_run(1, 10, "--seed", "3", "--batch-size", "8")
    logs = resumable_run(1, 12, "--seed", "4", "--batch-size", "8")
    line = next(x for x in logs.splitlines() if "checkpoint: resumed from" in x)
    assert line.endswith(f"; {data_order.reset(['--seed 3 -> 4'])}"), line
