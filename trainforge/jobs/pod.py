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
`python -m trainforge.training` or the job's own code (which read MASTER_ADDR/RANK/WORLD_SIZE),
several processes per pod run `torchrun --node-rank=$(RANK) --master-addr=$(MASTER_ADDR) ...`
with those variables expanded by Kubernetes (torchrun through `trainforge.training.launch`
where the runtime library is in the pod, so that the pod's exit code is the workers' reason:
`entrypoint.torchrun`). Elastic jobs (PyTorchJob only) use the operator's
PET_RDZV_* variables instead. What runs, the job contract's environment and the code volumes
come from `trainforge.jobs.entrypoint.pod_parts`.

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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainforge.core.contract import (
    DEFAULT_TRAINING_UID,
    EFA_RESOURCE,
    GPU_RESOURCE,
    JobTarget,
    PoolFacts,
    TeamFacts,
    efa_count,
)
from trainforge.jobs import duration, images, storage, tenancy
from trainforge.jobs.codeship import CodeBundle
from trainforge.jobs.entrypoint import (  # noqa: F401 - re-exported: the contract's paths
    PodParts,
    checkpoint_dir,
    command_for,
    contract_env,
    output_dir,
    pod_parts,
    training_args,
)
from trainforge.jobs.spec import JobSpec
from trainforge.training import contract

METRICS_PORT_NAME = "metrics"
TERMINATION_MARGIN = 30  # seconds past the runtime's checkpoint grace for teardown
# terminationGracePeriodSeconds comes in classes: the job's grace period plus the margin,
# rounded up to the next class. Why: a TrainJob cannot carry it. Kueue 0.19 vendors Trainer
# v2.2.1's types, whose PodSpecPatch has no terminationGracePeriodSeconds (added in v2.3.0),
# and rewrites an admitted TrainJob whole, so a patch's grace period is dropped and pods get
# the default 30 s. The platform's ClusterTrainingRuntimes carry it instead, one per class
# (trainforge.jobs.trainjob), and every backend uses the same classes so that a job's pods
# are the same on each. The runtime itself still budgets its checkpoint by the job's own
# grace period (TRAINFORGE_GRACE_PERIOD); the class is the kubelet's upper bound.
# sources: kubernetes-sigs/kueue release-0.19 go.mod (github.com/kubeflow/trainer/v2 v2.2.1);
# kubeflow/trainer v2.2.1 and v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go
# (PodSpecPatch), checked 2026-11-25.
# grace periods 90 (the default), 300, 600, 900, 1800 and 3600 (the maximum) s + the margin
GRACE_CLASSES = (120, 330, 630, 930, 1830, 3630)


def termination_grace(job: JobSpec) -> int:
    """The pod's terminationGracePeriodSeconds: grace period + margin, rounded up to a class."""
    need = job.checkpoint.grace_period + TERMINATION_MARGIN
    return next((c for c in GRACE_CLASSES if c >= need), need)


RUN_AS_USER = DEFAULT_TRAINING_UID  # the platform's shared identity (no team given)
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
    # Variables the controller appends to every container itself: ours would be a duplicate
    # name, which the API server warns about ("hides previous definition").
    controller_env: frozenset[str] = frozenset()
    # What the controller does after a pod exits (the contract's TRAINFORGE_ON_EXIT, which
    # the exit lines print): the emitter's answer for its own objects (core.failures.told)
    on_exit: str | None = None


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


def command(job: JobSpec, target: JobTarget) -> list[Any]:
    """The container command, the same for every backend (`entrypoint.command_for`): each
    backend provides MASTER_ADDR, MASTER_PORT and RANK (see `Launch`)."""
    return command_for(job, target)


