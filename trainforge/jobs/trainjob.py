"""Emitter: a resolved JobSpec + JobTarget -> Kubeflow Trainer v2 objects (the pinned
TRAINER_VERSION, core/versions.py: v2.2.1): the
platform's ClusterTrainingRuntimes (what is the same on every pod, one per restart policy,
code variant and grace class) and a TrainJob per job (its trainer fields and a runtime patch),
both from the shared pod builder (`trainforge.jobs.pod`), so a TrainJob's pods are the pods
its PyTorchJob would have. `effective_pod` rehearses what the Trainer controller builds from
the two; `built_pod` is the one builder of that pod every reader sees. What each carries,
why, and what the pinned Trainer cannot do per job: docs/jobs.md, "`trainjob`: the runtime and the
TrainJob" and "When to use which".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from trainforge.core import failures, pods
from trainforge.core.contract import JobTarget
from trainforge.core.errors import JobConfigError
from trainforge.core.quantity import parse_quantity
from trainforge.core.versions import TRAINER_VERSION
from trainforge.jobs import pod, success, tenancy
from trainforge.jobs.codeship import USER_CODE_MOUNT
from trainforge.jobs.indexed_job import podmonitor_manifest  # noqa: F401 - the JobSet's Job's
from trainforge.jobs.pod import labels
from trainforge.jobs.spec import JobSpec, RunPolicySpec

BACKEND = "trainjob"
GROUP = "trainer.kubeflow.org"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "TrainJob"
PLURAL = "trainjobs"  # the CRD's spec.names.plural (plan/data/crds/trainer.kubeflow.org_trainjobs)
KUEUE_FRAMEWORK = f"{GROUP}/trainjob"  # kueue v0.19.2 trainjob_controller.go FrameworkName
RUNTIME_KIND = "ClusterTrainingRuntime"
# Where a fleet manager's TrainJob names MultiKueue (trainer v2.2.1 pkg/apis/trainer/v1alpha1
# trainjob_types.go: `managedBy`, immutable, one of trainer.kubeflow.org/trainjob-controller or
# kueue.x-k8s.io/multikueue).
MANAGED_BY = ("spec", "managedBy")
CONTAINER = "node"  # constants.Node (Trainer v2.2.1): the container the torch plugin wires
REPLICATED_JOB = "node"  # ... in the replicated job of this name
ANCESTOR_LABEL = f"{GROUP}/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
FRAMEWORK_LABEL = f"{GROUP}/framework"
MASTER_PORT = 29500  # constants.ContainerTrainerPort (v2.2.1); the plugin adds the port
# The label every pod of a TrainJob carries, whoever made the TrainJob (trainforge or the
# Kubeflow SDK, whose TrainJobs have no trainforge.io/job label): the Trainer names the JobSet
# after the TrainJob (v2.2.1 pkg/runtime/framework/plugins/jobset/jobset.go:
# `JobSet(trainJob.Name, ...)`), and JobSet labels each child Job's pod template with its
# name (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go
# labelAndAnnotateObject: `labels[jobset.JobSetNameKey] = js.Name`; api/jobset/v1alpha2
# JobSetNameKey = "jobset.sigs.k8s.io/jobset-name"), read 2026-11-30.
POD_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# runtimePatches are keyed by manager, a domain-prefixed path (the Trainer webhook checks it).
PATCH_MANAGER = "trainforge.io/jobs"
# PET_* are the torch plugin's; the Trainer webhook refuses them in trainer.env.
NPROC_ENV = "PET_NPROC_PER_NODE"  # `proc_per_node`'s count, which torchrun reads
TORCH_RESERVED_ENV = (
    "PET_NNODES",
    NPROC_ENV,
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
# One runtime per restart policy: restart behaviour is a Job-template field, which v2.2.1 does
# not let a TrainJob patch (pkg/apis/trainer/v1alpha1/trainjob_types.go: JobSpecPatch has only
# `template`, PodSpecPatch no restartPolicy; kubeflow/trainer v2.2.1 c505fc7c, read 2026-11-30).
RUNTIMES = {
    "OnFailure": "trainforge-torch",
    "ExitCode": "trainforge-torch-exitcode",
    "Never": "trainforge-torch-never",
}
# What the runtimes fix for every job: the job model's defaults.
RUNTIME_RUN_POLICY = RunPolicySpec()
RUNTIME_METRICS_PORT = JobSpec.model_fields["metrics_port"].default
# restartPolicy ExitCode as the training operator v1 implements it: the codes it does not
# retry (1-127, the program's own failures) fail the job; the others (signals: OOM kill 137,
# SIGTERM 143; the runtime's 200-205) are retried within backoffLimit (trainforge.core.failures).
PERMANENT_EXIT_CODES = list(failures.PERMANENT_EXIT_CODES)


def master_addr(job: JobSpec) -> str:
    """Rank 0's stable name: JobSet pod `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` in
    the JobSet's subdomain (the JobSet is named after the TrainJob)."""
    return f"{job.name}-{REPLICATED_JOB}-0-0.{job.name}"


