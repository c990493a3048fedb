"""The cost figures say what the cluster will run: a job waiting for quota runs after the one
ahead of it, on the nodes that one leaves (a node group's always-on nodes too).

The stack: prod (its `YOURS:` values filled in) with two llm jobs of 4 x 8 GPUs on the
p4d-reserved group (2 nodes always on, in the platform's fixed cost) where llm is guaranteed 32
GPUs, so `second` waits for `first` (1 h each), and a CPU job timed by its
activeDeadlineSeconds (a ceiling). By hand: `first` runs 0-1 h on the 2 desired nodes + 2 more,
`second` 1-2 h on the same 2 desired nodes + 2 more; the cluster's month adds 2 + 2 p4d
node-hours to the platform's, not the 6 counted before (`second` was counted on 4 new nodes).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace

import pytest

from tests.conftest import ROOT, prod_own_values
from trainforge.jobs import duration
from trainforge.plan import core, cost, price_facts
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check
from trainforge.stack.file import read_stack_file


def _p4d(name: str) -> dict:
    return {"name": name, "team": "llm", "pool": "p4d-reserved", "workers": 4,
            "gpusPerWorker": 8, "model": "mlp", "steps": 3600, "expectedStepSeconds": 1.0}  # fmt: skip


DEADLINE_JOB = {"name": "cpu-deadline", "team": "llm", "pool": "training-workloads", "workers": 2,
                "model": "mlp", "steps": 100, "runPolicy": {"activeDeadlineSeconds": 5400}}  # fmt: skip


@pytest.fixture(scope="module")
def planned():
    overrides = prod_own_values()
    jobs = json.loads(read_stack_file(ROOT / "Pulumi.prod.yaml").engine()["trainforge:jobs"])
    overrides["trainforge:jobs"] = json.dumps([*jobs, _p4d("first"), _p4d("second"), DEADLINE_JOB])
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=dt.date(2026, 11, 30))


def _known_fixed(report: cost.CostReport) -> cost.CostReport:
    """The report without its unpriced always-on items (FSx, KMS), so a month is a figure."""
    return replace(report, fixed=[i for i in report.fixed if i.hourly is not None])


def test_a_waiting_job_runs_on_the_desired_nodes_the_one_ahead_left(planned):
    _, report = planned
    jobs = {j.name: j for j in report.jobs}
    first, second = jobs["first"], jobs["second"]
    assert (first.admission, second.admission) == ("runs", "waits")
    assert (first.start, second.start) == (0.0, 3600.0)  # after first's hour
    assert first.duration.seconds == second.duration.seconds == 3600.0
    p4d = price_facts.ec2_on_demand("us-east-1", "p4d.24xlarge").usd
    assert first.choice.nodes == second.choice.nodes == 4
    # each takes the group's 2 desired nodes in its own hour
    by_job = dict(zip((j.name for j in report.jobs), report.in_fixed_hourly, strict=True))
    assert by_job["first"] == by_job["second"] == pytest.approx(2 * p4d, abs=0.005)  # to the cent
    report = _known_fixed(report)
    platform = report.fixed_monthly_known
    others = jobs["gpt-350m-fsdp"].run_cost + jobs["cpu-deadline"].run_cost
    by_hand = platform + 2 * p4d * 1 + 2 * p4d * 1 + others  # only the nodes beyond the 2
    assert cost_check.cluster_month(report) == pytest.approx(by_hand, abs=0.02)
    # the verdict's share on the always-on nodes is both jobs' (the JSON the verdict reads)
    assert report.to_json()["runCostInFixed"] == pytest.approx(2 * 2 * p4d, abs=0.02)


def test_a_run_takes_the_desired_nodes_free_when_it_starts_within_the_month():
    group = cost.FixedItem("node group g", "2 nodes", 2 * 10.0, pool="g", instance_type="t",
                           nodes=2)  # fmt: skip
    choice = cost.NodeChoice("t", 2, 1, price_facts.Price(10.0, "hour", "x"), None, "")
    two_hours = duration.Duration(7200, "estimate", "")

    def job(name, start, admission="waits"):
        spans = () if start is None else ((start, None),)
        return cost.JobCost(name, "a", "g", name, choice, False, two_hours, admission=admission,
                            spans=spans)  # fmt: skip

    report = cost.CostReport("r", dt.date(2026, 11, 30), fixed=[group])
    # a at once (0-2 h), b after it (2-4 h), c while a runs (1 h: none free), d unknown start
    report.jobs = [job("a", 0.0, "runs"), job("b", 7200.0), job("c", 3600.0), job("d", None)]
    assert report.in_fixed_hourly == [20.0, 20.0, 0.0, 0.0]
    assert report.running_in_fixed == 20.0  # only a runs now
    assert report.run_in_fixed() == 80.0  # a's 2 h and b's 2 h on the 2 desired nodes
    assert report.run_in_fixed(most_hours=3) == 60.0  # b's second hour is past the window


# --- a preempted job's nodes are free until it is readmitted -----------------------------------


def _llm(name: str, workers: int, hours: int, priority: str) -> dict:
    return {**_p4d(name), "workers": workers, "steps": 3600 * hours, "priority": priority}


@pytest.fixture(scope="module")
def preempted():
    """prod with four llm jobs on p4d-reserved (2 nodes always on; llm guaranteed 32 GPUs =
    4 nodes there, Kueue's withinClusterQueue LowerPriority): h1 (high, 2 nodes, 1 h) and h2
    (high, 2 nodes, 5 h) run at once; m (normal, 4 nodes, 1 h) and l (low, 2 nodes, 10 h)
    wait. By hand: h1 ends at 1 h and l starts on its 2 nodes; h2 ends at 5 h and m preempts l
    (its 4 h run are kept: it resumes from its checkpoint); m ends at 6 h and l is readmitted
    for its last 6 h, to 12 h. (result, report)"""
    overrides = prod_own_values()
    jobs = json.loads(read_stack_file(ROOT / "Pulumi.prod.yaml").engine()["trainforge:jobs"])
    ours = [_llm("h1", 2, 1, "high"), _llm("h2", 2, 5, "high"), _llm("m", 4, 1, "normal"),
            _llm("l", 2, 10, "low")]  # fmt: skip
    overrides["trainforge:jobs"] = json.dumps([*jobs, *ours])
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=dt.date(2026, 11, 30))


def test_a_preempted_jobs_always_on_nodes_are_free_until_it_is_readmitted(preempted):
    """l's pods are gone from 5 h to 6 h (Kueue evicts a preempted workload's pods), so m takes
    the group's 2 desired nodes then: the runs on them are h1's 1 h, l's 4 h + 6 h and m's
    1 h, each on 2 nodes. Before, l held them from 1 h to 11 h (its first admission plus its
    run), m took none and l's last hour (11-12 h) was not on them."""
    from trainforge.plan import verdict
    from trainforge.plan.checks import queues

    result, report = preempted
    hour = 3600.0
    timeline = {r["job"]: r for r in verdict.section_data(result, queues.QUEUE_TITLE)}
    assert timeline["l"]["preemptedBy"] == "m"
    jobs = {j.name: j for j in report.jobs}
    assert jobs["l"].held() == [(1 * hour, 5 * hour), (6 * hour, 12 * hour)]
    assert jobs["m"].held() == [(5 * hour, 6 * hour)]
    for name in ("h1", "h2", "m", "l"):  # the cost's spans are the queue section's timeline
        row, held = timeline[name], jobs[name].held()
        assert (held[0][0], held[-1][1]) == (row["expectedStartSeconds"], row["expectedEndSeconds"])
        assert sum(b - a for a, b in held) == row["durationSeconds"]  # the gap is not its run
    p4d = price_facts.ec2_on_demand("us-east-1", "p4d.24xlarge").usd
    rows = {r["name"]: r for r in report.rows()}
    assert rows["m"]["inFixedPerHour"] == pytest.approx(2 * p4d, abs=0.005)  # was $0.00
    assert rows["m"]["runCostInFixed"] == pytest.approx(2 * p4d, abs=0.005)
    assert rows["l"]["runCostInFixed"] == pytest.approx(2 * p4d * 10, abs=0.005)
    assert rows["h2"]["runCostInFixed"] == 0  # h1 took both desired nodes at 0
    assert report.to_json()["runCostInFixed"] == pytest.approx(2 * p4d * 12, abs=0.02)
    # the cluster's month: only the node-hours beyond the 2 desired nodes are added
    report = _known_fixed(report)
    own = sum(jobs[n].run_cost for n in ("h1", "h2", "m", "l"))
    by_hand = report.fixed_monthly_known + own - 2 * p4d * 12 + jobs["gpt-350m-fsdp"].run_cost
    assert cost_check.cluster_month(report) == pytest.approx(by_hand, abs=0.05)


