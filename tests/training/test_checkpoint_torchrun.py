"""End to end under torchrun (2 gloo workers, --max-restarts): a worker killed with SIGKILL, a
SIGTERM, and a crash while a checkpoint is written all end in a completed job whose final
parameters equal an uninterrupted run's bit for bit.

The trainer is the small script at the bottom of this file wired exactly like the runtime's loop
(``Checkpointing.restore / after_step / finish`` and the restart-safe process-group store), so
this file tests the checkpoint layer under real torchrun restarts independent of the runtime's
flags. Faults come from the test hooks (docs/checkpointing.md): the chosen rank sends itself the
signal right after a given step, on the first attempt only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30
EVERY = 10


def torchrun(
    workdir: Path, strategy: str, *extra: str, env: dict[str, str] | None = None, restarts: int = 2
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc-per-node", "2", "--max-restarts", str(restarts), __file__]
    cmd += [
        "--strategy",
        strategy,
        "--steps",
        str(STEPS),
        "--checkpoint-dir",
        str(workdir / "ckpt"),
    ]
    cmd += ["--checkpoint-every", str(EVERY), *extra]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    full_env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300)


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


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict]:
    """Uninterrupted runs, one per strategy, computed once."""
    refs = {}
    for strategy in ("ddp", "fsdp"):
        work = tmp_path_factory.mktemp(f"ref-{strategy}")
        proc = torchrun(work, strategy, restarts=0)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        refs[strategy] = final_params(work / "ckpt" / f"step_{STEPS:06d}")
    return refs


def _logs(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def test_kill9_worker_restarts_and_matches_uninterrupted(tmp_path: Path, reference) -> None:
    proc = torchrun(tmp_path, "ddp", env={"TRAINFORGE_TEST_FAULT": "1:17:KILL"})
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "sends itself SIGKILL after step 17" in logs
    assert "resumed from" in logs and "step_000010 at step 10" in logs
    assert_same(reference["ddp"], final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))


def test_sigterm_checkpoints_exits_and_resume_continues(tmp_path: Path, reference) -> None:
    proc = torchrun(tmp_path, "fsdp", env={"TRAINFORGE_TEST_FAULT": "1:15:TERM"})
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "stop requested (another rank)" in logs  # rank 0 was not signalled but agreed
    assert "step_000016 (preemption)" in logs
    assert "exiting with code 143" in logs
    assert "step_000016 at step 16" in logs  # agreed one step later, then resumed there
    assert_same(reference["fsdp"], final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))


def test_crash_while_writing_checkpoint_resumes_from_previous(tmp_path: Path, reference) -> None:
    env = {"TRAINFORGE_TEST_CRASH_DURING_SAVE": "20"}
    proc = torchrun(tmp_path, "ddp", "--async-checkpoint", env=env)
    logs = _logs(proc)
    assert proc.returncode == 0, logs[-4000:]
    assert "step_000020: no .metadata" in logs
    assert "step_000010 at step 10" in logs
    assert_same(reference["ddp"], final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))


# ---------------------------------------------------------------------- the trainer under test


def _train() -> int:
    import argparse

    import torch
    import torch.distributed as dist

    from trainforge.training.checkpoint import (
        Checkpointing,
        add_checkpoint_arguments,
        config_from_args,
    )
    from trainforge.training.preemption import PREEMPTED_EXIT_CODE, restart_safe_init_kwargs

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--strategy", choices=["ddp", "fsdp"], required=True)
    add_checkpoint_arguments(p)
    args = p.parse_args()
    dist.init_process_group("gloo", **restart_safe_init_kwargs())
    rank = dist.get_rank()
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 4)
    )
    if args.strategy == "ddp":
        m = torch.nn.parallel.DistributedDataParallel(m)
    else:
        from torch.distributed.fsdp import fully_shard

        fully_shard(m[0])
        fully_shard(m[3])
        fully_shard(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 8))
    torch.manual_seed(100 + rank)  # dropout stream per rank: restored from the checkpoint

    def log(msg: str) -> None:
        print(f"[rank{rank}] {msg}", flush=True)

    ckpt = Checkpointing(config_from_args(args), log=log)
    start = ckpt.restore(m, opt, sched)
    for step in range(start, args.steps):
        g = torch.Generator().manual_seed(10_000 * step + rank)  # data = f(step, rank)
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)
        ((m(x) - y) ** 2).mean().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        if ckpt.after_step(step + 1, m, opt, sched):
            dist.destroy_process_group()
            return PREEMPTED_EXIT_CODE
    ckpt.finish(args.steps, m, opt, sched)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(_train())
