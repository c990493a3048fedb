"""What the controllers do with a training pod that failed: one model of the upstream rules.

A training pod's exit code decides what happens next, and each backend's controller decides
it its own way. This module is the one place that says how, read by the emitters (the pod
failure policies they write), the plan (`Shape.retry_bound`, trainforge.plan.checks.
retry_bounds), the launch line and run-local's budget (trainforge.jobs.restarts), the pods
(TRAINFORGE_ON_EXIT: `on_exit_value`), the runtime (trainforge.training.exits, launch and
usercode: whether a code is retryable, what the exit line says happens next) and
docs/reliability.md. Standard library only: the runtime ships it into pods with
`trainforge.core`.

Each rule below is transcribed from upstream's source at the pinned tag, and upstream's own
table tests run through it (tests/fixtures/upstream/restarts.yaml, tests/test_upstream_restarts.py):

* Training operator v1.9.4 (versions.TRAINING_OPERATOR_VERSION; kubeflow/trainer tag v1.9.4,
  read 2026-11-30 from the local mirror): `pkg/util/train/train_util.go` IsRetryableExitCode
  is `exitCode >= 128` (`operator_retries`). `pkg/controller.v1/common/pod.go` ReconcilePods:
  a Failed pod of a replica with `restartPolicy: ExitCode` is deleted and re-created when the
  exit code of its `pytorch` container is retryable, and marks the job Failed otherwise; a
  Failed pod whose container never terminated reads the magic code 0xbeef (retryable:
  `OPERATOR_NO_EXIT_CODE`). OnFailure and Always pods restart their container in place.
  `pkg/core/job.go` PastBackoffLimit sums the container restart counts of *Running* pods of
  OnFailure/Always/ExitCode replicas only; an ExitCode pod runs with the pod restartPolicy
  Never (its container never restarts), so its re-creations are never counted.
* Kubernetes Job controller (the pinned minor, versions.KUBERNETES_VERSION):
  `pkg/controller/job/pod_failure_policy.go` matchPodFailurePolicy (`match_pod_failure_policy`):
  the rules in order; `onExitCodes` matches the first terminated, non-zero container (then
  init container) of the named container (any when unnamed) whose code is In/NotIn the values
  (an unknown operator matches nothing); `onPodConditions` matches a condition of the same
  type and status (a pattern without status: True, as the API server defaults it); Ignore does not count the failure against backoffLimit, Count and FailJob
  and FailIndex do; a rule with an unknown action is skipped; no match counts it.
* JobSet v0.12.0 (a TrainJob's; versions.JOBSET_VERSION): `jobset_on_failed_job`.
* torchrun's elastic agent (torch 2.13.0) inside the pod: `torchrun_restarts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# training operator v1.9.4 pkg/controller.v1/common/pod.go ReconcilePods: the exit code it
# reads from a failed pod whose main container has no terminated state ("magic number")
OPERATOR_NO_EXIT_CODE = 0xBEEF
KILLED = 137  # 128 + SIGKILL: the kernel's OOM killer, a kill -9
TERMINATED = 143  # 128 + SIGTERM: the kubelet stopping a pod (preemption, drain, deletion)
DISRUPTION_TARGET = "DisruptionTarget"  # the pod condition of a preempted, evicted or lost pod


def operator_retries(code: int) -> bool:
    """Training operator v1.9.4 `IsRetryableExitCode`: whether `restartPolicy: ExitCode`
    re-creates a pod that exited with `code` (else the job fails)."""
    return code >= 128


# The exit codes ExitCode treats as permanent (1-127), as the FailJob rule of a Job's pod
# failure policy that makes a plain Job or a TrainJob's child Job do what the operator does
# (0 is success, never a failure; the API refuses it in an `In` rule).
PERMANENT_EXIT_CODES: tuple[int, ...] = tuple(c for c in range(1, 256) if not operator_retries(c))

# Pod failure policy actions (k8s.io/api batch/v1 PodFailurePolicyAction at v0.35.7)
FAIL_JOB, FAIL_INDEX, IGNORE, COUNT = "FailJob", "FailIndex", "Ignore", "Count"
_ACTIONS = (FAIL_JOB, FAIL_INDEX, IGNORE, COUNT)


def _terminated_match(statuses: Sequence[Mapping[str, Any]], req: Mapping[str, Any]) -> bool:
    """getMatchingContainerFromList: the first terminated container status (of the named
    container, any when unnamed) with a non-zero code that the operator matches."""
    name = req.get("containerName")
    for status in statuses or ():
        term = (status.get("state") or {}).get("terminated")
        if term is None:
            continue  # still terminating: no exit code to match
        if name is not None and name != status.get("name"):
            continue
        code = int(term.get("exitCode", 0))
        if code == 0:
            continue
        values = {int(v) for v in req.get("values") or ()}
        operator = req.get("operator")
        if (operator == "In" and code in values) or (operator == "NotIn" and code not in values):
            return True
    return False


# A pattern without `status` matches the condition's True: k8s.io/api batch/v1
# PodFailurePolicyOnPodConditionsPattern.Status "Defaults to True" (v0.36.0, as Trainer v2.2.1's
# CRDs quote it: charts/kubeflow-trainer/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml
# at c505fc7c, read 2026-11-30), which the API server's defaulting writes (kubernetes
# pkg/apis/batch/v1/defaults.go SetDefaults_Job; the v1.35 tag is over the fetch limit here).
POD_CONDITION_STATUS_DEFAULT = "True"


def _condition_match(conditions: Sequence[Mapping[str, Any]], patterns: Sequence[Any]) -> bool:
    """onPodConditions: a condition of a pattern's type and status (unset: True)."""
    return any(
        c.get("type") == p.get("type")
        and c.get("status") == (p.get("status") or POD_CONDITION_STATUS_DEFAULT)
        for c in conditions or ()
        for p in patterns
    )


