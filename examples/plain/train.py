"""Plain PyTorch, no trainforge imports: your own argparse, process group, checkpoints, metrics.

What the platform gives any code (docs/jobs.md, "The contract for your code"), used directly:

* RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT -> `init_process_group("gloo"|"nccl")`;
* TRAINFORGE_CHECKPOINT_DIR: on the team's shared storage, kept across restarts. Rank 0
  saves `step_<N>.pt` there (written to a temporary name, then renamed: a file that exists is
  whole), and every rank resumes from the newest one, so a restarted job continues;
* TRAINFORGE_OUTPUT_DIR: where `metrics.jsonl` goes, one JSON line per log step, which
  `trainforge report` reads (the one line in `log_metrics`).

A lost peer (its pod killed, its node gone) makes the collective here raise; the platform runs
this file through its launcher, which exits with a retryable code for that, so the pods are
re-created and resume from the last checkpoint. A bug (an exception of your own) stops the job.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn


def latest_checkpoint(folder: Path) -> Path | None:
    found = sorted(folder.glob("step_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    return found[-1] if found else None


def log_metrics(out: Path, **values: float) -> None:
    # the one line that gives `trainforge report` its metrics panel:
    with open(out / "metrics.jsonl", "a") as f:
        f.write(json.dumps(values) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (rehearsals)")
    args = p.parse_args()

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the env
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt_dir = Path(os.environ.get("TRAINFORGE_CHECKPOINT_DIR", "checkpoints"))
    out_dir = Path(os.environ.get("TRAINFORGE_OUTPUT_DIR", "."))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    last = latest_checkpoint(ckpt_dir)
    if last is not None:
        state = torch.load(last, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = int(state["step"])
        print(f"[rank{rank}] resumed from {last.name} at step {step}", flush=True)

    g = torch.Generator().manual_seed(1)
    w_true = torch.randn(16, 1, generator=g)
    last_loss: float | None = None  # None: resumed at the last step, nothing left to train
    while step < args.steps:
        gen = torch.Generator().manual_seed(1000 * step + rank)  # the same data after a restart
        x = torch.randn(32, 16, generator=gen)
        loss = ((model(x) - x @ w_true) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        for param in model.parameters():  # data parallel by hand: average the gradients
            dist.all_reduce(param.grad)
            param.grad /= world
        opt.step()
        step += 1
        last_loss = loss.item()
        time.sleep(args.step_seconds)
        if rank == 0:
            log_metrics(out_dir, step=step, loss=last_loss)
            if step % args.save_every == 0 or step == args.steps:
                tmp = ckpt_dir / f".step_{step}.pt.tmp"
                torch.save(
                    {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                    tmp,
                )
                os.replace(tmp, ckpt_dir / f"step_{step}.pt")
                print(f"[rank0] saved step_{step}.pt", flush=True)
    dist.barrier()
    if rank == 0:
        trained = f"loss {last_loss:.4f}" if last_loss is not None else "nothing left to train"
        print(f"done: {step} steps, {trained}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
