"""Where one training step's GPU time goes, bf16 against FP8, on the runtime's own model.

    .venv/bin/python bench/fp8_profile.py --json out.json -- <runtime flags>
    e.g. -- --model gpt --layers 24 --d-model 2048 --heads 16 --seq-len 2048 \\
            --vocab-size 32768 --batch-size 8 --strategy fsdp --compile

One process, one device, a process group of one (what the 1.3B GPU check runs). For each
variant it builds the model exactly as `python -m trainforge.training` does (build_model on
meta, training/parallel.py's `parallelize`: FP8 conversion, per-block compile, FSDP2; the
runtime's AdamW and `micro_step`), then runs

* ``--warmup`` steps (compile's first steps; not measured),
* ``--timed`` steps between two device syncs: milliseconds per step, no profiler attached,
* ``--profiled`` steps under torch.profiler: every GPU kernel's time, summed per step by
  what launched it (the categories below), the kernels launched per step, and the GPU's busy
  share of the profiled steps' wall time (below 100%: the GPU waited for the host).

Variants: ``bf16``; ``fp8`` (the runtime's FP8 on one FSDP rank: bf16 all-gather, the cast
inside the compiled block, training/fp8.py); ``fp8_ag`` (the float8 all-gather forced on
one rank, what the runtime ran there before: the test hook TRAINFORGE_TEST_FP8_ALL_GATHER).

Categories (by the launching op, then the kernel's name): ``fp8_matmul`` (aten::_scaled_mm),
``bf16_matmul`` (aten::mm/addmm/bmm and other GEMM kernels), ``attention`` (SDPA's flash or
cuDNN kernels), ``optimizer`` (AdamW), ``nccl``, ``triton`` (inductor's fused kernels: the
norms, GELU, residuals and, in FP8, the amax/scale/cast kernels it fused), ``eager`` (every
other kernel: copies, casts and elementwise ops run outside compiled code -- FSDP2's copies
and torchao's eager weight casts before a float8 all-gather).

``--device cpu`` (bench/gpu_check.py --dry-run): tiny sizes, no compile, FP8 through torchao's
emulated matmuls, CPU-only profiling (no kernels): it proves the script, not a figure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("bf16", "fp8", "fp8_ag")

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")


def category(op: str, kernel: str) -> str:
    """The category of a kernel, from the op that launched it and its own name."""
    k = kernel.lower()
    if "_scaled_mm" in op:
        return "fp8_matmul"
    if "attention" in op or "flash" in k or "fmha" in k or ("cudnn" in k and "attn" in k):
        return "attention"
    if "nccl" in k:
        return "nccl"
    if "adam" in op.lower() or "adam" in k:
        return "optimizer"
    if op in GEMM_OPS or any(g in k for g in ("gemm", "nvjet", "xmma", "cutlass")):
        return "bf16_matmul"
    if k.startswith("triton") or op.startswith("triton"):
        return "triton"
    return "eager"


def kernel_times(events: Any) -> tuple[dict[str, float], Counter[str], int]:
    """(microseconds by category, microseconds by kernel name, kernels) of a profile's
    events: each CPU op's own kernels (`FunctionEvent.kernels`, linked by correlation id)."""
    by_cat: dict[str, float] = defaultdict(float)
    by_name: Counter[str] = Counter()
    n = 0
    for evt in events:
        for k in getattr(evt, "kernels", ()) or ():
            by_cat[category(evt.name, k.name)] += k.duration
            by_name[k.name] += k.duration
            n += 1
    return dict(by_cat), by_name, n


