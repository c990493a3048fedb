"""DCP's checkpoint process says nothing at INFO into the job's log, warnings and errors still.

Its start logged four INFO lines per rank ("Initializing dist.ProcessGroup in checkpoint
background process on port N", "Checkpoint background process is running...", "Waiting for
checkpoint save request...", "Received async checkpoint request with id=None"), because
torch's ``_init_logger`` turns the root logger to INFO before any code of ours ran there
(watched fail: all four, per rank, with `quiet_checkpoint_process` not called). dcp_writer.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DCP_START_LINES = (
    "Initializing dist.ProcessGroup in checkpoint background process",
    "Checkpoint background process is running",
    "Waiting for checkpoint save request",
    "Received async checkpoint request",
)


def test_a_run_local_job_with_async_checkpoints_prints_no_dcp_info_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainforge", "run-local", "--workers", "2", "--model", "mlp",
           "--steps", "4", "--batch-size", "8", "--dataset-size", "256", "--log-every", "2",
           "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "2",
           "--async-checkpoint", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "checkpoint: saved" in out and "DCP's checkpoint process" in out, out[-4000:]
    said = [x for x in out.splitlines() if any(w in x for w in DCP_START_LINES)]
    assert said == [], said
    assert " - INFO - " not in out, out[-4000:]


def test_the_quiet_target_keeps_warnings_and_errors() -> None:
    """The target's `logging.disable` is INFO's only: DCP's own ``_init_logger`` set-up, then
    an INFO, a warning and an error, as its process logs them."""
    probe = textwrap.dedent(
        """
        import logging
        from torch.distributed.checkpoint.logger import _init_logger
        from trainforge.training import dcp_writer

        def dcp_like(rank):
            _init_logger(rank)
            logging.getLogger().info("an info line")
            logging.getLogger().warning("a warning line")
            logging.getLogger().error("an error line")

        dcp_writer._dcp_target = dcp_like
        dcp_writer._quiet_checkpointing_subprocess(0)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "a warning line" in proc.stderr and "an error line" in proc.stderr, proc.stderr
    assert "an info line" not in proc.stderr, proc.stderr
