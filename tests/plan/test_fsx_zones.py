"""The plan says which pools read FSx across zones: prod's FSx follows the p5 EFA pool's zone,
its p4d reserved group its capacity reservation's, and the pools without EFA span zones."""

from __future__ import annotations

from tests.conftest import prod_own_values
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import fsx_zones
from trainforge.plan.registry import CHECKS
from trainforge.plan.runner import run_project


def test_prod_says_which_pools_read_fsx_across_zones(repo_root):
    assert fsx_zones.check in [c.run for c in CHECKS]
    # prod with its `YOURS:` values: the p4d group names its capacity reservation
    inv = run_project(repo_root, "prod", config_overrides=prod_own_values())
    (section,) = fsx_zones.check(PlanContext(inventory=inv, objects=[])).sections
    rows = {r["pool"]: r for r in section.data["pools"]}
    assert section.data["fsx_zone"] == "us-east-1a"
    assert rows["efa-training"]["zones"] == ["us-east-1a"]
    assert rows["efa-training"]["cross_zone"] is False
    assert rows["p4d-reserved"]["picked"] is True and rows["p4d-reserved"]["cross_zone"] is True
    text = "\n".join(section.lines)
    assert "p4d-reserved (node group): one of us-east-1a, us-east-1b, us-east-1c, its " in text
    assert "capacity reservation's (known at `pulumi up`): outside us-east-1a" in text
    assert rows["training-workloads"]["zones"] == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_a_node_class_reads_the_zones_of_subnets_carrying_every_tag_it_selects():
    """An EC2NodeClass's subnetSelectorTerms: a subnet matches a term when it carries every tag
    of it (Karpenter's selector), so a subnet with one of two tags adds no zone."""
    from trainforge.plan.checks.reachability import SUBNET
    from trainforge.plan.checks.rules import EC2_NODE_CLASS
    from trainforge.plan.runner import Inventory, Recorded

    def subnet(name, zone, tags):
        inputs = {"availabilityZone": zone, "tags": tags}
        return Recorded(f"urn:{name}", SUBNET, name, None, True, inputs)

    both = {"team": "ml", "tier": "private"}
    node_class = Recorded(
        "urn:nc", EC2_NODE_CLASS, "gpu", None, True,
        {"spec": {"subnetSelectorTerms": [{"tags": both}], "tags": {}}},
    )  # fmt: skip
    resources = [
        subnet("a", "us-east-1a", both),
        subnet("b", "us-east-1b", {"team": "ml"}),  # one of the two tags: not selected
        subnet("c", "us-east-1c", {**both, "extra": "x"}),
        node_class,
    ]
    ctx = PlanContext(inventory=Inventory("p", "s", resources), objects=[])
    (row,) = fsx_zones.placements(ctx)
    assert row == {"pool": "gpu", "kind": "Karpenter pool", "zones": ["us-east-1a", "us-east-1c"],
                   "picked": False}  # fmt: skip
