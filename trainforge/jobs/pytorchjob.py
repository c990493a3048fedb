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

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from trainforge.core import failures, pods
from trainforge.core.contract import JobTarget
from trainforge.jobs import pod, success
from trainforge.jobs.spec import JobSpec

BACKEND = "pytorchjob"
API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
PLURAL = "pytorchjobs"  # the CRD's spec.names.plural (platform/data/training-operator-v1.9.4)
KUEUE_FRAMEWORK = "kubeflow.org/pytorchjob"  # kueue v0.19.2 pytorchjob_controller.go FrameworkName
# Where a fleet manager's PyTorchJob names MultiKueue as its manager: training-operator v1.9.4
# skips a PyTorchJob whose runPolicy.managedBy is not its own (pkg/controller.v1/pytorch
# pytorchjob_controller.go Reconcile, ManagedByExternalController), so only the worker's copy runs.
MANAGED_BY = ("spec", "runPolicy", "managedBy")
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


def run_policy(job: JobSpec) -> dict[str, Any]:
    rp = job.run_policy
    out: dict[str, Any] = {"cleanPodPolicy": rp.clean_pod_policy, "backoffLimit": rp.backoff_limit}
    if rp.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = rp.ttl_seconds_after_finished
    if rp.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = rp.active_deadline_seconds
    return out


def launch(job: JobSpec) -> pod.Launch:
    return dataclasses.replace(LAUNCH, on_exit=success.told(job, outcome))


def outcome(job: JobSpec, code: int, *, disrupted: bool = False) -> failures.Outcome:
    """What the training operator does with a pod of `job` that exited `code` (core.failures),
    read from the restart fields this module writes (`restart_doc`: one restartPolicy for
    all the replicas)."""
    replicas = restart_doc(job)["spec"]["pytorchReplicaSpecs"].values()
    (policy,) = {r["restartPolicy"] for r in replicas}
    return failures.pytorchjob_outcome(policy, code, disrupted=disrupted)


def replica_specs(job: JobSpec, template: dict[str, Any]) -> dict[str, Any]:
    """Master and Worker (elastic: Worker only), each with the job's restartPolicy."""

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": job.restart_policy, "template": template}

    if job.elastic is not None:
        return {"Worker": replica(job.workers)}
    specs = {"Master": replica(1)}
    if job.workers > 1:
        specs["Worker"] = replica(job.workers - 1)
    return specs


def restart_doc(job: JobSpec) -> dict[str, Any]:
    """The PyTorchJob's fields its retry bound reads (`retry_bound`: the replicas, their
    restartPolicy, the runPolicy), as `workload_manifest` writes them, without the pods:
    what jobs.restarts reads the job's restart budget from."""
    spec = {"runPolicy": run_policy(job), "pytorchReplicaSpecs": replica_specs(job, {})}
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}


def workload_manifest(job: JobSpec, target: JobTarget, template: dict[str, Any]) -> dict[str, Any]:
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
    spec["pytorchReplicaSpecs"] = replica_specs(job, template)
    return pod.workload_object(API_VERSION, KIND, job, target, spec)


def podmonitor_manifest(job: JobSpec, target: JobTarget) -> dict[str, Any] | None:
    """Prometheus scrapes rank 0. In a Master/Worker job that is the Master pod; in an
    elastic job rank 0 can land on any worker, so all are selected (the others show as down
    targets for that job)."""
    rank0 = {} if job.elastic is not None else {REPLICA_TYPE_LABEL: "master"}
    return pod.podmonitor_manifest(job, target, rank0, [REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL])


# --- how the operator retries it (the plan's retry bound reads this through backends.SHAPES)

DEFAULT_RESTART_POLICY = "OnFailure"  # PyTorchJobDefaultRestartPolicy (release-1.9)


