"""Plan check (a report): memory per GPU, throughput and expected duration of every declared job,
as `trainforge.jobs.estimate` computes them, with the warnings the TrainingJob component also
logs. Jobs that cannot fit never get here (`wiring.resolve_job` refuses them at preview).
"""

from __future__ import annotations

from typing import Any

from trainforge.jobs.estimate import JobEstimate, NoEstimate, estimate, gib, warnings
from trainforge.plan.check_types import CheckResult, PlanContext, Section

RULES: dict[str, str] = {}  # reports only: nothing to waive
TITLE = "Memory per GPU and expected duration (trainforge.jobs.estimate)"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _step(seconds: float) -> str:
    """A step time to two significant digits at least: a small model's 0.4 ms is not 0 ms."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1000
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2g} ms" if ms >= 0.01 else f"{ms * 1000:.2g} µs"


def lines_for(e: JobEstimate, ident: str) -> list[str]:
    cap = e.memory_capacity
    frac = f" ({e.memory_fraction:.0%})" if e.memory_fraction is not None else ""
    per = "GPU" if e.gpu else "process"
    head = f"{ident} on {e.pool}: {e.world_size} x {e.gpu or 'CPU process'}"
    out = [head]
    of = f" of {gib(cap)}{frac}" if cap else ""
    out.append(f"  memory per {per}: est. {gib(e.memory_total)}{of} at the {e.memory_phase}")
    out.append(f"    {e.memory_line()}")
    if e.step_seconds is not None and e.step_seconds_range is not None:
        lo, hi = e.step_seconds_range
        if e.has_tokens:  # only the units the model has: a CNN has samples, not tokens
            rate = f"{e.tokens_per_second or 0:,.0f} tokens/s, {e.tokens_per_step:,} tokens/step"
        else:
            rate = (
                f"{e.samples_per_second or 0:,.0f} samples/s, {e.samples_per_step:,} samples/step"
            )
        out.append(f"  step {_step(e.step_seconds)} ({_step(lo)}-{_step(hi)}), {rate}")
        if e.duration_seconds is not None and e.duration_range is not None:
            dlo, dhi = e.duration_range
            out.append(
                f"  duration: {e.steps:,} steps in {_duration(e.duration_seconds)} "
                f"({_duration(dlo)}-{_duration(dhi)}, incl. start-up and checkpoints)"
            )
    if e.method:
        out.append(f"  basis: {e.method}; MFU {e.basis}")
    else:
        out.append(f"  basis: {e.basis}")
    out += [f"  note: {n}" for n in e.notes]
    return out


def _data(e: JobEstimate) -> dict[str, Any]:
    return {
        "job": e.job,
        "pool": e.pool,
        "gpu": e.gpu,
        "world_size": e.world_size,
        "memory_bytes": e.memory,
        "memory_total_bytes": e.memory_total,
        "memory_capacity_bytes": e.memory_capacity,
        "memory_phase": e.memory_phase,
        "host_memory_per_pod_bytes": e.host_memory_per_pod,
        "tokens_per_step": e.tokens_per_step,
        "flops_per_step": e.flops_per_step,
        "step_seconds": e.step_seconds,
        "step_seconds_range": e.step_seconds_range,
        "tokens_per_second": e.tokens_per_second,
        "has_tokens": e.has_tokens,
        "samples_per_step": e.samples_per_step,
        "samples_per_second": e.samples_per_second,
        "method": e.method,
        "steps": e.steps,
        "duration_seconds": e.duration_seconds,
        "duration_range": e.duration_range,
        "basis": e.basis,
        "notes": list(e.notes),
    }


def check(ctx: PlanContext) -> CheckResult:
    declared = ctx.declared
    if declared is None or not declared.jobs:
        return CheckResult()
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for dj in declared.jobs:
        job = dj.spec
        ident = f"{dj.target.namespace}/{job.name}"
        try:
            e = estimate(job, dj.target.pool)
        except NoEstimate as err:
            lines.append(f"{ident} on {job.pool}: no estimate ({err})")
            data.append({"job": job.name, "pool": job.pool, "no_estimate": str(err)})
            continue
        lines += lines_for(e, ident)
        lines += [f"  warning: {w}" for w in warnings(e, ident)]
        data.append(_data(e))
    return CheckResult(sections=[Section(TITLE, lines, data)])
