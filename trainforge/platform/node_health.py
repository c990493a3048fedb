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
                          {"key": "kubernetes.io/arch", "operator": "In",
                           "values": ["amd64", "arm64"]}]},
)  # fmt: skip
DCGM_SERVER_INSTANCE_TYPES = (
    "g3.16xlarge",
    "g3.4xlarge",
    "g3.8xlarge",
    "g3s.xlarge",
    "g4dn.12xlarge",
    "g4dn.16xlarge",
    "g4dn.2xlarge",
    "g4dn.4xlarge",
    "g4dn.8xlarge",
    "g4dn.metal",
    "g4dn.xlarge",
    "g5.12xlarge",
    "g5.16xlarge",
    "g5.24xlarge",
    "g5.2xlarge",
    "g5.48xlarge",
    "g5.4xlarge",
    "g5.8xlarge",
    "g5.xlarge",
    "g5g.16xlarge",
    "g5g.2xlarge",
    "g5g.4xlarge",
    "g5g.8xlarge",
    "g5g.metal",
    "g5g.xlarge",
    "g6.12xlarge",
    "g6.16xlarge",
    "g6.24xlarge",
    "g6.2xlarge",
    "g6.48xlarge",
    "g6.4xlarge",
    "g6.8xlarge",
    "g6.xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.2xlarge",
    "g6e.48xlarge",
    "g6e.4xlarge",
    "g6e.8xlarge",
    "g6e.xlarge",
    "g6f.2xlarge",
    "g6f.4xlarge",
    "g6f.large",
    "g6f.xlarge",
    "g7.12xlarge",
    "g7.24xlarge",
    "g7.2xlarge",
    "g7.48xlarge",
    "g7.4xlarge",
    "g7.8xlarge",
    "g7e.12xlarge",
    "g7e.24xlarge",
    "g7e.2xlarge",
    "g7e.48xlarge",
    "g7e.4xlarge",
    "g7e.8xlarge",
    "gr6.4xlarge",
    "gr6.8xlarge",
    "gr6f.4xlarge",
    "p2.16xlarge",
    "p2.8xlarge",
    "p2.xlarge",
    "p3.16xlarge",
    "p3.2xlarge",
    "p3.8xlarge",
    "p3dn.24xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5.4xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    "p6e-gb200.36xlarge",
    "p6e-gb300.36xlarge",
)
DCGM_SERVER_NODE_TERMS = (
    {"matchExpressions": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": list(DCGM_SERVER_INSTANCE_TYPES)},
        *_NOT_SPECIAL_COMPUTE,
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
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
