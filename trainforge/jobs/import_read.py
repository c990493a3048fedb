"""Reading the YAML `trainforge import` translates (trainforge.jobs.importer): the documents, the
one job among them, and its parts in one shape whatever the kind.

Why its own module: each kind (kubeflow.org/v1 PyTorchJob, Kubeflow Trainer TrainJob, indexed
batch/v1 Job) keeps its pods, replicas and policies in other fields; reading them here, with
every malformed field refused as one line naming the file and the field, leaves the importer
one shape to translate. Pulumi-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainforge.core import pods, versions
from trainforge.core.pods import EACH
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import import_restarts, pytorchjob, trainjob
from trainforge.stack.file import DuplicateKeyError, StackFileError, load_yaml
from trainforge.stack.jobs import RESERVED_ENV, RunPolicySpec, whole_command_line

SUPPORTED = (
    f"a {pytorchjob.API_VERSION} PyTorchJob, a {trainjob.API_VERSION} TrainJob or a batch/v1 "
    "Job with completionMode: Indexed (and ConfigMaps holding its code)"
)


class ImportProblem(ValueError):
    """Input the importer cannot translate: one line naming the file and the field."""

    def __init__(self, file: str, where: str, message: str) -> None:
        super().__init__(f"{file}: {where}: {message}")


@dataclass
class Workload:
    """The parts every supported kind has, with the field paths they were read from."""

    kind: str
    name: str
    workers: int
    container: dict[str, Any]
    at: str  # field path of the container
    pod: dict[str, Any]
    pod_at: str
    extra: dict[str, Any] = field(default_factory=dict)  # entry keys read from the kind
    pods: str = ""  # how the kind counts its pods ("1 Master + 3 Worker")
    resources_key: str = "resources"  # the container's resources field (TrainJob: per node)
    runtime_ref: str | None = None  # a TrainJob's spec.runtimeRef.name (importer says its fate)
    runtime_said: str = ""  # what that runtime is (`_runtime`), said with its fate
    # (field path, metadata) of the job and of each pod template: their labels and
    # annotations, which the importer names one by one
    metadata: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # the other replicas' pods (a PyTorchJob's Worker beside Master): `same_pods`
    # (jobs/import_workers.py) holds them to this one's, the pod every replica gets
    others: list[Workload] = field(default_factory=list)

    @property
    def resources_at(self) -> str:
        """The field path of the pod's resources, as the user's file spells it: a container's
        `resources`, a TrainJob's `spec.trainer.resourcesPerNode`."""
        return f"{self.at}.{self.resources_key}"


# --- reading -----------------------------------------------------------------------------------


def read_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of `path` (mappings only). Raises ImportProblem."""
    file = str(path)
    if path.suffix == ".py":
        raise ImportProblem(
            file, "file", f"a Python program; trainforge import reads YAML only: {SUPPORTED}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImportProblem(file, "file", "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ImportProblem(file, "file", f"cannot be read as UTF-8 text ({e})") from None
    try:
        docs = [d for d in load_yaml(text, file, all_documents=True) if d is not None]
    except DuplicateKeyError as e:
        raise ImportProblem(file, f"line {e.line}", e.what) from None
    except StackFileError:
        docs = _parse_error(file, text)
    return _mappings(file, docs)


def _parse_error(file: str, text: str) -> list[Any]:
    """The Python parser's reading of a syntax error, in the importer's words."""
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "file"
        what = getattr(e, "problem", None) or "not valid YAML"
        raise ImportProblem(file, where, f"not valid YAML ({what})") from None


def _mappings(file: str, docs: list[Any]) -> list[dict[str, Any]]:
    bad = [i for i, d in enumerate(docs) if not isinstance(d, dict)]
    if bad:
        raise ImportProblem(file, f"document {bad[0] + 1}", "expected a Kubernetes object")
    return docs


def get(d: Any, *keys: str) -> Any:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _int(value: Any, file: str, where: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImportProblem(file, where, f"got {value!r}; expected a whole number")
    return value


# What upstream does with an activeDeadlineSeconds under 1, the stack's own minimum
# (runPolicy.activeDeadlineSeconds, ge=1): Trainer v2.2.1's TrainJob CRD has `minimum: 1`, so
# the API server refuses the TrainJob (charts/kubeflow-trainer/crds/trainer.kubeflow.org_
# trainjobs.yaml at tag v2.2.1, c505fc7c; its webhook, pkg/webhooks/trainjob_webhook.go, does
# not read it); the training operator v1.9.4's PyTorchJob CRD and webhook take any integer
# (manifests/base/crds/kubeflow.org_pytorchjobs.yaml, pkg/common/util/webhooks.go
# ValidateRunPolicy), and its controller fails the job once its active time is >= the
# deadline (pkg/core/job.go PastActiveDeadline), so at 0 as soon as it starts. Read 2026-11-30.
# A batch/v1 Job's: kubernetes/kubernetes pkg/apis/batch/validation/validation.go
# validateJobSpec checks it with `ValidateNonnegativeField` (the API server refuses < 0, takes
# 0), and pkg/controller/job/job_controller.go pastActiveDeadline fails the Job once
# `duration >= allowedDuration`, so at 0 as soon as it starts (DeadlineExceeded). Read
# 2026-11-30 in the index's copies: the newest (with managedBy and successPolicy, so 1.30 or
# later) and every older one say the same; the v1.35 tag itself (core/versions.py
# KUBERNETES_VERSION) could not be fetched here (the repository is over the fetch limit).
_DEADLINE_WHY = {
    "TrainJob": "the pinned Trainer's TrainJob CRD has minimum: 1, so the API server refuses it",
    "PyTorchJob": "at 0 the training operator fails the job as soon as it starts",
    "Job": "Kubernetes refuses a negative one, and at 0 its Job controller fails the Job as "
    "soon as it starts",
}


def _deadline(value: Any, kind: str, file: str, where: str) -> int:
    """An activeDeadlineSeconds as upstream takes it: a whole number of seconds, 1 or more."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole or value < 1:
        why = f" ({_DEADLINE_WHY[kind]})" if whole else ""
        raise ImportProblem(
            file, where, f"got {value!r}; expected a whole number of seconds, 1 or more{why}"
        )
    return value


