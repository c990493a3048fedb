"""Emitter: a resolved JobSpec + JobTarget -> a plain `batch/v1` Indexed Job and a headless
Service. No operator: the Kubernetes Job controller runs it on any cluster.

The Job has `completionMode: Indexed` with parallelism = completions = workers, so pod `i`
has completion index `i` and the stable hostname `<job>-<i>`; with `subdomain: <job>` and
the headless Service `<job>`, rank 0 is reachable as `<job>-0.<job>` (DNS records are
published before pods are ready). The pods are the shared pod builder's
(`trainforge.jobs.pod`) with the same env contract as the other backends: MASTER_ADDR (rank
0's name), MASTER_PORT, RANK (the completion index, read from the pod's
`batch.kubernetes.io/job-completion-index` annotation, which is what JOB_COMPLETION_INDEX
holds) and WORLD_SIZE; the container command is the same as everywhere.

Failures. A plain Job cannot restart pods it considers healthy, so the group restart comes
from the ranks themselves: when one pod fails, every other rank's next collective fails (its
peer's sockets close; NCCL or gloo raises) and its process exits non-zero, so every index
fails within seconds, and each is re-created (a new pod with the same hostname) up to
`backoffLimitPerIndex` times. The new pods meet at `<job>-0.<job>` in a fresh rendezvous and
resume from the newest complete checkpoint: the group restarts the way static torchrun
expects, all together, as it does under a PyTorchJob. `podFailurePolicy` does not count
disruptions (preemption, eviction, node loss: condition DisruptionTarget) against that
budget, and with `restartPolicy: ExitCode` fails the Job at once on the program's own exit
codes (1-127). `maxFailedIndexes: 0` ends the Job, and frees every GPU, as soon as one index
has used up its retries; `podReplacementPolicy: Failed` creates a replacement only after the
old pod has fully terminated (it may still be writing its SIGTERM checkpoint). docs/jobs.md
walks through the timeline.
"""

from __future__ import annotations

from typing import Any

from trainforge.core import failures
from trainforge.core.contract import JobTarget
from trainforge.core.errors import JobConfigError
from trainforge.jobs import pod, success
from trainforge.jobs.pod import labels
from trainforge.jobs.spec import JobSpec, RunPolicySpec

BACKEND = "indexed-job"
API_VERSION = "batch/v1"
KIND = "Job"
PLURAL = "jobs"
KUEUE_FRAMEWORK = "batch/job"  # kueue v0.19.2 job_controller.go FrameworkName
# Where a fleet manager's Job names MultiKueue: the Job controller skips a Job whose
# spec.managedBy is not kubernetes.io/job-controller (KEP-4368, GA in Kubernetes 1.35).
MANAGED_BY = ("spec", "managedBy")
CONTAINER = "trainer"
MASTER_PORT = 29500  # torchrun's default; declared on the container and the Service
PORT_NAME = "rendezvous"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set by the Job controller on its pods
# restartPolicy ExitCode as the training operator v1 implements it: the codes it does not
# retry (1-127, the program's own failures) fail the Job; the others (signals: OOM kill 137,
# SIGTERM 143; the runtime's 200-205) are retried (trainforge.core.failures).
PERMANENT_EXIT_CODES = list(failures.PERMANENT_EXIT_CODES)
# What a plain Job does when it ends: the Job controller deletes its running pods on failure
# and keeps finished ones, i.e. the model's default cleanPodPolicy.
JOB_CLEAN_POD_POLICY = RunPolicySpec().clean_pod_policy


def service_name(job: JobSpec) -> str:
    return job.name


def master_addr(job: JobSpec) -> str:
    """Index 0's hostname in the Service's subdomain (resolved in the pod's namespace)."""
    return f"{job.name}-0.{service_name(job)}"


def torchrun_env(job: JobSpec) -> tuple[dict[str, Any], ...]:
    """The `PET_*` variables torchrun reads for its flags (PET_NNODES for --nnodes, ...), as
    the training operator v1.9.4 sets them on a PyTorchJob's pods (pkg/controller.v1/pytorch
    envvar.go, master.go) and Trainer's torch plugin on a TrainJob's: for a `command` job, whose
    plain `torchrun train.py` has no flags of ours. Without them each pod of an indexed Job ran
    its own one-node world (torchrun's defaults), every pod rank 0 of a world of 1."""
    return (
        {"name": "PET_NNODES", "value": str(job.workers)},
        {"name": "PET_NPROC_PER_NODE", "value": str(job.procs)},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {"fieldRef": {"fieldPath": pod.COMPLETION_INDEX_FIELD}},
        },
        {"name": "PET_MASTER_ADDR", "value": master_addr(job)},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    )


