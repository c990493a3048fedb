"""Kueue's objects as the admission model reads them (kueue.x-k8s.io/v1beta2; v1beta1's
differing field names too). Defaults are the CRD's (kueue.x-k8s.io_clusterqueues.yaml at
v0.19.5, apis/kueue/v1beta2/clusterqueue_types.go at release-0.19 c90ed70, read 2026-11-29):
queueingStrategy BestEffortFIFO; flavorFungibility whenCanBorrow MayStopSearch, whenCanPreempt
TryNextFlavor (v1beta1's `Borrow`/`Preempt` read as MayStopSearch). A flavor missing from a
resource group has no quota there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trainforge.core.contract import GPU_RESOURCE
from trainforge.core.labels import NAMESPACE_NAME
from trainforge.core.quantity import counted, parse_quantity

GPU = GPU_RESOURCE
RESOURCES = ("cpu", "memory", GPU)
MAY_STOP, TRY_NEXT = "MayStopSearch", "TryNextFlavor"
_LEGACY = {"Borrow": MAY_STOP, "Preempt": MAY_STOP}


def quantity(v: Any) -> Fraction:
    return parse_quantity(str(v))


def summed(needs: Iterable[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    """Resource -> its sum over `needs` (pod sets, or a trainer and its initializers)."""
    out: dict[str, Fraction] = {}
    for need in needs:
        for r, v in need.items():
            out[r] = out.get(r, Fraction(0)) + v
    return out


@dataclass
class Flavor:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    topology: str | None
    # counted against the taints; Kueue adds them to the pods of a job it admits
    tolerations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Fungibility:
    when_can_borrow: str = MAY_STOP
    when_can_preempt: str = TRY_NEXT
    preference: str | None = None

    @classmethod
    def read(cls, spec: dict[str, Any] | None) -> Fungibility:
        spec = spec or {}
        borrow = spec.get("whenCanBorrow") or MAY_STOP
        preempt = spec.get("whenCanPreempt") or TRY_NEXT
        return cls(
            _LEGACY.get(borrow, borrow), _LEGACY.get(preempt, preempt), spec.get("preference")
        )


@dataclass
class ClusterQueue:
    """Quota per flavor and resource (borrowingLimit/lendingLimit None: no limit), flavors in
    order, and the usage of what it admitted (what the simulation changes)."""

    name: str
    cohort: str | None
    namespaces: dict[str, str]  # namespaceSelector.matchLabels
    strategy: str
    preemption: dict[str, Any]
    nominal: dict[str, dict[str, Fraction]]  # flavor -> resource -> quota
    borrow_limit: dict[str, dict[str, Fraction | None]]
    flavors: list[str]
    usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    lend_limit: dict[str, dict[str, Fraction | None]] = field(default_factory=dict)
    # (coveredResources, flavors in order) per resource group
    groups: list[tuple[tuple[str, ...], list[str]]] = field(default_factory=list)
    fungibility: Fungibility = field(default_factory=Fungibility)

    def admits(self, namespace: str) -> bool:
        """By kubernetes.io/metadata.name, the one namespace label known offline."""
        return all(k == NAMESPACE_NAME and v == namespace for k, v in self.namespaces.items())

    def use(self, flavor: str, resource: str) -> Fraction:
        return self.usage.get(flavor, {}).get(resource, Fraction(0))

    def group_of(self, resource: str) -> tuple[tuple[str, ...], list[str]] | None:
        return next((g for g in self.groups if resource in g[0]), None)


@dataclass
class Kueue:
    queues: dict[str, ClusterQueue] = field(default_factory=dict)
    flavors: dict[str, Flavor] = field(default_factory=dict)
    local: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, LocalQueue) -> CQ
    priorities: dict[str, int] = field(default_factory=dict)
    # cohort -> flavor -> resource: the Cohort object's own nominal quota
    shared: dict[str, dict[str, dict[str, Fraction]]] = field(default_factory=dict)


def read(docs: Iterable[dict[str, Any]]) -> Kueue:
    out = Kueue()
    for d in docs:
        if not str(d.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            continue
        kind, meta, spec = d.get("kind"), d.get("metadata") or {}, d.get("spec") or {}
        name = str(meta.get("name"))
        if kind == "ResourceFlavor":
            out.flavors[name] = Flavor(
                name,
                dict(spec.get("nodeLabels") or {}),
                list(spec.get("nodeTaints") or []),
                spec.get("topologyName"),
                list(spec.get("tolerations") or []),
            )
        elif kind == "Cohort":  # its resourceGroups are a ClusterQueue's
            out.shared[name] = cluster_queue(d).nominal
        elif kind == "LocalQueue":
            out.local[(str(meta.get("namespace") or ""), name)] = str(spec.get("clusterQueue"))
        elif kind == "WorkloadPriorityClass":
            out.priorities[name] = int(d.get("value", 0))
        elif kind == "ClusterQueue":
            out.queues[name] = cluster_queue(d)
    return out


def cluster_queue(doc: dict[str, Any]) -> ClusterQueue:
    spec = doc.get("spec") or {}
    nominal: dict[str, dict[str, Fraction]] = {}
    borrow: dict[str, dict[str, Fraction | None]] = {}
    lend: dict[str, dict[str, Fraction | None]] = {}
    order: list[str] = []
    groups: list[tuple[tuple[str, ...], list[str]]] = []
    for group in spec.get("resourceGroups") or []:
        covered = tuple(group.get("coveredResources") or ())
        names = []
        for fl in group.get("flavors") or []:
            f = fl["name"]
            names.append(f)
            order.append(f)
            nominal[f] = {r: Fraction(0) for r in covered}
            borrow[f] = {r: Fraction(0) for r in covered}
            lend[f] = {r: None for r in covered}
            for res in fl.get("resources") or []:
                r = res["name"]
                nominal[f][r] = counted(r, quantity(res.get("nominalQuota", 0)))
                for key, to in (("borrowingLimit", borrow), ("lendingLimit", lend)):
                    lim = res.get(key)
                    to[f][r] = counted(r, quantity(lim)) if lim is not None else None
        groups.append((covered or tuple(sorted({r for f in names for r in nominal[f]})), names))
    sel = ((spec.get("namespaceSelector") or {}).get("matchLabels")) or {}
    return ClusterQueue(
        name=str((doc.get("metadata") or {}).get("name")),
        cohort=spec.get("cohortName") or spec.get("cohort"),
        namespaces=dict(sel),
        strategy=spec.get("queueingStrategy", "BestEffortFIFO"),
        preemption=dict(spec.get("preemption") or {}),
        nominal=nominal,
        borrow_limit=borrow,
        flavors=order,
        lend_limit=lend,
        groups=groups,
        fungibility=Fungibility.read(spec.get("flavorFungibility")),
    )
