"""Functions a user would hand to `TrainingJob.function` (the tests ship them with pyfunction).

`train` is seed 002's shape (the Kubeflow SDK's CustomTrainer): it initialises its own process
group from the environment, wraps a model in DDP, and rank 0 writes what it saw.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch
import torch.distributed as dist

from tests.jobs import helpers

HIDDEN = 16
DEFAULT_STEPS = 5


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def _out_dir() -> Path:
    return Path(os.environ["TRAINFORGE_OUTPUT_DIR"])


def train(steps: int = DEFAULT_STEPS, tag: str = "run") -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(TinyNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        opt.step()
    ranks = torch.tensor([float(rank)])
    dist.all_reduce(ranks)
    if rank == 0:
        out = _out_dir()
        out.mkdir(parents=True, exist_ok=True)
        text = f"world={world} ranksum={int(ranks.item())} steps={steps}\n"
        (out / f"{tag}.txt").write_text(text)
    dist.destroy_process_group()


# --- what cannot be shipped ---------------------------------------------------------------------

GLOBAL_TENSOR = torch.zeros(3)


def uses_a_tensor() -> float:
    return float(GLOBAL_TENSOR.sum())


def make_closure():  # noqa: ANN201
    scale = 2

    def inner() -> int:
        return scale

    return inner


def uses_a_project_module() -> str:
    return helpers.K8S_VERSION


def traced(fn):  # noqa: ANN001, ANN201
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return fn(*args, **kwargs)

    return wrapper


@traced
def decorated() -> int:
    return 1


async def asynchronous() -> None:
    return None
