"""Plan check: each object is created after the resources that make its kind and namespace exist
(on a fresh stack Pulumi creates in parallel what waits for nothing; an existing stack hides
it), by the engine's order from the recorded dependencies and parents (docs/rehearsals.md,
"Creation order (CRDs and namespaces)").
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

# chart (last path segment of its reference) -> API groups whose CRDs it installs, read at the
# versions pinned in trainforge.core.versions: karpenter and karpenter-crd 1.x ship crds/;
# kube-prometheus-stack bundles the crds subchart; kueue 0.19 renders templates/crd;
# kubeflow-trainer 2.2.1 ships crds/ (its bundled JobSet off), jobset 0.12.0 ships crds/ (its
# own chart here); the training operator's chart carries kubeflow.org.
KARPENTER = ("karpenter.sh", "karpenter.k8s.aws")
INSTALLS: dict[str, tuple[str, ...]] = {
    "karpenter": KARPENTER, "karpenter-crd": KARPENTER,
    "kube-prometheus-stack": ("monitoring.coreos.com",), "kueue": ("kueue.x-k8s.io",),
    "kubeflow-trainer": ("trainer.kubeflow.org",), "jobset": ("jobset.x-k8s.io",),
    "training-operator": ("kubeflow.org",),
}  # fmt: skip
# kustomize directory (a substring of its URL or path) -> API groups whose CRDs it installs:
# the training operator v1.9's standalone overlay (kubeflow/trainer, formerly
# kubeflow/training-operator, manifests/overlays/standalone at tag v1.9.x; manifests/base/crds).
KUSTOMIZE_INSTALLS = dict.fromkeys(
    ("kubeflow/trainer//manifests/overlays/standalone", "kubeflow/training-operator"),
    ("kubeflow.org",),
)


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
    directory = str(res.inputs.get("directory") or "") if res.type == KUSTOMIZE else None
    return next((g for m, g in KUSTOMIZE_INSTALLS.items() if directory and m in directory), ())


def installers(resources: Iterable[Any]) -> dict[str, list[str]]:
    """API group -> URNs of the resources in the plan that install its CRDs."""
    out: dict[str, list[str]] = {}
    for res, group in ((r, g) for r in resources for g in _installed_groups(r)):
        out.setdefault(group, []).append(res.urn)
    return out


After = Callable[[str], frozenset[str]]  # a URN -> the URNs its resource is created after


def creation_order(resources: Iterable[Any]) -> After:
    """What each resource is created after: its recorded dependencies and parents, closed."""
    edges = {
        r.urn: [*(r.options.get("dependencies") or []), *([r.parent] if r.parent else [])]
        for r in resources
    }

    @functools.cache
    def after(urn: str) -> frozenset[str]:
        seen: set[str] = set()
        todo = list(edges.get(urn, []))
        while todo:
            if (u := todo.pop()) not in seen:
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
    """A URN's last part, the resource's name as findings show it (`...:Role::node-role` ->
    `node-role`; the diff's type::name is plan.sides.urn_type_name)."""
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
    for obj in ctx.objects:
        if (res := by_urn.get(obj.urn)) is None:
            continue
        checked += 1
        group = str(obj.doc.get("apiVersion") or "").rpartition("/")[0]  # "" for core v1
        if group not in builtin_groups():
            if not (makers := crd_makers.get(group, [])):
                assumed.setdefault(group, set()).add(obj.kind)
            elif not set(makers) & after_of(res.urn):
                message = (
                    f"{obj.kind} {res.name} may be created before its CRD ({group}): it does "
                    f"not wait for {', '.join(urn_name(m) for m in makers)}, which installs it"
                )
                findings.append(Finding.on(res, CRD_RULE, message, RULES[CRD_RULE]))
    objects = {o.urn for o in ctx.objects}
    for res in resources:
        release = res.type == HELM_RELEASE  # the namespace it is created in, from which input
        if not release and res.urn not in objects:
            continue
        prop = "namespace" if release else "metadata"
        ns = res.inputs.get("namespace") if release else get(res.inputs, "metadata", "namespace")
        if not isinstance(ns, str) or ns in BUILTIN_NAMESPACES:
            continue
        if release and res.inputs.get("createNamespace") is True:
            continue
        if ns == UNKNOWN:
            deps = res.dependencies.get(prop, [])
            if not any(by_urn.get(d) is not None and by_urn[d].type == NAMESPACE for d in deps):
                lines.append(f"{res.name}: namespace unknown at preview (not checked)")
            continue
        if not (makers := [m for m in ns_makers.get(ns, []) if m != res.urn]):
            foreign_ns.add(ns)
        elif not set(makers) & after_of(res.urn):
            message = (
                f"{res.name} may be created before namespace {ns!r}: it does not wait for "
                f"{', '.join(urn_name(m) for m in makers)}"
            )
            findings.append(Finding.on(res, NAMESPACE_RULE, message, RULES[NAMESPACE_RULE]))
    head = f"{checked} objects checked: each waits for its CRD's installer and its namespace"
    lines.insert(0, head + (f"; {len(findings)} do not" if findings else ""))
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
