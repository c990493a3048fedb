"""The offline plan as a library: run the program, run every check, attach waivers. The CLI
(trainforge.plan.cli) prints what this returns; tests and the benchmark call it directly."""

from __future__ import annotations

import functools
import pathlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainforge.plan import check_types as T
from trainforge.plan import fleet as F
from trainforge.plan import registry as C
from trainforge.plan.checks import rules as R
from trainforge.plan.checks import validate as V
from trainforge.plan.manifests import K8sObject, helm_like, k8s_objects
from trainforge.plan.runner import (
    STACK_TYPE,
    Inventory,
    run_program,
    run_project,
)
from trainforge.plan.waivers import CONFIG_KEY, Waiver, WaiverError, find_waiver, parse_waivers
from trainforge.platform.stack_check import JOBS_KEY


@dataclass
class PlanResult:
    inventory: Inventory
    objects: list[K8sObject]
    violations: list[T.Finding]  # every finding, waived or not
    waivers: list[Waiver]
    validation: Counter = field(default_factory=Counter)  # pass / fail / unchecked
    unchecked: list[str] = field(default_factory=list)
    standin_judged: int = 0  # cloud resources re-judged with stand-in ids/ARNs
    sections: list[T.Section] = field(default_factory=list)  # the plan checks' reports

    @property
    def failing(self) -> list[T.Finding]:
        return [v for v in self.violations if v.waived is None]

    @property
    def waived(self) -> list[T.Finding]:
        return [v for v in self.violations if v.waived is not None]

    @property
    def clean(self) -> bool:
        return not self.failing

    @property
    def unused_waivers(self) -> list[Waiver]:
        """Stale waivers: they name a real resource but cover no finding (every plan reports
        them: the verdict, the report, the JSON's `unusedWaivers`)."""
        used = [v.waived_by for v in self.violations if v.waived_by is not None]
        return [w for w in self.waivers if not any(w is u for u in used)]

    def counts_by_type(self) -> list[tuple[str, int]]:
        """Resources to create by type, the stack's own among them: they sum to
        `inventory.to_create`, Pulumi's "N to create"."""
        c = Counter(r.type for r in self.inventory.resources)
        c[STACK_TYPE] += 1
        return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))

    def helm(self) -> list[dict[str, Any]]:
        return helm_like(self.inventory)

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "violations": [v.to_json() for v in self.violations],
            "unusedWaivers": [
                {"where": w.where, "resource": w.resource, "rule": w.rule, "image": w.image}
                for w in self.unused_waivers
            ],
            "validation": dict(self.validation),
            "unchecked": self.unchecked,
            "kubernetesObjects": [
                {"ident": o.ident, "urn": o.urn, "file": o.relpath, "autonamed": o.autonamed}
                for o in self.objects
            ],
            "helm": self.helm(),
            "countsByType": dict(self.counts_by_type()),
            "sections": [s.to_json() for s in self.sections],
        }


def attach_waiver(f: T.Finding, waivers: list[Waiver], names: set[str]) -> T.Finding:
    """The finding with the waiver that covers it (by rule, any of `names`, and the image an
    image rule's finding is about), if one does."""
    if f.image is None:
        f.image = R.finding_image(f.rule, f.message)
    w = find_waiver(waivers, f.rule, names, f.image)
    f.waived, f.waived_by = (w.reason, w) if w else (None, None)
    return f


def evaluate(
    inv: Inventory,
    waivers: list[Waiver],
    root: pathlib.Path | None = None,
    standin: Callable[[], Inventory] | None = None,
    rejudge: bool = False,
    fleet_workers: dict[str, F.WorkerPlan] | None = None,
    fork: bool = False,
) -> PlanResult:
    """Run every registered check; attach waivers to what they cover. A waiver must name a
    resource (Pulumi name or URN), a Kubernetes object (namespace/Kind/name) or a finding's
    subject of this plan. `rejudge`: the rules also judge the stand-in run (`rules.rejudged`).
    `fleet_workers`: a fleet manager's planned workers. `fork`: see registry.run_checks."""
    objects = k8s_objects(inv)
    idents = {o.urn: o.ident for o in objects}
    names_by_urn = {r.urn: {r.urn, r.name, *([idents[r.urn]] if r.urn in idents else [])}
                    for r in inv.resources}  # fmt: skip
    known: set[str] = set().union(*names_by_urn.values())
    workers = dict(fleet_workers or {})
    ctx = T.PlanContext(inv, objects, inv.declared, root, standin, rejudge, fleet_workers=workers)
    violations: list[T.Finding] = []
    sections: list[T.Section] = []
    for result in C.run_checks(ctx, fork):
        sections += result.sections
        for f in result.findings:
            names = {f.resource, *f.names, *names_by_urn.get(f.urn, {f.urn} - {""})}
            known.update(names)
            violations.append(attach_waiver(f, waivers, names))
    for w in waivers:
        if w.resource not in known:
            raise WaiverError(
                f"{w.where}.resource: got {w.resource!r}; no resource, Kubernetes object or "
                "finding in this plan has that name (use a Pulumi name, a URN or "
                "namespace/Kind/name as `trainforge plan` prints them)"
            )
    checked = V.validation(ctx)
    return PlanResult(
        inv,
        objects,
        violations,
        waivers,
        checked.counts,
        checked.unchecked,
        standin_judged=R.rejudged(ctx),
        sections=sections,
    )


