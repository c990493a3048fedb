"""The pod every backend runs: one builder, so the three backends' pods are equal by construction.

A job's pods are the same whichever controller creates them (Kubeflow training operator v1,
Kubeflow Trainer v2, or the Kubernetes Job controller): same image, command, training flags,
environment contract, resources, volumes, security context, tolerations, node selector,
/dev/shm, metrics port and annotations. Only three things differ per backend, and each
emitter passes them in as a `Launch`: the container's name (each controller wires only the
container it knows by name), the rendezvous port, and which of MASTER_ADDR, MASTER_PORT, RANK
and WORLD_SIZE the controller sets itself (the training operator does; for Trainer v2 and the
indexed Job the emitter sets them, from the pod's stable DNS name and its completion index).

The container command is the same for every backend: one process per pod runs
`python -m trainforge.training` (which reads MASTER_ADDR/RANK/WORLD_SIZE), several processes
per pod run `torchrun --node-rank=$(RANK) --master-addr=$(MASTER_ADDR) ...` with those
variables expanded by Kubernetes. Elastic jobs (PyTorchJob only) use the operator's PET_RDZV_*
variables instead.

How the operator (release 1.9) wires a PyTorchJob pod, which the command relies on:
- Master + Worker jobs: every pod gets MASTER_ADDR (`<job>-master-0`), MASTER_PORT (the
  `pytorchjob-port` container port), RANK (pod index; workers count from 1), WORLD_SIZE,
  PET_NNODES, PET_NODE_RANK and PET_NPROC_PER_NODE (from spec.nprocPerNode).
- elastic jobs (Workers only): PET_RDZV_ENDPOINT (`<job>-worker-0:<pytorchjob-port>`),
  PET_RDZV_BACKEND, PET_RDZV_ID, PET_NNODES ("min:max") and PET_MAX_RESTARTS from
  elasticPolicy; no MASTER_ADDR, RANK or WORLD_SIZE.
Node count and processes per node are passed to torchrun as literal flags (they are known
here, and not every operator release sets PET_NPROC_PER_NODE on elastic jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainforge.jobs import images, tenancy
from trainforge.jobs.codeship import CODE_MOUNT, CodeBundle
from trainforge.jobs.spec import JobSpec
from trainforge.jobs.wiring import EFA_RESOURCE, GPU_RESOURCE, JobTarget, efa_count

METRICS_PORT_NAME = "metrics"
TERMINATION_MARGIN = 30  # seconds past the runtime's checkpoint grace for teardown
RUN_AS_USER = 1000
TMP_SIZE = "20Gi"
JOB_LABEL = "trainforge.io/job"
TEAM_LABEL = "trainforge.io/team"
# Set by the Job controller on every pod of an Indexed Job (Kubernetes >= 1.28), which is what
# both Trainer v2 (through JobSet) and the indexed-job backend run: global rank 0 is index 0.
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
# Karpenter must not consolidate or drift a node out from under a running job.
POD_ANNOTATIONS = {"karpenter.sh/do-not-disrupt": "true"}


@dataclass(frozen=True)
class Launch:
    """What one backend's controller needs of the pod, and what it provides.

    `rendezvous_env` are the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE entries the emitter must
    set because the controller does not (empty for the training operator, which sets them).
    `declare_port` is False where the controller adds the rendezvous port itself (Trainer v2).
    """

    container: str
    port: int
    port_name: str | None = None
    declare_port: bool = True
    rendezvous_env: tuple[dict[str, Any], ...] = field(default=())


def static_rendezvous_env(job: JobSpec, master_addr: str, port: int) -> tuple[dict, ...]:
    """The env contract for a backend whose controller does not set it: rank 0's stable DNS
    name, the port, RANK from the pod's completion index, and WORLD_SIZE as the training
    operator computes it (pods x processes per pod; torchrun resets both for its workers)."""
    return (
        {"name": "MASTER_ADDR", "value": master_addr},
        {"name": "MASTER_PORT", "value": str(port)},
        {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
        {"name": "WORLD_SIZE", "value": str(job.workers * job.procs)},
    )


def labels(job: JobSpec) -> dict[str, str]:
    """Labels of every object of a job and of its pods."""
    return {
        "app.kubernetes.io/name": "trainforge",
        "app.kubernetes.io/component": "training-job",
        "app.kubernetes.io/managed-by": "pulumi",
        JOB_LABEL: job.name,
        TEAM_LABEL: job.team,
    }


def checkpoint_dir(job: JobSpec, target: JobTarget) -> str:
    """Per job on the team's FSx volume, the same for every backend: a replacement of the job
    (also on another backend) resumes from it."""
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
    """The container command: python for one process per pod, torchrun otherwise. The same
    for every backend: each provides MASTER_ADDR, MASTER_PORT and RANK (see `Launch`)."""
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


def env(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, launch: Launch | None = None
) -> list[dict[str, Any]]:
    """The container's environment: the platform's contract, the backend's rendezvous
    variables where its controller does not set them, then the job's own `env`."""
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
        # The controller (or the backend) sets RANK and WORLD_SIZE per pod but no local rank.
        out += [{"name": "LOCAL_RANK", "value": "0"}, {"name": "LOCAL_WORLD_SIZE", "value": "1"}]
    if launch is not None:
        out += [dict(e) for e in launch.rendezvous_env]
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
        # the team's own MLflow user (from its Secret) and experiment
        out += tenancy.mlflow_env(target)
    return with_user_env(out, job.env)


