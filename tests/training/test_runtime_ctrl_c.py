"""Ctrl-C stops the bundled runtime as your stop: `interrupted` 130, with its record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import sigint_default

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_is_recorded_interrupted_not_left_for_node_lost(tmp_path: Path) -> None:
    """The runtime let KeyboardInterrupt through: a traceback, no exit line, no record, so the
    next attempt's ledger read the rank as killed or lost (`node_lost`) and counted it as a
    failed attempt (watched fail: no record)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "trainforge.training", "--model", "mlp", "--steps", "100000",
           "--dataset-size", "256", "--batch-size", "8", "--log-every", "10",
           "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "1000",
           "--output-dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_default,  # a background run (CI) starts with SIGINT ignored
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("step "):  # training: the loop is running
            break
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out[-2000:]
    assert "trainforge exit: interrupted code=130 (rank 0, step " in out, out[-2000:]
    (rec,) = (tmp_path / "ckpt" / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
    said = json.loads(rec.read_text())
    assert said["reason"] == "interrupted" and said["code"] == 130, said
