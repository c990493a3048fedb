"""Plan checks: behaviour rehearsals and reports that look at the whole declared stack.

Why a registry: the rules in `rules.py` judge one resource's (or the stack's) *shape*. A plan
check judges *behaviour* (do these AWS calls pass these policies, does this script run under
that securityContext, do these pods fit on those nodes) or reports on the stack (queue
admission, cost, memory and duration). Each check lives in its own module with one job, and
is listed in `CHECKS` below; the offline plan (`core.evaluate`) runs every one of them, and
so do the tests. Adding a check is one module plus one line here.

A check is a callable `check(ctx: PlanContext) -> CheckResult` (types in `check_types`, which
check modules import; this registry imports them). Findings become plan
violations (waivable like any rule, with a written reason); sections are printed by
`trainforge plan` after the resource summary and written into the JSON inventory.
A module may export `RULES = {rule_id: fix}` so that waivers can name its rule ids.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainforge.plan.check_types import CheckResult, PlanContext

# "module:function" of every check, in the order their sections print.
CHECKS: list[str] = [
    "trainforge.plan.iam_rehearsal:check",
    "trainforge.plan.controller_identity:check",
    "trainforge.plan.check_helm_charts:check",
    "trainforge.plan.check_ordering:check",
    "trainforge.plan.check_pod_scripts:check",
    "trainforge.plan.check_scheduling:check",
    "trainforge.plan.estimates:check",
    "trainforge.plan.restart_budget:check",
    "trainforge.plan.cost_check:check",
    "trainforge.plan.job_backends:check",
    "trainforge.plan.check_retry_bounds:check",
    "trainforge.plan.check_queues:check",
    "trainforge.plan.data_safety:check",
    "trainforge.plan.check_addon_placement:check",
    "trainforge.plan.check_images:check",
    "trainforge.plan.check_resume:check",
]


def _load(spec: str) -> tuple[Any, Any]:
    mod_name, _, fn_name = spec.partition(":")
    mod = importlib.import_module(mod_name)
    return mod, getattr(mod, fn_name)


def check_rule_ids() -> dict[str, str]:
    """rule id -> fix, for every check's rules (waivers may name these)."""
    out: dict[str, str] = {}
    for spec in CHECKS:
        mod, _ = _load(spec)
        out.update(getattr(mod, "RULES", {}))
    return out


def run_checks(ctx: PlanContext) -> list[CheckResult]:
    """Every registered check's result, in registry order."""
    return [_load(spec)[1](ctx) for spec in CHECKS]
