"""Metrics and experiment tracking: kube-prometheus-stack, the DCGM exporter, optional MLflow.

Why: a training platform without GPU utilisation and job metrics cannot be operated. The
Prometheus stack is configured to pick up EVERY ServiceMonitor and PodMonitor in every
namespace (by default it only selects ones labelled with its own release name, which silently
ignores the PodMonitors trainforge jobs create). `mode: external` skips the stack for clusters
that already run a Prometheus operator. The DCGM exporter runs on GPU nodes only and ships
its ServiceMonitor.

With Grafana on (`monitoring.grafana: true`), trainforge's dashboards (dashboards.py: a
training-job and a GPU fleet dashboard) ship as ConfigMaps the chart's Grafana sidecar loads;
panels that read DCGM profiling metrics say how to switch them on when they are off.

MLflow (optional) runs as one non-root pod in namespace `mlflow` with its built-in
authentication, one user per team (trainforge.platform.mlflow_auth); jobs get its in-cluster
address as MLFLOW_TRACKING_URI and their team's credentials. Backend `pvc` keeps the SQLite
stores and artifacts on a ReadWriteOnce volume (survives restarts; one replica, Recreate
strategy). `sqlite-ephemeral` keeps them on an emptyDir: fine for dev, everything is lost
when the pod moves.

Placement and privilege (trainforge.platform.placement): every Deployment and StatefulSet
here runs on the system node group; the privileged node agents (node-exporter, the DCGM
exporter) run in namespace `node-agents`, so `monitoring` enforces Pod Security `baseline`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from trainforge.core import platform_names, versions
from trainforge.core.image_routes import cached, chart_image
from trainforge.platform import alerts, chart_images, kueue, mlflow_auth, opencost
from trainforge.platform.chart_images import ChartImage
from trainforge.platform.dashboards import (
    DASHBOARDS,
    FOLDER_ANNOTATION,
    SIDECAR_LABEL,
    SIDECAR_LABEL_VALUE,
    SPEND_DASHBOARD,
    for_exported,
    spend_dashboard,
    team_dashboard,
)
from trainforge.platform.device_plugins import GPU_NODE_TERMS, GPU_TAINT_TOLERATION, node_affinity
from trainforge.platform.placement import NODE_AGENTS_NAMESPACE, SYSTEM_NODE_SELECTOR, psa_labels
from trainforge.platform.services_config import MlflowConfig, MonitoringConfig
from trainforge.platform.teams import TEAM_LABEL

MLFLOW_NAMESPACE = platform_names.MLFLOW_NAMESPACE
MLFLOW_PORT = 5000
MLFLOW_TRACKING_URI = f"http://mlflow.{MLFLOW_NAMESPACE}.svc.cluster.local:{MLFLOW_PORT}"
MLFLOW_UID = 1000
# EKS (1.30+) ships no default StorageClass, so volumes name this one explicitly.
STORAGE_CLASS = "trainforge-gp3"
GRAFANA_ADMIN_SECRET = "grafana-admin"
GRAFANA_ADMIN_KEYS = ("admin-user", "admin-password")  # the chart's userKey, passwordKey
GRAFANA_ADMIN_USER = "admin"


# EKS runs the control plane: kube-controller-manager, kube-scheduler and etcd expose no
# endpoint the cluster can scrape (helm/charts#10517: KubeControllerManagerDown and
# KubeSchedulerDown fire forever on EKS), and EKS's kube-proxy serves metrics on
# 127.0.0.1:10249 only (prometheus-community/helm-charts#977: "connection refused"). Left on,
# their ServiceMonitors scrape nothing and their "target down" alerts never clear, so their
# scrapes and their rule groups are off. Keys checked against the chart's values.yaml at the
# pinned version (tests/platform/test_chart_values.py).
EKS_UNSCRAPABLE: dict[str, Any] = {
    "kubeControllerManager": {"enabled": False},
    "kubeScheduler": {"enabled": False},
    "kubeEtcd": {"enabled": False},
    "kubeProxy": {"enabled": False},
    "defaultRules": {
        "rules": {
            "etcd": False,
            "kubeControllerManager": False,
            "kubeSchedulerAlerting": False,
            "kubeSchedulerRecording": False,
            "kubeProxy": False,
        }
    },
}


# The images kube-prometheus-stack and its subcharts run, read from the vendored values at the
# pinned versions (a subchart's with the stack's values for it: the stack turns
# prometheus-node-exporter's `image.distroless` on), each with its template's tag rule: kube-prometheus-stack 88.5.3 templates/prometheus-operator/
# deployment.yaml (operator and config reloader: `tag | default .Chart.AppVersion`),
# prometheus/prometheus.yaml, alertmanager/alertmanager.yaml and the admission webhook's
# job-patch Jobs (the tag as it is; the patch Jobs run because certManager is off by
# default); kube-state-metrics 8.4.0 and prometheus-node-exporter 4.56.1 _helpers.tpl
# (`default (printf "v%s" .Chart.AppVersion)`; node-exporter's `prometheus-node-exporter.image`
# helper appends `-distroless` when image.distroless is true: charts/prometheus-node-exporter/
# templates/_helpers.tpl of github.com/prometheus-community/helm-charts, the stored version at
# commit 000dabb, read 2026-11-27; 4.56.1's values.yaml has the key); grafana 12.11.1's
# k8s-sidecar (on: the stack's values turn grafana.sidecar.dashboards and .datasources on).
# Each is pulled through the stack's cache where it has a rule for the image's registry
# (`chart_images.route` sets the block's registry/repository; the chart's tag stays): Quay,
# registry.k8s.io; ghcr.io's admission-webhook image only with a GitHub credential. Read
# 2026-11-27.
KPS_IMAGES = (
    ChartImage("prometheusOperator.image", "{appVersion}"),
    ChartImage("prometheusOperator.prometheusConfigReloader.image", "{appVersion}"),
    ChartImage("prometheus.prometheusSpec.image"),
    ChartImage("alertmanager.alertmanagerSpec.image"),
    ChartImage("prometheusOperator.admissionWebhooks.patch.image"),
)
SUBCHART_IMAGES = {
    "kube-state-metrics": (ChartImage("image", "v{appVersion}"),),
    "prometheus-node-exporter": (
        ChartImage("image", "v{appVersion}", ("distroless", "-distroless")),
    ),
}
GRAFANA_IMAGES = (ChartImage("sidecar.image"),)
KPS = ("kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART_VERSION)


def _route_stack_images(component: str, grafana: bool) -> dict[str, Any]:
    """The stack's values that pull its images through the cache (merged into the release's
    values), each image recorded with what those values make the chart pull."""
    out = chart_images.route(component, *KPS, KPS_IMAGES)
    for sub, images in SUBCHART_IMAGES.items():
        version = chart_images.dependency_version(*KPS, sub)
        at = chart_images.Subchart(*KPS, sub)
        out = chart_images.merged(out, chart_images.route(component, sub, version, images, at))
    if grafana:
        at = chart_images.Subchart(*KPS, "grafana")
        version = versions.GRAFANA_CHART_VERSION
        out = chart_images.merged(
            out, chart_images.route(component, "grafana", version, GRAFANA_IMAGES, at)
        )
    return out


# The exporter's image: deployment/templates/daemonset.yaml at tag 4.5.3-4.8.2 (`image.tag`,
# else the chart's appVersion). Read 2026-11-27.
DCGM_IMAGES = (ChartImage("image", "{appVersion}"),)


def _grafana_image(path: str) -> str:
    """An image grafana's chart runs, as its values.yaml at the pinned version names it."""
    return chart_images.default_image(
        "grafana", versions.GRAFANA_CHART_VERSION, path, app_version_tag=path == "image"
    )


