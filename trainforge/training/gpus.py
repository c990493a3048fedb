"""GPU facts: peak dense FLOP/s, memory and memory bandwidth per GPU model. One table.

Why here: the runtime divides achieved FLOP/s by the peak for its MFU (metrics.py), and the
planner (`trainforge.jobs.estimate`) divides a job's FLOPs by the same peak for its step time,
so both read this table. It lives in the runtime's package because the runtime is shipped to
pods on its own (codeship) and must not import the jobs room; the jobs room imports this
module, which imports nothing but the standard library (`pulumi preview` has no torch).

Figures are vendor peaks for *dense* math (no 2:4 sparsity), as datasheets print them.
``bf16`` is the Tensor Core BF16 rate; ``tf32`` the Tensor Core TF32 rate, which the runtime's
fp32 matmuls run at on GPUs (distributed.py turns ``allow_tf32`` on); ``fp32`` the non-Tensor
FP32 rate. Memory is what
AWS reports per GPU (`DescribeInstanceTypes` GpuInfo, also in PoolFacts.gpu_memory_mib);
here it is only a fallback for names AWS does not report.

Sources (recorded 2026-11-23; "datasheet" = NVIDIA's product datasheet for that GPU, figures
as reproduced by the pages cited where this session could not open NVIDIA's PDF itself):
- TF32 dense is half the datasheets' sparse TF32 figure (H100 SXM 989 -> 494, PCIe 756 -> 378,
  A100 312 -> 156, L40S 366 -> 183, L4 120 -> 60); A10G's is assumed half its BF16 rate.
- H100 SXM5: BF16 1,979 TFLOPS with sparsity -> 989 dense, FP32 67 TFLOPS, HBM3 3.35 TB/s
  (datasheet, reproduced at archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html;
  glennklockwood.com/garden/processors/h100: BF16 matrix 989.4 dense).
- H100 PCIe: BF16 1,513 sparse -> 756 dense, FP32 51, HBM2e 2.0 TB/s (same datasheet copy).
- H200 SXM: same Hopper compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s (datasheet;
  glennklockwood.com/garden/processors/h100 "H200 GPUs are the same as H100 GPUs ... with
  more and faster HBM"). Bandwidth not re-checked in this session.
- A100 SXM4: BF16 312 dense, FP32 19.5, 1.555 TB/s (40 GB) / 2.039 TB/s (80 GB) (datasheet;
  sysrqmts.com A100 pages give FP32 19.49 TFLOPS, 1,555 GB/s for 40 GB). 1.555 is used.
- A10G (AWS g5 only; NVIDIA publishes no A10G datasheet): 24 GB GDDR6 at 600 GB/s, less
  Tensor throughput than the A10's 125 TFLOPS BF16 (baseten.co/blog/nvidia-a10-vs-a10g-for-
  ml-model-inference). 70 TFLOPS BF16 dense is the figure the runtime's MFU uses; it is NOT
  confirmed by a primary source: calibrate it (`trainforge calibrate`).
  FP32 31.2 TFLOPS is the A10's (sysrqmts.com A10 PCIe page).
- L4: BF16 242 sparse -> 121 dense, FP32 30.3, 300 GB/s (datasheet; not re-checked).
- L40S: BF16 733 sparse -> 362 dense, FP32 91.6, 864 GB/s (datasheet; not re-checked).
- T4: no BF16 Tensor Cores (Turing); FP16 Tensor 65 TFLOPS, FP32 8.1, 320 GB/s
  (sysrqmts.com T4 page: FP32 8.141, FP16 65.13 TFLOPS, 320 GB/s). PyTorch still accepts
  bf16 there (emulated), so bf16 is planned at the FP32 rate.
"""

from __future__ import annotations

from dataclasses import dataclass

FACTS_DATE = "2026-11-23"


@dataclass(frozen=True)
class GpuFacts:
    name: str  # the key matched against torch's device name and AWS's GPU name
    bf16_flops: float  # dense BF16 Tensor Core peak, FLOP/s (FP32 rate where BF16 is emulated)
    tf32_flops: float  # dense TF32 Tensor Core peak (FP32 rate where there is no TF32)
    fp32_flops: float  # non-Tensor FP32 peak, FLOP/s
    memory_gib: float  # fallback only: PoolFacts.gpu_memory_mib (from AWS) wins
    memory_bandwidth: float  # bytes/s
    native_bf16: bool = True
    source: str = "datasheet"


GPUS: dict[str, GpuFacts] = {
    g.name: g
    for g in (
        GpuFacts("H200", 989e12, 494e12, 67e12, 141, 4.8e12),
        GpuFacts("H100", 989e12, 494e12, 67e12, 80, 3.35e12),
        GpuFacts("H100 PCIe", 756e12, 378e12, 51e12, 80, 2.0e12),
        GpuFacts("A100", 312e12, 156e12, 19.5e12, 40, 1.555e12),
        GpuFacts("L40S", 362e12, 183e12, 91.6e12, 48, 864e9),
        GpuFacts("A10G", 70e12, 35e12, 31.2e12, 24, 600e9, source="unconfirmed (module doc)"),
        GpuFacts("L4", 121e12, 60e12, 30.3e12, 24, 300e9),
        GpuFacts("T4", 8.1e12, 8.1e12, 8.1e12, 16, 320e9, native_bf16=False),
    )
}

# Dense bf16 peak FLOP/s per GPU model, as the runtime's MFU has always read it (GPUs whose
# bf16 is emulated are left out: an MFU against an emulated rate would mislead).
PEAK_BF16_FLOPS: dict[str, float] = {k: g.bf16_flops for k, g in GPUS.items() if g.native_bf16}


def match_gpu(name: str | None) -> GpuFacts | None:
    """The facts for a device or AWS GPU name ("NVIDIA H100 80GB HBM3", "A10G", "L40S").

    The longest key contained in the name wins, so "L40S" is not taken for "L4" and
    "H100 PCIe" not for "H100".
    """
    if not name:
        return None
    hits = [k for k in GPUS if k.lower() in name.lower()]
    return GPUS[max(hits, key=len)] if hits else None