def run_variant(name: str, cfg: Any, env: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from trainforge.training import fp8
    from trainforge.training.loop import build_optimizer, micro_step
    from trainforge.training.models import build_model
    from trainforge.training.parallel import parallelize, resolve_precision, unwrap

    cuda = env.device.type == "cuda"
    if name != "bf16" and cuda and (why := fp8.device_problem(env.device)) is not None:
        return {"error": why}
    cfg = dataclasses.replace(cfg, precision="bf16" if name == "bf16" else "fp8")
    forced = os.environ.pop(fp8.FORCE_ALL_GATHER_ENV, None)
    if name == "fp8_ag":
        os.environ[fp8.FORCE_ALL_GATHER_ENV] = "1"
    try:
        dtype = resolve_precision(cfg, env.device)
        model = parallelize(build_model(cfg, device="meta"), cfg, env, dtype)
    finally:
        os.environ.pop(fp8.FORCE_ALL_GATHER_ENV, None)
        if forced is not None:
            os.environ[fp8.FORCE_ALL_GATHER_ENV] = forced
    raw = unwrap(model)
    gather = bool(getattr(raw, "float8_all_gather", False))
    layers = len(getattr(raw, "float8_layers", ()))
    raw = None  # `model` is the only reference: freed before the next variant
    optimizer = build_optimizer(model, cfg, env.device)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g)
    y = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g)
    x, y = x.to(env.device), y.to(env.device)

    def step() -> torch.Tensor:
        loss = micro_step(model, (x, y), True, cfg, env.device, dtype)
        optimizer.step()
        if gather:
            fp8.after_optimizer_step(model)
        optimizer.zero_grad(set_to_none=True)
        return loss

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(env.device)

    if cuda:
        torch.cuda.reset_peak_memory_stats(env.device)
    losses = [float(step()) for _ in range(args.warmup)]
    sync()
    t0 = time.perf_counter()
    for _ in range(args.timed):
        loss = step()
    sync()
    timed_s = time.perf_counter() - t0
    losses.append(float(loss))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t1 = time.perf_counter()
        for _ in range(args.profiled):
            step()
        sync()
        profiled_s = time.perf_counter() - t1
    by_cat, by_name, kernels = kernel_times(prof.events())
    n = max(args.profiled, 1)
    per_step_ms = {c: v / 1e3 / n for c, v in sorted(by_cat.items(), key=lambda kv: -kv[1])}
    busy_ms = sum(per_step_ms.values())
    tokens = cfg.batch_size * cfg.seq_len
    out = {
        "float8_all_gather": gather,
        "float8_layers": layers,
        "step_ms": 1e3 * timed_s / max(args.timed, 1),
        "tokens_per_second": tokens * args.timed / timed_s if timed_s else None,
        "profiled_step_ms": 1e3 * profiled_s / n,
        "gpu_ms_per_step": per_step_ms,
        "gpu_busy_ms_per_step": busy_ms,
        "gpu_busy_share": busy_ms / (1e3 * profiled_s / n) if profiled_s else None,
        "kernels_per_step": kernels / n,
        "top_kernels_ms_per_step": [
            [k[:100], v / 1e3 / n] for k, v in by_name.most_common(args.top)
        ],
        "losses_finite": all(v == v and abs(v) != float("inf") for v in losses),
    }
    if cuda:
        out["peak_allocated_gib"] = torch.cuda.max_memory_allocated(env.device) / 2**30
    model = optimizer = prof = None  # the next variant's model has the memory to itself
    torch._dynamo.reset()  # the next variant compiles its own blocks
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        # what this variant left behind (0 when it freed everything): the next one's headroom
        out["left_allocated_gib"] = torch.cuda.memory_allocated(env.device) / 2**30
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where the results go")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compile)")
    p.add_argument("--timed", type=int, default=6, help="steps timed between two syncs")
    p.add_argument("--profiled", type=int, default=2, help="steps under torch.profiler")
    p.add_argument("--top", type=int, default=12, help="kernels listed per variant")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, in order")
    p.add_argument("runtime", nargs=argparse.REMAINDER, help="-- then the runtime's flags")
    a = p.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    if bad := [v for v in variants if v not in VARIANTS]:
        p.error(f"--variants {','.join(bad)}: unknown; valid: {', '.join(VARIANTS)}")
    for flag in ("warmup", "timed", "profiled"):
        if getattr(a, flag) < 1:
            p.error(f"--{flag} {getattr(a, flag)}: must be at least 1")
    from trainforge.training.config import parse_args
    from trainforge.training.distributed import cleanup, init_distributed

    cfg = parse_args([x for x in a.runtime if x != "--"])
    if cfg.model != "gpt":
        p.error(f"--model {cfg.model}: only gpt (the check's model) is profiled")
    env = init_distributed()
    if env.world_size != 1:
        p.error(f"WORLD_SIZE {env.world_size}: one process, one device only")
    results: dict[str, Any] = {"device": str(env.device), "config": vars(a) | {"runtime": None}}
    try:
        for v in variants:
            t0 = time.perf_counter()
            try:
                results[v] = run_variant(v, cfg, env, a)
            except Exception as e:  # noqa: BLE001 - one variant's failure must not hide the others
                results[v] = {"error": f"{type(e).__name__}: {e}"}
            results[v]["seconds"] = time.perf_counter() - t0
            print(f"fp8_profile: {v}: {json.dumps(results[v])[:400]}", flush=True)
    finally:
        with contextlib.suppress(Exception):
            cleanup()
    Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all("error" not in results[v] for v in variants) else 1


if __name__ == "__main__":
    sys.exit(main())
