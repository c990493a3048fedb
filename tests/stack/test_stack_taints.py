"""Node pools' and node groups' taints are refused in the stack when the API server would refuse
them (k8s.io/kubernetes pkg/apis/core/validation `validateNodeTaints`): the key a qualified
name, the value a label value, the effect one of three, no key and effect twice; one line
naming the key."""

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


def errors(where: str, taints: list) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config[f"trainforge:{where}"][0]["taints"] = taints
    return check_stack(config, lookups=False).errors


WHERE = ["nodePools", "nodeGroups"]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(
    "taints",
    [
        [{"key": "dedicated", "value": "team-a"}],
        [{"key": "example.com/gpu-kind", "value": "", "effect": "NoExecute"}],
        [{"key": "a_b.c-D9"}],
        [{"key": "k", "value": 3}],  # a YAML number, as text
        [{"key": "k"}, {"key": "k", "effect": "NoExecute"}],  # the same key, another effect
    ],
)
def test_taints_kubernetes_accepts_are_accepted(where, taints):
    assert errors(where, taints) == []


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(
    ("taints", "at", "expected"),
    [
        ([{"key": "bad key"}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": "-k"}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": "Example.com/k"}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": "a/b/c"}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": "k" * 64}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": ""}], "taints[0].key", "a Kubernetes qualified name"),
        ([{"key": "k", "value": "a b"}], "taints[0].value", "a Kubernetes label value"),
        ([{"key": "k", "value": "v" * 64}], "taints[0].value", "a Kubernetes label value"),
        ([{"key": "k", "effect": "NoRun"}], "taints[0].effect", "one of 'NoSchedule'"),
        ([{"key": "k"}, {"key": "k", "value": "2"}], "taints", "unique by key and effect"),
    ],
)
def test_taints_kubernetes_refuses_are_refused_in_one_line(where, taints, at, expected):
    (line,) = errors(where, taints)
    assert line.startswith(f"trainforge:{where}[0].{at}: got ")
    assert expected in line and "\n" not in line


def checked(where: str, i: int, taints: list, *, lookups: bool, **extra) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config[f"trainforge:{where}"][i].update(taints=taints, **extra)
    return check_stack(config, lookups=lookups).errors


GPU = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
JOBS = {"key": "trainforge.io/jobs-only", "effect": "NoSchedule", "value": "true"}
FSX = {"key": "fsx.csi.aws.com/agent-not-ready", "effect": "NoExecute"}


# The platform's own taints are on every node of a group or pool; Karpenter hands the kubelet
# the pool's taints and startup taints without removing repeats (v1.14.1
# pkg/providers/amifamily/resolver.go), so a node with the same key and effect twice never
# registers (validateNodeTaints). prod: nodeGroups[0] p4d, nodePools[0] p5 (GPU, `gpu` unset),
# nodePools[2] c5/m5 (CPU), FSx on.
@pytest.mark.parametrize(
    ("where", "i", "taint", "lookups", "extra", "platform_sets"),
    [
        ("nodeGroups", 0, GPU, False, {}, "nvidia.com/gpu=true:NoSchedule"),
        ("nodeGroups", 0, {**GPU, "value": "false"}, False, {}, "nvidia.com/gpu=true:NoSchedule"),
        ("nodeGroups", 0, FSX, False, {}, "fsx.csi.aws.com/agent-not-ready:NoExecute"),
        ("nodePools", 0, FSX, False, {}, "fsx.csi.aws.com/agent-not-ready:NoExecute"),
        ("nodePools", 0, GPU, False, {"gpu": True}, "nvidia.com/gpu=true:NoSchedule"),
        ("nodePools", 0, GPU, True, {}, "nvidia.com/gpu=true:NoSchedule"),
        ("nodePools", 2, JOBS, True, {}, "trainforge.io/jobs-only=true:NoSchedule"),
    ],
)
def test_a_taint_the_platform_sets_on_the_same_nodes_is_refused_in_one_line(
    where, i, taint, lookups, extra, platform_sets
):
    (line,) = checked(where, i, [{"key": "mine"}, taint], lookups=lookups, **extra)
    assert line.startswith(f"trainforge:{where}[{i}].taints[1]: got '{taint['key']}:")
    assert f"it sets {platform_sets} on these nodes" in line and "\n" not in line


@pytest.mark.parametrize(
    ("where", "i", "taint"),
    [
        ("nodeGroups", 0, {**GPU, "effect": "NoExecute"}),  # another effect
        ("nodePools", 2, GPU),  # a CPU pool carries the jobs-only taint, not the GPU one
        ("nodePools", 0, JOBS),  # and a GPU pool the GPU one
    ],
)
def test_a_taint_of_another_key_or_effect_than_the_platforms_is_accepted(where, i, taint):
    assert checked(where, i, [taint], lookups=True) == []
