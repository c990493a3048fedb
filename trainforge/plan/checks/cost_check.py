"""Plan check: the cost table (per job, per team, the platform) and the $/hour caps and
monthly budgets of `trainforge-policy:costCaps` (the model: trainforge/stack/policy.py). What
each rule judges, and how to waive it: docs/cost.md, "Caps".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from trainforge.jobs.duration import DEADLINE, duration_text
from trainforge.plan import cost as C
from trainforge.plan import price_facts as P
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import queues
from trainforge.plan.price_facts import usd
from trainforge.stack.policy import CAPS_KEY, WAIVERS_KEY, CostCaps, parse_caps

SECTION_TITLE = "Cost"

RULES = {
    "TF_COST_JOB_CAP": "use a cheaper pool or fewer workers, raise "
    f"{CAPS_KEY}.jobPerHour (or its per-team override), or waive it for this job with a reason",
    "TF_COST_TEAM_CAP": "run fewer of the team's jobs at once, use cheaper pools, raise "
    f"{CAPS_KEY}.teamPerHour for the team, or waive it for the team with a reason",
    "TF_COST_TEAM_BUDGET": "run fewer or shorter jobs, use cheaper pools, raise "
    f"{CAPS_KEY}.teams.<team>.teamPerMonth, or waive it for the team with a reason",
    "TF_COST_CLUSTER_BUDGET": "shrink the always-on platform or the jobs, raise "
    f"{CAPS_KEY}.clusterPerMonth, or waive it for the cluster with a reason",
    # the registry's words; a finding's fix is PRICE_MISSING_FIX, built for its resource
    "TF_COST_PRICE_MISSING": "waive it for the resource with a reason (the figures that need "
    "the price stay unknown), or a maintainer adds the price to the price table",
}

# The fix of a cap or budget the price table cannot price: the user's route first (a ready
# waiver entry, with what waiving costs: the check, and the figures that stay `unknown`), the
# maintainer's second (the table is package data; regenerating it needs upstream files).
PRICE_MISSING_FIX = (
    "waive it in the stack (the price table is the cause, not the jobs; {figures} unknown "
    "and the plan does not check its {limit} {kind} until the table has the price): add to "
    '{waivers} `- {{resource: {resource}, rule: TF_COST_PRICE_MISSING, reason: "<who watches '
    'the {kind} instead>"}}` with its <...> reason replaced by yours (the placeholder is '
    "refused); or a trainforge maintainer adds the price "
    "with its source to trainforge/plan/data/price_facts.json (tools/regen_price_facts.py, "
    "docs/cost.md)"
)
# what stays unknown without the price, per cap or budget (`what` names the job, team, cluster)
UNKNOWN_FIGURES = {
    "TF_COST_JOB_CAP": ("{what}'s $/h and run cost stay", "cap"),
    "TF_COST_TEAM_CAP": ("{what}'s $/h running at once stays", "cap"),
    "TF_COST_TEAM_BUDGET": ("{what}'s month stays", "budget"),
    "TF_COST_CLUSTER_BUDGET": ("{what}'s month stays", "budget"),
}

# The fix of a budget that cannot be judged because a run's length is unknown: the missing
# duration is the cause, not the spending, so cutting jobs or raising the budget fixes nothing.
NO_DURATION_FIX = (
    "give {jobs} a duration: set expectedStepSeconds (the seconds one step takes, measured: "
    "docs/cost.md), or runPolicy.activeDeadlineSeconds as a ceiling; or waive it with a reason"
)
# The fix of a cap that cannot be judged although every price is known: what keeps the job's
# $/h unknown (no type of its pool fits it, no worker admits it) is the cause.
NO_RATE_FIX = (
    "the job's $/h is unknown for the reason given, not because it costs too much: fix that "
    "(a pool whose types fit its pods, a worker that admits it), or waive it with a reason"
)


def build_report(ctx: PlanContext, today: dt.date | None = None) -> C.CostReport:
    region = C.plan_region(ctx.inventory)
    report = C.CostReport(region=region, today=today or dt.date.today())
    declared = ctx.declared
    pools: dict[str, Any] = {}
    teams: dict[str, Any] = {}
    for contract in declared.contracts if declared else []:
        pools.update(contract.pools)
        teams.update(contract.teams)
    # what runs at once is what Kueue admits (every job without Kueue queues)
    admitted = queues.outcomes(ctx) if declared and declared.jobs else {}
    # when each run holds its nodes: a waiting job after the ones ahead of it end, a preempted
    # one until its eviction and again from its readmission (without Kueue: at once)
    spans = {(w.team, w.job): tuple(w.spans) for w in queues.simulate(ctx)[0]} if admitted else {}
    for d in declared.jobs if declared else []:
        obj = queues.workload_object(ctx, d.spec.name, d.target.namespace)
        resource = obj.ident if obj is not None else f"{d.target.namespace}/{d.spec.name}"
        state = admitted.get((d.spec.team, d.spec.name), ("runs", ""))
        if ctx.fleet_workers:
            # MultiKueue runs it on a worker that admits it, priced there (docs/fleet.md)
            where = queues.dispatches(ctx).get((d.spec.team, d.spec.name))
            row = C.JobCost(d.spec.name, d.spec.team, d.target.pool.name, resource, None,
                            False, C.NO_WORKER_RUN, *state)  # fmt: skip
            report.jobs.append(C.fleet_job_cost(row, where.runs if where else ()))
        else:
            run = queues.job_run(ctx, d)
            held = spans.get((d.spec.team, d.spec.name), run.spans) if state[0] != "never" else ()
            report.jobs.append(replace(run, admission=state[0], admission_reason=state[1],
                                       spans=held))  # fmt: skip
        teams.setdefault(d.target.team.name, d.target.team)
        pools.setdefault(d.target.pool.name, d.target.pool)
    placed = [(p, region) for p in pools.values()]
    if ctx.fleet_workers:
        placed = [
            (p, w.region)
            for w in ctx.fleet_workers.values()
            if w.planned and w.region and w.declared
            for c in w.declared.contracts
            for p in c.pools.values()
        ]
    report.teams = C.team_costs(teams, placed, report.jobs)
    report.fixed = C.fixed_costs(ctx.inventory.resources, region, report.today)
    return report


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip


def render(report: C.CostReport) -> list[str]:
    lines = [
        f"USD, list prices in {report.region} from the price facts table of {P.FACTS_DATE} "
        "(trainforge/plan/price_facts.py); 'unknown' = no dated price, never guessed",
        "",
    ]
    if report.jobs:
        fleet_ = any(j.dispatched for j in report.jobs)
        rows = [
            ["job", "team", *(["worker"] if fleet_ else []), "starts", "run cost",
             "expected run", "duration basis", "node type", "nodes", "$/h on-demand", "$/h spot"]
        ]  # fmt: skip
        for j in report.jobs:
            if not j.dispatched:
                rows.append(_row(j, j, ["-"] if fleet_ else []))
            for r in j.runs or ():
                rows.append(_row(j, r.cost, [r.worker]))
            if j.runs == ():
                rows.append(_row(j, None, ["none"]))
        lines += [
            "Jobs (run cost = $/h with every pod running x expected run; 'starts' is the queue "
            "simulation's: at once, or waits for quota):",
            *_table(rows),
        ]
        for j in report.jobs:
            pad = " " * len(j.name)
            if (where := j.fleet_line()) is not None:
                lines.append(f"  {j.name}: {where}")
                for r in j.runs or ():
                    lines += _run_lines(r.cost, f"{r.worker}: pool {r.pool} in {r.region}", pad)
                    if r.cost is None:
                        lines.append(f"  {pad}  {r.worker}: {r.why}")
            else:
                lines += _run_lines(j, f"{j.name}: pool {j.pool}", "")
            if not j.runs_at_once:
                lines.append(f"  {pad}  {STARTS[j.admission]}: {j.admission_reason}")
        lines += running_lines(report)
        for j in report.jobs:
            if price := j.missing_price(report.region):
                lines.append(
                    f"  warning: the price table has no {price}: job {j.name}'s cost is unknown "
                    "(package data: a trainforge maintainer adds it, tools/regen_price_facts.py)"
                )
        lines.append("")
    if report.teams:
        rows = [
            ["team", RUNNING_HEADER, "waiting", "month (each job run once)",
             "quota ceiling $/h", "quota ceiling $/month"]
        ]  # fmt: skip
        for t in report.teams:
            c = t.ceiling
            ceiling = ["unlimited"] * 2 if c.unlimited else [usd(c.hourly), usd(c.monthly)]
            waiting = ", ".join(t.waiting) or "-"
            month = ("<= " if t.month_at_most and t.month is not None else "") + usd(t.month)
            rows.append([t.name, usd(t.jobs_hourly), waiting, month, *ceiling])
        lines += ["Teams:", *_table(rows)]
        lines += [f"  {t.name}: quota ceiling = {t.ceiling.detail}" for t in report.teams]
        lines += [
            "  (a team's quota is what its namespace may hold: with Kueue its nominal quota "
            "plus what it may borrow from its cohort, docs/teams.md)",
            "",
        ]
    rows = [["item", "quantity", "$/h", "$/month", "note"]]
    for i in report.fixed:
        rows.append([i.what, i.quantity, i.per_hour, usd(i.monthly), i.note])
    total = report.fixed_total()
    lines += [
        "Platform (fixed, while the stack exists; Karpenter pools scale to zero):",
        *_table(rows),
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


def _row(j: C.JobCost, c: C.JobCost | None, worker: list[str]) -> list[str]:
    """Job `j`'s row with the figures of `c` (itself, or its run on a worker; None: none)."""
    choice = c.choice if c else None
    spot_possible = bool(c and c.spot_possible)
    spot = (choice.hourly_spot if choice else None) if spot_possible else None
    duration = c.duration if c else j.duration
    run = duration.seconds
    ceiling = "<= " if duration.ceiling else ""
    return [
        j.name,
        j.team,
        *worker,
        STARTS[j.admission],
        ceiling + usd(c.run_cost if c else None),
        ceiling + ("unknown" if run is None else duration_text(run)),
        duration.source + (f", cut at {DEADLINE}" if duration.cut else ""),
        choice.types if choice else _no_node(c),
        str(choice.node_count) if choice else "-",
        usd(c.hourly if c else None),
        usd(spot) if spot_possible else "n/a (on-demand pool)",
    ]