def env(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, launch: Launch | None = None
) -> list[dict[str, Any]]:
    """The container's environment: the platform's defaults, the job contract
    (`entrypoint.contract_env`: PYTHONPATH, LOCAL_RANK or torchrun's shutdown timeout, the
    TRAINFORGE_* variables, MLflow), the backend's rendezvous variables where its controller
    does not set them, NCCL/EFA, then the job's own `env` (new names last, so that they may
    refer to any of these: `$(TRAINFORGE_OUTPUT_DIR)/data`)."""
    out: list[dict[str, Any]] = [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # code volume is read-only
        # The root filesystem is read-only and the image's HOME is not ours: caches go to /tmp,
        # and the team's MLflow credentials are mounted at $HOME/.mlflow (tenancy.HOME; a job
        # may not change it, trainforge.stack.jobs.RESERVED_ENV).
        {"name": "HOME", "value": tenancy.HOME},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": "/tmp/torchinductor"},
        {"name": "TRITON_CACHE_DIR", "value": "/tmp/triton"},
    ]
    out += contract_env(job, target, ships_runtime=code is not None)
    if launch is not None and launch.on_exit is not None:
        out.append({"name": contract.ON_EXIT, "value": launch.on_exit})
    # the team's experiment, beside MLFLOW_TRACKING_URI (its user is a file: volume_mounts)
    out += tenancy.mlflow_env(target)
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
            # libfabric's EFA provider takes its internal bounce buffers from huge pages by
            # default. Our pods request no `hugepages-2Mi` (so their cgroup's hugetlb limit is
            # 0, and a request would leave pods Pending on nodes whose pool Karpenter's AMI
            # does not reserve), and with huge pages on, forked DataLoader workers fail with
            # "Cannot allocate memory" (the AWS EFA cheatsheet's advice: set 0 then). Off, the
            # buffers use normal pages; NCCL's GPU buffers go through GPUDirect RDMA either way.
            {"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"},
        ]
        if target.pool.rdma:
            out.append({"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"})
    if launch is not None and launch.controller_env:
        out = [e for e in out if e["name"] not in launch.controller_env]
    return with_user_env(out, job.env)


def with_user_env(platform: list[dict[str, Any]], user: tuple[tuple[str, str], ...]) -> list:
    """Each name once: the platform's variables, then the job's own `env` in its order
    (dependency order, trainforge.stack.jobs._env); a user value replaces a platform default
    of the same name (NCCL_DEBUG, NCCL_SOCKET_IFNAME, FI_PROVIDER ...) by taking its place at
    the end, where, as Kubernetes expands a value only from the variables before it, it may
    refer to every platform variable and to the job's other variables (core.expansion).
    Names the platform must own (the contract's) are refused when the job is parsed
    (trainforge.stack.jobs.RESERVED_ENV)."""
    given = {k for k, _ in user}
    return [e for e in platform if e["name"] not in given] + [
        {"name": k, "value": v} for k, v in user
    ]


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
    return pool_tolerations(target.pool, gpu=bool(job.gpus_per_worker))


def pool_tolerations(pool: PoolFacts, gpu: bool) -> list[dict[str, str]]:
    """Tolerate each of the pool's taints (and, for a GPU pod, the GPU taint)."""
    out = []
    for t in pool.taints:
        tol = {"key": t.key, "effect": t.effect}
        if t.value is None:
            tol["operator"] = "Exists"
        else:
            tol.update(operator="Equal", value=t.value)
        out.append(tol)
    if gpu and not any(t.key == GPU_RESOURCE for t in pool.taints):
        out.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    return out


def _ids(team: TeamFacts | None) -> tuple[int, int]:
    """The team's UID/GID (TeamFacts); the platform default where no team is known."""
    return tenancy.run_as(team) if team is not None else (RUN_AS_USER, RUN_AS_USER)