def launch(job: JobSpec) -> pod.Launch:
    return pod.Launch(
        container=CONTAINER,
        port=MASTER_PORT,
        declare_port=False,
        rendezvous_env=pod.static_rendezvous_env(job, master_addr(job), MASTER_PORT),
        on_exit=success.told(job, outcome),
    )


def outcome(job: JobSpec, code: int, *, disrupted: bool = False) -> failures.Outcome:
    """What Trainer's JobSet and its child Job do with a pod of `job` whose `node` container
    exited `code` (core.failures), read from the platform runtime the TrainJob names
    (`restart_doc`): the Job controller's answer, and where the child Job fails, the JobSet's
    failure policy (maxRestarts 0: the JobSet fails, and the TrainJob with it)."""
    jobset = pods.get(runtime_of(restart_doc(job)), *RUNTIME_SHAPE.levels[0], "spec") or {}
    return failures.jobset_outcome(jobset, REPLICATED_JOB, CONTAINER, code, disrupted=disrupted)


# A job with its own code (an `entrypoint`) needs two pod fields that a v2.2.1 runtime patch
# cannot set per job (v2.2.1 trainjob_types.go: PodSpecPatch has no shareProcessNamespace,
# ContainerPatch no workingDir; c505fc7c, read 2026-11-30): `shareProcessNamespace` (so that SIGTERM reaches a script that installs
# no handler, see trainforge.jobs.entrypoint) and, when its code is shipped, the container's
# `workingDir` (the code's mount). The platform installs a variant of each runtime with them:
# suffix -> (shareProcessNamespace, workingDir).
VARIANTS: dict[str, tuple[bool, str | None]] = {
    "": (False, None),
    "-code": (True, USER_CODE_MOUNT),  # user code shipped in a ConfigMap
    "-image": (True, None),  # user code in the image (module or command without codeDir)
}


def variant(job: JobSpec) -> str:
    entry = job.entrypoint
    if entry is None:
        return ""
    return "-code" if entry.ships_code else "-image"


def grace_suffix(grace: int) -> str:
    """Runtime name suffix of a terminationGracePeriodSeconds class (none for the default)."""
    return "" if grace == pod.GRACE_CLASSES[0] else f"-grace{grace}"


def runtime_name(job: JobSpec) -> str:
    return RUNTIMES[job.restart_policy] + variant(job) + grace_suffix(pod.termination_grace(job))


# --- what the pinned Trainer (v2.2.1) cannot express per job ----------------------------------


def check(job: JobSpec, target: JobTarget, where: str) -> None:
    """Refuse, at preview, what a TrainJob on the platform's runtimes cannot do."""
    if job.elastic is not None:
        raise JobConfigError(
            f"{where}.preset",
            "elastic",
            f"Kubeflow Trainer v{TRAINER_VERSION} has no elastic PyTorch (its torch plugin "
            "runs a fixed numNodes); use backend: pytorchjob for elastic jobs",
        )
    if job.metrics_port not in (0, RUNTIME_METRICS_PORT):
        raise JobConfigError(
            f"{where}.metricsPort",
            job.metrics_port,
            f"a TrainJob's container ports come from the platform's ClusterTrainingRuntime, "
            f"which declares {RUNTIME_METRICS_PORT}; use {RUNTIME_METRICS_PORT} or 0, or "
            "backend: pytorchjob / indexed-job",
        )
    if job.entrypoint is not None and job.entrypoint.working_dir is not None:
        # neither spec.trainer nor a runtime patch's container has the field (the v2.2.1
        # CRD, plan/data/crds/trainer.kubeflow.org_trainjobs.yaml, tag v2.2.1 c505fc7c)
        raise JobConfigError(
            f"{where}.entrypoint.workingDir",
            job.entrypoint.working_dir,
            "a TrainJob's container takes its working directory from the "
            f"ClusterTrainingRuntime (Kubeflow Trainer v{TRAINER_VERSION} has no per-job "
            "field for it); "
            "give your command absolute paths and leave it unset, or use backend: "
            "pytorchjob / indexed-job",
        )
    rp, fixed = job.run_policy, RUNTIME_RUN_POLICY
    for key, value, runtime_value in (
        ("backoffLimit", rp.backoff_limit, fixed.backoff_limit),
        (
            "ttlSecondsAfterFinished",
            rp.ttl_seconds_after_finished,
            fixed.ttl_seconds_after_finished,
        ),
        ("cleanPodPolicy", rp.clean_pod_policy, fixed.clean_pod_policy),
    ):
        if value != runtime_value:
            raise JobConfigError(
                f"{where}.runPolicy.{key}",
                value,
                f"Kubeflow Trainer v{TRAINER_VERSION} takes it from the ClusterTrainingRuntime, "
                "not the "
                f"TrainJob; the platform's runtimes use {runtime_value!r}. Leave it unset, or "
                "use backend: pytorchjob / indexed-job",
            )


