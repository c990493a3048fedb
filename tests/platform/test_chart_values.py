"""Every Helm value we set exists in the pinned chart's values.yaml (read at the chart's tag).

A misspelt or renamed key is silently ignored by Helm: the release installs and the setting
(a node affinity, a disabled scrape, an admin secret) just never applies. The key lists under
chart_values/ are derived from each chart's values.yaml at the pinned version; bumping a pin
without re-deriving its list fails here.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from trainforge.core import versions
from trainforge.platform import device_plugins, kueue, monitoring, opencost, trainer
from trainforge.platform.services_config import KueueConfig, MonitoringConfig

KEYS = pathlib.Path(__file__).parent / "chart_values"
# Subcharts a chart depends on (its Chart.yaml `dependencies` at the pinned version): values
# under the subchart's name go to the subchart, so its own values.yaml keys are valid there.
# source: prometheus-community/helm-charts charts/kube-prometheus-stack/Chart.yaml at tag
# kube-prometheus-stack-88.5.3 (kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1,
# grafana 12.11.1), read 2026-11-23
SUBCHARTS = {
    ("kube-prometheus-stack", "88.5.3"): [
        ("kube-state-metrics", "kube-state-metrics-8.4.0"),
        ("prometheus-node-exporter", "prometheus-node-exporter-4.56.1"),
        ("grafana", "grafana-12.11.1"),
    ],
    # source: kubeflow/trainer charts/kubeflow-trainer/Chart.yaml at v2.3.0 (jobset 0.12.0,
    # condition jobset.install; versions.JOBSET_VERSION), read 2026-11-23
    ("kubeflow-trainer", "2.3.0"): [("jobset", "jobset-0.12.0")],
}


def _read_keys(path: pathlib.Path, prefix: str = "") -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, kind = line.split("\t")
            out[f"{prefix}{key}"] = kind
    return out


def chart_keys(chart: str, version: str) -> dict[str, str]:
    path = KEYS / f"{chart}-{version}.keys"
    assert path.is_file(), f"re-derive {path.name} from {chart}'s values.yaml at {version}"
    out = _read_keys(path)
    for name, keys in SUBCHARTS.get((chart, version), []):
        out.update(_read_keys(KEYS / f"{keys}.keys", f"{name}."))
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
