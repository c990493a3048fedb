"""Plan check: every pod and Service the stack declares, judged by the
ValidatingAdmissionPolicies the stack declares for Pods and Services, as the API server would
judge it on create.

Why: the teams' policies (platform/team_identity.py) deny a pod in a team namespace that runs
as another UID/GID or names a PriorityClass, and a team Service other than a ClusterIP one;
the controller that creates the pod (the training operator, JobSet, the Job controller) is
what sees the denial, in its events, after `pulumi up` said
the job was created. The plan evaluates the policies' own CEL expressions, read from the
planned objects (one model: what is applied is what is judged), on each pod template of each
workload in a namespace a binding selects, and on each Service there, and names the job, its
replica (or the Service) and the message: `messageExpression`'s where it gives one, as the API
server words it.

Semantics: k8s.io/apiserver v0.35.7 pkg/admission/plugin/policy/validating (Kubernetes
1.35): a binding's `matchResources.namespaceSelector` selects by the namespace's labels (the
API server adds `kubernetes.io/metadata.name`); a validation that is false denies with
"ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <message>";
one that errors denies under `failurePolicy: Fail` (the default). Only `object` is bound
(a pod on create has no oldObject, and the platform's policies read nothing else): a policy
that reads other variables does not compile and is reported, never passed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from trainforge.core.labels import NAMESPACE_NAME, selects
from trainforge.core.pods import get
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.manifests import K8sObject

RULE = "TRAINFORGE_ADMISSION_DENIED"
FIX = (
    "make the pod template satisfy the policy (a team's pods run as the team's uid and gid: "
    "leave runAsUser, runAsGroup, fsGroup and supplementalGroups to the platform or set the "
    "team's; name no priorityClassName), or change the policy"
)
SERVICE_FIX = (
    "make the Service a ClusterIP one (headless: clusterIP None) without externalIPs, or "
    "change the policy"
)
RULES = {RULE: FIX}
TITLE = "Admission policies on the stack's pods and Services"
# The core resources whose creation the check judges: a workload's pods, a Service itself
RESOURCES = ("pods", "services")
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
# Kinds that are templates for pods made elsewhere, judged where the pods are made
TEMPLATES_ONLY = frozenset({"TrainingRuntime", "ClusterTrainingRuntime", "PodTemplate"})


class PolicyError(Exception):
    """An expression the evaluator cannot compile: reported, never passed."""


@functools.cache
def _env() -> Any:
    from cel_expr_python import cel  # noqa: PLC0415 - only when a policy is evaluated
    from cel_expr_python.ext import ext_strings  # noqa: PLC0415

    return cel.NewEnv(variables={"object": cel.Type.DYN}, extensions=[ext_strings.ExtStrings()])


@functools.cache
def _program(expression: str) -> Any:
    try:
        return _env().compile(expression)
    except Exception as e:  # noqa: BLE001 - cel-cpp raises a bare error with the reason
        raise PolicyError(f"compile error: {e}") from e


def _ints(value: Any) -> Any:
    """A recorded number as the API server binds an integer field: Pulumi sends numbers as
    doubles, the Pod schema's ids are int64."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def denials(spec: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """The messages with which a policy of `spec` denies `pod` (a Pod object); an expression
    that errors or does not compile denies too (failurePolicy Fail), with why."""
    data = {"object": _ints(dict(pod))}
    out = []
    for v in spec.get("validations") or []:
        expression = str(v.get("expression", ""))
        try:
            result = _program(expression).eval(data=data)
        except PolicyError as e:
            out.append(f"{e} in {expression!r}")
            continue
        if result.type().name() == "ERROR":
            out.append(f"expression {expression!r} errors: {result.value()}")
        elif result.value() is not True:
            out.append(_message(v, data) or f"failed expression: {expression}")
    return out


def _message(validation: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    """A denied validation's message as the API server words it: `messageExpression`'s value
    where it is a non-empty one-line string, else `message` (upstream falls back to it when
    the expression errors; a messageExpression that does not compile is reported)."""
    text = str(validation.get("message") or "").strip()
    if expression := validation.get("messageExpression"):
        try:
            result = _program(str(expression)).eval(data=data)
        except PolicyError as e:
            return f"{e} in messageExpression {expression!r}"
        value = result.value()
        if isinstance(value, str) and value.strip() and "\n" not in value:
            return value.strip()
    return text


def _binds(binding: K8sObject, labels: Mapping[str, str]) -> bool:
    """Whether a binding's namespaceSelector selects a namespace with `labels` (absent: the
    API's default, the empty selector, which selects every namespace)."""
    return selects(get(binding.doc, "spec", "matchResources", "namespaceSelector") or {}, labels)


