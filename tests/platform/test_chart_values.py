"""Every Helm value we set exists in the pinned chart's values.yaml (read at the chart's tag).

A misspelt or renamed key is silently ignored by Helm: the release installs and the setting
(a node affinity, a disabled scrape, an admin secret) just never applies. The keys are read
from each chart's values.yaml and Chart.yaml at the pinned version, vendored byte for byte
(trainforge/platform/data/charts, the files the plan reads the charts' images from too); Kueue,
whose packaged chart differs from its repository (its release rewrites the images), keeps a
key list under chart_values/. Bumping a pin without vendoring its chart fails here.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml

from trainforge.core import versions
from trainforge.platform import chart_images, device_plugins, kueue, monitoring, opencost, trainer
from trainforge.platform.services_config import KueueConfig, MonitoringConfig

KEYS = pathlib.Path(__file__).parent / "chart_values"
VENDORED = chart_images.CHARTS
# Subcharts a chart depends on (its Chart.yaml `dependencies` at the pinned version): values
# under the subchart's name go to the subchart, so its own values.yaml keys are valid there.
# Each one's values.yaml is vendored too (trainforge/platform/data/charts/<name>-<version>).
# source: prometheus-community/helm-charts charts/kube-prometheus-stack/Chart.yaml at tag
# kube-prometheus-stack-88.5.3 (kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1,
# grafana 12.11.1), read 2026-11-23
SUBCHARTS = {
    ("kube-prometheus-stack", "88.5.3"): [
        ("kube-state-metrics", "kube-state-metrics-8.4.0"),
        ("prometheus-node-exporter", "prometheus-node-exporter-4.56.1"),
        ("grafana", "grafana-12.11.1"),
    ],
}


def kind(value: Any) -> str:
    """The kind of a default: a map with keys, a free-form `{}`, a list, null or a scalar."""
    if isinstance(value, dict):
        return "map" if value else "{}"
    if isinstance(value, list):
        return "[]"
    return "null" if value is None else "scalar"


def key_kinds(values: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Every key path of a values.yaml and the kind of its default."""
    out = {}
    for k, v in values.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        out[path] = kind(v)
        if isinstance(v, dict):
            out.update(key_kinds(v, path))
    return out


def vendored_keys(folder: pathlib.Path, prefix: str = "") -> dict[str, str]:
    """The keys of a vendored chart: its values.yaml's, and the condition keys of its
    Chart.yaml's dependencies (`condition: a.enabled,b.install`), which Helm reads too."""
    out = key_kinds(yaml.safe_load((folder / "values.yaml").read_text()))
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    for dep in meta.get("dependencies") or []:
        for cond in filter(None, str(dep.get("condition") or "").split(",")):
            out.setdefault(cond.strip(), "condition")
    return {f"{prefix}{k}": v for k, v in out.items()}


def _read_keys(path: pathlib.Path, prefix: str = "") -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, kind = line.split("\t")
            out[f"{prefix}{key}"] = kind
    return out


def _keys(name: str, prefix: str = "") -> dict[str, str]:
    """From the vendored chart when there is one, else from its derived key list."""
    if (VENDORED / name / "values.yaml").is_file():
        return vendored_keys(VENDORED / name, prefix)
    path = KEYS / f"{name}.keys"
    assert path.is_file(), f"vendor {name}'s values.yaml (trainforge/platform/data/charts)"
    return _read_keys(path, prefix)


def chart_keys(chart: str, version: str) -> dict[str, str]:
    out = _keys(f"{chart}-{version}")
    for name, folder in SUBCHARTS.get((chart, version), []):
        out.update(_keys(folder, f"{name}."))
    return out


def paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in values.items():
        p = f"{prefix}.{k}" if prefix else k
        out.append(p)
        if isinstance(v, dict):
            out += paths(v, p)
    return out


def unknown(values: dict[str, Any], keys: dict[str, str]) -> list[str]:
    """Paths the chart does not define, except below a free-form default ({}, [], null)."""
    bad = []
    for p in paths(values):
        if p in keys:
            continue
        parents = [p.rsplit(".", n)[0] for n in range(1, p.count(".") + 1)]
        if any(keys.get(q) in ("{}", "[]", "null") for q in parents):
            continue
        bad.append(p)
    return bad


CHARTS = [
    (
        "kube-prometheus-stack",
        versions.KUBE_PROMETHEUS_STACK_CHART_VERSION,
        lambda: monitoring.prometheus_values(MonitoringConfig(grafana=True), "trainforge-gp3"),
    ),
    (
        "nvidia-device-plugin",
        versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        lambda: device_plugins.nvidia_values(device_plugins.GPU_NODE_TERMS),
    ),
    (
        "dcgm-exporter",
        versions.DCGM_EXPORTER_CHART_VERSION,
        lambda: monitoring.dcgm_values(profiling=True),
    ),
    (
        "kueue",
        versions.KUEUE_CHART_VERSION,
        lambda: kueue.chart_values(KueueConfig()),
    ),
    (
        "aws-efa-k8s-device-plugin",
        versions.EFA_DEVICE_PLUGIN_CHART_VERSION,
        lambda: device_plugins.efa_values(device_plugins.EFA_NODE_TERMS, ["efa-training"]),
    ),
    ("kubeflow-trainer", versions.TRAINER_VERSION, trainer.chart_values),
    ("jobset", versions.JOBSET_VERSION, trainer.jobset_values),
    (
        "opencost",
        versions.OPENCOST_CHART_VERSION,
        lambda: opencost.opencost_values("trainforge-prod", "monitoring"),
    ),
]


@pytest.mark.parametrize(("chart", "version", "values"), CHARTS, ids=[c[0] for c in CHARTS])
def test_every_value_we_set_is_a_key_of_the_pinned_chart(chart, version, values):
    assert unknown(values(), chart_keys(chart, version)) == []


def test_a_misspelt_key_is_caught():
    keys = chart_keys("kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART_VERSION)
    assert unknown({"kubeScheduler": {"enabeld": False}}, keys) == ["kubeScheduler.enabeld"]
    assert unknown({"prometheus": {"prometheusSpec": {"podMonitorSelector": {"x": 1}}}}, keys) == []


def test_control_plane_scrapes_and_alerts_are_off_on_eks():
    values = monitoring.prometheus_values(MonitoringConfig(), "trainforge-gp3")
    for component in ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy"):
        assert values[component] == {"enabled": False}
    rules = values["defaultRules"]["rules"]
    assert not any(rules[r] for r in ("etcd", "kubeControllerManager", "kubeProxy"))
    assert not rules["kubeSchedulerAlerting"] and not rules["kubeSchedulerRecording"]


def test_mlflow_accepts_the_host_jobs_call_it_by():
    from urllib.parse import urlparse

    netloc = urlparse(monitoring.MLFLOW_TRACKING_URI).netloc
    assert netloc in monitoring.mlflow_allowed_hosts()