def _container(pod: Any, file: str, at: str, changes: list[str]) -> tuple[dict[str, Any], str]:
    containers = get(pod, "containers")
    if not isinstance(containers, list) or not containers:
        raise ImportProblem(file, f"{at}.containers", "missing; expected one training container")
    named = [
        i for i, c in enumerate(containers) if isinstance(c, dict) and c.get("name") == "pytorch"
    ]
    i = named[0] if named else 0
    if not isinstance(containers[i], dict):
        raise ImportProblem(file, f"{at}.containers[{i}]", "expected a container mapping")
    for j, c in enumerate(containers):
        if j != i:
            changes.append(
                f"{at}.containers[{j}] ({get(c, 'name')}): dropped; a trainforge pod runs one "
                "training container"
            )
    return containers[i], f"{at}.containers[{i}]"


def _pytorchjob(doc: dict[str, Any], file: str, changes: list[str]) -> Workload:
    specs = get(doc, "spec", "pytorchReplicaSpecs")
    if not isinstance(specs, dict) or not specs:
        raise ImportProblem(
            file, "spec.pytorchReplicaSpecs", "missing; expected Master and/or Worker"
        )
    other = sorted(set(specs) - {"Master", "Worker"})
    if other:
        raise ImportProblem(
            file, f"spec.pytorchReplicaSpecs.{other[0]}", "expected only Master and Worker"
        )
    counts = {
        role: _int(
            get(specs, role, "replicas"), file, f"spec.pytorchReplicaSpecs.{role}.replicas", 1
        )
        for role in specs
    }
    if counts.get("Master", 1) != 1:
        raise ImportProblem(
            file, "spec.pytorchReplicaSpecs.Master.replicas", f"got {counts['Master']}; expected 1"
        )
    role = "Master" if "Master" in specs else "Worker"
    pod_at = f"spec.pytorchReplicaSpecs.{role}.template.spec"
    pod = get(specs, role, "template", "spec")
    if not isinstance(pod, dict):
        raise ImportProblem(file, pod_at, "missing; expected the pod template's spec")
    container, at = _container(pod, file, pod_at, changes)
    others = []
    if set(specs) == {"Master", "Worker"}:
        w_pod_at = "spec.pytorchReplicaSpecs.Worker.template.spec"
        w_pod = get(specs, "Worker", "template", "spec")
        if not isinstance(w_pod, dict):
            raise ImportProblem(file, w_pod_at, "missing; expected the pod template's spec")
        w_container, w_at = _container(w_pod, file, w_pod_at, changes)
        others.append(Workload("PyTorchJob", "", 0, w_container, w_at, w_pod, w_pod_at))
    extra: dict[str, Any] = {}
    policies = {r: get(spec, "restartPolicy") for r, spec in specs.items()}
    for r, p in policies.items():
        if p is not None and p not in _REPLICA_RESTART:
            raise ImportProblem(
                file, f"spec.pytorchReplicaSpecs.{r}.restartPolicy",
                f"got {p!r}; expected one of {', '.join(_REPLICA_RESTART)} (the operator gives "
                "it to the pods, whose API refuses any other)",
            )  # fmt: skip
    if (restart := import_restarts.pytorch(policies, role, changes)) is not None:
        extra["restartPolicy"] = restart
    elastic = get(doc, "spec", "elasticPolicy")
    workers = sum(counts.values())
    if isinstance(elastic, dict):
        block = {
            "minWorkers": get(elastic, "minReplicas"),
            "maxWorkers": get(elastic, "maxReplicas"),
            "maxRestarts": get(elastic, "maxRestarts"),
        }
        extra["elastic"] = {k: v for k, v in block.items() if v is not None}
        extra["preset"] = "elastic"
        changes.append(
            "spec.elasticPolicy -> elastic: {minWorkers, maxWorkers, maxRestarts}"
            + (
                "; its metrics (HPA) dropped: trainforge does not autoscale jobs"
                if elastic.get("metrics")
                else ""
            )
        )
    nproc = get(doc, "spec", "nprocPerNode")
    if nproc is not None:
        if isinstance(nproc, int | str) and str(nproc).isdigit():
            extra["procsPerWorker"] = int(nproc)
        else:
            changes.append(
                f"spec.nprocPerNode {nproc!r}: dropped; procsPerWorker defaults to the GPUs"
            )
    run_policy = get(doc, "spec", "runPolicy")
    if isinstance(run_policy, dict):
        extra.update(_run_policy(run_policy, "spec.runPolicy", file, changes))
    pods = " + ".join(f"{n} {r}" for r, n in counts.items())
    return Workload(
        "PyTorchJob", _name(doc, file), workers, container, at, pod, pod_at, extra, pods,
        others=others,
    )  # fmt: skip


