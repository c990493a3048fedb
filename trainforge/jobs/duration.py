"""How long a job is expected to run: the one place that figure comes from.

Why in the jobs layer: the plan's cost lines and queue simulation (trainforge.plan) read it,
and the job's object records it (`pod.workload_object`, annotations `EXPECTED_SECONDS` and
`EXPECTED_BASIS`) so that `trainforge status` of a job waiting behind it can give the same
expected start on the live cluster as the plan does (trainforge.live.wait).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from trainforge.core.contract import PoolFacts
from trainforge.jobs import capacity
from trainforge.jobs.spec import JobSpec

# The annotations on a job's object (pytorchjob, trainjob, indexed Job) that record its
# expected duration: seconds, and where the figure comes from (`Duration.detail`, which names
# its source; trainforge.jobs.pod.workload_object).
EXPECTED_SECONDS = "trainforge.io/expected-duration-seconds"
EXPECTED_BASIS = "trainforge.io/expected-duration"


DEADLINE = "activeDeadlineSeconds"  # the source whose figure is a ceiling (Duration.ceiling)
DEADLINE_DETAIL = f"at most {DEADLINE} (a ceiling)"  # its basis annotation, as live/ reads it


@dataclass(frozen=True)
class Duration:
    """How long a job is expected to run. `source` says where the figure came from;
    an `activeDeadlineSeconds` figure is a ceiling, not an expectation."""

    seconds: float | None
    source: str  # "expectedStepSeconds" | "estimate" | "activeDeadlineSeconds" | "unknown"
    detail: str
    low: float | None = None
    high: float | None = None
    hardware: str = ""  # what an estimate ran on ("2 x A10G"); "" for the other sources
    # the run's length without its deadline, where the deadline cuts it (`seconds` is then
    # the deadline: the controller fails the job there; `cut_at_deadline`)
    needs: float | None = None

    @property
    def ceiling(self) -> bool:
        return self.source == DEADLINE

    @property
    def cut(self) -> bool:
        """The job's own deadline ends the run before its steps do."""
        return self.needs is not None

    @property
    def cut_note(self) -> str:
        """` (cut at its activeDeadlineSeconds 3600: the run needs ~67 min)`, or ""."""
        if self.needs is None or self.seconds is None:
            return ""
        return (
            f" (cut at its {DEADLINE} {self.seconds:.0f}: the run needs "
            f"~{duration_text(self.needs)})"
        )


def duration_text(seconds: float) -> str:
    """A duration in words, as every reader prints one (the plan's estimates, cost, queue and
    verdict lines, the PR comment, `trainforge status`): seconds below 2 min, minutes below
    2 h, hours below 3 days, then days: 45 s, 90 min, 8.6 h, 3.2 days. A table's compact
    form is `age_text`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.1f} days"


def age_text(seconds: float) -> str:
    """A duration in a table's compact form, kubectl's AGE column (`trainforge status`'s
    ages; its ETAs are in words, `duration_text`): 2 or 3 significant figures, as
    k8s.io/apimachinery/pkg/util/duration.HumanDuration
    (kubernetes/kubernetes f77451e, staging/src/k8s.io/apimachinery/pkg/util/duration/
    duration.go, read 2026-11-29): seconds below 2 min (95s), minutes and seconds below 10 min
    (4m30s), minutes below 3 h (42m, 179m), hours and minutes below 8 h (4h, 7h5m), hours below
    2 days (9h), days and hours below 8 days (3d4h), days below 2 years (400d), then years and
    days (2y10d) and years (9y); whole units, rounded down; `<invalid>` more than a second in
    the future (clock skew), `0s` within it."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 2 * 60:
        return f"{max(s, 0)}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 3 * 60:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 8 * 24:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 2 * 365:
        return f"{days}d"
    if days < 8 * 365:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def job_steps(job: JobSpec) -> int:
    """Optimizer steps the job runs: its `steps` (for its own code, `modelSize.steps`), or the
    runtime's default."""
    if job.model_size is not None and job.model_size.steps is not None:
        return job.model_size.steps
    if job.training.steps is not None:
        return job.training.steps
    from trainforge.training.config import TrainConfig  # noqa: PLC0415 - torch-free

    return TrainConfig().steps


def _from_user(job: JobSpec, pool: PoolFacts) -> Duration | None:
    if job.expected_step_seconds is None:
        return None
    steps = job_steps(job)
    return Duration(
        steps * job.expected_step_seconds,
        "expectedStepSeconds",
        f"{steps} steps x {job.expected_step_seconds:g}s (expectedStepSeconds)",
    )


def _from_deadline(job: JobSpec, pool: PoolFacts) -> Duration | None:
    deadline = job.run_policy.active_deadline_seconds
    if deadline is None:
        return None
    return Duration(float(deadline), DEADLINE, DEADLINE_DETAIL)


def _from_estimate(job: JobSpec, pool: PoolFacts) -> Duration | None:
    """The step-time model (trainforge.jobs.estimate): steps x estimated step time + start-up and
    checkpoints, with its range; None where it has no facts (CPU pools, unknown GPUs)."""
    from trainforge.jobs.estimate import NoEstimate, estimate  # noqa: PLC0415

    try:
        e = estimate(job, pool)
    except NoEstimate:
        return None
    if e.duration_seconds is None or e.duration_range is None or e.step_seconds is None:
        return None
    return Duration(
        e.duration_seconds,
        "estimate",
        f"{e.steps} steps x {e.step_seconds:.3g}s estimated on {e.world_size} x {e.gpu} "
        f"(+ start-up, checkpoints; {e.basis.split(':')[0]})",
        low=e.duration_range[0],
        high=e.duration_range[1],
        hardware=f"{e.world_size} x {e.gpu}",
    )


