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