def _no_node(c: C.JobCost | None) -> str:
    if c is None:
        return "-"
    return "none: pool limits" if c.no_node else "none fits"


def _run_lines(c: C.JobCost | None, head: str, pad: str) -> list[str]:
    if c is None:
        return []
    reason = c.choice.reason if c.choice else c.why_no_node
    indent = " " * (len(head.split(":", 1)[0]) + len(pad))
    out = [
        f"  {pad}{head}; {reason}",
        f"  {indent}  duration: {c.duration.detail}{c.duration.cut_note}",
    ]
    if launch := c.launch_line():
        out.append(f"  {indent}  {launch}")
    return out


STARTS = {"runs": "at once", "waits": "waits", "never": "never"}
# "running at once $/h" sums each job's own cheapest nodes; Karpenter may pack pods of several
# jobs on one node, which the plan does not model, and says so wherever it prints the sum
OWN_NODES = "each job on its own nodes"
# a fleet job at its dearest worker, so that a cap holds wherever MultiKueue runs it
DEAREST = ", each at its dearest worker"
RUNNING_HEADER = "running at once $/h (own nodes)"
# a job's share of a node group's desiredSize nodes: paid in the platform's fixed cost already
IN_FIXED = "their {}/h on node groups' always-on nodes is in it"


def running_lines(report: C.CostReport) -> list[str]:
    """What runs at once and what waits, as the verdict prints it."""
    running = [j for j in report.jobs if j.runs_at_once]
    unpriced = [j.name for j in running if j.hourly is None]
    in_fixed = report.running_in_fixed
    rate = usd(report.running_hourly - in_fixed) + (
        f" + unknown ({', '.join(unpriced)})" if unpriced else ""
    )
    # those nodes are in the platform's figure already (docs/cost.md)
    beyond = f" beyond the platform's ({IN_FIXED.format(usd(in_fixed))})" if in_fixed else ""
    dearest = DEAREST if any(j.dispatched for j in report.jobs) else ""
    out = [
        f"  running at once: {len(running)} of {len(report.jobs)} job(s), {rate}/h{beyond} with "
        f"{OWN_NODES}{dearest} (Karpenter may pack pods of several jobs onto shared nodes, "
        "for less)"
    ]
    return out + [f"  {waiting_line(j.to_json())}" for j in report.jobs if not j.runs_at_once]


