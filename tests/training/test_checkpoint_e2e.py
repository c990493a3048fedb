"""End to end through `trainforge run-local` (torchrun, 2 gloo workers, --max-restarts): a
worker killed with SIGKILL and a crash while a checkpoint is written both end in a completed job
whose final parameters equal an uninterrupted run's bit for bit; a SIGTERM (FSDP) makes both
ranks checkpoint the same step and exit 143, and the restart continues from that checkpoint.

Faults are injected with the runtime's test hooks (docs/checkpointing.md): the chosen rank
sends itself the signal right after a given step on the first attempt only, which is what an
outside `kill -9` does but at a step the test can reason about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.runtime_helpers import assert_same, final_params

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30
EVERY = 10


def run_local(
    workdir: Path, strategy: str, *extra: str, env: dict[str, str] | None = None, restarts: int = 2
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "trainforge",
        "run-local",
        "--workers",
        "2",
        "--max-restarts",
        str(restarts),
        "--strategy",
        strategy,
        "--model",
        "mlp",
        "--steps",
        str(STEPS),
        "--batch-size",
        "8",
        "--dataset-size",
        "512",
        "--seed",
        "3",
        "--log-every",
        "10",
        "--checkpoint-dir",
        str(workdir / "ckpt"),
        "--checkpoint-every",
        str(EVERY),
        "--output-dir",
        str(workdir / "out"),
        *extra,
    ]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    full_env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The uninterrupted DDP run, computed once (FSDP's bit-identical resume is covered by
    test_checkpoint.py; one reference run keeps this file fast)."""
    work = tmp_path_factory.mktemp("ref-ddp")
    proc = run_local(work, "ddp", restarts=0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return final_params(work / "ckpt" / f"step_{STEPS:06d}")


def _logs(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def test_kill9_worker_restarts_and_matches_uninterrupted(tmp_path: Path, reference) -> None:
    proc = run_local(tmp_path, "ddp", env={"TRAINFORGE_TEST_FAULT": "1:17:KILL"})
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "sends itself SIGKILL after step 17" in logs
    assert "resumed from" in logs and "step_000010 at step 10" in logs
    assert_same(reference, final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))


def test_sigterm_checkpoints_exits_and_resume_continues(tmp_path: Path) -> None:
    proc = run_local(tmp_path, "fsdp", env={"TRAINFORGE_TEST_FAULT": "1:15:TERM"})
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "stop requested (another rank)" in logs  # rank 0 was not signalled but agreed
    assert "step_000016 (preemption)" in logs
    assert "exiting with code 143" in logs
    assert "step_000016 at step 16" in logs  # agreed one step later, then resumed there
    assert (tmp_path / "ckpt" / "step_000016" / ".metadata").is_file()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["steps_this_run"] == STEPS - 16
    assert summary["ranks_agree"]


def test_crash_while_writing_checkpoint_resumes_from_previous(tmp_path: Path, reference) -> None:
    env = {"TRAINFORGE_TEST_CRASH_DURING_SAVE": "20"}
    proc = run_local(tmp_path, "ddp", "--async-checkpoint", env=env)
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "step_000020: no .metadata" in logs
    assert "step_000010 at step 10" in logs
    assert_same(reference, final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))