# A replica's restartPolicy: training operator v1.9.4 pkg/apis/kubeflow.org/v1/common_types.go
# RestartPolicy (Always, OnFailure, Never, ExitCode; unset: OnFailure, pytorch_types.go
# PyTorchJobDefaultRestartPolicy); its CRD types it a plain string and its webhook does not read
# it, and the operator writes any value but ExitCode onto the pods (tag v1.9.4, 4445c12a, read
# 2026-11-30), where the API server takes Always, OnFailure and Never only.
_REPLICA_RESTART = ("Always", "OnFailure", "Never", "ExitCode")


def _run_policy(
    policy: Mapping[str, Any], at: str, file: str, changes: list[str]
) -> dict[str, Any]:
    keys = ("cleanPodPolicy", "ttlSecondsAfterFinished", "backoffLimit", "activeDeadlineSeconds")
    kept = {k: policy[k] for k in keys if policy.get(k) is not None}
    if "activeDeadlineSeconds" in kept:
        _deadline(kept["activeDeadlineSeconds"], "PyTorchJob", file, f"{at}.activeDeadlineSeconds")
    for k in sorted(set(policy) - set(keys)):
        why = (
            "Kueue admits and queues jobs"
            if k in ("schedulingPolicy", "suspend")
            else "not supported"
        )
        changes.append(f"{at}.{k}: dropped ({why})")
    return {"runPolicy": kept} if kept else {}


def _trainjob(doc: dict[str, Any], file: str, changes: list[str]) -> Workload:
    trainer = get(doc, "spec", "trainer")
    if not isinstance(trainer, dict):
        raise ImportProblem(file, "spec.trainer", "missing; expected image, command, numNodes")
    extra: dict[str, Any] = {}
    deadline = get(doc, "spec", "activeDeadlineSeconds")
    if deadline is not None:
        _deadline(deadline, "TrainJob", file, "spec.activeDeadlineSeconds")
        extra["runPolicy"] = {"activeDeadlineSeconds": deadline}
        changes.append(
            f"spec.activeDeadlineSeconds {deadline} -> runPolicy.activeDeadlineSeconds "
            f"{deadline}: kept"
        )
    for k in sorted(set(doc["spec"]) - {"runtimeRef", "trainer", "activeDeadlineSeconds"}):
        why = _TRAINJOB_DROPPED.get(k, "; not supported (a job entry has no such field)")
        changes.append(f"spec.{k}: dropped{why}")
    workers = _int(trainer.get("numNodes"), file, "spec.trainer.numNodes", 1)
    container = dict(trainer)
    # the node container's resources as Trainer gives them (`trainer_resources`, the one
    # reader: `{}` or `claims` alone leave the runtime's, here none; limits or requests
    # replace them whole); a value no mapping stays, for `check_shapes` to refuse
    per_node = trainer.get("resourcesPerNode")
    resources = trainjob.trainer_resources(per_node) if isinstance(per_node, dict) else per_node
    if resources is not None:
        container["resources"] = resources
    nproc = trainer.get("numProcPerNode")
    if nproc is not None:
        extra["procsPerWorker"] = _procs(nproc, trainer, file)
        changes.append(f"spec.trainer.numProcPerNode {nproc} -> procsPerWorker {nproc}")
    elif (unset := _trainer_procs(trainer)).isdigit() and unset != "1":
        # Trainer ran one process per CPU; procsPerWorker's default on a CPU pod is 1
        extra["procsPerWorker"] = int(unset)
        changes.append(
            f"spec.trainer.numProcPerNode unset -> procsPerWorker {unset}: what Trainer's torch "
            f"plugin runs on a pod without GPUs, one process per CPU it asks (procsPerWorker's "
            f"default there is 1)"
        )
    name, said, jobset = _runtime(doc, file)
    if (restart := import_restarts.trainjob(name, jobset, changes)) is not None:
        extra["restartPolicy"] = restart
    metadata = _patch_metadata(doc, file)
    pod, pod_at = _patched_pod(doc)
    return Workload(
        "TrainJob",
        _name(doc, file),
        workers,
        container,
        "spec.trainer",
        pod,
        pod_at,
        extra,
        resources_key="resourcesPerNode",
        runtime_ref=name,
        runtime_said=said,
        metadata=metadata,
    )


