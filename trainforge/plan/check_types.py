"""The types a plan check works with: what it may look at (`PlanContext`) and what it returns
(`CheckResult`: `Finding`s and report `Section`s).

Why a module apart from the registry (`registry.CHECKS`): every check module imports these,
and the registry imports every check module, so keeping both in one file made each check and
the registry import each other (tests/test_import_graph.py).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: a check module importing these loads nothing more
    from trainforge.core.contract import Declared
    from trainforge.plan.fleet import WorkerPlan
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory, Recorded
    from trainforge.plan.waivers import Waiver


@dataclass
class PlanContext:
    """What a check may look at. `declared` holds the typed objects the program built
    in-process (platform contracts and resolved jobs, see `trainforge.core.contract`)."""

    inventory: Inventory
    objects: list[K8sObject]  # one per Kubernetes object of the inventory
    declared: Declared | None = None  # None for foreign programs
    root: pathlib.Path | None = None  # the project folder, when planning a project
    # Runs (once, on first use) the same program with stand-in ids/ARNs, so documents built
    # from values the cloud assigns exist (see trainforge.plan.checks.iam_stack); None when
    # the caller planned without one.
    standin: Callable[[], Inventory] | None = None
    # The resource rules also judge the stand-in run's cloud resources whose preview inputs
    # hold unknowns (trainforge.plan.checks.rules.rejudged): `trainforge plan`, not a test.
    rejudge: bool = False
    # What a fact library computed once for this plan, by its own key (the Kueue
    # admission simulation: trainforge.plan.checks.queues.simulate; the validation:
    # trainforge.plan.checks.validate.validation), so two readers do not compute it twice.
    memo: dict[str, Any] = field(default_factory=dict)
    # A fleet manager's workers as this plan planned them (trainforge.plan.fleet), by their
    # MultiKueueCluster name; empty for any other stack.
    fleet_workers: dict[str, WorkerPlan] = field(default_factory=dict)

    def resources_of(self, type_: str) -> list[Recorded]:
        """Every recorded resource of one Pulumi type token."""
        return [r for r in self.inventory.resources if r.type == type_]

    def standin_inventory(self) -> Inventory | None:
        """The stand-in run's Inventory, or None when there is none."""
        return self.standin() if self.standin is not None else None


@dataclass
class Finding:
    """One thing a check found wrong: the plan's only finding type, from every producer (the
    Kubernetes validation, the resource and stack rules, every other check, the diff checks).
    `resource` is what the reader looks for (a URN, a Pulumi name, or namespace/Kind/name);
    waivers match it or any of `names`. The engine (`core.evaluate`) sets `waived` (the
    waiver's written reason) and `waived_by` when a waiver covers the finding."""

    resource: str
    rule: str
    message: str
    fix: str
    urn: str = ""
    names: frozenset[str] = frozenset()
    image: str | None = None  # the image an image rule's finding is about (waivers name it)
    waived: str | None = None
    waived_by: Waiver | None = field(default=None, compare=False, repr=False)

    @classmethod
    def on(cls, res: Recorded, rule: str, message: str, fix: str, *names: str) -> Finding:
        """A finding about one recorded resource: shown by its URN, waived by its Pulumi
        name (or any of `names`)."""
        return cls(res.urn, rule, message, fix, urn=res.urn, names=frozenset({res.name, *names}))

    def to_json(self) -> dict[str, Any]:
        keys = ("resource", "urn", "rule", "message", "fix", "waived", "image")
        return {k: getattr(self, k) for k in keys}


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
