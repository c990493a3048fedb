"""Plan check: the existence rehearsal. Every Secret, ConfigMap, ServiceAccount and claim a pod
or a chart value names is created by the stack before what needs it, or the plan says who must
create it, where and with which keys. A reference is only a string, which no schema, policy or
ordering check sees. What counts as a reference, "before" (`ordering.creation_order`) and each
verdict: docs/rehearsals.md, "Existence (what pods and charts name)".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trainforge.core.pods import containers
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.checks.ordering import After, creation_order, urn_name
from trainforge.plan.resource_types import CHART_V4, HELM_RELEASE
from trainforge.plan.runner import SECRET, UNKNOWN

MISSING = "EXIST_MISSING"
ORDER = "EXIST_ORDER"
KEYS = "EXIST_KEYS"
RULES = {
    MISSING: "create the object in the stack (a Secret with a pulumi-random password for "
    "generated credentials) and make its consumer depend on it; or create it yourself, in the "
    "namespace and with the keys the finding names, before `pulumi up`",
    ORDER: "make the consumer wait for the object: take its name from the object's output "
    "(metadata.name) or depends_on it",
    KEYS: "put the key the consumer reads into the object (data or stringData), or read a key "
    "it has",
}
KINDS = ("Secret", "ConfigMap", "ServiceAccount", "PersistentVolumeClaim")
# What Kubernetes itself creates in every namespace: the token controller's ServiceAccount
# and the root CA publisher's ConfigMap (kube-controller-manager, since 1.20).
BUILTIN = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}

# Chart values that name an existing object, by the value's key: its kind (the charts'
# values.yaml at the versions pinned in trainforge.core.versions: grafana 12.11.1 as a subchart
# of kube-prometheus-stack, `admin.existingSecret`, `persistence.existingClaim`; Bitnami's and
# most charts' spelling). Unset or empty names nothing (the chart makes its own).
CHART_REFERENCES = {
    "existingSecret": "Secret",
    "existingSecretName": "Secret",
    "existingClaim": "PersistentVolumeClaim",
    "existingConfigMap": "ConfigMap",
}


@dataclass
class Ref:
    """One object a consumer needs: kind, namespace, name, the keys it reads, and where."""

    kind: str
    namespace: str
    name: str
    where: str  # e.g. "Deployment mlflow/mlflow: volumes[auth].secret" or "values grafana.admin"
    keys: set[str] = field(default_factory=set)

    @property
    def ident(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass
class Producer:
    urn: str
    keys: set[str] | None  # None: not known at preview (a masked Secret's data) or not keyed


def _key_set(doc: dict[str, Any]) -> set[str] | None:
    """The keys of an object's data; None where one is unknown at preview or masked."""
    vals = [doc[p] for p in ("data", "stringData", "binaryData") if doc.get(p) is not None]
    if any(not isinstance(v, dict) or SECRET in v or UNKNOWN in v for v in vals):
        return None
    return {str(k) for v in vals for k in v}


def producers(ctx: PlanContext) -> dict[tuple[str, str, str], Producer]:
    """(kind, namespace, name) -> the plan's resource that creates it, with its keys (a Secret's
    data unknown at preview, a generated password: from the stand-in run, where there is one)."""
    out: dict[tuple[str, str, str], Producer] = {}
    standin: dict[str, Any] | None = None
    for obj in ctx.objects:
        if obj.kind not in KINDS or not obj.namespace:
            continue
        keys = None
        if obj.kind in ("Secret", "ConfigMap"):
            keys = _key_set(obj.doc)
            if keys is None:
                if standin is None:
                    inv = ctx.standin_inventory()
                    standin = inv.by_urn() if inv is not None else {}
                rec = standin.get(obj.urn)
                if rec is not None:
                    keys = _key_set({**rec.inputs, **rec.revealed})
        out[(obj.kind, obj.namespace, obj.obj_name)] = Producer(obj.urn, keys)
    return out


