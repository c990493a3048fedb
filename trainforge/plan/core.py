"""The offline plan as a library: run the program, rebuild its objects, validate, apply rules.

The CLI (trainforge.plan.cli) prints and writes what this returns; tests and the benchmark
call it directly.
"""

from __future__ import annotations

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
from trainforge.plan.manifests import K8sObject, has_unknown, helm_like, k8s_objects
from trainforge.plan.runner import Inventory, run_program, run_project
from trainforge.plan.runner import standin_mocks as load_standin_mocks
from trainforge.plan.waivers import CONFIG_KEY, Waiver, WaiverError, find_waiver, parse_waivers


@dataclass
class PlanResult:
    inventory: Inventory
    objects: list[K8sObject]
    violations: list[R.Violation]
    waivers: list[Waiver]
    validation: Counter = field(default_factory=Counter)  # pass / fail / unchecked
    unchecked: list[str] = field(default_factory=list)
    standin_judged: int = 0  # cloud resources re-judged with stand-in ids/ARNs
    names: set[str] = field(default_factory=set)  # every name a waiver may use in this plan
    sections: list[T.Section] = field(default_factory=list)  # the plan checks' reports

    @property
    def failing(self) -> list[R.Violation]:
        return [v for v in self.violations if v.waived is None]

    @property
    def waived(self) -> list[R.Violation]:
        return [v for v in self.violations if v.waived is not None]

    @property
    def clean(self) -> bool:
        return not self.failing

    @property
    def unused_waivers(self) -> list[Waiver]:
        """Stale waivers: they name a real resource but cover no finding (the rule passes there
        now, or no finding of it is about the waived image any more). Every plan reports them,
        in the verdict, the full report and the JSON (`unusedWaivers`)."""
        used = [v.waived_by for v in self.violations if v.waived_by is not None]
        return [w for w in self.waivers if not any(w is u for u in used)]

    def counts_by_type(self) -> list[tuple[str, int]]:
        c = Counter(r.type for r in self.inventory.resources)
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


def _short(type_: str, name: str) -> str:
    return f"{type_}::{name}"


def once(fn: Callable[[], Any]) -> Callable[[], Any]:
    """A thunk that runs `fn` on first call and returns the same result afterwards."""
    cache: list[Any] = []

    def run() -> Any:
        if not cache:
            cache.append(fn())
        return cache[0]

    return run


