"""Plan reports: each declared job's memory per GPU, throughput and expected duration
(`trainforge.jobs.estimate`, with the component's warnings; a job that cannot fit is refused
at preview by `wiring.resolve_job`), and its restart budget (`trainforge.jobs.restarts`, also
what `trainforge run-local` applies), to read before a failure, not after. Its one finding:
a run the job's own activeDeadlineSeconds cuts (TF_RUN_PAST_DEADLINE, `deadline_findings`).
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from trainforge.jobs.duration import (
    Duration,
    duration_text,
    job_steps,
    launch_duration,
    may_pass_deadline,
)
from trainforge.jobs.estimate import JobEstimate, NoEstimate, estimate, gib, memory_unit, warnings
from trainforge.jobs.restarts import budget, launch_line
from trainforge.jobs.spec import JobSpec
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import queues

# a run the job's own deadline cuts (duration.cut_at_deadline): its controller fails it there
RULE_DEADLINE = "TF_RUN_PAST_DEADLINE"
RULES: dict[str, str] = {
    RULE_DEADLINE: "raise the job's runPolicy.activeDeadlineSeconds above its run (the finding "
    "names the least), or give it fewer steps; or waive TF_RUN_PAST_DEADLINE for the job with "
    "the reason (a resubmission continues from its checkpoints)"
}
TITLE = "Memory per GPU and expected duration (trainforge.jobs.estimate)"
RESTART_TITLE = "Restart budget per job (trainforge.jobs.restarts)"


def step_text(seconds: float) -> str:
    """A step time to two significant digits at least: a small model's 0.4 ms is not 0 ms."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1000
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2g} ms" if ms >= 0.01 else f"{ms * 1000:.2g} µs"


def lines_for(
    e: JobEstimate,
    ident: str,
    run: JobEstimate | None = None,
    launched: str = "",
    duration: Duration | None = None,
) -> list[str]:
    """The estimate's lines; `run`, `launched`, `duration`: the step, type (named when the pool
    has several) and run the job is timed on (`queues.job_run`). Memory stays `e`'s, judged
    on every type of the pool."""
    cap = e.memory_capacity
    frac = f" ({e.memory_fraction:.0%})" if e.memory_fraction is not None else ""
    per = memory_unit(e.gpu)
    of = f" of {gib(cap)}{frac}" if cap else ""
    out = [
        f"{ident} on {e.pool}: {e.world_size} x {e.gpu or 'CPU process'}",
        f"  memory per {per}: est. {gib(e.memory_total)}{of} at the {e.memory_phase}",
        f"    {e.memory_line()}",
    ]
    notes = e.notes
    if run is not None and launched:
        out.append(
            f"  memory judged on every type of the pool (its slowest GPU, least GPU memory); "
            f"step and duration on {launched} ({run.world_size} x {run.gpu}), the type the "
            "pool launches for it (Cost)"
        )
    e = run or e
    if e.step_seconds is not None and e.step_seconds_range is not None:
        lo, hi = e.step_seconds_range
        if e.has_tokens:  # only the units the model has: a CNN has samples, not tokens
            rate = f"{e.tokens_per_second or 0:,.0f} tokens/s, {e.tokens_per_step:,} tokens/step"
        else:
            rate = (
                f"{e.samples_per_second or 0:,.0f} samples/s, {e.samples_per_step:,} samples/step"
            )
        out.append(f"  step {step_text(e.step_seconds)} ({step_text(lo)}-{step_text(hi)}), {rate}")
        d = duration or Duration(e.duration_seconds, "estimate", "", *(e.duration_range or ()))
        if d.source != "estimate":
            out.append(_other_duration(e, d))
        elif d.seconds is not None and d.low is not None and d.high is not None:
            out.append(
                f"  duration: {e.steps:,} steps in {duration_text(d.seconds)} "
                f"({duration_text(d.low)}-{duration_text(d.high)}, incl. start-up and checkpoints)"
            )
    out.append(f"  basis: {e.method}; MFU {e.basis}" if e.method else f"  basis: {e.basis}")
    return out + [f"  note: {n}" for n in notes]


def _other_duration(e: JobEstimate, d: Duration) -> str:
    """A run's duration that is not the model's (what the Cost and queue use), with the model's."""
    text = (
        "unknown" if d.seconds is None else ("<= " if d.ceiling else "") + duration_text(d.seconds)
    )
    model = f"; the estimate: {duration_text(e.duration_seconds)}" if e.duration_seconds else ""
    return f"  duration: {text}{d.cut_note} ({d.detail}, what the Cost and the queue use{model})"


_BYTES = ("memory", "memory_total", "memory_capacity", "host_memory_per_pod")
_NOT_DATA = ("host_memory_limit", "detail", "timing")


def _data(e: JobEstimate) -> dict[str, Any]:
    """The estimate's fields (byte counts as `*_bytes`), less the worked detail."""
    out = {
        f.name + ("_bytes" if f.name in _BYTES else ""): getattr(e, f.name)
        for f in fields(e)
        if f.name not in _NOT_DATA
    }
    return {**out, "notes": list(e.notes)}


def _restart_data(job: JobSpec) -> dict[str, Any]:
    b = budget(job)
    return {
        "job": job.name,
        "pods": job.workers,
        "processes_per_pod": job.procs,
        "torchrun_max_restarts": b.in_pod,
        "pod_recreations": b.recreations,
        "recreated_on": b.on,
        "bound": b.bound,
        "run_local_recreations": b.local_recreations,
    }


