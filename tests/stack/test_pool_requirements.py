"""A node pool's requirements (the emitter's: instance types, capacity types, architecture,
OS) with a value that matches none of its types (issue: wave 16 poolgpu): Karpenter
(karpenter-provider-aws v1.14.1 types.go `computeRequirements`) gives a type only the
capacity types EC2 sells it as, and `reserved` only with the reservations its EC2NodeClass
selects (ours selects none). Each refused in one line naming the key, before any resource."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.config import parse_config
from trainforge.platform.instance_types import instance_type_facts
from trainforge.platform.karpenter import node_pool_spec
from trainforge.platform.stack_check import check_stack
from trainforge.platform.training_platform import TrainingPlatform
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def prod_pool(i: int, lookups: bool = True, **keys) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:nodePools"][i].update(keys)
    return check_stack(config, known_rules=known_rule_ids(), lookups=lookups).errors


def test_reserved_is_refused_it_never_matches_a_type():
    errors = prod_pool(1, lookups=False, capacityTypes=["on-demand", "reserved"])
    assert errors == [
        "trainforge:nodePools[1].capacityTypes: got ['on-demand', 'reserved']; expected "
        "on-demand or spot (the pool's EC2NodeClass selects no capacity reservation, so "
        "Karpenter offers no type as reserved and it would never be used; reserved capacity "
        "is a nodeGroups[] entry with capacityReservationId)"
    ]


def test_the_ec2nodeclass_selects_no_reservation():
    """The premise of the refusal, read off what the component emits: no EC2NodeClass has
    capacityReservationSelectorTerms, so Karpenter finds no reservation for it."""
    raw = {"cluster": "tf", "nodePools": [{"name": "a", "instanceTypes": ["g5.xlarge"]}]}
    run = run_mocked(lambda: TrainingPlatform("platform", parse_config(raw)), raw)
    classes = [r.inputs for r in run.resources if (r.inputs or {}).get("kind") == "EC2NodeClass"]
    assert classes, "no EC2NodeClass emitted"
    assert all("capacityReservationSelectorTerms" not in c["spec"] for c in classes)


def test_a_capacity_type_no_type_of_the_pool_is_sold_as_is_refused():
    """EC2 sells u-6tb1.56xlarge on demand only (SupportedUsageClasses, moto's copy)."""
    assert instance_type_facts("u-6tb1.56xlarge").usage_classes == ("on-demand",)
    errors = prod_pool(2, instanceTypes=["u-6tb1.56xlarge"], capacityTypes=["spot", "on-demand"])
    assert errors == [
        "trainforge:nodePools[2].capacityTypes: got 'spot'; expected a capacity type one of "
        "the pool's instance types offers: on-demand (EC2 sells u-6tb1.56xlarge as no spot "
        "instance: Karpenter would launch none)"
    ]
    assert prod_pool(2, instanceTypes=["u-6tb1.56xlarge"], capacityTypes=["on-demand"]) == []


def test_the_requirements_are_the_keys_the_checks_cover():
    """Every requirement the emitter writes is one the checks judge: instance types (looked
    up), capacity types (above), architecture (one per pool), OS (linux, every type)."""
    from trainforge.platform.instance_types import resolve_pool  # noqa: PLC0415
    from trainforge.stack.platform import NodePoolConfig  # noqa: PLC0415

    pool = NodePoolConfig(name="p", instanceTypes=["g5.xlarge"], capacityTypes=["spot"])
    spec = node_pool_spec(pool, resolve_pool(pool, "x", []))["template"]["spec"]
    keys = {r["key"]: (r["operator"], r["values"]) for r in spec["requirements"]}
    assert keys == {
        "node.kubernetes.io/instance-type": ("In", ["g5.xlarge"]),
        "karpenter.sh/capacity-type": ("In", ["spot"]),
        "kubernetes.io/arch": ("In", ["amd64"]),
        "kubernetes.io/os": ("In", ["linux"]),
    }
