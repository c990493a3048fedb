"""Plan check: the cost table (per job, per team, the platform) and the $/hour caps.

The caps are policy, so they live next to the waivers in the `trainforge-policy:` namespace
(the model: trainforge/stack/policy.py, which parse_caps validates through):

    config:
      trainforge-policy:costCaps:
        jobPerHour: 100            # USD/hour, one job with all its pods, on-demand prices
        teamPerHour: 300           # USD/hour, all of a team's declared jobs at once
        teams:                     # per-team overrides of either cap
          llm: {jobPerHour: 600, teamPerHour: 2000}

A job or team over its cap is a violation (rule TF_COST_JOB_CAP / TF_COST_TEAM_CAP); so is a
capped one whose cost is unknown (a cap nobody can check is no cap). Waive either with a
reason under `trainforge-policy:waivers` (resource: the job's name or the team's name).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainforge.plan import cost as C
from trainforge.plan import price_facts as P
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.stack.policy import CAPS_KEY, CostCaps, CostCapsError, parse_caps

__all__ = ["CAPS_KEY", "CostCapsError", "check", "parse_caps"]

REGION_KEY = "aws:region"
SECTION_TITLE = "Cost"

RULES = {
    "TF_COST_JOB_CAP": "use a cheaper pool or fewer workers, raise "
    f"{CAPS_KEY}.jobPerHour (or its per-team override), or waive it for this job with a reason",
    "TF_COST_TEAM_CAP": "run fewer of the team's jobs at once, use cheaper pools, raise "
    f"{CAPS_KEY}.teamPerHour for the team, or waive it for the team with a reason",
}


# --- building the report from what the program declared ---------------------------------------


def _job_resource(ctx: PlanContext, job: Any, namespace: str) -> str:
    """namespace/Kind/name of the object the job became (what a reviewer looks for)."""
    for o in ctx.objects:
        meta = o.doc.get("metadata") or {}
        if (
            meta.get("name") == job.name
            and meta.get("namespace") == namespace
            and o.doc.get("kind") in ("PyTorchJob", "TrainJob", "Job")
        ):
            return o.ident
    return f"{namespace}/{job.name}"


def build_report(ctx: PlanContext, today: dt.date | None = None) -> C.CostReport:
    region = str(ctx.inventory.config.get(REGION_KEY) or "")
    if not region:
        from trainforge.plan.mocks import DEFAULT_REGION  # noqa: PLC0415 - what the plan used

        region = DEFAULT_REGION
    report = C.CostReport(region=region, today=today or dt.date.today())
    declared = ctx.declared
    pools: dict[str, Any] = {}
    teams: dict[str, Any] = {}
    for contract in declared.contracts if declared else []:
        pools.update(contract.pools)
        teams.update(contract.teams)
    for d in declared.jobs if declared else []:
        resource = _job_resource(ctx, d.spec, d.target.namespace)
        report.jobs.append(C.job_cost(d.spec, d.target, region, resource))
        teams.setdefault(d.target.team.name, d.target.team)
        pools.setdefault(d.target.pool.name, d.target.pool)
    report.teams = C.team_costs(teams, list(pools.values()), report.jobs, region)
    report.fixed = C.fixed_costs(ctx.inventory.resources, region, report.today)
    return report


# --- the section ----------------------------------------------------------------------------------


def usd(value: float | None, unit: str = "") -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}{unit}"


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    h = seconds / 3600
    return f"{h:,.1f} h" if h < 48 else f"{h / 24:,.1f} days"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def render(report: C.CostReport) -> list[str]:
    lines: list[str] = []
    lines.append(
        f"USD, list prices in {report.region} from the price facts table of {P.FACTS_DATE} "
        "(trainforge/plan/price_facts.py); 'unknown' = no dated price, never guessed"
    )
    lines.append("")
    if report.jobs:
        rows = [
            ["job", "team", "node type", "nodes", "$/h on-demand", "$/h spot", "expected run",
             "run cost"]
        ]  # fmt: skip
        for j in report.jobs:
            c = j.choice
            spot = (c.hourly_spot if c else None) if j.spot_possible else None
            rows.append(
                [
                    j.name,
                    j.team,
                    c.instance_type if c else "none fits",
                    str(c.nodes) if c else "-",
                    usd(j.hourly),
                    usd(spot) if j.spot_possible else "n/a (on-demand pool)",
                    ("<= " if j.duration.ceiling else "") + hours(j.duration.seconds),
                    ("<= " if j.duration.ceiling else "") + usd(j.run_cost),
                ]
            )
        lines += ["Jobs (every pod running):", *("  " + r for r in _table(rows))]
        for j in report.jobs:
            reason = j.choice.reason if j.choice else f"no instance type of {j.pool} fits a pod"
            lines.append(f"  {j.name}: pool {j.pool}; {reason}")
            lines.append(f"  {' ' * len(j.name)}  duration: {j.duration.detail}")
        lines.append("")
    if report.teams:
        rows = [["team", "declared jobs $/h", "quota ceiling $/h", "quota ceiling $/month"]]
        for t in report.teams:
            ceiling = "unlimited" if t.ceiling.unlimited else usd(t.ceiling.hourly)
            monthly = (
                "unlimited"
                if t.ceiling.unlimited
                else usd(None if t.ceiling.hourly is None else t.ceiling.hourly * 730)
            )
            rows.append([t.name, usd(t.jobs_hourly), ceiling, monthly])
        lines += ["Teams:", *("  " + r for r in _table(rows))]
        for t in report.teams:
            lines.append(f"  {t.name}: quota ceiling = {t.ceiling.detail}")
        lines.append(
            "  (a team's quota is what its namespace may hold: with Kueue its nominal quota "
            "plus what it may borrow from its cohort, docs/teams.md)"
        )
        lines.append("")
    rows = [["item", "quantity", "$/h", "$/month", "note"]]
    for i in report.fixed:
        monthly = None if i.hourly is None else i.hourly * C.HOURS_PER_MONTH
        rows.append([i.what, i.quantity, usd(i.hourly), usd(monthly), i.note])
    total = report.fixed_total()
    lines += [
        "Platform (fixed, while the stack exists; Karpenter pools scale to zero):",
        *("  " + r for r in _table(rows)),
        f"  total: {total}",
        f"  not estimated (paid by use): {C.USAGE_BASED}",
        "",
        "Sources:",
    ]
    for key in report.sources():
        s = P.SOURCES[key]
        dated = f"figures of {s.dated}, " if s.dated else ""
        lines.append(f"  [{key}] {s.title}; {dated}checked {s.checked}: {s.url}")
    return lines


# --- the check ------------------------------------------------------------------------------------


def findings(report: C.CostReport, caps: CostCaps) -> list[Finding]:
    out: list[Finding] = []
    for j in report.jobs:
        cap, _ = caps.for_team(j.team)
        if cap is None:
            continue
        if j.hourly is None:
            msg = (
                f"job {j.name} ({j.pool}) has a cap of {usd(cap)}/h but its price is unknown "
                f"in {report.region} (no dated price for its node type), so the cap cannot be "
                "checked"
            )
        elif j.hourly > cap:
            c = j.choice
            assert c is not None
            msg = (
                f"job {j.name} costs {usd(j.hourly)}/h on-demand ({c.nodes} x {c.instance_type} "
                f"at {usd(c.on_demand.usd if c.on_demand else None)}/h), over the "
                f"{usd(cap)}/h cap for team {j.team}"
            )
        else:
            continue
        out.append(
            Finding(
                j.resource,
                "TF_COST_JOB_CAP",
                msg,
                RULES["TF_COST_JOB_CAP"],
                names=frozenset({j.name, j.resource}),
            )
        )
    for t in report.teams:
        _, cap = caps.for_team(t.name)
        if cap is None or not t.jobs:
            continue
        if t.jobs_hourly is None:
            msg = (
                f"team {t.name} has a cap of {usd(cap)}/h but the price of its jobs "
                f"({', '.join(t.jobs)}) is unknown, so the cap cannot be checked"
            )
        elif t.jobs_hourly > cap:
            msg = (
                f"team {t.name}'s declared jobs ({', '.join(t.jobs)}) cost "
                f"{usd(t.jobs_hourly)}/h on-demand together, over its {usd(cap)}/h cap"
            )
        else:
            continue
        out.append(
            Finding(
                f"team/{t.name}",
                "TF_COST_TEAM_CAP",
                msg,
                RULES["TF_COST_TEAM_CAP"],
                names=frozenset({t.name, t.namespace, f"team/{t.name}"}),
            )
        )
    return out


def check(ctx: PlanContext) -> CheckResult:
    if ctx.declared is None:
        return CheckResult()
    report = build_report(ctx)
    teams = {t.name for t in report.teams}
    caps = parse_caps(ctx.inventory.config.get(CAPS_KEY), teams)
    data = report.to_json()
    data["caps"] = caps.model_dump(by_alias=True)
    return CheckResult(
        findings=findings(report, caps),
        sections=[Section(SECTION_TITLE, render(report), data)],
    )
