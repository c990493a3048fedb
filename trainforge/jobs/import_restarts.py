"""The restartPolicy of an imported job's entry: the one whose backend retries the same exit codes
as the original's controller did, else the default with every code whose fate changed named.

Why: the entry's default (ExitCode) fails the job on exit 1-127 at once, while a PyTorchJob with
`OnFailure`, an Indexed Job without a podFailurePolicy or a TrainJob on Trainer's torch runtime
retried those up to its limit; an import that said only "restartPolicy: dropped" turned a
retried failure into a stopped job unsaid. Both sides are read from one model of upstream's
rules (core/failures.py: the training operator's ReconcilePods, the Job controller's pod
failure policy, JobSet's failure policy), the entry's through jobs/restarts.py
`outcome`, the answer every command reads from the restart fields its backend writes.
Pulumi-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainforge.core import failures
from trainforge.jobs import pytorchjob, restarts
from trainforge.jobs import trainjob as trainjob_backend
from trainforge.jobs.spec import JobSpec, RunPolicySpec

CODES = range(1, 256)  # a failed container's exit codes (0 is success)
# the entry's values in the order tried: the default first (no key), then the others
POLICIES = ("ExitCode", "OnFailure", "Never")


def _retried(outcome: Callable[[int], failures.Outcome]) -> frozenset[int]:
    return frozenset(c for c in CODES if outcome(c).restarts)


def _ranges(codes: frozenset[int]) -> str:
    """1-127 or 3, 5-9: the codes as the docs write them."""
    out, ordered = [], sorted(codes)
    while ordered:
        first = last = ordered.pop(0)
        while ordered and ordered[0] == last + 1:
            last = ordered.pop(0)
        out.append(str(first) if first == last else f"{first}-{last}")
    return ", ".join(out)


def _does(codes: frozenset[int]) -> str:
    """What a retried set means, in words (derived, so a limit of 0 reads as no retry)."""
    if not codes:
        return "no failed exit code is retried"
    failed = frozenset(CODES) - codes
    return f"exit codes {_ranges(codes)} are retried (the plan's restart line says how often)" + (
        f", {_ranges(failed)} fail the job at once" if failed else ""
    )


def _choose(
    original: frozenset[int], of: Callable[[str], frozenset[int]], said: str, changes: list[str]
) -> str | None:
    """The entry's restartPolicy retrying exactly `original` (None: the default, ExitCode),
    else None with the codes whose fate changed named."""
    for policy in POLICIES:
        if of(policy) == original:
            keep = "the entry's default" if policy == "ExitCode" else f"restartPolicy {policy}"
            changes.append(f"{said} -> {keep}, which keeps it: {_does(original)}")
            return None if policy == "ExitCode" else policy
    now = of("ExitCode")
    stop, more = original - now, now - original
    said_codes = []
    if stop:
        said_codes.append(
            f"exit codes {_ranges(stop)} now fail the job at once; the original retried them"
        )
    if more:
        said_codes.append(
            f"exit codes {_ranges(more)} are now retried; the original failed on them"
        )
    changes.append(
        f"{said} -> the entry's default ExitCode ({_does(now)}): "
        + "; ".join(said_codes)
        + " (no restartPolicy of an entry retries the same codes: docs/jobs.md, restartPolicy)"
    )
    return None


def _entry(backend: str, policy: str, backoff: int = 6) -> JobSpec:
    """The entry's retry fields, all a backend's `restart_doc` reads (unvalidated: no pool)."""
    run_policy = RunPolicySpec(backoff_limit=backoff)
    return JobSpec.model_construct(
        backend=backend, workers=1, restart_policy=policy, run_policy=run_policy
    )


def entry_retries(backend: str, policy: str, backoff: int = 6) -> frozenset[int]:
    """The exit codes the planned job of `backend` with `policy` retries."""
    return _retried(lambda c: restarts.outcome(_entry(backend, policy, backoff), c))


def indexed(
    spec: Mapping[str, Any], container: str, backoff: int, changes: list[str]
) -> str | None:
    """An Indexed Job `spec` (its pod failure policy read for the container named `container`)
    -> the entry's restartPolicy on the indexed-job backend with runPolicy.backoffLimit
    `backoff` (None: the default), and one line saying what became of its retries."""
    original = _retried(lambda c: failures.job_outcome(spec, failures.failed_pod(container, c)))
    pod = (spec.get("template") or {}).get("spec") or {}
    said = f"spec.template.spec.restartPolicy {pod.get('restartPolicy', 'unset')}" + (
        ", with spec.podFailurePolicy" if spec.get("podFailurePolicy") else ", no podFailurePolicy"
    )
    chosen = _choose(
        original,
        lambda p: entry_retries("indexed-job", p, backoff),
        said,
        changes,
    )
    lost = failures.failed_pod(container, failures.TERMINATED, disrupted=True)
    entry = _entry("indexed-job", chosen or "ExitCode", backoff)
    if (
        failures.job_outcome(spec, lost).counted
        and not restarts.outcome(entry, failures.TERMINATED, disrupted=True).counted
    ):
        changes[-1] += "; a disruption (preemption, eviction, a lost node) no longer uses a retry"
    return chosen


def pytorch(policies: Mapping[str, Any], chosen: str, changes: list[str]) -> str | None:
    """A PyTorchJob's replicas' restartPolicy (role -> value, None: unset, the operator's
    default) -> the entry's restartPolicy (None: the default) for the pods of `chosen`, the
    replica the entry's pod is read from; another replica's that differs is named. Judged on
    the pytorchjob backend; every backend retries the same codes for each policy
    (tests/jobs/test_import_restarts.py holds them to it), so the stack's default backend,
    unknown here, does not change the choice."""
    effective = {r: p or pytorchjob.DEFAULT_RESTART_POLICY for r, p in policies.items()}
    for role, policy in effective.items():
        if role != chosen and policy != effective[chosen]:
            changes.append(
                f"spec.pytorchReplicaSpecs.{role}.restartPolicy {policy}: dropped; every pod of "
                f"a job entry has one restartPolicy, read from {chosen}'s"
            )
    given = policies.get(chosen)
    said = f"spec.pytorchReplicaSpecs.{chosen}.restartPolicy " + (
        str(given) if given else f"unset (the training operator's default, {effective[chosen]})"
    )
    original = _retried(lambda c: failures.pytorchjob_outcome(str(effective[chosen]), c))
    policy = _choose(
        original,
        lambda p: entry_retries("pytorchjob", p),
        said,
        changes,
    )
    if policy is None and effective[chosen] == "ExitCode":
        changes[-1] += (
            "; where the pods cannot count their attempts and no activeDeadlineSeconds is set "
            "the platform defaults a PyTorchJob to OnFailure instead, which retries every "
            "failure in place up to runPolicy.backoffLimit (docs/jobs.md, restartPolicy; the "
            "plan's restart line says which applies)"
        )
    return policy


# What Trainer's own runtimes (jobs/import_read.py UPSTREAM_RUNTIMES) leave to the defaults, as
# the API server stores the JobSet the Trainer makes (its v2.2.1 pkg/runtime sets no
# restartPolicy or backoffLimit): JobSet's webhook, pkg/webhooks/jobset_webhook.go Default,
# sets an unset pod restartPolicy to OnFailure (v0.11.1, ecaf56ab, Trainer v2.2.1's go.mod;
# v0.12.0, f22e565a, Trainer v2.3.0's and versions.JOBSET_VERSION); Kubernetes
# pkg/apis/batch/v1/defaults.go SetDefaults_Job sets an unset backoffLimit to 6 (the index's
# copy, 045bbb19: the v1.35 tag is over the fetch limit here); no podFailurePolicy; no
# failurePolicy, so a child Job that fails fails the JobSet (failures.jobset_on_failed_job).
# Read 2026-11-30.
UPSTREAM_RUNTIME_JOBSET: dict[str, Any] = {
    "replicatedJobs": [
        {
            "name": "node",
            "template": {"spec": {"backoffLimit": 6, "template": {"spec": {
                "restartPolicy": "OnFailure"}}}},
        }
    ]
}  # fmt: skip


def trainjob(
    runtime: str | None, jobset: Mapping[str, Any] | None, changes: list[str]
) -> str | None:
    """A TrainJob on `runtime`, whose JobSet spec is `jobset` as the API server stores it
    (None: not known here) -> the entry's restartPolicy (None: the default), and one line
    saying what became of its retries. A TrainJob itself sets no restart field (v2.2.1's
    runtime patches have no restartPolicy or Job fields). Judged on the trainjob backend;
    every backend retries the same codes for each policy (`pytorch`)."""
    if jobset is None:
        now = entry_retries("trainjob", "ExitCode")
        changes.append(
            f"restarts of runtime {runtime or '(none named)'}: unknown here -> the entry's "
            f"default ExitCode ({_does(now)}); if the runtime restarted other exit codes, set "
            "the entry's restartPolicy (docs/jobs.md, restartPolicy)"
        )
        return None

    def original(code: int, disrupted: bool = False) -> failures.Outcome:
        return failures.jobset_outcome(
            jobset, trainjob_backend.REPLICATED_JOB, trainjob_backend.CONTAINER, code,
            disrupted=disrupted,
        )  # fmt: skip

    said = f"restarts of runtime {runtime} " + (
        "(pods OnFailure, JobSet's default; backoffLimit 6, the Job's; no podFailurePolicy)"
        if jobset is UPSTREAM_RUNTIME_JOBSET
        else "(the platform's own)"
    )
    chosen = _choose(_retried(original), lambda p: entry_retries("trainjob", p), said, changes)
    entry = _entry("trainjob", chosen or "ExitCode")
    was = original(failures.TERMINATED, disrupted=True).counted
    now = restarts.outcome(entry, failures.TERMINATED, disrupted=True).counted
    if was != now:
        changes[-1] += (
            "; a disruption (preemption, eviction, a lost node) no longer uses a retry"
            if was
            else "; a disruption (preemption, eviction, a lost node) now uses a retry"
        )
    return chosen