# --- the platform's ClusterTrainingRuntimes ------------------------------------------------------

# Where a Trainer runtime (ClusterTrainingRuntime, TrainingRuntime) keeps its JobSet template,
# each replicated job's Job template and that Job's pod template, the one spelling its
# emitter, its readers here and the plan's walker (backends.SHAPES) use: Trainer v2.2.1
# pkg/apis/trainer/v1alpha1/trainingruntime_types.go TrainingRuntimeSpec `template`
# (JobSetTemplateSpec: metadata, spec); JobSet v0.12.0 api/jobset/v1alpha2/jobset_types.go
# JobSetSpec `replicatedJobs` []ReplicatedJob (`name`, `replicas`, `template`: a Job
# template), read 2026-11-30. A replicated job runs `replicas` Jobs of `parallelism` pods.
RUNTIME_SHAPE = pods.Shape(
    levels=(
        ("spec", "template"),
        ("spec", "replicatedJobs", pods.EACH, "template"),
        ("spec", "template"),
    ),
    replicas=(("replicas",), ("template", "spec", "parallelism")),
)


def runtime_node(runtime: Mapping[str, Any], depth: int = 3) -> dict[str, Any]:
    """The `node` replicated job's level `depth` of RUNTIME_SHAPE in `runtime` (2: its Job
    template, 3: its pod template), the object itself; StopIteration when it has none."""
    shape = pods.Shape(levels=RUNTIME_SHAPE.levels[:depth])
    found = pods.pod_templates(runtime, {"": shape}, kind="", build=False)
    return next(t.template for t in found if t.name == REPLICATED_JOB)


def _runtime_pod(
    restart_policy: str, suffix: str = "", grace: int = pod.GRACE_CLASSES[0]
) -> dict[str, Any]:
    """The pod every TrainJob starts from: what the pod builder puts on every pod."""
    share, working_dir = VARIANTS[suffix]
    template = {
        "metadata": {},
        "spec": {
            # Here, not in the TrainJob's patch: v2.2.1's PodSpecPatch has no such field
            # (a later release added it), and Kueue re-encodes the patch with those types.
            "terminationGracePeriodSeconds": grace,
            # OnFailure restarts the container in place, as a PyTorchJob's OnFailure does;
            # ExitCode and Never need Never (a pod failure policy requires it).
            "restartPolicy": "OnFailure" if restart_policy == "OnFailure" else "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod.pod_security_context(),
            "containers": [
                {
                    "name": CONTAINER,
                    # Every TrainJob sets its own image; this one only makes the template valid.
                    "image": pod.default_image(),
                    "imagePullPolicy": pod.IMAGE_PULL_POLICY,
                    "ports": [
                        {
                            "name": pod.METRICS_PORT_NAME,
                            "containerPort": RUNTIME_METRICS_PORT,
                            "protocol": "TCP",
                        }
                    ],
                    "securityContext": pod.container_security_context(),
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                # Sized per job by the TrainJob's patch (a quarter of its memory by default).
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "tmp", "emptyDir": {"sizeLimit": pod.TMP_SIZE}},
            ],
        },
    }
    if share:
        template["spec"]["shareProcessNamespace"] = True
    if working_dir is not None:
        template["spec"]["containers"][0]["workingDir"] = working_dir
    return template


def _runtime_job(restart_policy: str, suffix: str, grace: int) -> dict[str, Any]:
    """The Job template of the runtime's `node` replicated job, its pod where RUNTIME_SHAPE
    puts it."""
    rp = RUNTIME_RUN_POLICY
    spec: dict[str, Any] = {
        # JobSet's DNS names and PET_NODE_RANK need an Indexed Job; parallelism and
        # completions are set from the TrainJob's numNodes.
        "completionMode": "Indexed",
        # As a PyTorchJob's runPolicy.backoffLimit: container restarts (OnFailure) or failed
        # pods (ExitCode) of the whole job before it fails; Never fails on the first.
        "backoffLimit": 0 if restart_policy == "Never" else rp.backoff_limit,
    }
    job = {"metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}}, "spec": spec}
    _merge(job, _at(RUNTIME_SHAPE.levels[2], _runtime_pod(restart_policy, suffix, grace)))
    if restart_policy == "ExitCode":
        spec["podFailurePolicy"] = {
            "rules": [
                # A pod preempted, evicted or lost with its node is retried without counting.
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": CONTAINER,
                        "operator": "In",
                        "values": PERMANENT_EXIT_CODES,
                    },
                },
            ]
        }
    return job