def _on(job: JobSpec, pool: Any, instance_type: str) -> JobEstimate | None:
    """The estimate on `instance_type`'s nodes (None: no type, or no facts for it)."""
    try:
        return estimate(job, pool.only(instance_type)) if instance_type else None
    except NoEstimate:
        return None


def _run_on(timed_on: str, run: JobEstimate | None, cost: Any) -> dict[str, Any] | None:
    """The step figures on the type the run is timed on, and its duration (`queues.job_run`)."""
    if run is None:
        return None
    d = cost.duration
    span = (d.low, d.high) if d.low is not None and d.high is not None else None
    return {"instanceType": timed_on, **_data(run), "duration_seconds": d.seconds,
            "duration_range": span, "duration_source": d.source}  # fmt: skip


def _resubmission(job: JobSpec, done: int) -> str:
    """Whether a resubmission continues the run the deadline cut, from what the job says."""
    if job.entrypoint is not None:
        return (
            "whether a resubmission continues is up to its own code's checkpoints (the "
            "runtime's checkpoint settings do not apply to it)"
        )
    every, resume = job.checkpoint.every, job.checkpoint.resume
    if resume == "never":
        return "checkpoint.resume is never, so a resubmission starts again at step 0"
    last = done // every * every
    if last == 0:
        return (
            f"it checkpoints every {every} steps, none before the cut, so a resubmission starts "
            "again at step 0"
        )
    return (
        f"its checkpoints (every {every} steps, checkpoint.resume {resume}) let a resubmission "
        f"continue from step {last:,}, with a new deadline"
    )


def deadline_warning(job: JobSpec, d: Duration | None) -> str | None:
    """The warning of a run whose likely length fits its activeDeadlineSeconds but whose
    range's upper end does not (duration.may_pass_deadline): not a finding, the likely run
    finishes, but a run as slow as the range allows is failed at the deadline, and the
    numbers say how far it gets. None where the range fits (or the run is cut: the finding)."""
    deadline = job.run_policy.active_deadline_seconds
    if d is None or deadline is None or not may_pass_deadline(d, deadline):
        return None
    assert d.seconds is not None and d.low is not None and d.high is not None
    steps = job_steps(job)
    done = int(steps * deadline / d.high)
    return (
        f"job {job.name}'s run may be cut: its likely run ~{duration_text(d.seconds)} fits its "
        f"runPolicy.activeDeadlineSeconds {deadline} ({duration_text(deadline)}), but its "
        f"range {duration_text(d.low)}-{duration_text(d.high)} reaches past it: at the slow end "
        f"the controller fails it after about {done:,} of {steps:,} steps; "
        f"{_resubmission(job, done)}; a deadline of at least {math.ceil(d.high)} covers the range"
    )


def deadline_findings(ctx: PlanContext) -> list[Finding]:
    """A job whose run (the Cost's and the queue's figure, `queues.job_run`) its own
    activeDeadlineSeconds cuts: the controller fails it there, before its last step."""
    out: list[Finding] = []
    fleet = bool(getattr(ctx, "fleet_workers", None))
    for dj in ctx.declared.jobs if ctx.declared else []:
        job = dj.spec
        d = launch_duration(job, dj.target.pool) if fleet else queues.job_run(ctx, dj).duration
        if not d.cut or d.needs is None or d.seconds is None:
            continue
        deadline, steps = int(d.seconds), job_steps(job)
        done = int(steps * d.seconds / d.needs)
        wl = dj.emitted.workload
        ident = f"{dj.target.namespace}/{wl['kind']}/{wl['metadata']['name']}"
        message = (
            f"job {job.name}: its run needs ~{duration_text(d.needs)} ({d.detail}), but its "
            f"runPolicy.activeDeadlineSeconds is {deadline} ({duration_text(deadline)}): the "
            f"{wl['kind']}'s controller fails it at the deadline, after about {done:,} of "
            f"{steps:,} steps; {_resubmission(job, done)}"
        )
        fix = (
            f"raise runPolicy.activeDeadlineSeconds to at least {math.ceil(d.needs)} (the run; "
            f"add a margin for slow steps), or run at most ~{done:,} steps under this deadline"
        )
        out.append(Finding(ident, RULE_DEADLINE, message, fix, names=frozenset({dj.resource_name})))
    return out


def check(ctx: PlanContext) -> CheckResult:
    declared = ctx.declared
    if declared is None or not declared.jobs:
        return CheckResult()
    findings = deadline_findings(ctx)
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
        fleet = bool(getattr(ctx, "fleet_workers", None))
        cost = None if fleet else queues.job_run(ctx, dj)  # a fleet's runs on a worker
        timed_on = cost.choice.timed_on if cost and cost.choice and e.gpu else ""
        run = _on(job, dj.target.pool, timed_on)
        mixed = len(dj.target.pool.node_types) > 1
        ran = cost.duration if cost else None
        lines += lines_for(e, ident, run, timed_on if mixed else "", ran)
        if fleet:
            lines.append(
                "  a fleet manager's job: the figures above are this pool's (its memory fit); "
                "it runs on a worker, and the Cost section times it there"
            )
        lines += [f"  warning: {w}" for w in warnings(e, ident)]
        if (cut := deadline_warning(job, ran)) is not None:
            lines.append(f"  warning: {cut}")
        data.append({**_data(e), "runOn": _run_on(timed_on, run, cost)})
    restarts = [
        f"{dj.target.namespace}/{dj.spec.name}: {launch_line(dj.spec)}" for dj in declared.jobs
    ]
    return CheckResult(
        findings,
        sections=[
            Section(TITLE, lines, data),
            Section(RESTART_TITLE, restarts, [_restart_data(dj.spec) for dj in declared.jobs]),
        ],
    )
