"""Plan check: a job whose pods keep dying ends after a bounded number of attempts (the budget
a job spec states is not the one its controller enforces). Each backend's semantics are its
shape's (`Shape.retry_bound`); the bundled runtime's run ledger is rehearsed with the real
`RunLedger`. docs/rehearsals.md, "Retry bounds".
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from typing import Any

from trainforge.core.pods import KILLED, RetryInputs
from trainforge.jobs.backends import job_shape
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

RULE = "RETRY_UNBOUNDED"
RULES = {
    RULE: "bound the job's retries: restartPolicy OnFailure (restarts count against "
    "backoffLimit) or Never, runPolicy.activeDeadlineSeconds, or the bundled runtime with its "
    "checkpoint directory on the team's FSx (its run ledger stops a job that keeps failing)"
}
CAP = 50  # attempts rehearsed before calling a loop unbounded (the ledger stops at 6)


def ledger_bound(cap: int = CAP, user_code: bool = False) -> int | None:
    """Attempts until the bundled runtime (`user_code`: your code's wrapper, training/usercode.py)
    stops an attempt that keeps dying right after it started (before it resumed)."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger  # noqa: PLC0415
    from trainforge.training.usercode import start_check  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="trainforge-ledger-") as scratch:
        for attempt in range(1, cap + 1):
            ledger = RunLedger(scratch, rank=0, world_size=1, log=lambda _m: None)
            ledger.begin_attempt()
            # the wrapper's check before your code starts; the runtime's first check
            # (loop._check_progress before the restore)
            if user_code:
                stops = start_check(ledger) is not None
            else:
                stops = ledger.attempts_without_progress(None) >= NO_PROGRESS_LIMIT
            if stops:
                return attempt  # exits 4 (no_progress): permanent under ExitCode
            # ... and this attempt is SIGKILLed: no exit record, not finished
    return None


def _ledger(
    job: Any, target: Any, ledger: Callable[..., int | None]
) -> Callable[[], tuple[int | None, str]] | None:
    """What of the job itself stops it failing forever: the runtime's ledger or your code's
    wrapper (None: nothing counts its attempts)."""
    from trainforge.jobs.entrypoint import ledger_counts_attempts  # noqa: PLC0415

    if not ledger_counts_attempts(job, target):
        return None
    if job.entrypoint is not None:
        return lambda: (ledger(user_code=True), "your code's wrapper (usercode)")
    return lambda: (ledger(), "the runtime's ledger")


def check(ctx: PlanContext) -> CheckResult:
    from trainforge.plan.checks.job_backends import runtime_docs  # noqa: PLC0415

    declared = ctx.declared
    if declared is None or not declared.jobs:
        return CheckResult()
    runtimes = runtime_docs(ctx)
    ledger = functools.cache(ledger_bound)
    findings: list[Finding] = []
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for dj in declared.jobs:
        wl, backend, shape = dj.emitted.workload, dj.emitted.backend, job_shape(dj.emitted.workload)
        inputs = RetryInputs(KILLED, runtimes, _ledger(dj.spec, dj.target, ledger))
        bound = shape.retry_bound(wl, inputs) if shape is not None else None
        if bound is None:
            lines.append(f"{dj.target.namespace}/{dj.spec.name}: runtime not in this plan")
            continue
        ident = f"{dj.target.namespace}/{wl['kind']}/{wl['metadata']['name']}"
        if bound.attempts is not None:
            shown = f"at most {bound.attempts} attempts"
        elif bound.deadline_s is not None:
            shown = f"bounded in time only ({bound.deadline_s} s)"
        else:
            shown = "UNBOUNDED"
            message = (
                f"{backend} job {dj.spec.name}: pods that die with {KILLED} every time are "
                f"retried forever ({bound.why})"
            )
            names = frozenset({dj.resource_name})
            findings.append(Finding(ident, RULE, message, RULES[RULE], names=names))
        lines.append(f"{dj.target.namespace}/{dj.spec.name} ({backend}): {shown}: {bound.why}")
        data.append(
            {"job": dj.spec.name, "namespace": dj.target.namespace, "backend": backend,
             "attempts": bound.attempts, "deadline_s": bound.deadline_s, "why": bound.why}
        )  # fmt: skip
    title = f"Retry bounds (pods that die with {KILLED} on every attempt)"
    return CheckResult(findings, [Section(title, lines, data)])