def with_user_env(platform: list[dict[str, Any]], user: tuple[tuple[str, str], ...]) -> list:
    """Each name once: the user's `env` value replaces a platform default of the same name
    in place (NCCL_DEBUG, NCCL_SOCKET_IFNAME, FI_PROVIDER, HOME ...); other names follow.
    Names the platform must own are refused when the job is parsed (spec._RESERVED_ENV)."""
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


def _ids(target: JobTarget | None) -> tuple[int, int]:
    """The team's UID/GID (TeamFacts); the platform default where no team is known."""
    return tenancy.run_as(target) if target is not None else (RUN_AS_USER, RUN_AS_USER)


def container_security_context(target: JobTarget | None = None) -> dict[str, Any]:
    # EFA needs no capability here: the EKS accelerated AMIs run containerd with an
    # unlimited memlock rlimit, which is what libfabric's memory registration needs, so
    # IPC_LOCK is not added and nothing runs privileged.
    uid, gid = _ids(target)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context(target: JobTarget | None = None) -> dict[str, Any]:
    """The team's own UID/GID: its FSx directory is 0770 and belongs to them alone, so no
    other team's pods can read or write it (docs/teams.md)."""
    uid, gid = _ids(target)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,
        # Never walk a multi-TiB Lustre tree to chown it on every pod start.
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def image(job: JobSpec, target: JobTarget) -> str:
    """The container image: the job's own, else the pinned PyTorch build its pool can run
    (`images.image_for`: one function, so every backend picks the same image)."""
    return images.image_for(job, target.pool)


def ports(job: JobSpec, launch: Launch) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if launch.declare_port:
        port: dict[str, Any] = {"containerPort": launch.port, "protocol": "TCP"}
        if launch.port_name:
            port = {"name": launch.port_name, **port}
        out.append(port)
    if job.metrics_port:
        out.append(
            {"name": METRICS_PORT_NAME, "containerPort": job.metrics_port, "protocol": "TCP"}
        )
    return out


def volume_mounts(target: JobTarget, code: CodeBundle | None) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "fsx", "mountPath": target.fsx_mount_path},
    ]
    if target.fsx_sub_path and target.claim_name:
        mounts[-1]["subPath"] = target.fsx_sub_path
    if code is not None:
        mounts.append({"name": "code", "mountPath": CODE_MOUNT, "readOnly": True})
    return mounts


