"""GPU node health: the EKS node monitoring agent on every node, and what repairs a sick one.

Why: at scale a bad GPU, NIC or kernel is the normal case (Meta's Llama 3 run: one
interruption every ~3 hours, most of them hardware). Nothing replaces a sick node unless
something notices it. The EKS node monitoring agent (an EKS add-on, a DaemonSet on every
node) reads kernel logs, NVIDIA Xid events and DCGM health, and sets NodeConditions:
``AcceleratedHardwareReady``, ``NetworkingReady``, ``KernelReady``, ``StorageReady``,
``ContainerRuntimeReady``. Node auto repair acts on them (and on ``Ready``):

* managed node groups: ``nodeRepairConfig.enabled`` (node_groups.py); EKS replaces the
  instance, or reboots it for some GPU conditions, after the condition has held for 10 minutes
  (AcceleratedHardwareReady) or 30 minutes (the others and Ready);
* Karpenter NodePools: the ``NodeRepair`` feature gate (karpenter.py); Karpenter forcefully
  terminates the node and its NodeClaim after the same tolerations (10 / 30 minutes), bypassing
  drain (karpenter-provider-aws v1.14.1 ``CloudProvider.RepairPolicies``).

Both stop repairing when more than 20% of a group's/pool's nodes are unhealthy (a cluster-wide
event is not fixed by replacing nodes). Details and sources: docs/reliability.md.

The agent's chart runs ``nv-hostengine`` (DCGM) in a second DaemonSet, ``dcgm-server``, that
has no tolerations by default; GPU nodes carry the ``nvidia.com/gpu`` taint (and pools may add
their own), so without the configuration below DCGM would never run on them and GPU health
would be blind. The plan rule TRAINFORGE_GPU_HEALTH_MONITORING checks this.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.core import catalog
from trainforge.core.labels import ARCH, INSTANCE_TYPE
from trainforge.platform.addons import addon_version

ADDON_NAME = "eks-node-monitoring-agent"
# Tolerate every taint: a health agent belongs on every node, whatever the pool's taints.
TOLERATE_ALL = [{"operator": "Exists"}]

# What the add-on's two DaemonSets request and where they run, for the pools' capacity
# (node_daemonsets.py): a training pod sized to a node's leftover must leave room for them.
# source: github.com/aws/eks-node-monitoring-agent v1.7.0 charts/eks-node-monitoring-agent/
# values.yaml (nodeAgent.resources.requests 10m/30Mi and its affinity; dcgmAgent.resources {}
# and its affinity: the NVIDIA instance types below, amd64), checked 2026-11-23
AGENT_REQUESTS = (10, 30)  # millicores, MiB
DCGM_SERVER_REQUESTS = (0, 0)
_NOT_SPECIAL_COMPUTE = [
    {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn",
     "values": ["fargate", "auto", "hybrid"]},
    {"key": "sagemaker.amazonaws.com/compute-type", "operator": "NotIn", "values": ["hyperpod"]},
]  # fmt: skip
AGENT_NODE_TERMS = (
    {"matchExpressions": [*_NOT_SPECIAL_COMPUTE,
                          {"key": ARCH, "operator": "In",
                           "values": ["amd64", "arm64"]}]},
)  # fmt: skip
# The chart's list, kept in the GPU/instance catalog (families.*.dcgmServerSizes).
DCGM_SERVER_INSTANCE_TYPES = catalog.family_instance_types("dcgmServerSizes")
DCGM_SERVER_NODE_TERMS = (
    {"matchExpressions": [
        {"key": INSTANCE_TYPE, "operator": "In",
         "values": list(DCGM_SERVER_INSTANCE_TYPES)},
        *_NOT_SPECIAL_COMPUTE,
        {"key": ARCH, "operator": "In", "values": ["amd64"]},
    ]},
)  # fmt: skip


def addon_configuration() -> dict[str, Any]:
    """The add-on's configuration values (schema: the chart's configuration.schema.json)."""
    return {
        "nodeAgent": {"tolerations": TOLERATE_ALL},
        "dcgmAgent": {"tolerations": TOLERATE_ALL},
    }


@dataclass
class NodeHealthArgs:
    cluster_name: pulumi.Input[str]
    tags: dict[str, str]
    depends_on: list[pulumi.Resource]


class NodeHealth(pulumi.ComponentResource):
    """The pinned EKS node monitoring agent add-on."""

    def __init__(self, name: str, args: NodeHealthArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:NodeHealth", name, None, opts)
        self.addon = aws.eks.Addon(
            f"{name}-agent",
            cluster_name=args.cluster_name,
            addon_name=ADDON_NAME,
            addon_version=addon_version("eks-node-monitoring-agent"),
            configuration_values=json.dumps(addon_configuration(), sort_keys=True),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.register_outputs({"addonVersion": self.addon.addon_version})