def _patched_pod(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the pod fields, field path) a TrainJob's pod patches (`node_pod_patches`) set on the
    pods of its `node` replicated job, later patches last, as the pod's: a `nodeSelector`
    there placed them, as a pod's own does, so it chooses or refuses the pool; every other
    field is named with its fate; containers and volumes are read by `import_code.mounts`.
    ({}, "spec") without such a patch; the path is the last patch's that sets a field."""
    pod: dict[str, Any] = {}
    at = "spec"
    for path, spec in node_pod_patches(doc):
        fields = {k: v for k, v in spec.items() if k not in ("containers", "volumes")}
        if fields:
            pod.update(fields)
            at = path
    return pod, at


def node_pod_patches(doc: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(field path, pod spec fields) of each patch a TrainJob writes on the pods of its `node`
    replicated job, in order: the one reader of both spellings of it.

    - `spec.runtimePatches` (Trainer v2.2.1, the pinned version): its pod patch holds
      nodeSelector, tolerations, affinity, schedulingGates, securityContext,
      serviceAccountName, imagePullSecrets, initContainers, containers and volumes
      (trainer.kubeflow.org_trainjobs.yaml of v2.2.1, c505fc7c, vendored in
      trainforge/plan/data/crds/, read 2026-11-30), found at trainjob.SHAPE's levels.
    - `spec.podTemplateOverrides` (Trainer v2.1.0, 73c9bece, trainjob_types.go
      `PodTemplateOverrides []PodTemplateOverride`: `targetJobs` [{name}], `metadata`,
      `spec` PodTemplateSpecOverride: serviceAccountName, nodeSelector, affinity,
      tolerations, volumes, initContainers, containers (name, env, volumeMounts),
      schedulingGates, imagePullSecrets; read 2026-12-01): gone at v2.2.0 and the pinned
      v2.2.1, which replaced it with runtimePatches. A file written for v2.1 still says
      where its pods ran and what they mounted, so it is read the same way, under its own
      path (the importer says the field itself is v2.1's: `_TRAINJOB_DROPPED`)."""
    out: list[tuple[str, dict[str, Any]]] = []
    shapes = {trainjob.KIND: trainjob.SHAPE}
    for t in pods.pod_templates(doc, shapes, build=False):
        if t.name == trainjob.REPLICATED_JOB and isinstance(t.spec, dict):
            out.append((f"{t.path}.spec", t.spec))
    overrides = get(doc, "spec", "podTemplateOverrides")
    for i, o in enumerate(overrides if isinstance(overrides, list) else []):
        targets = o.get("targetJobs") if isinstance(o, dict) else None
        names = (
            [get(t, "name") for t in targets if isinstance(t, dict)]
            if isinstance(targets, list)
            else []
        )
        spec = o.get("spec") if isinstance(o, dict) else None
        if trainjob.REPLICATED_JOB in names and isinstance(spec, dict):
            out.append((f"spec.podTemplateOverrides[{i}].spec", spec))
    return out


def _trainer_procs(trainer: Mapping[str, Any]) -> str:
    """The processes per pod Trainer's torch plugin runs for `trainer` without its
    numProcPerNode (`trainjob.proc_per_node`, the one model): `auto` (one per GPU) or the
    pod's CPU count. The runtime's resources count only without resourcesPerNode: Trainer's
    own runtimes name none (manifests/base/runtimes at v2.2.1), another's are unknown here."""
    bare = {k: v for k, v in trainer.items() if k != "numProcPerNode"}
    try:
        return trainjob.proc_per_node({"spec": {"trainer": bare}}, None)
    except (TypeError, ValueError, AttributeError):
        return "auto"  # a malformed resourcesPerNode: check_shapes refuses it


def _procs(nproc: Any, trainer: Mapping[str, Any], file: str) -> int:
    """spec.trainer.numProcPerNode as procsPerWorker: the pinned TrainJob CRD types it
    `integer` (format int32; trainjob_types.go `NumProcPerNode *int32` at v2.2.1, c505fc7c,
    read 2026-11-30), so the API server refuses `auto` or any string. The error says what
    leaving it unset runs for this pod (`_trainer_procs`)."""
    if isinstance(nproc, bool) or not isinstance(nproc, int):
        unset = _trainer_procs(trainer)
        here = "one per GPU" if unset == "auto" else unset
        raise ImportProblem(
            file,
            "spec.trainer.numProcPerNode",
            f"got {nproc!r}; the pinned TrainJob CRD types it integer, so the API server "
            "refuses it: give a whole number of processes per node, or leave it unset "
            "(Trainer's torch plugin then runs one process per GPU, else one per CPU the pod "
            f"asks, at least 1: here {here})",
        )
    if nproc < 1:
        raise ImportProblem(
            file, "spec.trainer.numProcPerNode", f"got {nproc}; expected 1 or more processes"
        )
    return nproc


# Trainer's own ClusterTrainingRuntimes and their mlPolicy: kubeflow/trainer
# manifests/base/runtimes/ (with data-cache/ and torchtune/) at v2.2.1 (c505fc7c, the pinned
# versions.TRAINER_VERSION) and v2.3.0 (658725bd) alike, read 2026-11-30. None sets a restart
# field (no pod restartPolicy, Job backoffLimit or podFailurePolicy, no JobSet failurePolicy):
# what the defaults then do is import_restarts.UPSTREAM_RUNTIME_JOBSET. The platform's own
# runtimes are mlPolicy torch (jobs/trainjob.py runtime_manifest): torchrun on every node.
UPSTREAM_RUNTIMES = {
    "torch-distributed": "torch",
    "torch-distributed-with-cache": "torch",
    "torchtune-llama3.2-1b": "torch",
    "torchtune-llama3.2-3b": "torch",
    "torchtune-qwen2.5-1.5b": "torch",
    "deepspeed-distributed": "mpi",
    "mlx-distributed": "mpi",
    "jax-distributed": "jax",
    "xgboost-distributed": "xgboost",
}
# what a runtime of another policy runs that the platform's torch runtime does not
_POLICY_RUNS = {
    "mpi": "sshd in the node pods and a launcher pod that runs mpirun over them",
    "jax": "JAX's coordinator, wired by the jax plugin",
    "xgboost": "XGBoost's tracker, wired by the xgboost plugin",
}
# a runtimeRef's kind and apiGroup when unset (the pinned TrainJob CRD's defaults)
_RUNTIME_KIND, _RUNTIME_GROUP = "ClusterTrainingRuntime", "trainer.kubeflow.org"


def _runtime(doc: dict[str, Any], file: str) -> tuple[str | None, str, dict[str, Any] | None]:
    """(name, what it is in words, its JobSet spec as the API server stores it; None: not
    known here) of the TrainJob's runtime: Trainer's own, else the platform's. One of
    Trainer's that is not torch is refused: the platform runs every TrainJob on its torch
    runtime, where an MPI job's mpirun finds no hostfile and no sshd."""
    ref = get(doc, "spec", "runtimeRef") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    if not isinstance(name, str):
        return None, "", None
    kind = (ref.get("kind") or _RUNTIME_KIND, ref.get("apiGroup") or _RUNTIME_GROUP)
    policy = UPSTREAM_RUNTIMES.get(name) if kind == (_RUNTIME_KIND, _RUNTIME_GROUP) else None
    if policy == "torch":
        said = "Trainer's own mlPolicy.torch runtime"
        return name, said, import_restarts.UPSTREAM_RUNTIME_JOBSET
    if policy is not None:
        torch = ", ".join(n for n, p in UPSTREAM_RUNTIMES.items() if p == "torch")
        raise ImportProblem(
            file,
            "spec.runtimeRef.name",
            f"got {name!r}, Trainer's mlPolicy.{policy} runtime ({_POLICY_RUNS[policy]}); "
            f"the platform runs TrainJobs on its torch runtime, where that job cannot run: "
            f"valid are the torch runtimes ({torch}), with a command torchrun can launch",
        )
    platform = {m["metadata"]["name"]: m for m in trainjob.runtime_manifests()}
    if kind[0] == _RUNTIME_KIND and name in platform:
        jobset = pods.get(platform[name], *trainjob.RUNTIME_SHAPE.levels[0], "spec")
        return name, "the platform's own mlPolicy.torch runtime", jobset
    return (
        name,
        (
            f"not one of Trainer v{versions.TRAINER_VERSION}'s runtimes: its mlPolicy and "
            "restarts are unknown here; the platform's runtime is mlPolicy torch, torchrun on "
            "every node"
        ),
        None,
    )


def _patch_metadata(doc: dict[str, Any], file: str) -> list[tuple[str, Any]]:
    """(field path, metadata) of each object a TrainJob's runtime patches label or annotate
    (the JobSet, each Job, its pod: Trainer v2.2.1's RuntimePatch, labels and annotations
    only), found at the levels the TrainJob's shape declares (`trainjob.SHAPE.levels`), so
    that the importer names each label."""
    found: list[tuple[str, Any]] = []

    def visit(node: Any, at: str, levels: tuple[tuple[str, ...], ...]) -> None:
        for obj, obj_at in _walk(node, at, levels[0], file):
            found.append((f"{obj_at}.metadata", obj.get("metadata")))
            if levels[1:]:
                visit(obj, obj_at, levels[1:])

    visit(doc, "", trainjob.SHAPE.levels)
    return [(where, meta) for where, meta in found if meta is not None]


def _walk(value: Any, at: str, path: tuple[str, ...], file: str) -> list[tuple[Any, str]]:
    """(mapping, field path) of each object at `path` below `value` (`EACH`: every item of a
    list; none where a level is unset); a level of the wrong type is one line naming it."""
    if value is None:
        return []
    if not path:
        if not isinstance(value, dict):
            raise ImportProblem(file, at, f"got {value!r}; expected a mapping")
        return [(value, at)]
    step, rest = path[0], path[1:]
    if step == EACH:
        if not isinstance(value, list):
            raise ImportProblem(file, at, f"got {value!r}; expected a list")
        return [x for i, v in enumerate(value) for x in _walk(v, f"{at}[{i}]", rest, file)]
    if not isinstance(value, dict):
        raise ImportProblem(file, at, f"got {value!r}; expected a mapping")
    return _walk(value.get(step), f"{at}.{step}" if at else step, rest, file)


# What becomes of a TrainJob's other spec fields: Trainer v2.2.1's TrainJobSpec has runtimeRef,
# initializer, trainer, runtimePatches, suspend, activeDeadlineSeconds and managedBy
# (pkg/apis/trainer/v1alpha1/trainjob_types.go at tag v2.2.1, read 2026-11-30); others are
# named as not supported.
_TRAINJOB_DROPPED = {
    "runtimePatches": "; not supported (its pod overrides: the pod's image, command, env and "
    "size come from spec.trainer; the platform sets the rest per team and pool; code it "
    "mounts from a ConfigMap of the file is shipped, and each field of its node pods "
    "(nodeSelector, tolerations, ...) is named, on its own line)",
    # its downloads (and the token a model hub needs) have no route: pods reach no internet
    "initializer": "; not supported (a job entry has no initializer, and the platform's "
    "NetworkPolicies give pods no internet: put the data set and model on the team's FSx or "
    "its S3 prefix, which the job reads; docs/teams.md, Network)",
    # Trainer v2.1.0's (trainjob_types.go at v2.1.0, 73c9bece, read 2026-12-01); gone at v2.2.0
    "podTemplateOverrides": "; a Trainer v2.1 field (v2.1.0's TrainJobSpec), gone since v2.2.0 "
    f"and at the pinned v{versions.TRAINER_VERSION}, which replaced it with spec.runtimePatches: "
    "each field of its node pods (nodeSelector, tolerations, ...) is read as the pod's and "
    "named, on its own line; code it mounts from a ConfigMap of the file is shipped",
    "suspend": "; Kueue admits and queues jobs",
    "managedBy": "; the platform sets it where MultiKueue runs the job (a fleet's manager stack)",
}


def _indexed_job(doc: dict[str, Any], file: str, changes: list[str]) -> Workload:
    spec = get(doc, "spec")
    if not isinstance(spec, dict):
        raise ImportProblem(file, "spec", f"got {spec!r}; expected the Job's spec")
    mode = spec.get("completionMode")
    if mode != "Indexed":
        raise ImportProblem(
            file,
            "spec.completionMode",
            f"got {mode!r}; a distributed job needs Indexed (each pod's JOB_COMPLETION_INDEX is its rank)",
        )
    completions = _int(spec.get("completions"), file, "spec.completions", 1)
    parallelism = _int(spec.get("parallelism"), file, "spec.parallelism", completions)
    if parallelism != completions:
        raise ImportProblem(
            file,
            "spec.parallelism",
            f"got {parallelism}, completions {completions}; every rank must run at once (equal values)",
        )
    pod = get(spec, "template", "spec")
    if not isinstance(pod, dict):
        raise ImportProblem(file, "spec.template.spec", "missing; expected the pod template's spec")
    container, at = _container(pod, file, "spec.template.spec", changes)
    policy = {k: spec[k] for k in ("activeDeadlineSeconds", "ttlSecondsAfterFinished") if k in spec}
    if spec.get("activeDeadlineSeconds") is not None:
        _deadline(spec["activeDeadlineSeconds"], "Job", file, "spec.activeDeadlineSeconds")
    policy.update(_indexed_retries(spec, file, changes))
    backoff = policy.get("backoffLimit", RunPolicySpec().backoff_limit)
    restart = import_restarts.indexed(spec, str(container.get("name")), backoff, changes)
    for k in sorted(set(spec) - _JOB_READ):
        changes.append(f"spec.{k}: dropped; {_JOB_DROPPED.get(k, 'not supported')}")
    extra: dict[str, Any] = {"runPolicy": policy} if policy else {}
    if restart is not None:
        extra["restartPolicy"] = restart
    extra["backend"] = "indexed-job"
    changes.append(
        "kind Job (Indexed) -> backend: indexed-job (no operator; trainforge adds the headless Service and rendezvous)"
    )
    return Workload(
        "Job", _name(doc, file), completions, container, at, pod, "spec.template.spec", extra
    )


# An Indexed Job's spec fields read above or by `_indexed_retries`; the others are named as
# dropped, with what the indexed-job backend writes instead (jobs/indexed_job.py).
_JOB_READ = {
    "completionMode", "completions", "parallelism", "template", "activeDeadlineSeconds",
    "ttlSecondsAfterFinished", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes",
}  # fmt: skip
_JOB_DROPPED = {
    "podFailurePolicy": "the backend writes its own: a disruption (preemption, eviction, node "
    "loss) is not counted, and with restartPolicy ExitCode exit codes 1-127 fail the Job",
    "podReplacementPolicy": "the backend writes Failed (a pod is replaced only once the old "
    "one has stopped, after its SIGTERM checkpoint)",
    "suspend": "Kueue admits and queues jobs",
}


def _indexed_retries(spec: dict[str, Any], file: str, changes: list[str]) -> dict[str, Any]:
    """The Job's retry fields as the entry's runPolicy.backoffLimit, which the indexed-job
    backend writes as backoffLimitPerIndex with maxFailedIndexes 0 and no Job-wide
    backoffLimit (jobs/indexed_job.py `_restart_fields`); each change of meaning is named.
    What the Job controller does with them: core/failures.py `job_outcome`."""
    per_index = spec.get("backoffLimitPerIndex")
    total = spec.get("backoffLimit")
    out: dict[str, Any] = {}
    if per_index is not None:
        out["backoffLimit"] = _int(per_index, file, "spec.backoffLimitPerIndex")
        changes.append(
            f"spec.backoffLimitPerIndex {per_index} -> runPolicy.backoffLimit {per_index}: kept; "
            f"the indexed-job backend writes it as backoffLimitPerIndex {per_index}"
        )
        if total is not None:
            _int(total, file, "spec.backoffLimit")
            changes.append(
                f"spec.backoffLimit {total}: dropped; the planned Job has no Job-wide limit "
                "(with backoffLimitPerIndex set, Kubernetes takes it as 2147483647): the "
                "per-index limit and maxFailedIndexes end it"
            )
    elif total is not None:
        out["backoffLimit"] = _int(total, file, "spec.backoffLimit")
        changes.append(
            f"spec.backoffLimit {total} -> runPolicy.backoffLimit {total}, which the "
            f"indexed-job backend writes as backoffLimitPerIndex {total}: {total} re-creation(s) "
            f"of each index (every rank fails with its peer), not {total} failed pod(s) in all"
        )
    else:
        default = RunPolicySpec().backoff_limit
        changes.append(
            f"spec.backoffLimit unset (Kubernetes' default: 6 failed pods in all) -> "
            f"runPolicy.backoffLimit's default {default}, which the indexed-job backend writes "
            f"as backoffLimitPerIndex {default}: {default} re-creation(s) of each index"
        )
    maximum = spec.get("maxFailedIndexes")
    if maximum is not None:
        _int(maximum, file, "spec.maxFailedIndexes")
        changes.append(
            f"spec.maxFailedIndexes {maximum}"
            + (": kept" if maximum == 0 else ": becomes 0")
            + "; the Job fails, and frees every GPU, as soon as one index has used up its "
            "retries (the other ranks cannot finish without it)"
        )
    return out


def _name(doc: dict[str, Any], file: str) -> str:
    name = get(doc, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise ImportProblem(file, "metadata.name", "missing; the job's name comes from it")
    return name


def _served(api: str, served: str, who: str, file: str) -> None:
    """A job of an API version the pinned controller does not serve is refused: the version its
    vendored CRD serves is `served` (tests/jobs/test_importer.py's api-versions test proves it
    against the CRDs in plan/data/crds and the training operator's manifests)."""
    if api != served:
        raise ImportProblem(
            file,
            "apiVersion",
            f"got {api!r}; {who} serves {served} only: write apiVersion: {served}",
        )


def _job_document(docs: list[dict[str, Any]], file: str) -> tuple[dict[str, Any], Any]:
    """The one job document of the file and the reader of its kind. Raises ImportProblem."""
    found = []
    for doc in docs:
        api, kind = str(doc.get("apiVersion", "")), doc.get("kind")
        if kind == "PyTorchJob" and api.startswith("kubeflow.org/"):
            _served(api, pytorchjob.API_VERSION, f"the pinned training operator "
                    f"({versions.TRAINING_OPERATOR_VERSION})", file)  # fmt: skip
            found.append((doc, _pytorchjob))
        elif kind == "TrainJob" and api.startswith("trainer.kubeflow.org/"):
            _served(api, trainjob.API_VERSION, f"the pinned Trainer (v{versions.TRAINER_VERSION})",
                    file)  # fmt: skip
            found.append((doc, _trainjob))
        elif kind == "Job" and api == "batch/v1":
            found.append((doc, _indexed_job))
    if not found:
        kinds = ", ".join(sorted({str(d.get("kind")) for d in docs})) or "nothing"
        raise ImportProblem(file, "kind", f"found {kinds}; expected {SUPPORTED}")
    if len(found) > 1:
        names = ", ".join(f"{d.get('kind')} {get(d, 'metadata', 'name')}" for d, _ in found)
        raise ImportProblem(file, "kind", f"{len(found)} jobs ({names}); import one job per file")
    return found[0]


def job_namespace(docs: list[dict[str, Any]], file: str) -> str | None:
    """The job's `metadata.namespace` (None: unset): `trainforge import` takes the team whose
    namespace it is when `--team` is not given (importer.choose_team)."""
    ns = get(_job_document(docs, file)[0], "metadata", "namespace")
    return str(ns) if ns else None


def workload(docs: list[dict[str, Any]], file: str, changes: list[str]) -> Workload:
    """The job of the file, read by its kind's reader (which adds its change lines). Its
    `metadata.namespace` is the importer's to say (importer.namespace_line: which team's)."""
    doc, reader = _job_document(docs, file)
    w = reader(doc, file, changes)
    templates = [("spec.template", get(doc, "spec", "template"))]
    if w.kind == "PyTorchJob":
        roles = get(doc, "spec", "pytorchReplicaSpecs") or {}
        templates = [(f"spec.pytorchReplicaSpecs.{r}.template", get(roles, r, "template"))
                     for r in roles]  # fmt: skip
    own = w.metadata  # the kind's own (a TrainJob's runtime patches)
    w.metadata = [("metadata", get(doc, "metadata") or {})] + [
        (f"{at}.metadata", get(t, "metadata")) for at, t in templates if get(t, "metadata")
    ]
    w.metadata += own
    return w


def check_shapes(w: Workload, docs: list[dict[str, Any]], file: str) -> None:
    """The fields the translation reads have the types Kubernetes gives them, so a malformed
    file is one line naming the field, never a Python error."""

    def need(value: Any, kind: type, where: str, what: str) -> None:
        if value is not None and not isinstance(value, kind):
            raise ImportProblem(file, where, f"got {value!r}; expected {what}")

    def mappings(value: Any, where: str, names: tuple[str, ...]) -> None:
        need(value, list, where, "a list")
        for i, item in enumerate(value or []):
            need(item, dict, f"{where}[{i}]", "a mapping")
            if item is None:
                raise ImportProblem(file, f"{where}[{i}]", "empty; expected a mapping")
            for n in names:
                if not isinstance(item.get(n), str):
                    raise ImportProblem(
                        file, f"{where}[{i}].{n}", f"got {item.get(n)!r}; expected a string"
                    )

    c, at = w.container, w.at
    need(c.get("command"), list, f"{at}.command", "a list of strings")
    # The stack's one rule (the Trainer v2.2.1 torch plugin rewrites torchtune's command only,
    # not torchrun's, so nothing splits it on the way either).
    if why := whole_command_line(c.get("command")):
        raise ImportProblem(file, f"{at}.command[0]", f"got {c['command'][0]!r}; {why}")
    need(c.get("args"), list, f"{at}.args", "a list of strings")
    mappings(c.get("env"), f"{at}.env", ("name",))
    resources, res_at = c.get("resources"), w.resources_at
    need(resources, dict, res_at, "a mapping with limits and requests")
    for kind in ("limits", "requests"):
        need(get(resources, kind), dict, f"{res_at}.{kind}", "a mapping")
    mappings(c.get("volumeMounts"), f"{at}.volumeMounts", ("name", "mountPath"))
    mappings(w.pod.get("volumes"), f"{w.pod_at}.volumes", ("name",))
    for i, v in enumerate(w.pod.get("volumes") or []):
        need(v.get("configMap"), dict, f"{w.pod_at}.volumes[{i}].configMap", "a mapping")
        mappings(get(v, "configMap", "items"), f"{w.pod_at}.volumes[{i}].configMap.items",
                 ("key", "path"))  # fmt: skip
    need(w.pod.get("nodeSelector"), dict, f"{w.pod_at}.nodeSelector", "a mapping")
    for at, meta in w.metadata:
        need(meta, dict, at, "a mapping")
        for kind in ("labels", "annotations"):
            need(get(meta, kind), dict, f"{at}.{kind}", "a mapping")
    for d in docs:
        if d.get("kind") == "ConfigMap":
            need(d.get("data"), dict, f"ConfigMap {get(d, 'metadata', 'name')}.data", "a mapping")
    for other in w.others:
        check_shapes(other, [], file)


def owned_env(name: str) -> bool:
    """A variable the platform or the training operator sets on every pod: import drops it."""
    return name in RESERVED_ENV or name == "HOME" or name.startswith("PET_")


def same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(str(a)) == parse_quantity(str(b))
    except ValueError:
        return False
