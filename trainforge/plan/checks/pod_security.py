"""Plan check: every pod the plan's objects would create passes its namespace's Pod Security
admission level (core/pod_security.py, k8s.io/pod-security-admission v0.35.6).

Why: a namespace labelled `pod-security.kubernetes.io/enforce: baseline` (the teams',
fsx-admin's) or `restricted` (acceptance, the platform's own) refuses a Pod that fails a check
of that level at creation; a workload object is stored with a warning, and its controller
(the Job controller, the training operator, JobSet) is refused each Pod, forever: the job is
admitted by Kueue, holds its quota and never starts. Every namespace the program emits is
read with its labels (incl. `enforce-version`); every pod template of every object in one is
judged with the one pod-template walker (`jobs.backends.pod_templates`: a TrainJob's pods as
its runtime builds them; a PyTorchJob Worker's with the operator's `init-pytorch` container,
`pytorchjob.operator_template`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainforge.core import pod_security
from trainforge.core.pods import PodTemplate
from trainforge.jobs import pytorchjob
from trainforge.jobs.backends import pod_templates
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.job_backends import runtime_docs

RULE = "TRAINFORGE_POD_SECURITY"
RULES = {
    RULE: (
        "change the pod template to pass its namespace's Pod Security level (the finding "
        "names the check, the field and what passes); a namespace's level is the platform's "
        "isolation of its tenants and is not lowered for one job"
    )
}
TITLE = "Pod Security admission"
# A PyTorchJob refused only for the operator's `init-pytorch` (its securityContext is not the
# job's to set): docs/configuration.md, teams[].podSecurity
OPERATOR_FIX = (
    "the training operator adds `init-pytorch` (no securityContext) to the Workers of a "
    "Master/Worker PyTorchJob, which `restricted` refuses: enforce `baseline` for this team "
    "(trainforge:teams[].podSecurity), or run the job elastic (Worker-only, preset: elastic) "
    "or with backend: trainjob or indexed-job"
)


def namespaces(ctx: PlanContext) -> dict[str, pod_security.Policy]:
    """Every namespace the program emits -> its enforce policy (from its labels)."""
    out = {}
    for obj in ctx.objects:
        if obj.kind == "Namespace" and obj.doc.get("apiVersion") == "v1":
            labels = (obj.doc.get("metadata") or {}).get("labels")
            out[obj.obj_name] = pod_security.policy(labels if isinstance(labels, dict) else {})
    return out


def _controller(obj: Any) -> str:
    return "the CronJob's Jobs" if obj.kind == "CronJob" else f"the {obj.kind}'s controller"


@dataclass(frozen=True)
class Judged:
    """One pod template of an object that its namespace's policy refuses: the refusals and
    the fix, as the plan's finding and `trainforge why` both say them."""

    template: PodTemplate
    refusals: list[pod_security.Refusal]
    fix: str

    @property
    def checks(self) -> str:
        """Each check it fails: `id (field): reason (detail)`, joined by "; "."""
        return "; ".join(f"{r.check} ({r.field}): {r.reason} ({r.detail})" for r in self.refusals)

    @property
    def where(self) -> str:
        t = self.template
        return t.spec_path if not t.name else f"{t.label}, {t.spec_path}"


def judge(
    doc: Mapping[str, Any],
    pol: pod_security.Policy,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[int, list[Judged]]:
    """(how many pod templates `doc` has, the ones `pol` refuses): every pod template as its
    controller creates the pods (`pod_templates`; a PyTorchJob Worker with the operator's
    `init-pytorch`), judged by the one model. The plan's check and `why` read it."""
    n, out = 0, []
    is_pytorchjob = (
        doc.get("kind") == pytorchjob.KIND and doc.get("apiVersion") == pytorchjob.API_VERSION
    )
    for t in pod_templates(doc, runtimes=runtimes):
        n += 1
        template = (
            pytorchjob.operator_template(doc, t.name, t.template) if is_pytorchjob else t.template
        )
        refusals = pod_security.evaluate(pol, template)
        if not refusals:
            continue
        fix = "; ".join(dict.fromkeys(r.fix for r in refusals))
        if template is not t.template and not pod_security.evaluate(pol, t.template):
            fix = OPERATOR_FIX  # only the operator's own container is refused
        out.append(Judged(t, refusals, fix))
    return n, out


def check(ctx: PlanContext) -> CheckResult:
    policies = namespaces(ctx)
    if not policies:
        return CheckResult()
    findings: list[Finding] = []
    judged: dict[str, int] = {ns: 0 for ns in policies}
    refused: dict[str, int] = {ns: 0 for ns in policies}
    runtimes = runtime_docs(ctx)
    for obj in ctx.objects:
        ns = obj.namespace
        if ns not in policies:
            continue  # cluster-scoped, or a namespace the program does not label
        pol = policies[ns]
        n, found = judge(obj.doc, pol, runtimes)
        judged[ns] += n
        refused[ns] += len(found)
        for j in found:
            msg = (
                f"{obj.ident} ({j.where}): namespace {ns} enforces Pod Security {pol}, which "
                f"refuses its pods: {j.checks}. The API server answers "
                f"`{pod_security.message(pol, j.refusals)}`; {_controller(obj)} is refused "
                "every pod (FailedCreate) and it never runs"
            )
            findings.append(Finding(obj.ident, RULE, msg, j.fix, urn=obj.urn, names=obj.names))
    lines = []
    for ns, pol in sorted(policies.items()):
        note = f" ({pol.problem})" if pol.problem else ""
        n = judged[ns]
        if pol.level == "privileged":
            verdict = "admits every pod"
        elif not n:
            verdict = (
                "no pod template among the plan's objects (the pods of Helm releases and "
                "kustomize overlays are not rendered here: not judged)"
            )
        else:
            verdict = f"{n} pod template{'s' * (n != 1)}, " + (
                f"{refused[ns]} refused" if refused[ns] else "all admitted"
            )
        lines.append(f"{ns}: enforce {pol}{note}: {verdict}")
    data = {
        ns: {"enforce": str(pol), "templates": judged[ns], "refused": refused[ns]}
        for ns, pol in policies.items()
    }
    return CheckResult(findings, [Section(TITLE, lines, data)])
