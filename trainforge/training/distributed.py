"""Process-group setup from the environment torchrun and the Kubeflow training operator set.

torchrun (and the operator for one process per pod) sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
RANK, LOCAL_RANK, LOCAL_WORLD_SIZE; we initialise with ``env://``. With none of them set the
runtime is a single process, but it still gets a 1-rank process group (an in-memory store) so
DDP, FSDP2 and DCP checkpointing run the same code path everywhere.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from typing import Any

import torch
import torch.distributed as dist

# The operator's PET_* variables are torchrun's own flags (PET_NNODES, PET_NODE_RANK, ...) and
# are consumed by torchrun; when a pod runs the runtime directly they mirror the plain ones.
_FALLBACKS = {"WORLD_SIZE": "PET_NNODES", "RANK": "PET_NODE_RANK"}


@dataclasses.dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None and name in _FALLBACKS:
        raw = os.environ.get(_FALLBACKS[name])
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RuntimeError(f"environment variable {name}={raw!r} is not an integer") from None


# The collective timeout the default group was created with; side groups (checkpointing,
# preemption agreement) use the same one, so every wait of a rank gives up together
# (timeouts.py). torch's new_group would otherwise default to 30 minutes for gloo.
_GROUP_TIMEOUT: datetime.timedelta | None = None


def group_timeout() -> datetime.timedelta | None:
    """The timeout for ``dist.new_group``; None (torch's default) outside init_distributed."""
    return _GROUP_TIMEOUT


def restart_safe_init_kwargs() -> dict[str, Any]:
    """Extra ``init_process_group`` kwargs that make torchrun restarts work (empty otherwise).

    torchrun (2.13, c10d rendezvous) hands every restart attempt the *same* agent TCPStore
    with no per-attempt key prefix, so the new workers read the dead attempt's gloo/NCCL
    connection keys and fail with "Gloo connectFullMesh failed ... Connection refused".
    Prefixing the store with TORCHELASTIC_RESTART_COUNT gives each attempt clean keys.
    """
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None or "MASTER_ADDR" not in os.environ:
        return {}
    from torch.distributed.rendezvous import rendezvous

    store, rank, world_size = next(rendezvous("env://"))
    return {
        "store": dist.PrefixStore(f"trainforge/attempt_{attempt}", store),
        "rank": rank,
        "world_size": world_size,
    }


def init_distributed(timeout_s: float | None = None) -> DistEnv:
    """Initialise the default process group; NCCL when CUDA is present, gloo otherwise.

    ``timeout_s`` bounds every collective and the process-group setup (the ``env://`` store
    connection). Default: derived from the job's hang timeout (the contract's
    TRAINFORGE_HANG_TIMEOUT, 300 s when unset: 960 s), which also sets NCCL's error handling,
    heartbeat and flight recorder variables this process has not set itself, so that every
    wait of the job gives up in the order docs/reliability.md describes."""
    global _GROUP_TIMEOUT
    if timeout_s is None:
        from trainforge.training.contract import job_env  # noqa: PLC0415
        from trainforge.training.timeouts import Timeouts, apply_env  # noqa: PLC0415

        derived = Timeouts.from_hang_timeout(job_env().hang_timeout)
        apply_env(derived)
        timeout_s = derived.collective
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    local_world_size = _env_int("LOCAL_WORLD_SIZE", 1 if world_size == 1 else world_size)
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"LOCAL_RANK={local_rank} but only {torch.cuda.device_count()} GPU(s) are visible; "
                "run one process per GPU (torchrun --nproc-per-node = GPUs per node)"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        # fp32 matmuls on tensor cores (TF32) for --precision fp32 runs; bf16 is unaffected
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    _GROUP_TIMEOUT = timeout
    if not dist.is_initialized():
        if "MASTER_ADDR" in os.environ:
            # checkpoint hook: torchrun restarts need a per-attempt store prefix
            kwargs = restart_safe_init_kwargs()
            if kwargs:
                dist.init_process_group(backend, timeout=timeout, **kwargs)
            else:
                dist.init_process_group(
                    backend, init_method="env://", rank=rank, world_size=world_size, timeout=timeout
                )
        elif world_size == 1:
            dist.init_process_group(
                backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout
            )
        else:
            raise RuntimeError(
                f"WORLD_SIZE={world_size} but MASTER_ADDR/RANK are not set; launch with torchrun "
                "or `trainforge run-local --workers N`"
            )
    return DistEnv(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        local_world_size=local_world_size,
        device=device,
        backend=backend,
    )


def cleanup() -> None:
    global _GROUP_TIMEOUT
    _GROUP_TIMEOUT = None
    if dist.is_initialized():
        dist.destroy_process_group()
