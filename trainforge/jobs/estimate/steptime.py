"""Step time of a job: compute at an expected MFU, plus what collectives add, overlapped.

Compute: model FLOPs per step (the runtime's own MFU accounting: `ModelShape.flops_per_sample`
x samples per step; x 8/6 of hardware work with activation checkpointing) over the GPUs'
peak dense FLOP/s (bf16, or TF32 for fp32 jobs: the runtime enables TF32) x expected MFU.

Collectives per optimizer step (N ranks, k per pod, W pods, bytes S):
  DDP: one all-reduce of the fp32 gradients (S = 4P), once per optimizer step (no_sync on
       the other micro-steps);
  FSDP2: per micro-step an all-gather of the parameters in the compute dtype for forward
       and again for backward (minus the root and the last block, which stay gathered), and
       once per step a reduce-scatter of fp32 gradients (4P).
  Per pod, an all-reduce moves 2 S (W-1)/W bytes over the network and an all-gather or
  reduce-scatter S (W-1)/W; inside a pod 2 S (k-1)/k or S (k-1)/k over NVLink/PCIe. The
  network is the pod's share of the node's bandwidth (EC2's figure, via PoolFacts), EFA or
  TCP on ENA as the job uses, at an efficiency from facts.py. Per pod, not per node: pods the
  packing puts on one node are still separate hosts to NCCL (its host hash is the hostname,
  the pod's own, plus the boot id; P2P and SHM connect only ranks of one host: NVIDIA/nccl
  v2.30.7-1 src/misc/utils.cc getHostHashOnce, src/transport/p2p.cc, shm.cc), so their
  traffic takes NCCL's network transport (docs/performance.md).
Overlap: DDP all-reduces buckets during backward (2/3 of compute); FSDP2 prefetches
all-gathers and reduce-scatters during forward and backward: the step is the longer of the
compute plus the first group's collectives (before any compute) and the collectives plus the
last group's compute (after which its reduce-scatter goes). Best case: only what does not
fit under that compute is exposed; worst case: nothing overlaps. The expected value takes
the overlapped time at the middle MFU; the range spans best MFU + full overlap to worst MFU
+ no overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainforge.jobs.estimate import facts
from trainforge.jobs.estimate.memory import Regime, _padded
from trainforge.jobs.estimate.shape import ModelShape
from trainforge.training import gpus


@dataclass(frozen=True)
class Network:
    """What one pod's ranks talk over."""

    procs_per_pod: int
    pods: int
    node_gbps: float  # the pod's share of its node's network bandwidth, Gbit/s
    kind: str  # "efa" | "tcp"
    # bytes/s per GPU inside a pod (low, high); None: the GPU's is unknown (facts.INTRA_NODE_BUS)
    intra_bus: tuple[float, float] | None


@dataclass(frozen=True)
class StepTime:
    seconds: float
    low: float
    high: float
    compute_seconds: float
    comm_seconds: float  # collectives if nothing overlapped (expected bandwidth)
    optimizer_seconds: float
    model_flops_per_step: float
    peak_flops_per_gpu: float
    mfu: facts.MfuFacts
    mfu_used: float  # after the width factor
    fp8_speedup: float | None = None  # precision fp8: the bf16 compute divided by this


def _collective_seconds(
    net: Network, allreduce: float, gather: float, eff: float, intra: float, n_colls: int
) -> float:
    """Seconds to move `allreduce` bytes by all-reduce and `gather` by all-gather/reduce-
    scatter (per rank buffers), inside pods and across them; phases in sequence."""
    k, w = net.procs_per_pod, net.pods
    t = 0.0
    if k > 1:
        t += (2 * allreduce + gather) * (k - 1) / k / intra
    if w > 1:
        bps = net.node_gbps * 1e9 / 8 * eff
        t += (2 * allreduce + gather) * (w - 1) / w / bps if bps > 0 else float("inf")
    return t


