"""Plan check: each object is created after the resources that make its kind and namespace exist.

On a fresh stack Pulumi creates in parallel what does not wait for another: a PodMonitor before
the release that installs its CRD fails, so does an object before its Namespace; an existing
stack hides both. This replays the order the engine follows, from the dependencies and parents
the runner records (docs/rehearsals.md, "Creation order (CRDs and namespaces)").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from trainforge.core.pods import get
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.validate import builtin_groups
from trainforge.plan.resource_types import CHART_V4, HELM_RELEASE, KUSTOMIZE
from trainforge.plan.runner import UNKNOWN
from trainforge.plan.sdk import SENT_URN

CRD_RULE = "ORDER_CRD_BEFORE_OBJECT"
NAMESPACE_RULE = "ORDER_NAMESPACE_BEFORE_OBJECT"
RULES = {
    CRD_RULE: "make the object depend on the resource that installs its CRD (depends_on the "
    "release, or a parent component that does)",
    NAMESPACE_RULE: "take the namespace from the Namespace resource's output "
    "(metadata.name) or depend on it, or on the release that creates it",
}
NAMESPACE = "kubernetes:core/v1:Namespace"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"

BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

# chart (last path segment of its reference) or kustomize directory marker -> API groups whose
# CRDs it installs. Sources (read at the pinned versions in trainforge.core.versions):
# karpenter and karpenter-crd 1.x ship crds/ (karpenter.sh, karpenter.k8s.aws);
# kube-prometheus-stack bundles the crds subchart (monitoring.coreos.com); kueue 0.19 renders
# its CRDs from templates/crd; kubeflow-trainer 2.2.1 ships trainer.kubeflow.org in crds/ (its
# bundled JobSet is off) and jobset 0.12.0 ships jobset.x-k8s.io in crds/ (the platform installs
# it as its own chart); the training operator's chart and its kustomize overlay
# (manifests/overlays/standalone) carry kubeflow.org.
INSTALLS: dict[str, tuple[str, ...]] = {
    "karpenter": ("karpenter.sh", "karpenter.k8s.aws"),
    "karpenter-crd": ("karpenter.sh", "karpenter.k8s.aws"),
    "kube-prometheus-stack": ("monitoring.coreos.com",),
    "kueue": ("kueue.x-k8s.io",),
    "kubeflow-trainer": ("trainer.kubeflow.org",),
    "jobset": ("jobset.x-k8s.io",),
    "training-operator": ("kubeflow.org",),
}
# kustomize directory (a substring of its URL or path) -> API groups whose CRDs it installs:
# the training operator v1.9's standalone overlay (kubeflow/trainer, formerly
# kubeflow/training-operator, manifests/overlays/standalone at tag v1.9.x; manifests/base/crds).
KUSTOMIZE_INSTALLS: dict[str, tuple[str, ...]] = {
    "kubeflow/trainer//manifests/overlays/standalone": ("kubeflow.org",),
    "kubeflow/training-operator": ("kubeflow.org",),
}


def chart_name(res: Any) -> str:
    """A Helm release's or chart's chart, by the last segment of its reference ("" unknown)."""
    chart = res.inputs.get("chart")
    return chart.rstrip("/").rsplit("/", 1)[-1] if isinstance(chart, str) else ""


def _installed_groups(res: Any) -> tuple[str, ...]:
    if res.type == CRD:
        group = (res.inputs.get("spec") or {}).get("group")
        return (group,) if isinstance(group, str) else ()
    if res.type in (HELM_RELEASE, CHART_V4):
        return INSTALLS.get(chart_name(res), ())
    if res.type == KUSTOMIZE:
        directory = str(res.inputs.get("directory") or "")
        for marker, groups in KUSTOMIZE_INSTALLS.items():
            if marker in directory:
                return groups
    return ()


def installers(resources: Iterable[Any]) -> dict[str, list[str]]:
    """API group -> URNs of the resources in the plan that install its CRDs."""
    out: dict[str, list[str]] = {}
    for res in resources:
        for group in _installed_groups(res):
            out.setdefault(group, []).append(res.urn)
    return out


After = Callable[[str], frozenset[str]]  # a URN -> the URNs its resource is created after


def creation_order(resources: Iterable[Any]) -> After:
    """What each resource is created after: its recorded dependencies and parents, closed
    (each answer computed once)."""
    edges = {
        r.urn: [*(r.options.get("dependencies") or []), *([r.parent] if r.parent else [])]
        for r in resources
    }

    @functools.cache
    def after(urn: str) -> frozenset[str]:
        seen: set[str] = set()
        todo = list(edges.get(urn, []))
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo += edges.get(u, [])
        return frozenset(seen)

    return after


def _namespace_makers(resources: list[Any]) -> dict[str, list[str]]:
    """namespace name -> URNs that create it (a Namespace object, a release that creates it)."""
    out: dict[str, list[str]] = {}
    for res in resources:
        if res.type == NAMESPACE:
            name = (res.inputs.get("metadata") or {}).get("name")
            if isinstance(name, str) and name != UNKNOWN:
                out.setdefault(name, []).append(res.urn)
        elif res.type == HELM_RELEASE and res.inputs.get("createNamespace") is True:
            ns = res.inputs.get("namespace")
            if isinstance(ns, str):
                out.setdefault(ns, []).append(res.urn)
    return out


def urn_name(urn: str) -> str:
    """A URN's last part, the resource's name as findings show it
    (`urn:pulumi:dev::trainforge::aws:iam/role:Role::node-role` -> `node-role`; the diff's
    type::name is plan.sides.urn_type_name)."""
    return urn.rsplit("::", 1)[-1]


def check(ctx: PlanContext) -> CheckResult:
    # not the objects a program sends once the stack is up (`plan --sdk`): Pulumi creates none
    resources = [r for r in ctx.inventory.resources if not r.urn.startswith(SENT_URN)]
    by_urn = {r.urn: r for r in resources}
    after_of = creation_order(resources)
    crd_makers = installers(resources)
    ns_makers = _namespace_makers(resources)
    findings: list[Finding] = []
    lines: list[str] = []
    assumed: dict[str, set[str]] = {}
    foreign_ns: set[str] = set()
    checked = 0

    def refuse(res: Any, rule: str, message: str) -> None:
        findings.append(Finding.on(res, rule, message, RULES[rule]))

    for obj in ctx.objects:
        res = by_urn.get(obj.urn)
        if res is None:
            continue
        checked += 1
        group = str(obj.doc.get("apiVersion") or "").rpartition("/")[0]  # "" for core v1
        if group not in builtin_groups():
            makers = crd_makers.get(group, [])
            if not makers:
                assumed.setdefault(group, set()).add(obj.kind)
            elif not set(makers) & after_of(res.urn):
                refuse(
                    res,
                    CRD_RULE,
                    f"{obj.kind} {res.name} may be created before its CRD ({group}): it does "
                    f"not wait for {', '.join(urn_name(m) for m in makers)}, which installs it",
                )
    for res in resources:
        if res.type != HELM_RELEASE and not any(o.urn == res.urn for o in ctx.objects):
            continue
        if res.type == HELM_RELEASE:  # the namespace it is created in, from which input
            ns, prop = res.inputs.get("namespace"), "namespace"
        else:
            ns, prop = get(res.inputs, "metadata", "namespace"), "metadata"
        if not isinstance(ns, str) or ns in BUILTIN_NAMESPACES:
            continue
        if res.type == HELM_RELEASE and res.inputs.get("createNamespace") is True:
            continue
        after = after_of(res.urn)
        if ns == UNKNOWN:
            deps = res.dependencies.get(prop, [])
            if not any(by_urn.get(d) is not None and by_urn[d].type == NAMESPACE for d in deps):
                lines.append(f"{res.name}: namespace unknown at preview (not checked)")
            continue
        makers = [m for m in ns_makers.get(ns, []) if m != res.urn]
        if not makers:
            foreign_ns.add(ns)
        elif not set(makers) & after:
            refuse(
                res,
                NAMESPACE_RULE,
                f"{res.name} may be created before namespace {ns!r}: it does not wait for "
                f"{', '.join(urn_name(m) for m in makers)}",
            )
    lines.insert(
        0,
        f"{checked} objects checked: each waits for its CRD's installer and its namespace"
        + (f"; {len(findings)} do not" if findings else ""),
    )
    for group, kinds in sorted(assumed.items()):
        lines.append(
            f"{', '.join(sorted(kinds))} ({group}): no resource in this stack installs the CRD; "
            "the cluster must already have it"
        )
    if foreign_ns:
        lines.append(
            f"namespaces {', '.join(sorted(foreign_ns))}: nothing in this stack creates them; "
            "the cluster must already have them"
        )
    data = {
        "installers": {g: [urn_name(u) for u in us] for g, us in sorted(crd_makers.items())},
        "assumed": {g: sorted(k) for g, k in sorted(assumed.items())},
        "namespaces_assumed": sorted(foreign_ns),
    }
    return CheckResult(findings, [Section("Creation order (CRDs and namespaces)", lines, data)])
