"""Where a Kubernetes object keeps its pod templates: the one walker.

Every check that reads pods (the policy rules, the pod scripts, the references a pod makes,
the queue check) and the overlay image reader find them here, so that they agree on which
pods an object runs. An object's kind says where its templates live through a `Shape`: the
Kubernetes workloads' shapes are below (`KUBERNETES`); the job backends declare theirs beside
their emitters (`trainforge.jobs.backends.SHAPES`). A kind without a shape (a custom resource
nobody declared) is walked generically: every mapping under its `spec` whose own `spec` has a
`containers` list is a pod template.

Plain data walking, stdlib only (trainforge.core).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trainforge.core import failures
from trainforge.core.quantity import parse_quantity

EACH = "*"  # in a Shape path: every key of a mapping, every item of a list

Path = tuple[str, ...]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's: the LocalQueue a job is submitted to
# SIGKILL: the OOM killer's exit code, what a retry bound is rehearsed with
KILLED = failures.KILLED


@dataclass(frozen=True)
class Bound:
    """How many times a job's pods start when every attempt dies with one exit code (None:
    no bound) and why, in one line; `deadline_s`: a bound in time only."""

    attempts: int | None
    why: str
    deadline_s: int | None = None


@dataclass(frozen=True)
class RetryInputs:
    """What a kind's retry semantics may need besides the object: the exit code rehearsed,
    the training runtimes a TrainJob names (by name), and the attempts after which the job's
    own pods stop a job that keeps failing (the run ledger: (attempts, whose), None when
    nothing of the job counts its attempts)."""

    code: int = KILLED
    runtimes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ledger: Callable[[], tuple[int | None, str]] | None = None


Retry = Callable[[Mapping[str, Any], RetryInputs], Bound | None]


@dataclass(frozen=True)
class Shape:
    """Where one kind keeps its pod templates, and how to read its replicas and restarts.

    `templates`: paths (from the object) of its pod templates ({metadata, spec}); `EACH`
    steps into every key or item, and the last one names the replica (its key, or the
    item's `name`). `replicas`: paths, from that replica entry (the object itself when no
    `EACH`), of counts whose product is the template's pod count (a missing one counts 1:
    the controllers' default, e.g. training-operator v1.9 `setDefaultReplicas(spec, 1)`).
    `restarts`: the path of the object's restart bound. `build`: for a kind whose pods a
    controller builds from what the object writes and from elsewhere (a TrainJob, from its
    runtime), a function from the object and the runtimes known (`pod_templates`) to its
    [(replica name, pod template)], None when it cannot tell; a walk with `build=False`
    reads the `templates` the object writes.

    What the plan reads of a job of this kind (`job`: a training workload, one per job):
    `count`, for a kind whose controller counts its pods from the object and from elsewhere
    (a TrainJob: its `numNodes`, else its runtime's), a function from the object and the
    runtimes known to its pod count (else the sum of its templates' replicas); `main`, the replica whose container is the job's (else the
    first) and `container`, its container's name (else the first); `trainer`, the path of a
    container-like mapping the object writes instead of a pod template (a TrainJob's
    `trainer`: image, command, args, env), whose resources are those of the built pod's
    container named `container`, else (no runtime to build from) `trainer_resources` of the
    mapping (the controller's rule: the resources it gives the container whatever the
    runtime, None when the runtime's stay); `procs`, the path of its processes per pod as
    the object writes them, and `procs_env`, the built container's variable its controller
    sets them in (a TrainJob's PET_NPROC_PER_NODE: the torch plugin's count, which the object
    need not write);
    `suspend` and `managed_by`, where it is suspended and which controller manages it;
    `retry`, its controller's retry semantics (default: `restarts` + 1 attempts).

    `levels`: for a kind that writes patches of the objects a controller makes above its pods
    (a TrainJob's runtime patch: the JobSet, its Jobs, their pod), the path of each patched
    object from the one above, ending at the pod template; each has `metadata`. Set, its
    joined path is the one `templates` (readers of the levels and walkers of the templates
    then cannot disagree).
    """

    templates: tuple[Path, ...] = ()
    replicas: tuple[Path, ...] = ()
    restarts: Path = ()
    build: Callable[[dict[str, Any], Any], list[tuple[str, dict[str, Any]]] | None] | None = None
    job: bool = False
    count: Callable[[Mapping[str, Any], Any], int] | None = None
    main: str = ""
    container: str = ""
    trainer: Path = ()
    trainer_resources: Callable[[Mapping[str, Any]], dict[str, Any] | None] | None = None
    procs: Path = ()
    procs_env: str = ""
    suspend: Path = ("spec", "suspend")
    managed_by: Path = ("spec", "managedBy")
    retry: Retry | None = None
    levels: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.levels:
            object.__setattr__(self, "templates", (sum(self.levels, ()),))

    def restart_limit(self, doc: Mapping[str, Any]) -> Any:
        """The object's restart bound as written (None: unset or the kind has none)."""
        return get(doc, *self.restarts) if self.restarts else None

    def pod_count(
        self, doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
    ) -> int:
        """How many pods the object runs at once: its `count` from `runtimes` (None: the
        platform's own), else the sum of its templates' replicas, each defaulting to 1.

        Why `runtimes`: a TrainJob need not write numNodes; Trainer then runs its runtime's
        `mlPolicy.numNodes`, and reading the TrainJob's field alone counted 1 pod in the world
        size, the quota check and the cost of an SDK or imported TrainJob."""
        if self.count is not None:
            return self.count(doc, runtimes)
        return sum(t.replicas for t in pod_templates(doc, {"": self}, kind="", build=False))

    def main_pod(
        self, doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
    ) -> tuple[PodTemplate, dict[str, Any]] | None:
        """The job's pod template and its container in it: for a `trainer` mapping, the
        container named `container` in the pod its controller builds (`build`, from
        `runtimes`); else of its `main` replica's template (else the first) the container
        named `container` (else the first). None when there is none (no runtime to build
        from, no template, no container).

        Why one method: every reader of "the job's container" (the job view's image, command
        and resources, the checkpoint store's mounts and volumes, the processes a controller
        sets) must pick the same one; a reader that matched containers by a name the
        `trainer` mapping does not have found none and skipped every TrainJob."""
        if self.trainer:
            built = pod_templates(doc, {"": self}, kind="", runtimes=runtimes)
            return next(
                (
                    (b, dict(c))
                    for b in built
                    for c in containers(b.spec)
                    if c.get("name") == self.container
                ),
                None,
            )
        templates = pod_templates(doc, {"": self}, kind="", build=False)
        main = next((t for t in templates if t.name == self.main), None)
        main = main or (templates[0] if templates else None)
        listed = (main.spec.get("containers") if main else None) or []
        if main is None or not listed:
            return None
        return main, next((c for c in listed if c.get("name") == self.container), listed[0])

    def main_container(
        self, doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The job's container as the object writes it (its `trainer` mapping, else the
        container of `main_pod`; {} when none), with `resources`: for a `trainer` mapping,
        those of the container `main_pod` finds in the pod its controller builds ({} when it
        cannot build).

        Why not the mapping's own resources: a TrainJob's `resourcesPerNode` is not the
        container's; the controller replaces, keeps or drops the runtime's by rules of its own
        (`trainjob.trainer_resources`), and the built pod is their one reader."""
        pod = self.main_pod(doc, runtimes)
        if not self.trainer:
            return pod[1] if pod else {}
        t = get(doc, *self.trainer)
        t = dict(t) if isinstance(t, Mapping) else {}
        node: Mapping[str, Any] | None = pod[1] if pod else None
        if node is None and self.trainer_resources is not None:
            # no runtime to build from: what the mapping's own resources replace, if any
            node = {"resources": self.trainer_resources(t)}
        return {**t, "resources": (node or {}).get("resources") or {}}

    def procs_per_pod(
        self, doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]] | None = None
    ) -> int | str | None:
        """The processes per pod its launcher is given: the `procs_env` variable of the built
        container (`main_pod`) where the kind has one and it is set, else the object's `procs`
        field; an int when a count, else as written (`auto`: torchrun counts the pod's
        devices); None when unknown (the launcher's default applies).

        Why the built container: a TrainJob need not write numProcPerNode; its controller
        then sets `auto` or a CPU count (`trainjob.proc_per_node`), and counting 1 made the
        resume check's world size wrong for SDK and imported TrainJobs."""
        value: Any = None
        if self.procs_env and (pod := self.main_pod(doc, runtimes)) is not None:
            value = literal_env(pod[1]).get(self.procs_env)
        if value is None and self.procs:
            value = get(doc, *self.procs)
        if isinstance(value, int | str) and str(value).isdigit():
            return int(value)
        return value if isinstance(value, str) and value else None

    def queue(self, doc: Mapping[str, Any]) -> str | None:
        """The LocalQueue the object is submitted to (Kueue's label; None: none named)."""
        return get(doc, "metadata", "labels", QUEUE_LABEL)

    def is_suspended(self, doc: Mapping[str, Any]) -> bool:
        return bool(self.suspend and get(doc, *self.suspend))

    def manager(self, doc: Mapping[str, Any]) -> str | None:
        """The controller the object names in its managedBy (None: the default one)."""
        return get(doc, *self.managed_by) if self.managed_by else None

    def retry_bound(
        self, doc: Mapping[str, Any], inputs: RetryInputs | None = None
    ) -> Bound | None:
        """How often its pods start when each dies with `inputs.code` (None: cannot tell)."""
        inputs = inputs or RetryInputs()
        if self.retry is not None:
            return self.retry(doc, inputs)
        limit = _int(self.restart_limit(doc), None)
        where = ".".join(self.restarts)
        if limit is None:
            return Bound(None, f"no {where or 'restart bound'}: restarts are never counted")
        return Bound(limit + 1, f"{where} {limit}: {limit + 1} attempts")


@dataclass(frozen=True)
class PodTemplate:
    """One pod template of an object: where it is, its replica's name, how many pods."""

    path: str  # from the object: "spec.template", "" for a Pod (the object is its template)
    name: str  # the replica's name ("Worker", a replicated job's name), "" for the only one
    template: dict[str, Any]  # {metadata, spec}
    replicas: int = 1

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.template.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def spec_path(self) -> str:
        return f"{self.path}.spec" if self.path else "spec"

    @property
    def label(self) -> str:
        """How a finding names it: "Worker pod", "pod"."""
        return f"{self.name} pod" if self.name else "pod"


def job_spec_bound(spec: Mapping[str, Any], code: int = KILLED, pods: int = 1) -> Bound:
    """A batch/v1 Job spec whose `pods` pods (indexes) all die with `code` every time (the
    Kubernetes Job controller: podFailurePolicy first, then backoffLimit /
    backoffLimitPerIndex; an `OnFailure` pod's container restarts count the same way).
    backoffLimit counts the failures of all the Job's pods together (failed pods, or the
    restarts of its active OnFailure pods), so `pods` pods reach it in fewer attempts each;
    backoffLimitPerIndex counts each index alone."""
    # the Job controller's answer for a pod whose first container exited `code` (no
    # DisruptionTarget: an OOM kill or a crash, not an eviction): trainforge.core.failures
    containers = get(spec, "template", "spec", "containers") or [{}]
    failed = failures.failed_pod(containers[0].get("name"), code)
    counted, action = failures.match_pod_failure_policy(spec.get("podFailurePolicy"), failed)
    if action == failures.FAIL_JOB:
        return Bound(1, f"pod failure policy: exit {code} fails the Job")
    if action == failures.FAIL_INDEX:
        return Bound(1, f"pod failure policy: exit {code} fails the index")
    if not counted:
        return Bound(None, f"pod failure policy ignores exit {code}: never counted")
    unit = (
        "container runs"
        if get(spec, "template", "spec", "restartPolicy") == "OnFailure"
        else "pods"
    )
    if spec.get("backoffLimitPerIndex") is not None:
        limit = int(spec["backoffLimitPerIndex"])
        return Bound(limit + 1, f"backoffLimitPerIndex {limit}: {limit + 1} {unit} of the index")
    limit = int(spec.get("backoffLimit", 6))  # the API server's default
    if pods <= 1:
        return Bound(limit + 1, f"backoffLimit {limit}: {limit + 1} {unit}")
    if unit == "container runs":  # fails once the restarts reach the limit (0: > 0)
        runs = max(math.ceil(limit / pods), 1) + 1
        return Bound(
            runs,
            f"backoffLimit {limit} counts the restarts of all {pods} pods together: "
            f"{runs} container runs each",
        )
    attempts = math.ceil((limit + 1) / pods)  # fails at limit + 1 failed pods
    return Bound(
        attempts,
        f"backoffLimit {limit}: {limit + 1} failed pods in all, {pods} per attempt: "
        f"{attempts} attempts",
    )


def with_deadline(bound: Bound, deadline: Any) -> Bound:
    """An unbounded `bound` that `activeDeadlineSeconds` ends in time."""
    if bound.attempts is None and deadline is not None:
        return Bound(None, f"{bound.why}; activeDeadlineSeconds {deadline}", deadline)
    return bound


def _job_retry(doc: Mapping[str, Any], inputs: RetryInputs) -> Bound:
    spec = doc.get("spec") or {}
    pods = int(spec.get("parallelism", 1))
    bound = job_spec_bound(spec, inputs.code, pods)
    return with_deadline(bound, spec.get("activeDeadlineSeconds"))


# Kubernetes' own workloads (k8s.io/api, apps/v1, batch/v1, core/v1)
KUBERNETES: dict[str, Shape] = {
    "Pod": Shape(templates=((),)),
    "PodTemplate": Shape(templates=(("template",),)),
    "Deployment": Shape(templates=(("spec", "template"),), replicas=(("spec", "replicas"),)),
    "StatefulSet": Shape(templates=(("spec", "template"),), replicas=(("spec", "replicas"),)),
    "ReplicaSet": Shape(templates=(("spec", "template"),), replicas=(("spec", "replicas"),)),
    "DaemonSet": Shape(templates=(("spec", "template"),)),
    "Job": Shape(
        templates=(("spec", "template"),),
        replicas=(("spec", "parallelism"),),
        restarts=("spec", "backoffLimit"),
        job=True,
        retry=_job_retry,
    ),
    # a CRD's schema describes pod templates (`containers` of type array) but runs none: not
    # walked (the operators' CRDs are megabytes)
    "CustomResourceDefinition": Shape(),
    "CronJob": Shape(
        templates=(("spec", "jobTemplate", "spec", "template"),),
        replicas=(("spec", "jobTemplate", "spec", "parallelism"),),
        restarts=("spec", "jobTemplate", "spec", "backoffLimit"),
    ),
}


def get(node: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(k)
    return node


def security_field(pod_sc: Any, container_sc: Any, key: str) -> Any:
    """A container's effective securityContext field (runAsUser, runAsNonRoot, ...): the
    container's own, else its pod's."""
    own = get(container_sc, key)
    return own if own is not None else get(pod_sc, key)


def literal_env(container: Any) -> dict[str, str]:
    """A container's env entries that carry their value literally (`value`, not `valueFrom`),
    name -> value as a string: what the process gets without a Kubernetes lookup. The plan's
    one reader of it (the pod script rehearsal's environment, the job view of a diff)."""
    return {
        e["name"]: str(e["value"])
        for e in get(container, "env") or ()
        if isinstance(e, Mapping) and "name" in e and isinstance(e.get("value"), str | int)
    }


def containers(pod: Any) -> list[Mapping[str, Any]]:
    """A pod spec's init containers, then its containers (the order Kubernetes starts them),
    the entries that are objects: the plan's one walk over a pod's containers (the resource
    rules, the pod script rehearsal, the reference check, the fleet's image regions)."""
    out = []
    for key in ("initContainers", "containers"):
        found = get(pod, key)
        out += [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []
    return out


def argv(container: Any) -> list[str]:
    """What a container runs: its command and then its args, as strings (the plan's one reader
    of it: the pod script rehearsal, the job view of a diff)."""
    return [str(a) for a in [*(get(container, "command") or ()), *(get(container, "args") or ())]]


# a ConfigMap (or Secret, projected) volume's file mode where neither its item nor the volume
# sets one: k8s.io/api core/v1 types.go ConfigMapVolumeSourceDefaultMode, SecretVolumeSourceDefaultMode,
# ProjectedVolumeSourceDefaultMode, each 0644 ("Defaults to 0644"; read 2026-12-01)
VOLUME_DEFAULT_MODE = 0o644
_MODE_VOLUMES = ("configMap", "secret", "projected")


def volume_file_mode(volume: Any, rel: str) -> int:
    """The mode the kubelet gives file `rel` (relative to the mount) of a ConfigMap, Secret
    or projected volume: its item's `mode`, else the volume's `defaultMode`, else 0644. The
    one reader of it: the importer keeps a file's execute bits (`./run.sh` under
    `defaultMode: 0755`), the plan refuses a program the pod could not execute."""
    source = next(
        (get(volume, k) for k in _MODE_VOLUMES if isinstance(get(volume, k), Mapping)), {}
    )
    items = [x for x in source.get("items") or () if isinstance(x, Mapping)]
    items += [
        x
        for s in source.get("sources") or ()
        if isinstance(s, Mapping)
        for v in s.values()
        if isinstance(v, Mapping)
        for x in v.get("items") or ()
        if isinstance(x, Mapping)
    ]
    item = next((x for x in items if x.get("path") == rel), {})
    for mode in (item.get("mode"), source.get("defaultMode")):
        if isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o777:
            return mode
    return VOLUME_DEFAULT_MODE


def _int(v: Any, default: Any) -> Any:
    return int(v) if isinstance(v, int | str) and str(v).isdigit() else default


def _count(entry: Any, paths: tuple[Path, ...]) -> int:
    n = 1
    for p in paths:
        v = get(entry, *p)
        if isinstance(v, int | str) and str(v).isdigit():
            n *= int(v)
    return n


def _follow(
    node: Any, path: Path, where: str, name: str, entry: Any
) -> Iterator[tuple[str, str, Any, Any]]:
    """(where, replica name, node, replica entry) at the end of `path` from `node`."""
    if not path:
        yield where, name, node, entry
        return
    step, rest = path[0], path[1:]
    if step != EACH:
        if isinstance(node, Mapping) and step in node:
            yield from _follow(node[step], rest, f"{where}.{step}" if where else step, name, entry)
        return
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _follow(v, rest, f"{where}.{k}", str(k), v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            own = v.get("name") if isinstance(v, Mapping) else None
            yield from _follow(v, rest, f"{where}[{i}]", str(own or i), v)


def _is_template(node: Any) -> bool:
    return isinstance(node, Mapping) and isinstance(get(node, "spec", "containers"), list)


def _generic(node: Any, where: str) -> Iterator[PodTemplate]:
    """Every mapping whose `spec` has a `containers` list, in document order (not inside one)."""
    if _is_template(node):
        yield PodTemplate(where, "", node)  # type: ignore[arg-type]
    elif isinstance(node, Mapping):
        for k, v in node.items():
            yield from _generic(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _generic(v, f"{where}[{i}]")


def pod_templates(
    doc: Mapping[str, Any],
    shapes: Mapping[str, Shape] = KUBERNETES,
    *,
    build: bool = True,
    kind: str | None = None,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[PodTemplate]:
    """Every pod template of an object, by its kind's shape in `shapes`, else generically
    (under `spec`, or the object itself when its `spec` has containers). `build=False` skips
    the pods a controller builds from elsewhere (a TrainJob's), for a reader that only wants
    what the object itself writes. `kind`: read the object as this kind's shape instead.
    `runtimes`: what a `build` reads besides the object (a plan's training runtimes, by
    name; None: the platform's own)."""
    shape = shapes.get(str(doc.get("kind")) if kind is None else kind)
    if shape is None:
        if _is_template(doc):
            return [PodTemplate("", "", dict(doc))]
        return list(_generic(doc.get("spec"), "spec"))
    out: list[PodTemplate] = []
    if shape.build is not None and build:
        for name, tmpl in shape.build(dict(doc), runtimes) or []:
            out.append(PodTemplate("", name, tmpl, shape.pod_count(doc, runtimes)))
        return out
    for path in shape.templates:
        for where, name, node, entry in _follow(doc, path, "", "", doc):
            if isinstance(node, dict):
                out.append(PodTemplate(where, name, node, _count(entry, shape.replicas)))
    return out


def pod_specs(
    doc: Mapping[str, Any], shapes: Mapping[str, Shape] = KUBERNETES, *, build: bool = True
) -> list[dict[str, Any]]:
    """The pod specs of `pod_templates`, in order."""
    return [t.spec for t in pod_templates(doc, shapes, build=build)]


# --- a pod's requests: what the scheduler, Karpenter and Kueue count -----------------------------
# Why: a Job, CronJob or SDK TrainJob that a user writes often names no requests at all, and a
# limit without a request is its request. The API server stores the pod with its namespace's
# LimitRange defaults (a container's missing limits from `default`, missing requests from
# `defaultRequest`) and a limit standing for a missing request; the scheduler and Karpenter
# pack that pod by the Kubernetes `PodRequests` (component-helpers resource/helpers.go: its
# containers and sidecars, or its largest init container with the sidecars started before it
# where that is larger; the pod-level requests, where the pod writes them, in place of its
# containers' CPU, memory and hugepages; plus the overhead; Karpenter core 6e7eab7a0f48
# pkg/utils/resources/resources.go `RequestsForPods` -> `Ceiling` -> `PodRequests`, read
# 2026-11-29). Kueue does the same to the job's pod templates before it counts them
# (pkg/workload/resources.go `AdjustResources`: `handlePodLimitRange`,
# `handleLimitsToRequests`, then `PodRequests` in workload.go `totalRequestsFromPodSets`, at
# release-0.19 c90ed70, read 2026-11-29), in its own order. So one model serves both, in
# upstream's steps: `adjusted_pod_spec` (Kueue's AdjustResources, less the RuntimeClass
# overhead) or `stored_pod_spec` (the API server's defaulting and LimitRanger, for the Pod),
# then `aggregate_requests` (PodRequests with no options); upstream's own test cases run
# through it (tests/fixtures/upstream/pod_requests.yaml). Kueue reads `pod_requests`, the
# resources its ClusterQueue covers of it (trainforge.plan.kueue); Karpenter
# `scheduled_pod_requests`, all of them, EFA devices included (trainforge.jobs.capacity.gang);
# OpenCost `container_requests`. Where the two orders differ: `stored_pod_spec`.
#
# Modelled less: a running pod's status (in-place resize), and the RuntimeClass overhead Kueue
# copies into a pod set that names a runtimeClassName without `overhead`. The API server's own
# defaulting of a Pod, which the scheduler and Karpenter read and Kueue does not, is
# `stored_pod_spec` below.

# PodLevelResources: the resources a pod may name in `spec.resources` (component-helpers
# resource/helpers.go `supportedPodLevelResources` and `IsSupportedPodLevelResource`, v0.35.7)
POD_LEVEL = ("cpu", "memory")
HUGEPAGES = "hugepages-"


def pod_level(resource: str) -> bool:
    """Whether a pod's own `spec.resources` may name `resource` (IsSupportedPodLevelResource)."""
    return resource in POD_LEVEL or resource.startswith(HUGEPAGES)


def _quantity(v: Any) -> Fraction:
    """A quantity as written, or as a model computed it (a Fraction)."""
    return v if isinstance(v, Fraction) else parse_quantity(str(v))


def _resources(v: Any) -> dict[str, Any]:
    return dict(v) if isinstance(v, Mapping) else {}


def stored_limit_range_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A LimitRange item as the API server stores it (pkg/apis/core/v1/defaults.go
    `SetDefaults_LimitRangeItem`): of type Container, a missing `default` from `max`, then a
    missing `defaultRequest` from `default`, then from `min`. Kueue reads the stored object."""
    out = dict(item)
    if item.get("type") != "Container":
        return out
    default = {**_resources(item.get("max")), **_resources(item.get("default"))}
    request = {**_resources(item.get("min")), **default, **_resources(item.get("defaultRequest"))}
    return {**out, "default": default, "defaultRequest": request}


def summarize(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict]]:
    """Kueue's `limitrange.Summarize` of a namespace's LimitRanges, per type (Container, Pod),
    over every item of every LimitRange in order, as stored (`stored_limit_range_item`): the
    lowest `max` and `maxLimitRequestRatio`, the highest `min`, the first `default` and
    `defaultRequest` of each resource (pkg/util/limitrange/limitrange.go at release-0.19 c90ed70, read 2026-11-30).
    Kueue defaults (`adjusted_pod_spec`) and validates (`outside_limit_range`) from it."""
    keep = {"max": min, "min": max, "default": None, "defaultRequest": None,
            "maxLimitRequestRatio": min}  # fmt: skip
    out: dict[str, dict[str, dict]] = {}
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") not in ("Container", "Pod"):
                continue
            item = stored_limit_range_item(item)
            summary = out.setdefault(str(item["type"]), {k: {} for k in keep})
            for key, pick in keep.items():
                for k, v in _resources(item.get(key)).items():
                    have = summary[key].get(k)
                    if have is None:
                        summary[key][k] = v
                    elif pick is not None:
                        summary[key][k] = pick(have, v, key=_quantity)
    return out


def _limit_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, tuple[dict, dict]]:
    """Per LimitRange type: (default limits, default requests) as Kueue takes them (`summarize`:
    the first item that names a resource wins)."""
    return {t: (s["default"], s["defaultRequest"]) for t, s in summarize(limit_ranges).items()}


def limit_ranger_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> tuple[dict, dict]:
    """(default limits, default requests) of a container as the API server's LimitRanger
    fills them, which is not Kueue's order: it runs each LimitRange of the namespace in turn,
    the first to fill a field keeping it (`mergeContainerResources` fills only what is
    missing), and within one LimitRange its Container items in order, a later item's value
    replacing an earlier one's (`defaultContainerResourceRequirements`: plain map
    assignment). Read in kubernetes/kubernetes plugin/pkg/admission/limitranger/admission.go
    at commit 8f672ecf2088fe8504495748577c0ab537999ab7 (the read_file tool, 2026-11-30; the
    same two functions, unchanged, in the newer copy its code search holds). The order of
    several LimitRange objects is the informer's list order, which the API does not fix:
    here, the order given."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for lr in limit_ranges:
        own: tuple[dict, dict] = ({}, {})
        for item in (lr.get("spec") or {}).get("limits") or []:
            if isinstance(item, Mapping) and item.get("type") == "Container":
                item = stored_limit_range_item(item)
                own[0].update(_resources(item.get("default")))
                own[1].update(_resources(item.get("defaultRequest")))
        limits = {**own[0], **limits}
        requests = {**own[1], **requests}
    return limits, requests


def _adjust(res: Any, defaults: tuple[dict, dict]) -> dict[str, Any]:
    """One `resources` block as Kueue adjusts it: missing limits from the LimitRange's
    default, missing requests from its defaultRequest, then from the limits."""
    res = _resources(res)
    limits = {**defaults[0], **_resources(res.get("limits"))}
    requests = {**limits, **defaults[1], **_resources(res.get("requests"))}
    out = {**res, "requests": requests}
    return {**out, "limits": limits} if limits else out


def adjusted_pod_spec(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The pod spec as Kueue adjusts it before it counts it (pkg/workload/resources.go
    `AdjustResources` at release-0.19: `handlePodLimitRange`, then `handleLimitsToRequests`):
    each container's and init container's missing limits and requests from the namespace's
    LimitRanges of type Container, then its limits as its missing requests; the pod's own
    `resources`, where it writes them, likewise from type Pod. `limit_ranges` are the
    LimitRange documents of the namespace (as written: they are read as the API server
    stores them)."""
    defaults = _limit_defaults(limit_ranges)
    container = defaults.get("Container", ({}, {}))
    out = dict(pod_spec)
    for key in ("initContainers", "containers"):
        found = pod_spec.get(key)
        if isinstance(found, list):
            out[key] = [
                {**c, "resources": _adjust(c.get("resources"), container)}
                if isinstance(c, Mapping) else c
                for c in found
            ]  # fmt: skip
    if isinstance(pod_spec.get("resources"), Mapping):
        out["resources"] = _adjust(pod_spec["resources"], defaults.get("Pod", ({}, {})))
    return out


# The API server's own defaulting of a Pod (not of a template: Kueue reads the Workload's
# templates, which no API defaulting touches, so `adjusted_pod_spec` is Kueue's alone). The
# scheduler and Karpenter read the Pod the API server stored: decoding defaults it first
# (pkg/apis/core/v1/defaults.go `SetDefaults_Pod`: each container's limits as its missing
# requests; with PodLevelResources, beta and on by default from 1.34 (pkg/features
# kube_features.go as the code search holds it, read 2026-11-30), then
# `defaultHugePagePodLimits` and `defaultPodRequests` of the pod's own `resources`: read at
# kubernetes commit 023f88a32c95647b94e47df54948a0af9517dd0c through the read_file tool,
# 2026-11-30; no 1.35 tag of it was readable here, the local mirrors hold no
# kubernetes/kubernetes), and the LimitRanger admission plugin fills what is still missing
# after that (plugin/pkg/admission/limitranger/admission.go `mergeContainerResources`: a
# container's missing limits from the LimitRange's `default`, missing requests from its
# `defaultRequest`). So the two orders differ: a container naming only a limit of 3 CPUs
# requests 3 on the Pod, and the LimitRange's defaultRequest in Kueue's Workload; a pod whose
# own `resources` names only limits requests its containers' aggregate on the Pod (CPU,
# memory), and those limits in Kueue's. Who reads which: Kueue `pod_requests` (the queue
# model, status/why/wait), the scheduler and Karpenter `scheduled_pod_requests`.

# what `defaultPodRequests` takes from the containers' aggregate: the pod-level resources that
# may be overcommitted (IsSupportedPodLevelResource and `overcommit_allowed`: not hugepages)
POD_LEVEL_OVERCOMMIT = ("cpu", "memory")


def overcommit_allowed(resource: str) -> bool:
    """Kubernetes pkg/apis/core/helper/helpers.go `IsOvercommitAllowed` (8a84988b, the commit
    of CHANGELOG-1.35.md, read 2026-11-30): a native resource (no domain, or kubernetes.io/)
    but hugepages. Any other (nvidia.com/gpu, vpc.amazonaws.com/efa) must request what it
    limits, or the API server refuses the pod (`validateResourceRequirements`)."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith(HUGEPAGES)


def stored_pod_spec(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A Pod created from `pod_spec` as the API server stores it (see the comment above):
    `SetDefaults_Pod`'s resources (each container's and init container's limits as its
    missing requests; where the pod writes its own `resources`, a hugepage limit its
    containers name and it neither requests nor limits as its limit
    (`defaultHugePagePodLimits`), and, where it then limits anything, each missing CPU and
    memory request from its containers' `aggregate_containers` requests and then any other
    missing request from its limit (`defaultPodRequests`)), then the LimitRanger's container
    defaults of the namespace's `limit_ranges` (its pod-level Pod items only bound, never
    default: not applied)."""
    out = dict(pod_spec)
    for key in ("initContainers", "containers"):
        found = pod_spec.get(key)
        if isinstance(found, list):
            out[key] = [
                {**c, "resources": _adjust(c.get("resources"), ({}, {}))}
                if isinstance(c, Mapping) else c
                for c in found
            ]  # fmt: skip
    own = pod_spec.get("resources")
    if isinstance(own, Mapping):
        limits, requests = _resources(own.get("limits")), _resources(own.get("requests"))
        if limits or requests:
            for k, v in aggregate_containers(out, "limits").items():
                if k.startswith(HUGEPAGES) and k not in requests and k not in limits:
                    limits[k] = v
        if limits:
            for k, v in aggregate_containers(out).items():
                if k in POD_LEVEL_OVERCOMMIT and k not in requests:
                    requests[k] = v
            for k, v in limits.items():
                if pod_level(k) and k not in requests:
                    requests[k] = v
        res = dict(own)
        if limits:
            res["limits"] = limits
        if requests:
            res["requests"] = requests
        out["resources"] = res
    container = limit_ranger_defaults(limit_ranges)
    for key in ("initContainers", "containers"):
        found = out.get(key)
        if isinstance(found, list):
            out[key] = [
                {**c, "resources": _fill(c.get("resources"), container)}
                if isinstance(c, Mapping) else c
                for c in found
            ]  # fmt: skip
    return out


def _fill(res: Any, defaults: tuple[dict, dict]) -> dict[str, Any]:
    """The LimitRanger's `mergeContainerResources`: missing limits from `default`, missing
    requests from `defaultRequest` (a limit never stands in here: decoding did that first)."""
    res = _resources(res)
    limits = {**defaults[0], **_resources(res.get("limits"))}
    requests = {**defaults[1], **_resources(res.get("requests"))}
    out = {**res, "requests": requests} if requests or "requests" in res else dict(res)
    return {**out, "limits": limits} if limits else out


def scheduled_pod_requests(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """One pod's requests as the scheduler and Karpenter count the Pod the API server stored
    from this template (`aggregate_requests` of `stored_pod_spec`), the resources it asks a
    nonzero amount of. Kueue counts the template instead: `pod_requests`."""
    total = aggregate_requests(stored_pod_spec(pod_spec, limit_ranges))
    return {k: v for k, v in total.items() if v}


def pod_limits(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """The limits one pod runs under (its cgroup: an OOM kill above the memory limit, CPU
    throttled above the cpu limit), as the API server stores the pod (`stored_pod_spec`: a
    container's missing limit from the namespace's LimitRange `default`, the LimitRanger's
    `mergeContainerResources`): per resource the sum of its app containers' limits where
    every one has a limit (one without is unbounded, so the pod is: the resource is absent),
    no more than the pod's own `resources.limits`. Init containers run before them and are
    not counted. Without `limit_ranges`: what the pod names itself, so the difference is
    what the LimitRange gave it."""
    stored = stored_pod_spec(pod_spec, limit_ranges)
    apps = [c for c in stored.get("containers") or [] if isinstance(c, Mapping)]
    each = [_requests(c, "limits") for c in apps]
    names = {k for limits in each for k in limits}
    out = {k: sum((x[k] for x in each), Fraction(0)) for k in names if all(k in x for x in each)}
    for k, v in _resources(get(stored, "resources", "limits")).items():
        out[k] = min(out.get(k, _quantity(v)), _quantity(v))
    return out


def _requests(c: Any, key: str = "requests") -> dict[str, Fraction]:
    res = get(c, "resources", key)
    return {k: _quantity(v) for k, v in res.items()} if isinstance(res, Mapping) else {}


def _app_containers(pod_spec: Mapping[str, Any], key: str = "requests") -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for c in pod_spec.get("containers") or []:
        for k, v in _requests(c, key).items():
            total[k] = total.get(k, Fraction(0)) + v
    return total


def aggregate_containers(pod_spec: Mapping[str, Any], key: str = "requests") -> dict[str, Fraction]:
    """The Kubernetes `AggregateContainerRequests` (`key` "limits": `AggregateContainerLimits`)
    of a pod spec, with no options: its containers' and sidecars' (init containers with
    restartPolicy Always, running beside the containers and the init containers after them),
    or its largest init container with the sidecars started before it where that is larger;
    not the pod's own `resources`, not its overhead (component-helpers v0.35.7
    resource/helpers.go)."""
    total = _app_containers(pod_spec, key)
    sidecars: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for c in pod_spec.get("initContainers") or []:
        asks = _requests(c, key)
        if get(c, "restartPolicy") == "Always":
            for k, v in asks.items():
                total[k] = total.get(k, Fraction(0)) + v
                sidecars[k] = sidecars.get(k, Fraction(0)) + v
            asks = dict(sidecars)
        else:
            asks = {k: asks.get(k, Fraction(0)) + sidecars.get(k, Fraction(0))
                    for k in {*asks, *sidecars}}  # fmt: skip
        for k, v in asks.items():
            init[k] = max(init.get(k, Fraction(0)), v)
    for k, v in init.items():
        total[k] = max(total.get(k, Fraction(0)), v)
    return total


def aggregate_requests(pod_spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """The Kubernetes `PodRequests` of a pod spec as written, with no options (what Kueue's
    totalRequestsFromPodSets and Karpenter pass): its containers' requests, and its sidecars'
    (init containers with restartPolicy Always, running beside the containers and the init
    containers after them: AggregateContainerRequests), or its largest init container with
    the sidecars started before it where that is larger; the pod's own `resources.requests`
    of the resources a pod may name in place of that sum; plus its overhead. A resource that
    sums to zero stays, as upstream's does."""
    total = aggregate_containers(pod_spec)
    own = get(pod_spec, "resources", "requests")
    for k, v in (own if isinstance(own, Mapping) else {}).items():
        if pod_level(k):
            total[k] = _quantity(v)
    for k, v in _resources(pod_spec.get("overhead")).items():
        total[k] = total.get(k, Fraction(0)) + _quantity(v)
    return total


def container_requests(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """The pod's app containers' requests (`spec.containers` only, a limit standing for a
    missing request): the first term of `pod_requests`, and what OpenCost allocates a pod by
    request. Its cost model prices each container of `pod.Spec.Containers` at max(request,
    usage) for CPU and memory and at its GPU request (else limit), and no init container,
    sidecar or pod overhead (opencost v1.112.0 pkg/costmodel/costmodel.go `ComputeCostData`,
    metrics.go `container_*_allocation`; read 2026-11-29, the newest source of the mirror:
    the pinned 1.120.1 is not in it). `trainforge status`'s spend estimate reads this, so it
    estimates what OpenCost would say (trainforge.live.spend). OpenCost reads the Pod as the
    API server stored it (`stored_pod_spec`), not Kueue's adjusted template."""
    stored = stored_pod_spec(pod_spec, limit_ranges)
    return {k: v for k, v in _app_containers(stored).items() if v}


def pod_requests(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """One pod's requests as Kueue counts them (see the comment above: `aggregate_requests`
    of `adjusted_pod_spec`), the resources it asks a nonzero amount of; `limit_ranges` are
    the LimitRange documents of the workload's namespace."""
    total = aggregate_requests(adjusted_pod_spec(pod_spec, limit_ranges))
    return {k: v for k, v in total.items() if v}


# --- what Kueue refuses of a pod's requests and limits ------------------------------------------
# Why: the LimitRange defaults are applied per field, so a container with its own request and no
# limit takes the namespace's `default` limit even where that is lower, and one with its own
# limit and no request takes the `defaultRequest` even where that is higher. Kueue validates the
# adjusted pod sets before it assigns flavors (pkg/workload/resources.go `ValidateAdmissibility`
# -> `ValidateResources`, at release-0.19 c90ed70, read 2026-11-30; the scheduler runs it on
# the queue's copy, which `AdjustResources` adjusted, pkg/scheduler/scheduler.go): a request
# above its limit makes the Workload inadmissible (QuotaReserved False, reason Pending at Kueue 0.19's default feature gates)
# with that error as its message, for good.

# pkg/workload/resources.go
REQUESTS_OVER_LIMITS = "requests must not exceed its limits"  # RequestsMustNotExceedLimitMessage
INVALID_RESOURCES = "resources validation failed"  # ErrInvalidWLResources


def _kueue_value(resource: str, q: Any) -> int:
    """A quantity as Kueue compares it (pkg/resources/requests.go `ResourceValue`): CPU in
    millicores, anything else in units, each rounded up (Quantity.MilliValue / Value)."""
    v = _quantity(q)
    return math.ceil(v * 1000) if resource == "cpu" else math.ceil(v)


def _greater(amounts: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """Kueue's `GreaterKeys`: the resources `amounts` has more of than `other`, sorted; only
    resources both name (pkg/resources/requests.go)."""
    return sorted(
        k for k, v in amounts.items()
        if k in other and _kueue_value(k, v) > _kueue_value(k, other[k])
    )  # fmt: skip


def _greater_keys(res: Any) -> list[str]:
    """The resources a `resources` block requests more of than it limits (`GreaterKeysRL`:
    none when it has no limits)."""
    return _greater(_resources(get(res, "requests")), _resources(get(res, "limits")))


def requests_over_limits(pod_spec: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """Kueue's `ValidateResources` of one pod set's pod spec (pass it `adjusted_pod_spec`: Kueue
    validates what AdjustResources made of it): (field under the template's spec, the
    resources it requests more of than it limits) for each init container, each container and
    the pod's own `resources`, in that order, where any."""
    out: list[tuple[str, list[str]]] = []
    for key in ("initContainers", "containers"):
        found = pod_spec.get(key)
        for i, c in enumerate(found if isinstance(found, list) else []):
            names = _greater_keys(get(c, "resources"))
            if names:
                out.append((f"{key}[{i}]", names))
    names = _greater_keys(pod_spec.get("resources"))
    if names:
        out.append(("resources", names))
    return out


def invalid_resources(pod_sets: Iterable[Iterable[tuple[str, Iterable[str]]]]) -> str:
    """The error Kueue's ValidateAdmissibility returns for a Workload whose pod sets, in order,
    have these `requests_over_limits` ("" when none requests more than it limits): each
    field error as apimachinery's `field.Error` prints an Invalid value (the resource names
    as a JSON list), several in brackets joined by ", " (`ToAggregate`, v0.36.2)."""
    return _aggregate(
        INVALID_RESOURCES,
        ([(where, names, REQUESTS_OVER_LIMITS) for where, names in over] for over in pod_sets),
    )


def _aggregate(head: str, pod_sets: Iterable[Iterable[tuple[str, Iterable[str], str]]]) -> str:
    """`head: <errors>` as Kueue's ValidateAdmissibility wraps a field.ErrorList (`%s: %w` of
    its ToAggregate) of pod sets' (field under the template's spec, "" for the spec itself;
    resource names; detail) errors; "" when there are none."""
    errs = [
        f"spec.podSets[{i}].template.spec{'.' + where if where else ''}: Invalid value: "
        + "[" + ",".join(f'"{n}"' for n in names) + "]: " + detail
        for i, found in enumerate(pod_sets)
        for where, names, detail in found
    ]  # fmt: skip
    if not errs:
        return ""
    unique = list(dict.fromkeys(errs))
    joined = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return f"{head}: {joined}"


# Kueue's ValidateLimitRange, which ValidateAdmissibility runs after ValidateResources (the first
# to fail is the Workload's message): the adjusted pod set against the `summarize` of every
# LimitRange of the namespace. A container is outside it when the larger of its request and
# limit of a resource is over the summary's Container `max`, or the smaller under its `min`
# (a resource it does not name is neither); the pod, when its `aggregate_requests` (requests
# only, with its overhead) is over the Pod `max` or under its `min`. maxLimitRequestRatio is not
# checked by Kueue. pkg/workload/resources.go and pkg/util/limitrange/limitrange.go
# (`ValidatePodSpec`) at release-0.19 c90ed70, read 2026-11-30; its own TestSummarize and
# TestValidatePodSpec cases in tests/fixtures/upstream/limit_range.yaml.
OUTSIDE_LIMIT_RANGE = "resources didn't satisfy LimitRange constraints"  # ErrLimitRange...
ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"


def _bounds(res: Any) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    """(the smaller, the larger) of a container's request and limit of each resource."""
    requests = {k: _quantity(v) for k, v in _resources(get(res, "requests")).items()}
    limits = {k: _quantity(v) for k, v in _resources(get(res, "limits")).items()}
    both = {*requests, *limits}
    pairs = {k: [v for v in (requests.get(k), limits.get(k)) if v is not None] for k in both}
    return {k: min(v) for k, v in pairs.items()}, {k: max(v) for k, v in pairs.items()}


def outside_limit_range(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]]
) -> list[tuple[str, list[str], str]]:
    """Kueue's ValidateLimitRange of one pod set's pod spec (pass it `adjusted_pod_spec`):
    (field under the template's spec, "" for the pod; the resources; ABOVE_MAX or BELOW_MIN)
    for each init container, each container, then the pod, in that order, where any."""
    summary = summarize(limit_ranges)
    out: list[tuple[str, list[str], str]] = []
    box = summary.get("Container")
    for key in ("initContainers", "containers") if box else ():
        found = pod_spec.get(key)
        for i, c in enumerate(found if isinstance(found, list) else []):
            low, high = _bounds(get(c, "resources"))
            for names, detail in ((_greater(high, box["max"]), ABOVE_MAX),
                                  (_greater(box["min"], low), BELOW_MIN)):  # fmt: skip
                if names:
                    out.append((f"{key}[{i}]", names, detail))
    pod = summary.get("Pod")
    if pod:
        total = aggregate_requests(pod_spec)
        for names, detail in ((_greater(total, pod["max"]), ABOVE_MAX),
                              (_greater(pod["min"], total), BELOW_MIN)):  # fmt: skip
            if names:
                out.append(("", names, detail))
    return out


def limit_range_refusal(pod_sets: Iterable[Iterable[tuple[str, Iterable[str], str]]]) -> str:
    """The error Kueue's ValidateAdmissibility returns for a Workload whose pod sets, in
    order, have these `outside_limit_range` errors ("" when none)."""
    return _aggregate(OUTSIDE_LIMIT_RANGE, pod_sets)
