"""Kueue's ServiceMonitor selects the metrics Service only.

The labels below are what kueue's chart renders on its three Services with release name and
chart name `kueue` (charts/kueue/templates/_helpers.tpl: `kueue.labels` + the component of
`kueue.metricsService.labels`, `kueue.webhookService.labels`,
`kueue.visibilityService.labels`; templates/manager/auth_proxy_service.yaml,
webhook/service.yaml, visibility/service.yaml), read at tag v0.19.2 on 2026-11-27. The
visibility server's port is named `https` too: a selector without the component label made
Prometheus scrape it as well (a target that never answers /metrics).
"""

from __future__ import annotations

from trainforge.platform.monitoring import scrape_monitors

BASE = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": "kueue",
    "control-plane": "controller-manager",
    "app.kubernetes.io/managed-by": "Helm",
}
SERVICES = {
    "kueue-controller-manager-metrics-service": {
        **BASE,
        "app.kubernetes.io/component": "metrics-service",
    },
    "kueue-webhook-service": {**BASE, "app.kubernetes.io/component": "webhook-service"},
    "kueue-visibility-server": {**BASE, "app.kubernetes.io/component": "visibility-service"},
}


def selected(selector: dict[str, str]) -> list[str]:
    return [
        name
        for name, labels in SERVICES.items()
        if all(labels.get(k) == v for k, v in selector.items())
    ]


def test_the_kueue_monitor_selects_only_the_metrics_service():
    (kueue,) = [
        m for m in scrape_monitors("monitoring", "kueue-system", None)
        if m["metadata"]["name"] == "kueue-controller"
    ]  # fmt: skip
    assert selected(kueue["spec"]["selector"]["matchLabels"]) == [
        "kueue-controller-manager-metrics-service"
    ]
