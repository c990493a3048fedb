"""Plan check: which backend runs each job, and whether a TrainJob's pods are the job's: the
pod Kubeflow Trainer builds from the job's runtime (`trainjob.built_pod`) against the pod the
job asked for (`DeclaredJob.emitted.pod`), so a hand-edited runtime or a field the Trainer
drops shows in the plan, not as pods without their claim or GPUs after `pulumi up`.
"""

from __future__ import annotations

from typing import Any

from trainforge.jobs import trainjob
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

RULE = "TRAINJOB_POD_MISMATCH"
RULES = {
    RULE: "make the ClusterTrainingRuntime the TrainJob names carry what the platform's "
    "runtime carries (trainforge.jobs.trainjob.runtime_manifests), or move the job to "
    "another backend"
}
# Pod fields the Trainer must reproduce exactly (command and env may hold Pulumi Outputs in a
# preview, so env is compared by name below).
_POD_FIELDS = (
    "serviceAccountName", "terminationGracePeriodSeconds", "securityContext", "nodeSelector",
    "tolerations", "volumes", "automountServiceAccountToken", "enableServiceLinks",
    "shareProcessNamespace",
)  # fmt: skip
_CONTAINER_FIELDS = (
    "resources", "volumeMounts", "securityContext", "imagePullPolicy", "workingDir"
)  # fmt: skip


def _differences(wanted: dict[str, Any], built: dict[str, Any]) -> list[str]:
    out = [f for f in _POD_FIELDS if wanted["spec"].get(f) != built["spec"].get(f)]
    want_c, got_c = wanted["spec"]["containers"][0], built["spec"]["containers"][0]
    out += [f"container {f}" for f in _CONTAINER_FIELDS if want_c.get(f) != got_c.get(f)]
    if missing := {e["name"] for e in want_c["env"]} - {e["name"] for e in got_c.get("env") or []}:
        out.append(f"env {sorted(missing)}")
    ports = {p.get("name"): p.get("containerPort") for p in got_c.get("ports") or []}
    out += [
        f"port {p.get('name')}"
        for p in want_c.get("ports") or []
        if ports.get(p.get("name")) != p.get("containerPort")
    ]
    labels = wanted["metadata"].get("labels") or {}
    if not labels.items() <= (built["metadata"].get("labels") or {}).items():
        out.append("labels")
    return out


def runtime_docs(ctx: PlanContext) -> dict[str, Any]:
    """The runtimes a TrainJob of this plan can name (`trainjob.runtimes_in` of its objects),
    once per plan (`ctx.memo`): what every builder of a TrainJob's pod reads."""
    if "runtime_docs" not in ctx.memo:
        ctx.memo["runtime_docs"] = trainjob.runtimes_in(o.doc for o in ctx.objects)
    return ctx.memo["runtime_docs"]


def check(ctx: PlanContext) -> CheckResult:
    declared = ctx.declared
    if declared is None or not declared.jobs:
        return CheckResult()
    findings: list[Finding] = []
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for job in declared.jobs:
        spec, emitted, ns = job.spec, job.emitted, job.target.namespace
        wl = emitted.workload
        ident = f"{ns}/{wl['kind']}/{wl['metadata']['name']}"
        note = ""
        if emitted.backend == trainjob.BACKEND:
            name = wl["spec"]["runtimeRef"]["name"]
            note = f"runtime {name}"
            built = trainjob.built_pod(wl, runtime_docs(ctx))
            if built is None:
                note += " (not in this plan: checked by the cluster's webhook only)"
            elif diff := _differences(emitted.pod, built):
                message = (
                    f"the pod Trainer builds from runtime {name!r} differs from the job's "
                    f"pod in: {', '.join(diff)}"
                )
                names = frozenset({job.resource_name})
                findings.append(Finding(ident, RULE, message, RULES[RULE], names=names))
        elif emitted.service is not None:
            note = f"headless Service {emitted.service['metadata']['name']}"
        lines.append(f"{ns}/{spec.name}: {emitted.backend} -> {wl['kind']} {note}")
        data.append(
            {"job": spec.name, "namespace": ns, "backend": emitted.backend, "kind": wl["kind"]}
        )
    installed = sorted({b for c in declared.contracts for b in c.backends})
    title = "Job backends" + (
        f" (controllers installed for: {', '.join(installed)})" if installed else ""
    )
    return CheckResult(findings, [Section(title, lines, data)])
