"""The plan's checks: every module of `trainforge/plan/checks/` with `check` and `RULES`
(`{rule_id: fix}`, each id of one check); its `diff_check(ctx: review.DiffContext)`, if any,
runs only under `plan --diff` (docs/architecture.md, "The offline plan")."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from trainforge.plan import checks as _package
from trainforge.plan.check_types import CheckResult, PlanContext

# Where each check's report section prints (one not named here runs after these, by name).
ORDER = (
    "validate",
    "rules",
    "iam_rehearsal",
    "controller_identity",
    "helm_charts",
    "version_pairs",
    "ordering",
    "existence",
    "reachability",
    "documentation_values",
    "pod_scripts",
    "scheduling",
    "estimates",
    "cost_check",
    "budget_subscriptions",
    "job_backends",
    "retry_bounds",
    "queues",
    "data_safety",
    "fsx_zones",
    "addon_placement",
    "images",
    "resume",
    "submitted",
    "fleet",
)


@dataclass(frozen=True)
class Check:
    """One registered plan check and the rule ids (-> fix) its findings may carry."""

    run: Callable[[PlanContext], CheckResult]
    rules: Mapping[str, str]


def _check_modules() -> list[ModuleType]:
    """The modules of trainforge/plan/checks/ that are checks, in `ORDER`."""
    names = sorted(m.name for m in pkgutil.iter_modules(_package.__path__))
    names.sort(key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    modules = [importlib.import_module(f"{_package.__name__}.{n}") for n in names]
    return [m for m in modules if callable(getattr(m, "check", None)) and hasattr(m, "RULES")]


_MODULES = _check_modules()
CHECKS: list[Check] = [Check(m.check, m.RULES) for m in _MODULES]

# Diff checks, called with a review.DiffContext, in the order their sections print.
DIFF_CHECKS: list[Callable[[Any], CheckResult]] = [
    m.diff_check for m in _MODULES if callable(getattr(m, "diff_check", None))
]


def check_rule_ids(checks: list[Check] | None = None) -> dict[str, str]:
    """rule id -> fix, for every check's rules (waivers may name these): the plan's one list
    of rule ids. Each id belongs to one check, so a waiver names one producer."""
    out: dict[str, str] = {}
    for check in CHECKS if checks is None else checks:
        twice = sorted(set(out) & set(check.rules))
        if twice:
            raise ValueError(f"rule id(s) {', '.join(twice)} declared by two plan checks")
        out.update(check.rules)
    return out


# The checks that read the stand-in run (`ctx.standin_inventory()`) run after the others, so
# that a stand-in pass in a child process (core.in_child) has the rest to overlap with.
READS_STANDIN = ("rules", "iam_rehearsal", "controller_identity", "existence", "fleet")


def run_checks(ctx: PlanContext) -> list[CheckResult]:
    """Every registered check's result, in registry order (run in `READS_STANDIN` last)."""
    late = {i for i, m in enumerate(_MODULES) if m.__name__.rpartition(".")[2] in READS_STANDIN}
    results = {i: CHECKS[i].run(ctx) for i in range(len(CHECKS)) if i not in late}
    results.update({i: CHECKS[i].run(ctx) for i in sorted(late)})
    return [results[i] for i in range(len(CHECKS))]
