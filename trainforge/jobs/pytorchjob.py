"""Emitter: a resolved JobSpec + JobTarget -> Kubeflow training-operator v1 objects.

Produces plain dicts (what `kubectl apply` would take), so they can be validated offline
against the upstream CRD schema, the operator's admission-webhook rules and the core
PodTemplate schema, and handed to `kubernetes.apiextensions.CustomResource` unchanged.

How the operator (release 1.9) wires a pod, which the command below relies on:
- Master + Worker jobs: every pod gets MASTER_ADDR (`<job>-master-0`), MASTER_PORT (the
  `pytorchjob-port` container port), RANK (pod index; workers count from 1), WORLD_SIZE,
  PET_NNODES, PET_NODE_RANK and PET_NPROC_PER_NODE (from spec.nprocPerNode).
- elastic jobs (Workers only): PET_RDZV_ENDPOINT (`<job>-worker-0:<pytorchjob-port>`),
  PET_RDZV_BACKEND, PET_RDZV_ID, PET_NNODES ("min:max") and PET_MAX_RESTARTS from
  elasticPolicy; no MASTER_ADDR, RANK or WORLD_SIZE.
A one-process pod runs `python` directly (the runtime, or the user's script, module or
function), which reads MASTER_ADDR/RANK/WORLD_SIZE. A pod with several processes, or any
elastic job, runs torchrun. What the container runs and the contract's environment come from
`trainforge.jobs.entrypoint.pod_parts`, called once per pod template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.jobs import images, storage
from trainforge.jobs.codeship import CodeBundle, configmap_manifest
from trainforge.jobs.entrypoint import (  # noqa: F401 - re-exported: callers import them here
    checkpoint_dir,
    command_for,
    output_dir,
    pod_parts,
    training_args,
)
from trainforge.jobs.spec import JobSpec
from trainforge.jobs.wiring import EFA_RESOURCE, GPU_RESOURCE, JobTarget, efa_count

API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
CONTAINER = "pytorch"  # the operator only wires a container with this name
RDZV_PORT_NAME = "pytorchjob-port"  # the operator reads MASTER_PORT/rdzv port from it
RDZV_PORT = 23456
METRICS_PORT_NAME = "metrics"
TERMINATION_MARGIN = 30  # seconds past the runtime's checkpoint grace for teardown
RUN_AS_USER = 1000
TMP_SIZE = "20Gi"
JOB_LABEL = "trainforge.io/job"
TEAM_LABEL = "trainforge.io/team"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"  # set by the operator, lowercase


@dataclass(frozen=True)
class EmittedJob:
    """Everything one job needs in the cluster. `configmap` (the runtime library) is None with
    codeSource: image; `user_configmap` holds the user's shipped code (entrypoint.codeDir, a
    script's directory, or a function's generated file)."""

    pytorchjob: dict
    podmonitor: dict | None
    configmap: dict | None
    user_configmap: dict | None = None


def labels(job: JobSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "trainforge",
        "app.kubernetes.io/component": "training-job",
        "app.kubernetes.io/managed-by": "pulumi",
        JOB_LABEL: job.name,
        TEAM_LABEL: job.team,
    }


def command(job: JobSpec, target: JobTarget) -> list[Any]:
    """The container command (see `entrypoint.command_for`)."""
    return command_for(job, target)


def env(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> list[dict[str, Any]]:
    """The platform's environment (caches, NCCL, EFA). The contract's variables come from
    `entrypoint.contract_env`, then the job's own `env` (`with_user_env`, see pod_template)."""
    out: list[dict[str, Any]] = [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # code volume is read-only
        # The root filesystem is read-only and the image's HOME is not ours: caches go to /tmp.
        {"name": "HOME", "value": "/tmp"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": "/tmp/torchinductor"},
        {"name": "TRITON_CACHE_DIR", "value": "/tmp/triton"},
    ]
    if job.gpus_per_worker:
        out += [
            {"name": "NCCL_DEBUG", "value": job.nccl_debug},
            # The pod's network interface under the VPC CNI; NCCL's bootstrap binds to it.
            {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
        ]
    if job.efa:
        out += [
            {"name": "FI_PROVIDER", "value": "efa"},
            # DataLoader workers fork; keep libfabric's registered memory fork-safe.
            {"name": "FI_EFA_FORK_SAFE", "value": "1"},
        ]
        if target.pool.rdma:
            out.append({"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"})
    return out


def with_user_env(platform: list[dict[str, Any]], user: tuple[tuple[str, str], ...]) -> list:
    """Each name once: the user's `env` value replaces a platform default of the same name
    in place (NCCL_DEBUG, NCCL_SOCKET_IFNAME, FI_PROVIDER, HOME ...); other names follow,
    last, so that they may refer to any platform or contract variable (Kubernetes expands
    `$(VAR)` only from variables defined before). Names the platform must own (the
    contract's) are refused when the job is parsed (spec._RESERVED_ENV)."""
    given = dict(user)
    out = [
        {"name": e["name"], "value": given.pop(e["name"])} if e["name"] in given else e
        for e in platform
    ]
    return out + [{"name": k, "value": v} for k, v in user if k in given]


def resources(job: JobSpec, target: JobTarget) -> dict[str, dict[str, Any]]:
    """requests == limits: Guaranteed QoS (never the first evicted), and extended resources
    (GPUs, EFA) must have equal requests and limits anyway."""
    amounts: dict[str, Any] = {"cpu": job.cpu, "memory": job.memory}
    if job.gpus_per_worker:
        amounts[GPU_RESOURCE] = str(job.gpus_per_worker)
    if job.efa:
        amounts[EFA_RESOURCE] = str(efa_count(target.pool, job.gpus_per_worker or 0))
    return {"requests": dict(amounts), "limits": dict(amounts)}


def tolerations(job: JobSpec, target: JobTarget) -> list[dict[str, str]]:
    out = []
    for t in target.pool.taints:
        tol = {"key": t.key, "effect": t.effect}
        if t.value is None:
            tol["operator"] = "Exists"
        else:
            tol.update(operator="Equal", value=t.value)
        out.append(tol)
    if job.gpus_per_worker and not any(t.key == GPU_RESOURCE for t in target.pool.taints):
        out.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    return out


def container_security_context() -> dict[str, Any]:
    # EFA needs no capability here: the EKS accelerated AMIs run containerd with an
    # unlimited memlock rlimit, which is what libfabric's memory registration needs, so
    # IPC_LOCK is not added and nothing runs privileged.
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_template(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
) -> dict[str, Any]:
    parts = pod_parts(job, target, code, user_code)
    image = images.image_for(job, target.pool)
    ports = [{"name": RDZV_PORT_NAME, "containerPort": RDZV_PORT, "protocol": "TCP"}]
    if job.metrics_port:
        ports.append(
            {"name": METRICS_PORT_NAME, "containerPort": job.metrics_port, "protocol": "TCP"}
        )
    mounts = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "fsx", "mountPath": target.fsx_mount_path},
    ]
    if target.fsx_sub_path and target.claim_name:
        mounts[-1]["subPath"] = target.fsx_sub_path
    volumes: list[dict[str, Any]] = [
        # NCCL and DataLoader workers exchange tensors through /dev/shm; the container
        # runtime's default is 64 MiB. Memory-backed, so it counts against the memory limit.
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": job.shm_size}},
        {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
        {"name": "fsx", "persistentVolumeClaim": {"claimName": target.claim_name}}
        if target.claim_name
        # No FSx on this platform: same paths on pod-local disk (see JobTarget.claim_name).
        else {"name": "fsx", "emptyDir": {}},
    ]
    claim_mounts, claim_volumes = storage.claim_mounts(job)
    mounts += [*claim_mounts, *parts.mounts]
    volumes += [*claim_volumes, *parts.volumes]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": parts.command,
        "env": with_user_env([*env(job, target, code), *parts.env], job.env),
        "ports": ports,
        "resources": resources(job, target),
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
    }
    if parts.working_dir is not None:
        container["workingDir"] = parts.working_dir
    spec: dict[str, Any] = {
        "serviceAccountName": target.service_account,
        # Training never calls the Kubernetes API; S3 access comes from the Pod Identity
        # agent, whose webhook mounts its own projected token whatever this says.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": job.checkpoint.grace_period + TERMINATION_MARGIN,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,
            # Never walk a multi-TiB Lustre tree to chown it on every pod start.
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": dict(target.pool.node_selector),
        "containers": [container],
        "volumes": volumes,
    }
    if parts.share_process_namespace:
        spec["shareProcessNamespace"] = True
    tols = tolerations(job, target)
    if tols:
        spec["tolerations"] = tols
    return {
        "metadata": {
            "labels": labels(job),
            # Karpenter must not consolidate or drift a node out from under a running job.
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
        },
        "spec": spec,
    }


