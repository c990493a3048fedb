"""Seeded initialisation that gives every rank its own part of the same model.

Why: the runtime builds the model on the meta device (nothing allocated), shards it (FSDP2)
or keeps it whole (DDP), then allocates each rank's part on its device (``to_empty``) and
initialises it there (the order torchtitan's trainer uses: ``torch.device("meta")``,
parallelize, ``model.to_empty(device=...)``, ``model.init_weights()``; torchtitan/train.py,
read 2026-11-27). A rank must never hold the whole model on the host, and yet every rank,
strategy and world size must start from the same weights, or a 2-rank FSDP job, a 2-rank DDP
job and a 1-process run of one seed would train different models.

The scheme: each parameter's full tensor is cut along dim 0 into fixed blocks of rows
(``rows_per_block``, about ``BLOCK_ELEMENTS`` values each; it depends on the parameter's shape
only). Block ``k`` of parameter ``name`` is drawn by its own generator, seeded from
``(seed, name, k)``. A rank draws only the blocks that overlap the rows it holds (FSDP2's
``Shard(0)``: ``torch.chunk`` rows) and keeps the overlap, so its host or device memory stays
at its shard plus at most one block (4 MiB of fp32), and the values of any row do not depend
on who draws it.

Generators live on the parameter's device (the CPU's for a CPU job, the GPU's for a GPU job):
the same seed gives bit-identical weights for every strategy and world size on one kind of
device. CPU and CUDA (and GPU models whose SM counts differ: CUDA's random kernels size
their grid from it) draw different streams.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import torch
from torch import nn

# Values per block: 1 Mi (4 MiB of fp32). Small enough to be a constant next to any shard
# worth sharding, large enough that a 70B model is ~67k generator seedings in all.
BLOCK_ELEMENTS = 1 << 20


@dataclasses.dataclass(frozen=True)
class Init:
    """How one parameter starts: ``normal`` (a = mean, b = std), ``uniform`` (a = low,
    b = high) or ``constant`` (a = value)."""

    kind: str
    a: float = 0.0
    b: float = 0.0

    @staticmethod
    def normal(mean: float, std: float) -> Init:
        return Init("normal", mean, std)

    @staticmethod
    def uniform(low: float, high: float) -> Init:
        return Init("uniform", low, high)

    @staticmethod
    def constant(value: float) -> Init:
        return Init("constant", value)


def rows_per_block(shape: tuple[int, ...]) -> int:
    """Rows of dim 0 per generator block: a function of the full shape only."""
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    return max(1, BLOCK_ELEMENTS // max(1, row))


def block_seed(seed: int, name: str, block: int) -> int:
    """The generator seed of one block: a stable hash of (seed, parameter name, block)."""
    digest = hashlib.blake2b(f"{seed}/{name}/{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def local_rows(p: torch.Tensor) -> tuple[torch.Tensor, int, tuple[int, ...]]:
    """(this rank's tensor, its first row in the full tensor, the full shape).

    A plain tensor is the whole parameter. A DTensor must be FSDP2's layout, one ``Shard(0)``
    over a 1-D mesh (torch.chunk rows: ``ceil(rows / world)`` per rank, the last ones short or
    empty); anything else is refused rather than initialised wrongly."""
    full = tuple(int(s) for s in p.shape)
    placements = getattr(p, "placements", None)
    if placements is None:
        return p, 0, full
    from torch.distributed.tensor import Shard  # noqa: PLC0415

    mesh = p.device_mesh
    if mesh.ndim != 1 or len(placements) != 1 or placements[0] != Shard(0):
        raise ValueError(f"cannot initialise a DTensor placed as {placements} on {mesh}")
    local = p.to_local()
    rows = full[0] if full else 1
    size = -(-rows // mesh.size())
    start = min(mesh.get_local_rank() * size, rows)
    expected = max(0, min(size, rows - start))
    got = local.shape[0] if local.dim() else 1
    if got != expected:
        raise ValueError(f"local shard of {got} rows, expected {expected} (rows {rows})")
    return local, start, full


def _draw(out: torch.Tensor, init: Init, seed: int) -> None:
    g = torch.Generator(device=out.device).manual_seed(seed)
    if init.kind == "normal":
        out.normal_(init.a, init.b, generator=g)
    elif init.kind == "uniform":
        out.uniform_(init.a, init.b, generator=g)
    else:
        raise ValueError(f"unknown initialisation {init.kind!r}")


def fill(local: torch.Tensor, start: int, full: tuple[int, ...], name: str, init: Init,
         seed: int) -> None:  # fmt: skip
    """Write rows ``start..start+len(local)`` of parameter ``name``'s full seeded tensor into
    ``local``, drawing only the blocks that overlap them."""
    if init.kind == "constant":
        local.fill_(init.a)
        return
    view = local if local.dim() else local.view(1)  # a view: writes land in the parameter
    n = view.shape[0]
    if n == 0:
        return
    rows = full[0] if full else 1
    per = rows_per_block(full)
    end = start + n
    for k in range(start // per, -(-end // per)):
        b0, b1 = k * per, min((k + 1) * per, rows)
        lo, hi = max(b0, start), min(b1, end)
        s = block_seed(seed, name, k)
        if lo == b0 and hi == b1:  # the whole block is ours: draw it in place
            _draw(view[lo - start : hi - start], init, s)
        else:
            block = torch.empty((b1 - b0, *full[1:]), dtype=local.dtype, device=local.device)
            _draw(block, init, s)
            view[lo - start : hi - start].copy_(block[lo - b0 : hi - b0])
            del block


def specs(model: nn.Module) -> dict[str, Init]:
    """The model's ``init_specs()``: one ``Init`` per parameter name, every one covered."""
    declared = model.init_specs()
    names = {n for n, _ in model.named_parameters()}
    missing, extra = sorted(names - declared.keys()), sorted(declared.keys() - names)
    if missing or extra:
        raise ValueError(
            f"{type(model).__name__}.init_specs() does not match its parameters: "
            f"missing {missing}, unknown {extra}"
        )
    return declared


@torch.no_grad()
def init_weights(model: nn.Module, seed: int) -> None:
    """Initialise every parameter of ``model`` (plain or FSDP2-sharded, on any device but
    meta) from ``seed`` with the scheme above, then recompute its buffers
    (``init_buffers()``, when the model has any: ``to_empty`` leaves them garbage)."""
    declared = specs(model)
    for name, p in model.named_parameters():
        local, start, full = local_rows(p)
        fill(local, start, full, name, declared[name], seed)
    if hasattr(model, "init_buffers"):
        model.init_buffers()


def on_meta(model: nn.Module) -> bool:
    """Whether the model's parameters are still unallocated (built under ``torch.device("meta")``)."""
    return any(p.is_meta for p in model.parameters())


def materialize(model: nn.Module, device: torch.device, seed: int) -> nn.Module:
    """Allocate a meta-built (and possibly already sharded) model's parameters and buffers on
    ``device`` and initialise them from ``seed``: after ``fully_shard``, each rank allocates
    and draws its own shard only."""
    model.to_empty(device=device)
    init_weights(model, seed)
    return model
