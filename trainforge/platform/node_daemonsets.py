"""The DaemonSet pods that run on a pool's nodes, and what they request there.

Why: a training pod gets what is left of a node's allocatable capacity after every DaemonSet
pod that lands on it. Which DaemonSets land on a pool follows from their tolerations and node
affinity against the pool's taints and node labels; this module evaluates exactly that, with
the tolerations/affinity we render (device plugins, DCGM) or the chart's/add-on's own, and
the requests of the pinned version (each entry names its source; checked 2026-11-23).

Pure apart from importing the value builders of the components that render these charts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import DaemonSetLoad, Taint
from trainforge.core.labels import ARCH, INSTANCE_TYPE, KARPENTER_GPU_COUNT, OS
from trainforge.core.taints import node_selector_terms, untolerated
from trainforge.platform.config import (
    EFA_NODE_LABEL,
    GPU_NODE_LABEL,
    POOL_LABEL,
    NodeGroupConfig,
    NodePoolConfig,
    PlatformConfig,
)

EVERYTHING = ({"operator": "Exists"},)  # tolerates every taint
LINUX_EC2_TERMS = (
    {
        "matchExpressions": [
            {"key": OS, "operator": "In", "values": ["linux"]},
            {
                "key": "eks.amazonaws.com/compute-type",
                "operator": "NotIn",
                "values": ["fargate", "hybrid", "auto"],
            },
        ]
    },
)


@dataclass(frozen=True)
class DaemonSetFacts:
    """A DaemonSet the platform installs: its pod's requests and where it may run."""

    name: str
    cpu_m: int
    memory_mib: int
    tolerations: tuple[dict[str, Any], ...]
    node_terms: tuple[dict[str, Any], ...] | None  # nodeSelectorTerms (ORed); None = any
    source: str

    def load(self) -> DaemonSetLoad:
        return DaemonSetLoad(self.name, self.cpu_m, self.memory_mib, self.source)


def _addon(name: str) -> str:
    return f"{name} {versions.EKS_ADDON_VERSIONS.get(name, '')}".strip()


def platform_daemonsets(
    config: PlatformConfig, *, gpu_nodes: bool, efa_nodes: bool, efa_pools: list[str]
) -> list[DaemonSetFacts]:
    """Every DaemonSet the platform described by `config` runs (EKS add-ons, device plugins,
    monitoring, CSI node drivers). Requests are per pod: the sum of its containers (init
    containers request less than that in every case here)."""
    out = [
        DaemonSetFacts(
            "aws-node",
            50,
            0,
            EVERYTHING,
            LINUX_EC2_TERMS,
            f"{_addon('vpc-cni')}: aws-node 25m + aws-eks-nodeagent 25m, no memory "
            "(github.com/aws/amazon-vpc-cni-k8s v1.21.1 config/master/aws-k8s-cni.yaml)",
        ),
        DaemonSetFacts(
            "kube-proxy",
            100,
            0,
            EVERYTHING,
            LINUX_EC2_TERMS,
            f"{_addon('kube-proxy')}: 100m CPU as in the upstream kube-proxy DaemonSet; the "
            "EKS build's own manifest is not public, so this is NOT confirmed for it",
        ),
        DaemonSetFacts(
            "eks-pod-identity-agent",
            0,
            0,
            EVERYTHING,
            LINUX_EC2_TERMS,
            f"{_addon('eks-pod-identity-agent')}: chart default resources {{}} "
            "(github.com/aws/eks-pod-identity-agent charts/eks-pod-identity-agent/values.yaml)",
        ),
    ]
    if "aws-ebs-csi-driver" in versions.EKS_ADDON_VERSIONS:
        out.append(
            DaemonSetFacts(
                "ebs-csi-node",
                30,
                120,
                EVERYTHING,  # node.tolerateAllTaints: true
                LINUX_EC2_TERMS,
                f"{_addon('aws-ebs-csi-driver')}: 3 containers x 10m/40Mi (node.resources, "
                "used by the sidecars too; github.com/kubernetes-sigs/aws-ebs-csi-driver "
                "v1.50.1 charts/aws-ebs-csi-driver/values.yaml)",
            )
        )
    if config.node_health.monitoring_agent:
        from trainforge.platform import node_health as nh  # noqa: PLC0415 - pulls in pulumi

        tolerations = tuple(nh.addon_configuration()["nodeAgent"]["tolerations"])
        source = (
            f"{nh.ADDON_NAME} {versions.EKS_NODE_MONITORING_AGENT_VERSION}: chart values "
            "(github.com/aws/eks-node-monitoring-agent v1.7.0); tolerations ours (node_health.py)"
        )
        out.append(
            DaemonSetFacts(
                nh.ADDON_NAME, *nh.AGENT_REQUESTS, tolerations, nh.AGENT_NODE_TERMS, source
            )  # fmt: skip
        )
        if gpu_nodes:
            out.append(
                DaemonSetFacts(
                    "dcgm-server",
                    *nh.DCGM_SERVER_REQUESTS,
                    tolerations,
                    nh.DCGM_SERVER_NODE_TERMS,
                    source,
                )  # fmt: skip
            )
    services = config.services
    if services is None:
        return out
    if services.fsx.enabled:
        out.append(
            DaemonSetFacts(
                "fsx-csi-node",
                30,
                104,
                EVERYTHING,  # node.tolerateAllTaints: true
                LINUX_EC2_TERMS,
                f"aws-fsx-csi-driver {versions.FSX_CSI_ADDON_VERSION}: fsx-plugin 10m/40Mi, "
                "node-driver-registrar and liveness-probe 10m/32Mi each "
                "(github.com/kubernetes-sigs/aws-fsx-csi-driver v1.5.0 chart values.yaml)",
            )
        )
    from trainforge.platform.device_plugins import (  # noqa: PLC0415 - pulls in pulumi
        EFA_NODE_TERMS,
        GPU_NODE_TERMS,
        efa_values,
        nvidia_values,
    )
    from trainforge.platform.monitoring import dcgm_values  # noqa: PLC0415

    if services.device_plugins.nvidia and gpu_nodes:
        v = nvidia_values(GPU_NODE_TERMS)
        out.append(
            DaemonSetFacts(
                "nvidia-device-plugin",
                0,
                0,
                tuple(v["tolerations"]),
                _terms(v["affinity"]),
                f"nvidia-device-plugin chart {versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION}: "
                "resources {} (github.com/NVIDIA/k8s-device-plugin v0.20.0 "
                "deployments/helm/nvidia-device-plugin/values.yaml); affinity/tolerations ours",
            )
        )
    if services.device_plugins.efa and efa_nodes:
        v = efa_values(EFA_NODE_TERMS, efa_pools)
        labels = v["supportedInstanceLabels"]
        out.append(
            DaemonSetFacts(
                "aws-efa-k8s-device-plugin",
                10,
                20,
                # the chart's template adds CriticalAddonsOnly to the values' tolerations
                ({"key": "CriticalAddonsOnly", "operator": "Exists"}, *v["tolerations"]),
                tuple(
                    {"matchExpressions": [{"key": k, "operator": "In", "values": labels["values"]}]}
                    for k in labels["keys"]
                ),
                f"aws-efa-k8s-device-plugin chart {versions.EFA_DEVICE_PLUGIN_CHART_VERSION}: "
                "requests 10m/20Mi (github.com/aws/eks-charts commit bfe91c4, chart v0.5.30, "
                "stable/aws-efa-k8s-device-plugin/values.yaml); node terms from our values",
            )
        )
    monitoring = services.monitoring
    if monitoring.dcgm_exporter and gpu_nodes:
        v = dcgm_values()
        out.append(
            DaemonSetFacts(
                "dcgm-exporter",
                100,
                128,
                tuple(v["tolerations"]),
                _terms(v["affinity"]),
                f"dcgm-exporter chart {versions.DCGM_EXPORTER_CHART_VERSION}: requests "
                "100m/128Mi (github.com/NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 "
                "deployment/values.yaml; our values keep them); affinity/tolerations ours",
            )
        )
    if monitoring.mode == "managed":
        out.append(
            DaemonSetFacts(
                "node-exporter",
                0,
                0,
                ({"effect": "NoSchedule", "operator": "Exists"},),
                None,
                f"kube-prometheus-stack {versions.KUBE_PROMETHEUS_STACK_CHART_VERSION} -> "
                "prometheus-node-exporter 4.56.1: resources {}, tolerates NoSchedule "
                "(github.com/prometheus-community/helm-charts prometheus-node-exporter-4.56.1)",
            )
        )
    return out