def evaluate(
    inv: Inventory,
    waivers: list[Waiver],
    version: str | None = None,
    root: pathlib.Path | None = None,
    standin: Callable[[], Any] | None = None,
    fleet_workers: dict[str, F.WorkerPlan] | None = None,
) -> PlanResult:
    """Validate objects, run every rule and every plan check; attach waivers to what they cover.
    `fleet_workers`: a fleet manager's planned workers (trainforge.plan.fleet)."""
    objects = k8s_objects(inv)
    by_urn = {o.urn: o for o in objects}
    violations: list[R.Violation] = []
    counts: Counter = Counter()
    unchecked: list[str] = []

    known: set[str] = set()

    def add(
        urn: str,
        display: str,
        names: set[str],
        rule: str,
        msg: str,
        fix: str,
        image: str | None = None,
    ) -> None:
        image = image if image is not None else R.finding_image(rule, msg)
        w = find_waiver(waivers, rule, names, image)
        violations.append(
            R.Violation(
                display,
                rule,
                msg,
                fix,
                urn=urn,
                waived=w.reason if w else None,
                waived_by=w,
                image=image,
            )
        )

    def names_of(rec_urn: str, rec_name: str) -> set[str]:
        names = {rec_urn, rec_name}
        if rec_urn in by_urn:
            names.add(by_urn[rec_urn].ident)
        known.update(names)
        return names

    runtimes = V.runtime_index([o.doc for o in objects])  # what TrainJobs are checked against
    for rec in inv.resources:
        obj = by_urn.get(rec.urn)
        display = f"{obj.ident} ({rec.name})" if obj else _short(rec.type, rec.name)
        names = names_of(rec.urn, rec.name)
        inputs = obj.doc if obj else rec.inputs
        if obj is not None:
            status, findings = V.validate_object(obj.doc, version, runtimes)
            counts[status] += 1
            if status == "unchecked":
                unchecked.append(obj.ident)
            for f in findings:
                add(rec.urn, display, names, f.rule, f.message, V.FIX[f.rule])
        for rule, msg in R.check_resource(rec.type, inputs):
            add(rec.urn, display, names, rule.id, msg, rule.fix)

    stack = [
        R.StackResource(r.urn, r.type, r.name, r.inputs, r.dependencies) for r in inv.resources
    ]
    names_by_urn = {r.urn: r for r in inv.resources}
    for rule, urn, msg in R.check_stack(stack):
        rec = names_by_urn[urn]
        add(urn, _short(rec.type, rec.name), names_of(urn, rec.name), rule.id, msg, rule.fix)
    sections: list[T.Section] = []
    ctx = T.PlanContext(
        inventory=inv,
        objects=objects,
        declared=inv.declared,
        root=root,
        standin=standin,
        fleet_workers=dict(fleet_workers or {}),
    )
    for result in C.run_checks(ctx):
        sections += result.sections
        for f in result.findings:
            names = {f.resource, *f.names}
            known.update(names)
            if f.urn:
                names |= names_of(f.urn, names_by_urn[f.urn].name if f.urn in names_by_urn else "")
            add(f.urn, f.resource, names, f.rule, f.message, f.fix, f.image)
    for w in waivers:
        if w.resource not in known:
            raise WaiverError(
                f"{w.where}.resource: got {w.resource!r}; no resource, Kubernetes object or "
                "finding in this plan has that name (use a Pulumi name, a URN or "
                "namespace/Kind/name as `trainforge plan` prints them)"
            )
    return PlanResult(
        inv, objects, violations, waivers, counts, unchecked, names=known, sections=sections
    )


def known_rule_ids() -> set[str]:
    return set(R.rule_ids()) | set(V.FIX) | set(C.check_rule_ids())


def waivers_from(inv: Inventory) -> list[Waiver]:
    return parse_waivers(inv.config.get(CONFIG_KEY), known_rule_ids())


JOBS_KEY = "trainforge:jobs"
STANDIN_NOTE = " (judged with stand-in values for ids/ARNs the cloud assigns)"


def add_standin_findings(result: PlanResult, standin: Inventory) -> int:
    """Re-judge cloud resources whose preview inputs hold unknowns, with stand-in values.

    In a preview, a policy document built from an ARN the cloud has not assigned yet is
    unknown, so `pulumi preview --policy-pack` cannot judge it. Running the program once more
    with mocks that invent plausible ids and ARNs computes those documents; the content rules
    (IAM "*" on "*", TLS-only bucket policy, ...) then run on them. Only findings the preview
    could not make are added. Returns how many resources were re-judged.
    """
    preview = {r.urn: r for r in result.inventory.resources}
    seen = {(v.urn, v.rule) for v in result.violations}
    judged = 0
    for rec in standin.resources:
        before = preview.get(rec.urn)
        if before is None or rec.type.startswith("kubernetes:") or not has_unknown(before.inputs):
            continue
        judged += 1
        for rule, msg in R.check_resource(rec.type, rec.inputs):
            if (rec.urn, rule.id) in seen:
                continue
            image = R.finding_image(rule.id, msg)
            w = find_waiver(result.waivers, rule.id, {rec.urn, rec.name}, image)
            result.violations.append(
                R.Violation(
                    _short(rec.type, rec.name),
                    rule.id,
                    msg + STANDIN_NOTE,
                    rule.fix,
                    urn=rec.urn,
                    waived=w.reason if w else None,
                    waived_by=w,
                    image=image,
                )
            )
    return judged