def match_pod_failure_policy(
    policy: Mapping[str, Any] | None, pod: Mapping[str, Any]
) -> tuple[bool, str | None]:
    """The Job controller's answer for one failed pod: (whether the failure counts against
    backoffLimit / backoffLimitPerIndex, the action of the rule that matched or None)."""
    if not policy:
        return True, None
    status = pod.get("status") or {}
    for rule in policy.get("rules") or ():
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            req = rule["onExitCodes"]
            matched = _terminated_match(status.get("containerStatuses"), req) or (
                _terminated_match(status.get("initContainerStatuses"), req)
            )
        elif rule.get("onPodConditions") is not None:
            matched = _condition_match(status.get("conditions"), rule["onPodConditions"])
        else:
            matched = False
        if matched and action in _ACTIONS:
            return action != IGNORE, action
    return True, None


def failed_pod(container: str, code: int, *, disrupted: bool = False) -> dict[str, Any]:
    """A Failed pod whose `container` exited `code` (`disrupted`: with the DisruptionTarget
    condition that preemption, eviction and the pod garbage collector of a lost node set)."""
    conditions = [{"type": DISRUPTION_TARGET, "status": "True"}] if disrupted else []
    return {
        "status": {
            "phase": "Failed",
            "conditions": conditions,
            "containerStatuses": [{"name": container, "state": {"terminated": {"exitCode": code}}}],
        }
    }


@dataclass(frozen=True)
class Outcome:
    """What the controller does next with one failed pod: `restarts` (the pod is re-created,
    or its container restarted `in_place`), `counted` against the job's restart budget, or
    `fails` ("job", "index") the job or its index at once."""

    restarts: bool
    counted: bool
    in_place: bool = False
    fails: str | None = None
    budget: str = "backoffLimit"  # the field that counts it

    @property
    def words(self) -> str:
        """The outcome in words, as the runtime's exit line, the plan and the docs print it."""
        if self.fails == "job":
            return "the job fails"
        if self.fails == "index":
            return "its index fails"
        if not self.restarts:
            return "the job fails"
        what = "the container restarts in place" if self.in_place else "the pod is re-created"
        # which count: the controller's; the run ledger's own count of failed attempts in a
        # row (no_progress) is another, said beside it (ledger.RunLedger.count_words)
        counted = "counted" if self.counted else "not counted"
        return f"{what}, {counted} against {self.budget}"


# What the training operator does with a job's pods once the job has finished (Succeeded or
# Failed), by its runPolicy.cleanPodPolicy: kubeflow/trainer tag v1.9.4 (4445c12a, read
# 2026-11-30) pkg/controller.v1/common/job.go ReconcileJobs: a finished job's pods are only
# cleaned up (CleanUpResources), never re-created; DeletePodsAndServices deletes none under
# None, the Running and Pending ones under Running, every one under All (pytorch_defaults.go
# defaults an unset policy to None; the platform's emitter writes the job's, default Running).
CLEAN_POD_WORDS = {
    "None": "by cleanPodPolicy None the operator leaves every pod as it is",
    "Running": (
        "by cleanPodPolicy Running the operator deletes the pods still running or pending and "
        "keeps the finished ones"
    ),
    "All": "by cleanPodPolicy All the operator deletes every pod",
}


