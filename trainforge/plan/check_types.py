"""What a plan check may look at (`PlanContext`) and returns (`CheckResult`). Apart from the
registry, which imports every check module, so no check imports the registry."""

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
    """What a check may look at. `declared`: the typed objects the program built in-process
    (platform contracts and resolved jobs, `trainforge.core.contract`)."""

    inventory: Inventory
    objects: list[K8sObject]  # one per Kubernetes object of the inventory
    declared: Declared | None = None  # None for foreign programs
    root: pathlib.Path | None = None  # the project folder, when planning a project
    # Runs (once, on first use) the program with stand-in ids/ARNs (core.standin_pass)
    standin: Callable[[], Inventory] | None = None
    # The rules also judge the stand-in run's resources with unknowns (rules.rejudged)
    rejudge: bool = False
    # What a fact library computed once for this plan, by its own key (queues.simulate,
    # validate.validation, ...), so two readers do not compute it twice
    memo: dict[str, Any] = field(default_factory=dict)
    # A fleet manager's planned workers by MultiKueueCluster name (trainforge.plan.fleet)
    fleet_workers: dict[str, WorkerPlan] = field(default_factory=dict)

    def resources_of(self, type_: str) -> list[Recorded]:
        return [r for r in self.inventory.resources if r.type == type_]

    def standin_inventory(self) -> Inventory | None:
        return self.standin() if self.standin is not None else None


@dataclass
class Finding:
    """One thing a check found wrong: the plan's only finding type. `resource` is what the
    reader looks for (a URN, a Pulumi name, or namespace/Kind/name); waivers match it or any
    of `names`. `core.evaluate` sets `waived` (the reason) and `waived_by`."""

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
