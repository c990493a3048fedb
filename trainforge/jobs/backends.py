"""The job backends: which emitter turns a job into objects, and which controller runs them.

    pytorchjob   kubeflow.org/v1 PyTorchJob     Kubeflow training operator v1   pytorchjob.py
    trainjob     trainer.kubeflow.org TrainJob  Kubeflow Trainer v2 (+ JobSet)  trainjob.py
    indexed-job  batch/v1 Indexed Job + Service the Kubernetes Job controller  indexed_job.py

A job runs on its own `backend:` or on the platform's default (`trainforge:jobBackend`), and
only on a backend whose controller the platform installs (`PlatformContract.backends`). Every
emitter takes the same resolved JobSpec and builds its pods with the one pod builder
(`trainforge.jobs.pod`), so switching a job's backend changes which object runs its pods,
not the pods. Each backend module has BACKEND, API_VERSION, KIND, PLURAL, KUEUE_FRAMEWORK,
`check`, `launch`,
`workload_manifest`, `podmonitor_manifest` and, where it has one, `service_manifest`.

Each backend also owns the shape of its objects (`SHAPES`): where their pod templates live,
how to read replicas (with the controller's default), the job's container, how its controller
retries failed pods, its queue, suspend and managedBy. The plan's checks and the overlay image
reader find pods through `pod_templates` and read jobs through `shape`, which ask this table,
so a new backend declares its shape here (or through `register_shape`) and every check sees
its pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from trainforge.core import pods
from trainforge.core.contract import BACKENDS, JobTarget
from trainforge.core.errors import JobConfigError
from trainforge.jobs import indexed_job, pod, pytorchjob, trainjob
from trainforge.jobs.codeship import CodeBundle
from trainforge.jobs.pod import EmittedJob
from trainforge.jobs.spec import JobSpec

EMITTERS: dict[str, ModuleType] = {
    pytorchjob.BACKEND: pytorchjob,
    trainjob.BACKEND: trainjob,
    indexed_job.BACKEND: indexed_job,
}
assert tuple(EMITTERS) == BACKENDS

# Backends that need no controller beyond Kubernetes' own: always available.
NO_CONTROLLER = (indexed_job.BACKEND,)

# The Pulumi type token of each backend's workload object. A job's workload resource carries
# the other two as aliases, so that changing a job's backend is a *replacement* of one resource
# (deleted first, like any spec change) rather than a create of a new one beside the old.
WORKLOAD_TYPES: dict[str, str] = {
    name: f"kubernetes:{m.API_VERSION}:{m.KIND}" for name, m in EMITTERS.items()
}
# backend -> (API group, plural) of its workload object: what RBAC rules name, sorted by backend
RESOURCES: dict[str, tuple[str, str]] = {
    name: (m.API_VERSION.rpartition("/")[0], m.PLURAL) for name, m in sorted(EMITTERS.items())
}
# backend -> Kueue's integration (`integrations.frameworks`) that manages its workload object
KUEUE_FRAMEWORKS: dict[str, str] = {name: m.KUEUE_FRAMEWORK for name, m in EMITTERS.items()}


# kind -> where its pod templates live, how many pods each runs, how its controller retries
# them, where its queue, suspend and managedBy are (see pods.Shape); `job`: a job's workload
SHAPES: dict[str, pods.Shape] = {
    **pods.KUBERNETES,  # the indexed Job (indexed_job.KIND) and CronJob among them
    pytorchjob.KIND: pods.Shape(
        templates=(("spec", "pytorchReplicaSpecs", pods.EACH, "template"),),
        replicas=(("replicas",),),  # missing: 1 (setDefaultReplicas, release-1.9)
        restarts=("spec", "runPolicy", "backoffLimit"),
        job=True,
        main="Master",
        container=pytorchjob.CONTAINER,
        procs=("spec", "nprocPerNode"),
        suspend=("spec", "runPolicy", "suspend"),
        managed_by=("spec", "runPolicy", "managedBy"),
        retry=pytorchjob.retry_bound,
    ),
    trainjob.KIND: trainjob.SHAPE,  # its runtime patch's levels and the pod Trainer builds
    trainjob.RUNTIME_KIND: trainjob.RUNTIME_SHAPE,
    "TrainingRuntime": trainjob.RUNTIME_SHAPE,
    # A JobSet is a runtime's JobSet template made an object: its levels below that one.
    "JobSet": pods.Shape(
        levels=trainjob.RUNTIME_SHAPE.levels[1:],
        replicas=trainjob.RUNTIME_SHAPE.replicas,
        restarts=("spec", "failurePolicy", "maxRestarts"),
    ),
}
assert SHAPES[indexed_job.KIND] is pods.KUBERNETES["Job"]
assert SHAPES[trainjob.KIND] is trainjob.SHAPE  # declared once, beside its emitter


def register_shape(kind: str, shape: pods.Shape) -> None:
    """Declare where a new backend's kind keeps its pod templates (see `SHAPES`)."""
    SHAPES[kind] = shape