def waiting_line(job: dict[str, Any]) -> str:
    """A job that does not run at once, from its data row (the verdict reads it for a base's
    row too); a deadline's run cost is a ceiling."""
    what = "never admitted" if job.get("admission") == "never" else "waits"
    at_most = "<= " if job.get("runCostBasis") == DEADLINE else ""
    return (
        f"{what}: {job.get('team')}/{job.get('name')}, {usd(job.get('onDemandPerHour'))}/h when "
        f"it starts, run cost {at_most}{usd(job.get('runCost'))} (not counted as running)"
    )


def _judge(
    who: tuple[str, frozenset[str], str],
    rule: str,
    limit: str,
    prices: list[str],
    unknown: str,
    over: str | None,
    unknown_fix: str = NO_RATE_FIX,
) -> list[Finding]:
    """One cap or budget of `who` (resource, names, words): a missing price
    (TF_COST_PRICE_MISSING: the table is the fix), an unknown figure (`unknown`, whose fix is
    its cause: `unknown_fix`), or over it (`over`, the rule's fix)."""
    resource, names, what = who
    fix = unknown_fix if unknown and not prices else None
    if prices:
        figures, kind = UNKNOWN_FIGURES[rule]
        fix = PRICE_MISSING_FIX.format(
            figures=figures.format(what=what),
            limit=limit,
            kind=kind,
            resource=resource,
            waivers=WAIVERS_KEY,
        )
        rule = "TF_COST_PRICE_MISSING"
        unknown = (
            f"{what} cannot be checked against {limit}: the price table has no "
            f"{'; '.join(sorted(set(prices)))} (trainforge/plan/data/price_facts.json of "
            f"{P.FACTS_DATE})"
        )
    msg = unknown or over
    return [Finding(resource, rule, msg, fix or RULES[rule], names=names)] if msg else []


