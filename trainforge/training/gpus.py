"""GPU facts: peak dense FLOP/s, memory and memory bandwidth per GPU model. One table.

Why here: the runtime divides achieved FLOP/s by the peak for its MFU (metrics.py), and the
planner (`trainforge.jobs.estimate`) divides a job's FLOPs by the same peak for its step time,
so both read this table. The figures are the GPU/instance catalog's (`trainforge.core.catalog`,
core/data/gpu_catalog.json, which the runtime's code bundle carries, jobs/codeship.py); this
module imports nothing but the standard library and core (`pulumi preview` has no torch).

Figures are vendor peaks for *dense* math (no 2:4 sparsity), as datasheets print them.
``bf16`` is the Tensor Core BF16 rate; ``tf32`` the Tensor Core TF32 rate, which the runtime's
fp32 matmuls run at on GPUs (distributed.py turns ``allow_tf32`` on); ``fp32`` the non-Tensor
FP32 rate. Memory is what
AWS reports per GPU (`DescribeInstanceTypes` GpuInfo, also in PoolFacts.gpu_memory_mib);
here it is only a fallback for names AWS does not report.

Sources per GPU: docs/gpu-catalog.md (the catalog's "datasheets" source).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainforge.core import catalog

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
    # dense FP8 Tensor Core peak where the catalog has it (docs/gpu-catalog.md); FP8 runs'
    # MFU is still reported against bf16_flops (the matmuls outside Linear layers are bf16)
    fp8_flops: float | None = None


def _facts(name: str, peak: dict) -> GpuFacts:
    return GpuFacts(
        name,
        float(peak["bf16Flops"]),
        float(peak["tf32Flops"]),
        float(peak["fp32Flops"]),
        float(peak["memoryGiB"]),
        float(peak["memoryBandwidth"]),
        native_bf16=bool(peak.get("nativeBf16", True)),
        source=peak.get("source", "datasheet"),
        fp8_flops=float(peak["fp8Flops"]) if "fp8Flops" in peak else None,
    )


# From the GPU/instance catalog (core/data/gpu_catalog.json, gpus.*.peak).
GPUS: dict[str, GpuFacts] = {n: _facts(n, p) for n, p in catalog.gpu_field("peak").items()}

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
