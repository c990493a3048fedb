"""GPU managed node groups, with EFA when asked: every EFA interface the type supports, a
cluster placement group, one subnet (one AZ), and a security group open only to itself.

Why: fixed GPU capacity (a capacity reservation or block) is best held by a managed node
group; Karpenter pools cover on-demand scale-from-zero. EFA traffic (libfabric/SRD) needs
all protocols between the nodes of a job, and the lowest latency needs one placement group.

Placement (trainforge.platform.capacity_placement, read from EC2 at preview): a group naming
a capacity reservation goes to the reservation's zone, into the reservation's placement group
(never one we create: the reservation would not be used), with capacity type
`CAPACITY_BLOCK` and market type `capacity-block` when it is a Capacity Block; any other EFA
group goes to the first zone that offers its instance type, with its own placement group; a
non-EFA group spans the zones that offer its types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainforge.core import versions
from trainforge.core.taints import EFFECTS
from trainforge.platform import capacity_placement as cp
from trainforge.platform.config import (
    EFA_NODE_LABEL,
    GPU_NODE_LABEL,
    POOL_LABEL,
    ConfigError,
    NodeGroupConfig,
)
from trainforge.platform.instance_types import PoolTypeFacts
from trainforge.platform.launch_template import launch_template
from trainforge.platform.node_taints import group_taints
from trainforge.stack.base import problem


def efa_interface_layout(count: int) -> list[tuple[int, int, str]]:
    """(network card, device index, type) for `count` EFA interfaces on a managed node group.

    Card 0 carries the primary interface as `efa` (IP traffic + EFA); every other card gets
    one `efa-only` interface (no IP address, so no VPC addresses are spent on RDMA paths).
    """
    return [(0, 0, "efa")] + [(card, 1, "efa-only") for card in range(1, count)]


def efa_security_group(
    name: str, vpc_id: pulumi.Input[str], tags: dict, opts
) -> aws.ec2.SecurityGroup:
    """All traffic to and from itself, as EFA requires (and nothing else)."""
    sg = aws.ec2.SecurityGroup(
        name,
        description="EFA: all traffic between members of this group",
        vpc_id=vpc_id,
        tags=tags,
        opts=opts,
    )
    aws.vpc.SecurityGroupIngressRule(
        f"{name}-self-in",
        security_group_id=sg.id,
        ip_protocol="-1",
        referenced_security_group_id=sg.id,
        opts=opts,
    )
    aws.vpc.SecurityGroupEgressRule(
        f"{name}-self-out",
        security_group_id=sg.id,
        ip_protocol="-1",
        referenced_security_group_id=sg.id,
        opts=opts,
    )
    return sg


def group_labels(cfg: NodeGroupConfig) -> dict[str, str]:
    """A managed node group's node labels: the configured ones, then the platform's
    (stack_check refuses a configured key the platform sets, read from here)."""
    labels = {**dict(cfg.labels), POOL_LABEL: cfg.name, GPU_NODE_LABEL: "true"}
    if cfg.efa:
        labels[EFA_NODE_LABEL] = "true"
    return labels


@dataclass
class GpuNodeGroupArgs:
    cluster_name: str
    config: NodeGroupConfig
    facts: PoolTypeFacts
    node_role_arn: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    subnet_ids: list[pulumi.Input[str]]
    tags: dict[str, str]
    # EKS node auto repair (node_health.py): replace/reboot a node whose NodeConditions stay
    # unhealthy (AcceleratedHardwareReady 10 min, the others 30 min)
    auto_repair: bool = True
    # the zone of each of `subnet_ids` (Network.private_subnet_zones); empty: not placed by
    # zone (every subnet, subnet 0 for EFA)
    subnet_zones: list[str] = field(default_factory=list)
    where: str = "nodeGroups[]"  # the config path, for errors
    # new nodes start with the FSx CSI driver's startup taint (its node plugin removes it):
    # only when the stack has FSx, or nothing would remove it
    fsx_startup_taint: bool = False


class GpuNodeGroup(pulumi.ComponentResource):
    node_group_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("trainforge:index:GpuNodeGroup", name, None, opts)
        cfg, facts = args.config, args.facts
        child = pulumi.ResourceOptions(parent=self)
        interfaces = None
        placement: pulumi.Input[str] | None = None
        capacity_type: str = cfg.capacity_type
        zones = list(args.subnet_zones)
        subnets: list[pulumi.Input[str]] = list(args.subnet_ids)
        if zones and not cfg.efa and not cfg.capacity_reservation_id and not cfg.subnet_id:
            subnets = [subnets[i] for i in cp.zone_indexes(cfg.instance_types, zones)]
        self.reservation: cp.Reservation | None = None
        if cfg.capacity_reservation_id:
            res = cp.lookup_reservation(name, cfg.capacity_reservation_id, self, args.where)
            self.reservation = res
            if cfg.capacity_type == cp.CAPACITY_BLOCK and not res.capacity_block:
                raise ConfigError(
                    [
                        problem(
                            f"{args.where}.capacityType",
                            "CAPACITY_BLOCK",
                            f"ON_DEMAND: EC2 has no Capacity Block {cfg.capacity_reservation_id} "
                            "(it is an On-Demand Capacity Reservation)",
                        )
                    ]
                )
            if res.capacity_block:
                capacity_type = cp.CAPACITY_BLOCK
            if zones:
                subnets = [
                    cp.reservation_subnet(args.where, res, args.subnet_ids, zones, cfg.subnet_id)
                ]
            # Only the reservation's own placement group (if any): an instance launched into
            # another one does not use the reservation.
            placement = res.placement_group
        elif cfg.efa and zones and not cfg.subnet_id:
            subnets = [subnets[cp.zone_index(args.where, cfg.instance_types, zones)]]
        if cfg.efa:
            # EFA: one AZ (one subnet) and a cluster placement group for the lowest latency.
            # a reserved group's subnetId is the reservation's subnet, checked above
            pinned = cfg.subnet_id and not (self.reservation and zones)
            subnets = [cfg.subnet_id] if pinned else subnets[:1]
            if self.reservation is None:
                self.placement_group = aws.ec2.PlacementGroup(
                    f"{name}-pg",
                    name=f"{args.cluster_name}-{cfg.name}",
                    strategy="cluster",
                    tags=args.tags,
                    opts=child,
                )
                placement = self.placement_group.name
            self.efa_security_group = efa_security_group(
                f"{name}-efa", args.vpc_id, args.tags, child
            )
            groups = [args.node_security_group_id, self.efa_security_group.id]
            interfaces = [
                {
                    "network_card_index": card,
                    "device_index": device,
                    "interface_type": kind,
                    "security_groups": groups,
                    "delete_on_termination": "true",
                    # No `associate_public_ip_address`, not even "false": EC2 rejects the
                    # parameter when an instance launches with several interfaces
                    # ("InvalidParameterCombination: The associatePublicIPAddress parameter
                    # cannot be specified when launching with multiple network interfaces";
                    # aws/karpenter-provider-aws#5666, hashicorp/terraform-provider-aws#6777).
                    # Nodes live in private subnets, which assign no public addresses.
                }
                for card, device, kind in efa_interface_layout(facts.efa_interfaces)
            ]
        lt = launch_template(
            f"{name}-lt",
            root_volume_gib=cfg.root_volume_gib,
            security_group_ids=[args.node_security_group_id],
            tags=args.tags,
            opts=child,
            network_interfaces=interfaces,
            placement_group=placement,
            capacity_reservation_id=cfg.capacity_reservation_id,
            capacity_block=capacity_type == cp.CAPACITY_BLOCK,
        )
        # with FSx, EKS applies its startup taint to every node it launches; the FSx node
        # plugin (which tolerates every taint) removes it when it can mount
        taints = [
            {**t, "effect": EFFECTS[t["effect"]]} for t in group_taints(cfg, args.fsx_startup_taint)
        ]
        labels = group_labels(cfg)
        self.node_group = aws.eks.NodeGroup(
            f"{name}",
            cluster_name=args.cluster_name,
            node_group_name=f"{args.cluster_name}-{cfg.name}",
            node_role_arn=args.node_role_arn,
            subnet_ids=subnets,
            ami_type=versions.GPU_AMI_TYPE,
            capacity_type=capacity_type,
            instance_types=list(cfg.instance_types),
            scaling_config={
                "min_size": cfg.min_size,
                "desired_size": cfg.desired_size,
                "max_size": cfg.max_size,
            },
            labels=labels,
            taints=taints,
            launch_template={"id": lt.id, "version": lt.latest_version.apply(str)},
            update_config={"max_unavailable": 1},
            node_repair_config={"enabled": args.auto_repair},
            tags=args.tags,
            # desired size is changed by people and autoscalers between deployments
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.node_group_name = self.node_group.node_group_name
        self.register_outputs({"nodeGroupName": self.node_group_name})
