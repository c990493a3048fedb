"""A managed node group pinned to a subnet the platform can never launch it in (issue: wave 16
poolgpu): a subnetId on a group without EFA was silently unread, and one outside the stack's
private subnets (or with a new VPC, whose subnets do not exist yet) is outside the cluster's
VPC or what the stack tags and routes. Each refused in one line naming the key."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.core import labels
from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]
AT = "trainforge:nodeGroups[0].subnetId"
MINE = ["subnet-0a1", "subnet-0b2"]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def prod(network: dict | None = None, lookups: bool = False, **group) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "prod").config)  # nodeGroups[0]: EFA p4d
    config["trainforge:nodeGroups"][0].update(group)
    if network is not None:
        config["trainforge:network"] = network
    return check_stack(config, known_rules=known_rule_ids(), lookups=lookups).errors


def existing(subnets: list[str] = MINE) -> dict:
    return {"vpcId": "vpc-0abc", "privateSubnetIds": subnets}


def test_a_subnet_outside_the_stack_s_private_subnets_is_refused():
    assert prod(existing(), subnetId="subnet-0ff") == [
        f"{AT}: got 'subnet-0ff'; expected one of network.privateSubnetIds: subnet-0a1, "
        "subnet-0b2 (the stack's private subnets; EKS refuses a subnet outside the cluster's "
        "VPC)"
    ]


def test_a_subnet_with_a_new_vpc_is_refused():
    errors = prod(subnetId="subnet-0a1")  # prod creates its VPC
    assert errors == [
        f"{AT}: got 'subnet-0a1'; expected no subnetId while the stack creates its VPC "
        "(network.vpcId unset: its subnets do not exist yet; the group goes to the first whose "
        "zone offers its type) (the stack's private subnets; EKS refuses a subnet outside the "
        "cluster's VPC)"
    ]


def test_a_subnet_on_a_group_without_efa_is_refused():
    """node_groups.py places only an EFA group in its subnetId: here it was never read."""
    errors = prod(existing(), subnetId="subnet-0a1", efa=False)
    assert errors == [
        f"{AT}: got 'subnet-0a1'; expected no subnetId on a group without EFA (unset it): such "
        "a group spans every private subnet whose zone offers its types"
    ]


def test_one_of_the_stack_s_subnets_passes():
    assert prod(existing(), subnetId="subnet-0b2") == []


def test_listed_with_the_other_problems_of_an_invalid_stack():
    """One run: a bad size on the group next to it does not hide the subnet."""
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:network"] = existing()
    groups = config["trainforge:nodeGroups"]
    groups[0]["subnetId"] = "subnet-0ff"
    groups.append({"name": "more", "instanceTypes": ["p4d.24xlarge"], "minSize": -1})
    errors = check_stack(config, known_rules=known_rule_ids()).errors
    assert any(e.startswith(f"{AT}: got 'subnet-0ff'") for e in errors), errors
    assert any(e.startswith("trainforge:nodeGroups[1].minSize") for e in errors), errors


def test_an_efa_subnet_in_a_zone_without_the_type_is_refused():
    """p4d.24xlarge is offered in us-east-1a-d (moto's copy of EC2's offerings): subnet-0b2
    put in us-east-1f launches nothing."""
    zones = {"subnet-0a1": "us-east-1a", "subnet-0b2": "us-east-1f"}
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True, region="us-east-1", subnet_zones=zones))
    errors = prod(existing(), lookups=True, subnetId="subnet-0b2")
    assert errors == [
        f"{AT}: got 'subnet-0b2'; expected a private subnet whose zone offers p4d.24xlarge: "
        "subnet-0a1 (us-east-1a) (subnet-0b2 is in us-east-1f, where EC2 offers no such "
        "instance), or unset"
    ]
    assert prod(existing(), lookups=True, subnetId="subnet-0a1") == []


# --- a node group's zone label -------------------------------------------------------------


def test_a_zone_label_on_a_group_spanning_zones_is_refused():
    """prod's p4d group without EFA spans the new VPC's three zones: any one is false on the
    nodes of the others."""
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True, region="us-east-1"))
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:nodeGroups"][0].update(efa=False, labels={labels.ZONE: "us-east-1a"})
    config["trainforge:nodeGroups"][0].pop("capacityReservationId", None)
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=True).errors
    assert errors == [
        f"trainforge:nodeGroups[0].labels.{labels.ZONE}: got 'us-east-1a'; expected no such "
        "label: the group's nodes are in us-east-1a, us-east-1b, us-east-1c: its subnets' "
        "zones that offer its types, and every node gets it"
    ]


def test_an_efa_group_s_zone_label_must_be_its_subnet_s_zone():
    zones = {"subnet-0a1": "us-east-1a", "subnet-0b2": "us-east-1b"}
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True, region="us-east-1", subnet_zones=zones))
    wrong = {labels.ZONE: "us-east-1a"}
    errors = prod(existing(), lookups=True, subnetId="subnet-0b2", labels=wrong)
    assert errors == [
        f"trainforge:nodeGroups[0].labels.{labels.ZONE}: got 'us-east-1a'; expected the zone "
        "of the group's nodes (us-east-1b: its subnets' zones that offer its types), or no "
        "such label"
    ]
    right = {labels.ZONE: "us-east-1b"}
    assert prod(existing(), lookups=True, subnetId="subnet-0b2", labels=right) == []
