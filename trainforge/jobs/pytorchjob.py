"""Emitter: a resolved JobSpec + JobTarget -> Kubeflow training-operator v1 objects.

Produces plain dicts (what `kubectl apply` would take), so they can be validated offline
against the upstream CRD schema, the operator's admission-webhook rules and the core
PodTemplate schema, and handed to `kubernetes.apiextensions.CustomResource` unchanged.

The pods come from the shared pod builder (`trainforge.jobs.pod`); this module adds what is
PyTorchJob-specific: the `pytorch` container name and `pytorchjob-port` the operator wires
(it sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE itself), Master/Worker replicas or
an elasticPolicy, and the runPolicy. How the operator wires a pod: see `pod`'s docstring.
"""

from __future__ import annotations

from typing import Any

from trainforge.core.contract import JobTarget
from trainforge.jobs import pod
from trainforge.jobs.codeship import CodeBundle

# Re-exported: callers written before the pod builder was shared import them from here.
from trainforge.jobs.pod import (  # noqa: F401
    JOB_LABEL,
    METRICS_PORT_NAME,
    RUN_AS_USER,
    TEAM_LABEL,
    TERMINATION_MARGIN,
    TMP_SIZE,
    EmittedJob,
    checkpoint_dir,
    command,
    container_security_context,
    default_image,
    env,
    labels,
    output_dir,
    resources,
    tolerations,
    training_args,
    with_user_env,
)
from trainforge.jobs.spec import JobSpec

BACKEND = "pytorchjob"
API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
CONTAINER = "pytorch"  # the operator only wires a container with this name
RDZV_PORT_NAME = "pytorchjob-port"  # the operator reads MASTER_PORT/rdzv port from it
RDZV_PORT = 23456
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"  # set by the operator, lowercase
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
# The operator sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE: nothing to add. It also
# appends PYTHONUNBUFFERED=1 to every container (source: kubeflow/training-operator
# release-1.9 pkg/controller.v1/pytorch/envvar.go setPodEnv, checked 2026-11-25), so ours
# would be a duplicate name.
LAUNCH = pod.Launch(
    container=CONTAINER,
    port=RDZV_PORT,
    port_name=RDZV_PORT_NAME,
    controller_env=frozenset({"PYTHONUNBUFFERED"}),
)


def check(job: JobSpec, target: JobTarget, where: str) -> None:
    """Every job the model accepts runs on the training operator v1."""


def pod_template(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
) -> dict[str, Any]:
    return pod.pod_template(job, target, code, LAUNCH, user_code)


def run_policy(job: JobSpec) -> dict[str, Any]:
    rp = job.run_policy
    out: dict[str, Any] = {"cleanPodPolicy": rp.clean_pod_policy, "backoffLimit": rp.backoff_limit}
    if rp.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = rp.ttl_seconds_after_finished
    if rp.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = rp.active_deadline_seconds
    return out


def pytorchjob_manifest(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, template: dict | None = None
) -> dict[str, Any]:
    template = template if template is not None else pod_template(job, target, code)

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": job.restart_policy, "template": template}

    spec: dict[str, Any] = {"nprocPerNode": str(job.procs), "runPolicy": run_policy(job)}
    if job.elastic is not None:
        e = job.elastic
        spec["elasticPolicy"] = {
            "minReplicas": e.min_workers,
            "maxReplicas": e.max_workers,
            "maxRestarts": e.max_restarts,
            "rdzvBackend": "c10d",
            "rdzvId": job.name,
        }
        spec["pytorchReplicaSpecs"] = {"Worker": replica(job.workers)}
    else:
        specs = {"Master": replica(1)}
        if job.workers > 1:
            specs["Worker"] = replica(job.workers - 1)
        spec["pytorchReplicaSpecs"] = specs
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": pod.workload_metadata(job, target),
        "spec": spec,
    }


def podmonitor_manifest(job: JobSpec, target: JobTarget) -> dict[str, Any] | None:
    """Prometheus scrapes rank 0. In a Master/Worker job that is the Master pod; in an
    elastic job rank 0 can land on any worker, so all are selected (the others show as down
    targets for that job)."""
    rank0 = {} if job.elastic is not None else {REPLICA_TYPE_LABEL: "master"}
    return pod.podmonitor_manifest(job, target, rank0, [REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL])


def emit(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
) -> EmittedJob:
    """All objects for a resolved job (see `wiring.resolve_job`); `user_code` is the job's
    own shipped code (`entrypoint.user_code`)."""
    return pod.emit_job(
        job,
        target,
        code,
        user_code,
        backend=BACKEND,
        launch=LAUNCH,
        workload=lambda template: pytorchjob_manifest(job, target, code, template),
        podmonitor=lambda: podmonitor_manifest(job, target),
    )
