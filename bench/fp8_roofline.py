"""What FP8 can gain on a GPT's Linear layers at best: torchao's roofline model, on the CPU.

    .venv/bin/python bench/fp8_roofline.py [--gpu H200] [--layers 24 --d-model 2048]
        [--tokens 16384] [--bf16-summary build/gpu-check/gpt_1p3b/summary.json]

torchao 0.18.0's own model (torchao/testing/training/roofline_utils.py, the math behind
benchmarks/float8/float8_roofline.py and the speed-up tables of torchao's float8 docs), for
the four Linear layers of one of our GPT blocks (qkv d -> 3d, proj d -> d, fc d -> 4d, out
4d -> d; M = tokens per step and GPU) with tensorwise scaling:

* each matmul of forward and backward (3 per Linear) takes the longer of its FLOPs at the
  peak times torchao's achievable share (0.78) and its bytes at the memory bandwidth times
  torchao's achievable share (0.92);
* FP8 adds the casts' memory traffic (amax and cast of input, weight and grad_output),
  counted by torchao both unfused and with the input/grad_output amax fused into the
  previous op (``enable_fusion_modeling``; what torch.compile can do at best);
* peaks and bandwidth are the GPU catalog's (trainforge/training/gpus.py: H100 SXM 3.35 TB/s,
  H200 4.8 TB/s; torchao's own H100 row assumes Meta's 2.4 TB/s variant).

It models the Linear layers only: attention, norms, the head, the loss and the optimizer do
not change with FP8. With ``--bf16-summary`` (a bf16 run of the same model on that GPU) it
turns the milliseconds saved into the best end-to-end speed-up: the bf16 step time over the
step time less what FP8 saves (Amdahl). An upper bound: no FSDP all-gather, no framework
overhead, every cast at the achievable bandwidth.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def linears(d_model: int) -> list[tuple[str, int, int]]:
    """(name, K, N) of a GPT block's Linear layers (training/models/gpt.py)."""
    d = d_model
    return [("qkv", d, 3 * d), ("proj", d, d), ("fc", d, 4 * d), ("out", 4 * d, d)]


def roofline(gpu_name: str, m: int, d_model: int) -> list[dict[str, float]]:
    """Per Linear: bf16 and FP8 matmul seconds, the FP8 casts' seconds (unfused, fused)."""
    import sympy
    import torch
    from torchao.testing.training import roofline_utils as ru

    from trainforge.training import gpus

    g = gpus.GPUS[gpu_name]
    if g.fp8_flops is None:
        raise SystemExit(f"--gpu {gpu_name}: the GPU catalog has no FP8 peak for it")
    base = ru.gpu_name_to_specs["NVIDIA H100"]  # torchao's achievable shares (H100-measured)
    ru.gpu_name_to_specs[gpu_name] = {
        "bf16_peak_tops": g.bf16_flops,
        "fp8_peak_tops": g.fp8_flops,
        "peak_mem_bw_bytes_sec": g.memory_bandwidth,
        "pct_achievable_gemm_tops": base["pct_achievable_gemm_tops"],
        "pct_achievable_mem_bw": base["pct_achievable_mem_bw"],
    }
    M, K, N = sympy.symbols("M K N")
    bf16 = ru.get_gemm_time_sympy(M, K, N, torch.bfloat16, None, None, gpu_name)
    f8 = ru.get_gemm_time_sympy(M, K, N, torch.float8_e4m3fn, "tensorwise", None, gpu_name)
    casts = {
        fused: ru.get_float8_mem_sympy(M, K, N, "tensorwise", None, fused, gpu_name)
        for fused in (False, True)
    }
    rows = []
    for name, k, n in linears(d_model):
        at = {M: m, K: k, N: n}
        rows.append({
            "name": name, "K": k, "N": n,
            "bf16_s": float(bf16.subs(at)), "fp8_s": float(f8.subs(at)),
            "casts_s": float(casts[False].subs(at)), "casts_fused_s": float(casts[True].subs(at)),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--gpu", default="H200", help="a GPU of the catalog with an FP8 peak")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--tokens", type=int, default=8 * 2048, help="M: tokens per step and GPU")
    p.add_argument("--bf16-summary", help="a bf16 run's summary.json: the end-to-end bound")
    a = p.parse_args(argv)
    rows = roofline(a.gpu, a.tokens, a.d_model)
    print(f"{a.gpu}, M = {a.tokens}, d_model {a.d_model}: one block's Linear layers, fwd + bwd")
    print("| layer | K x N | bf16 ms | fp8 ms | casts ms (fused) | speed-up (fused) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        f, ff = r["fp8_s"] + r["casts_s"], r["fp8_s"] + r["casts_fused_s"]
        print(f"| {r['name']} | {r['K']} x {r['N']} | {1e3 * r['bf16_s']:.3f} | "
              f"{1e3 * r['fp8_s']:.3f} | {1e3 * r['casts_s']:.3f} ({1e3 * r['casts_fused_s']:.3f})"
              f" | {r['bf16_s'] / f:.2f}x ({r['bf16_s'] / ff:.2f}x) |")  # fmt: skip
    bf16 = a.layers * sum(r["bf16_s"] for r in rows)
    saved = {
        fused: bf16 - a.layers * sum(r["fp8_s"] + r[key] for r in rows)
        for fused, key in ((False, "casts_s"), (True, "casts_fused_s"))
    }
    print(f"{a.layers} blocks: bf16 {1e3 * bf16:.1f} ms per step in these matmuls; FP8 saves "
          f"{1e3 * saved[False]:.1f} ms ({1e3 * saved[True]:.1f} ms with the casts fused)")  # fmt: skip
    if a.bf16_summary:
        s = json.loads(Path(a.bf16_summary).read_text())
        tps = s["steady"]["tokens_per_second"]
        step = a.tokens / tps  # one GPU: the step's tokens over its rate
        print(f"bf16 run: {tps:,.0f} tokens/s = {1e3 * step:.1f} ms per step; best FP8 "
              f"speed-up {step / (step - saved[False]):.2f}x "
              f"({step / (step - saved[True]):.2f}x fused)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
