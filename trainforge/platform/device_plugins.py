"""Device plugins that make GPUs (`nvidia.com/gpu`) and EFA (`vpc.amazonaws.com/efa`)
schedulable resources.

Why the placement: the NVIDIA plugin does nothing on CPU nodes, and the EFA plugin
crash-loops on nodes without EFA devices, so each DaemonSet is pinned with node affinity to
the nodes that have the hardware; both tolerate the `nvidia.com/gpu` NoSchedule taint that
keeps ordinary pods off GPU nodes.

Node-label contract with the platform core: GPU nodes carry `nvidia.com/gpu.present=true`
(managed node groups) or Karpenter's `karpenter.k8s.aws/instance-gpu-count` label; EFA nodes
carry `vpc.amazonaws.com/efa.present=true`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core import versions
from trainforge.core.labels import KARPENTER_GPU_COUNT
from trainforge.platform import chart_images
from trainforge.platform.chart_images import ChartImage
from trainforge.platform.config import (
    EFA_NODE_LABEL,
    GPU_NODE_LABEL,
    POOL_LABEL,  # every trainforge node group / Karpenter pool sets it
)
from trainforge.platform.node_taints import GPU_TAINT_KEY
from trainforge.platform.services_config import DevicePluginsConfig

# The plugins' images, read from the vendored values of the pinned charts with their
# templates' tag rules: nvidia-device-plugin 0.20.0 templates/_helpers.tpl
# `nvidia-device-plugin.fullimage` (`image.tag | default (printf "v%s" .Chart.AppVersion)`);
# aws-efa-k8s-device-plugin v0.5.30 templates/daemonset.yaml (`image.tag | default
# .Chart.AppVersion`). Read 2026-11-27.
NVIDIA_IMAGES = (ChartImage("image", "v{appVersion}"),)
EFA_IMAGES = (ChartImage("image", "{appVersion}"),)

GPU_TAINT_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# nodeSelectorTerms are ORed: either label marks a GPU node.
GPU_NODE_TERMS: list[dict[str, Any]] = [
    {"matchExpressions": [{"key": GPU_NODE_LABEL, "operator": "In", "values": ["true"]}]},
    {"matchExpressions": [{"key": KARPENTER_GPU_COUNT, "operator": "Gt", "values": ["0"]}]},
]
EFA_NODE_TERMS: list[dict[str, Any]] = [
    {"matchExpressions": [{"key": EFA_NODE_LABEL, "operator": "In", "values": ["true"]}]}
]


def node_affinity(terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def nvidia_values(terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": node_affinity(terms),
        "tolerations": [GPU_TAINT_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "priorityClassName": "system-node-critical",
        # GPU feature discovery / NFD are not needed: node groups and Karpenter label nodes.
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
    }


def efa_values(terms: list[dict[str, Any]], pool_names: list[str] | None = None) -> dict[str, Any]:
    """The eks-charts EFA chart has no `affinity` value: its node affinity is built from
    `supportedInstanceLabels` (one `In` term per key, all keys sharing ONE value list), so that
    is where the EFA label goes. With `pool_names`, nodes of those pools also match through
    `trainforge.io/pool` (for Karpenter pools that do not set the EFA label); the shared value
    list means the EFA label term also lists the pool names, which is harmless (that label is
    only ever "true")."""
    keys = sorted({e["key"] for t in terms for e in t["matchExpressions"]})
    values = sorted({v for t in terms for e in t["matchExpressions"] for v in e["values"]})
    if pool_names:
        keys.append(POOL_LABEL)
        values = sorted(set(values) | set(pool_names))
    return {
        "supportedInstanceLabels": {"keys": keys, "values": values},
        "tolerations": [GPU_TAINT_TOLERATION],
    }


@dataclass
class DevicePluginsArgs:
    config: DevicePluginsConfig
    k8s_provider: k8s.Provider
    gpu_nodes: bool = True
    efa_nodes: bool = False
    gpu_node_terms: list[dict[str, Any]] = field(default_factory=lambda: list(GPU_NODE_TERMS))
    efa_node_terms: list[dict[str, Any]] = field(default_factory=lambda: list(EFA_NODE_TERMS))
    # Pools whose nodes have EFA but may lack the EFA label (Karpenter NodePools).
    efa_pool_names: list[str] = field(default_factory=list)


class DevicePlugins(pulumi.ComponentResource):
    """NVIDIA device plugin on GPU nodes, EFA device plugin on EFA nodes (pinned charts)."""

    def __init__(
        self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:DevicePlugins", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.nvidia: k8s.helm.v3.Release | None = None
        self.efa: k8s.helm.v3.Release | None = None
        if args.config.nvidia and args.gpu_nodes:
            routed = chart_images.route(
                f"{name}-nvidia",
                "nvidia-device-plugin",
                versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
                NVIDIA_IMAGES,
            )
            self.nvidia = k8s.helm.v3.Release(
                f"{name}-nvidia",
                name="nvidia-device-plugin",
                chart="nvidia-device-plugin",
                version=versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=versions.NVIDIA_DEVICE_PLUGIN_CHART_REPO
                ),
                namespace="kube-system",
                values=chart_images.merge_into(nvidia_values(args.gpu_node_terms), routed),
                opts=child,
            )
        if args.config.efa and args.efa_nodes:
            routed = chart_images.route(
                f"{name}-efa",
                "aws-efa-k8s-device-plugin",
                versions.EFA_DEVICE_PLUGIN_CHART_VERSION,
                EFA_IMAGES,
            )
            self.efa = k8s.helm.v3.Release(
                f"{name}-efa",
                name="aws-efa-k8s-device-plugin",
                chart="aws-efa-k8s-device-plugin",
                version=versions.EFA_DEVICE_PLUGIN_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=versions.EFA_DEVICE_PLUGIN_CHART_REPO
                ),
                namespace="kube-system",
                values=chart_images.merge_into(
                    efa_values(args.efa_node_terms, args.efa_pool_names), routed
                ),
                opts=child,
            )
        self.register_outputs({"nvidia": self.nvidia is not None, "efa": self.efa is not None})