def known_rule_ids() -> set[str]:
    """Every rule id a finding may carry (waivers may name these)."""
    return set(C.check_rule_ids())


def waivers_from(inv: Inventory) -> list[Waiver]:
    return parse_waivers(inv.config.get(CONFIG_KEY), known_rule_ids())


def standin_pass(
    root: pathlib.Path,
    stack: str,
    config_overrides: dict[str, Any] | None = None,
    program: str | None = None,
    references: dict[str, dict] | None = None,
) -> Callable[[], Inventory]:
    """The stand-in run of the project, at most once and only when a check asks
    (docs/pr-review.md, "Stand-in pass"). `references`: a fleet manager's StackReference
    answers. The preview run's record (core.contract) stays the current one after it."""

    def run() -> Inventory:
        from trainforge.core.contract import recording  # noqa: PLC0415

        with recording():
            return run_project(
                root,
                stack,
                config_overrides={**(config_overrides or {}), JOBS_KEY: []},
                preview=False,
                program=program,
                references=references,
            )

    return functools.cache(run)


PROGRAM_WARNINGS = "Program warnings (pulumi.log.warn at preview)"


def plan_project(
    root: pathlib.Path,
    stack: str,
    *,
    config_overrides: dict[str, Any] | None = None,
    standins: bool = True,
    program: str | None = None,
    echo_warnings: bool = True,
    submit: Callable[[Inventory], None] | None = None,
    fork: bool = False,
) -> PlanResult:
    """Preview-mode plan; then, when a check asks, the stand-in pass. `program`: a Python file
    of the project to run instead of __main__.py. The program's warnings are a section of the
    result (`echo_warnings`: also on stderr as they happen). `submit` adds objects sent from
    outside the stack (`plan --sdk`) to the inventory before it is judged."""
    from trainforge.jobs.estimate import memoized

    with memoized():  # each job is estimated once, not once per asker
        # a fleet manager: its workers first, its StackReferences answered from them
        workers = F.plan_workers(root, stack)
        references = F.reference_answers(workers) or None
        inv = run_project(
            root,
            stack,
            config_overrides=config_overrides,
            program=program,
            echo_warnings=echo_warnings,
            references=references,
        )
        if submit is not None:
            submit(inv)
        standin = standin_pass(root, stack, config_overrides, program, references)
        if workers:
            # each worker again once the manager is up: its reference reads the manager's
            # outputs, as `pulumi up` in the order of docs/fleet.md leaves them (the stand-in
            # run declares no jobs: their ConfigMaps come from this run)
            also = {k: v for k, v in inv.outputs.items() if k == "fleetJobConfigMaps"}
            workers = F.plan_workers(root, stack, manager=standin(), also=also)
        result = evaluate(
            inv, waivers_from(inv), root, standin, standins, fleet_workers=workers, fork=fork
        )
    # Only what no section says already (a quota warning is the queue section's line).
    shown = set(getattr(inv.declared, "quota_warnings", None) or [])
    own = [w for w in dict.fromkeys(inv.warnings) if w not in shown]
    own += undeclared_stack_jobs(inv, program)
    if own:
        lines = [f"warning: {w}" for w in own]
        result.sections.append(T.Section(PROGRAM_WARNINGS, lines, own))
    return result


def undeclared_stack_jobs(inv: Any, program: str | None) -> list[str]:
    """A warning when the stack's `trainforge:jobs` lists jobs the program did not declare: a
    `--program` replaces __main__.py, which declares them, and `pulumi up` would not create them."""
    from trainforge.stack.file import decode_value  # noqa: PLC0415

    listed = decode_value((getattr(inv, "config", None) or {}).get(JOBS_KEY))
    if not isinstance(listed, list):
        return []
    jobs = getattr(inv.declared, "jobs", None) or []
    have = {(d.spec.team, d.spec.name) for d in jobs}
    missing = [
        f"{j.get('team')}/{j.get('name')}"
        for j in listed
        if isinstance(j, dict) and (j.get("team"), j.get("name")) not in have
    ]
    if not missing:
        return []
    who = program or "__main__.py"
    return [
        f"trainforge:jobs: {len(missing)} job(s) of the stack are not declared by {who}: "
        f"{', '.join(missing)}; the plan and `pulumi up` leave them out. Declare them in the "
        "program: declare_jobs(platform.contract, pulumi.Config('trainforge').get_object"
        "('jobs')) from trainforge.jobs.declare, as examples/python_jobs/program.py does"
    ]


def plan_program(
    program: Callable[[], Any],
    *,
    stack: str = "test",
    config: dict[str, Any] | None = None,
    standins: bool = False,
) -> PlanResult:
    """Plan a program function (tests, and programs that are not a project folder)."""
    from trainforge.stack.file import config_value

    cfg = {k: config_value(v) for k, v in (config or {}).items()}

    def run(preview: bool = True) -> Inventory:
        inv = run_program(program, stack=stack, config=cfg, preview=preview)
        inv.config = dict(config or {})
        return inv

    standin = functools.cache(lambda: run(False))
    inv = run()
    return evaluate(inv, waivers_from(inv), standin=standin, rejudge=standins)