def _duration_fix(jobs: Iterable[str]) -> str:
    names = sorted(set(jobs))
    return NO_DURATION_FIX.format(jobs=f"job{'s' if len(names) > 1 else ''} {', '.join(names)}")


def _no_month(what: str, budget: float, jobs: Iterable[str]) -> str:
    return (
        f"{what} has a budget of {usd(budget)}/month but the run cost of {', '.join(jobs)} is "
        "unknown (no expected duration: set expectedStepSeconds)"
    )


def findings(report: C.CostReport, caps: CostCaps) -> list[Finding]:
    out: list[Finding] = []
    for j in report.jobs:
        cap, _ = caps.for_team(j.team)
        if cap is None:
            continue
        c, where = j.choice, ""
        if j.runs:  # a fleet's job: the cap holds on every worker that may run it
            dear = max(j.runs, key=lambda r: r.hourly or 0.0)
            c = dear.cost.choice if dear.cost else None
            where = f" on worker {dear.worker}, the dearest that may run it"
        price = j.missing_price(report.region)
        out += _judge(
            (j.resource, frozenset({j.name, j.resource}), f"job {j.name}"),
            "TF_COST_JOB_CAP",
            f"{usd(cap)}/h",
            [price] if price else [],
            _unpriced_job(j, cap) if j.hourly is None else "",
            f"job {j.name} costs {usd(j.hourly)}/h on-demand{where} ({c.price_words()}), over "
            f"the {usd(cap)}/h cap for team {j.team}"
            if c and j.hourly is not None and C.cents(j.hourly) > cap
            else None,
        )
    for t in report.teams:
        _, cap = caps.for_team(t.name)
        team = f"team/{t.name}"
        who = (team, frozenset({t.name, t.namespace, team}), f"team {t.name}")
        mine = [j for j in report.jobs if j.team == t.name]
        dear = DEAREST if any(j.dispatched for j in mine) else ""
        if cap is not None and t.jobs:
            waits = f"; waiting, not counted: {', '.join(t.waiting)}" if t.waiting else ""
            out += _judge(
                who,
                "TF_COST_TEAM_CAP",
                f"{usd(cap)}/h",
                [p for j in mine if j.runs_at_once and (p := j.missing_price(report.region))],
                _unpriced_team(t.name, cap, mine) if t.jobs_hourly is None else "",
                f"team {t.name}'s jobs that run at once ({', '.join(t.jobs)}) cost "
                f"{usd(t.jobs_hourly)}/h on-demand together ({OWN_NODES}{dear}), over its "
                f"{usd(cap)}/h cap{waits}"
                if t.jobs_hourly is not None and C.cents(t.jobs_hourly) > cap
                else None,
            )
        budget = caps.month_for_team(t.name)
        if budget is None or not mine:
            continue
        out += _judge(
            who,
            "TF_COST_TEAM_BUDGET",
            f"{usd(budget)}/month",
            [p for j in mine if (p := j.missing_price(report.region))],
            _no_month(f"team {t.name}", budget, t.month_unknown) if t.month is None else "",
            f"team {t.name}'s declared jobs cost {_at_most(t.month_at_most)}{usd(t.month)} in a "
            f"month (each run once{dear}: "
            + ", ".join(f"{j.name} {_at_most(j.duration.ceiling)}{usd(j.month_cost)}" for j in mine)
            + f"), over its {usd(budget)}/month budget"
            if t.month is not None and C.cents(t.month) > budget
            else None,
            _duration_fix(t.month_unknown),
        )
    budget = caps.cluster_per_month
    if budget is not None:
        month = cluster_month(report)
        unknown = [n for t in report.teams for n in t.month_unknown]
        out += _judge(
            ("cluster", frozenset({"cluster"}), "the cluster"),
            "TF_COST_CLUSTER_BUDGET",
            f"{usd(budget)}/month",
            report.fixed_missing()
            + [p for j in report.jobs if (p := j.missing_price(report.region))],
            _no_month("the cluster", budget, unknown) if month is None else "",
            f"the cluster costs {_at_most(any(t.month_at_most for t in report.teams))}"
            f"{usd(month)} in a month (platform "
            f"{usd(report.fixed_monthly_known)}/month + every declared job "
            f"run once{_less_in_fixed(report)}), over its {usd(budget)}/month budget"
            if month is not None and C.cents(month) > budget
            else None,
            _duration_fix(unknown),
        )
    return out