def step_time(
    shape: ModelShape,
    r: Regime,
    gpu: gpus.GpuFacts,
    net: Network,
    mfu: facts.MfuFacts,
) -> StepTime:
    world = max(r.world, 1)
    samples = shape.batch_size * world * shape.grad_accum
    model_flops = shape.flops_per_sample() * samples
    hw_flops = model_flops * (facts.RECOMPUTE_FACTOR if shape.activation_checkpointing else 1.0)
    peak = gpu.bf16_flops if r.compute_bytes == 2 else gpu.tf32_flops
    wf = (
        facts.width_factor(shape.d_model, mfu.reference_d_model)
        if shape.kind not in ("mlp", "declared")
        else 1
    )
    m_mid, m_lo, m_hi = mfu.mid * wf, mfu.low * wf, mfu.high * wf
    per_gpu = hw_flops / world

    # fp8: the bf16 step's compute sped up by the anchored factor for the model's width
    # (facts.fp8_speedup: none below the anchor's), only on a GPU whose FP8 peak the catalog
    # knows, and never past the FP8/BF16 peak ratio
    fp8 = shape.precision == "fp8" and r.compute_bytes == 2 and gpu.fp8_flops is not None
    ceiling = gpu.fp8_flops / gpu.bf16_flops if fp8 else 1.0
    speedups = facts.fp8_speedup(shape.d_model) if fp8 else (1.0,) * 3
    s_lo, s_mid, s_hi = (min(s, ceiling) for s in speedups)

    def compute(m: float, speedup: float = 1.0) -> float:
        return per_gpu / (peak * m) / speedup

    # collectives: bytes per rank buffer
    if world > 1:
        if r.strategy == "fsdp":
            kept = _padded(shape.root, world) + (
                _padded(shape.blocks[-1], world) if shape.blocks else 0
            )
            full = sum(_padded(b, world) for b in (*shape.blocks, shape.root))
            gather = shape.grad_accum * r.compute_bytes * (2 * full - kept) + 4 * full
            allreduce = 0.0
            n_colls = shape.grad_accum * 2 * (len(shape.blocks) + 1) + len(shape.blocks) + 1
        else:
            gather = 0.0
            allreduce = 4.0 * shape.parameters
            n_colls = max(1, int(4 * shape.parameters // (25 * 2**20)) + 1)  # 25 MiB buckets
    else:
        gather = allreduce = 0.0
        n_colls = 0
    eff_lo, eff_hi = facts.NETWORK_EFFICIENCY[net.kind]
    lat_lo, lat_hi = facts.COLLECTIVE_LATENCY
    if net.intra_bus is None and net.procs_per_pod > 1:
        raise ValueError("no intra-node bus figure for this GPU: no step time for a multi-GPU pod")
    intra_lo, intra_hi = net.intra_bus or (1.0, 1.0)  # one GPU per pod: never read
    comm_mid = (
        _collective_seconds(
            net, allreduce, gather, (eff_lo + eff_hi) / 2, (intra_lo + intra_hi) / 2, n_colls
        )
        + n_colls * (lat_lo + lat_hi) / 2
    )
    comm_best = _collective_seconds(net, allreduce, gather, eff_hi, intra_hi, n_colls)
    comm_best += n_colls * lat_lo
    comm_worst = _collective_seconds(net, allreduce, gather, eff_lo, intra_lo, n_colls)
    comm_worst += n_colls * lat_hi

    # AdamW's update is memory-bound: read weight, grad, two moments; write three (28 B/param)
    local = shape.parameters / world if r.strategy == "fsdp" else shape.parameters
    opt = 28 * local / gpu.memory_bandwidth

    def overlapped(c: float, comm: float) -> float:
        if r.strategy == "fsdp":
            # groups in sequence on the compute stream and on the network (one collective at a
            # time): compute-bound, the first all-gather runs before any compute; network-
            # bound, the network never waits but for the last group's compute (its first
            # all-gather is part of `comm`, not added to it)
            n = max(len(shape.blocks) + 1, 1)
            return max(c + comm / n, comm + c / n)
        return c + max(0.0, comm - c * 2 / 3)

    c_mid, c_best, c_worst = compute(m_mid, s_mid), compute(m_hi, s_hi), compute(m_lo, s_lo)
    return StepTime(
        seconds=overlapped(c_mid, comm_mid) + opt,
        low=overlapped(c_best, comm_best) + opt,
        high=c_worst + comm_worst + opt,
        compute_seconds=c_mid,
        comm_seconds=comm_mid,
        optimizer_seconds=opt,
        model_flops_per_step=model_flops,
        peak_flops_per_gpu=peak,
        mfu=mfu,
        mfu_used=m_mid,
        fp8_speedup=s_mid if fp8 else None,
    )