def prometheus_values(
    cfg: MonitoringConfig,
    storage_class: str,
    node_exporter_namespace: str = NODE_AGENTS_NAMESPACE,
    receiver_secrets: dict[str, Any] | None = None,
    component: str = "kube-prometheus-stack",
) -> dict[str, Any]:
    """The chart's values. `receiver_secrets` maps each receiver to its secret as a Pulumi
    secret Output, so the Release's values (and the state) keep it encrypted. `component`:
    the Release's Pulumi name, which the plan names for an image it installs from Docker Hub."""
    system = dict(SYSTEM_NODE_SELECTOR)
    # The chart's busybox containers (a CRD upgrade Job, node-exporter's permission fixer,
    # Grafana's chown of its volume) default to docker.io/busybox: the pinned busybox from
    # ECR Public instead, through the cache (no credential needed). Set even where that
    # container is off, so that switching it on never pulls from Docker Hub.
    busybox = chart_image(component, versions.BUSYBOX_IMAGE)
    routed = _route_stack_images(component, cfg.grafana)
    grafana: dict[str, Any] = {"enabled": cfg.grafana}
    if cfg.grafana:
        # Grafana's image is on Docker Hub only (docker.io/grafana/grafana): through the
        # cache's docker-hub rule when the stack has a Docker Hub credential, else a plan
        # finding (TRAINFORGE_DOCKER_HUB). curl (dashboards downloaded by URL) from Quay. The tags
        # stay the chart's. Its helm-test pod (bats, Docker Hub) is never run by Pulumi: off.
        # (the images as the pinned chart's values.yaml names them: trainforge.platform.
        # chart_images)
        grafana["image"] = chart_image(component, _grafana_image("image"))
        # curl: its official copy on Quay (no credential), the chart's tag
        grafana["downloadDashboardsImage"] = chart_image(
            component, chart_images.credential_free(_grafana_image("downloadDashboardsImage"))
        )
        grafana["initChownData"] = {"image": busybox}
        grafana["testFramework"] = {"enabled": False}
        # never the chart's well-known default password
        grafana["admin"] = {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": GRAFANA_ADMIN_KEYS[0],
            "passwordKey": GRAFANA_ADMIN_KEYS[1],
        }
        grafana["nodeSelector"] = system
        # dashboards filed in folders by their ConfigMap's annotation (a folder per team)
        grafana["sidecar"] = {
            "dashboards": {
                "folderAnnotation": FOLDER_ANNOTATION,
                "provider": {"foldersFromFilesStructure": True},
            }
        }
    values = _stack_values(
        cfg, storage_class, node_exporter_namespace, receiver_secrets, grafana, busybox, system
    )
    return chart_images.merge_into(values, routed)