def volumes(job: JobSpec, target: JobTarget, code: CodeBundle | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
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
        out.append(
            {
                "name": "code",
                "configMap": {
                    "name": code.configmap_name(job.name),
                    "items": code.items(),
                    "defaultMode": 0o444,
                },
            }
        )
    return out


def pod_template(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, launch: Launch
) -> dict[str, Any]:
    """The pod template (metadata + spec) every pod of the job runs, on any backend."""
    container = {
        "name": launch.container,
        "image": image(job, target),
        "imagePullPolicy": "IfNotPresent",
        "command": command(job, target),
        "env": env(job, target, code, launch),
        "ports": ports(job, launch),
        "resources": resources(job, target),
        "volumeMounts": volume_mounts(target, code),
        "securityContext": container_security_context(target),
    }
    spec: dict[str, Any] = {
        "serviceAccountName": target.service_account,
        # Training never calls the Kubernetes API; S3 access comes from the Pod Identity
        # agent, whose webhook mounts its own projected token whatever this says.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": job.checkpoint.grace_period + TERMINATION_MARGIN,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(target),
        "nodeSelector": dict(target.pool.node_selector),
        "containers": [container],
        "volumes": volumes(job, target, code),
    }
    tols = tolerations(job, target)
    if tols:
        spec["tolerations"] = tols
    return {
        "metadata": {
            "labels": labels(job),
            # Kueue places the pods by network topology where the pool supports it.
            "annotations": {**POD_ANNOTATIONS, **tenancy.topology_annotations(job, target)},
        },
        "spec": spec,
    }


def podmonitor_manifest(
    job: JobSpec, target: JobTarget, rank0: dict[str, str], target_labels: list[str]
) -> dict[str, Any] | None:
    """Prometheus scrapes the job's rank-0 pod (`rank0` selects it) on its metrics port.

    The runtime serves metrics from global rank 0 only; `target_labels` are the pod labels
    kept on every series so that replicas can be told apart.
    """
    if not job.metrics_port:
        return None
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": f"{job.name}-metrics",
            "namespace": target.namespace,
            "labels": labels(job),
        },
        "spec": {
            "selector": {"matchLabels": {JOB_LABEL: job.name, **rank0}},
            "namespaceSelector": {"matchNames": [target.namespace]},
            "podMetricsEndpoints": [
                {"port": METRICS_PORT_NAME, "path": "/metrics", "interval": "30s"}
            ],
            "podTargetLabels": [*target_labels, TEAM_LABEL],
        },
    }


def default_image() -> str:
    """The pinned stock PyTorch CUDA image that needs the oldest driver (no pool known)."""
    return images.default_image()


@dataclass(frozen=True)
class EmittedJob:
    """Everything one job needs in the cluster, on any backend.

    `workload` is the object that runs the pods (a PyTorchJob, a TrainJob or a batch/v1 Job);
    `pod` the pod template this module built for it (what every pod runs, before the
    controller adds its own labels and rendezvous variables); `configmap` is None with
    codeSource: image; `service` is the indexed Job's headless Service.
    """

    backend: str
    workload: dict
    pod: dict
    podmonitor: dict | None
    configmap: dict | None
    service: dict | None = None

    @property
    def pytorchjob(self) -> dict:
        """The PyTorchJob (pytorchjob backend only; use `workload` for any backend)."""
        if self.backend != "pytorchjob":
            raise AttributeError(f"a {self.backend} job has no PyTorchJob; use .workload")
        return self.workload


def check_emittable(job: JobSpec, code: CodeBundle | None) -> CodeBundle | None:
    """The code bundle an emitter ships (None with codeSource: image); refuses an unresolved job."""
    if job.gpus_per_worker is None or job.cpu is None or job.memory is None:
        raise ValueError(f"job {job.name!r} is not resolved; call wiring.resolve_job first")
    if job.code_source == "configmap" and code is None:
        raise ValueError(f"job {job.name!r} ships its code in a ConfigMap but no bundle was given")
    return None if job.code_source == "image" else code
