"""Costs that agree with the queue, and monthly budgets.

The issue's stack: jobs that need 40 GPUs of a 32-GPU pool. Kueue admits one and the other
waits, so the cost lines count one job as running and list the other, with its cost, as
waiting; `TF_COST_TEAM_CAP` counts what runs at once. Budgets per team and for the cluster are
checked at plan and become AWS Budgets.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.conftest import ROOT, run_stack
from trainforge.plan import core, verdict
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check
from trainforge.stack.policy import CostCapsError

G5_12XL = 5.672  # us-west-2 on-demand $/h (price facts)
POOL = {
    "name": "gpu-workloads",
    "instanceTypes": ["g5.12xlarge"],
    "capacityTypes": ["on-demand"],
    "limits": {"cpu": "384", "memory": "1536Gi", "gpus": 32},
}
TEAM = {"name": "vision", "quota": {"gpus": "32", "cpu": "384", "memory": "1536Gi"}}


def _job(name: str, workers: int) -> dict:
    return {"name": name, "team": "vision", "pool": "gpu-workloads", "workers": workers,
            "gpusPerWorker": 4, "cpu": "40", "memory": "160Gi", "model": "mlp",
            "steps": 3600, "expectedStepSeconds": 1.0}  # fmt: skip


# 24 + 16 = 40 GPUs of a 32-GPU pool: one job waits
JOBS = [_job("first", 6), _job("second", 4)]
OVERRIDES = {
    "trainforge:nodePools": [POOL],
    "trainforge:teams": [TEAM],
    "trainforge:jobs": JOBS,
}


def _plan(caps: dict | None = None):
    extra = {"trainforge-policy:costCaps": caps} if caps else {}
    return core.plan_project(ROOT, "dev", standins=False, config_overrides={**OVERRIDES, **extra})


@pytest.fixture(scope="module")
def planned():
    result = _plan()
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=dt.date(2026, 11, 27))


def test_the_waiting_job_is_listed_with_its_cost_and_not_counted_as_running(planned):
    result, report = planned
    jobs = {j.name: j for j in report.jobs}
    assert jobs["first"].admission == "runs" and jobs["second"].admission == "waits"
    assert jobs["second"].admission_reason.startswith("waits for")
    # 6 pods of 4 GPUs on 4-GPU nodes: 6 x g5.12xlarge; run = 3600 steps x 1 s = 1 h
    assert jobs["first"].hourly == pytest.approx(6 * G5_12XL)
    assert jobs["second"].run_cost == pytest.approx(4 * G5_12XL)
    assert report.running_hourly == round(6 * G5_12XL, 2)  # the rows as printed, to the cent
    (team,) = report.teams
    assert team.jobs == ("first",) and team.waiting == ("second",)
    assert team.jobs_hourly == round(6 * G5_12XL, 2)
    # each job's month: its run cost (1 h each)
    assert team.month == round(6 * G5_12XL, 2) + round(4 * G5_12XL, 2)

    lines = verdict.cost_lines(result, None)
    assert lines[1] == (
        f"      + jobs: 1 of 2 run at once, ${6 * G5_12XL:,.2f}/h while running, "
        "each job on its own nodes; "
        f"run costs ${10 * G5_12XL:,.2f} in all"
    )
    assert lines[2] == (
        f"      waits: vision/second, ${4 * G5_12XL:,.2f}/h when it starts, run cost "
        f"${4 * G5_12XL:,.2f} (not counted as running)"
    )
    assert not any("/month" in ln for ln in lines[1:])  # a run is not a month
    doc = (ROOT / "docs/cost.md").read_text()
    assert lines[1] in doc and lines[2] in doc  # docs/cost.md's example is this plan's output
    text = "\n".join(cost_check.render(report))
    assert (
        f"running at once: 1 of 2 job(s), ${6 * G5_12XL:,.2f}/h with each job on its own nodes "
        "(Karpenter may pack pods of several jobs onto shared nodes, for less)"
    ) in text
    assert "running at once $/h (own nodes)" in text  # the Teams table's column says it too
    # the report's line says the same as the verdict's, word for word
    assert lines[2].strip() in [ln.strip() for ln in text.splitlines()], text


def test_the_team_cap_counts_what_runs_at_once(planned):
    _, report = planned
    # between the running job ($34.03/h) and both jobs ($56.72/h)
    caps = cost_check.parse_caps({"teams": {"vision": {"teamPerHour": 40}}}, {"vision"})
    assert not [f for f in cost_check.findings(report, caps) if f.rule == "TF_COST_TEAM_CAP"]
    caps = cost_check.parse_caps({"teams": {"vision": {"teamPerHour": 30}}}, {"vision"})
    (f,) = cost_check.findings(report, caps)
    assert f.rule == "TF_COST_TEAM_CAP"
    assert "jobs that run at once (first) cost $34.03/h" in f.message
    assert "waiting, not counted: second" in f.message


def test_a_team_budget_is_checked_against_its_jobs_run_costs(planned):
    _, report = planned
    ok = cost_check.parse_caps({"teams": {"vision": {"teamPerMonth": 20000}}}, {"vision"})
    assert not cost_check.findings(report, ok)
    tight = cost_check.parse_caps({"teams": {"vision": {"teamPerMonth": 50}}}, {"vision"})
    (f,) = cost_check.findings(report, tight)
    assert (f.rule, f.resource) == ("TF_COST_TEAM_BUDGET", "team/vision")
    assert f"cost ${10 * G5_12XL:,.2f} in a month" in f.message
    assert "over its $50.00/month budget" in f.message


def test_a_budget_whose_run_cost_is_unknown_names_the_jobs_and_what_to_set(planned):
    """A team's and the cluster's monthly budget cannot be judged while a job's run cost is
    unknown (no expected duration): each finding names the job and the key that fixes it."""
    import dataclasses

    _, report = planned
    teams, fixed = report.teams, report.fixed
    report.teams = [dataclasses.replace(t, month=None, month_unknown=("first",))
                    if t.name == "vision" else t for t in teams]  # fmt: skip
    report.fixed = []  # every always-on price known: the jobs decide
    caps = {"clusterPerMonth": 100000, "teams": {"vision": {"teamPerMonth": 20000}}}
    try:
        got = cost_check.findings(report, cost_check.parse_caps(caps, {"vision"}))
    finally:
        report.teams, report.fixed = teams, fixed
    unknown = "the run cost of first is unknown (no expected duration: set expectedStepSeconds)"
    assert {f.rule: (f.resource, f.message) for f in got} == {
        "TF_COST_TEAM_BUDGET": ("team/vision", f"team vision has a budget of $20,000.00/month "
                                f"but {unknown}"),
        "TF_COST_CLUSTER_BUDGET": ("cluster", "the cluster has a budget of $100,000.00/month "
                                   f"but {unknown}"),
    }  # fmt: skip
    # the fix is the missing duration, not the spending: a newcomer review found "run fewer or
    # shorter jobs ... raise teamPerMonth" under a finding whose cause was no duration at all
    for f in got:
        assert f.fix.startswith("give job first a duration: set expectedStepSeconds"), f.fix
        assert "fewer" not in f.fix and "raise" not in f.fix, f.fix


def test_a_missing_price_is_its_own_finding_that_blames_the_price_table(planned):
    _, report = planned
    job = report.jobs[0]
    unpriced = type(job.choice)(**{**job.choice.__dict__, "on_demand": None})
    report.jobs[0] = type(job)(**{**job.__dict__, "choice": unpriced})
    # without a cap it is a warning in the report (and the verdict), not a failure
    assert not cost_check.findings(report, cost_check.parse_caps({}))
    assert (
        "  warning: the price table has no on-demand g5.12xlarge in us-west-2: job first's "
        "cost is unknown"
    ) in "\n".join(cost_check.render(report))
    caps = cost_check.parse_caps({"jobPerHour": 1000})
    (f,) = cost_check.findings(report, caps)
    assert f.rule == "TF_COST_PRICE_MISSING"
    assert "the price table has no on-demand g5.12xlarge in us-west-2" in f.message
    assert "the price table is the cause" in f.fix and "fewer" not in f.fix
    report.jobs[0] = job


def test_team_per_month_is_accepted_checked_and_creates_an_aws_budget():
    result = _plan({"teams": {"vision": {"teamPerMonth": 20000}}})
    assert result.clean, [v.message for v in result.failing]
    over = _plan({"teams": {"vision": {"teamPerMonth": 10}}})
    assert [v.rule for v in over.failing] == ["TF_COST_TEAM_BUDGET"]
    # the cluster's budget needs every always-on price: the table lacks FSx in us-west-2 (EBS
    # gp3 is priced there), and the finding says so (not "run fewer jobs")
    caps = {"clusterPerMonth": 100000, "teams": {"vision": {"teamPerMonth": 20000}}}
    (v,) = _plan(caps).failing
    assert v.rule == "TF_COST_PRICE_MISSING" and "fsx.SCRATCH_2 in us-west-2" in v.message
    assert "ebs.gp3" not in v.message
    run = run_stack(
        "dev",
        {k: json.dumps(v) for k, v in {**OVERRIDES, "trainforge-policy:costCaps": caps}.items()},
    )
    budgets = {r.inputs["name"]: r.inputs for r in run.of_type("aws:budgets/budget:Budget")}
    team = budgets["trainforge-dev-team-vision"]
    assert (team["limitAmount"], team["limitUnit"], team["timeUnit"]) == (
        "20000.00",
        "USD",
        "MONTHLY",
    )
    assert team["costFilters"] == [{"name": "TagKeyValue", "values": ["aws:eks:namespace$vision"]}]
    cluster = budgets["trainforge-dev-cluster"]
    assert cluster["costFilters"][0]["values"] == ["user:trainforge.io/cluster$trainforge-dev"]
    [topic] = run.of_type("aws:sns/topic:Topic")
    for b in budgets.values():
        kinds = {n["notificationType"] for n in b["notifications"]}
        assert kinds == {"ACTUAL", "FORECASTED"}
        assert all(len(n["subscriberSnsTopicArns"]) == 1 for n in b["notifications"])
    [policy] = run.of_type("aws:sns/topicPolicy:TopicPolicy")
    assert "budgets.amazonaws.com" in policy.inputs["policy"]
    assert topic


def test_no_budget_no_aws_budget():
    run = run_stack("dev", {k: json.dumps(v) for k, v in OVERRIDES.items()})
    assert not run.of_type("aws:budgets/budget:Budget")


def test_a_bad_monthly_budget_names_the_key():
    with pytest.raises(CostCapsError) as e:
        cost_check.parse_caps({"teams": {"vision": {"teamPerMonth": -5}}}, {"vision"})
    assert "costCaps.teams.vision.teamPerMonth: got -5; expected a number of USD per month" in str(
        e.value
    )


def test_a_cheaper_pool_shows_the_run_cost_change_not_a_monthly_one():
    """The issue's PR: a job moves to a cheaper pool; its run cost falls from $106.76 to
    $75.83. The verdict says so, and only the platform (always on) gets a monthly figure."""

    class Section:
        def __init__(self, data):
            self.title, self.data = "Cost", data

    class Result:
        def __init__(self, data):
            self.sections = [Section(data)]

    def cost(per_h, run):
        job = {"name": "gpt", "team": "vision", "onDemandPerHour": per_h, "runCost": run,
               "admission": "runs"}  # fmt: skip
        return {"fixedPerHourKnown": 1.0, "fixedPerMonthKnown": 730.0, "jobs": [job]}

    old, new = cost(11.344, 106.76), cost(8.056, 75.83)
    lines = verdict.cost_lines(Result(new), {"Cost": old})
    assert lines[0] == "Cost: platform $1.00/h = $730.00/month (no change)"
    assert lines[1] == (
        "      + jobs: 1 of 1 run at once, $8.06/h while running (-$3.28), each job on its own "
        "nodes; "
        "run costs $75.83 in all (-$30.93)"
    )
    assert "/month" not in "\n".join(lines[1:])


def test_a_cap_whose_rate_is_unknown_is_fixed_at_its_cause_not_by_spending_less(planned):
    """A job's $/h unknown though every price is known (no type of its pool fits a pod): the
    cap finding's fix names that cause, never "fewer workers" or a higher cap."""
    import dataclasses

    _, report = planned
    jobs = report.jobs
    report.jobs = [dataclasses.replace(jobs[0], choice=None, no_node="pool limits: 0 nodes")]
    try:
        got = cost_check.findings(report, cost_check.parse_caps({"jobPerHour": 1000}))
    finally:
        report.jobs = jobs
    (f,) = [f for f in got if f.rule == "TF_COST_JOB_CAP"]
    assert "so the cap cannot be checked" in f.message
    assert f.fix == cost_check.NO_RATE_FIX and "fewer" not in f.fix