def _stack_values(
    cfg: MonitoringConfig,
    storage_class: str,
    node_exporter_namespace: str,
    receiver_secrets: dict[str, Any] | None,
    grafana: dict[str, Any],
    busybox: dict[str, str],
    system: dict[str, str],
) -> dict[str, Any]:
    return {
        "grafana": grafana,
        **EKS_UNSCRAPABLE,
        # Every Deployment/StatefulSet/Job of the chart on the system node group, never on a
        # (spot) training node; node-exporter, a DaemonSet that needs the host's network,
        # PID namespace and root filesystem, in the privileged node-agents namespace.
        "crds": {"upgradeJob": {"nodeSelector": system, "image": {"busybox": busybox}}},
        "prometheusOperator": {
            "nodeSelector": system,
            "admissionWebhooks": {
                "deployment": {"nodeSelector": system},
                "patch": {"nodeSelector": system},
            },
        },
        "alertmanager": {
            "alertmanagerSpec": {"nodeSelector": system},
            # trainforge's routes and receivers (alerts.py); without receivers every alert
            # goes to the null receiver, which the plan says out loud.
            "config": alerts.alertmanager_config(cfg.receivers, receiver_secrets),
        },
        "kube-state-metrics": {"nodeSelector": system},
        "prometheus-node-exporter": {
            "namespaceOverride": node_exporter_namespace,
            "permissionInitContainer": {"image": busybox},
        },
        "prometheus": {
            "prometheusSpec": {
                "nodeSelector": system,
                # Select every monitor/rule in every namespace, not only this release's.
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "probeSelectorNilUsesHelmValues": False,
                "serviceMonitorSelector": {},
                "serviceMonitorNamespaceSelector": {},
                "podMonitorSelector": {},
                "podMonitorNamespaceSelector": {},
                "retention": cfg.retention,
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": storage_class,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": cfg.storage_size}},
                        }
                    }
                },
            }
        },
    }


# The DCGM fields the exporter collects without profiling: the chart's default counters
# (deployment/templates/metrics-configmap.yaml at tag 4.5.3-4.8.2) minus the DCGM_FI_PROF_*
# (DCP) fields, which are the only ones that need CAP_SYS_ADMIN (the chart's values.yaml:
# `add: ["SYS_ADMIN"]  # Required for profiling metrics (DCGM_FI_PROF_*)`).
DCGM_COUNTERS_CONFIGMAP = "trainforge-dcgm-counters"
DCGM_DEVICE_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)
DCGM_PROFILING_COUNTERS = (
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus."),
)


def dcgm_counters(profiling: bool) -> str:
    """The exporter's counters file (DCGM field, Prometheus type, help)."""
    rows = DCGM_DEVICE_COUNTERS + (DCGM_PROFILING_COUNTERS if profiling else ())
    return "".join(f"{field}, {kind}, {text}\n" for field, kind, text in rows)


