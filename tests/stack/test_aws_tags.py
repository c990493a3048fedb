"""`trainforge:tags` are AWS tags, judged by AWS's rules (the Resource Groups Tagging API's Tag:
1-128 character keys, values up to 256, Unicode letters, separators, numbers and _ . : / = + - @,
the `aws:` prefix reserved), not by Kubernetes' label-name rules, which refused keys AWS takes."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def errors(tags: dict) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge:tags"] = tags
    return check_stack(config, lookups=False).errors


@pytest.mark.parametrize(
    "tags",
    [
        {"Cost Center": "ML research"},  # a space, in the key and the value
        {"team:owner": "a@example.com"},  # ':' and '@'
        {"c++": "a=b"},  # '+' and '='
        {"Équipe": "données"},  # Unicode letters
        {"k" * 128: "v" * 256, "empty": ""},  # the longest key and value, an empty value
        {"version": 3},  # a YAML number, as text
    ],
)
def test_tags_aws_accepts_are_accepted(tags):
    assert errors(tags) == []


@pytest.mark.parametrize(
    ("tags", "key"),
    [
        ({"aws:createdBy": "me"}, "aws:createdBy"),  # the reserved prefix
        ({"AWS:x": "me"}, "AWS:x"),  # in any case
        ({"owner": "aws:me"}, "owner"),  # on values too
        ({"k#1": "v"}, "k#1"),
        ({"k": "v!"}, "k"),
        ({"k" * 129: "v"}, "k" * 129),
        ({"k": "v" * 257}, "k"),
        ({"": "v"}, ""),
    ],
)
def test_tags_aws_refuses_are_refused_in_one_line_naming_the_key(tags, key):
    (line,) = errors(tags)
    assert line.startswith(f"trainforge:tags.{key}: got ")
    assert "expected an AWS tag: letters, digits, spaces and _ . : / = + - @" in line
    assert "\n" not in line


def many(n: int) -> dict[str, str]:
    return {f"cost-{i}": "x" for i in range(n)}


# dev has Karpenter pools: a pool's node carries the stack's 2 base tags, the node class's
# discovery and pool tags and Karpenter's 6 (platform/tags.py karpenter_node_tags): 10 of 50.
def test_tags_up_to_the_limit_left_by_the_platform_are_accepted():
    assert errors(many(40)) == []


def test_tags_past_aws_limit_on_one_resource_are_refused_in_one_line_with_count_and_limit():
    (line,) = errors(many(41))
    assert line.startswith("trainforge:tags: got '41 tags'; expected at most 40: AWS allows 50 ")
    assert "platform sets 10 more on a node of nodePools[0]" in line
    assert "\n" not in line


def test_a_tag_the_platform_also_sets_is_counted_once():
    assert errors({**many(39), "Name": "mine"}) == []


def test_aws_prefixed_tags_are_not_counted_by_the_limit():
    from trainforge.platform.tags import _counted

    assert _counted({"aws:cloudformation:stack-name": "x", "k": "v"}) == 1


def test_without_pools_the_limit_is_a_new_vpcs_private_subnet():
    """2 base tags, Karpenter's discovery tag, the internal-elb role, the cluster tag, Name."""
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config.pop("trainforge:nodePools")
    config.pop("trainforge:jobs", None)  # dev's jobs run on its pools
    config["trainforge:tags"] = many(44)
    assert check_stack(config, lookups=False).errors == []
    config["trainforge:tags"] = many(45)
    (line,) = check_stack(config, lookups=False).errors
    assert "expected at most 44" in line and "on a private subnet" in line


# Karpenter's EC2NodeClass CRD (v1.14.1) refuses these in spec.tags, where a pool's node class
# carries the stack's tags: its rule for the first is `!k.startsWith('kubernetes.io/cluster')`.
@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/cluster/dev",
        "kubernetes.io/clusterx",
        "eks:eks-cluster-name",
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.k8s.aws/ec2nodeclass",
    ],
)
def test_tags_karpenter_sets_itself_are_refused_with_node_pools(key):
    (line,) = errors({key: "x"})
    assert line.startswith(f"trainforge:tags.{key}: got 'x'; expected a key other than ")
    assert "EC2NodeClass refuses them" in line and "\n" not in line
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config.pop("trainforge:nodePools")
    config.pop("trainforge:jobs", None)
    config["trainforge:tags"] = {key: "x"}
    assert check_stack(config, lookups=False).errors == []  # no EC2NodeClass gets them


# The platform's own keys: a stack tag `trainforge.io/cluster` replaced the cluster tag on every
# resource whose stack tags come last, and the budgets filter cost on that tag (budgets.py).
@pytest.mark.parametrize("key", ["trainforge.io/cluster", "trainforge.io/team", "trainforge.io/x"])
def test_tags_in_the_platform_prefix_are_refused(key):
    (line,) = errors({key: "x"})
    assert line.startswith(f"trainforge:tags.{key}: got 'x'; expected a key not starting with ")
    assert "budgets filter cost on" in line and "\n" not in line


def test_tags_beside_the_platform_prefix_are_taken():
    assert errors({"trainforge.io-owner": "x", "Trainforge.io/x": "y"}) == []
