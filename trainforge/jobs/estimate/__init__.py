"""Will it fit, how fast, how long: a job's memory per GPU, step time and duration at preview.

Stable API (the cost table uses it):

    from trainforge.jobs.estimate import estimate, JobEstimate, NoEstimate
    e = estimate(job, pool)           # job: a JobSpec (resolved or not), pool: PoolFacts
    e.memory                          # {component: bytes per GPU}, "allowance" included
    e.memory_total, e.memory_capacity # bytes per GPU: estimate vs the GPU's memory
    e.step_seconds, e.step_seconds_range, e.tokens_per_second
    e.duration_seconds, e.duration_range  # None where the pool's GPU has no facts (or CPU)

`estimate` raises `NoEstimate` when the job's model size is unknown (code of your own
without `modelSize`). `check_fit` (called by `wiring.resolve_job`) raises `JobConfigError`
for a job that cannot fit, naming the estimate, the GPU's memory and what would make it fit;
`warnings(e)` lists what is worth a look (above the high-water mark, host memory).

Pure: no Pulumi and no torch (resolve_job runs inside `pulumi preview`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from trainforge.core import catalog
from trainforge.core.contract import PoolFacts, efa_count
from trainforge.core.errors import JobConfigError
from trainforge.core.quantity import parse_quantity
from trainforge.jobs.estimate import facts
from trainforge.jobs.estimate.memory import MemoryEstimate, Regime, estimate_memory, regime
from trainforge.jobs.estimate.shape import ModelShape, NoEstimate, shape_of
from trainforge.jobs.estimate.steptime import Network, StepTime, step_time
from trainforge.jobs.spec import JobSpec
from trainforge.training import gpus
from trainforge.training.config import CheckpointConfig, TrainConfig, periodic_saves_possible

__all__ = [
    "DoesNotFit",
    "JobEstimate",
    "NoEstimate",
    "check_fit",
    "estimate",
    "fit_warnings",
    "gib",
    "memory_unit",
    "warnings",
]

GIB = facts.GIB


def gib(n: float) -> str:
    """Bytes for people: GiB with one decimal, MiB below 1 GiB."""
    if n < GIB:
        return f"{n / facts.MIB:.0f} MiB"
    return f"{n / GIB:.1f} GiB"


def memory_unit(gpu: str | None) -> str:
    """What a memory estimate is per: a GPU, or on a CPU pool a process (its share of the
    pod's memory). The one wording of the estimates section, the fit error and a PR's job line."""
    return "GPU" if gpu else "process"


@dataclass(frozen=True)
class JobEstimate:
    """What a job needs per GPU and how long it takes, with the assumptions behind it."""

    job: str
    pool: str
    gpu: str | None  # GPU model the estimate used (the slowest of a mixed pool); None on CPU
    world_size: int  # ranks (GPUs, or processes on CPU)
    memory: dict[str, int]  # bytes per GPU by component at the peak, plus "allowance"
    memory_total: int  # sum of `memory`
    memory_capacity: int | None  # bytes per GPU (CPU pools: the process's share of the pod)
    memory_phase: str  # when the peak happens
    host_memory_per_pod: int  # host RAM the runtime needs per pod
    host_memory_limit: int | None  # the pod's memory limit, when resolved
    tokens_per_step: int
    flops_per_step: float  # model FLOPs, as the runtime's MFU counts them
    step_seconds: float | None
    step_seconds_range: tuple[float, float] | None
    tokens_per_second: float | None
    duration_seconds: float | None
    duration_range: tuple[float, float] | None
    steps: int | None
    basis: str  # what the step time rests on (anchored / extrapolated / calibrated + source)
    notes: tuple[str, ...] = field(default=())
    # samples are token sequences (a GPT, or a declared model that states tokens); else the
    # throughput is in samples and no tokens are shown
    has_tokens: bool = True
    samples_per_step: int = 0
    samples_per_second: float | None = None
    # how the step time was computed, naming the job's strategy (DDP or FSDP2) and its
    # collectives, the FLOPs per step and the MFU used ("" without a step time)
    method: str = ""
    detail: MemoryEstimate | None = field(default=None, compare=False, repr=False)
    timing: StepTime | None = field(default=None, compare=False, repr=False)

    @property
    def memory_fraction(self) -> float | None:
        return self.memory_total / self.memory_capacity if self.memory_capacity else None

    @property
    def fits(self) -> bool:
        return self.memory_capacity is None or self.memory_total <= self.memory_capacity

    def memory_line(self) -> str:
        """Components for people (those under 1 MiB, such as the token batch, left out)."""
        parts = [f"{k} {gib(v)}" for k, v in self.memory.items() if v >= facts.MIB]
        return ", ".join(parts)


def _gpus_per_pod(job: JobSpec, pool: PoolFacts) -> int:
    gpus_ = job.gpus_per_worker
    return pool.gpus_per_node if gpus_ is None else gpus_


def _gpu(pool: PoolFacts) -> tuple[str | None, gpus.GpuFacts | None]:
    """The GPU model to plan with: the pool's, or the slowest of a mixed pool."""
    names = list(pool.gpu_models) or ([pool.gpu_name] if pool.gpu_name else [])
    known = [(n, gpus.match_gpu(n)) for n in names]
    known = [(n, f) for n, f in known if f is not None]
    if not known:
        return (names[0] if names else None), None
    n, f = min(known, key=lambda nf: nf[1].bf16_flops)
    return n, f


def _native_bf16(gpu_name: str | None, gpu: gpus.GpuFacts | None) -> bool:
    """Whether the GPU has bf16 units, as torch decides (compute capability 8.0 or newer):
    the catalog's ``nativeBf16`` where it has peak figures, else its ``computeCapability``;
    a GPU the catalog does not know is assumed to have them. A mixed pool is planned on its
    slowest GPU (``_gpu``), so a T4 in it plans fp32: the larger, safer memory figure."""
    if gpu is not None:
        return gpu.native_bf16
    cc = catalog.gpu_field("computeCapability").get(gpu_name or "")
    return cc is None or int(cc) >= 80


def _network(job: JobSpec, pool: PoolFacts, procs: int, pods: int) -> Network:
    gpus_ = _gpus_per_pod(job, pool)
    efa = bool(job.efa) if job.efa is not None else bool(pool.efa_interfaces and gpus_)
    if efa and pool.efa_interfaces:
        share = efa_count(pool, gpus_) / pool.efa_interfaces
        gbps, kind = pool.network_gbps * share, "efa"
    else:
        share = gpus_ / pool.gpus_per_node if gpus_ and pool.gpus_per_node else 1.0
        gbps, kind = (pool.primary_network_gbps or pool.network_gbps) * min(share, 1.0), "tcp"
    gpu_name, _ = _gpu(pool)
    intra = facts.INTRA_NODE_BUS.get(gpu_name or "")  # None: unknown, not PCIe
    return Network(procs_per_pod=procs, pods=pods, node_gbps=gbps, kind=kind, intra_bus=intra)


# (job, pool) -> estimate, while `memoized()` is active (a plan); None: no memo
_MEMO: dict[tuple[JobSpec, PoolFacts], JobEstimate] | None = None


@contextlib.contextmanager
def memoized() -> Iterator[None]:
    """Within it, `estimate` answers a (job, pool) it has estimated from memory. A plan asks
    six times per job (resolve_job thrice, the fit warnings, the cost table, the estimates
    section), ~1 ms each; the facts do not change during a plan. Outside, every call estimates
    (tests change the facts between calls)."""
    global _MEMO
    outer = _MEMO
    _MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _MEMO = outer


def estimate(job: JobSpec, pool: PoolFacts, *, calibration: dict | None = None) -> JobEstimate:
    """Memory per GPU, step time and duration of `job` on `pool` (see the module doc)."""
    memo = _MEMO if calibration is None else None
    key = (job, pool)
    if memo is not None:
        try:
            return memo[key]
        except KeyError:
            pass
        except TypeError:  # a field that cannot be hashed: no memo for this one
            memo = None
    e = _estimate(job, pool, calibration=calibration)
    if memo is not None:
        memo[key] = e
    return e


def async_saves(job: JobSpec) -> bool:
    """Whether the job's run makes async saves, so that its ranks stage their state in host
    memory and run DCP's checkpoint process: `checkpoint.async` and a periodic save its run
    can reach, the runtime's own rule (`training.config.periodic_saves_possible`) on the
    runtime's --steps (the runtime's default where the job sets none); own code's manager may
    save when it likes (no known last step). A bundled job with `async: true` whose `steps`
    end before its first periodic save starts no checkpoint process: its host memory does not
    count one."""
    if not job.checkpoint.async_save:
        return False
    if job.entrypoint is not None:
        return periodic_saves_possible(CheckpointConfig(every=job.checkpoint.every), None)
    steps = job.training.steps
    last = TrainConfig().steps if steps is None else steps
    return periodic_saves_possible(CheckpointConfig(every=job.checkpoint.every), last)


def _estimate(job: JobSpec, pool: PoolFacts, *, calibration: dict | None = None) -> JobEstimate:
    shape = shape_of(job)
    gpus_ = _gpus_per_pod(job, pool)
    procs = job.procs_per_worker or (gpus_ or 1)
    pods = job.max_workers
    world = procs * pods
    device = "cuda" if gpus_ else "cpu"
    gpu_name, gpu = _gpu(pool) if device == "cuda" else (None, None)
    native = _native_bf16(gpu_name, gpu)
    r = regime(shape, job.strategy, world, device, native)
    # Memory at the job's smallest size: an elastic FSDP job shrunk to minWorkers shards its
    # states over fewer GPUs, so each holds more.
    r_mem = regime(shape, job.strategy, procs * job.min_workers, device, native)
    pod_memory = int(parse_quantity(job.memory)) if job.memory else None
    if device == "cuda":
        capacity = pool.gpu_memory_mib * facts.MIB if pool.gpu_memory_mib else None
        if capacity is None and gpu is not None:
            capacity = int(gpu.memory_gib * GIB)
    else:
        capacity = int(pod_memory / procs) if pod_memory else None
    mem = estimate_memory(
        shape,
        r_mem,
        capacity=capacity,
        procs_per_pod=procs,
        async_checkpoint=async_saves(job),
    )
    memory = dict(mem.components)
    if mem.allowance:
        memory["allowance"] = mem.allowance
    tokens = shape.batch_size * world * shape.grad_accum * shape.tokens_per_sample
    flops_step = shape.flops_per_sample() * shape.batch_size * world * shape.grad_accum
    notes = list(mem.notes)
    if shape.kind == "stated":
        notes.append(
            "sized as a GPT decoder of modelSize's shape (its GPT form); for another model state "
            "its parameters, flopsPerSample and activationBytesPerSample instead"
        )
    elif shape.kind == "declared":
        notes.append("sized from modelSize's declared parameters, FLOPs and activation bytes")
    timing = None
    step = rng = tps = sps = dur = dur_rng = None
    method = ""
    samples = shape.batch_size * world * shape.grad_accum
    basis = "no step time: CPU pools have no FLOP facts" if device == "cpu" else ""
    if device == "cuda" and gpu is None:
        basis = f"no step time: no facts for GPU {gpu_name or '(unknown)'} in training/gpus.py"
    net = _network(job, pool, procs, pods) if gpu is not None else None
    if net is not None and net.intra_bus is None and procs > 1:
        basis = (
            f"no step time: the GPU catalog has no intra-node bus figure for GPU {gpu_name} "
            f"(gpus.*.intraNodeBusBps, or intraNodeLink 'pcie'), which the collectives of "
            f"{procs} processes per pod run over"
        )
        net = None  # unknown, not a guessed PCIe figure: no step time, as for a GPU without facts
    if gpu is not None and net is not None:
        mfu = facts.mfu_for(gpu.name, calibration)
        timing = step_time(shape, r, gpu, net, mfu)
        step, rng = timing.seconds, (timing.low, timing.high)
        tps = tokens / step if step and shape.has_tokens else None
        sps = samples / step if step else None
        basis = f"{mfu.basis}: {mfu.source}"
        method = _method(job, shape, r, gpu.name, timing)
        if shape.kind not in ("mlp", "declared") and timing.mfu_used < mfu.mid:
            notes.append(
                f"expected MFU {timing.mfu_used:.0%} ({mfu.mid:.0%} scaled for dModel "
                f"{shape.d_model} < {mfu.reference_d_model}; an assumption)"
            )
        models = list(pool.gpu_models) or ([pool.gpu_name] if pool.gpu_name else [])
        native = {m: _native_bf16(m, gpus.match_gpu(m)) for m in models}
        if shape.precision == "auto" and len(set(native.values())) > 1:
            bf16 = ", ".join(m for m, n in native.items() if n)
            fp32 = ", ".join(m for m, n in native.items() if not n)
            notes.append(
                f"precision auto runs bf16 on {bf16} nodes and fp32 on {fp32} (no bf16 units); "
                f"planned as on the {gpu_name}"
            )
        if shape.precision == "fp8":
            notes.append(_fp8_note(gpu, timing, shape.d_model))
        if gpu.name == "T4" and r.compute_bytes == 2:
            notes.append("T4 has no bf16 units: bf16 runs emulated; prefer precision: fp32")
        if shape.steps:
            dur, dur_rng = _duration(job, shape, r, timing)
    return JobEstimate(
        job=job.name,
        pool=pool.name,
        gpu=gpu_name,
        world_size=world,
        memory=memory,
        memory_total=mem.total,
        memory_capacity=capacity,
        memory_phase=mem.phase,
        host_memory_per_pod=mem.host_per_pod,
        host_memory_limit=pod_memory,
        tokens_per_step=tokens,
        flops_per_step=flops_step,
        step_seconds=step,
        step_seconds_range=rng,
        tokens_per_second=tps,
        duration_seconds=dur,
        duration_range=dur_rng,
        steps=shape.steps,
        basis=basis,
        notes=tuple(notes),
        has_tokens=shape.has_tokens,
        samples_per_step=samples,
        samples_per_second=sps,
        method=method,
        detail=mem,
        timing=timing,
    )


STRATEGY_NAMES = {
    "ddp": ("DDP", "an all-reduce of the fp32 gradients per step"),
    "fsdp": ("FSDP2", "parameter all-gathers and a gradient reduce-scatter per step"),
}


def _fp8_note(gpu: gpus.GpuFacts, t: StepTime, d_model: int) -> str:
    """What an fp8 job's step time rests on (and what its MFU is measured against)."""
    if t.fp8_speedup is None:
        return (
            f"precision fp8: no FP8 peak for the {gpu.name} in the GPU catalog, so planned as "
            "bf16 (no speed-up assumed); MFU is against the bf16 peak"
        )
    if d_model < facts.FP8_ANCHOR_D_MODEL:
        return (
            f"precision fp8: compute planned at bf16 speed: dModel {d_model} is narrower than "
            f"the {facts.FP8_ANCHOR_D_MODEL} of the measured speed-up "
            f"({facts.FP8_SPEEDUP_SOURCE}), and a narrower model's Linear layers gain less "
            f"(bench/fp8_roofline.py); {facts.fp8_speedup(d_model)[2]:.2f}x at best; MFU is "
            f"against the bf16 peak ({gpu.bf16_flops / 1e12:,.0f} TFLOP/s), the runtime's "
            "basis too"
        )
    return (
        f"precision fp8: compute planned {t.fp8_speedup:.2f}x faster than bf16 "
        f"({facts.FP8_SPEEDUP_SOURCE}); the {gpu.name}'s FP8 peak "
        f"{gpu.fp8_flops / 1e12:,.0f} TFLOP/s (datasheet) bounds it; MFU is against the bf16 "
        f"peak ({gpu.bf16_flops / 1e12:,.0f} TFLOP/s), the runtime's basis too"
    )


def _method(job: JobSpec, shape: ModelShape, r: Regime, gpu: str, t: StepTime) -> str:
    """How the step time was computed, in the job's own terms: its strategy (the regime's:
    a single rank has no collectives), the model FLOPs per step, the GPU's peak and the MFU
    used. The MFU's own source may cite an FSDP2 measurement; this names what the job runs."""
    facts_ = gpus.GPUS.get(gpu)
    # fp32 matmuls run on TF32 Tensor Cores where the GPU has them (Ampere on); a T4 has none
    tf32 = facts_ is None or facts_.tf32_flops > facts_.fp32_flops
    dtype = "bf16" if r.compute_bytes == 2 else ("TF32" if tf32 else "FP32")
    compute = (
        f"{t.model_flops_per_step:.3g} model FLOP/step at {t.mfu_used:.0%} MFU of the "
        f"{gpu}'s {dtype} peak ({t.peak_flops_per_gpu / 1e12:g} TFLOP/s)"
    )
    if r.world <= 1:
        return f"one rank, no collectives: {compute}"
    name, comm = STRATEGY_NAMES.get(r.strategy, (r.strategy, "its collectives"))
    return f"{name} over {r.world} ranks ({comm}, overlapped with backward): {compute}"


def _duration(
    job: JobSpec, shape: ModelShape, r: Regime, t: StepTime
) -> tuple[float, tuple[float, float]]:
    """Steps x step time + checkpoints' blocking time + start-up."""
    steps = shape.steps or 0
    every = job.checkpoint.every
    n_ckpt = (steps // every if every else 0) + 1  # + the final one
    local = (shape.parameters / r.world if r.strategy == "fsdp" else shape.parameters) * 12
    if async_saves(job):
        lo_bps, hi_bps = facts.STAGING_BPS
    else:
        lo_bps, hi_bps = facts.CHECKPOINT_WRITE_BPS
    ck_mid = n_ckpt * local / ((lo_bps + hi_bps) / 2)
    ck_lo, ck_hi = n_ckpt * local / hi_bps, n_ckpt * local / lo_bps
    s_lo, s_hi = facts.STARTUP_SECONDS
    mid = steps * t.seconds + ck_mid + (s_lo + s_hi) / 2
    return mid, (steps * t.low + ck_lo + s_lo, steps * t.high + ck_hi + s_hi)


# --- fit -------------------------------------------------------------------------------------


class DoesNotFit(JobConfigError):
    """A job whose estimated memory per GPU exceeds the GPU's (one line with the numbers)."""

    def __init__(self, where: str, message: str) -> None:
        self.where, self.value, self.expected = where, None, message
        ValueError.__init__(self, f"{where}: {message}")


def _what_fits(job: JobSpec, pool: PoolFacts, e: JobEstimate) -> list[str]:
    """Changes that would make the job fit, each with its estimate (first that fit)."""
    shape = shape_of(job)
    sized = job.model_size
    out: list[str] = []

    def with_training(**kw: object) -> JobSpec:
        if sized is not None:
            return job.model_copy(update={"model_size": sized.model_copy(update=kw)})
        return job.model_copy(update=kw)

    def fits(candidate: JobSpec) -> JobEstimate | None:
        """The candidate's estimate if it fits under the high-water mark."""
        try:
            c = estimate(candidate, pool)
        except NoEstimate:
            return None
        frac = c.memory_fraction
        return c if frac is None or frac <= facts.HIGH_WATER else None

    def with_ac(j: JobSpec) -> JobSpec:
        if j.model_size is not None:
            size = j.model_size.model_copy(update={"activation_checkpointing": True})
            return j.model_copy(update={"model_size": size})
        return j.model_copy(update={"activation_checkpointing": True})

    candidates: list[tuple[str, JobSpec]] = []
    if not shape.activation_checkpointing:
        candidates.append(("activationCheckpointing: true", with_ac(job)))
    if job.strategy == "ddp" and e.world_size > 1:
        fsdp = job.model_copy(update={"strategy": "fsdp", "preset": "fsdp"})
        candidates.append(("preset: fsdp", fsdp))
        if not shape.activation_checkpointing:
            candidates.append(("preset: fsdp with activationCheckpointing: true", with_ac(fsdp)))
    for label, cand in candidates:
        c = fits(cand)
        if c is not None:
            out.append(f"{label} (est. {gib(c.memory_total)})")
    # a smaller per-GPU batch, same global batch through gradAccum
    b, accum = shape.batch_size, shape.grad_accum
    for smaller in range(b - 1, 0, -1):
        if b % smaller:
            continue
        c = fits(with_training(batch_size=smaller, grad_accum=accum * (b // smaller)))
        if c is not None:
            out.append(
                f"batchSize: {smaller} with gradAccum: {accum * (b // smaller)} "
                f"(est. {gib(c.memory_total)})"
            )
            break
    # on CPU pools: more pod memory, if a node has it
    if e.gpu is None and pool.memory_mib_per_node:
        procs = job.procs_per_worker or 1
        need_gib = -(-(e.memory_total * procs) // GIB)
        if need_gib * 1024 <= pool.memory_mib_per_node * 0.85:
            out.append(f"memory: {need_gib}Gi")
    # more GPUs (FSDP shards the states over them)
    if job.strategy == "fsdp" and job.elastic is None:
        for workers in range(job.workers + 1, 4 * job.workers + 9):
            c = fits(job.model_copy(update={"workers": workers}))
            if c is not None:
                out.append(f"workers: {workers} (est. {gib(c.memory_total)})")
                break
    return out


def check_fit(job: JobSpec, pool: PoolFacts, where: str = "job") -> JobEstimate | None:
    """Refuse a job whose model cannot fit in its pool's GPU (or pod) memory.

    Returns the estimate (None when the job's model size is unknown).
    """
    try:
        e = estimate(job, pool)
    except NoEstimate:
        return None
    if e.fits:
        return e
    assert e.memory_capacity is not None
    fixes = _what_fits(job, pool, e)
    fix = (
        ("; fits with " + ", or ".join(fixes))
        if fixes
        else (
            "; no single change (activation checkpointing, FSDP, a smaller batch, more GPUs) "
            "makes it fit: use a pool with larger GPUs"
        )
    )
    if e.gpu is not None:
        where_mem = f"{gib(e.memory_capacity)} per {e.gpu} GPU in pool {pool.name!r}"
        what = "GPU memory"
    else:
        where_mem = f"{gib(e.memory_capacity)} per process of the pod's memory {job.memory}"
        what = "memory"
    raise DoesNotFit(
        where,
        f"does not fit in {what}: est. {gib(e.memory_total)} per "
        f"{memory_unit(e.gpu)} ({e.memory_line()}; at the "
        f"{e.memory_phase}) > {where_mem}{fix}",
    )


def warnings(e: JobEstimate, where: str = "job") -> list[str]:
    """What deserves a look though the job fits: the high-water mark, host memory."""
    out = []
    frac = e.memory_fraction
    if frac is not None and frac > facts.HIGH_WATER and e.fits:
        out.append(
            f"{where}: est. {gib(e.memory_total)} of {gib(e.memory_capacity or 0)} per "
            f"{'GPU' if e.gpu else 'process'} ({frac:.0%}), above the "
            f"{facts.HIGH_WATER:.0%} high-water mark: a longer sequence or a fragmentation "
            "spike would run out of memory; activation checkpointing or a smaller batch "
            "leaves headroom"
        )
    if e.gpu is not None and e.host_memory_limit and e.host_memory_per_pod > e.host_memory_limit:
        out.append(
            f"{where}: the pod's processes need about {gib(e.host_memory_per_pod)} of host "
            f"memory (torch and CUDA, async checkpoint staging and DCP's checkpoint "
            f"process, own code's model built on the CPU) but its limit is "
            f"{gib(e.host_memory_limit)}; raise memory or set checkpoint.async: false"
        )
    return out


def fit_warnings(job: JobSpec, pool: PoolFacts, where: str = "job") -> list[str]:
    """`warnings` of a job's estimate ([] when its model size is unknown)."""
    try:
        return warnings(estimate(job, pool), where)
    except NoEstimate:
        return []
