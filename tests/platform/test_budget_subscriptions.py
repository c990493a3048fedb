"""Subscriptions AWS can make: the budgets' SNS topic subscribes only endpoints SNS accepts
and can confirm, and a receiver it cannot subscribe gets the budgets another way or is a plan
finding naming its key (issue 41's blocker: prod subscribed
`http://alert-router.ops.svc.cluster.local:8080/alertmanager` with protocol https).

moto 5.2.5 (the venv's) does not validate this: its `sns.subscribe` stores any endpoint for
protocol http/https (moto/sns/models.py, `subscribe`), so the rule is tested as a unit and
through the offline plan of the shipped stacks."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.conftest import ROOT, shipped_plan
from trainforge.plan import core
from trainforge.plan.checks import budget_subscriptions as B
from trainforge.platform.budgets import subscription_problem

PROD_RECEIVER = "http://alert-router.ops.svc.cluster.local:8080/alertmanager"


@pytest.mark.parametrize(
    "url",
    [
        PROD_RECEIVER,
        "https://alert-router.ops.svc.cluster.local:8080/alertmanager",
        "https://alert-router.ops.svc/x",
        "https://alert-router/x",
        "https://10.0.3.4/hook",
        "https://localhost:9093/",
        "https://ip-10-0-0-1.ec2.internal/hook",
        "ftp://example.com/x",
    ],
)
def test_what_sns_cannot_subscribe(url):
    assert subscription_problem(url)


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com/alertmanager", "https://93.184.216.34/hook"]
)
def test_what_sns_can_subscribe(url):
    assert subscription_problem(url) is None


def test_a_subscription_whose_endpoint_is_not_its_protocol_is_refused():
    assert "https://" in B.endpoint_problem("https", PROD_RECEIVER)
    assert B.endpoint_problem("https", "https://hooks.example.com/a") is None
    assert B.endpoint_problem("email", "oncall@example.com") is None
    assert B.endpoint_problem("email", "oncall") is not None


def test_the_check_names_receivers_as_the_stack_model_does():
    """The check reads the raw config; the receivers it finds carry the model's names (a
    budget subscription is named by its receiver), unnamed ones `<type>-<index>`."""
    import json

    from trainforge.stack.services import MonitoringConfig

    receivers = [
        {"url": "https://hooks.example.com/a"},
        {"type": "slack", "url": "https://hooks.slack.com/services/x"},
        {"name": "ops", "type": "webhook", "url": PROD_RECEIVER},
        {"type": "pagerduty", "routingKey": "key"},
        {"type": "webhook", "url": "[secret]"},
    ]
    model = MonitoringConfig.model_validate({"receivers": receivers})
    found = B._receivers({B.MONITORING_KEY: json.dumps({"receivers": receivers})})
    assert [name for _, name, _ in found] == [r.name for r in model.receivers]
    assert [name for _, name, _ in found] == [
        "webhook-0",
        "slack-1",
        "ops",
        "pagerduty-3",
        "webhook-4",
    ]


def _plan(**overrides):
    return core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)


@pytest.fixture(scope="module")
def prod():
    return shipped_plan("prod")


def test_prod_creates_only_subscriptions_sns_accepts(prod):
    subs = [r for r in prod.inventory.resources if r.type == B.TOPIC_SUBSCRIPTION]
    assert all(B.endpoint_problem(s.inputs["protocol"], s.inputs["endpoint"]) is None for s in subs)
    assert not [v for v in prod.failing if v.rule in B.RULES]
    [section] = [s for s in prod.sections if s.title.startswith("Budget notifications")]
    assert any("through Alertmanager" in line for line in section.lines), section.lines


def test_a_budget_no_route_carries_names_the_receivers_key():
    caps = {"clusterPerMonth": 500000, "teams": {"vision": {"teamPerMonth": 20000}}}
    result = _plan(**{"trainforge-policy:costCaps": caps})
    [v] = [v for v in result.failing if v.rule == B.BUDGET_UNROUTED]
    assert "trainforge:monitoring.receivers[0].url" in v.message
    assert PROD_RECEIVER in v.message and "the cluster's" in v.message


def _prod_monitoring(**receiver):
    """prod's trainforge:monitoring with its receiver changed by `receiver`."""
    config = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    monitoring = copy.deepcopy(config[B.MONITORING_KEY])
    monitoring["receivers"][0].update(receiver)
    return monitoring


def test_the_unrouted_fix_names_the_receivers_key_to_change_and_applying_it_routes_the_budget():
    """A team budget, no clusterPerMonth, a receiver without `warning`: the fix names
    receivers[0].severities and the value to add, never a clusterPerMonth the stack does not
    set; the stack changed as it says has no finding."""
    narrow = _prod_monitoring(severities=["critical"])
    result = _plan(**{B.MONITORING_KEY: narrow})
    [v] = [v for v in result.failing if v.rule == B.BUDGET_UNROUTED]
    assert "add `warning` to trainforge:monitoring.receivers[0].severities (now [critical])" in (
        v.fix
    ), v.fix
    assert "vision" in v.fix and "clusterPerMonth" not in v.fix
    fixed = _prod_monitoring(severities=["critical", "warning"])
    assert not [v for v in _plan(**{B.MONITORING_KEY: fixed}).failing if v.rule in B.RULES]


def test_the_unrouted_fix_names_clusterpermonth_only_when_it_is_set():
    caps = {"clusterPerMonth": 500000, "teams": {"vision": {"teamPerMonth": 20000}}}
    result = _plan(**{"trainforge-policy:costCaps": caps})
    [v] = [v for v in result.failing if v.rule == B.BUDGET_UNROUTED]
    # the team's budget is carried (prod's receiver takes `warning`): only the cluster's is not
    assert "drop trainforge-policy:costCaps.clusterPerMonth" in v.fix, v.fix
    assert "severities" not in v.fix and "vision" not in v.fix


def test_each_topic_subscription_a_program_declares_is_judged():
    """A program's own SNS subscriptions (not only the budgets' topic): one SNS refuses is a
    finding on its resource, one it accepts a line; a secret endpoint of the budgets' topic is
    judged by its receiver's URL (the subscription is named after the receiver)."""
    from types import SimpleNamespace

    from trainforge.plan.runner import Recorded

    def sub(name: str, protocol: str, endpoint: str) -> Recorded:
        urn = f"urn:pulumi:prod::trainforge::{B.TOPIC_SUBSCRIPTION}::{name}"
        inputs = {"protocol": protocol, "endpoint": endpoint}
        return Recorded(urn, B.TOPIC_SUBSCRIPTION, name, None, True, inputs)

    receivers = [{"name": "router", "type": "webhook", "url": PROD_RECEIVER}]
    inventory = SimpleNamespace(
        config={B.MONITORING_KEY: {"receivers": receivers}},
        resources=[
            sub("pager", "https", PROD_RECEIVER),
            sub("oncall", "email", "oncall@example.com"),
            sub("budgets-webhook-router", "https", "[secret]"),
        ],
    )
    result = B.check(SimpleNamespace(inventory=inventory))
    assert [(f.rule, f.resource.rsplit("::", 1)[1]) for f in result.findings] == [
        (B.SUBSCRIPTION, "pager"),
        (B.SUBSCRIPTION, "budgets-webhook-router"),
    ]
    [section] = result.sections
    assert section.lines[1] == "oncall: email subscription SNS accepts"
    assert [s["problem"] is None for s in section.data["subscriptions"]] == [False, True, False]
