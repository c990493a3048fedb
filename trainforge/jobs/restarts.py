"""A job's restart budget: what restarts it after a failure, how often, in the pods and locally.

Two mechanisms, the same wherever the job runs:

* in the pod, torchrun's `--max-restarts` (elastic jobs: `elastic.maxRestarts`; otherwise 0)
  restarts the pod's worker group without a new pod;
* the pod is re-created (or its container restarted, OnFailure) when it exits, as the
  backend and `restartPolicy` decide: with ExitCode only for a retryable exit code (>= 128,
  trainforge/core/failures.py), up to the backend's bound (`recreations`: the backend's own
  retry bound of the restart fields its emitter writes; `outcome`: what the controller does
  with one failed pod, which the pods are told: `on_exit`).

`trainforge run-local` runs the same launcher with the same `--max-restarts` and re-creates
its local "pod" for the exits the job's controller re-creates it for (`outcome`: an indexed
Job with backoffLimit 0 for none) up to `local_recreations` times; the plan prints `describe`
for every job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainforge.core import failures
from trainforge.core.pods import KILLED, RetryInputs
from trainforge.jobs import success
from trainforge.jobs.entrypoint import not_local, user_code_runner
from trainforge.jobs.spec import JobSpec
from trainforge.training.ledger import NO_PROGRESS_LIMIT


@dataclass(frozen=True)
class RestartBudget:
    in_pod: int  # torchrun --max-restarts inside each pod
    recreations: int | None  # pod re-creations the controller allows (None: no count limit)
    on: str  # which exits re-create the pod: "retryable", "any", "none"
    bound: str  # what bounds them, in words
    fallback: int = 0  # run-local's own safety cap where the controller has no count limit
    local: int | None = None  # run-local's bound when its --pod-restarts sets one
    in_place: bool = True  # "any": the container restarts in the pod (False: a new pod)

    @property
    def local_recreations(self) -> int:
        """The local stand-in's bound: run-local's --pod-restarts when given, else the
        controller's, or run-local's safety cap (`LOCAL_CAP`) where it has none."""
        if self.local is not None:
            return self.local
        return self.recreations if self.recreations is not None else self.fallback

    @property
    def capped(self) -> bool:
        """run-local's bound is its own safety cap (`LOCAL_CAP`), not the cluster's."""
        return self.recreations is None and self.local is None and self.on != "none"


# run-local's own cap on re-creations where the cluster's controller counts none (a
# PyTorchJob under ExitCode): above the stop of the job's own ledger (the runtime's or your
# code's wrapper: attempt NO_PROGRESS_LIMIT + 1 exits 4, permanent), so that it is the ledger,
# as on the cluster, that ends a job that keeps failing, and run-local still ends one that
# nothing else would (the cluster would re-create it until activeDeadlineSeconds).
LOCAL_CAP = 4 * NO_PROGRESS_LIMIT
assert LOCAL_CAP > NO_PROGRESS_LIMIT

# The restartPolicy of a job not yet resolved against its pool (wiring.default_restart_policy
# gives ExitCode unless a PyTorchJob's pods cannot count their attempts)
DEFAULT_POLICY = "ExitCode"


def recreations(job: JobSpec, code: int = KILLED) -> int | None:
    """How many times each pod of `job` runs again when every attempt dies with `code` (the
    kernel's OOM kill by default; None: no count limit): the retry bound its backend's
    controller enforces (`Shape.retry_bound`, what the plan's "Retry bounds" prints) of the
    restart fields its emitter writes (`restart_doc`), minus the first run. One answer for the
    plan, the launch line and run-local."""
    from trainforge.jobs import backends, trainjob  # noqa: PLC0415 - backends imports us not

    job = _resolved_policy(job)
    doc = backends.EMITTERS[job.backend or "pytorchjob"].restart_doc(job)
    shape = backends.job_shape(doc)
    bound = shape.retry_bound(doc, RetryInputs(code, trainjob.runtimes_in())) if shape else None
    if bound is None or bound.attempts is None:
        return None
    return bound.attempts - 1


def _resolved_policy(job: JobSpec) -> JobSpec:
    if job.restart_policy is None:  # not resolved yet: the platform's default
        return job.model_copy(update={"restart_policy": DEFAULT_POLICY})
    return job


def outcome(job: JobSpec, code: int, *, disrupted: bool = False) -> failures.Outcome:
    """What the job's controller does with one of its pods whose training container exited
    `code` (`disrupted`: preempted, evicted or lost with its node): its backend's answer
    (`outcome` beside each emitter, from the restart fields it writes)."""
    from trainforge.jobs import backends  # noqa: PLC0415 - backends imports us not

    job = _resolved_policy(job)
    emitter = backends.EMITTERS[job.backend or "pytorchjob"]
    return emitter.outcome(job, code, disrupted=disrupted)


def on_exit(job: JobSpec) -> str:
    """The value of the pod's TRAINFORGE_ON_EXIT (trainforge.training.contract.ON_EXIT, set
    by the emitter's `launch`): what the controller does after a permanent and after a
    retryable exit of the job's pods, and once the job has succeeded (success.told, which
    the emitters call with their own `outcome`)."""
    return success.told(job, outcome)


def budget(job: JobSpec) -> RestartBudget:
    in_pod = job.elastic.max_restarts if job.elastic is not None else 0
    limit = job.run_policy.backoff_limit
    policy = job.restart_policy
    backend = job.backend or "pytorchjob"
    if policy == "Never":
        return RestartBudget(in_pod, 0, "none", "restartPolicy Never: a failed pod fails the job")
    again = recreations(job)
    if backend == "indexed-job":
        # The emitted Job sets backoffLimitPerIndex (the model's backoffLimit) and its pods
        # restartPolicy Never, which backoffLimitPerIndex requires (jobs/indexed_job.py): a
        # failed pod is replaced by a new pod with its index, and the Job controller counts
        # each index's failures alone (the pod's batch.kubernetes.io/job-index-failure-count),
        # so every pod may be re-created `limit` times, however many pods fail together.
        per_index = f"backoffLimitPerIndex {limit}, counted for each index alone"
        if policy == "OnFailure":
            bound = f"OnFailure on an indexed Job: its pods run restartPolicy Never; {per_index}"
            return RestartBudget(in_pod, again, "any", bound, in_place=False)
        return RestartBudget(in_pod, again, "retryable", _first_of(per_index, job, in_pod, again))
    if policy == "OnFailure":
        bound = f"OnFailure: containers restart in place, backoffLimit {limit}"
        if backend in ("pytorchjob", "trainjob") and job.workers > 1:
            # the training operator (PastBackoffLimit) and the Job controller of a TrainJob
            # sum the restarts of all the job's pods, and a rank that fails fails its peers:
            # each pod restarts ceil(limit / pods) times (at least once), as the plan's retry
            # bound says and run-local re-creates its one local pod
            bound += f" counts the restarts of all {job.workers} pods together ({again} each)"
        return RestartBudget(in_pod, again, "any", bound)
    if backend == "pytorchjob":
        stop = _job_ledger_stop(job, in_pod) or "set runPolicy.activeDeadlineSeconds to bound them"
        return RestartBudget(
            in_pod,
            None,
            "retryable",
            f"the operator does not count ExitCode re-creations against backoffLimit; {stop}",
            fallback=LOCAL_CAP,
        )
    bound = f"the child Job's backoffLimit {limit}"
    if job.workers > 1:
        # the Job controller counts the failed pods of all the Job's pods: N pods that fail
        # together reach backoffLimit + 1 failures after ceil((limit + 1) / N) attempts
        bound += f" counts the failed pods of all {job.workers} pods together ({again} each)"
    return RestartBudget(in_pod, again, "retryable", _first_of(bound, job, in_pod, again))


def _job_ledger_stop(job: JobSpec, in_pod: int) -> str | None:
    """`ledger_stop` for `job` where its pods keep a run ledger (the bundled runtime, your code
    under its wrapper: usercode.start_check, its ledger on the team's FSx); None for a
    `command`, which runs as written and counts nothing."""
    if job.entrypoint is None:
        return ledger_stop(own_code=False, in_pod=in_pod)
    if user_code_runner(job):
        return ledger_stop(own_code=True, in_pod=in_pod, where="its ledger on the team's FSx")
    return None


def _first_of(bound: str, job: JobSpec, in_pod: int, again: int | None) -> str:
    """An ExitCode Job's (a TrainJob's child Job, an indexed Job) own bound and the run
    ledger's stop beside it, where the stop can come first: the ledger's exit 4 (no_progress)
    is permanent, which the Job's pod failure policy fails the Job on (FailJob for 1-127), so
    whichever comes first ends the job. It can where the attempts each pod runs (its `again`
    re-creations + 1, times torchrun's `in_pod` restarts + 1, each process an attempt) pass
    NO_PROGRESS_LIMIT; where the pods keep a ledger (`_job_ledger_stop`)."""
    stop = _job_ledger_stop(job, in_pod)
    runs = None if again is None else (again + 1) * (in_pod + 1)
    if stop is None or (runs is not None and runs <= NO_PROGRESS_LIMIT):
        return bound
    return f"{bound}; {stop}, whichever comes first"


def ledger_stop(*, own_code: bool, in_pod: int, where: str = "") -> str:
    """The run ledger's stop in words, as `RunLedger.attempts_without_progress` counts it: the
    runtime (or, `own_code`, the wrapper your code runs under: usercode.start_check) exits 4
    (no_progress) on the attempt after NO_PROGRESS_LIMIT failed ones in a row that started from
    one checkpoint; an attempt that started from a newer one made progress and the count
    begins again. Every process torchrun starts begins an attempt, so with `in_pod` restarts
    torchrun's count too, deliberately: a rank that fails again and again from one checkpoint
    is no closer to finishing whoever restarts it. `where`: where the ledger must be."""
    who = "your code's wrapper" if own_code else "the runtime"
    seen = ["the newest step_<N> in the checkpoint directory when each began"] if own_code else []
    say = "; ".join([*seen, where] if where else seen)
    out = f"{who} stops after {NO_PROGRESS_LIMIT} failed attempts in a row from one checkpoint" + (
        f" ({say})" if say else ""
    )
    if in_pod:
        out += ", torchrun's restarts counted as attempts"
    return out


def local_budget(
    job: JobSpec, *, max_restarts: int | None = None, pod_restarts: int | None = None
) -> RestartBudget:
    """The budget `run-local --stack` runs JOB with: the job's, with run-local's
    `--max-restarts` (torchrun's restarts) and `--pod-restarts` (the local re-creations) over
    it when given, so that the line it prints is what it runs."""
    b = budget(job)
    if max_restarts is not None:
        b = replace(b, in_pod=max_restarts)
    if pod_restarts is not None and pod_restarts != b.local_recreations:
        b = replace(b, local=pod_restarts)
    return b


def adhoc_budget(max_restarts: int, pod_restarts: int) -> RestartBudget:
    """The budget of `run-local SCRIPT | -m MODULE | pkg.mod:func` (no stack: no controller):
    torchrun's `--max-restarts`, and the local pod re-created on a retryable exit up to
    `--pod-restarts` times."""
    return RestartBudget(
        max_restarts, pod_restarts, "retryable", "run-local --pod-restarts; no stack, no controller"
    )


def describe(job: JobSpec, b: RestartBudget | None = None) -> str:
    """One line: torchrun's restarts, the pod re-creations and their bound, run-local's.
    `b`: the budget to describe (default: the job's own, `budget(job)`)."""
    b = b or budget(job)
    what = {
        "none": "never re-created",
        "any": "restarted on any failure" if b.in_place else "re-created on any failure",
        "retryable": "re-created on exit >= 128",
    }[b.on]
    count = "no count limit" if b.recreations is None else f"at most {b.recreations}"
    local = f"run-local: the same, up to {b.local_recreations}"
    if b.capped:
        local = (
            f"run-local: the same, with a safety cap of its own at {b.local_recreations} "
            "re-creations, which the cluster does not have"
        )
    if b.on == "none":  # run-local re-creates nothing either, whatever --pod-restarts says
        local = "run-local: the same" + (
            f" (--pod-restarts {b.local} does not apply)" if b.local else ""
        )
    elif b.local is not None:
        local += " (--pod-restarts)"
    if not_local(job) is not None:  # run-local refuses it: nothing of it runs locally
        local = "run-local: not run (a command runs a program of your image)"
    return f"torchrun restarts in the pod {b.in_pod}; pod {what}, {count} ({b.bound}); {local}"


def launch_line(job: JobSpec, b: RestartBudget | None = None) -> str:
    """The launch model of a *resolved* job in one line: "N pods x M processes, restarts: ...".

    One function for the plan (the restart budget section) and `trainforge run-local`, which
    starts pods x processes per pod local workers with this budget, so the two cannot tell a
    reader different numbers. A job not yet resolved against its pool (gpusPerWorker unset)
    has no process count yet: resolve it first (trainforge.jobs.wiring.resolve_job).

    `b` is the budget run-local runs with where it is not the job's own (`local_budget`:
    its --max-restarts/--pod-restarts; `adhoc_budget`: a script without a stack)."""
    pods = "pod" if job.workers == 1 else "pods"
    procs = "process" if job.procs == 1 else "processes"
    return f"{job.workers} {pods} x {job.procs} {procs}, restarts: {describe(job, b)}"


_RERUN = {
    "none": "never re-run",
    "any": "re-run on any failure",
    "retryable": "re-run on exit >= 128",
}


def adhoc_line(workers: int, b: RestartBudget) -> str:
    """What `run-local SCRIPT | -m MODULE | pkg.mod:func` runs, in one line: one local torchrun
    of `workers` processes with the budget `b` (`adhoc_budget`).

    Not `launch_line`: with no stack there is no job the cluster would run, so no pods. The
    launch line of its stand-in job ("2 pods x 1 process, torchrun restarts in the pod ...")
    said two pods with a torchrun each, where one torchrun runs every rank and restarts and
    is re-run as one (jobs.local.launcher, jobs.local.launch)."""
    procs = "process" if workers == 1 else "processes"
    times = "time" if b.in_pod == 1 else "times"
    again = "time" if b.local_recreations == 1 else "times"
    rerun = _RERUN[b.on] + (f", at most {b.local_recreations} {again}" if b.on != "none" else "")
    line = (
        f"1 local torchrun x {workers} {procs} (no stack, so no pods), restarts: torchrun "
        f"restarts its {procs} at most {b.in_pod} {times} (--max-restarts); the torchrun is "
        f"{rerun} (--pod-restarts)"
    )
    if b.in_pod or b.local_recreations:  # with no restart at all there is no count to say
        line += f"; {ledger_stop(own_code=True, in_pod=b.in_pod)}"
    return line
