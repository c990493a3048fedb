"""The prod stack renders trainforge's alerting: the PrometheusRule, the scrapes of Kueue's
and Karpenter's controllers, Alertmanager's receivers and a Grafana view per team."""

import pytest
from pulumi.runtime import rpc

from tests.conftest import run_stack
from trainforge.platform import alerts


@pytest.fixture(scope="module")
def prod():
    return run_stack("prod")


def test_prod_renders_the_alert_rules(prod):
    (rule,) = prod.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert rule.inputs["metadata"]["namespace"] == "monitoring"
    names = {r.get("alert") for g in rule.inputs["spec"]["groups"] for r in g["rules"]}
    assert {
        "TrainforgeJobStalled",
        "TrainforgeRestartStorm",
        "TrainforgeCheckpointTooOld",
        "TrainforgeGoodputLow",
        "TrainforgeGpuXidError",
        "TrainforgeNodeHardwareNotReady",
        "TrainforgeQueueStarved",
        "TrainforgeNodeLaunchErrors",
    } <= names
    stalled = next(
        r for g in rule.inputs["spec"]["groups"] for r in g["rules"]
        if r["alert"] == "TrainforgeJobStalled"
    )  # fmt: skip
    # Pulumi.prod.yaml sets stalledAfter: 20m
    assert "changes(trainforge_step[20m])" in stalled["expr"]


def test_kueue_and_karpenter_metrics_are_scraped(prod):
    monitors = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in prod.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    }
    assert monitors["kueue-controller"]["namespaceSelector"] == {"matchNames": ["kueue-system"]}
    assert monitors["kueue-controller"]["endpoints"][0]["port"] == "https"
    assert monitors["karpenter-controller"]["namespaceSelector"] == {"matchNames": ["kube-system"]}


def test_alertmanager_gets_the_stack_receivers(prod):
    (stack,) = [
        r
        for r in prod.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs.get("name") == "kube-prometheus-stack"
    ]
    # a receiver's secret makes the chart's values a Pulumi secret (encrypted in the state)
    values = stack.inputs["values"]
    assert values.get(rpc._special_sig_key) == rpc._special_secret_sig
    am = values["value"]["alertmanager"]["config"]
    assert [r["name"] for r in am["receivers"]] == [alerts.NULL_RECEIVER, "ml-oncall"]
    assert am["route"]["routes"][1]["receiver"] == "ml-oncall"


def test_grafana_is_on_in_prod_with_a_folder_per_team(prod):
    boards = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]
        for r in prod.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    }
    assert boards["trainforge-team-llm"]["annotations"] == {"grafana_folder": "llm"}
    assert boards["trainforge-team-vision"]["annotations"] == {"grafana_folder": "vision"}