def _terms(affinity: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    node = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return tuple(node["nodeSelectorTerms"])


# --- which DaemonSets land on a pool ------------------------------------------------------------


def node_labels(
    pool: NodeGroupConfig | NodePoolConfig, instance_type: str, gpus: int, arch: str = "amd64"
) -> dict[str, str]:
    """The labels a node of `pool` carries that DaemonSet selectors look at."""
    labels = {
        **dict(pool.labels),
        POOL_LABEL: pool.name,
        OS: "linux",
        ARCH: arch,  # the kubelet's well-known label
        INSTANCE_TYPE: instance_type,
    }
    if isinstance(pool, NodeGroupConfig):
        labels[GPU_NODE_LABEL] = "true"  # trainforge.platform.node_groups
        if pool.efa:
            labels[EFA_NODE_LABEL] = "true"
    elif gpus:
        labels[KARPENTER_GPU_COUNT] = str(gpus)  # Karpenter's own label
    return labels


def tolerates(tolerations: tuple[dict[str, Any], ...], taint: Taint) -> bool:
    """Kubernetes' toleration matching for one taint (trainforge.core.taints)."""
    as_dict = {"key": taint.key, "value": taint.value, "effect": taint.effect}
    return untolerated([as_dict], tolerations) is None


def selects(terms: tuple[dict[str, Any], ...] | None, labels: dict[str, str]) -> bool:
    """Whether a DaemonSet's required nodeSelectorTerms select a node with `labels` (None: the
    DaemonSet has none and selects every node): core/taints' one model of upstream's
    MatchNodeSelectorTerms (terms ORed, a term's requirements ANDed, an empty or invalid term
    selecting nothing; proven against component-helpers' cases in tests/test_upstream_scheduling)."""
    if terms is None:
        return True
    return node_selector_terms(terms, labels)


def lands_on(ds: DaemonSetFacts, labels: dict[str, str], taints: tuple[Taint, ...]) -> bool:
    """Whether the DaemonSet controller puts a pod of `ds` on such a node (NoSchedule and
    NoExecute taints must be tolerated; PreferNoSchedule does not keep DaemonSets away)."""
    hard = [t for t in taints if t.effect in ("NoSchedule", "NoExecute")]
    return selects(ds.node_terms, labels) and all(tolerates(ds.tolerations, t) for t in hard)
