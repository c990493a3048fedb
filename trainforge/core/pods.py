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

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

EACH = "*"  # in a Shape path: every key of a mapping, every item of a list

Path = tuple[str, ...]


@dataclass(frozen=True)
class Shape:
    """Where one kind keeps its pod templates, and how to read its replicas and restarts.

    `templates`: paths (from the object) of its pod templates ({metadata, spec}); `EACH`
    steps into every key or item, and the last one names the replica (its key, or the
    item's `name`). `replicas`: paths, from that replica entry (the object itself when no
    `EACH`), of counts whose product is the template's pod count (a missing one counts 1).
    `restarts`: the path of the object's restart bound. `build`: for a kind whose pods a
    controller builds from what the object writes and from elsewhere (a TrainJob, from its
    runtime), a function from the object to its [(replica name, pod template)], None when
    it cannot tell; a walk with `build=False` reads the `templates` the object writes.
    """

    templates: tuple[Path, ...] = ()
    replicas: tuple[Path, ...] = ()
    restarts: Path = ()
    build: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]] | None] | None = None

    def restart_limit(self, doc: Mapping[str, Any]) -> Any:
        """The object's restart bound as written (None: unset or the kind has none)."""
        return get(doc, *self.restarts) if self.restarts else None


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
    doc: Mapping[str, Any], shapes: Mapping[str, Shape] = KUBERNETES, *, build: bool = True
) -> list[PodTemplate]:
    """Every pod template of an object, by its kind's shape in `shapes`, else generically
    (under `spec`, or the object itself when its `spec` has containers). `build=False` skips
    the pods a controller builds from elsewhere (a TrainJob's), for a reader that only wants
    what the object itself writes."""
    shape = shapes.get(str(doc.get("kind")))
    if shape is None:
        if _is_template(doc):
            return [PodTemplate("", "", dict(doc))]
        return list(_generic(doc.get("spec"), "spec"))
    out: list[PodTemplate] = []
    if shape.build is not None and build:
        for name, tmpl in shape.build(dict(doc)) or []:
            out.append(PodTemplate("", name, tmpl, _count(doc, shape.replicas)))
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