PROFILING_HINT = (
    "DCGM profiling metrics need CAP_SYS_ADMIN in the exporter: set "
    "`trainforge:monitoring.dcgmProfilingMetrics: true` to collect them."
)


def dcgm_metrics(profiling: bool) -> set[str]:
    """The metric names the exporter collects with these settings (its counters file)."""
    rows = DCGM_DEVICE_COUNTERS + (DCGM_PROFILING_COUNTERS if profiling else ())
    return {field for field, kind, _ in rows if kind != "label"}


def dcgm_values(profiling: bool = False) -> dict[str, Any]:
    """Root without any capability (it must open the kubelet's root-owned pod-resources
    socket to label metrics with the pod using each GPU); CAP_SYS_ADMIN only with profiling
    metrics switched on (`monitoring.dcgmProfilingMetrics`)."""
    caps: dict[str, Any] = {"drop": ["ALL"]}
    if profiling:
        caps["add"] = ["SYS_ADMIN"]
    return {
        "affinity": node_affinity(GPU_NODE_TERMS),
        "tolerations": [GPU_TAINT_TOLERATION],
        # honorLabels: keep the exporter's `namespace`/`pod` labels (the training pod using
        # each GPU) instead of renaming them `exported_*` in favour of the exporter's own pod;
        # the training dashboard selects a job's GPUs by them.
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": True},
        "securityContext": {
            "runAsNonRoot": False,
            "runAsUser": 0,
            "capabilities": caps,
            "allowPrivilegeEscalation": False,
        },
        # Our counters file in place of the chart's default one (which lists profiling fields).
        "extraConfigMapVolumes": [
            {
                "name": "exporter-metrics-volume",
                "configMap": {
                    "name": DCGM_COUNTERS_CONFIGMAP,
                    "items": [{"key": "metrics", "path": "default-counters.csv"}],
                },
            }
        ],
    }


# The labels only Kueue's metrics Service carries (see scrape_monitors): the chart's selector
# labels and its component (charts/kueue/templates/_helpers.tpl kueue.metricsService.labels,
# v0.19.2)
KUEUE_METRICS_SERVICE_LABELS = {
    **kueue.POD_LABELS,
    "app.kubernetes.io/component": "metrics-service",
}