def shape(doc: Mapping[str, Any]) -> pods.Shape | None:
    """The declared shape of an object's kind (None: a kind nobody declared)."""
    return SHAPES.get(str(doc.get("kind")))


def job_shape(doc: Mapping[str, Any]) -> pods.Shape | None:
    """The shape of a job's workload object (None: the object is no job's workload)."""
    s = shape(doc)
    return s if s is not None and s.job else None


def pod_templates(
    doc: Mapping[str, Any],
    *,
    build: bool = True,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[pods.PodTemplate]:
    """Every pod template of an object, by its kind's shape (`SHAPES`), else found generically;
    `build=False` leaves out the pods a controller builds from elsewhere (a TrainJob's), which
    are built from `runtimes` (`trainjob.runtimes_in`: a plan's; None: the platform's own)."""
    return pods.pod_templates(doc, SHAPES, build=build, runtimes=runtimes)


def resolve_backend(job: JobSpec, target: JobTarget, where: str) -> str:
    """The job's backend (its own or the platform's default), refused when the platform does
    not install that backend's controller, or when the backend cannot run the job."""
    backend = job.backend or target.backend
    if backend not in target.backends and backend not in NO_CONTROLLER:
        installed = ", ".join(target.backends) or "(none)"
        raise JobConfigError(
            f"{where}.backend",
            backend,
            f"the platform installs the controllers of {installed} only; add {backend!r} to "
            "trainforge:jobBackends (or use one of those)",
        )
    return backend


def check(job: JobSpec, target: JobTarget, where: str) -> None:
    """The backend's own refusals (e.g. elastic on trainjob); `job.backend` must be set."""
    EMITTERS[str(job.backend)].check(job, target, where)


def managed(doc: dict[str, Any], path: tuple[str, ...], managed_by: str | None) -> dict[str, Any]:
    """`doc` with `managed_by` written at `path` (its backend's `MANAGED_BY`); unchanged when
    None (a single cluster's objects stay as they were)."""
    if managed_by is None:
        return doc
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = managed_by
    return doc


def emit(
    job: JobSpec,
    target: JobTarget,
    code: CodeBundle | None,
    user_code: CodeBundle | None = None,
    *,
    managed_by: str | None = None,
) -> EmittedJob:
    """All objects of a resolved job (see `wiring.resolve_job`), by its backend; `user_code`
    is the job's own shipped code (`entrypoint.user_code`). `managed_by` (a fleet manager's:
    `kueue.x-k8s.io/multikueue`) goes to the workload's managedBy field, where its backend
    keeps it (`MANAGED_BY`): the manager's controllers leave the job to MultiKueue, which runs
    a copy on a worker."""
    if job.backend not in EMITTERS:
        raise ValueError(f"job {job.name!r} has no resolved backend; call wiring.resolve_job")
    m = EMITTERS[job.backend]
    service = getattr(m, "service_manifest", None)  # the indexed Job's headless Service
    return pod.emit_job(
        job,
        target,
        code,
        user_code,
        backend=m.BACKEND,
        launch=m.launch(job),
        workload=lambda template: managed(
            m.workload_manifest(job, target, template), m.MANAGED_BY, managed_by
        ),
        podmonitor=lambda: m.podmonitor_manifest(job, target),
        service=(lambda: service(job, target)) if service is not None else None,
    )
