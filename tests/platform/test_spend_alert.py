"""The team budget alert, rehearsed with promtool on synthetic series of OpenCost's metrics.

OpenCost exports node prices (`node_cpu_hourly_cost`, `node_ram_hourly_cost` per GiB,
`node_gpu_hourly_cost`) and what each container is allocated (`container_*_allocation`);
trainforge's rules price each namespace's allocations, sum the month to date and compare
with the team's monthly budget (`trainforge-policy:costCaps.teams.<team>.teamPerMonth`).
promtool starts its series at 1970-01-01 00:00 UTC, so January has 744 hours and the month
boundary is at 744h: spend from January must not count in February.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from trainforge.platform import alerts
from trainforge.platform import dashboards as D
from trainforge.platform.services_config import AlertsConfig

FACTS = pathlib.Path(__file__).resolve().parent / "facts"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not found: install the Debian package `prometheus` (make alert-tools)",
)
GIB = 1024**3
NODE = 'instance="n1", node="n1", instance_type="p4d.24xlarge", region="us-west-2"'
# vision: 10 CPU x $0.5 + 100 GiB x $0.01 + 8 GPU x $3 = $30/h; nlp: 2 CPU x $0.5 = $1/h
SERIES = [
    (f"node_cpu_hourly_cost{{{NODE}}}", "0.5x900"),
    (f"node_ram_hourly_cost{{{NODE}}}", "0.01x900"),
    (f"node_gpu_hourly_cost{{{NODE}}}", "3x900"),
    ('container_cpu_allocation{namespace="vision", pod="big-master-0", node="n1"}', "10x900"),
    (
        'container_memory_allocation_bytes{namespace="vision", pod="big-master-0", node="n1"}',
        f"{100 * GIB}x900",
    ),
    ('container_gpu_allocation{namespace="vision", pod="big-master-0", node="n1"}', "8x900"),
    ('container_cpu_allocation{namespace="nlp", pod="small-0", node="n1"}', "2x900"),
]
BUDGETS = {"vision": 4000.0, "nlp": 4000.0}


def opencost_metrics() -> dict[str, set[str]]:
    """OpenCost's metric names and labels at the pinned version (vendored fact)."""
    out = {}
    for line in (FACTS / "opencost-metrics.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, labels = line.split("\t")
            out[name] = set(filter(None, labels.split(",")))
    return out


def fired(team: str) -> dict[str, str]:
    return {
        "namespace": team,
        "trainforge_io_team": team,
        "severity": "warning",
        "platform": "trainforge",
    }


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=300)


def rehearse(tmp, alert_evals, expr_evals=(), cfg=None, budgets=BUDGETS, groups=None, summary=None):
    rules = tmp / "rules.yaml"
    groups = groups or alerts.rule_groups(cfg or AlertsConfig(), budgets, spend=True)
    if summary is None:  # the labels are the verdict; the text is checked where asked
        groups = [
            {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
            for g in groups
        ]
    rules.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    test = {
        "interval": "1h",
        "input_series": [{"series": s, "values": v} for s, v in SERIES],
        "alert_rule_test": [
            {
                "eval_time": f"{h}h",
                "alertname": "TrainforgeTeamSpendOverBudget",
                "exp_alerts": [
                    {"exp_labels": fired(t)}
                    | ({"exp_annotations": summary(h, t)} if summary else {})
                    for t in teams
                ],
            }
            for h, teams in alert_evals
        ],
        "promql_expr_test": [
            {
                "expr": f'{alerts.SPEND_MONTH_TO_DATE}{{namespace="{team}"}}',
                "eval_time": f"{h}h",
                "exp_samples": [
                    {"labels": f'{alerts.SPEND_MONTH_TO_DATE}{{namespace="{team}"}}', "value": v}
                ],
            }
            for h, team, v in expr_evals
        ],
    }
    spec = tmp / "tests.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"rule_files": [str(rules)], "evaluation_interval": "1h", "tests": [test]},
            sort_keys=False,
        )
    )
    return promtool("test", "rules", str(spec))


@needs_promtool
def test_the_spend_rules_parse(tmp_path):
    path = tmp_path / "rules.yaml"
    groups = alerts.rule_groups(AlertsConfig(), BUDGETS, spend=True)
    path.write_text(yaml.safe_dump({"groups": groups}))
    res = promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_fires_when_a_team_passes_its_fraction_and_never_under_it(tmp_path):
    """vision spends $30/h: 0.8 x $4000 = $3200 is passed in the 107th hour (3210 > 3200);
    nlp spends $1/h and stays silent; in February, January's spend no longer counts."""
    res = rehearse(
        tmp_path,
        [(100, []), (105, []), (106, ["vision"]), (200, ["vision"]), (750, [])],
        [(0, "vision", 30), (99, "vision", 3000), (99, "nlp", 100), (750, "vision", 210)],
    )
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_the_alert_says_how_much_was_spent(tmp_path):
    cfg = AlertsConfig()

    def text(hour: int, team: str) -> dict[str, str]:
        rule = next(
            r
            for g in alerts.rule_groups(cfg, BUDGETS, spend=True)
            for r in g["rules"]
            if r.get("alert") == "TrainforgeTeamSpendOverBudget"
        )
        spent = 30 * (hour + 1)
        return {
            **rule["annotations"],
            "summary": f"Team {team} has spent ${spent} this month: over 80% of its monthly budget",
        }

    res = rehearse(tmp_path, [(106, ["vision"])], summary=text)
    assert res.returncode == 0, res.stdout + res.stderr
    # docs/cost.md shows this rehearsal's alert, word for word
    root = pathlib.Path(__file__).resolve().parents[2]
    assert f"\n{text(106, 'vision')['summary']}\n" in (root / "docs" / "cost.md").read_text()


