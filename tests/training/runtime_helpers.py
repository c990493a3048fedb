"""Launch the runtime as real processes (2-rank gloo jobs) and read what rank 0 wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.ports import communicate_all, retry_on_clash

ROOT = Path(__file__).resolve().parents[2]

# Small and fast: the MLP on 1024 synthetic samples.
BASE = ["--model", "mlp", "--dataset-size", "1024", "--lr", "3e-3", "--warmup-steps", "2"]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_TEST_", "MLFLOW_"))}
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        e.pop(k, None)
    e.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return e


def run_ranks(world: int, args: list[str], timeout: float = 180) -> list[str]:
    """Start ``world`` ranks of `python -m trainforge.training` (what torchrun would start)."""
    results = run_ranks_raw(world, args, timeout=timeout)
    for rank, (code, out) in enumerate(results):
        assert code == 0, f"rank {rank} exited {code}:\n{out[-4000:]}"
    return [out for _, out in results]


def run_ranks_raw(
    world: int,
    args: list[str],
    timeout: float = 180,
    entry: tuple[str, ...] = ("-m", "trainforge.training"),
    **extra_env: str,
) -> list[tuple[int, str]]:
    """Like run_ranks, but returns (exit code, output) per rank and asserts nothing. The
    rendezvous port is retried when rank 0 lost it to another process (EADDRINUSE).
    ``entry``: what each rank runs (default the runtime; a test's own script path)."""
    return retry_on_clash(
        lambda port: _run_ranks_on(world, args, timeout, str(port), extra_env, entry),
        lambda results: [out for _, out in results],
    )


def _run_ranks_on(
    world: int,
    args: list[str],
    timeout: float,
    port: str,
    extra_env: dict[str, str],
    entry: tuple[str, ...] = ("-m", "trainforge.training"),
) -> list[tuple[int, str]]:
    procs = []
    for rank in range(world):
        e = env(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(world),
            **extra_env,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, *entry, *args],
                cwd=ROOT,
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return communicate_all(procs, timeout)


def summary(out_dir: Path) -> dict[str, Any]:
    return json.loads((out_dir / "summary.json").read_text())


def losses(s: dict[str, Any]) -> list[float]:
    return [loss for _, loss in s["losses"]]


def final_params(ckpt: Path) -> dict:
    """The final checkpoint's model tensors, read without a process group."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = ckpt.parent / f"{ckpt.name}.pt"
    dcp_to_torch_save(str(ckpt), str(out))
    state = torch.load(out, weights_only=False)
    return {k: v for k, v in state.items() if k.startswith("model")} or state


def assert_same(a: dict, b: dict) -> None:
    import torch

    flat_a, flat_b = _flatten(a), _flatten(b)
    assert flat_a.keys() == flat_b.keys()
    assert flat_a, "no tensors found"
    for k in flat_a:
        assert torch.equal(flat_a[k], flat_b[k]), k


def _flatten(d: dict, prefix: str = "") -> dict:
    import torch

    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[f"{prefix}{k}"] = v
    return out