def _named(holder: dict[str, Any], suffix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, reference) of the required Secret and ConfigMap references a volume source, env
    value source or envFrom entry holds (`secret<suffix>`, `configMap<suffix>`)."""
    for prop, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
        ref = holder.get(prop + suffix)
        if isinstance(ref, dict) and ref.get("optional") is not True:
            yield kind, ref


def pod_refs(pod: dict[str, Any], namespace: str, what: str) -> Iterator[Ref]:
    """Every required reference of one pod spec (optional ones are left out)."""
    sa = pod.get("serviceAccountName") or pod.get("serviceAccount") or "default"
    yield Ref("ServiceAccount", namespace, str(sa), f"{what}: serviceAccountName")
    for vol in pod.get("volumes") or []:
        at = f"{what}: volume {vol.get('name')}"
        for src in [vol, *((vol.get("projected") or {}).get("sources") or [])]:
            for kind, ref in _named(src):
                name = ref.get("secretName") or ref.get("name")  # a projected one: name
                keys = {i["key"] for i in ref.get("items") or [] if "key" in i}
                yield Ref(kind, namespace, str(name), at, keys)
        claim = vol.get("persistentVolumeClaim")
        if isinstance(claim, dict):
            yield Ref("PersistentVolumeClaim", namespace, str(claim.get("claimName")), at)
    for c in containers(pod):
        at = f"{what}: container {c.get('name')}"
        for env in c.get("env") or []:
            for kind, ref in _named(env.get("valueFrom") or {}, "KeyRef"):
                keys = {str(ref["key"])} if ref.get("key") else set()
                where = f"{at} env {env.get('name')}"
                yield Ref(kind, namespace, str(ref.get("name")), where, keys)
        for env in c.get("envFrom") or []:
            for kind, ref in _named(env, "Ref"):
                yield Ref(kind, namespace, str(ref.get("name")), f"{at} envFrom")


def _pods(obj: Any, runtimes: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """(pod spec, where) of every pod an object runs (a TrainJob's: built from `runtimes`)."""
    from trainforge.jobs.backends import pod_templates, shape  # noqa: PLC0415

    declared = shape(obj.doc)
    built = declared is not None and declared.build is not None  # pods its controller builds
    if not built and not obj.namespace:
        return  # a cluster-scoped template (a runtime): the pods of its TrainJobs count
    for t in pod_templates(obj.doc, runtimes=runtimes):
        at = f"{obj.ident} pod" if built else f"{obj.namespace}/{obj.obj_name} ({t.spec_path})"
        yield t.spec, f"{obj.kind} {at}"


def value_refs(values: Any, namespace: str, what: str, path: str = "") -> Iterator[Ref]:
    """References a release's values make (`CHART_REFERENCES`), with the keys named beside."""
    if isinstance(values, dict):
        ns = values.get("namespaceOverride") or namespace
        ns = ns if isinstance(ns, str) else namespace
        for key, kind in CHART_REFERENCES.items():
            name = values.get(key)
            if isinstance(name, str) and name and name != UNKNOWN:
                keyed = (v for k, v in values.items() if k.endswith("Key"))
                keys = {v for v in keyed if isinstance(v, str) and v}
                yield Ref(kind, ns, name, f"{what}: values {path + '.' if path else ''}{key}", keys)
        for k, v in values.items():
            if k not in CHART_REFERENCES:
                yield from value_refs(v, ns, what, f"{path}.{k}" if path else str(k))


def references(ctx: PlanContext) -> list[tuple[str, Ref]]:
    """(consumer URN, reference) for every pod of every object and every release's values."""
    out: list[tuple[str, Ref]] = []
    for obj in ctx.objects:
        for pod, what in _pods(obj, runtime_docs(ctx)):
            ns = obj.namespace or ""
            out += [(obj.urn, r) for r in pod_refs(pod, ns, what)]
    for res in ctx.inventory.resources:
        if res.type not in (HELM_RELEASE, CHART_V4):
            continue
        ns = res.inputs.get("namespace")
        ns = "default" if ns is None else ns
        what = f"release {res.inputs.get('name') or res.name} ({res.inputs.get('chart')})"
        # values with a secret inside are masked whole in `inputs`: read the names unmasked
        values = res.revealed.get("values", res.inputs.get("values")) or {}
        out += [(res.urn, r) for r in value_refs(values, ns, what)]
    return out


def _problem(urn: str, ref: Ref, producer: Producer | None, after: After) -> tuple[str, str]:
    """(rule, message) when the consumer `urn` cannot rely on `ref`; ("", "") when it can."""
    if producer is None:
        keys = ", ".join(sorted(ref.keys))
        with_keys = f" with keys {keys}" if keys else ""
        return MISSING, (
            f"{ref.kind} {ref.name!r} in namespace {ref.namespace!r}, which {ref.where} "
            f"needs, is created by nothing in this stack: the user must create it there"
            f"{with_keys} before `pulumi up`"
        )
    if producer.urn != urn and producer.urn not in after(urn):
        return ORDER, (
            f"{ref.where} needs {ref.kind} {ref.namespace}/{ref.name}, but "
            f"{urn_name(urn)} does not wait for {urn_name(producer.urn)}, which creates it: "
            "on a fresh stack it may start first"
        )
    absent = sorted(ref.keys - producer.keys) if producer.keys is not None else []
    if absent:
        return KEYS, (
            f"{ref.where} reads key(s) {', '.join(absent)} of {ref.kind} "
            f"{ref.namespace}/{ref.name}, which has only "
            f"{', '.join(sorted(producer.keys or ())) or 'no keys'}"
        )
    return "", ""


def check(ctx: PlanContext) -> CheckResult:
    made = producers(ctx)
    after = creation_order(ctx.inventory.resources)
    findings: list[Finding] = []
    unknown: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    ok = 0
    missing_rows: list[dict[str, Any]] = []
    for urn, ref in references(ctx):
        if UNKNOWN in (ref.namespace, ref.name):
            unknown.append(f"{ref.where}: {ref.kind} name or namespace unknown at preview")
            continue
        dedup = (urn, ref.ident, ",".join(sorted(ref.keys)))
        if dedup in seen:
            continue
        seen.add(dedup)
        rule, message = "", ""
        if (ref.kind, ref.name) not in BUILTIN:
            producer = made.get((ref.kind, ref.namespace, ref.name))
            rule, message = _problem(urn, ref, producer, after)
        if not rule:
            ok += 1
            continue
        names = frozenset({ref.ident, urn_name(urn)})
        findings.append(Finding(ref.ident, rule, message, RULES[rule], urn=urn, names=names))
        if rule == MISSING:
            missing_rows.append(
                {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name,
                 "keys": sorted(ref.keys), "needed_by": ref.where}
            )  # fmt: skip
    lines = [
        f"{len(seen)} references (Secrets, ConfigMaps, ServiceAccounts, claims) of pods and "
        f"chart values: {ok} created by the stack before their consumer or by Kubernetes"
        + (f"; {len(findings)} not" if findings else "")
    ]
    lines += sorted(set(unknown))
    data = {"references": len(seen), "ok": ok, "user_must_create": missing_rows}
    return CheckResult(findings, [Section("Existence (what pods and charts name)", lines, data)])