def clean_pod_words(clean_pod_policy: str) -> str:
    """What the operator does with a finished job's pods (CLEAN_POD_WORDS)."""
    return CLEAN_POD_WORDS.get(clean_pod_policy, f"by cleanPodPolicy {clean_pod_policy}")


def after_success_words(rule: str, clean_pod_policy: str) -> str:
    """What a PyTorchJob's controller does once the job has succeeded while some of its pods
    have not (`rule` "master": its Master's exit 0 ends it; "any", an elastic one: any
    Worker's): no pod is re-created, and its pods are cleaned up by `clean_pod_policy`. A
    Worker pod's exit line says it (TRAINFORGE_ON_EXIT's `succeeded` part); no ';' in it."""
    who = "the Master" if rule == "master" else "any Worker"
    return (
        f"once {who} has exited 0 the job has succeeded: no pod is re-created, and "
        f"{clean_pod_words(clean_pod_policy)}"
    )


def pytorchjob_outcome(restart_policy: str, code: int, *, disrupted: bool = False) -> Outcome:
    """Training operator v1.9.4 (ReconcilePods, PastBackoffLimit) for a pod of a replica with
    `restart_policy` whose container exited `code`. `disrupted`: the pod itself failed
    (preempted, evicted: phase Failed) instead of its container alone; under OnFailure the
    operator then deletes and re-creates it, and PastBackoffLimit, which counts the container
    restarts of Running pods only, never counts it."""
    if restart_policy == "Never":
        return Outcome(False, True, fails="job")
    if restart_policy == "ExitCode":
        if operator_retries(code):
            return Outcome(True, False)
        return Outcome(False, True, fails="job")
    if disrupted:
        return Outcome(True, False)
    return Outcome(True, True, in_place=True)  # OnFailure, Always


def job_outcome(spec: Mapping[str, Any], pod: Mapping[str, Any]) -> Outcome:
    """The Kubernetes Job controller for one failed pod of the Job `spec` (a plain Job, or a
    TrainJob's child Job): its pod failure policy first, then the default (counted)."""
    count, action = match_pod_failure_policy(spec.get("podFailurePolicy"), pod)
    per_index = spec.get("backoffLimitPerIndex") is not None
    # an index that fails ends the Job once more than maxFailedIndexes have (0: the first)
    index = "job" if per_index and spec.get("maxFailedIndexes") == 0 else "index"
    if action == FAIL_JOB:
        return Outcome(False, True, fails="job")
    if action == FAIL_INDEX:
        return Outcome(False, True, fails=index)
    if count:
        # a limit of 0 (the API server's default backoffLimit is 6): the first counted
        # failure exceeds it
        limit = spec["backoffLimitPerIndex"] if per_index else spec.get("backoffLimit")
        if int(6 if limit is None else limit) == 0:
            return Outcome(False, True, fails=index if per_index else "job")
    # OnFailure restarts a failed container in the pod; a pod that failed as a whole (a
    # disruption) is replaced by a new one
    disrupted = any(
        c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )
    pod_policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    in_place = pod_policy == "OnFailure" and not disrupted
    budget = "backoffLimitPerIndex" if per_index else "backoffLimit"
    return Outcome(True, count, in_place=in_place, budget=budget)


def torchrun_restarts(restart_count: int, max_restarts: int) -> bool:
    """Whether torchrun's elastic agent restarts its worker group after a worker failed, in
    the pod, whatever the exit code: torch 2.13.0 `torch/distributed/elastic/agent/server/
    api.py` SimpleElasticAgent._invoke_run restarts a FAILED or UNHEALTHY group while it has
    restarts left (`--max-restarts`), and `local_elastic_agent.py` gives every worker
    TORCHELASTIC_RESTART_COUNT (the restarts so far) and TORCHELASTIC_MAX_RESTARTS. Under
    trainforge's launcher a group that ended no_progress (4) is not restarted: the run
    ledger's stop is final (training/launch.stop_restarts_on_final)."""
    return restart_count < max_restarts