def run_policy(job: JobSpec) -> dict[str, Any]:
    rp = job.run_policy
    out: dict[str, Any] = {"cleanPodPolicy": rp.clean_pod_policy, "backoffLimit": rp.backoff_limit}
    if rp.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = rp.ttl_seconds_after_finished
    if rp.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = rp.active_deadline_seconds
    return out


def pytorchjob_manifest(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
) -> dict[str, Any]:
    template = pod_template(job, target, code, user_code)

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
        "metadata": {"name": job.name, "namespace": target.namespace, "labels": labels(job)},
        "spec": spec,
    }


def podmonitor_manifest(job: JobSpec, target: JobTarget) -> dict[str, Any] | None:
    """Prometheus scrapes every pod of the job on its metrics port (issue 2's endpoint)."""
    if not job.metrics_port:
        return None
    # The runtime serves metrics from global rank 0 only. In a Master/Worker job that is
    # the Master pod; in an elastic job rank 0 can land on any worker, so all are selected
    # (the others show as down targets for that job).
    selector = {JOB_LABEL: job.name}
    if job.elastic is None:
        selector[REPLICA_TYPE_LABEL] = "master"
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": f"{job.name}-metrics",
            "namespace": target.namespace,
            "labels": labels(job),
        },
        "spec": {
            "selector": {"matchLabels": selector},
            "namespaceSelector": {"matchNames": [target.namespace]},
            "podMetricsEndpoints": [
                {"port": METRICS_PORT_NAME, "path": "/metrics", "interval": "30s"}
            ],
            # Keep master/worker and index on every series so ranks can be told apart.
            "podTargetLabels": [
                REPLICA_TYPE_LABEL,
                "training.kubeflow.org/replica-index",
                TEAM_LABEL,
            ],
        },
    }


