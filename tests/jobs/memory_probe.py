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

    Only the training thread's allocations count. Gloo's worker threads allocate a flat
    temporary inside each all-gather and free it before the collective completes; with
    FSDP2's prefetch that temporary may or may not be alive when the training thread passes a
    marker, depending on how the two threads were scheduled (the test failed on a loaded CI
    machine by exactly one such buffer). It is an artifact of gloo on CPU (NCCL gathers in
    place) that the memory model rightly leaves out."""
    events: list[tuple[int, int, Any]] = []

    def walk(node: Any) -> None:
        if node.typed[0] == _EventType.Allocation:
            events.append((node.start_time_ns, 0, (node.start_tid, node.typed[1].alloc_size)))
        elif node.name.startswith(MARK):
            events.append((node.start_time_ns, 1, (node.start_tid, node.name[len(MARK) :])))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    events.sort(key=lambda e: (e[0], e[1]))
    training_thread = {tid for _, kind, (tid, _) in events if kind == 1}
    assert len(training_thread) == 1, f"markers on several threads: {training_thread}"
    live = peak = 0
    marks: list[tuple[str, int, int]] = []
    for _, kind, (tid, value) in events:
        if tid not in training_thread:
            continue
        if kind == 0:
            live += value
            peak = max(peak, live)
        else:
            marks.append((value, live, peak))
            peak = live
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


def main(path: str) -> int:
    torch.set_num_threads(1)
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
