"""Launch the runtime as real processes (2-rank gloo jobs) and read what rank 0 wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Small and fast: the MLP on 1024 synthetic samples.
BASE = ["--model", "mlp", "--dataset-size", "1024", "--lr", "3e-3", "--warmup-steps", "2"]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_TEST_", "MLFLOW_"))}
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        e.pop(k, None)
    e.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world: int, args: list[str], timeout: float = 180) -> list[str]:
    """Start ``world`` ranks of `python -m trainforge.training` (what torchrun would start)."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        e = env(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(world),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "trainforge.training", *args],
                cwd=ROOT,
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, out) in enumerate(zip(procs, outs, strict=True)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{out[-4000:]}"
    return outs


def summary(out_dir: Path) -> dict[str, Any]:
    return json.loads((out_dir / "summary.json").read_text())


def losses(s: dict[str, Any]) -> list[float]:
    return [loss for _, loss in s["losses"]]