def test_each_admission_takes_the_desired_nodes_left_free_then():
    """By hand, on a group of 2 desired nodes at $10/h each: l runs 0-1 h and, preempted, 2-3 h;
    m runs 1-2 h in l's gap and takes both nodes; n starts at 2.5 h while l holds them."""
    group = cost.FixedItem("node group g", "2 nodes", 2 * 10.0, pool="g", instance_type="t",
                           nodes=2)  # fmt: skip
    choice = cost.NodeChoice("t", 2, 1, price_facts.Price(10.0, "hour", "x"), None, "")

    def job(name, hours, spans):
        run = duration.Duration(hours * 3600, "estimate", "")
        return cost.JobCost(name, "a", "g", name, choice, False, run, admission="waits",
                            spans=spans)  # fmt: skip

    report = cost.CostReport("r", dt.date(2026, 11, 30), fixed=[group])
    report.jobs = [job("l", 2, ((0.0, 3600.0), (7200.0, None))), job("m", 1, ((3600.0, None),)),
                   job("n", 1, ((9000.0, None),))]  # fmt: skip
    assert report.jobs[0].held() == [(0.0, 3600.0), (7200.0, 10800.0)]  # its last hour left
    # preempted in the scheduling cycle that admitted it (Kueue at 0): it held nothing then
    assert job("x", 1, ((0.0, 0.0), (3600.0, None))).held() == [(3600.0, 7200.0)]
    assert report.in_fixed_hourly == [20.0, 20.0, 0.0]
    assert report.run_in_fixed() == 60.0  # l's 2 h and m's 1 h on the 2 nodes
    assert report.run_in_fixed(most_hours=2.5) == 50.0  # l's second span half inside
    # what runs at once is priced at its first admission: k starts at 0 on none of them (l
    # took both) and is readmitted at 3 h onto both: its $/h now is not on them
    report.jobs = [*report.jobs[:1], job("k", 1, ((0.0, 1800.0), (10800.0, None)))]
    assert report.in_fixed_hourly == [20.0, 0.0]
    assert report.run_in_fixed() == 40.0 + 10.0  # k's last half hour on the 2 nodes


