"""The final agreement check: do the ranks hold one consistent model?

Why digests of each rank's *own* memory: comparing values every rank computed from the same
gathered data (``full_tensor()`` under FSDP) can never fail. What each rank can vouch for is
what it holds itself:

* DDP: every rank holds a full replica; each replica's digest must equal rank 0's.
* FSDP (``fully_shard``, one ``Shard(0)`` placement over the world): each rank holds one shard
  of each parameter. Every rank gathers the full parameters and digests the slice that belongs
  to each rank (the view its forward pass used), then digests its own local shard. All ranks
  must have gathered the same views, and each rank's own shard must equal the slice its peers
  gathered for it.
* Anything not sharded (buffers, and parameters under DDP) is a replica: equal on every rank.

What this cannot see (said in docs/reliability.md): under FSDP a shard has no second copy, so
a shard corrupted *before* the final gather is gathered corrupted by everyone, consistently.

A digest is exact: two integer checksums of the tensor's bit patterns (plain and position-
weighted), so any changed value changes it; computed on the tensor's device, only the two
integers are moved to the host.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

Digest = tuple[str, tuple[int, ...], int, int]
_INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def tensor_digest(t: torch.Tensor) -> Digest:
    """(dtype, shape, sum of bit patterns, position-weighted sum): equal iff (practically)
    the same values, bit for bit."""
    t = t.detach().contiguous()
    shape = tuple(int(s) for s in t.shape)
    if t.numel() == 0:
        return (str(t.dtype), shape, 0, 0)
    flat = t.reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    bits = flat.view(_INT_OF_WIDTH[flat.element_size()]).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
    return (str(t.dtype), shape, int(bits.sum()), int((bits * weights).sum()))


def shard_slices(full: torch.Tensor, world: int) -> list[torch.Tensor]:
    """The slice of dim 0 each rank holds under ``Shard(0)`` (torch.chunk sizes: ceil(n/world)
    rows each, the last ranks' slices short or empty)."""
    n = full.shape[0] if full.dim() else 1
    size = -(-n // world)
    return [full.narrow(0, min(r * size, n), max(0, min(size, n - r * size))) for r in range(world)]


def _sharded_over_world(t: Any, world: int) -> bool:
    placements = getattr(t, "placements", None)
    mesh = getattr(t, "device_mesh", None)
    if not placements or mesh is None or len(placements) != 1 or mesh.size() != world:
        return False
    p = placements[0]
    return bool(p.is_shard()) and getattr(p, "dim", None) == 0


@dataclasses.dataclass
class Agreement:
    agree: bool
    problems: list[str]
    checked: int  # tensors compared

    @property
    def detail(self) -> str:
        shown = "; ".join(self.problems[:3])
        more = f" (and {len(self.problems) - 3} more)" if len(self.problems) > 3 else ""
        return f"ranks disagree on the final parameters: {shown}{more}"


def check(model: nn.Module, rank: int, world: int, before_local: Any = None) -> Agreement:
    """Collective (every rank, same order). `before_local(tensors)` runs after the gathered
    views are read and before this rank digests its own memory (the test hook, faults.py)."""
    named: list[tuple[str, Any]] = list(model.named_parameters())
    named += [(f"buffer {n}", b) for n, b in model.named_buffers()]
    views: dict[str, list[Digest]] = {}
    own: dict[str, torch.Tensor] = {}
    for name, p in named:
        t = p.detach()
        if hasattr(t, "full_tensor"):
            full = t.full_tensor()  # a collective: the same order on every rank
            if _sharded_over_world(t, world):
                views[name] = [tensor_digest(s) for s in shard_slices(full, world)]
            else:
                views[name] = [tensor_digest(full)]
            t = t.to_local()
        own[name] = t
    if before_local is not None:
        before_local(own)
    mine = {name: tensor_digest(t) for name, t in own.items()}
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, (mine, views))
    return compare(gathered)


def compare(gathered: list[tuple[dict[str, Digest], dict[str, list[Digest]]]]) -> Agreement:
    """The verdict from every rank's (own digests, gathered views); pure, for the tests."""
    problems: list[str] = []
    own0, views0 = gathered[0]
    for name in own0:
        if name in views0:
            for r, (_own, views) in enumerate(gathered):
                if views.get(name) != views0[name]:
                    problems.append(f"{name}: rank {r} gathered other values than rank 0")
            sliced = len(views0[name]) == len(gathered)
            for r, (own, _) in enumerate(gathered):
                if sliced and own.get(name) != views0[name][r]:
                    problems.append(
                        f"{name}: rank {r}'s own shard differs from the copy its peers gathered"
                    )
        else:
            for r, (own, _) in enumerate(gathered):
                if own.get(name) != own0[name]:
                    problems.append(f"{name}: rank {r}'s replica differs from rank 0's")
    return Agreement(not problems, problems, len(own0))
