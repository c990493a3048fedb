"""The plan's checks, in the order their sections print: the one list the engine runs.

Why a registry: the rules in `checks/rules.py` judge one resource's (or the stack's) *shape*. A
plan check judges *behaviour* (do these AWS calls pass these policies, does this script run
under that securityContext, do these pods fit on those nodes) or reports on the stack (queue
admission, cost, memory and duration). Each check lives in its own module under
`trainforge/plan/checks/` with one job; the offline plan (`core.evaluate`) runs every check
listed here, and so do the tests. Adding a check is one module plus one line here.

A check is a callable `check(ctx: PlanContext) -> CheckResult` (types in `check_types`, which
the check modules import; this registry imports the checks). Findings become plan violations
(waivable like any rule, with a written reason); sections are printed by `trainforge plan`
after the resource summary and written into the JSON inventory. Each entry also names the
rule ids its check may report (`RULES = {rule_id: fix}` in the check's module), so that
waivers can name them. A *diff check* (`DIFF_CHECKS`) runs only under `trainforge plan --diff`
on a `review.DiffContext`; its rule ids are listed with its module's plan check.

The imports are plain module-level imports: a plan runs every check anyway, so importing them
lazily would save nothing (measured: `trainforge plan --stack dev --summary` takes the same).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainforge.plan.check_types import CheckResult, PlanContext
from trainforge.plan.checks import (
    addon_placement,
    budget_subscriptions,
    controller_identity,
    cost_check,
    data_safety,
    documentation_values,
    estimates,
    existence,
    fleet,
    fsx_zones,
    helm_charts,
    iam_rehearsal,
    images,
    job_backends,
    ordering,
    pod_scripts,
    queues,
    reachability,
    restart_budget,
    resume,
    retry_bounds,
    scheduling,
    submitted,
    version_pairs,
)


@dataclass(frozen=True)
class Check:
    """One registered plan check and the rule ids (-> fix) its findings may carry."""

    run: Callable[[PlanContext], CheckResult]
    rules: Mapping[str, str]


CHECKS: list[Check] = [
    Check(iam_rehearsal.check, iam_rehearsal.RULES),
    Check(controller_identity.check, controller_identity.RULES),
    Check(helm_charts.check, helm_charts.RULES),
    Check(version_pairs.check, version_pairs.RULES),
    Check(ordering.check, ordering.RULES),
    Check(existence.check, existence.RULES),
    Check(reachability.check, reachability.RULES),
    Check(documentation_values.check, documentation_values.RULES),
    Check(pod_scripts.check, pod_scripts.RULES),
    Check(scheduling.check, scheduling.RULES),
    Check(estimates.check, estimates.RULES),
    Check(restart_budget.check, restart_budget.RULES),
    Check(cost_check.check, cost_check.RULES),
    Check(budget_subscriptions.check, budget_subscriptions.RULES),
    Check(job_backends.check, job_backends.RULES),
    Check(retry_bounds.check, retry_bounds.RULES),
    Check(queues.check, queues.RULES),
    Check(data_safety.check, data_safety.RULES),
    Check(fsx_zones.check, fsx_zones.RULES),
    Check(addon_placement.check, addon_placement.RULES),
    Check(images.check, images.RULES),
    Check(resume.check, resume.RULES),
    Check(submitted.check, submitted.RULES),
    Check(fleet.check, fleet.RULES),
]

# Diff checks, called with a review.DiffContext, in the order their sections print.
DIFF_CHECKS: list[Callable[[Any], CheckResult]] = [
    resume.diff_check,
]


def check_rule_ids() -> dict[str, str]:
    """rule id -> fix, for every check's rules (waivers may name these)."""
    out: dict[str, str] = {}
    for check in CHECKS:
        out.update(check.rules)
    return out


def run_checks(ctx: PlanContext) -> list[CheckResult]:
    """Every registered check's result, in registry order."""
    return [check.run(ctx) for check in CHECKS]