def _creates(spec: Mapping[str, Any], resource: str) -> bool:
    """Whether a policy judges the creation of core `resource` (pods, services)."""
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    return any(
        "" in (r.get("apiGroups") or [])
        and resource in (r.get("resources") or [])
        and {"CREATE", "*"} & set(r.get("operations") or [])
        for r in rules
    )


def _namespace_labels(objects: Iterable[K8sObject]) -> dict[str, dict[str, str]]:
    """Each planned Namespace's labels, with the one the API server adds."""
    return {
        o.obj_name: {**(get(o.doc, "metadata", "labels") or {}), NAMESPACE_NAME: o.obj_name}
        for o in objects
        if o.kind == "Namespace"
    }


def check(ctx: PlanContext) -> CheckResult:
    from trainforge.jobs.trainjob import runtimes_in  # noqa: PLC0415 - plain data

    policies = {o.obj_name: o.doc.get("spec") or {} for o in ctx.objects if o.kind == POLICY}
    judges = {n: {r for r in RESOURCES if _creates(spec, r)} for n, spec in policies.items()}
    bindings = [o for o in ctx.objects if o.kind == BINDING]
    bindings = [b for b in bindings if judges.get((b.doc.get("spec") or {}).get("policyName"))]
    if not bindings:
        return CheckResult()
    namespaces = _namespace_labels(ctx.objects)
    runtimes = runtimes_in(o.doc for o in ctx.objects)
    findings, judged = [], dict.fromkeys(RESOURCES, 0)
    for obj in ctx.objects:
        ns = obj.namespace
        if ns is None or obj.kind in TEMPLATES_ONLY:
            continue
        labels = namespaces.get(ns, {NAMESPACE_NAME: ns})
        if not (mine := [b for b in bindings if _binds(b, labels)]):
            continue
        for resource, what, judged_obj in _judged(obj, ns, runtimes):
            judged[resource] += 1
            for b in mine:
                policy = b.doc["spec"]["policyName"]
                if resource not in judges[policy]:
                    continue
                for why in denials(policies[policy], judged_obj):
                    msg = (
                        f"{what}: ValidatingAdmissionPolicy '{policy}' with binding "
                        f"'{b.obj_name}' denied request: {why}"
                    )
                    fix = FIX if resource == "pods" else SERVICE_FIX
                    findings.append(Finding(obj.ident, RULE, msg, fix, obj.urn, obj.names))
    n = len(bindings)
    line = (
        f"{n} polic{'y' if n == 1 else 'ies'} on Pods and Services: {judged['pods']} pod "
        f"template(s) and {judged['services']} Service(s) judged, {len(findings)} denial(s)"
    )
    return CheckResult(findings, [Section(TITLE, [line], {"judged": judged["pods"], **judged})])


def _judged(obj: K8sObject, ns: str, runtimes: Any) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
    """What the API server judges of a planned object: a Service itself, or the Pod each of
    a workload's pod templates makes (resource, how a finding names it, the object)."""
    from trainforge.jobs.backends import pod_templates  # noqa: PLC0415 - plain data

    if obj.kind == "Service":
        yield "services", obj.label, obj.doc
        return
    for t in pod_templates(obj.doc, runtimes=runtimes):
        meta = {**(t.template.get("metadata") or {}), "namespace": ns}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t.spec}
        yield "pods", f"{obj.label} {t.name + ' ' if t.name else ''}pods", pod
