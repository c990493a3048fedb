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
A one-process pod runs `python -m trainforge.training`, which reads MASTER_ADDR/RANK/
WORLD_SIZE directly. A pod with several processes, or any elastic job, runs torchrun. Node
count and processes per node are passed as literal flags (they are known here, and not
every operator release sets PET_NPROC_PER_NODE on elastic jobs); master address, port and
node rank come from the operator's variables through Kubernetes `$(VAR)` expansion, which
works for variables the operator adds to the container's env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.jobs import images, tenancy
from trainforge.jobs.codeship import CODE_MOUNT, CodeBundle, configmap_manifest
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
    """Everything one job needs in the cluster. `configmap` is None with codeSource: image."""

    pytorchjob: dict
    podmonitor: dict | None
    configmap: dict | None


def labels(job: JobSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "trainforge",
        "app.kubernetes.io/component": "training-job",
        "app.kubernetes.io/managed-by": "pulumi",
        JOB_LABEL: job.name,
        TEAM_LABEL: job.team,
    }


def checkpoint_dir(job: JobSpec, target: JobTarget) -> str:
    """Per job on the team's FSx volume: replacements of the job resume from it."""
    return f"{target.fsx_mount_path}/checkpoints/{target.namespace}/{job.name}"


def output_dir(job: JobSpec, target: JobTarget) -> str:
    return f"{target.fsx_mount_path}/runs/{target.namespace}/{job.name}"


def _s3_uri(target: JobTarget, job: JobSpec) -> Any:
    """s3://bucket/<team prefix>/<job>; an Output when the bucket name is one."""
    prefix = target.checkpoint_prefix.strip("/")
    path = f"{prefix}/checkpoints/{job.name}" if prefix else f"checkpoints/{job.name}"
    bucket = target.checkpoint_bucket
    if hasattr(bucket, "apply"):
        return bucket.apply(lambda b: f"s3://{b}/{path}")
    return f"s3://{bucket}/{path}"


def training_args(job: JobSpec, target: JobTarget) -> list[Any]:
    """The `python -m trainforge.training` flags for this job (issue 2 and 3 contracts)."""
    t = job.training
    args: list[Any] = ["--strategy", job.strategy]
    flag_values = [
        ("--model", t.model),
        ("--layers", t.layers),
        ("--d-model", t.d_model),
        ("--heads", t.heads),
        ("--seq-len", t.seq_len),
        ("--vocab-size", t.vocab_size),
        ("--dataset", t.dataset),
        ("--data-path", _on_volume(t.data_path, target)),
        ("--dataset-size", t.dataset_size),
        ("--steps", t.steps),
        ("--batch-size", t.batch_size),
        ("--grad-accum", t.grad_accum),
        ("--lr", t.lr),
        ("--warmup-steps", t.warmup_steps),
        ("--weight-decay", t.weight_decay),
        ("--seed", t.seed),
        ("--log-every", t.log_every),
        ("--precision", t.precision),
    ]
    for flag, value in flag_values:
        if value is not None:
            args += [flag, str(value)]
    if t.compile:
        args.append("--compile")
    if t.activation_checkpointing:
        args.append("--activation-checkpointing")
    c = job.checkpoint
    args += [
        "--run-name",
        job.name,
        "--output-dir",
        output_dir(job, target),
        "--metrics-port",
        str(job.metrics_port),
        "--checkpoint-dir",
        checkpoint_dir(job, target),
        "--checkpoint-every",
        str(c.every),
        "--keep-last",
        str(c.keep_last),
        "--resume",
        c.resume,
        "--grace-period",
        str(c.grace_period),
    ]
    if c.async_save:
        args.append("--async-checkpoint")
    if c.s3_mirror and target.checkpoint_bucket is not None:
        args += ["--checkpoint-s3", _s3_uri(target, job)]
    return args


def _on_volume(path: str | None, target: JobTarget) -> str | None:
    """Relative data paths are relative to the team's FSx mount."""
    if path is None or path.startswith("/"):
        return path
    return f"{target.fsx_mount_path}/{path}"


def command(job: JobSpec, target: JobTarget) -> list[Any]:
    """The container command: python for one process per pod, torchrun otherwise."""
    tail = ["-m", "trainforge.training", *training_args(job, target)]
    if not job.uses_torchrun:
        return ["python", *tail]
    if job.elastic is not None:
        e = job.elastic
        # Endpoint, backend and id come from PET_RDZV_* which the operator derives from
        # elasticPolicy; the node range and restarts are repeated literally for the preview.
        launch = [
            "torchrun",
            f"--nnodes={e.min_workers}:{e.max_workers}",
            f"--nproc-per-node={job.procs}",
            f"--max-restarts={e.max_restarts}",
            "--rdzv-backend=c10d",
        ]
    elif job.workers == 1:
        launch = ["torchrun", "--standalone", "--nnodes=1", f"--nproc-per-node={job.procs}"]
    else:
        launch = [
            "torchrun",
            f"--nnodes={job.workers}",
            f"--nproc-per-node={job.procs}",
            "--node-rank=$(RANK)",
            "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)",
        ]
    return [*launch, *tail]


