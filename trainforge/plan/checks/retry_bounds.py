"""Plan check: a job whose pods keep dying ends after a bounded number of attempts.

Why: the retry budget a job spec states is not the one its controller enforces. The Kubeflow
training operator v1.9 counts only container restarts of Running pods against
`runPolicy.backoffLimit` (`pkg/core/job.go` PastBackoffLimit, release-1.9), and with
`restartPolicy: ExitCode` it deletes and re-creates a pod that exits >= 128 (restart count
0), so an OOM loop (137 every time) never ends and holds its GPUs and quota forever. This
check rehearses, for each declared job, pods that die with 137 on every attempt, under the
semantics of the controller that runs it, and shows the bound per job; an unbounded job is a
finding.

Semantics rehearsed (each at the pinned version):
- PyTorchJob (training operator release-1.9): `Never` fails the job with its first failed
  pod; `OnFailure` restarts the container in place and fails the job once the restarts reach
  backoffLimit (0: the first restart); `ExitCode` re-creates the pod without counting. There
  the bound can only come from the bundled runtime's run ledger (ledger.py: an attempt after
  `NO_PROGRESS_LIMIT` attempts in a row that failed without progress exits 4, which ExitCode
  treats as permanent), rehearsed here with the real `RunLedger` in a scratch folder; it
  needs the ledger on shared storage (the checkpoint directory on the team's FSx). Otherwise
  only `runPolicy.activeDeadlineSeconds` bounds it, in time.
- batch/v1 Job (the indexed-job backend, and the Job each TrainJob's JobSet runs, Trainer
  v2.3 + JobSet `failurePolicy.maxRestarts: 0`): a pod failure policy rule matching exit 137
  decides (FailJob: 1 attempt; Ignore: not counted, unbounded); otherwise the failure counts
  against backoffLimit (or backoffLimitPerIndex, with maxFailedIndexes 0: the index, then the
  job, fails), and an `OnFailure` pod's container restarts count the same way.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

RULE = "RETRY_UNBOUNDED"
RULES = {
    RULE: "bound the job's retries: restartPolicy OnFailure (restarts count against "
    "backoffLimit) or Never, runPolicy.activeDeadlineSeconds, or the bundled runtime with its "
    "checkpoint directory on the team's FSx (its run ledger stops a job that keeps failing)"
}
KILLED = 137  # SIGKILL: the OOM killer
CAP = 50  # attempts rehearsed before calling a loop unbounded (the ledger stops at 6)


@dataclass(frozen=True)
class Bound:
    """How many times a job's pods start when every attempt dies with 137 (None: no bound)
    and why, in one line."""

    attempts: int | None
    why: str
    deadline_s: int | None = None


def _matches(rule: dict[str, Any], code: int) -> bool:
    on = rule.get("onExitCodes")
    if not on:
        return False  # onPodConditions: DisruptionTarget is an eviction, not an OOM kill
    values = set(on.get("values") or [])
    return (code in values) == (on.get("operator", "In") == "In")


def job_bound(spec: dict[str, Any], code: int = KILLED) -> Bound:
    """A batch/v1 Job spec whose one pod (index) dies with `code` every time (kube Job
    controller: podFailurePolicy first, then backoffLimit / backoffLimitPerIndex)."""
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if _matches(rule, code):
            action = rule.get("action")
            if action == "FailJob":
                return Bound(1, f"pod failure policy: exit {code} fails the Job")
            if action == "FailIndex":
                return Bound(1, f"pod failure policy: exit {code} fails the index")
            if action == "Ignore":
                return Bound(None, f"pod failure policy ignores exit {code}: never counted")
            break  # Count: the default below
    pod_policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    unit = "container runs" if pod_policy == "OnFailure" else "pods"
    if spec.get("backoffLimitPerIndex") is not None:
        limit = int(spec["backoffLimitPerIndex"])
        return Bound(limit + 1, f"backoffLimitPerIndex {limit}: {limit + 1} {unit} of the index")
    limit = int(spec.get("backoffLimit", 6))  # the API server's default
    return Bound(limit + 1, f"backoffLimit {limit}: {limit + 1} {unit}")


def ledger_bound(cap: int = CAP, user_code: bool = False) -> int | None:
    """Attempts until the bundled runtime (or, `user_code`, the wrapper your own code runs
    under: trainforge.training.usercode) stops an attempt that keeps dying right after it
    started (the worst case: before it resumed), rehearsed with the real RunLedger."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger  # noqa: PLC0415
    from trainforge.training.usercode import no_progress  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="trainforge-ledger-") as scratch:
        for attempt in range(1, cap + 1):
            ledger = RunLedger(scratch, rank=0, world_size=1, log=lambda _m: None)
            ledger.begin_attempt()
            # the wrapper's check before your code starts; the runtime's first check
            # (loop._check_progress before the restore)
            if user_code:
                stops = no_progress(ledger) is not None
            else:
                stops = ledger.attempts_without_progress(None) >= NO_PROGRESS_LIMIT
            if stops:
                return attempt  # exits 4 (no_progress): permanent under ExitCode
            # ... and this attempt is SIGKILLed: no exit record, not finished
    return None


