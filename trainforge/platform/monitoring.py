"""Metrics and experiment tracking: kube-prometheus-stack, the DCGM exporter, optional MLflow.

Why: a training platform without GPU utilisation and job metrics cannot be operated. The
Prometheus stack is configured to pick up EVERY ServiceMonitor and PodMonitor in every
namespace (by default it only selects ones labelled with its own release name, which silently
ignores the PodMonitors trainforge jobs create). `mode: external` skips the stack for clusters
that already run a Prometheus operator. The DCGM exporter runs on GPU nodes only and ships
its ServiceMonitor.

With Grafana on (`monitoring.grafana: true`), trainforge's dashboards (dashboards.py: a
training-job and a GPU fleet dashboard) ship as ConfigMaps the chart's Grafana sidecar loads.

MLflow (optional) runs as one non-root pod in namespace `mlflow`; jobs get its in-cluster
address as MLFLOW_TRACKING_URI. Backend `pvc` keeps the SQLite store and artifacts on a
ReadWriteOnce volume (survives restarts; one replica, Recreate strategy). `sqlite-ephemeral`
keeps them on an emptyDir: fine for dev, everything is lost when the pod moves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainforge.platform import versions
from trainforge.platform.dashboards import DASHBOARDS, SIDECAR_LABEL, SIDECAR_LABEL_VALUE
from trainforge.platform.device_plugins import GPU_NODE_TERMS, GPU_TAINT_TOLERATION, node_affinity
from trainforge.platform.services_config import MlflowConfig, MonitoringConfig
from trainforge.platform.teams import TEAM_LABEL

MLFLOW_NAMESPACE = "mlflow"
MLFLOW_PORT = 5000
MLFLOW_TRACKING_URI = f"http://mlflow.{MLFLOW_NAMESPACE}.svc.cluster.local:{MLFLOW_PORT}"
MLFLOW_UID = 1000
# EKS (1.30+) ships no default StorageClass, so volumes name this one explicitly.
STORAGE_CLASS = "trainforge-gp3"
GRAFANA_ADMIN_SECRET = "grafana-admin"


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


def prometheus_values(cfg: MonitoringConfig, storage_class: str) -> dict[str, Any]:
    grafana: dict[str, Any] = {"enabled": cfg.grafana}
    if cfg.grafana:
        # never the chart's well-known default password
        grafana["admin"] = {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": "admin-user",
            "passwordKey": "admin-password",
        }
    return {
        "grafana": grafana,
        **EKS_UNSCRAPABLE,
        "prometheus": {
            "prometheusSpec": {
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


def dcgm_values() -> dict[str, Any]:
    return {
        "affinity": node_affinity(GPU_NODE_TERMS),
        "tolerations": [GPU_TAINT_TOLERATION],
        # honorLabels: keep the exporter's `namespace`/`pod` labels (the training pod using
        # each GPU) instead of renaming them `exported_*` in favour of the exporter's own pod;
        # the training dashboard selects a job's GPUs by them.
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": True},
    }


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
        dcgm_ns = "kube-system"
        if cfg.mode == "managed":
            ns = k8s.core.v1.Namespace(
                f"{name}-ns",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=cfg.namespace,
                    labels={
                        # Deliberate exception: node-exporter needs hostNetwork/hostPID and
                        # hostPath, and the DCGM exporter SYS_ADMIN, which only `privileged`
                        # admits. No user workloads run in this namespace.
                        "pod-security.kubernetes.io/enforce": "privileged",
                        "pod-security.kubernetes.io/warn": "baseline",
                    },
                ),
                opts=child,
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
                    cfg, cfg.storage_class or self._storage_class(name, child)
                ),
                opts=pulumi.ResourceOptions.merge(child, self._class_deps()),
            )
            dcgm_ns = ns.metadata.name
            if cfg.grafana:
                self._dashboards(name, ns.metadata.name, child)
        if cfg.dcgm_exporter and args.gpu_nodes:
            self.dcgm = k8s.helm.v3.Release(
                f"{name}-dcgm",
                name="dcgm-exporter",
                chart="dcgm-exporter",
                version=versions.DCGM_EXPORTER_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=versions.DCGM_EXPORTER_CHART_REPO
                ),
                namespace=dcgm_ns,
                values=dcgm_values(),
                # its ServiceMonitor needs the Prometheus operator CRDs
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[self.stack] if self.stack else [])
                ),
            )
        self.mlflow_tracking_uri = None
        if args.mlflow.enabled:
            self._mlflow(name, args.mlflow, child)
            self.mlflow_tracking_uri = MLFLOW_TRACKING_URI
        self.register_outputs(
            {"mode": cfg.mode, "mlflowTrackingUri": self.mlflow_tracking_uri or ""}
        )

    def _dashboards(
        self, name: str, namespace: pulumi.Input[str], child: pulumi.ResourceOptions
    ) -> None:
        """trainforge's dashboards as ConfigMaps the chart's Grafana sidecar picks up."""
        for cm_name, build in DASHBOARDS.items():
            k8s.core.v1.ConfigMap(
                f"{name}-{cm_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=cm_name,
                    namespace=namespace,
                    labels={
                        SIDECAR_LABEL: SIDECAR_LABEL_VALUE,
                        "app.kubernetes.io/part-of": "trainforge",
                    },
                ),
                data={f"{cm_name}.json": json.dumps(build(), indent=1, sort_keys=True)},
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

    def _mlflow(self, name: str, cfg: MlflowConfig, child: pulumi.ResourceOptions) -> None:
        labels = {"app.kubernetes.io/name": "mlflow", "app.kubernetes.io/part-of": "trainforge"}
        ns = k8s.core.v1.Namespace(
            f"{name}-mlflow-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=MLFLOW_NAMESPACE,
                labels={
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/warn": "restricted",
                },
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
                opts=pulumi.ResourceOptions.merge(child, self._class_deps()),
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
        k8s.apps.v1.Deployment(
            f"{name}-mlflow",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="mlflow", namespace=namespace, labels=labels),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                # SQLite on a ReadWriteOnce volume: never two pods at once.
                strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=mlflow_pod_spec(sa.metadata.name, data_volume),
                ),
            ),
            opts=child,
        )
        # Only team namespaces may reach the server (its API has no authentication).
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


def mlflow_pod_spec(service_account: pulumi.Input[str], data_volume: Any) -> Any:
    probe = k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path="/health", port="http"),
        period_seconds=10,
        failure_threshold=6,
    )
    return k8s.core.v1.PodSpecArgs(
        service_account_name=service_account,
        automount_service_account_token=False,
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
                image=versions.MLFLOW_IMAGE,
                command=["mlflow", "server"],
                args=[
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
                env=[k8s.core.v1.EnvVarArgs(name="HOME", value="/tmp")],
                ports=[
                    k8s.core.v1.ContainerPortArgs(
                        name="http", container_port=MLFLOW_PORT, protocol="TCP"
                    )
                ],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "250m", "memory": "512Mi"},
                    limits={"cpu": "1", "memory": "2Gi"},
                ),
                security_context=k8s.core.v1.SecurityContextArgs(
                    allow_privilege_escalation=False,
                    read_only_root_filesystem=True,
                    run_as_non_root=True,
                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                    seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                ),
                readiness_probe=probe,
                liveness_probe=probe,
                volume_mounts=[
                    k8s.core.v1.VolumeMountArgs(name="data", mount_path="/mlflow"),
                    k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                ],
            )
        ],
        volumes=[data_volume, k8s.core.v1.VolumeArgs(name="tmp", empty_dir={})],
    )
