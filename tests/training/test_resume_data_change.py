"""A resume with another --seed or dataset says the data order changed, in the plan's words.

The plan's resume check (plan/ckpt_compat.py) said "the runtime's resume line says the same"
for a seed or dataset change, but the checkpoint kept neither, so the resume line said nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
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


def _run(work: Path, steps: int, seed: int) -> str:
    cmd = [
        sys.executable, "-m", "trainforge", "run-local", "--workers", "1",
        "--model", "mlp", "--steps", str(steps), "--dataset-size", "256", "--seed", str(seed),
        "--batch-size", "8", "--log-every", "10", "--checkpoint-dir", str(work / "ckpt"),
        "--checkpoint-every", "10", "--output-dir", str(work / "out"),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-3000:]
    return logs


def test_a_resume_with_another_seed_says_the_data_order_changed(tmp_path: Path) -> None:
    _run(tmp_path, 10, seed=3)
    logs = _run(tmp_path, 12, seed=4)
    line = next(x for x in logs.splitlines() if "checkpoint: resumed from" in x)
    assert line.endswith(f"; {data_order.reset(['--seed 3 -> 4'])}"), line