def pytorchjob_bound(
    wl: dict[str, Any], job: Any, target: Any, ledger: Callable[..., int | None] = ledger_bound
) -> Bound:
    """`ledger`: the ledger's bound (a plan rehearses it once: it does not depend on the job)."""
    from trainforge.jobs.entrypoint import ledger_counts_attempts  # noqa: PLC0415

    spec = wl["spec"]
    policies = {r.get("restartPolicy") for r in spec["pytorchReplicaSpecs"].values()}
    run = spec.get("runPolicy") or {}
    deadline = run.get("activeDeadlineSeconds")
    if policies == {"Never"}:
        return Bound(1, "restartPolicy Never: the first failed pod fails the job")
    if "ExitCode" in policies:
        if ledger_counts_attempts(job, target):
            user_code = job.entrypoint is not None
            n = ledger(user_code=True) if user_code else ledger()
            if n is not None:
                whose = "your code's wrapper (usercode)" if user_code else "the runtime's ledger"
                return Bound(
                    n,
                    f"ExitCode re-creates pods uncounted; {whose} stops attempt {n} "
                    "(no_progress, exit 4)",
                )
        why = "ExitCode re-creates a pod that exits >= 128 without counting it"
        if deadline is not None:
            return Bound(None, f"{why}; activeDeadlineSeconds {deadline} ends it", deadline)
        return Bound(None, why)
    limit = run.get("backoffLimit")
    if limit is None:
        why = "OnFailure without backoffLimit: restarts are never counted"
        return Bound(None, why, deadline)
    runs = max(int(limit), 1) + 1  # fails once the restarts reach the limit (0: > 0)
    return Bound(runs, f"OnFailure: backoffLimit {limit} counts restarts, {runs} container runs")


def _trainjob_spec(wl: dict[str, Any], runtimes: dict[str, dict[str, Any]]) -> dict | None:
    from trainforge.jobs.trainjob import REPLICATED_JOB  # noqa: PLC0415

    runtime = runtimes.get(wl["spec"]["runtimeRef"]["name"])
    if runtime is None:
        return None
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    rjob = next((r for r in rjobs if r["name"] == REPLICATED_JOB), None)
    return None if rjob is None else rjob["template"]["spec"]


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
        wl = dj.emitted.workload
        backend = dj.emitted.backend
        if wl["kind"] == "PyTorchJob":
            bound = pytorchjob_bound(wl, dj.spec, dj.target, ledger)
        elif wl["kind"] == "TrainJob":
            spec = _trainjob_spec(wl, runtimes)
            if spec is None:
                lines.append(f"{dj.target.namespace}/{dj.spec.name}: runtime not in this plan")
                continue
            bound = job_bound(spec)
            deadline = wl["spec"].get("activeDeadlineSeconds")
            if bound.attempts is None and deadline is not None:
                bound = Bound(None, f"{bound.why}; activeDeadlineSeconds {deadline}", deadline)
        else:
            bound = job_bound(wl["spec"])
            deadline = wl["spec"].get("activeDeadlineSeconds")
            if bound.attempts is None and deadline is not None:
                bound = Bound(None, f"{bound.why}; activeDeadlineSeconds {deadline}", deadline)
        ident = f"{dj.target.namespace}/{wl['kind']}/{wl['metadata']['name']}"
        if bound.attempts is not None:
            shown = f"at most {bound.attempts} attempts"
        elif bound.deadline_s is not None:
            shown = f"bounded in time only ({bound.deadline_s} s)"
        else:
            shown = "UNBOUNDED"
            findings.append(
                Finding(
                    resource=ident,
                    rule=RULE,
                    message=f"{backend} job {dj.spec.name}: pods that die with {KILLED} every "
                    f"time are retried forever ({bound.why})",
                    fix=RULES[RULE],
                    names=frozenset({dj.resource_name}),
                )
            )
        lines.append(f"{dj.target.namespace}/{dj.spec.name} ({backend}): {shown}: {bound.why}")
        data.append(
            {
                "job": dj.spec.name,
                "namespace": dj.target.namespace,
                "backend": backend,
                "attempts": bound.attempts,
                "deadline_s": bound.deadline_s,
                "why": bound.why,
            }
        )
    title = f"Retry bounds (pods that die with {KILLED} on every attempt)"
    return CheckResult(findings, [Section(title, lines, data)])