def _at_most(ceiling: bool) -> str:
    """ "at most " before a figure that is a ceiling (a run timed by its deadline)."""
    return "at most " if ceiling else ""


def _unpriced_team(team: str, cap: float, jobs: list[C.JobCost]) -> str:
    """Why a team's cap cannot be checked though no price is missing."""
    whys = [f"job {j.name}: {j.why_no_node}" for j in jobs
            if j.runs_at_once and j.hourly is None and not j.dispatched]  # fmt: skip
    why = "; ".join(whys) or "no type of a pool fits a pod of its jobs"
    return f"team {team} has a cap of {usd(cap)}/h but {why}"


def _unpriced_job(j: C.JobCost, cap: float) -> str:
    """Why a job's cap cannot be checked though no price is missing."""
    head = f"job {j.name} ({j.pool}) has a cap of {usd(cap)}/h but"
    if j.runs == ():
        return f"{head} no worker of the fleet admits it, so the cap cannot be checked"
    if j.runs:
        why = "; ".join(f"{r.worker}: {r.why}" for r in j.runs if r.hourly is None)
        return f"{head} its $/h is unknown on a worker that may run it ({why})"
    return f"{head} {j.why_no_node}, so the cap cannot be checked"


def cluster_month(report: C.CostReport) -> float | None:
    """The platform's month plus every declared job run once, less the runs' part on node
    groups' always-on nodes (the platform's month pays those nodes; None: a figure is unknown)."""
    if report.fixed_unknown or any(t.month is None for t in report.teams):
        return None
    jobs = sum(t.month or 0 for t in report.teams) - report.run_in_fixed(P.HOURS_PER_MONTH)
    return report.fixed_monthly_known + jobs


def _less_in_fixed(report: C.CostReport) -> str:
    """What `cluster_month` left out of the jobs' runs, in words ("" if nothing)."""
    paid = report.run_in_fixed(P.HOURS_PER_MONTH)
    if not paid:
        return ""
    return f", less their {usd(paid)} on node groups' always-on nodes, in the platform's"


def check(ctx: PlanContext) -> CheckResult:
    if ctx.declared is None:
        return CheckResult()
    report = build_report(ctx)
    teams = {t.name for t in report.teams}
    caps = parse_caps(ctx.inventory.config.get(CAPS_KEY), teams)
    data = report.to_json()
    data["caps"] = caps.model_dump(by_alias=True)
    data["clusterMonth"] = cluster_month(report)
    return CheckResult(
        findings=findings(report, caps),
        sections=[Section(SECTION_TITLE, render(report), data)],
    )
