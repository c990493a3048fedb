"""Your own training loop with trainforge's pieces: resumable, preemptible, observable.

The same model and data as examples/mnist/train.py, plus what the bundled runtime does for
its own loop, imported from `trainforge.training` without adopting that loop:

* `init_distributed()`: the process group from the contract's RANK/WORLD_SIZE/... (gloo on
  CPU, NCCL on GPUs), safe across torchrun restarts;
* `CheckpointManager.from_env()`: DCP checkpoints in TRAINFORGE_CHECKPOINT_DIR, atomic step
  directories, keep-last, resume from the newest complete one, the S3 mirror when the job
  has one;
* `PreemptionHandler.from_env()`: SIGTERM (pod deletion, spot interruption) -> every rank
  stops at the same step -> checkpoint -> exit 143 within TRAINFORGE_GRACE_PERIOD;
* `MetricsReporter.from_env()`: loss on the job's metrics port, metrics.jsonl and MLflow;
* `Watchdog.from_env()`: a step that hangs (a stuck collective, a dead file system) ends the
  process with the stack of every thread, a flight-recorder dump and exit 201 after
  max(10 x recent step time, the job's hangTimeout), so the job restarts from its checkpoint.

Resuming mid-epoch: the checkpoint stores the optimizer step; epoch and position follow from
it (`divmod(step, steps_per_epoch)`), and DistributedSampler's order depends only on the epoch,
so a resumed run sees exactly the batches the interrupted one would have. Synthetic data, as
in examples/mnist (pods and CI cannot download MNIST).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from trainforge.training import (
    CheckpointManager,
    MetricsReporter,
    PreemptionHandler,
    Watchdog,
    cleanup_distributed,
    init_distributed,
    job_env,
)
from trainforge.training.state_layout import describe


class SyntheticMNIST(Dataset):
    """MNIST-shaped samples (1x28x28 floats, label 0-9), the same on every rank (seeded)."""

    def __init__(self, size: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(size, 1, 28, 28, generator=g)
        projection = torch.randn(28 * 28, 10, generator=g)
        self.labels = (self.images.flatten(1) @ projection).argmax(dim=1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[idx], self.labels[idx]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=128, help="width of the hidden layer")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--log-every", type=int, default=10)
    return p


def build_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def state_layout(argv: list[str]) -> dict[str, list]:
    """The job's `checkpoint.fingerprint` (train:state_layout): the checkpoint's keys, shapes
    and dtypes for these arguments, built on the meta device (no weights). `trainforge plan
    --diff` compares it between base and head: a changed --hidden cannot resume."""
    args = parser().parse_args(argv)
    with torch.device("meta"):
        model = build_model(args.hidden)
    return describe(model, torch.optim.Adam(model.parameters(), lr=args.lr))


def main() -> int:
    args = parser().parse_args()

    env = init_distributed()
    log = lambda msg: print(f"[rank{env.rank}] {msg}", flush=True)  # noqa: E731
    ckpt = CheckpointManager.from_env(log=log)
    stop = PreemptionHandler.from_env(log=log)
    watchdog = Watchdog.from_env(log=log).start()

    torch.manual_seed(0)  # the same initial weights on every rank
    model = build_model(args.hidden)
    model = DDP(
        model.to(env.device), device_ids=[env.local_rank] if env.device.type == "cuda" else None
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    dataset = SyntheticMNIST(args.samples)
    sampler = DistributedSampler(dataset, env.world_size, env.rank, shuffle=True, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    total_steps = args.epochs * steps_per_epoch
    # total_steps: trainforge_progress, which the stall alert needs to tell a run unfinished
    metrics = MetricsReporter.from_env(params=vars(args), total_steps=total_steps)

    step = ckpt.restore(model, optimizer)  # 0 on a fresh start
    if env.rank == 0:
        print(
            f"training steps {step}..{total_steps} on {env.world_size} x {env.device}", flush=True
        )
    while step < total_steps:
        epoch, skip = divmod(step, steps_per_epoch)
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if i < skip:
                continue  # already trained before the restart
            with watchdog.step(step + 1):
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(x.to(env.device)), y.to(env.device))
                loss.backward()
                optimizer.step()
            step += 1
            if step % args.log_every == 0:
                metrics.log(step, loss=loss.item(), epoch=epoch)
            # Every rank, every step, in this order: the stop agreement, then the schedule.
            if stop.should_stop():  # SIGTERM somewhere: save this step, exit 143
                save = partial(
                    ckpt.save, step, model, optimizer, reason="preemption", force_sync=True
                )
                code = stop.shutdown(save)
                ckpt.close()
                watchdog.close()
                return code
            if ckpt.should_save(step):
                with watchdog.section("checkpoint", step=step):
                    ckpt.save(step, model, optimizer)
            if step == total_steps:
                break

    if ckpt.last_started_step != step:
        ckpt.save(step, model, optimizer, reason="final", force_sync=True)
    ckpt.close()
    stop.close()
    metrics.close()
    watchdog.close()
    if env.rank == 0:
        out = Path(job_env().output_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), out / "model.pt")
        print(f"saved {out / 'model.pt'} after step {step}", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    cleanup_distributed()
    sys.exit(code)
