"""When a job has succeeded, by its backend's controller, and what follows a pod's exit then.

One model for run-local's verdict (jobs/local.py `success_ranks`, `succeeded_line`), the
pods' TRAINFORGE_ON_EXIT (`told`, which every emitter's `launch` and restarts.on_exit call)
and the docs (docs/jobs.md, docs/reliability.md). Below the emitters and restarts.py, which
both read it (restarts reads the emitters: tests/test_import_graph.py).
"""

from __future__ import annotations

from collections.abc import Callable

from trainforge.core import failures
from trainforge.jobs.spec import JobSpec

# When each backend's controller marks the job succeeded, read at its pinned tag (2026-11-30):
# - "master": the training operator v1.9.4 (kubeflow/trainer tag v1.9.4, 4445c12a,
#   pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus: "when master is
#   succeed, the job is finished", whatever its Workers do), for a PyTorchJob with a Master;
# - "any": the same function without a Master (an elastic PyTorchJob: Worker only,
#   pytorchjob.py): succeeded once any Worker completed (`ElasticPolicy != nil && succeeded > 0`);
# - "all": an Indexed Job is complete "when there is one successfully completed Pod for each
#   index" (batch/v1 JobSpec.completionMode; indexed_job.py sets no successPolicy), and a
#   TrainJob's JobSet succeeds by its default successPolicy, operator All (kubernetes-sigs/
#   jobset v0.12.0, f22e565a, pkg/webhooks/jobset_webhook.go Default; Trainer v2.2.1's
#   torch-distributed runtime sets none) over its one child Job, Indexed, completions numNodes.
# A job with no stack (run-local SCRIPT, or the runtime's flags alone) has no controller:
# run-local ends it by the platform's default backend's rule (`success_rule(None)`).
SUCCESS_RULE: dict[str, str] = {"pytorchjob": "master", "trainjob": "all", "indexed-job": "all"}


def success_rule(job: JobSpec | None) -> str:
    """The rule ("master", "any" or "all": SUCCESS_RULE) for `job`'s backend (the platform's
    default, a PyTorchJob, where it names none or there is no job); "any" for an elastic
    PyTorchJob."""
    if job is not None and job.elastic is not None:
        return "any"
    return SUCCESS_RULE[(job.backend if job is not None else None) or "pytorchjob"]


def after_success(job: JobSpec) -> str | None:
    """What `job`'s controller does once the job has succeeded while some pod has not (a
    PyTorchJob: its Master's, or an elastic one's Worker's, exit 0 ends it; its
    runPolicy.cleanPodPolicy cleans up the rest: failures.after_success_words); None where
    the job succeeds only when every pod has."""
    rule = success_rule(job)
    if rule == "all":
        return None
    return failures.after_success_words(rule, job.run_policy.clean_pod_policy)


def told(job: JobSpec, outcome: Callable[[JobSpec, int], failures.Outcome]) -> str:
    """The pods' TRAINFORGE_ON_EXIT of `job` whose controller answers `outcome(job, code)`:
    what it does after a permanent and a retryable exit, and once the job has succeeded
    (`after_success`)."""
    return failures.told(lambda code: outcome(job, code), after_success(job))