def runtime_manifest(
    restart_policy: str = "OnFailure", suffix: str = "", grace: int = pod.GRACE_CLASSES[0]
) -> dict[str, Any]:
    """The platform's ClusterTrainingRuntime for one restart policy, `VARIANTS` suffix and
    terminationGracePeriodSeconds class (pod.GRACE_CLASSES)."""
    rp = RUNTIME_RUN_POLICY
    to_jobset, to_job, _ = RUNTIME_SHAPE.levels
    job = _runtime_job(restart_policy, suffix, grace)
    jobset = {
        "spec": {
            # The child Job's backoffLimit is the restart budget, as in a PyTorchJob:
            # when it is spent the JobSet (and the TrainJob) fails.
            "failurePolicy": {"maxRestarts": 0},
            # Pods of a finished job go after a day; the TrainJob object stays.
            "ttlSecondsAfterFinished": rp.ttl_seconds_after_finished,
        }
    }
    _merge(jobset, _at(to_job, job, {"name": REPLICATED_JOB, "replicas": 1}))
    doc = {
        "apiVersion": API_VERSION,
        "kind": RUNTIME_KIND,
        "metadata": {
            "name": RUNTIMES[restart_policy] + suffix + grace_suffix(grace),
            "labels": {
                FRAMEWORK_LABEL: "torch",
                "app.kubernetes.io/name": "trainforge",
                "app.kubernetes.io/managed-by": "pulumi",
            },
        },
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}},
    }
    _merge(doc, _at(to_jobset, jobset))
    return doc


# The Kubeflow SDK's default runtime: `TrainerClient().train(trainer=CustomTrainer(func=...))`
# without `runtime=` asks for the ClusterTrainingRuntime "torch-distributed" (kubeflow 0.5.0 on
# PyPI, kubeflow/trainer/constants/constants.py DEFAULT_TRAINING_RUNTIME; read from the wheel
# 2026-11-27; the same in 0.4.1, the pinned SDK, read 2026-11-29). Its CustomTrainer command
# (TORCH_COMMAND there, the same in both) is
# `bash -c 'read -r -d "" SCRIPT << EOM ... EOM; printf "%s" "$SCRIPT" > "<file>.py";
# torchrun "<file>.py"'`: it writes the function into the container's working directory, so
# that directory must be writable under our read-only root file system and non-root user, and
# pip's caches need a writable HOME (`packages_to_install` itself cannot work: a team's egress
# reaches no package index, so `plan --sdk` refuses it, plan/checks/submitted.py). The SDK's
# TrainJob sets no image, restart policy or tolerations: the runtime's stock PyTorch image runs
# it, OnFailure restarts it (plain torchrun exits 1 for any failure, which ExitCode would take
# as permanent), and Kueue gives it its flavor's tolerations (the team's default LocalQueue).
SDK_RUNTIME = "torch-distributed"
SDK_WORKSPACE = "/workspace"  # the SDK's WORKSPACE_PATH (its initializers write below it)


def sdk_runtime_manifest() -> dict[str, Any]:
    """The ClusterTrainingRuntime the Kubeflow SDK uses by default (SDK_RUNTIME): the
    platform's OnFailure runtime for code that is not shipped (shareProcessNamespace), with
    a writable emptyDir as working directory and HOME=/tmp (tenancy.HOME)."""
    doc = runtime_manifest("OnFailure", "-image")
    doc["metadata"]["name"] = SDK_RUNTIME
    pod_spec = runtime_node(doc)["spec"]
    container = pod_spec["containers"][0]
    container["workingDir"] = SDK_WORKSPACE
    container["volumeMounts"].append({"name": "workspace", "mountPath": SDK_WORKSPACE})
    container["env"] = [{"name": "HOME", "value": tenancy.HOME}]
    pod_spec["volumes"].append({"name": "workspace", "emptyDir": {"sizeLimit": pod.TMP_SIZE}})
    return doc


def runtime_manifests() -> list[dict[str, Any]]:
    """Every ClusterTrainingRuntime the platform installs with the trainjob backend: one per
    restart policy, variant and grace class, and the Kubeflow SDK's default (SDK_RUNTIME)."""
    return [
        *(
            runtime_manifest(policy, suffix, grace)
            for policy in RUNTIMES
            for suffix in VARIANTS
            for grace in pod.GRACE_CLASSES
        ),
        sdk_runtime_manifest(),
    ]