def scrape_monitors(
    namespace: str, kueue_namespace: str | None, karpenter_namespace: str | None
) -> list[dict[str, Any]]:
    """ServiceMonitors for Kueue's and Karpenter's controllers, declared here rather than by
    their charts: the charts install before the Prometheus operator's CRDs exist (Karpenter's
    template then silently skips its monitor; Kueue's would fail the install).

    Kueue 0.19 serves metrics on its Service `kueue-controller-manager-metrics-service`, port
    `https` (8443), behind controller-runtime's authentication: the scrape sends Prometheus's
    service-account token (the chart's own monitor does the same,
    charts/kueue/templates/prometheus/monitor.yaml). The chart's metrics, webhook and
    visibility Services share the selector labels (name, instance, control-plane:
    `kueue.POD_LABELS`); the visibility server's
    port is also named `https` (templates/visibility/service.yaml), so the monitor selects
    the metrics Service by its `app.kubernetes.io/component: metrics-service` label
    (`kueue.metricsService.labels` in templates/_helpers.tpl), as the chart's own monitor
    does. Read at tag v0.19.2 on 2026-11-27 (the newest 0.19 tag the mirror holds; the
    pin is 0.19.5: not verified there). Karpenter serves plain HTTP
    on its Service's port `http-metrics` (charts/karpenter/templates/service.yaml, v1.14.1).
    """
    out: list[dict[str, Any]] = []

    def monitor(name: str, target_ns: str, selector: dict[str, str], endpoint: dict[str, Any]):
        out.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/part-of": "trainforge"},
                },
                "spec": {
                    "namespaceSelector": {"matchNames": [target_ns]},
                    "selector": {"matchLabels": selector},
                    "endpoints": [{"path": "/metrics", "interval": "30s", **endpoint}],
                },
            }
        )

    if kueue_namespace:
        monitor(
            "kueue-controller",
            kueue_namespace,
            KUEUE_METRICS_SERVICE_LABELS,
            {
                "port": "https",
                "scheme": "https",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                # Kueue's internal certificate is self-signed (no cert-manager here): the
                # channel is encrypted and the token authenticates, the server is not verified.
                "tlsConfig": {"insecureSkipVerify": True},
            },
        )
    if karpenter_namespace:
        monitor(
            "karpenter-controller",
            karpenter_namespace,
            {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"},
            {"port": "http-metrics"},
        )
    return out


def mlflow_allowed_hosts() -> list[str]:
    """Host headers the MLflow server accepts: its Service names (with and without the port)
    and localhost for `kubectl port-forward`; /health and /version are exempt (probes)."""
    names = [f"mlflow.{MLFLOW_NAMESPACE}.svc.cluster.local", f"mlflow.{MLFLOW_NAMESPACE}.svc"]
    names.append(f"mlflow.{MLFLOW_NAMESPACE}")
    hosts = [h for n in names for h in (n, f"{n}:{MLFLOW_PORT}")]
    return [
        *hosts,
        "localhost",
        f"localhost:{MLFLOW_PORT}",
        "127.0.0.1",
        f"127.0.0.1:{MLFLOW_PORT}",
    ]


@dataclass
class MonitoringArgs:
    config: MonitoringConfig
    mlflow: MlflowConfig
    k8s_provider: k8s.Provider
    gpu_nodes: bool = True
    # team name -> namespace: each gets an MLflow user and a credentials Secret
    team_namespaces: dict[str, pulumi.Input[str]] | None = None
    # The privileged node-agents namespace (a Namespace resource's name output).
    node_agents_namespace: pulumi.Input[str] = NODE_AGENTS_NAMESPACE
    # Controllers whose metrics the queue and capacity alerts read (None: not installed).
    kueue_namespace: str | None = None
    karpenter_namespace: str | None = None
    # OpenCost's cluster id, and each team's monthly budget (USD) its spend alert compares to
    cluster_name: pulumi.Input[str] = "trainforge"
    team_budgets: dict[str, float] | None = None


class Monitoring(pulumi.ComponentResource):
    """kube-prometheus-stack (or external), DCGM exporter, optional MLflow server."""

    mlflow_tracking_uri: str | None

    def __init__(
        self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:Monitoring", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.namespace = cfg.namespace
        self.stack: k8s.helm.v3.Release | None = None
        self.storage_class: k8s.storage.v1.StorageClass | None = None
        self.dcgm: k8s.helm.v3.Release | None = None
        agents_ns = args.node_agents_namespace
        if cfg.mode == "managed":
            ns = k8s.core.v1.Namespace(
                f"{name}-ns",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    # The privileged node agents run in node-agents: everything here passes
                    # `baseline` (and is warned about where it does not pass `restricted`).
                    name=cfg.namespace,
                    labels=psa_labels("baseline"),
                ),
                opts=child,
            )
            # Grafana reads its admin credentials through a non-optional secretKeyRef (grafana
            # chart 12.11.1, templates/_pod.tpl): the Secret is made here, before the release,
            # with a generated password (never in config, never the chart's default).
            grafana_admin = (
                self._grafana_admin(name, ns.metadata.name, child) if cfg.grafana else []
            )
            self.stack = k8s.helm.v3.Release(
                f"{name}-prometheus",
                name="kube-prometheus-stack",
                chart="kube-prometheus-stack",
                version=versions.KUBE_PROMETHEUS_STACK_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=versions.KUBE_PROMETHEUS_STACK_CHART_REPO
                ),
                namespace=ns.metadata.name,
                values=prometheus_values(
                    cfg,
                    cfg.storage_class or self._storage_class(name, child),
                    agents_ns,
                    {r.name: pulumi.Output.secret(r.secret) for r in cfg.receivers},
                    f"{name}-prometheus",
                ),
                opts=pulumi.ResourceOptions.merge(
                    child,
                    pulumi.ResourceOptions(
                        depends_on=[*self._class_deps().depends_on, *grafana_admin]
                    ),
                ),
            )
            if cfg.grafana:
                self._dashboards(
                    name,
                    ns.metadata.name,
                    child,
                    cfg.dcgm_profiling_metrics,
                    tuple(args.team_namespaces or {}),
                    spend=cfg.runs_opencost,
                )
        self.opencost: k8s.helm.v3.Release | None = None
        if cfg.runs_opencost and self.stack is not None:
            # its ServiceMonitor needs the Prometheus operator CRDs: after the stack
            self.opencost = k8s.helm.v3.Release(
                f"{name}-opencost",
                name=opencost.RELEASE,
                chart=opencost.CHART,
                version=versions.OPENCOST_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.OPENCOST_CHART_REPO),
                namespace=ns.metadata.name,
                values=opencost.opencost_values(
                    args.cluster_name, cfg.namespace, f"{name}-opencost"
                ),
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[self.stack])
                ),
            )
        if cfg.opencost.enabled and cfg.mode == "external":
            pulumi.log.warn(
                "trainforge:monitoring.opencost: not installed with mode external (it reads the "
                "managed stack's Prometheus); no spend board and no budget alert",
                self,
            )
        self._alerting(name, cfg, child, args)
        if cfg.dcgm_exporter and args.gpu_nodes:
            counters = k8s.core.v1.ConfigMap(
                f"{name}-dcgm-counters",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=DCGM_COUNTERS_CONFIGMAP, namespace=agents_ns
                ),
                data={"metrics": dcgm_counters(cfg.dcgm_profiling_metrics)},
                opts=child,
            )
            routed = chart_images.route(
                f"{name}-dcgm", "dcgm-exporter", versions.DCGM_EXPORTER_CHART_VERSION, DCGM_IMAGES
            )
            self.dcgm = k8s.helm.v3.Release(
                f"{name}-dcgm",
                name="dcgm-exporter",
                chart="dcgm-exporter",
                version=versions.DCGM_EXPORTER_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=versions.DCGM_EXPORTER_CHART_REPO
                ),
                namespace=agents_ns,
                values=chart_images.merge_into(dcgm_values(cfg.dcgm_profiling_metrics), routed),
                # its ServiceMonitor needs the Prometheus operator CRDs
                opts=pulumi.ResourceOptions.merge(
                    child,
                    pulumi.ResourceOptions(
                        depends_on=[counters, *([self.stack] if self.stack else [])]
                    ),
                ),
            )
        self.mlflow_tracking_uri = None
        # team -> the team's MLflow credentials Secret (its jobs mount it, so they wait for it)
        self.team_secrets: dict[str, pulumi.Resource] = {}
        if args.mlflow.enabled:
            self._mlflow(name, args.mlflow, child, dict(args.team_namespaces or {}))
            self.mlflow_tracking_uri = MLFLOW_TRACKING_URI
        self.register_outputs(
            {"mode": cfg.mode, "mlflowTrackingUri": self.mlflow_tracking_uri or ""}
        )

    def _grafana_admin(
        self, name: str, namespace: pulumi.Input[str], child: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """Grafana's admin Secret (`GRAFANA_ADMIN_SECRET`, keys `GRAFANA_ADMIN_KEYS`): the
        password generated by pulumi-random as MLflow's are (mlflow_auth), kept encrypted in
        the state; read it with `kubectl -n monitoring get secret grafana-admin`."""
        password = random.RandomPassword(
            f"{name}-grafana-admin-password", length=32, special=False, opts=child
        )
        user_key, password_key = GRAFANA_ADMIN_KEYS
        secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=GRAFANA_ADMIN_SECRET, namespace=namespace),
            type="Opaque",
            string_data={user_key: GRAFANA_ADMIN_USER, password_key: password.result},
            opts=child,
        )
        return [secret]

    def _alerting(
        self, name: str, cfg: MonitoringConfig, child: pulumi.ResourceOptions, args: MonitoringArgs
    ) -> None:
        """trainforge's PrometheusRule and the scrapes its queue and capacity alerts read
        (Kueue's and Karpenter's controllers), in either mode: an external Prometheus
        operator selects them as the managed stack does."""
        after = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[self.stack] if self.stack else [])
        )
        rule = alerts.prometheus_rule(
            cfg.alerts, cfg.namespace, args.team_budgets, spend=cfg.runs_opencost
        )
        k8s.apiextensions.CustomResource(
            f"{name}-alerts",
            api_version=rule["apiVersion"],
            kind=rule["kind"],
            metadata=rule["metadata"],
            spec=rule["spec"],
            opts=after,
        )
        for monitor in scrape_monitors(
            cfg.namespace, args.kueue_namespace, args.karpenter_namespace
        ):
            k8s.apiextensions.CustomResource(
                f"{name}-{monitor['metadata']['name']}",
                api_version=monitor["apiVersion"],
                kind=monitor["kind"],
                metadata=monitor["metadata"],
                spec=monitor["spec"],
                opts=after,
            )
        if cfg.mode == "external" and cfg.receivers:
            pulumi.log.warn(
                "trainforge:monitoring.receivers: ignored with mode external (the existing "
                "Alertmanager keeps its own routes); route alerts labelled platform=trainforge "
                "there",
                self,
            )
        if cfg.mode == "managed" and not cfg.receivers:
            pulumi.log.warn(
                "trainforge:monitoring.receivers: none configured, so trainforge's alerts "
                "(job stalled, GPU XID, queue starved, ...) reach nobody; add a slack, "
                "pagerduty or webhook receiver (docs/configuration.md)",
                self,
            )

    def _dashboards(
        self,
        name: str,
        namespace: pulumi.Input[str],
        child: pulumi.ResourceOptions,
        profiling: bool = False,
        teams: tuple[str, ...] = (),
        spend: bool = False,
    ) -> None:
        """trainforge's dashboards as ConfigMaps the chart's Grafana sidecar picks up, each
        panel reading only what the exporter collects here (dcgm_metrics); one training view
        per team (a team's namespace is its name)."""
        exported = dcgm_metrics(profiling)

        def board(build: Any) -> dict[str, Any]:
            return for_exported(build(), exported, PROFILING_HINT)

        boards: list[tuple[str, Any, str]] = [
            (cm_name, build, "trainforge") for cm_name, build in DASHBOARDS.items()
        ]
        if spend:  # OpenCost runs: spend per team beside the jobs
            boards.append((SPEND_DASHBOARD, spend_dashboard, "trainforge"))
        # per-team views: each team's jobs in its own folder
        boards += [
            (f"trainforge-team-{team}", (lambda t=team: team_dashboard(t, t)), team)
            for team in sorted(teams)
        ]
        for cm_name, build, folder in boards:
            k8s.core.v1.ConfigMap(
                f"{name}-{cm_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=cm_name,
                    namespace=namespace,
                    labels={
                        SIDECAR_LABEL: SIDECAR_LABEL_VALUE,
                        "app.kubernetes.io/part-of": "trainforge",
                    },
                    annotations={FOLDER_ANNOTATION: folder},
                ),
                data={f"{cm_name}.json": json.dumps(board(build), indent=1, sort_keys=True)},
                opts=child,
            )

    def _storage_class(self, name: str, child: pulumi.ResourceOptions) -> str:
        """An encrypted gp3 EBS class, declared once, for the volumes this component needs."""
        if self.storage_class is None:
            self.storage_class = k8s.storage.v1.StorageClass(
                f"{name}-gp3",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=STORAGE_CLASS),
                provisioner="ebs.csi.aws.com",
                parameters={"type": "gp3", "encrypted": "true", "fsType": "ext4"},
                # The volume is created in the AZ of the pod that first uses it.
                volume_binding_mode="WaitForFirstConsumer",
                allow_volume_expansion=True,
                # Experiment history and metrics outlive an accidental claim deletion; volumes
                # left after `pulumi destroy` must be deleted by hand.
                reclaim_policy="Retain",
                opts=child,
            )
        return STORAGE_CLASS

    def _class_deps(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(depends_on=[self.storage_class] if self.storage_class else [])

    def _mlflow(
        self,
        name: str,
        cfg: MlflowConfig,
        child: pulumi.ResourceOptions,
        teams: dict[str, pulumi.Input[str]],
    ) -> None:
        labels = {"app.kubernetes.io/name": "mlflow", "app.kubernetes.io/part-of": "trainforge"}
        ns = k8s.core.v1.Namespace(
            f"{name}-mlflow-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=MLFLOW_NAMESPACE, labels=psa_labels("restricted")
            ),
            opts=child,
        )
        namespace = ns.metadata.name
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-mlflow-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="mlflow", namespace=namespace, labels=labels),
            automount_service_account_token=False,
            opts=child,
        )
        if cfg.backend == "pvc":
            pvc = k8s.core.v1.PersistentVolumeClaim(
                f"{name}-mlflow-data",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name="mlflow-data", namespace=namespace, labels=labels
                ),
                spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                    access_modes=["ReadWriteOnce"],
                    storage_class_name=cfg.storage_class or self._storage_class(name, child),
                    resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                        requests={"storage": cfg.storage_size}
                    ),
                ),
                # The provider reads the class's binding mode to know a Pending claim is ready.
                # Experiment history: protected, so a destroy or a replacement of the claim
                # stops until someone unprotects it (its volume is Retain besides).
                opts=pulumi.ResourceOptions.merge(child, self._class_deps()).merge(
                    pulumi.ResourceOptions(protect=True)
                ),
            )
            data_volume = k8s.core.v1.VolumeArgs(
                name="data",
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=pvc.metadata.name
                ),
            )
        else:
            data_volume = k8s.core.v1.VolumeArgs(
                name="data", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs()
            )
        auth = mlflow_auth.declare(
            name,
            namespace,
            teams,
            cached(versions.MLFLOW_IMAGE),
            MLFLOW_PORT,
            child,
            container_security_context(),
        )
        k8s.apps.v1.Deployment(
            f"{name}-mlflow",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="mlflow",
                namespace=namespace,
                labels=labels,
                # Flask's secret key is an environment variable: MLflow reads it nowhere else.
                annotations=dict(mlflow_auth.CHECKOV_SKIPS),
            ),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                # SQLite on a ReadWriteOnce volume: never two pods at once.
                strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=mlflow_pod_spec(sa.metadata.name, data_volume, auth),
                ),
            ),
            # the Secrets and ConfigMap its pod reads, by name: waited for explicitly
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=auth.made)),
        )
        self.team_secrets = dict(auth.team_secrets)
        # Only team namespaces may reach the server (each with its own team's credentials).
        k8s.networking.v1.NetworkPolicy(
            f"{name}-mlflow-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="mlflow-from-teams", namespace=namespace, labels=labels
            ),
            spec={
                "podSelector": {"matchLabels": labels},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]
                                }
                            }
                        ],
                        "ports": [{"protocol": "TCP", "port": MLFLOW_PORT}],
                    }
                ],
            },
            opts=child,
        )
        k8s.core.v1.Service(
            f"{name}-mlflow-svc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="mlflow", namespace=namespace, labels=labels),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=labels,
                ports=[
                    k8s.core.v1.ServicePortArgs(
                        name="http", port=MLFLOW_PORT, target_port="http", protocol="TCP"
                    )
                ],
            ),
            opts=child,
        )


