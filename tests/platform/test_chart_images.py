"""Images a chart runs come from its vendored values.yaml at the pinned version.

Every chart trainforge installs whose values.yaml could be read at its pin is vendored byte for
byte (trainforge/platform/data/charts/<chart>-<version>, SOURCE.txt: repository, tag, commit,
git blob ids, the day it was read). The images each one runs (Grafana's, OpenCost's exporter,
Karpenter's controller, the Prometheus stack's, the device plugins', DCGM's, the Trainer's)
are what the plan reports under "Images" and judges as Docker Hub images or not; they are read
from those files, not typed.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import shutil
from typing import Any

import pytest
import yaml

from trainforge.core import image_routes, versions
from trainforge.plan.core import plan_project
from trainforge.platform import chart_images, monitoring

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRAFANA = chart_images.CHARTS / f"grafana-{versions.GRAFANA_CHART_VERSION}"
VENDORED = sorted(p for p in chart_images.CHARTS.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", VENDORED, ids=[p.name for p in VENDORED])
def test_vendored_chart_files_are_the_tags_bytes(folder):
    """Each file hashes to the git blob id SOURCE.txt names (the tag's bytes, unedited), and
    the folder's name is its Chart.yaml's name and version."""
    source = (folder / "SOURCE.txt").read_text()
    assert re.search(r"\b2026-\d\d-\d\d\b", source) and "commit " in source  # when read
    blobs = {}
    for line in source.splitlines():
        if line and not line.startswith("#"):
            blob, name = line.split()
            blobs[name] = blob
    assert set(blobs) == {"Chart.yaml", "values.yaml"}
    for name, blob in blobs.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    assert folder.name == f"{meta['name']}-{meta['version']}"


def test_every_pinned_chart_is_vendored():
    """The pins in versions.py and the subcharts the stack's Chart.yaml names (Kueue's packaged
    chart differs from its repository's and is not vendored: docs/upgrading.md)."""
    stack = ("kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART_VERSION)
    pins = [
        stack,
        ("grafana", versions.GRAFANA_CHART_VERSION),
        ("opencost", versions.OPENCOST_CHART_VERSION),
        ("karpenter", versions.KARPENTER_VERSION),
        ("nvidia-device-plugin", versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION),
        ("aws-efa-k8s-device-plugin", versions.EFA_DEVICE_PLUGIN_CHART_VERSION),
        ("dcgm-exporter", versions.DCGM_EXPORTER_CHART_VERSION),
        ("kubeflow-trainer", versions.TRAINER_VERSION),
        ("jobset", versions.JOBSET_VERSION),
    ]
    for sub in ("kube-state-metrics", "prometheus-node-exporter", "grafana"):
        pins.append((sub, chart_images.dependency_version(*stack, sub)))
    assert {f"{c}-{v}" for c, v in pins} == {p.name for p in VENDORED}


def test_each_charts_images_from_its_values():
    """What the charts run, as their values at the pins name them (digest kept)."""
    runs = chart_images.chart_runs
    assert runs("opencost", versions.OPENCOST_CHART_VERSION, (opencost_exporter(),)) == [
        "ghcr.io/opencost/opencost:1.120.1"
        "@sha256:b0701f9b54e43c9abee98f5784792a5b469ca8951e87da32b161c1fa539ab0e1"
    ]
    from trainforge.platform import device_plugins, karpenter, trainer

    assert runs("karpenter", versions.KARPENTER_VERSION, karpenter.CONTROLLER_IMAGES) == [
        "public.ecr.aws/karpenter/controller:1.14.1"
        "@sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa"
    ]
    stack = runs(
        "kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART_VERSION, monitoring.KPS_IMAGES
    )
    assert stack == [
        "quay.io/prometheus-operator/prometheus-operator:v0.93.1",  # tag "" -> appVersion
        "quay.io/prometheus-operator/prometheus-config-reloader:v0.93.1",
        "quay.io/prometheus/prometheus:v3.14.0-distroless",
        "quay.io/prometheus/alertmanager:v0.34.0",
        "ghcr.io/jkroepke/kube-webhook-certgen:1.8.7",
    ]
    nvidia = runs(
        "nvidia-device-plugin",
        versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        device_plugins.NVIDIA_IMAGES,
    )
    assert nvidia == ["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"]  # tag "" -> v + appVersion
    assert runs("kubeflow-trainer", versions.TRAINER_VERSION, trainer.CONTROLLER_IMAGES) == [
        "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.1"  # v + the chart's version
    ]
    efa = runs(
        "aws-efa-k8s-device-plugin",
        versions.EFA_DEVICE_PLUGIN_CHART_VERSION,
        device_plugins.EFA_IMAGES,
    )
    assert efa == [
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"
    ]
    # none of them is on Docker Hub: no TRAINFORGE_DOCKER_HUB for them, rightly
    assert not [i for i in [*stack, *nvidia, *efa] if image_routes.is_docker_hub(i)]


def opencost_exporter() -> chart_images.ChartImage:
    return chart_images.ChartImage("opencost.exporter.image", "{appVersion}")


def test_grafana_images_from_the_chart_values():
    v = versions.GRAFANA_CHART_VERSION
    assert chart_images.default_image("grafana", v, "image", app_version_tag=True) == (
        "docker.io/grafana/grafana:13.2.0"  # values image.tag "" -> Chart.yaml appVersion
    )
    assert chart_images.default_image("grafana", v, "downloadDashboardsImage") == (
        "docker.io/curlimages/curl:8.21.0"
    )


def test_an_edited_values_file_changes_the_image(tmp_path, monkeypatch):
    """Break it: the values name another registry; the reader follows the file, not a constant."""
    copy = tmp_path / GRAFANA.name
    shutil.copytree(GRAFANA, copy)
    values = copy / "values.yaml"
    values.write_text(
        values.read_text().replace("repository: grafana/grafana", "repository: x/y", 1)
    )
    monkeypatch.setattr(chart_images, "CHARTS", tmp_path)
    chart_images._chart.cache_clear()
    try:
        image = chart_images.default_image("grafana", versions.GRAFANA_CHART_VERSION, "image")
        assert image == "docker.io/x/y"
        with pytest.raises(FileNotFoundError, match="no vendored values"):
            chart_images.default_image("grafana", "0.0.1", "image")
    finally:
        chart_images._chart.cache_clear()


def test_credential_free_copies_keep_the_tag():
    assert chart_images.credential_free("docker.io/curlimages/curl:8.21.0") == (
        "quay.io/curl/curl:8.21.0"
    )
    assert chart_images.credential_free("docker.io/grafana/grafana:13.2.0") == (
        "docker.io/grafana/grafana:13.2.0"  # no such copy: Docker Hub only
    )


def test_an_edited_values_file_changes_what_the_plan_reports(tmp_path, monkeypatch):
    """Break it: OpenCost's exporter moved to Docker Hub and Karpenter's controller retagged in
    a copy of the vendored charts. The prod plan reports the images the files name, and judges
    them: the exporter is now a Docker Hub image without credentials (not waived: prod's waiver
    is Grafana's)."""
    copy = tmp_path / "charts"
    shutil.copytree(chart_images.CHARTS, copy)
    oc = copy / f"opencost-{versions.OPENCOST_CHART_VERSION}" / "values.yaml"
    text = oc.read_text()
    assert text.count("registry: ghcr.io\n      # -- Exporter container image name") == 1
    oc.write_text(
        text.replace(
            "registry: ghcr.io\n      # -- Exporter container image name",
            "registry: docker.io\n      # -- Exporter container image name",
        )
    )
    karp = copy / f"karpenter-{versions.KARPENTER_VERSION}" / "values.yaml"
    karp.write_text(karp.read_text().replace("    tag: 1.14.1\n", "    tag: 9.9.9\n", 1))
    monkeypatch.setattr(chart_images, "CHARTS", copy)
    chart_images._chart.cache_clear()
    try:
        result = plan_project(ROOT, "prod", standins=False)
    finally:
        chart_images._chart.cache_clear()
    section = next(s for s in result.sections if s.title.startswith("Images"))
    lines = "\n".join(section.lines)
    assert "installs docker.io/opencost/opencost:1.120.1@sha256:" in lines
    assert "installs public.ecr.aws/karpenter/controller:9.9.9@sha256:" in lines
    assert "ghcr.io/opencost/opencost" not in lines and ":1.14.1@" not in lines
    hub = [v for v in result.failing if v.rule == "TRAINFORGE_DOCKER_HUB"]
    assert [v.resource for v in hub] == ["platform-services-monitoring-opencost"]
    assert "docker.io/opencost/opencost" in hub[0].message
    # true both ways: only the two Docker Hub images are findings (Grafana's waived), none of
    # the Quay, ghcr.io, registry.k8s.io, ECR or nvcr.io images the plan lists
    flagged = [v.message for v in result.violations if v.rule == "TRAINFORGE_DOCKER_HUB"]
    assert len(flagged) == 2 and "docker.io/grafana/grafana:13.2.0" in " ".join(flagged)
    assert "quay.io" in lines and "registry.k8s.io" in lines and "nvcr.io" in lines
    # the exporter's Helm values follow the file too
    (rel,) = [r for r in result.inventory.resources if r.inputs.get("chart") == "opencost"]
    assert rel.inputs["values"]["opencost"]["exporter"]["image"]["registry"] == "docker.io"


def _release_images() -> dict[str, list[tuple[tuple[chart_images.ChartImage, ...], Any]]]:
    """chart -> the image blocks its release runs, (images, subchart or None): every image
    block the plan reports for it, including those trainforge sets itself (Grafana's, curl's,
    busybox's), so that the report and the release's values are compared image for image."""
    from trainforge.platform import device_plugins, karpenter, trainer

    kps = ("kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART_VERSION)
    Image = chart_images.ChartImage
    return {
        "karpenter": [(karpenter.CONTROLLER_IMAGES, None)],
        "nvidia-device-plugin": [(device_plugins.NVIDIA_IMAGES, None)],
        "aws-efa-k8s-device-plugin": [(device_plugins.EFA_IMAGES, None)],
        "dcgm-exporter": [(monitoring.DCGM_IMAGES, None)],
        "opencost": [(((opencost_exporter(),)), None)],
        "kubeflow-trainer": [(trainer.CONTROLLER_IMAGES, None)],
        "kube-prometheus-stack": [
            ((*monitoring.KPS_IMAGES, Image("crds.upgradeJob.image.busybox")), None),
            (
                (
                    *monitoring.SUBCHART_IMAGES["prometheus-node-exporter"],
                    Image("permissionInitContainer.image"),
                ),
                chart_images.Subchart(*kps, "prometheus-node-exporter"),
            ),
            (
                monitoring.SUBCHART_IMAGES["kube-state-metrics"],
                chart_images.Subchart(*kps, "kube-state-metrics"),
            ),
            (
                (
                    *monitoring.GRAFANA_IMAGES,
                    Image("image", "{appVersion}"),
                    Image("downloadDashboardsImage"),
                    Image("initChownData.image"),
                ),
                chart_images.Subchart(*kps, "grafana"),
            ),
        ],
    }


def _subchart_version(sub: Any, chart: str, version: str) -> str:
    return version if sub is None else chart_images.dependency_version(sub.parent, version, sub.key)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_reported_pull_is_what_the_releases_values_make_the_chart_run(stack):
    """The plan's "installs X -> pulls Y" lines and the values each Helm release is given
    agree: the release's values (as the plan recorded them) over the vendored values.yaml
    (and, for a subchart, the stack's values for it) make the chart run exactly the reported
    "pulls" images, through the stack's cache where it has a rule for the registry."""
    # A receiver's URL is a secret, which makes the whole release's values secret (the plan
    # then shows "[secret]"): the stack without receivers, its images unchanged.
    monitoring_cfg = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"].get(
        "trainforge:monitoring", {}
    )
    overrides = {"trainforge:monitoring": {**monitoring_cfg, "receivers": []}}
    result = plan_project(ROOT, stack, standins=False, config_overrides=overrides)
    routes = result.inventory.declared.image_routes
    pulls: dict[str, set[str]] = {}
    for rec in result.inventory.declared.installed_images:
        pulls.setdefault(rec.component, set()).add(rec.pulled)
        if rec.pulled != rec.image:  # routed: exactly the cache's reference of the image
            assert rec.pulled == routes.rewrite(rec.image), rec
    spec = _release_images()
    checked = []
    for rec in result.inventory.resources:
        chart = str(rec.inputs.get("chart") or "").rsplit("/", 1)[-1]
        if "helm.sh" not in rec.type or chart not in spec:
            continue
        version = str(rec.inputs["version"])
        runs = set()
        values = rec.inputs.get("values") or {}
        for images, sub in spec[chart]:
            if sub is not None and (values.get(sub.key) or {}).get("enabled") is False:
                continue  # a subchart turned off runs nothing (dev's Grafana)
            name = sub.key if sub is not None else chart
            at = _subchart_version(sub, chart, version)
            if sub is not None and sub.key == "grafana":
                at = versions.GRAFANA_CHART_VERSION
            runs |= set(chart_images.chart_runs(name, at, images, values, sub))
        assert runs == pulls[rec.name], rec.name
        checked.append(chart)
    assert {"karpenter", "kube-prometheus-stack", "opencost"} <= set(checked)
    # every image the stack has a rule for goes through the cache (Quay, registry.k8s.io, ECR
    # Public here), and the report says so
    through = {i for p in pulls.values() for i in p if i.startswith(routes.registry)}
    assert any("/quay/prometheus/alertmanager:" in i for i in through)
    assert any("/k8s/kube-state-metrics/kube-state-metrics:" in i for i in through)
    assert any("/quay/prometheus/node-exporter:v1.12.1-distroless" in i for i in through)


def test_route_sets_the_charts_own_keys_and_leaves_digest_pins_direct():
    """With a ghcr.io rule (a GitHub credential) the Trainer's manager image, named without a
    digest, comes through the cache by its block's registry/repository; Karpenter's
    controller, pinned by digest, stays on ECR Public (the cache would not fetch it); an
    nvcr.io image has no rule kind at all."""
    from trainforge.core.contract import recording
    from trainforge.platform import device_plugins, karpenter, trainer

    host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    routes = image_routes.routes_for(host, docker_hub=False, github=True)
    with recording() as record, image_routes.routing(routes):
        out = chart_images.route("t", "kubeflow-trainer", versions.TRAINER_VERSION,
                                 trainer.CONTROLLER_IMAGES)  # fmt: skip
        assert out == {
            "image": {
                "registry": host,
                "repository": "github/kubeflow/trainer/trainer-controller-manager",
            }
        }
        assert (
            chart_images.route(
                "k", "karpenter", versions.KARPENTER_VERSION, karpenter.CONTROLLER_IMAGES
            )
            == {}
        )
        assert chart_images.route(
            "n", "nvidia-device-plugin", versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
            device_plugins.NVIDIA_IMAGES,
        ) == {}  # fmt: skip
        pulls = {r.component: r.pulled for r in record.installed_images}
        assert pulls["t"] == f"{host}/github/kubeflow/trainer/trainer-controller-manager:v2.2.1"
        assert pulls["k"].startswith("public.ecr.aws/karpenter/controller:1.14.1@sha256:")
        assert pulls["n"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"


@pytest.mark.parametrize("folder", sorted(p.name for p in chart_images.CHARTS.iterdir()))
def test_the_fast_loader_reads_each_vendored_file_as_the_reference_loader_does(folder):
    """chart_images reads the vendored charts with libyaml's loader (speed); it must give the
    same documents as PyYAML's pure-Python SafeLoader for every file we ship."""
    for path in sorted((chart_images.CHARTS / folder).glob("*.yaml")):
        assert chart_images._load(path) == yaml.safe_load(path.read_text()), path
