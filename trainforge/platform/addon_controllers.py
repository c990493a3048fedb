"""The add-on controllers (Deployments) EKS installs, and where their pods may run.

Why: a controller pod on a job pool's node keeps that node up (Karpenter's `WhenEmpty`
consolidation never removes a node with a pod on it) and dies with the next spot
interruption. Our own Deployments select the system node group (placement.py); these come
from EKS add-ons with their own defaults, so what keeps them off job pools is the pools'
taints: GPU pools `nvidia.com/gpu`, CPU pools `trainforge.io/jobs-only` (node_taints.pool_taints),
which none of them tolerates. Their tolerations and node selectors are the pinned versions'
defaults (we pass no configuration values that change them), each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import Taint
from trainforge.core.labels import OS
from trainforge.platform.node_daemonsets import tolerates

# What both CSI charts give their controller (values.yaml `controller.tolerations`).
CSI_CONTROLLER_TOLERATIONS: tuple[dict[str, Any], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300},
)


@dataclass(frozen=True)
class ControllerFacts:
    name: str
    tolerations: tuple[dict[str, Any], ...]
    node_selector: dict[str, str]
    source: str


ADDON_CONTROLLERS: tuple[ControllerFacts, ...] = (
    ControllerFacts(
        "coredns",
        (
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
        ),
        {},
        f"EKS coredns add-on {versions.EKS_ADDON_VERSIONS['coredns']} deployment tolerations "
        "(aws/containers-roadmap#2167, the EKS team's `kubectl get deployment coredns`; no "
        "tolerations are configured here), checked 2026-11-25",
    ),
    ControllerFacts(
        "ebs-csi-controller",
        CSI_CONTROLLER_TOLERATIONS,
        {OS: "linux"},
        "kubernetes-sigs/aws-ebs-csi-driver v1.50.1 charts/aws-ebs-csi-driver/values.yaml "
        "controller.tolerations, templates/controller.yaml nodeSelector, checked 2026-11-25",
    ),
    ControllerFacts(
        "fsx-csi-controller",
        CSI_CONTROLLER_TOLERATIONS,
        {OS: "linux"},
        "kubernetes-sigs/aws-fsx-csi-driver v1.5.0 charts/aws-fsx-csi-driver/values.yaml "
        "controller.tolerations, templates/controller-deployment.yaml nodeSelector, "
        "checked 2026-11-25",
    ),
)


def admitted(
    taints: tuple[Taint, ...], labels: dict[str, str], controllers=ADDON_CONTROLLERS
) -> list[str]:
    """The controllers the scheduler may place on a node with these taints and labels
    (NoSchedule and NoExecute taints must be tolerated; PreferNoSchedule only discourages)."""
    hard = [t for t in taints if t.effect in ("NoSchedule", "NoExecute")]
    return [
        c.name
        for c in controllers
        if all(labels.get(k) == v for k, v in c.node_selector.items())
        and all(tolerates(c.tolerations, t) for t in hard)
    ]
