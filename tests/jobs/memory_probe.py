"""Measure what one training step of the runtime allocates, per configuration (CPU, gloo).

Run as every rank of a job (tests/jobs/test_estimate_measured.py starts two):

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python tests/jobs/memory_probe.py OUT.json

For each configuration it builds the model, wraps and optimizes it exactly as the runtime does
(`build_model`, `parallelize`, `build_optimizer`, `loop.micro_step`), runs one warm-up step
(the optimizer creates its state lazily) and profiles the second step with PyTorch's profiler
(`profile_memory=True`). The CPU allocator reports every allocation and free to the profiler;
summing them in time order gives the bytes live at each moment, relative to the start of the
step. Markers (zero-length `record_function` ranges, from module hooks) name the moments the
memory model predicts. Parameter, gradient and optimizer bytes are read from the tensors.
Rank 0 writes the results as JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from trainforge.training.config import TrainConfig
from trainforge.training.distributed import cleanup, init_distributed
from trainforge.training.loop import build_optimizer, micro_step
from trainforge.training.models import build_model
from trainforge.training.parallel import parallelize, resolve_precision, unwrap

MARK = "MARK:"

# (name, TrainConfig overrides). Small enough for two ranks on two shared cores.
GPT = {"model": "gpt", "layers": 3, "d_model": 64, "heads": 4, "seq_len": 64, "vocab_size": 512}
CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("ddp-fp32", {**GPT, "strategy": "ddp", "batch_size": 8}),
    ("ddp-fp32-ac", {**GPT, "strategy": "ddp", "batch_size": 8, "activation_checkpointing": True}),
    ("ddp-bf16", {**GPT, "strategy": "ddp", "batch_size": 8, "precision": "bf16"}),
    ("fsdp-fp32", {**GPT, "strategy": "fsdp", "batch_size": 8}),
    (
        "fsdp-fp32-ac",
        {**GPT, "strategy": "fsdp", "batch_size": 8, "activation_checkpointing": True},
    ),
    ("fsdp-bf16", {**GPT, "strategy": "fsdp", "batch_size": 8, "precision": "bf16"}),
    ("mlp-ddp", {"model": "mlp", "strategy": "ddp", "batch_size": 256}),
    # odd sizes: FSDP2 pads dim 0 of 301-row tables to 151 rows per rank
    (
        "fsdp-odd-ac",
        {
            "model": "gpt",
            "layers": 2,
            "d_model": 48,
            "heads": 3,
            "seq_len": 40,
            "vocab_size": 301,
            "strategy": "fsdp",
            "batch_size": 6,
            "activation_checkpointing": True,
        },
    ),
]


def _mark(name: str) -> None:
    with record_function(MARK + name):
        pass


def _storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one bucket count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        local = t._local_tensor if hasattr(t, "_local_tensor") else t
        s = local.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def _timeline(prof: Any) -> list[tuple[str, int, int]]:
    """(marker, bytes live at it, peak since the previous marker), in time order, relative to
    the start of the profiled step. A marker may occur more than once (a checkpointed block's
    hooks run again when it is recomputed).

    What gloo allocates for its own use is left out, as the memory model leaves it out (NCCL
    works in the caller's buffers): the flat temporary a gloo worker thread allocates inside
    each all-gather, and the copy of its input that `c10d::_reduce_scatter_base_` makes for
    the worker. Their lifetimes depend on scheduling: the worker's temporary may or may not be
    alive when the training thread passes a marker, and the input copy is freed by whichever
    thread drops the finished work last (the training thread, seen by the profiler, or the
    worker, after the collective and unseen). Counted, they made about one run in five on a
    loaded two-core machine measure one extra ~100-200 KB buffer across later markers (CI
    failed on one)."""
    events: list[tuple[int, int, Any]] = []

    def walk(node: Any, in_c10d: bool) -> None:
        if node.typed[0] == _EventType.Allocation:
            alloc = node.typed[1]
            events.append(
                (node.start_time_ns, 0, (node.start_tid, alloc.alloc_size, alloc.ptr, in_c10d))
            )
        elif node.name.startswith(MARK):
            events.append((node.start_time_ns, 1, (node.start_tid, node.name[len(MARK) :])))
        in_c10d = in_c10d or node.name.startswith("c10d::")
        for child in node.children:
            walk(child, in_c10d)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, False)
    events.sort(key=lambda e: (e[0], e[1]))
    training_thread = {payload[0] for _, kind, payload in events if kind == 1}
    assert len(training_thread) == 1, f"markers on several threads: {training_thread}"
    gloos: set[int] = set()  # addresses of live allocations left out
    live = peak = 0
    marks: list[tuple[str, int, int]] = []
    for _, kind, payload in events:
        if kind == 1:
            marks.append((payload[1], live, peak))
            peak = live
            continue
        tid, size, ptr, in_c10d = payload
        if size > 0:
            # An address is reused once freed, and some of gloo's frees are never seen.
            if in_c10d or tid not in training_thread:
                gloos.add(ptr)
                continue
            gloos.discard(ptr)
        elif ptr in gloos:
            gloos.discard(ptr)
            continue
        if tid in training_thread:
            live += size
            peak = max(peak, live)
    return marks


def measure(name: str, overrides: dict[str, Any], env: Any) -> dict[str, Any]:
    cfg = TrainConfig(**overrides)
    dtype = resolve_precision(cfg, env.device)
    model = parallelize(build_model(cfg), cfg, env, dtype)
    raw = unwrap(model)
    optimizer = build_optimizer(model, cfg, env.device)
    g = torch.Generator().manual_seed(1 + env.rank)
    if cfg.model == "gpt":
        x = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g)
        y = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g)
    else:
        x = torch.randn(cfg.batch_size, 784, generator=g)
        y = torch.randint(0, 10, (cfg.batch_size,), generator=g)

    def step() -> None:
        _mark("start")
        loss = micro_step(model, (x, y), True, cfg, env.device, dtype)
        _mark("after_backward")
        optimizer.step()
        _mark("after_optimizer")
        optimizer.zero_grad(set_to_none=True)
        _mark("after_zero_grad")
        del loss

    hooks = [
        raw.blocks[0].register_forward_pre_hook(lambda *_: _mark("before_blocks")),
        raw.blocks[-1].register_forward_hook(lambda *_: _mark("after_blocks")),
        raw.blocks[-1].register_full_backward_pre_hook(lambda *_: _mark("last_block_backward")),
    ]
    if hasattr(raw, "head"):
        hooks.append(raw.head.register_forward_hook(lambda *_: _mark("after_head")))
        hooks.append(raw.head.register_full_backward_pre_hook(lambda *_: _mark("head_backward")))
    # Warm-up: AdamW creates its state in step 1, DDP rebuilds its buckets in step 2. Steps
    # 2 and 3 are profiled and step 3 is measured, so that whatever step 2 leaves for step 3
    # to free (FSDP's last all-gather output) is seen being freed.
    step()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
        step()
        # Every collective finished on both ranks before profiling stops (gloo's worker
        # threads carry the profiler's thread-local state while they run one).
        dist.barrier()
    for h in hooks:
        h.remove()
    marks = _timeline(prof)
    last = max(i for i, m in enumerate(marks) if m[0] == "start")
    base = marks[last][1]
    marks = [(name, live - base, peak - base) for name, live, peak in marks[last:]]
    # Gradients exist between backward and zero_grad: take them from one more backward.
    micro_step(model, (x, y), True, cfg, env.device, dtype)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    blocks = [sum(p.numel() for p in b.parameters()) for b in raw.blocks]
    matrices = [sum(p.numel() for p in b.parameters() if p.dim() == 2) for b in raw.blocks]
    out = {
        "name": name,
        "block_params": blocks,
        "block_matrix_params": matrices,
        "config": dataclasses.asdict(cfg),
        "world_size": env.world_size,
        "parameters_bytes": _storage_bytes(list(model.parameters())),
        "gradients_bytes": _storage_bytes(grads),
        "optimizer_bytes": _storage_bytes(state),
        "marks": marks,
    }
    optimizer.zero_grad(set_to_none=True)
    return out


def _uses(t: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


def _settled(collective: Callable[..., Any]) -> Callable[..., Any]:
    """`collective` that, called blocking, returns once gloo's worker has let go of the
    caller's tensors.

    The worker holds the finished work, and through it the collective's tensors, until a
    moment after the training thread was told it is done. When FSDP2 has by then dropped its
    own reference (it frees an all-gather output once copied out), the worker's late drop
    frees the buffer, unseen by the profiler, at a moment that depends on scheduling: under
    load, about one run in ten measured an all-gather output alive across later markers.
    NCCL has no such thread. Waiting here until each tensor's storage is back to the
    references it had before the call makes every run's timeline the same; it changes when
    the training thread goes on, never what it allocates."""

    def call(*args: Any, async_op: bool = False, **kwargs: Any) -> Any:
        if async_op:
            return collective(*args, async_op=True, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        before = [_uses(t) for t in tensors]
        work = collective(*args, async_op=True, **kwargs)
        if work is not None:
            work.wait()
        del work
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            _uses(t) > n for t, n in zip(tensors, before, strict=True)
        ):
            time.sleep(0.0002)
        return None

    return call


def main(path: str) -> int:
    torch.set_num_threads(1)
    # FSDP2 (torch 2.13) calls these through the `torch.distributed` module at every
    # collective, blocking on CPU.
    dist.all_gather_single = _settled(dist.all_gather_single)
    dist.reduce_scatter_single = _settled(dist.reduce_scatter_single)
    env = init_distributed()
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    results = []
    try:
        for name, overrides in CONFIGS:
            if only and name not in only:
                continue
            results.append(measure(name, overrides, env))
            dist.barrier()
    finally:
        cleanup()
    if env.rank == 0:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main(sys.argv[1]))