def container_security_context(team: TeamFacts | None = None) -> dict[str, Any]:
    """The training container's, as team `team`'s pods run it (the platform default UID/GID
    where no team is known). The plan's pod script rehearsal reads it for a team whose pods
    are not declared yet: the one source of who a training pod is."""
    # EFA needs no capability here: the EKS accelerated AMIs run containerd with an
    # unlimited memlock rlimit, which is what libfabric's memory registration needs, so
    # IPC_LOCK is not added and nothing runs privileged.
    uid, gid = _ids(team)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context(team: TeamFacts | None = None) -> dict[str, Any]:
    """The team's own UID/GID: its FSx directory is 0770 and belongs to them alone, so no
    other team's pods can read or write it (docs/teams.md)."""
    uid, gid = _ids(team)
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


def volume_mounts(
    job: JobSpec, target: JobTarget, parts: PodParts | None = None
) -> list[dict[str, Any]]:
    """/dev/shm, /tmp (with the team's MLflow credentials at $HOME/.mlflow inside it), the
    team's FSx claim, the job's further claims, then the code ConfigMaps (`parts`: the
    runtime library and the job's own code)."""
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tmp", "mountPath": "/tmp"},
        *tenancy.mlflow_credentials_mount(target),
        {"name": "fsx", "mountPath": target.fsx_mount_path},
    ]
    if target.fsx_sub_path and target.claim_name:
        mounts[-1]["subPath"] = target.fsx_sub_path
    mounts += storage.claim_mounts(job)[0]
    if parts is not None:
        mounts += [dict(m) for m in parts.mounts]
    return mounts


def volumes(job: JobSpec, target: JobTarget, parts: PodParts | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        # NCCL and DataLoader workers exchange tensors through /dev/shm; the container
        # runtime's default is 64 MiB. Memory-backed, so it counts against the memory limit.
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": job.shm_size}},
        {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
        *tenancy.mlflow_credentials_volume(target),
        {"name": "fsx", "persistentVolumeClaim": {"claimName": target.claim_name}}
        if target.claim_name
        # No FSx on this platform: same paths on pod-local disk (see JobTarget.claim_name).
        else {"name": "fsx", "emptyDir": {}},
    ]
    out += storage.claim_mounts(job)[1]
    if parts is not None:
        out += [dict(v) for v in parts.volumes]
    return out


# Every job container's pull policy, set here rather than left to Kubernetes' default (which is
# Always for `:latest` or an untagged image); `trainforge import` says it for the policy it drops.
IMAGE_PULL_POLICY = "IfNotPresent"


def pod_template(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    launch: Launch,
    user_code: CodeBundle | None = None,
) -> dict[str, Any]:
    """The pod template (metadata + spec) every pod of the job runs, on any backend. What the
    container runs, its contract env and the code volumes come from `entrypoint.pod_parts`."""
    parts = pod_parts(job, target, code, user_code)
    container: dict[str, Any] = {
        "name": launch.container,
        "image": image(job, target),
        "imagePullPolicy": IMAGE_PULL_POLICY,
        "command": parts.command,
        "env": env(job, target, code, launch),
        "ports": ports(job, launch),
        "resources": resources(job, target),
        "volumeMounts": volume_mounts(job, target, parts),
        "securityContext": container_security_context(target.team),
    }
    if parts.working_dir is not None:
        container["workingDir"] = parts.working_dir
    spec: dict[str, Any] = {
        "serviceAccountName": target.service_account,
        # Training never calls the Kubernetes API; S3 access comes from the Pod Identity
        # agent, whose webhook mounts its own projected token whatever this says.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": termination_grace(job),
        "enableServiceLinks": False,
        "securityContext": pod_security_context(target.team),
        "nodeSelector": dict(target.pool.node_selector),
        "containers": [container],
        "volumes": volumes(job, target, parts),
    }
    if parts.share_process_namespace:
        spec["shareProcessNamespace"] = True
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
    controller adds its own labels and rendezvous variables); `configmap` (the runtime
    library) is None with codeSource: image; `user_configmap` holds the job's own shipped
    code (an entrypoint's codeDir or a function's generated file); `service` is the indexed
    Job's headless Service.
    """

    backend: str
    workload: dict
    pod: dict
    podmonitor: dict | None
    configmap: dict | None
    service: dict | None = None
    user_configmap: dict | None = None

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


def check_user_code(job: JobSpec, user_code: CodeBundle | None) -> CodeBundle | None:
    """The job's own code bundle an emitter ships (None when the job ships none)."""
    entry = job.entrypoint
    if entry is None or not entry.ships_code:
        return None
    if user_code is None:
        raise ValueError(f"job {job.name!r} ships its own code but no bundle was given")
    return user_code