# --- every figure a line prints is derivable from the table ------------------------------------


def _money(text: str) -> float:
    return float(text.removeprefix("<= ").removeprefix("$").replace(",", ""))


def _cent(text: str) -> float:
    """A printed figure to the cent, as a reader rounds it by hand (half up: $43.915 is
    $43.92)."""
    from decimal import ROUND_HALF_UP, Decimal

    value = Decimal(text.removeprefix("<= ").removeprefix("$").replace(",", ""))
    return float(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _rows(lines: list[str], header: str) -> dict[str, list[str]]:
    """A table of the rendered report (the one whose header starts `header`), by first cell."""
    import re

    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {header}"))
    out = {}
    for line in lines[at + 1 :]:
        cells = re.split(r"\s{2,}", line.strip())
        if not line.startswith("  ") or line.startswith("   ") or len(cells) < 4:
            break
        out[cells[0]] = cells
    return out


def test_the_verdicts_and_the_teams_sums_are_the_tables_rows_added(planned):
    """Each figure is the sum of the rows as printed (to the cent), with `<=`/`at most` where a
    row is a ceiling: before, the verdict's run costs read $330.80 and llm's month $177.96
    where the rows add to $330.79 and $177.95 (unrounded sums), and llm's month, which holds a
    deadline's ceiling, had no `<=`."""
    from trainforge.plan import verdict

    result, report = planned
    lines = cost_check.render(report)
    jobs = _rows(lines, "job ")
    assert set(jobs) == {"gpt-350m-fsdp", "first", "second", "cpu-deadline"}
    assert jobs["cpu-deadline"][3].startswith("<= ")  # its run cost: a ceiling
    runs = round(sum(_money(r[3]) for r in jobs.values()), 2)
    running = round(sum(_money(r[8]) for r in jobs.values() if r[2] == "at once"), 2)
    group = _rows(lines, "item ")[
        "node group trainforge-prod-p4d-reserved (p4d.24xlarge, on-demand)"
    ]
    desired = _cent(group[2])  # the 2 desired nodes, in the platform's, to the cent
    line = verdict.cost_lines(result, None)[1]
    assert f"${running - desired:,.2f}/h while running (their ${desired:,.2f}/h on node" in line
    # first's hour and second's hour each on the 2 desired nodes
    assert line.endswith(
        f"run costs at most ${runs:,.2f} in all (of which ${2 * desired:,.2f} on node groups' "
        "always-on nodes, paid in the platform's)"
    ), line
    llm = _rows(lines, "team ")["llm"]
    mine = [r for r in jobs.values() if r[1] == "llm"]
    assert llm[3] == f"<= ${round(sum(_money(r[3]) for r in mine), 2):,.2f}"
    assert llm[1] == f"${round(sum(_money(r[8]) for r in mine if r[2] == 'at once'), 2):,.2f}"
    # the budget finding says the same figure, a ceiling too
    (f,) = cost_check.findings(
        report, cost_check.parse_caps({"teams": {"llm": {"teamPerMonth": 1}}}, {"llm", "vision"})
    )
    assert f"team llm's declared jobs cost at most {llm[3][3:]} in a month" in f.message


def _doc() -> str:
    """docs/cost.md with its lines joined (an example may wrap)."""
    return " ".join((ROOT / "docs/cost.md").read_text().split())


def test_devs_verdict_adds_its_rows_as_docs_cost_md_says():
    """dev's shipped stack: three m5.2xlarge jobs at $0.384/h and gpt-small-fsdp at $1.052/h;
    the rows print $0.38 and $1.05, the verdict their sum, $2.19 (it printed $2.20)."""
    from tests.conftest import shipped_plan
    from trainforge.plan import verdict

    result = shipped_plan("dev")
    rows = verdict.section_data(result, verdict.COST_TITLE)["jobs"]
    assert sorted(f"${r['onDemandPerHour']:,.2f}" for r in rows) == ["$0.38"] * 3 + ["$1.05"]
    line = verdict.cost_lines(result, None)[1]
    assert line.startswith("      + jobs: 4 of 4 run at once, $2.19/h while running, "), line
    said = "run costs $0.79 for the priced jobs + unknown for 3 jobs without a run length: "
    assert line.endswith(said + "research/mnist-ddp, research/mnist-user, research/resumable")
    doc = _doc()
    assert "`$0.38` x 3 + `$1.05` = `$2.19/h while running`" in doc
    assert (
        f"`{said}...` (no steps x step time, estimate or deadline to multiply by; the dev "
        "stack's verdict today)" in doc
    )


def test_the_pr_markdown_marks_ceilings_and_changes_the_figures_as_printed():
    """A PR's cost markdown says `<=` where the report does, and a change is the printed
    figures' ($11.34 -> $8.06 is -$3.28, not the unrounded -$3.29)."""
    from trainforge.plan.diff import cost_markdown, delta

    assert delta(11.344, 8.056) == "-$3.28"
    job = {"name": "j", "team": "t", "admission": "runs", "onDemandPerHour": 1.0,
           "runCost": 1.5, "runCostBasis": duration.DEADLINE, "nodes": 1, "instanceType": "x"}  # fmt: skip
    team = {"name": "t", "jobsOnDemandPerHour": 1.0, "monthEstimate": 1.5, "monthAtMost": True,
            "quotaCeilingPerMonth": 9.0}  # fmt: skip
    old = {"jobs": [], "teams": [], "fixedPerMonthKnown": 1.0}
    new = {"jobs": [job], "teams": [team], "fixedPerMonthKnown": 1.0}
    md = "\n".join(cost_markdown(old, new))
    assert "| `j` (t) | added | - → <= $1.50 | +$1.50 | activeDeadlineSeconds |" in md, md
    assert "| t | - → $1.00 | - → <= $1.50 | - → $9.00 |" in md, md


def test_the_platforms_total_is_its_columns_added(planned):
    """The platform table's $/h column adds up to the total the report and the verdict print:
    before, prod's items read $0.10 + $0.14 + $0.01 + $0.58 + $43.92 + $0.14 = $44.89 over a
    total of $44.88/h (3 NAT gateways at $0.045 and 3 IPv4 addresses at $0.005 are not whole
    cents); each $/h is now printed to a tenth of a cent, each $/month to the cent."""
    from trainforge.plan import verdict

    result, report = planned
    lines = cost_check.render(report)
    items = [r for r in _rows(lines, "item ").values() if r[2] != "unknown"]
    hourly = round(sum(_money(r[2]) for r in items), 2)
    monthly = round(sum(_money(r[3]) for r in items), 2)
    (total,) = [ln for ln in lines if ln.startswith("  total: ")]
    assert total.startswith(
        f"  total: at least ${hourly:,.2f}/h = ${monthly:,.2f}/month, 1 item(s)"
    )
    platform = verdict.cost_lines(result, None)[0]
    assert platform.startswith(f"Cost: platform ${hourly:,.2f}/h = ${monthly:,.2f}/month + unknown")
    assert "$0.015" in {r[2] for r in items}  # 3 IPv4 addresses at $0.005


def test_a_cap_is_judged_on_the_figure_the_finding_prints():
    """$87.8306/h prints as $87.83: under a $87.83 cap it passes (it used to read "costs
    $87.83/h ..., over the $87.83/h cap"); a cent above the cap is over it."""
    from trainforge.plan.checks import cost_check
    from trainforge.stack.policy import CostCaps

    choice = cost.NodeChoice("t", 1, 1, price_facts.Price(87.8306, "hour", "x"), None, "")
    job = cost.JobCost("j", "a", "g", "a/PyTorchJob/j", choice, False,
                       duration.Duration(3600, "estimate", ""))  # fmt: skip
    report = cost.CostReport("r", dt.date(2026, 11, 30), fixed=[])
    report.jobs = [job]

    def over(cap: float) -> list[str]:
        found = cost_check.findings(report, CostCaps(job_per_hour=cap))
        return [f.message for f in found if f.rule == "TF_COST_JOB_CAP"]

    assert over(87.83) == []
    (message,) = over(87.82)
    assert "costs $87.83/h" in message and "over the $87.82/h cap" in message
