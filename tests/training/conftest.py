import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli_env

# tests/training/runtime_helpers.py is imported as `runtime_helpers` by this directory's tests
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def one_rank_group(tmp_path):
    """A 1-rank gloo group in this process: enough for a check's collectives."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


@pytest.fixture
def resumable_run(tmp_path):
    """`trainforge run-local` of the mlp on 256 samples, logging and checkpointing every 10
    steps into tmp_path, as a function of (workers, steps, *flags): its logs, once it exited 0.
    A second call resumes from the first's checkpoint (the resume tests' runs)."""

    def run(workers: int, steps: int, *flags: str) -> str:
        cmd = [
            sys.executable, "-m", "trainforge", "run-local", "--workers", str(workers),
            "--model", "mlp", "--steps", str(steps), "--dataset-size", "256",
            "--log-every", "10", "--checkpoint-dir", str(tmp_path / "ckpt"),
            "--checkpoint-every", "10", "--output-dir", str(tmp_path / "out"), *flags,
        ]  # fmt: skip
        proc = subprocess.run(
            cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300
        )
        logs = proc.stdout + proc.stderr
        assert proc.returncode == 0, logs[-3000:]
        return logs

    return run
