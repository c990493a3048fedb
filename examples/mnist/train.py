"""A plain seed-style DDP script: no trainforge imports, only the job contract's environment.

The shape of seed 003's `train_ddp.py` (Kubeflow PyTorchJob): read RANK / WORLD_SIZE /
LOCAL_RANK / MASTER_ADDR / MASTER_PORT, init the process group, DistributedSampler, DDP,
rank-0 save. Declared in Pulumi.dev.yaml as job `mnist-user`:

    entrypoint: {script: examples/mnist/train.py, args: ["--epochs", "1"]}

and debugged on a laptop first with `python -m trainforge run-local --stack dev mnist-user`.

The data is synthetic and MNIST-shaped (28x28 images, 10 classes, labels a fixed function of
the pixels so the loss falls): pods and CI have no internet access to download MNIST. Put the
real data set on a volume of the job (`volumes:`) and read it from there instead.

Where things go (the contract, docs/jobs.md): the model is saved by rank 0 to
TRAINFORGE_OUTPUT_DIR (the job's directory on the team's storage); the code directory itself
is read-only in the pod.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


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


class SimpleNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def setup_distributed() -> tuple[int, int, int, torch.device]:
    """The seed's setup: the operator (or torchrun) sets these; defaults run one process."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size)
    return rank, world_size, local_rank, device


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    args = p.parse_args()

    rank, world_size, local_rank, device = setup_distributed()
    print(f"rank {rank}/{world_size} (local rank {local_rank}) on {device}", flush=True)

    torch.manual_seed(0)  # the same initial weights on every rank
    model = SimpleNN().to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    dataset = SyntheticMNIST(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(
        dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.num_workers
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
        model.train()
        total = torch.zeros(2, device=device)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = criterion(model(data), target)
            loss.backward()
            optimizer.step()
            n = torch.tensor(float(len(target)), device=device)
            total += torch.stack([loss.detach() * n, n])
        dist.all_reduce(total)  # the mean over every sample of every rank
        if rank == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}", flush=True)

    if rank == 0:
        out = Path(os.environ.get("TRAINFORGE_OUTPUT_DIR", "runs/mnist"))
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), out / "model.pt")
        print(f"saved {out / 'model.pt'}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
