"""A node pool's labels against what Karpenter and the API server accept (issue: wave 15
newcomer review): a label the pool's requirements contradict launches no node; a restricted
label is refused by the NodePool CRD."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def dev_with_labels(labels: dict[str, str]) -> dict:
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge:nodePools"][0]["labels"] = labels  # g4dn/g5: amd64
    return config


def test_a_label_the_requirements_contradict_is_refused_naming_the_key():
    """The reviewer's repro: arch arm64 and a made-up type on an amd64 g4dn/g5 pool."""
    config = dev_with_labels(
        {"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "x", "team": "a"}
    )
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=True).errors
    at = "trainforge:nodePools[0].labels."
    assert sorted(errors) == [
        f"{at}kubernetes.io/arch: got 'arm64'; expected one of the values the pool's "
        "requirements allow for kubernetes.io/arch: amd64 (Karpenter adds template labels to "
        "the NodePool's requirements: no node could launch), or no such label",
        f"{at}node.kubernetes.io/instance-type: got 'x'; expected one of the values the pool's "
        "requirements allow for node.kubernetes.io/instance-type: g4dn.xlarge, g5.xlarge "
        "(Karpenter adds template labels to the NodePool's requirements: no node could "
        "launch), or no such label",
    ]


def test_a_label_the_requirements_allow_passes():
    config = dev_with_labels(
        {"kubernetes.io/arch": "amd64", "karpenter.sh/capacity-type": "spot", "team": "a"}
    )
    assert check_stack(config, known_rules=known_rule_ids(), lookups=True).errors == []
