"""A waiver of an image rule covers the image it names, not every image of the resource.

Why: prod waives TRAINFORGE_DOCKER_HUB for Grafana's image (Docker Hub only), on the Prometheus
stack's release, which records ~10 images read from the vendored charts. Were the waiver the
whole component's, a chart bump that moved another of them to Docker Hub would be hidden by it.
A waiver that covers no finding any more is reported (stale), and a waiver of an image rule
that names no image is refused.
"""

from __future__ import annotations

import pathlib
import shutil

import pytest

from tests.conftest import shipped_plan
from trainforge.core import versions
from trainforge.core.image_routes import names_image
from trainforge.plan.checks import rules as R
from trainforge.plan.core import plan_project
from trainforge.plan.policy_adapter import unwaived
from trainforge.plan.waivers import WaiverError, parse_waivers, stale_note
from trainforge.platform import chart_images

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMETHEUS = "platform-services-monitoring-prometheus"
HUB = "TRAINFORGE_DOCKER_HUB"
GRAFANA_WAIVER = {
    "resource": PROMETHEUS,
    "rule": HUB,
    "image": "docker.io/grafana/grafana",
    "reason": "Grafana's image is on Docker Hub only",
}


def test_a_waiver_names_an_image_by_repository_and_optionally_tag():
    assert names_image("docker.io/grafana/grafana", "docker.io/grafana/grafana:13.2.0")
    assert names_image("grafana/grafana", "docker.io/grafana/grafana:13.2.0")  # Docker's default
    assert names_image("grafana/grafana:13.2.0", "grafana/grafana:13.2.0@sha256:ab")
    assert not names_image("grafana/grafana:13.1.0", "docker.io/grafana/grafana:13.2.0")
    assert not names_image("docker.io/grafana/grafana", "docker.io/grafana/loki:3.0.0")
    assert not names_image("docker.io/grafana/grafana", "quay.io/grafana/grafana:13.2.0")
    assert names_image("busybox", "docker.io/library/busybox:1.37.0")


def test_an_image_rule_waiver_without_its_image_is_refused_in_one_line():
    """Old-style (component-wide) TRAINFORGE_DOCKER_HUB waivers are refused, not read as
    "every image of the component"; an image on another rule's waiver is refused too."""
    old = {k: v for k, v in GRAFANA_WAIVER.items() if k != "image"}
    with pytest.raises(WaiverError) as e:
        parse_waivers([old], {HUB})
    assert str(e.value).startswith("trainforge-policy:waivers[0].image: missing; expected ")
    assert "\n" not in str(e.value) and "docker.io/grafana/grafana" in str(e.value)
    with pytest.raises(WaiverError, match=r"waivers\[0\]\.image: got 'x/y'; expected no image"):
        parse_waivers([{"resource": "r", "rule": "CKV_K8S_16", "image": "x/y", "reason": "z"}],
                      None)  # fmt: skip


def test_the_pod_rule_names_its_image_for_waivers():
    spec = {
        "containers": [{"name": "a", "image": "grafana/grafana:1"}, {"name": "b", "image": "nginx"}]
    }
    msgs = R.pod_image_not_docker_hub("kubernetes:core/v1:Pod", {}, spec)
    assert [R.finding_image(HUB, m) for m in msgs] == ["grafana/grafana:1", "nginx"]
    # the policy pack judges each message on its own: nginx stays reported
    (w,) = parse_waivers([{**GRAFANA_WAIVER, "resource": "web"}], {HUB})
    assert unwaived([w], HUB, "urn:web", "web", msgs) == [msgs[1]]


@pytest.fixture(scope="module")
def moved_plan(tmp_path_factory):
    """Prod with Alertmanager's image moved to Docker Hub in a copy of the vendored charts
    (a chart bump), its Grafana waiver and a waiver for an image no finding names."""
    copy = tmp_path_factory.mktemp("charts") / "charts"
    shutil.copytree(chart_images.CHARTS, copy)
    kps = copy / f"kube-prometheus-stack-{versions.KUBE_PROMETHEUS_STACK_CHART_VERSION}"
    values = kps / "values.yaml"
    block = "      registry: quay.io\n      repository: prometheus/alertmanager\n"
    text = values.read_text()
    assert text.count(block) == 1
    values.write_text(text.replace(block, block.replace("quay.io", "docker.io")))
    stale = {**GRAFANA_WAIVER, "image": "docker.io/grafana/loki", "reason": "old"}
    mp = pytest.MonkeyPatch()
    mp.setattr(chart_images, "CHARTS", copy)
    chart_images._chart.cache_clear()
    try:
        return plan_project(
            ROOT,
            "prod",
            standins=False,
            config_overrides={"trainforge-policy:waivers": [GRAFANA_WAIVER, stale]},
        )
    finally:  # the charts as vendored again for the other tests
        mp.undo()
        chart_images._chart.cache_clear()


def test_a_second_docker_hub_image_of_the_component_is_reported_despite_grafanas_waiver(
    moved_plan,
):
    hub = [v for v in moved_plan.violations if v.rule == HUB]
    failing = [v for v in hub if v.waived is None]
    assert [(v.resource, v.image) for v in failing] == [
        (PROMETHEUS, "docker.io/prometheus/alertmanager:v0.34.0")
    ]
    assert not moved_plan.clean
    # Grafana's own finding is still waived, by its waiver
    (waived,) = [v for v in hub if v.waived is not None]
    assert waived.image == "docker.io/grafana/grafana:13.2.0"
    assert waived.waived == GRAFANA_WAIVER["reason"]


def test_a_stale_waiver_is_reported(moved_plan):
    (stale,) = moved_plan.unused_waivers
    assert stale.where == "trainforge-policy:waivers[1]" and stale.image == "docker.io/grafana/loki"
    assert moved_plan.to_json()["unusedWaivers"] == [
        {
            "where": "trainforge-policy:waivers[1]",
            "resource": PROMETHEUS,
            "rule": HUB,
            "image": "docker.io/grafana/loki",
        }
    ]
    assert stale_note(stale) == (
        f"trainforge-policy:waivers[1] ({HUB} on {PROMETHEUS}, image docker.io/grafana/loki) "
        f"covers nothing: no {HUB} finding of {PROMETHEUS} is about image docker.io/grafana/loki "
        "now; remove the waiver"
    )


def test_prods_waiver_covers_grafana_and_is_not_stale():
    """The shipped prod stack: CLEAN, Grafana's finding waived by the image waiver, no note."""
    result = shipped_plan("prod")
    assert result.clean and not result.unused_waivers
    (waived,) = result.waived
    assert (waived.rule, waived.image) == (HUB, "docker.io/grafana/grafana:13.2.0")