def container_security_context() -> Any:
    return k8s.core.v1.SecurityContextArgs(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def mlflow_pod_spec(
    service_account: pulumi.Input[str], data_volume: Any, auth: mlflow_auth.MlflowAuth
) -> Any:
    probe = k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path="/health", port="http"),
        period_seconds=10,
        failure_threshold=6,
    )
    return k8s.core.v1.PodSpecArgs(
        service_account_name=service_account,
        automount_service_account_token=False,
        node_selector=dict(SYSTEM_NODE_SELECTOR),
        security_context=k8s.core.v1.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=MLFLOW_UID,
            run_as_group=MLFLOW_UID,
            fs_group=MLFLOW_UID,
            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        containers=[
            k8s.core.v1.ContainerArgs(
                name="mlflow",
                image=cached(versions.MLFLOW_IMAGE),
                command=["mlflow", "server"],
                args=[
                    # MLflow's built-in authentication: one user per team, default permission
                    # NO_PERMISSIONS (trainforge.platform.mlflow_auth).
                    "--app-name=basic-auth",
                    "--host=0.0.0.0",
                    f"--port={MLFLOW_PORT}",
                    "--backend-store-uri=sqlite:////mlflow/mlflow.db",
                    # Clients upload artifacts through the server: jobs need no storage creds.
                    "--serve-artifacts",
                    "--artifacts-destination=/mlflow/artifacts",
                    # MLflow 3.5+ answers 403 to a Host header it does not allow (DNS-rebinding
                    # guard; the default allows only localhost and private IPs), and jobs call
                    # it by its Service name, port included (mlflow/mlflow#22095).
                    f"--allowed-hosts={','.join(mlflow_allowed_hosts())}",
                ],
                env=[k8s.core.v1.EnvVarArgs(name="HOME", value="/tmp"), *auth.server_env],
                ports=[
                    k8s.core.v1.ContainerPortArgs(
                        name="http", container_port=MLFLOW_PORT, protocol="TCP"
                    )
                ],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "250m", "memory": "512Mi"},
                    limits={"cpu": "1", "memory": "2Gi"},
                ),
                security_context=container_security_context(),
                readiness_probe=probe,
                liveness_probe=probe,
                volume_mounts=[
                    k8s.core.v1.VolumeMountArgs(name="data", mount_path="/mlflow"),
                    k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                    *auth.server_mounts,
                ],
            ),
            auth.sync_container,
        ],
        volumes=[data_volume, k8s.core.v1.VolumeArgs(name="tmp", empty_dir={}), *auth.volumes],
    )
