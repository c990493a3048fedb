"""Launch templates for managed node groups: IMDSv2 only, hop limit 1, encrypted gp3 root.

Why hop limit 1: pods must not reach the node's instance metadata (and its role credentials);
they get their own credentials through Pod Identity.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

METADATA_OPTIONS = {
    "http_endpoint": "enabled",
    "http_tokens": "required",
    "http_put_response_hop_limit": 1,
}


def launch_template(
    name: str,
    *,
    root_volume_gib: int,
    security_group_ids: list[pulumi.Input[str]],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    network_interfaces: list[dict[str, Any]] | None = None,
    placement_group: pulumi.Input[str] | None = None,
    capacity_reservation_id: str | None = None,
    capacity_block: bool = False,
) -> aws.ec2.LaunchTemplate:
    extra: dict[str, Any] = {}
    if network_interfaces and len(network_interfaces) > 1:
        for nic in network_interfaces:
            if "associate_public_ip_address" in nic:
                # EC2 refuses the parameter (even "false") with several interfaces, so the
                # node group would never launch a node (aws/karpenter-provider-aws#5666).
                raise ValueError(
                    f"{name}: associate_public_ip_address cannot be set on a launch template "
                    "with several network interfaces; EC2 rejects the launch"
                )
    if network_interfaces:
        # With explicit interfaces, security groups go on the interfaces, not the template.
        extra["network_interfaces"] = network_interfaces
    else:
        extra["vpc_security_group_ids"] = security_group_ids
    if placement_group is not None:
        # an output of a reservation's read may resolve to "" (no placement group): no block
        extra["placement"] = pulumi.Output.from_input(placement_group).apply(
            lambda group: {"group_name": group} if group else None
        )
    if capacity_reservation_id:
        extra["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": capacity_reservation_id}
        }
    if capacity_block:
        # EC2 launches into a Capacity Block only with this market type (and the target above)
        extra["instance_market_options"] = {"market_type": "capacity-block"}
    return aws.ec2.LaunchTemplate(
        name,
        metadata_options=METADATA_OPTIONS,
        block_device_mappings=[
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": root_volume_gib,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        tag_specifications=[
            {"resource_type": "instance", "tags": tags},
            {"resource_type": "volume", "tags": tags},
        ],
        update_default_version=True,
        **extra,
        opts=opts,
    )
