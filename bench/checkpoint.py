"""Checkpoint cost: how long training is blocked per checkpoint (sync vs --async-checkpoint),
how long until the checkpoint is complete, restore time, and the write rate next to this disk's
raw sequential write rate (os.write + fsync of the same number of bytes, measured in the same run).

    .venv/bin/python bench/checkpoint.py [--params-m 75] [--repeats 3] [--dir DIR] [--json OUT]

Runs the real CheckpointManager (DCP FileSystemWriter, gloo checkpoint group) in a 1-process
group, on an MLP with AdamW state so the checkpoint has the shape of a real one (params + two
moments). Between async saves it keeps training so the background write competes for the CPU
like it would in a run; it reports that step-time slowdown too.

The two ratios of the targets, measured in the same run:

* ``blocked_ratio``: async blocked time / sync blocked time (median over the saves after the
  first; the first async save also allocates the staging buffers and starts DCP's checkpoint
  process, reported on its own as ``first_blocked_s``);
* ``step_ratio``: median step time while an async write is in flight / median step time of the
  steps run just before each save, with nothing in flight.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainforge.training import checkpoint  # noqa: E402
from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager  # noqa: E402

# this script's code is under `if __name__ == "__main__"`: safe for DCP's spawned writer
checkpoint.WRITER_PROCESS = True


def build(params_m: float) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    width = 4096
    layers = max(1, round(params_m * 1e6 / (width * width + width)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    x = torch.randn(8, model[0].in_features)
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def raw_write(path: Path, nbytes: int, chunk: int = 64 << 20) -> float:
    """Seconds to write ``nbytes`` sequentially with os.write, then fsync (the disk's ceiling)."""
    buf = os.urandom(chunk)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, buf[: min(chunk, left)])
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--params-m", type=float, default=75.0, help="model size, millions of params")
    ap.add_argument("--repeats", type=int, default=3, help="checkpoints per mode")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir on /tmp)")
    ap.add_argument("--json", default=None, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    base = Path(args.dir or tempfile.mkdtemp(prefix="tf-ckpt-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    model, opt = build(args.params_m)
    train_step(model, opt)  # materialise AdamW state
    n_params = sum(p.numel() for p in model.parameters())
    quiet = lambda s: None  # noqa: E731

    t0 = time.perf_counter()
    for _ in range(3):
        train_step(model, opt)
    step_s = (time.perf_counter() - t0) / 3

    results: dict[str, object] = {
        "params_m": round(n_params / 1e6, 1),
        "model_mb": round(n_params * 4 / 2**20),
        "train_step_s": round(step_s, 3),
    }
    for mode in ("sync", "async"):
        root = base / mode
        shutil.rmtree(root, ignore_errors=True)
        cm = CheckpointManager(
            CheckpointConfig(directory=str(root), keep_last=1, async_save=mode == "async"),
            log=quiet,
        )
        blocked, total, steps_during, step_times, quiet_times = [], [], 0, [], []
        # one extra save first (async: buffers + checkpoint process), left out of the medians
        for i in range(0, args.repeats + 1):
            if mode == "async":
                for _ in range(2):  # steps with nothing in flight, just before the save
                    t1 = time.perf_counter()
                    train_step(model, opt)
                    quiet_times.append(time.perf_counter() - t1)
            rec = cm.save(i, model, opt)
            if mode == "async":
                n = 0
                while cm._pending is not None and not cm._pending.done():  # keep training
                    t1 = time.perf_counter()
                    train_step(model, opt)
                    if i:
                        step_times.append(time.perf_counter() - t1)
                    n += 1
                steps_during += n if i else 0
                cm.wait()
            if i == 0:
                first = rec
                continue
            blocked.append(rec.blocked_s)
            total.append(rec.total_s)
        cm.close()
        ckpt_bytes = dir_bytes(root / f"step_{args.repeats:06d}")
        results[mode] = {
            "blocked_s": round(statistics.median(blocked), 3),
            "complete_s": round(statistics.median(total), 3),
            "checkpoint_mb": round(ckpt_bytes / 2**20),
            "write_mb_s": round(ckpt_bytes / 2**20 / statistics.median(total)),
        }
        results[mode]["first_blocked_s"] = round(first.blocked_s, 3)
        results[mode]["first_complete_s"] = round(first.total_s or 0.0, 3)
        if mode == "async":
            results[mode]["train_steps_during_write"] = steps_during
            results[mode]["step_s_during_write"] = (
                round(statistics.median(step_times), 3) if step_times else None
            )
            results[mode]["step_s_nothing_in_flight"] = round(statistics.median(quiet_times), 3)

    # restore: fresh model and optimizer, newest checkpoint
    model2, opt2 = build(args.params_m)
    cm = CheckpointManager(CheckpointConfig(directory=str(base / "sync")), log=quiet)
    t0 = time.perf_counter()
    cm.restore(model2, opt2)
    restore_s = time.perf_counter() - t0
    ckpt_bytes = dir_bytes(base / "sync" / f"step_{args.repeats:06d}")
    results["restore_s"] = round(restore_s, 3)
    results["restore_mb_s"] = round(ckpt_bytes / 2**20 / restore_s)
    raw_s = raw_write(base / "raw.bin", ckpt_bytes)
    results["raw_write_s"] = round(raw_s, 3)
    results["raw_write_mb_s"] = round(ckpt_bytes / 2**20 / raw_s)
    (base / "raw.bin").unlink()
    dist.destroy_process_group()
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)

    sync, async_ = results["sync"], results["async"]
    results["blocked_ratio"] = round(async_["blocked_s"] / sync["blocked_s"], 3)
    results["step_ratio"] = (
        round(async_["step_s_during_write"] / async_["step_s_nothing_in_flight"], 2)
        if async_["step_s_during_write"]
        else None
    )
    results["load_average"] = round(os.getloadavg()[0], 1)
    print(json.dumps(results, indent=2))
    print(
        f"\n{results['params_m']}M params ({results['model_mb']} MB fp32), checkpoint "
        f"{sync['checkpoint_mb']} MB incl. AdamW state\n"
        f"  sync : training blocked {sync['blocked_s']:.2f}s, write {sync['write_mb_s']} MB/s\n"
        f"  async: training blocked {async_['blocked_s']:.2f}s, complete after "
        f"{async_['complete_s']:.2f}s ({async_['write_mb_s']} MB/s)\n"
        f"  raw os.write+fsync: {results['raw_write_mb_s']} MB/s   restore: "
        f"{results['restore_s']:.2f}s ({results['restore_mb_s']} MB/s)\n"
        f"  ratios: async blocked / sync = {results['blocked_ratio']} (target <= 0.10), "
        f"step during write / step = {results['step_ratio']} (target <= 1.5); "
        f"load {results['load_average']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