def configmaps(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, user_code: CodeBundle | None
) -> tuple[dict | None, dict | None]:
    """The runtime library's and the job's own code's ConfigMaps (None where not shipped)."""
    from trainforge.jobs.codeship import configmap_manifest  # noqa: PLC0415

    ns, lab = target.namespace, labels(job)
    cm = configmap_manifest(code, job.name, ns, lab) if code else None
    user = configmap_manifest(user_code, job.name, ns, lab, role="src") if user_code else None
    return cm, user


def expected_duration_annotations(
    job: JobSpec, pool: PoolFacts, obj: dict[str, Any] | None = None
) -> dict[str, str]:
    """The job's expected run time on the nodes its pool launches for it
    (`duration.launch_duration`: the per-type estimate the plan's Cost reads; a range where
    only the prices decide the type), on its object: a team member reading the live queue
    (`trainforge status` of a job waiting behind this one) gets the plan's figure without the
    stack's program. `obj`: the job's object, whose pod templates may cap its pods per node
    (`packing.spread_limit`). The seconds only when known; the basis always (it says why a
    figure is missing)."""
    from trainforge.core import pods  # noqa: PLC0415
    from trainforge.jobs import packing  # noqa: PLC0415

    most = None
    if obj is not None:
        most = packing.templates_limit(t.template for t in pods.pod_templates(obj, {}))
    d = duration.launch_duration(job, pool, most)
    out = {duration.EXPECTED_BASIS: d.detail + d.cut_note}
    if d.seconds is not None:
        out[duration.EXPECTED_SECONDS] = f"{d.seconds:.0f}"
    return out


def workload_object(
    api_version: str, kind: str, job: JobSpec, target: JobTarget, spec: dict[str, Any]
) -> dict[str, Any]:
    """A job's workload object with the metadata it has on every backend: the one place its
    labels and annotations are built.

    The queue labels make Kueue hold the job (the workload's `suspend`, which Kueue owns and
    this program never sets) until the team's queue can admit all of its pods."""
    labels_ = {**labels(job), **tenancy.queue_labels(job, target)}
    metadata: dict[str, Any] = {"name": job.name, "namespace": target.namespace, "labels": labels_}
    obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}
    metadata["annotations"] = expected_duration_annotations(job, target.pool, obj)
    return obj


def emit_job(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None,
    *,
    backend: str,
    launch: Launch,
    workload: Callable[[dict[str, Any]], dict[str, Any]],
    podmonitor: Callable[[], dict[str, Any] | None],
    service: Callable[[], dict[str, Any]] | None = None,
) -> EmittedJob:
    """All objects of a resolved job, the same steps on every backend: refuse an unresolved
    job or a missing bundle, build the code ConfigMaps and the one pod template (with the
    backend's `launch`), then the backend's own objects: `workload(template)` (the object that
    runs the pods), its PodMonitor and, for the indexed Job, its headless Service."""
    code = check_emittable(job, code)
    user_code = check_user_code(job, user_code)
    cm, user_cm = configmaps(job, target, code, user_code)
    template = pod_template(job, target, code, launch, user_code)
    return EmittedJob(
        backend=backend,
        workload=workload(template),
        pod=template,
        podmonitor=podmonitor(),
        configmap=cm,
        service=service() if service is not None else None,
        user_configmap=user_cm,
    )