# --- a job ------------------------------------------------------------------------------------


def _pod_patch(template: dict[str, Any]) -> dict[str, Any]:
    """The per-job part of the pod, in the fields a v2.2.1 runtime patch accepts
    (trainjob_types.go PodSpecPatch, ContainerPatch)."""
    spec = template["spec"]
    container = spec["containers"][0]
    # No terminationGracePeriodSeconds: v2.2.1's PodSpecPatch has none (the runtime carries it).
    patch: dict[str, Any] = {
        "serviceAccountName": spec["serviceAccountName"],
        "securityContext": spec["securityContext"],
        "nodeSelector": spec["nodeSelector"],
        "volumes": spec["volumes"],
        "containers": [
            {
                "name": CONTAINER,
                "securityContext": container["securityContext"],
                "volumeMounts": container["volumeMounts"],
            }
        ],
    }
    if spec.get("tolerations"):
        patch["tolerations"] = spec["tolerations"]
    return {"metadata": _copy(template["metadata"]), "spec": patch}


def _runtime_ref(job: JobSpec) -> dict[str, Any]:
    return {"apiGroup": GROUP, "kind": RUNTIME_KIND, "name": runtime_name(job)}


def restart_doc(job: JobSpec) -> dict[str, Any]:
    """The TrainJob's fields its retry bound reads (`retry_bound`: the runtime it names, which
    holds the restart fields, its pods, its deadline), as `workload_manifest` writes them,
    without the pods: what jobs.restarts reads the job's restart budget from."""
    spec: dict[str, Any] = {"runtimeRef": _runtime_ref(job), "trainer": {"numNodes": job.workers}}
    if job.run_policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = job.run_policy.active_deadline_seconds
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}