def emit(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
) -> EmittedJob:
    """All objects for a resolved job (see `wiring.resolve_job`); `user_code` is the job's
    shipped code (`entrypoint.user_code`)."""
    if job.gpus_per_worker is None or job.cpu is None or job.memory is None:
        raise ValueError(f"job {job.name!r} is not resolved; call wiring.resolve_job first")
    if job.code_source == "configmap" and code is None:
        raise ValueError(f"job {job.name!r} ships its code in a ConfigMap but no bundle was given")
    entry = job.entrypoint
    if entry is not None and entry.ships_code and user_code is None:
        raise ValueError(f"job {job.name!r} ships its own code but no bundle was given")
    if entry is None or not entry.ships_code:
        user_code = None
    if job.code_source == "image":
        code = None
    cm = configmap_manifest(code, job.name, target.namespace, labels(job)) if code else None
    user_cm = (
        configmap_manifest(user_code, job.name, target.namespace, labels(job), role="src")
        if user_code
        else None
    )
    return EmittedJob(
        pytorchjob=pytorchjob_manifest(job, target, code, user_code),
        podmonitor=podmonitor_manifest(job, target),
        configmap=cm,
        user_configmap=user_cm,
    )


def default_image() -> str:
    """The pinned stock PyTorch CUDA image that needs the oldest driver (no pool known)."""
    return images.default_image()