def launch(job: JobSpec) -> pod.Launch:
    env = pod.static_rendezvous_env(job, master_addr(job), MASTER_PORT)
    if job.entrypoint is not None and job.entrypoint.kind == "command":
        env += torchrun_env(job)
    return pod.Launch(
        container=CONTAINER,
        port=MASTER_PORT,
        port_name=PORT_NAME,
        rendezvous_env=env,
        on_exit=success.told(job, outcome),
    )


def outcome(job: JobSpec, code: int, *, disrupted: bool = False) -> failures.Outcome:
    """What the Job controller does with a pod of `job` whose trainer container exited `code`
    (core.failures), read from the restart fields this module writes (`restart_doc`)."""
    failed = failures.failed_pod(CONTAINER, code, disrupted=disrupted)
    return failures.job_outcome(restart_doc(job)["spec"], failed)


def check(job: JobSpec, target: JobTarget, where: str) -> None:
    """Refuse, at preview, what a plain Indexed Job cannot do."""
    if job.elastic is not None:
        raise JobConfigError(
            f"{where}.preset",
            "elastic",
            "an indexed Job runs a fixed number of pods (parallelism = completions), so it "
            "cannot grow or shrink; use backend: pytorchjob for elastic jobs",
        )
    if job.run_policy.clean_pod_policy != JOB_CLEAN_POD_POLICY:
        raise JobConfigError(
            f"{where}.runPolicy.cleanPodPolicy",
            job.run_policy.clean_pod_policy,
            f"a batch/v1 Job always deletes its running pods when it ends and keeps finished "
            f"ones ({JOB_CLEAN_POD_POLICY!r}); leave it unset, or use backend: pytorchjob",
        )


def pod_failure_policy(job: JobSpec) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        # Preempted, evicted, or lost with its node: re-created without using up a retry.
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]
    if job.restart_policy == "ExitCode":
        rules.append(
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER,
                    "operator": "In",
                    "values": PERMANENT_EXIT_CODES,
                },
            }
        )
    return {"rules": rules}


# A pod failure policy requires restartPolicy Never: a failed pod is replaced by a new one
# with the same index and hostname.
POD_RESTART_POLICY = "Never"


def _restart_fields(job: JobSpec) -> dict[str, Any]:
    return {
        # Retries per index: the model's backoffLimit (Never: none).
        "backoffLimitPerIndex": 0
        if job.restart_policy == "Never"
        else job.run_policy.backoff_limit,
        "maxFailedIndexes": 0,
        "podReplacementPolicy": "Failed",
        "podFailurePolicy": pod_failure_policy(job),
    }


def restart_doc(job: JobSpec) -> dict[str, Any]:
    """The Job's fields its retry bound reads (core.pods.job_spec_bound: the pods, the
    per-index limit, the pod failure policy, the pods' restartPolicy and container), as
    `workload_manifest` writes them, without the pods: what jobs.restarts reads the job's
    restart budget from."""
    pod_spec = {"restartPolicy": POD_RESTART_POLICY, "containers": [{"name": CONTAINER}]}
    spec = {"parallelism": job.workers, **_restart_fields(job), "template": {"spec": pod_spec}}
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}


def workload_manifest(job: JobSpec, target: JobTarget, template: dict[str, Any]) -> dict[str, Any]:
    rp = job.run_policy
    pod_template = {
        "metadata": template["metadata"],
        "spec": {
            **template["spec"],
            "subdomain": service_name(job),
            "restartPolicy": POD_RESTART_POLICY,
        },
    }
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": job.workers,
        "parallelism": job.workers,
        **_restart_fields(job),
        "template": pod_template,
    }
    if rp.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = rp.ttl_seconds_after_finished
    if rp.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = rp.active_deadline_seconds
    return pod.workload_object(API_VERSION, KIND, job, target, spec)


def service_manifest(job: JobSpec, target: JobTarget) -> dict[str, Any]:
    """Headless: DNS records `<job>-<i>.<job>` for the pods, published before they are ready
    (training pods have no readiness probe to pass, and rank 0 must be found at once)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(job),
            "namespace": target.namespace,
            "labels": labels(job),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {pod.JOB_LABEL: job.name, JOB_NAME_LABEL: job.name},
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": MASTER_PORT,
                    "targetPort": MASTER_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def podmonitor_manifest(job: JobSpec, target: JobTarget) -> dict[str, Any] | None:
    """Rank 0 is the pod with completion index 0."""
    return pod.podmonitor_manifest(
        job, target, {pod.COMPLETION_INDEX_LABEL: "0"}, [pod.COMPLETION_INDEX_LABEL]
    )