def standin_pass(
    root: pathlib.Path,
    stack: str,
    config_overrides: dict[str, Any] | None = None,
    program: str | None = None,
    references: dict[str, dict] | None = None,
) -> Callable[[], Inventory] | None:
    """The stand-in run of the project (the program again, with mocks that invent ids and
    ARNs), run at most once and only when asked: for the plan checks that need rendered
    documents (the IAM rehearsal) and for re-judging the rules. Jobs from config declare only
    Kubernetes objects, which this pass skips: they are left out so that its cost does not
    grow with the number of jobs. None without the platform's mocks. `references`: a fleet
    manager's StackReference answers (trainforge.plan.fleet), as in the preview."""
    standin_mocks = load_standin_mocks()
    if standin_mocks is None:
        return None
    return once(
        lambda: run_project(
            root,
            stack,
            mocks=standin_mocks,
            config_overrides={**(config_overrides or {}), JOBS_KEY: []},
            preview=False,
            program=program,
            references=references,
        )
    )


PROGRAM_WARNINGS = "Program warnings (pulumi.log.warn at preview)"


def plan_project(
    root: pathlib.Path,
    stack: str,
    *,
    mocks: Any = None,
    config_overrides: dict[str, Any] | None = None,
    standins: bool = True,
    program: str | None = None,
    echo_warnings: bool = True,
    submit: Callable[[Inventory], None] | None = None,
) -> PlanResult:
    """Preview-mode plan; then, when the platform's mocks exist, the stand-in pass above.
    `program`: a Python file of the project to run instead of __main__.py. The program's
    warnings are a section of the result (so in the verdict and the report);
    `echo_warnings` also prints them to stderr as they happen. `submit` adds objects sent
    from outside the stack to the inventory before it is judged (`plan --sdk`,
    trainforge.plan.sdk), so every check judges them with the stack's own."""
    from trainforge.jobs.estimate import memoized

    with memoized():  # each job is estimated once, not once per asker
        # a fleet manager: its workers planned first, its StackReferences answered from them
        workers = F.plan_workers(root, stack)
        references = F.reference_answers(workers) or None
        inv = run_project(
            root,
            stack,
            mocks=mocks,
            config_overrides=config_overrides,
            program=program,
            echo_warnings=echo_warnings,
            references=references,
        )
        if submit is not None:
            submit(inv)
        standin = standin_pass(root, stack, config_overrides, program, references)
        result = evaluate(inv, waivers_from(inv), root=root, standin=standin, fleet_workers=workers)
        if standins and mocks is None and standin is not None:
            result.standin_judged = add_standin_findings(result, standin())
    # Only what no section says already: a team quota the pools cannot hold is the queue
    # section's "quota: ..." line (checks/queues.py), which the verdict counts as a warning.
    shown = set(getattr(inv.declared, "quota_warnings", None) or [])
    own = [w for w in dict.fromkeys(inv.warnings) if w not in shown]
    own += undeclared_stack_jobs(inv, program)
    if own:
        lines = [f"warning: {w}" for w in own]
        result.sections.append(T.Section(PROGRAM_WARNINGS, lines, own))
    return result


def undeclared_stack_jobs(inv: Any, program: str | None) -> list[str]:
    """A warning when the stack's `trainforge:jobs` lists jobs the program did not declare.

    Why: a program named by `--program` replaces __main__.py, which is what declares the
    stack's jobs; one that declares only its own (`TrainingJob.function`) dropped the stack's
    jobs from the plan without a word, and `pulumi up` with it would not create them."""
    from trainforge.stack.file import decode_value  # noqa: PLC0415

    listed = decode_value((getattr(inv, "config", None) or {}).get("trainforge:jobs"))
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
    mocks: Any = None,
    standins: bool = False,
) -> PlanResult:
    """Plan a program function (tests, and programs that are not a project folder)."""
    from trainforge.stack.file import config_value

    cfg = {k: config_value(v) for k, v in (config or {}).items()}
    inv = run_program(program, stack=stack, config=cfg, mocks=mocks)
    inv.config = dict(config or {})
    standin_mocks = load_standin_mocks()
    standin = None
    if standin_mocks is not None:

        def rerun() -> Inventory:
            other = run_program(
                program, stack=stack, config=cfg, mocks=standin_mocks, preview=False
            )
            other.config = dict(config or {})
            return other

        standin = once(rerun)
    result = evaluate(inv, waivers_from(inv), standin=standin)
    if standins and standin is not None:
        result.standin_judged = add_standin_findings(result, standin())
    return result