def workload_manifest(job: JobSpec, target: JobTarget, template: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob. The runtime it names is the platform's (`runtime_manifests`), not part of
    the job."""
    container = template["spec"]["containers"][0]
    spec: dict[str, Any] = {
        "runtimeRef": _runtime_ref(job),
        "trainer": {
            "image": container["image"],
            "command": container["command"],
            "env": container["env"],
            "numNodes": job.workers,
            "numProcPerNode": job.procs,
            "resourcesPerNode": container["resources"],
        },
    }
    # The runtime patch, at SHAPE.levels: labels of the JobSet the TrainJob becomes and of its
    # `node` Job, and the per-job part of that Job's pod.
    to_jobset, to_job, to_pod = SHAPE.levels
    job_patch = {"metadata": {"labels": labels(job)}, **_at(to_pod, _pod_patch(template))}
    jobset_patch = {
        "metadata": {"labels": labels(job)},
        **_at(to_job, job_patch, {"name": REPLICATED_JOB}),
    }
    _merge(spec, _at(to_jobset, jobset_patch, {"manager": PATCH_MANAGER})["spec"])
    if job.run_policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = job.run_policy.active_deadline_seconds
    return pod.workload_object(API_VERSION, KIND, job, target, spec)


def _at(path: pods.Path, value: dict[str, Any], *items: dict[str, Any]) -> dict[str, Any]:
    """`value` written at `path`: each `EACH` a one-item list, the item also holding the next
    of `items` (its key fields: a patch's manager, a replicated job's name)."""
    keys = list(items)
    out: Any = value
    for step in reversed(path):
        out = [{**keys.pop(), **out}] if step == pods.EACH else {step: out}
    return out


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for k, v in more.items():
        if isinstance(into.get(k), dict) and isinstance(v, dict):
            _merge(into[k], v)
        else:
            into[k] = v


# --- what the Trainer controller makes of a TrainJob and its runtime ----------------------------

# Strategic-merge keys of the core PodSpec lists a runtime patch may carry (k8s.io/api core/v1
# `patchMergeKey`); other lists (tolerations, capabilities) are replaced whole.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
}


def _copy(value: Any) -> Any:
    """A deep copy of manifest data that keeps any other object as is. A job's command and env
    may hold Pulumi Outputs (the checkpoint bucket's name), which copy.deepcopy cannot copy
    ("__getstate__ can only be called during serialization"); they are values, never edited.
    """
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def strategic_merge(base: Any, patch: Any, key: str | None = None) -> Any:
    """Kubernetes strategic merge patch for the pod fields above (no $patch directives)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = strategic_merge(base[k], v, k) if k in base else _copy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in _MERGE_KEYS:
        merge_key = _MERGE_KEYS[key]
        out = [_copy(item) for item in base]
        for item in patch:
            at = next(
                (i for i, b in enumerate(out) if b.get(merge_key) == item.get(merge_key)), None
            )
            if at is None:
                out.append(_copy(item))
            else:
                out[at] = strategic_merge(out[at], item)
        return out
    return _copy(patch)


def _upsert_env(env: list[dict], entries: list[dict]) -> None:
    for e in entries:
        at = next((i for i, x in enumerate(env) if x["name"] == e["name"]), None)
        if at is None:
            env.append(_copy(e))
        else:
            env[at] = _copy(e)


# What survives Kueue's rewrite of an admitted TrainJob: the fields of Trainer v2.2.1's patch
# types, which Kueue 0.19 vendors (source: kubeflow/trainer v2.2.1
# pkg/apis/trainer/v1alpha1/trainjob_types.go PodSpecPatch and ContainerPatch; kueue
# release-0.19 go.mod, checked 2026-11-25). Any other field of the pod patch is lost.
KUEUE_POD_PATCH_FIELDS = frozenset(
    {
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "nodeSelector",
        "affinity",
        "tolerations",
        "schedulingGates",
    }
)
KUEUE_CONTAINER_PATCH_FIELDS = frozenset({"name", "env", "volumeMounts", "securityContext"})


def _pod_patches(trainjob: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(replicated job name, pod template patch) of each of the TrainJob's runtime patches,
    where SHAPE puts them (the walk the plan's checks make with build=False)."""
    for t in pods.pod_templates(trainjob, {KIND: SHAPE}, build=False):
        yield t.name, t.template


def kueue_admitted(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob as Kueue 0.19 leaves it once it manages it (a queue label): decoded into
    and re-encoded from Trainer v2.2.1's Go types, so pod-patch fields v2.2.1 lacks are gone."""
    if tenancy.QUEUE_LABEL not in ((trainjob.get("metadata") or {}).get("labels") or {}):
        return trainjob
    out = _copy(trainjob)
    for _, pod_tmpl in _pod_patches(out):
        spec = pods.get(pod_tmpl, "spec")
        if isinstance(spec, dict):
            for key in set(spec) - KUEUE_POD_PATCH_FIELDS:
                del spec[key]
            for kind in ("containers", "initContainers"):
                for c in spec.get(kind) or []:
                    for key in set(c) - KUEUE_CONTAINER_PATCH_FIELDS:
                        del c[key]
    return out


def trainer_resources(per_node: Any) -> dict[str, Any] | None:
    """The `resources` Trainer v2.2.1 gives the runtime's `node` container for a TrainJob's
    `trainer.resourcesPerNode`; None: it leaves the runtime's own.

    Why replace, not merge: the JobSet plugin's builder
    (github.com/kubeflow/trainer tag v2.2.1, c505fc7c, pkg/runtime/framework/plugins/jobset/
    builder.go:145-159, read 2026-12-01) builds a fresh ResourceRequirements from
    resourcesPerNode's `limits` and `requests` alone and sets it with
    `WithResources(requirements)`, which replaces the container's whole `resources`: runtime
    limits the TrainJob does not name are gone, and so are the runtime's `claims` (never
    copied from resourcesPerNode either). It does so only when `limits` or `requests` is set
    (non-nil: `requests: {}` counts and leaves the container no requests); absent, null or
    `{}` resourcesPerNode leaves the runtime's resources as they are.
    """
    if not isinstance(per_node, Mapping):
        return None
    kinds = {k: _copy(per_node[k]) for k in ("limits", "requests") if per_node.get(k) is not None}
    return kinds or None


def _count(resources: Any, name_has: str | None, exact: str | None = None) -> int:
    """A ResourceList's count of the first resource whose name holds `name_has` (any case;
    runtime.numGPU) or is `exact`, rounded up as Quantity.Value() rounds; 0: none."""
    for k, v in (resources if isinstance(resources, Mapping) else {}).items():
        if (name_has and name_has in str(k).lower()) or k == exact:
            try:
                return math.ceil(parse_quantity(v))
            except ValueError:
                return 0
    return 0


def proc_per_node(trainjob: Mapping[str, Any], runtime_resources: Any) -> str:
    """PET_NPROC_PER_NODE as Trainer v2.2.1's torch plugin sets it for `trainjob`, whose
    runtime's `node` container asks `runtime_resources` (after the TrainJob's runtime patches;
    None: it names none).

    Why its own reader of resourcesPerNode: the torch plugin's EnforceMLPolicy
    (github.com/kubeflow/trainer tag v2.2.1, c505fc7c, pkg/runtime/framework/plugins/torch/
    torch.go:100-114, runtime.go GetNumGPUPerNode/numGPU, read 2026-12-01) reads the TrainJob's
    resourcesPerNode whenever it is set at all, `{}` included, and the runtime's resources
    (ExtractResourcePerNodeFromRuntime) only when it is not; `trainer_resources` (the JobSet
    builder) leaves the runtime's resources for `{}`. So `resourcesPerNode: {}` on a GPU
    runtime keeps the node's GPUs but names no GPU here: the count is the CPU one, at least
    1, where an absent resourcesPerNode gives `auto` (one process per GPU). An explicit
    numProcPerNode wins; with GPUs (requests, else limits, of any resource whose name holds
    "gpu") it is `auto`; else the CPU requests, else limits, rounded up, at least 1."""
    trainer = pods.get(trainjob, "spec", "trainer") or {}
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    per_node = trainer.get("resourcesPerNode")
    res = per_node if per_node is not None else runtime_resources
    res = res if isinstance(res, Mapping) else {}
    if _count(res.get("requests"), "gpu") or _count(res.get("limits"), "gpu"):
        return "auto"
    cpus = _count(res.get("requests"), None, "cpu") or _count(res.get("limits"), None, "cpu")
    return str(max(1, cpus))


def effective_pod(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The pod template the Trainer v2.2.1 controller gives `trainjob`'s `node` Job.

    Rehearses `TrainingRuntime.newRuntimeInfo` (runtime patches merged into the runtime's
    JobSet template), the JobSet plugin's Trainer builder (image, command, args, env) and
    its resourcesPerNode replacement (`trainer_resources`), and the torch plugin's
    EnforceMLPolicy (PET_* variables, `proc_per_node`, and the trainer port). Labels the JobSet and Job controllers add are not included.
    """
    template = _copy(runtime_node(runtime))
    spec = trainjob["spec"]
    for name, pod_patch in _pod_patches(trainjob):
        if name == REPLICATED_JOB and pod_patch:
            template = strategic_merge(template, pod_patch)
    trainer = spec.get("trainer") or {}
    container = next(c for c in template["spec"]["containers"] if c["name"] == CONTAINER)
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None:
            container[field] = _copy(trainer[field])
    env = container.setdefault("env", [])
    _upsert_env(env, trainer.get("env") or [])
    procs = proc_per_node(trainjob, container.get("resources"))
    resources = trainer_resources(trainer.get("resourcesPerNode"))
    if resources is not None:
        container["resources"] = resources
    nodes = num_nodes(trainjob, runtime)
    name = trainjob["metadata"]["name"]
    _upsert_env(
        env,
        [
            {"name": "PET_NNODES", "value": str(nodes)},
            {"name": NPROC_ENV, "value": str(procs)},
            {
                "name": "PET_NODE_RANK",
                "valueFrom": {"fieldRef": {"fieldPath": pod.COMPLETION_INDEX_FIELD}},
            },
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{REPLICATED_JOB}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        ],
    )
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == MASTER_PORT for p in ports):
        ports.append({"containerPort": MASTER_PORT})
    return template


def runtimes_in(docs: Iterable[Mapping[str, Any]] = ()) -> dict[str, Mapping[str, Any]]:
    """The runtimes a TrainJob may name, for `runtime_of`: the platform's own
    (`runtime_manifests`, which the policy pack knows without a cluster), as `docs` (a plan's
    objects) render them where they do, and the TrainingRuntimes among `docs`."""
    out: dict[str, Mapping[str, Any]] = {d["metadata"]["name"]: d for d in runtime_manifests()}
    for d in docs:
        name, ns = pods.get(d, "metadata", "name"), pods.get(d, "metadata", "namespace")
        if d.get("kind") == RUNTIME_KIND:
            out[str(name)] = d
        elif d.get("kind") == "TrainingRuntime":
            out[f"{ns}/{name}"] = d
    return out


def runtime_of(
    doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
) -> Mapping[str, Any] | None:
    """The runtime TrainJob `doc` names among `runtimes` (`runtimes_in`; default: the
    platform's own): a ClusterTrainingRuntime by name, a TrainingRuntime of its namespace."""
    ref = pods.get(doc, "spec", "runtimeRef") or {}
    name = str(ref.get("name"))
    if (ref.get("kind") or RUNTIME_KIND) != RUNTIME_KIND:
        name = f"{pods.get(doc, 'metadata', 'namespace')}/{name}"
    return (runtimes_in() if runtimes is None else runtimes).get(name)


def built_pod(
    doc: dict[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The pod the Trainer builds for TrainJob `doc` (`effective_pod`) from the runtime it
    names (`runtime_of`; None without one), as Kueue leaves the job once it manages it
    (`kueue_admitted`): the one builder every reader of a TrainJob's pod sees, through
    `backends.pod_templates`. Raises what `effective_pod` raises for a malformed job."""
    runtime = runtime_of(doc, runtimes)
    if runtime is None:
        return None
    return effective_pod(kueue_admitted(doc), dict(runtime))


def num_nodes(doc: Mapping[str, Any], runtime: Mapping[str, Any]) -> int:
    """The TrainJob's pods: its `trainer.numNodes`, else its runtime's `mlPolicy.numNodes`,
    else 1 (Trainer v2.2.1 pkg/runtime/framework/plugins/torch/torch.go:
    `ptr.Deref(trainerPS.Count, 1)`)."""
    for n in (
        pods.get(doc, "spec", "trainer", "numNodes"),
        pods.get(runtime, "spec", "mlPolicy", "numNodes"),
    ):
        if n is not None:
            return int(n)
    return 1


def pod_count(doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None) -> int:
    """SHAPE's `count`: the pods Trainer runs for TrainJob `doc` (`num_nodes`, with the runtime
    it names among `runtimes`, None: the platform's own); 1 for a value that is no count (the
    API server refuses it; validation reports it), as the walker counts a missing replica.

    Why one reader: the world size, the queue check's quota and the cost all count a
    TrainJob's pods through `pods.Shape.pod_count`; each reading `trainer.numNodes` alone
    counted 1 for a job that leaves its node count to its runtime."""
    try:
        runtime = runtime_of(doc, runtimes) or {}
        n = num_nodes(doc, runtime)
    except (TypeError, ValueError, AttributeError):
        return 1
    return n if n >= 1 else 1


# --- how Trainer retries it (the plan's retry bound reads this through backends.SHAPES)


def retry_bound(doc: Mapping[str, Any], inputs: pods.RetryInputs) -> pods.Bound | None:
    """Trainer v2.2.1 runs the Job of its runtime's replicated job `node` through a JobSet,
    which the platform's runtimes give `failurePolicy.maxRestarts: 0`: the Kubernetes Job controller's bound of that Job, ended
    in time by the TrainJob's activeDeadlineSeconds. None: the runtime is not known."""
    spec = doc.get("spec") or {}
    runtime = runtime_of(doc, inputs.runtimes)
    try:
        job_spec = pods.get(runtime_node(runtime or {}, 2), "spec") or {}
    except StopIteration:
        return None
    bound = pods.job_spec_bound(job_spec, inputs.code, num_nodes(doc, runtime))
    return pods.with_deadline(bound, spec.get("activeDeadlineSeconds"))


def _built_templates(
    doc: dict[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None
) -> list[tuple[str, dict[str, Any]]] | None:
    """SHAPE's `build`: the pod Trainer builds (`built_pod`); None when the runtime is not
    known or the job too malformed to build (validation reports it)."""
    if not isinstance(pods.get(doc, "metadata", "name"), str):
        return None
    try:
        built = built_pod(doc, runtimes)
    except (KeyError, TypeError, AttributeError, StopIteration):
        return None
    return [("", built)] if built is not None else None


# The TrainJob's shape (backends.SHAPES). It writes only a patch of its runtime's pod; the pod
# that runs is the one Trainer builds from both (`build`), `count` of it: its numNodes, else
# its runtime's (a patch, read with build=False, counts 1: it is no pod of its own).
# `levels`: where a runtime patch puts the JobSet's, each Job's and their pod's patch, the one
# spelling the emitter, the plan's walker, `_pod_patches` and the importer read: Trainer v2.2.1 pkg/apis/trainer/v1alpha1/
# trainjob_types.go (tag v2.2.1, c505fc7c, read 2026-11-30): TrainJobSpec `runtimePatches`
# []RuntimePatch -> `trainingRuntimeSpec` (TrainingRuntimeSpecPatch) -> `template`
# (JobSetTemplatePatch: metadata, spec) -> `replicatedJobs` []ReplicatedJobPatch (name) ->
# `template` (JobTemplatePatch: metadata, spec) -> `template` (PodTemplatePatch: metadata, spec).
SHAPE = pods.Shape(
    levels=(
        ("spec", "runtimePatches", pods.EACH, "trainingRuntimeSpec", "template"),
        ("spec", "replicatedJobs", pods.EACH, "template"),
        ("spec", "template"),
    ),
    build=_built_templates,
    job=True,
    count=lambda doc, runtimes: pod_count(doc, runtimes),  # numNodes, else the runtime's
    trainer=("spec", "trainer"),  # image, command, args, env
    container=CONTAINER,  # its resources: the built pod's, else trainer_resources
    trainer_resources=lambda t: trainer_resources(t.get("resourcesPerNode")),
    procs=("spec", "trainer", "numProcPerNode"),  # without a runtime to build from
    procs_env=NPROC_ENV,  # the built pod's: numProcPerNode, else `auto` or the CPU count
    retry=retry_bound,
)
