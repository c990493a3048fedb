"""Plan check: the Kueue, Kubeflow Trainer, JobSet and Kubeflow SDK versions a stack deploys
(its releases and charts, not the pins) are ones upstream builds and tests together (the
table: trainforge.core.versions; a Trainer of another minor than Kueue's go.mod installs and
then loses what Kueue's types do not know, kubernetes-sigs/kueue#14504). docs/rehearsals.md,
"Version pairs upstream builds and tests together".
"""

from __future__ import annotations

from typing import Any

from trainforge.core import versions
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.ordering import chart_name
from trainforge.plan.resource_types import CHART_V4, HELM_RELEASE
from trainforge.platform import chart_images

RULE = "VERSION_PAIR_UNSUPPORTED"
RULES = {
    RULE: "pin versions that upstream builds and tests together (trainforge.core.versions: "
    "KUEUE_TRAINER, KUEUE_JOBSET, TRAINER_JOBSET, SDK_TRAINER_API; docs/upgrading.md)",
}


def bundled_jobset(trainer_version: str) -> str | None:
    """The JobSet chart version the vendored Trainer chart at `trainer_version` depends on
    (None: not vendored)."""
    try:
        return chart_images.dependency_version("kubeflow-trainer", trainer_version, "jobset")
    except (FileNotFoundError, KeyError):
        return None


def deployed(ctx: PlanContext) -> dict[str, tuple[str, Any]]:
    """component (kueue | kubeflow-trainer | jobset) -> (version, resource) as the plan installs."""
    out: dict[str, tuple[str, Any]] = {}
    for res in (r for t in (HELM_RELEASE, CHART_V4) for r in ctx.resources_of(t)):
        name, version = chart_name(res), res.inputs.get("version")
        if name in ("kueue", "kubeflow-trainer", "jobset") and isinstance(version, str) and version:
            out.setdefault(name, (version.lstrip("v"), res))
    if "kubeflow-trainer" in out and "jobset" not in out:
        version, res = out["kubeflow-trainer"]
        values = res.inputs.get("values") or {}
        install = (values.get("jobset") or {}).get("install", True)  # the chart's default: on
        bundled = bundled_jobset(version) if install is not False else None
        if bundled:
            out["jobset"] = (bundled, res)
    return out


def check(ctx: PlanContext) -> CheckResult:
    found = deployed(ctx)
    if not ({"kueue", "kubeflow-trainer"} & found.keys()):
        return CheckResult()
    kueue, trainer, jobset = (
        found.get(c, (None, None))[0] for c in ("kueue", "kubeflow-trainer", "jobset")
    )
    sdk = (versions.KUBEFLOW_SDK_VERSION, versions.KUBEFLOW_TRAINER_API_VERSION)
    sdk = sdk if trainer else (None, None)
    problems = versions.version_pair_problems(kueue, trainer, jobset, *sdk)
    resources = [found[c][1] for c in ("kubeflow-trainer", "kueue", "jobset") if c in found]
    names = [r.name for r in resources]
    findings = [Finding.on(resources[0], RULE, m, RULES[RULE], *names) for m in problems]
    labels = ("Kueue", "Trainer", "JobSet", "Kubeflow SDK", "kubeflow_trainer_api")
    pairs = zip(labels, (kueue, trainer, jobset, *sdk), strict=True)
    shown = ", ".join(f"{k} {v}" for k, v in pairs if v)
    if problems:
        verdict = "not built and tested together"
    elif kueue and trainer:
        verdict = "built and tested together upstream"
    else:
        verdict = "nothing to pair (Kueue and the Trainer are not both in this stack)"
    lines = [f"{shown}: {verdict}", *(f"  {p}" for p in problems)]
    data = {"kueue": kueue, "trainer": trainer, "jobset": jobset, "sdk": sdk[0],
            "trainerApi": sdk[1], "problems": problems}  # fmt: skip
    return CheckResult(
        findings, [Section("Version pairs (what upstream builds and tests together)", lines, data)]
    )
