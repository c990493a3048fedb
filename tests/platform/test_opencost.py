"""OpenCost on the platform's Prometheus: prod renders the release (pinned chart, the chart's
own images through the cache, non-root, resources set, reading the stack's Prometheus), the
spend rules with the budget alert on a team's spend, and the spend board; the keys that turn
it on and off, and the retention a month-to-date spend needs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_stack
from trainforge.core import image_routes, versions
from trainforge.core.contract import recording
from trainforge.platform import alerts, opencost
from trainforge.platform.dashboards import SPEND_DASHBOARD
from trainforge.platform.services_config import MonitoringConfig, parse_services_config

HELM = "kubernetes:helm.sh/v3:Release"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
HOST = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


@pytest.fixture(scope="module")
def prod():
    return run_stack("prod")


def release(run, chart: str) -> dict:
    (r,) = [r for r in run.of_type(HELM) if r.inputs["chart"] == chart]
    return r.inputs


def test_prod_renders_an_opencost_release_on_its_prometheus(prod):
    oc = release(prod, "opencost")
    assert oc["version"] == versions.OPENCOST_CHART_VERSION
    assert oc["repositoryOpts"]["repo"] == versions.OPENCOST_CHART_REPO
    stack = release(prod, "kube-prometheus-stack")
    assert oc["namespace"] == stack["namespace"] == "monitoring"
    values = oc["values"]
    prom = values["opencost"]["prometheus"]["internal"]
    # the managed stack's Prometheus Service: `<release name>-prometheus`, port 9090
    assert prom["serviceName"] == f"{stack['name']}-prometheus"
    assert (prom["namespaceName"], prom["port"], prom["enabled"]) == ("monitoring", 9090, True)
    monitor = values["opencost"]["metrics"]["serviceMonitor"]
    # scraped, keeping OpenCost's own namespace/pod labels (the priced pods')
    assert monitor["enabled"] is True and monitor["honorLabels"] is True
    assert values["opencost"]["ui"]["enabled"] is False
    assert values["opencost"]["mcp"]["enabled"] is False
    assert values["opencost"]["exporter"]["defaultClusterId"] == "trainforge-prod"


def test_the_pod_is_non_root_with_resources_on_the_system_nodes(prod):
    values = release(prod, "opencost")["values"]
    pod = values["podSecurityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == opencost.OPENCOST_UID != 0
    exporter = values["opencost"]["exporter"]
    ctx = exporter["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["runAsNonRoot"] is True
    assert set(exporter["resources"]["requests"]) == {"cpu", "memory"}
    assert exporter["resources"]["limits"]["memory"]
    # where OpenCost writes is an emptyDir, the rest of the filesystem read-only
    mounts = {m["mountPath"]: m["name"] for m in exporter["extraVolumeMounts"]}
    volumes = {v["name"]: v for v in values["extraVolumes"]}
    assert set(mounts) == set(opencost.WRITABLE)
    assert all("emptyDir" in volumes[n] for n in mounts.values())
    assert values["opencost"]["nodeSelector"] == {"trainforge.io/system": "true"}


def test_the_image_is_the_charts_own_read_from_its_values(prod):
    """The exporter image (tag and digest) comes from the chart's values.yaml at the pinned
    version; prod has no github rule, so it is pulled from ghcr.io (anonymous pulls)."""
    image = release(prod, "opencost")["values"]["opencost"]["exporter"]["image"]
    chart = opencost.chart_image("opencost.exporter.image")
    assert image == chart
    # charts/opencost/values.yaml at tag opencost-2.5.17 (vendored)
    assert image == {
        "registry": "ghcr.io",
        "repository": "opencost/opencost",
        "tag": "1.120.1@sha256:b0701f9b54e43c9abee98f5784792a5b469ca8951e87da32b161c1fa539ab0e1",
    }


def test_with_the_github_rule_the_digest_pinned_image_stays_on_ghcr():
    """The chart pins the exporter by digest: a pull-through rule does not fetch an uncached
    image named by digest (image_routes.digest_pinned), so it stays on ghcr.io and the plan
    says so; an image without a digest would come through the cache."""
    routes = image_routes.routes_for(HOST, docker_hub=False, github=True)
    with recording() as record, image_routes.routing(routes):
        values = opencost.opencost_values("c", "monitoring", component="m")
        image = values["opencost"]["exporter"]["image"]
        tag = opencost.chart_image("opencost.exporter.image")["tag"]
        assert "@sha256:" in tag
        assert image == {"registry": "ghcr.io", "repository": "opencost/opencost", "tag": tag}
        # recorded for the plan's image check (no pod of the chart is rendered)
        (rec,) = [i for i in record.installed_images if i.component == "m"]
        assert rec.image == rec.pulled == f"ghcr.io/opencost/opencost:{tag}"
        assert image_routes.cached("ghcr.io/opencost/opencost:1.120.1") == (
            f"{HOST}/github/opencost/opencost:1.120.1"
        )


def test_prod_renders_the_budget_alert_on_a_teams_spend(prod):
    (rule,) = prod.of_type(RULE)
    (spend,) = [g for g in rule.inputs["spec"]["groups"] if g["name"] == "trainforge-spend"]
    budgets = {
        r["labels"]["namespace"]: r["expr"]
        for r in spend["rules"]
        if r.get("record") == alerts.BUDGET
    }
    # Pulumi.prod.yaml: trainforge-policy:costCaps.teams.vision.teamPerMonth: 20000
    assert budgets == {"vision": "vector(20000.0)"}
    (alert,) = [r for r in spend["rules"] if r.get("alert") == "TrainforgeTeamSpendOverBudget"]
    assert f"(0.8 * {alerts.BUDGET})" in alert["expr"]
    assert alerts.SPEND_MONTH_TO_DATE in alert["expr"]


def test_prod_ships_the_spend_board(prod):
    names = {
        r.inputs["metadata"]["name"]
        for r in prod.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    }
    assert SPEND_DASHBOARD in names


def test_opencost_off_renders_neither_release_nor_spend_rules():
    run = run_stack("prod", {"trainforge:monitoring": json.dumps(_prod_monitoring(False))})
    assert [r for r in run.of_type(HELM) if r.inputs["chart"] == "opencost"] == []
    (rule,) = run.of_type(RULE)
    assert "trainforge-spend" not in {g["name"] for g in rule.inputs["spec"]["groups"]}


def _prod_monitoring(enabled: bool) -> dict:
    import yaml

    from tests.conftest import ROOT

    raw = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    return {**raw["trainforge:monitoring"], "opencost": {"enabled": enabled}}


def test_external_prometheus_runs_no_opencost():
    assert not MonitoringConfig(mode="external").runs_opencost
    assert MonitoringConfig().runs_opencost


@pytest.mark.parametrize(
    ("monitoring", "error"),
    [
        ({"retention": "15d"}, "trainforge:monitoring.retention: got '15d'"),
        ({"opencost": {"enabled": "maybe"}}, "trainforge:monitoring.opencost.enabled"),
        ({"alerts": {"budgetFraction": 1.5}}, "trainforge:monitoring.alerts.budgetFraction"),
    ],
)
def test_bad_keys_are_one_line_naming_the_key(monitoring, error):
    errors: list[str] = []
    parse_services_config({"monitoring": monitoring}, errors)
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_a_short_retention_is_fine_without_opencost_or_without_the_managed_stack():
    for monitoring in (
        {"retention": "15d", "opencost": {"enabled": False}},
        {"retention": "15d", "mode": "external"},
        {"retention": "768h"},  # 32 days
    ):
        errors: list[str] = []
        parse_services_config({"monitoring": monitoring}, errors)
        assert errors == [], monitoring


def test_team_per_month_is_a_budget_key():
    from trainforge.stack.policy import parse_caps

    caps = parse_caps({"teams": {"vision": {"teamPerMonth": 20000}}}, {"vision"})
    assert caps.teams["vision"].team_per_month == 20000
    errors: list[str] = []
    parse_caps({"teams": {"vision": {"teamPerMonth": -1}}}, {"vision"}, errors)
    assert len(errors) == 1 and "teamPerMonth" in errors[0]
