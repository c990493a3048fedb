"""Plan checks: behaviour rehearsals and reports that look at the whole declared stack.

Why a registry: the rules in `rules.py` judge one resource's (or the stack's) *shape*. A plan
check judges *behaviour* (do these AWS calls pass these policies, does this script run under
that securityContext, do these pods fit on those nodes) or reports on the stack (queue
admission, cost, memory and duration). Each check lives in its own module with one job, and
is listed in `CHECKS` below; the offline plan (`core.evaluate`) runs every one of them, and
so do the tests. Adding a check is one module plus one line here.

A check is a callable `check(ctx: PlanContext) -> CheckResult`. Findings become plan
violations (waivable like any rule, with a written reason); sections are printed by
`trainforge plan` after the resource summary and written into the JSON inventory.
A module may export `RULES = {rule_id: fix}` so that waivers can name its rule ids.
"""

from __future__ import annotations

import importlib
import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class PlanContext:
    """What a check may look at. `declared` holds the typed objects the program built
    in-process (platform contracts and resolved jobs, see `trainforge.jobs.contract`)."""

    inventory: Any  # trainforge.plan.runner.Inventory
    objects: list[Any]  # trainforge.plan.manifests.K8sObject, one per Kubernetes object
    declared: Any = None  # trainforge.jobs.contract.Declared (None for foreign programs)
    root: pathlib.Path | None = None  # the project folder, when planning a project
    # Runs (once, on first use) the same program with stand-in ids/ARNs, so documents built
    # from values the cloud assigns exist (see trainforge.plan.iam_stack); None when the
    # platform's mocks are not available.
    standin: Callable[[], Any] | None = None

    def resources_of(self, type_: str) -> list[Any]:
        """Every recorded resource of one Pulumi type token."""
        return [r for r in self.inventory.resources if r.type == type_]

    def standin_inventory(self) -> Any:
        """The stand-in run's Inventory, or None when there is none."""
        return self.standin() if self.standin is not None else None


@dataclass
class Finding:
    """One thing a check found wrong. `resource` is what the reader looks for (a URN, a
    Pulumi name, or namespace/Kind/name); waivers match it or any of `names`."""

    resource: str
    rule: str
    message: str
    fix: str
    urn: str = ""
    names: frozenset[str] = frozenset()


@dataclass
class Section:
    """A report block: a title, lines for the terminal, and the same facts as JSON data."""

    title: str
    lines: list[str]
    data: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "lines": self.lines, "data": self.data}


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)


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