def retry_bound(doc: Mapping[str, Any], inputs: pods.RetryInputs) -> pods.Bound:
    """Training operator v1.9 (`pkg/core/job.go` PastBackoffLimit; what it does with each
    exit code: trainforge.core.failures): `Never` fails the job with its first failed pod,
    and so does `ExitCode` with a code it does not retry (1-127); `OnFailure` restarts the
    container in place and fails the job once the restarts reach runPolicy.backoffLimit (0:
    the first restart); `ExitCode` re-creates a pod that exits >= 128 without counting it,
    so only the job's own run ledger
    (`inputs.ledger`) or activeDeadlineSeconds bounds it. The restarts counted are summed over
    all the job's Running OnFailure/Always pods: N pods that all die reach the limit after
    ceil(backoffLimit / N) restarts each."""
    spec = doc.get("spec") or {}
    replicas = [r or {} for r in (spec.get("pytorchReplicaSpecs") or {}).values()]
    policies = {r.get("restartPolicy") or DEFAULT_RESTART_POLICY for r in replicas}
    run = spec.get("runPolicy") or {}
    deadline = run.get("activeDeadlineSeconds")
    if policies == {"Never"}:
        return pods.Bound(1, "restartPolicy Never: the first failed pod fails the job")
    if any(failures.pytorchjob_outcome(p, inputs.code).fails for p in policies):
        # ExitCode and a code the operator does not retry (1-127): the job fails at once
        return pods.Bound(1, f"ExitCode: exit {inputs.code} fails the job (not retryable)")
    if "ExitCode" in policies:
        n, whose = inputs.ledger() if inputs.ledger is not None else (None, "")
        if n is not None:
            return pods.Bound(
                n,
                f"ExitCode re-creates pods uncounted; {whose} stops attempt {n} (no_progress, exit 4)",
            )
        why = "ExitCode re-creates a pod that exits >= 128 without counting it"
        if deadline is not None:
            return pods.Bound(None, f"{why}; activeDeadlineSeconds {deadline} ends it", deadline)
        return pods.Bound(None, why)
    limit = run.get("backoffLimit")
    if limit is None:
        return pods.Bound(
            None, "OnFailure without backoffLimit: restarts are never counted", deadline
        )
    # PastBackoffLimit sums the restarts of every counted pod of the job, so pods that all
    # die on every attempt reach the limit together: each restarts ceil(limit / pods) times.
    counted = sum(
        int(r.get("replicas", 1))
        for r in replicas
        if (r.get("restartPolicy") or DEFAULT_RESTART_POLICY) in ("OnFailure", "Always")
    )
    counted = max(counted, 1)
    runs = max(math.ceil(int(limit) / counted), 1) + 1  # fails at the limit (0: > 0)
    if counted == 1:
        return pods.Bound(
            runs, f"OnFailure: backoffLimit {limit} counts restarts, {runs} container runs"
        )
    return pods.Bound(
        runs,
        f"OnFailure: backoffLimit {limit} counts the restarts of all {counted} pods together, "
        f"{runs} container runs each",
    )


# --- what the operator adds to a pod it creates (read by the plan's Pod Security check) -------

# training operator v1.9.4 pkg/controller.v1/pytorch/initcontainer.go `initContainerTemplate`
# (its default; `--pytorch-init-container-template-file` replaces it, which the platform does
# not set): no securityContext, so Pod Security `restricted` refuses the pod it is added to
# (allowPrivilegeEscalation, capabilities; runAsNonRoot and seccomp too where the pod sets
# neither). Its image and retry count are the operator's flags; they do not change admission.
INIT_CONTAINER = {
    "name": "init-pytorch",
    "imagePullPolicy": "IfNotPresent",
    "resources": {
        "limits": {"cpu": "100m", "memory": "20Mi"},
        "requests": {"cpu": "50m", "memory": "10Mi"},
    },
}


def operator_template(doc: Mapping[str, Any], replica: str, template: dict[str, Any]) -> dict:
    """`template` of replica `replica` as the operator creates its pods: `setInitContainer`
    (v1.9.4) appends `init-pytorch` to a Worker's initContainers when the job has a Master
    (the Worker waits for the Master's name to resolve); every other pod is as written."""
    specs = (doc.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    if replica != "Worker" or specs.get("Master") is None:
        return template
    spec = dict(template.get("spec") or {})
    spec["initContainers"] = [*(spec.get("initContainers") or []), dict(INIT_CONTAINER)]
    return {**template, "spec": spec}