@needs_promtool
def test_the_rehearsal_can_fail(tmp_path):
    """Expecting the wrong thing fails, and so does a month filter taken out (January's spend
    then counts in February) or a price read from the wrong metric."""
    assert rehearse(tmp_path, [(100, ["vision"])]).returncode != 0
    assert rehearse(tmp_path, [(750, ["vision"])]).returncode != 0
    groups = alerts.rule_groups(AlertsConfig(), BUDGETS, spend=True)
    no_month = [{**g, "rules": [_without_month_filter(r) for r in g["rules"]]} for g in groups]
    assert rehearse(tmp_path, [(750, [])], groups=no_month).returncode != 0
    wrong = [
        {**g, "rules": [{**r, "expr": r["expr"].replace("node_gpu_hourly", "node_cpu_hourly")}
                        for r in g["rules"]]}
        for g in groups
    ]  # fmt: skip
    assert rehearse(tmp_path, [(106, ["vision"])], groups=wrong).returncode != 0


def _without_month_filter(rule: dict) -> dict:
    if rule.get("record") != alerts.SPEND_MONTH_TO_DATE:
        return rule
    return {**rule, "expr": f"sum_over_time({alerts.COST_PER_HOUR}[31d:1h])"}


@needs_promtool
def test_the_fraction_comes_from_the_stack(tmp_path):
    """budgetFraction 0.9: $3600, passed in the 121st hour."""
    cfg = AlertsConfig(budget_fraction=0.9)
    res = rehearse(tmp_path, [(110, []), (119, []), (120, ["vision"])], cfg=cfg)
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_a_team_without_a_budget_is_never_alerted(tmp_path):
    res = rehearse(tmp_path, [(200, ["vision"])], budgets={"vision": 4000.0})
    assert res.returncode == 0, res.stdout + res.stderr
    assert rehearse(tmp_path, [(200, [])], budgets={}).returncode == 0


def test_no_spend_rules_without_opencost_and_no_alert_without_budgets():
    names = [g["name"] for g in alerts.rule_groups(AlertsConfig())]
    assert "trainforge-spend" not in names
    (spend,) = [g for g in alerts.rule_groups(AlertsConfig(), {}, spend=True)[3:]]
    assert not [r for r in spend["rules"] if "alert" in r]
    assert [r["labels"] for r in spend["rules"] if r.get("record") == alerts.BUDGET] == []


def test_rules_read_only_opencosts_metrics_and_labels():
    """Every metric the spend rules and the spend board read is one OpenCost exports at the
    pinned version (or one of trainforge's own recorded series / runtime gauges), and every
    label they join or group on is one of its labels."""
    known = opencost_metrics()
    recorded = {alerts.COST_PER_HOUR, alerts.MONTH, alerts.SPEND_MONTH_TO_DATE, alerts.BUDGET}
    exprs = [
        r["expr"]
        for g in alerts.rule_groups(AlertsConfig(), BUDGETS, spend=True)
        if g["name"] == "trainforge-spend"
        for r in g["rules"]
    ]
    board = D.spend_dashboard()
    exprs += [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for expr in exprs:
        for name in D.metric_names(expr):
            assert name in known or name in recorded or name == "trainforge_world_size", name
    used = {"container_cpu_allocation", "container_gpu_allocation", "node_gpu_hourly_cost"}
    for name in used:
        assert {"node"} <= known[name]
    assert {"namespace", "pod"} <= known["container_memory_allocation_bytes"]


@needs_promtool
def test_the_spend_boards_queries_are_valid_promql(tmp_path):
    board = D.spend_dashboard()
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [
        re.fullmatch(r"label_values\((.*), \w+\)", v["definition"]).group(1)
        for v in board["templating"]["list"]
        if v.get("type") == "query"
    ]
    rules = [
        {"record": f"check:q{i}", "expr": e.replace("$namespace", ".*")}
        for i, e in enumerate(exprs)
    ]
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "board", "rules": rules}]}))
    res = promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_budget_alert_has_a_runbook_heading():
    root = pathlib.Path(__file__).resolve().parents[2]
    doc = (root / "docs" / alerts.RUNBOOK_PAGE).read_text()
    anchors = {alerts.anchor(m) for m in re.findall(r"^#{2,4} (.+)$", doc, re.M)}
    (spend,) = alerts.rule_groups(AlertsConfig(), BUDGETS, spend=True)[3:]
    (alert,) = [r for r in spend["rules"] if "alert" in r]
    assert alert["annotations"]["runbook_url"].split("#")[1] in anchors
    assert alert["labels"]["severity"] == "warning"


def test_the_spend_board_is_a_valid_grafana_model():
    """The same checks as the other boards (tests/platform/test_dashboards.py): plain JSON,
    unique ids, panels inside the grid without overlap, every query panel on the datasource."""
    from tests.platform.test_dashboards import D as boards
    from tests.platform.test_dashboards import test_dashboard_is_a_valid_grafana_model

    boards.DASHBOARDS[D.SPEND_DASHBOARD] = D.spend_dashboard
    try:
        test_dashboard_is_a_valid_grafana_model(D.SPEND_DASHBOARD)
    finally:
        del boards.DASHBOARDS[D.SPEND_DASHBOARD]
