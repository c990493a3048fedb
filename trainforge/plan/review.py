"""A plan reviewed against a base (`trainforge plan --diff BASE`, docs/pr-review.md): the field
diff (diff.py) of two sides (sides.py), what Pulumi replaces, each job's change (job_diff.py),
and the findings of the diff checks (`registry.DIFF_CHECKS`, waivable like any rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainforge.plan import diff as D
from trainforge.plan import job_diff as JD
from trainforge.plan import registry
from trainforge.plan.check_types import Finding
from trainforge.plan.checks.cost_check import SECTION_TITLE as COST_TITLE
from trainforge.plan.checks.data_safety import other_stack
from trainforge.plan.core import attach_waiver
from trainforge.plan.job_view import job_views
from trainforge.plan.sides import Side, urn_type_name

REPLACE_OPS = {"replace", "create-replacement", "delete-replaced", "discard-replaced"}
JOB_CHANGE = {
    "replaced": "replaced: deleted, then created again (running pods stop)",
    "updated": "updated in place",
}


@dataclass
class DiffContext:
    base: Side
    head: Side
    objects: D.PlanDiff
    resources: D.PlanDiff
    replaced: set[str]  # object idents Pulumi replaces (delete, then create)
    jobs: dict[str, JD.JobChange] = field(default_factory=dict)
    markdown: str = ""  # the PR comment's diff part (review() writes it)


def _replaced(base: Side, objects: D.PlanDiff, result: Any) -> set[str]:
    """Changed objects Pulumi replaces: the preview's op, else a change under replaceOnChanges."""
    if base.ops:
        urns = {o.ident: o.urn for o in result.objects}
        return {c.key for c in objects.changed if base.ops.get(urns.get(c.key, "")) in REPLACE_OPS}
    on = _option(result, "replaceOnChanges")[0]
    return {c.key for c in objects.changed if any(_under(f, on.get(c.key)) for f, *_ in c.fields)}


def _under(path: str, prefixes: Any) -> bool:
    """`path` is one of `prefixes` (Pulumi property paths) or inside one."""
    return any(path == p or path.startswith((p + ".", p + "[")) for p in prefixes or ())


def _without_ignored(d: D.PlanDiff, ignored: dict[str, Any]) -> D.PlanDiff:
    """`d` less the fields under each resource's ignoreChanges: Pulumi keeps the live value
    there (it never sends the new one), so a change shown there would not happen. An object
    whose every change is ignored is not changed at all."""
    changed = []
    for c in d.changed:
        kept = [f for f in c.fields if not _under(f[0], ignored.get(c.key))]
        if kept:
            changed.append(D.Change(c.key, kept))
    return D.PlanDiff(d.added, d.removed, changed)


def _option(result: Any, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The head's resource option `key` of the Kubernetes objects (by ident) and the cloud
    resources (by type::name) that set it."""
    recs = result.inventory.resources
    by_urn = {r.urn: (r.options or {}).get(key) for r in recs}
    objects = {o.ident: by_urn.get(o.urn) for o in result.objects if by_urn.get(o.urn)}
    resources = {urn_type_name(r.urn): by_urn[r.urn] for r in recs if by_urn.get(r.urn)}
    return objects, resources


def review(base: Side, head: Side, result: Any) -> DiffContext:
    """Diff, job changes, diff checks (their findings join `result.violations`, with waivers)."""
    if note := other_stack(base, head):  # said once, in the header of both outputs
        base.label = f"{base.label} ({note})"
    ignored_objects, ignored_resources = _option(result, "ignoreChanges")
    objects = _without_ignored(D.diff_maps(base.objects, head.objects), ignored_objects)
    resources = _without_ignored(D.diff_maps(base.resources, head.resources), ignored_resources)
    ctx = DiffContext(base, head, objects, resources, _replaced(base, objects, result))
    # jobs by namespace/name: a backend change (PyTorchJob -> TrainJob) is one job replaced
    old_jobs = {f"{v.namespace}/{v.name}": v for v in job_views(base.objects).values()}
    new_jobs = {f"{v.namespace}/{v.name}": v for v in job_views(head.objects).values()}
    changed = {c.key for c in objects.changed}
    for key in sorted(set(old_jobs) | set(new_jobs)):
        old, new = old_jobs.get(key), new_jobs.get(key)
        same_object = old is not None and new is not None and old.ident == new.ident
        if same_object and old.ident not in changed:
            continue
        ident = (new or old).ident
        replaced = (
            old is not None and new is not None and not same_object
        ) or ident in ctx.replaced
        ctx.jobs[ident] = JD.job_change(old, new, base.sections, head.sections, replaced)
    findings: list[Finding] = []
    sections: list[Any] = []
    for res in (diff_check(ctx) for diff_check in registry.DIFF_CHECKS):
        sections += res.sections
        findings += [attach_waiver(f, result.waivers, {f.resource, *f.names}) for f in res.findings]
    result.violations.extend(findings)
    ctx.markdown = render(ctx, findings, sections)
    return ctx


def _jobs_md(ctx: DiffContext) -> list[str]:
    if not ctx.jobs:
        return []
    lines = ["### Jobs", ""]
    for ident, ch in ctx.jobs.items():
        lines.append(f"- `{ident}`: **{JOB_CHANGE.get(ch.what, ch.what)}**")
        if ch.compat is not None:
            lines.append(f"  - checkpoint: **{ch.compat.line()}**")
        lines += [f"  - {line}" for line in ch.lines]
    return [*lines, ""]


OBJECT_LINES = {"NodePool": JD.pool_lines, "ResourceQuota": JD.quota_lines,
                "ClusterQueue": JD.quota_lines}  # fmt: skip


def _pools_teams_md(ctx: DiffContext) -> list[str]:
    out = []
    for c in ctx.objects.changed:
        kind = c.key.split("/")[1]
        if (said := OBJECT_LINES.get(kind)) is None:
            continue
        if lines := said(ctx.base.objects[c.key], ctx.head.objects[c.key]):
            out.append(f"- `{c.key}`")
            out += [f"  - {line}" for line in lines]
    return ["### Pools and teams", "", *out, ""] if out else []


def render(ctx: DiffContext, findings: list[Finding], sections: list[Any]) -> str:
    lines = [f"## trainforge plan diff (base: {ctx.base.label})", ""]
    open_ = [f for f in findings if f.waived is None]
    if open_:
        lines += ["**Needs a decision:**", ""]
        for f in open_:
            lines += [f"- [{f.rule}] `{f.resource}`: {f.message}", f"  - fix: {f.fix}"]
        lines.append("")
    lines += _jobs_md(ctx)
    lines += _pools_teams_md(ctx)
    for sec in sections:  # the diff checks' own reports
        lines += [f"### {sec.title}", "", *[f"- {line}" for line in sec.lines], ""]
    lines += D.render_markdown(ctx.objects, ctx.resources, ctx.replaced).splitlines()
    cost = [(side.sections or {}).get(COST_TITLE) for side in (ctx.base, ctx.head)]
    return "\n".join([*lines, *D.cost_markdown(*cost)])