def env(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # code volume is read-only
        # The root filesystem is read-only and the image's HOME is not ours: caches go to /tmp.
        {"name": "HOME", "value": "/tmp"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": "/tmp/torchinductor"},
        {"name": "TRITON_CACHE_DIR", "value": "/tmp/triton"},
    ]
    if code is not None:
        out.append({"name": "PYTHONPATH", "value": CODE_MOUNT})
    if job.uses_torchrun:
        # torchrun forwards SIGTERM to its workers and SIGKILLs them after this many seconds
        # (30 by default): give them the whole checkpoint grace period. An environment
        # variable rather than --shutdown-timeout, which torchrun releases before 2.12 refuse.
        out.append(
            {"name": "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "value": str(job.checkpoint.grace_period)}
        )
    else:
        # The operator sets RANK and WORLD_SIZE per pod but no local rank; one process per pod.
        out += [{"name": "LOCAL_RANK", "value": "0"}, {"name": "LOCAL_WORLD_SIZE", "value": "1"}]
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
    if target.mlflow_tracking_uri is not None:
        out.append({"name": "MLFLOW_TRACKING_URI", "value": target.mlflow_tracking_uri})
        out += tenancy.mlflow_env(target)
    out += [{"name": k, "value": v} for k, v in job.env]
    return out


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


def container_security_context(target: JobTarget | None = None) -> dict[str, Any]:
    # EFA needs no capability here: the EKS accelerated AMIs run containerd with an
    # unlimited memlock rlimit, which is what libfabric's memory registration needs, so
    # IPC_LOCK is not added and nothing runs privileged.
    uid, gid = tenancy.run_as(target) if target is not None else (RUN_AS_USER, RUN_AS_USER)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_template(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> dict[str, Any]:
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
    if code is not None:
        mounts.append({"name": "code", "mountPath": CODE_MOUNT, "readOnly": True})
        volumes.append(
            {
                "name": "code",
                "configMap": {
                    "name": code.configmap_name(job.name),
                    "items": code.items(),
                    "defaultMode": 0o444,
                },
            }
        )
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command(job, target),
        "env": env(job, target, code),
        "ports": ports,
        "resources": resources(job, target),
        "volumeMounts": mounts,
        "securityContext": container_security_context(target),
    }
    uid, gid = tenancy.run_as(target)
    spec: dict[str, Any] = {
        "serviceAccountName": target.service_account,
        # Training never calls the Kubernetes API; S3 access comes from the Pod Identity
        # agent, whose webhook mounts its own projected token whatever this says.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": job.checkpoint.grace_period + TERMINATION_MARGIN,
        "enableServiceLinks": False,
        # The team's own UID/GID (TeamFacts): its FSx directory is 0770 and theirs alone.
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": gid,
            "fsGroup": gid,
            # Never walk a multi-TiB Lustre tree to chown it on every pod start.
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": dict(target.pool.node_selector),
        "containers": [container],
        "volumes": volumes,
    }
    tols = tolerations(job, target)
    if tols:
        spec["tolerations"] = tols
    return {
        "metadata": {
            "labels": labels(job),
            # Karpenter must not consolidate or drift a node out from under a running job;
            # Kueue places the pods by network topology where the pool supports it.
            "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                **tenancy.topology_annotations(job, target),
            },
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


def pytorchjob_manifest(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> dict[str, Any]:
    template = pod_template(job, target, code)

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
    # The queue labels make Kueue hold the job (runPolicy.suspend, which it owns: never set
    # here) until the team's queue can admit all of its pods.
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": job.name,
            "namespace": target.namespace,
            "labels": {**labels(job), **tenancy.queue_labels(job, target)},
        },
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


def emit(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> EmittedJob:
    """All objects for a resolved job (see `wiring.resolve_job`)."""
    if job.gpus_per_worker is None or job.cpu is None or job.memory is None:
        raise ValueError(f"job {job.name!r} is not resolved; call wiring.resolve_job first")
    if job.code_source == "configmap" and code is None:
        raise ValueError(f"job {job.name!r} ships its code in a ConfigMap but no bundle was given")
    if job.code_source == "image":
        code = None
    cm = configmap_manifest(code, job.name, target.namespace, labels(job)) if code else None
    return EmittedJob(
        pytorchjob=pytorchjob_manifest(job, target, code),
        podmonitor=podmonitor_manifest(job, target),
        configmap=cm,
    )


def default_image() -> str:
    """The pinned stock PyTorch CUDA image that needs the oldest driver (no pool known)."""
    return images.default_image()