# JobSet failure policy actions (sigs.k8s.io/jobset v0.12.0 api jobset/v1alpha2)
FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"


def jobset_on_failed_job(
    failure_policy: Mapping[str, Any] | None,
    restarts_towards_max: int = 0,
    action: str = RESTART_JOBSET,
) -> tuple[str, int]:
    """What a JobSet does when one of its child Jobs failed ("fail" or "restart", and its
    status.restartsCountTowardsMax after): JobSet v0.12.0 `pkg/controllers/failure_policy.go`
    executeFailurePolicy (no failurePolicy: the JobSet fails; a rule's action, else the
    default RestartJobSet) and its appliers: RestartJobSet fails the JobSet once
    restartsCountTowardsMax reaches `maxRestarts` (0: at the first failed Job), else restarts
    every Job and counts it; RestartJobSetAndIgnoreMaxRestarts restarts without counting.
    Failure policy rules (by Job failure reason or message) are not modelled: the platform's
    runtimes set none."""
    if failure_policy is None or action == FAIL_JOBSET:
        return "fail", restarts_towards_max
    if action == RESTART_JOBSET_IGNORE_MAX:
        return "restart", restarts_towards_max
    if restarts_towards_max >= int(failure_policy.get("maxRestarts") or 0):
        return "fail", restarts_towards_max
    return "restart", restarts_towards_max + 1


def jobset_outcome(
    jobset: Mapping[str, Any],
    replicated_job: str,
    container: str,
    code: int,
    *,
    disrupted: bool = False,
) -> Outcome:
    """What a JobSet (`jobset`: its spec, or a Trainer runtime's JobSet template spec) and its
    child Job do with a pod of `replicated_job` whose `container` exited `code`: the Job
    controller's answer (`job_outcome` of that replicated job's Job spec), and where the
    child Job fails, the JobSet's failure policy (`jobset_on_failed_job`: it fails, or
    restarts every Job, counted against its maxRestarts)."""
    rjobs = jobset.get("replicatedJobs") or []
    rjob = next((r for r in rjobs if r.get("name") == replicated_job), {})
    spec = (rjob.get("template") or {}).get("spec") or {}
    then = job_outcome(spec, failed_pod(container, code, disrupted=disrupted))
    verdict = jobset_on_failed_job(jobset.get("failurePolicy"))[0]
    if then.fails is not None and verdict == "restart":
        return Outcome(True, True, budget="the JobSet's maxRestarts")
    return then


# --- what the pod is told: the outcome of each class of exit code, in words --------------

PERMANENT, RETRYABLE = "permanent", "retryable"  # the operator's two classes of exit code


def exit_class(code: int) -> str:
    return RETRYABLE if operator_retries(code) else PERMANENT


SUCCEEDED = "succeeded"  # ON_EXIT's part for a job that can succeed before all its pods have


def on_exit_value(permanent: Outcome, retryable: Outcome, succeeded: str | None = None) -> str:
    """The contract variable's value (trainforge.training.contract.ON_EXIT): what the job's
    controller does after a pod exits with a code of each class, and (`succeeded`, for a
    PyTorchJob: `after_success_words`) what it does instead once the job has succeeded, which
    a Worker pod's exit may follow (its Master's exit 0 ends the job). No ';' in the words."""
    value = f"{PERMANENT}={permanent.words};{RETRYABLE}={retryable.words}"
    return value + (f";{SUCCEEDED}={succeeded}" if succeeded else "")


def told(outcome: Callable[[int], Outcome], succeeded: str | None = None) -> str:
    """`on_exit_value` of a job whose controller answers `outcome(code)` for a pod that exited
    `code`: what it does after a permanent (1) and after a retryable exit (137)."""
    return on_exit_value(outcome(PERMANENT_EXIT_CODES[0]), outcome(KILLED), succeeded)


def _on_exit_parts(value: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in value.split(";") if "=" in part)


def on_exit_words(value: str, code: int) -> str | None:
    """What `on_exit_value` says the controller does after exit `code` (None: not said)."""
    return _on_exit_parts(value).get(exit_class(code)) or None


def on_exit_succeeded(value: str) -> str | None:
    """What `on_exit_value` says the controller does once the job has succeeded (None: the
    job succeeds only when every pod has, so no failed pod follows its success)."""
    return _on_exit_parts(value).get(SUCCEEDED) or None