# Precedence, first answer wins: what the user measured beats a model, a model beats the
# job's deadline (which only bounds the run), and with none of them the duration is unknown.
DURATION_SOURCES: list[Callable[[JobSpec, PoolFacts], Duration | None]] = [
    _from_user,
    _from_estimate,
    _from_deadline,
]


def cut_at_deadline(d: Duration, deadline: int | None) -> Duration:
    """`d` as the job's controller lets it run: no longer than its `activeDeadlineSeconds`.

    Why: every backend fails the job at its deadline, counted from the start (kubeflow/trainer
    v1.9.4 pkg/controller.v1/common/job.go:211, PastActiveDeadline -> the PyTorchJob fails;
    v2.2.1 pkg/controller/trainjob_controller.go reconcileDeadline -> the TrainJob fails with
    DeadlineExceeded and its JobSet is deleted; a batch/v1 Job's own activeDeadlineSeconds,
    Kubernetes' Job controller). A run the model or the user times longer is cut there: the
    figure is the deadline (what the nodes cost, what a job queued behind waits) and `needs`
    keeps the run's own length for the plan's finding (estimates.RULE_DEADLINE)."""
    if deadline is None or d.ceiling or d.seconds is None or d.seconds <= deadline:
        return d  # a range reaching past the deadline stays the model's: the likely run fits
    low = min(d.low, deadline) if d.low is not None else None
    high = min(d.high, deadline) if d.high is not None else None
    return replace(d, seconds=float(deadline), low=low, high=high, needs=d.seconds)


def may_pass_deadline(d: Duration, deadline: int | None) -> bool:
    """Whether only the upper end of `d`'s range passes `deadline`: the likely run fits, so
    `cut_at_deadline` leaves it alone, but a run as slow as the range allows is cut there
    (the plan warns; it does not fail: the likely run fits)."""
    if deadline is None or d.cut or d.ceiling or d.seconds is None or d.high is None:
        return False
    return d.seconds <= deadline < d.high


def expected_duration(job: JobSpec, pool: PoolFacts, instance_type: str | None = None) -> Duration:
    """The job's expected run on `pool`; with `instance_type`, on the nodes of that type
    (`PoolFacts.only`: its GPU and bandwidth), the type a mixed pool launches for the job
    (trainforge.plan.cost picks it, as Karpenter does). Without, on the pool's shared
    figures: the slowest GPU of a mixed pool. Never longer than the job's deadline
    (`cut_at_deadline`)."""
    if instance_type is not None:
        pool = pool.only(instance_type)
    for source in DURATION_SOURCES:
        found = source(job, pool)
        if found is not None:
            return cut_at_deadline(found, job.run_policy.active_deadline_seconds)
    return Duration(
        None,
        "unknown",
        "unknown: set expectedStepSeconds (or runPolicy.activeDeadlineSeconds as a ceiling)",
    )


def launch_duration(job: JobSpec, pool: PoolFacts, most: int | None = None) -> Duration:
    """The job's expected run on the nodes `pool` launches for it, as far as the jobs layer
    can tell without prices (the emitter's annotations read it; the plan's Cost reads the same
    per-type figure, `expected_duration(job, pool, type)`, and picks by price).

    A pool of one type: that type's. A managed node group: its first type that holds a pod
    (it launches them in the order listed). A Karpenter pool: the NodeClaims the packing makes
    (trainforge.jobs.packing; `most`: the pod template's cap on pods per node), each launching
    one of its candidate types, the run timed on the slowest launched type. Where the
    candidates' figures differ, which one runs depends on the prices: the result states the
    range (`low`/`high`) and records the longer (`seconds`), so a job queued behind it is
    never promised an earlier start than the plan's."""
    types = capacity.pool_types(pool)
    fitting = [t.name for t in types if capacity.pods_per_node(job, pool, t) > 0]
    if len(types) <= 1 or not fitting:
        return expected_duration(job, pool)
    if pool.kind != "karpenter":
        return expected_duration(job, pool, fitting[0])
    claims = [
        c.candidates for c in capacity.launch(pool, capacity.job_gang(job, pool, most)).claims
    ]
    if not claims:
        return expected_duration(job, pool)
    run = {t: expected_duration(job, pool, t) for c in claims for t in c}

    def longest(ts: tuple[str, ...] | list[str]) -> str:  # an unknown run counts as longest
        return max(ts, key=lambda t: (run[t].seconds is None, run[t].seconds or 0.0))

    def shortest(ts: tuple[str, ...]) -> str:
        return min(ts, key=lambda t: (run[t].seconds is None, run[t].seconds or 0.0))

    # every launch is timed on its slowest NodeClaim's type: the fastest launch takes each
    # NodeClaim's fastest candidate, the slowest each one's slowest
    fast = longest([shortest(c) for c in claims])
    slow = longest([longest(c) for c in claims])
    lo, hi = run[fast], run[slow]
    if lo.seconds == hi.seconds:
        return hi
    if lo.seconds is None or hi.seconds is None:
        return replace(
            hi,
            detail=f"unknown on {slow}, {duration_text(lo.seconds or 0)} on {fast}: the type "
            f"pool {pool.name} launches is the cheapest that holds its pods (the plan's Cost "
            f"prices them); {hi.detail}",
        )
    return replace(
        hi,
        detail=f"{duration_text(lo.seconds)} on {fast} to {duration_text(hi.seconds)} on {slow}: "
        f"the type pool {pool.name} launches is the cheapest that holds its pods (the plan's "
        f"Cost prices them); recorded: the longer, {hi.detail}",
        low=min(x for x in (lo.low, lo.seconds) if x is not None),
        high=max(x for x in (hi.high, hi.seconds) if x is not None),
    )
