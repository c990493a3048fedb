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

if TYPE_CHECKING:
    from trainforge.plan.fleet import WorkerPlan


@dataclass
class PlanContext:
    """What a check may look at. `declared` holds the typed objects the program built
    in-process (platform contracts and resolved jobs, see `trainforge.core.contract`)."""

    inventory: Any  # trainforge.plan.runner.Inventory
    objects: list[Any]  # trainforge.plan.manifests.K8sObject, one per Kubernetes object
    declared: Any = None  # trainforge.core.contract.Declared (None for foreign programs)
    root: pathlib.Path | None = None  # the project folder, when planning a project
    # Runs (once, on first use) the same program with stand-in ids/ARNs, so documents built
    # from values the cloud assigns exist (see trainforge.plan.checks.iam_stack); None when the
    # platform's mocks are not available.
    standin: Callable[[], Any] | None = None
    # What a fact library computed once for this plan, by its own key (the Kueue
    # admission simulation: trainforge.plan.checks.queues.simulate), so two checks that
    # read it do not compute it twice.
    memo: dict[str, Any] = field(default_factory=dict)
    # A fleet manager's workers as this plan planned them (trainforge.plan.fleet), by their
    # MultiKueueCluster name; empty for any other stack.
    fleet_workers: dict[str, WorkerPlan] = field(default_factory=dict)

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
    image: str | None = None  # the image an image rule's finding is about (waivers name it)


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
