"""A node pool's labels against what Karpenter and the API server accept (issue: wave 15
newcomer review): a label the pool's requirements contradict launches no node; a restricted
label is refused by the NodePool CRD."""

from __future__ import annotations

import copy
import pathlib
import re

import pulumi
import pytest

from trainforge.core import labels
from trainforge.plan import crds
from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.config import parse_config
from trainforge.platform.stack_check import check_stack
from trainforge.platform.training_platform import TrainingPlatform
from trainforge.stack.base import validate
from trainforge.stack.file import read_stack
from trainforge.stack.platform import EKS_LABEL_MAX, NodeGroupConfig

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


def test_the_component_refuses_it_too_before_any_resource():
    """A Python program's TrainingPlatform (no check_stack) refuses the same label."""
    raw = {
        "cluster": "tf",
        "nodePools": [
            {"name": "a", "instanceTypes": ["g5.xlarge"], "labels": {"kubernetes.io/arch": "arm64"}}
        ],
    }
    with pytest.raises(Exception) as exc:  # noqa: PT011 - the engine wraps the ConfigError
        run_mocked(lambda: TrainingPlatform("platform", parse_config(raw)), raw)
    assert "trainforge:nodePools[0].labels.kubernetes.io/arch: got 'arm64'" in str(exc.value)


def test_a_label_the_requirements_allow_passes():
    config = dev_with_labels(
        {"kubernetes.io/arch": "amd64", "karpenter.sh/capacity-type": "spot", "team": "a"}
    )
    assert check_stack(config, known_rules=known_rule_ids(), lookups=True).errors == []


# --- restricted template labels: the stack's rule (core/labels.py) is the CRD's -------------

CRD = ROOT / "trainforge/plan/data/crds/karpenter.sh_nodepools.yaml"


def crd_refusals(key: str) -> list[str]:
    """What the vendored NodePool CRD's CEL rules (plan/crd_cel, a real CEL runtime) say of a
    NodePool whose template carries the label `key`."""
    doc = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "metadata": {"labels": {key: "v"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "p",
                    },
                    "requirements": [{"key": labels.OS, "operator": "In", "values": ["linux"]}],
                },
            }
        },
    }
    at = "spec.template.metadata.labels: Invalid value: "
    errors = crds.crd_errors(doc) or []
    assert all(e.startswith(at) for e in errors), errors
    return [e.removeprefix(at) for e in errors]


def rule_lists() -> dict[str, set[str]]:
    """The exceptions each `label domain "<d>" is restricted` rule of the CRD lists."""
    text = CRD.read_text()
    out = {}
    for m in re.finditer(
        r'label domain "([^"]+)" is restricted\s+rule: self\.all\(x, x in \[([^\]]*)\]', text
    ):
        out[m.group(1)] = set(re.findall(r'"([^"]+)"', m.group(2)))
    return out


def test_the_restricted_domains_and_their_exceptions_are_the_crd_s():
    ours = {d: set(keys) for d, keys in labels.KARPENTER_RESTRICTED_DOMAINS.items()}
    assert ours == rule_lists()


KEYS = sorted(
    {
        *(k for keys in labels.KARPENTER_RESTRICTED_DOMAINS.values() for k in keys),
        *labels.KARPENTER_RESTRICTED_TEMPLATE_LABELS,
        "kubernetes.io/hostname",
        "karpenter.sh/nodepool",
        "karpenter.sh/foo",
        "karpenter.sh/do-not-sync-taints",
        "sub.karpenter.sh/x",
        "notkarpenter.sh/x",  # the rule's endsWith: no dot needed
        "karpenter.sh.example.com/x",
        "karpenter.sh",
        "karpenter.k8s.aws/zone",
        "karpenter.k8s.aws/instance-gpu-countx",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/hostnam",
        "example.com/team",
        "team",
    }
)


@pytest.mark.parametrize("key", KEYS)
def test_the_stack_refuses_a_template_label_exactly_when_the_crd_does(key):
    mine = labels.karpenter_template_label_refusal(key)
    assert crd_refusals(key) == ([mine] if mine else [])


def test_restricted_labels_are_refused_by_the_stack_naming_the_key():
    """The reviewer's repro: no config error, only a plan finding naming no stack key."""
    config = dev_with_labels({"kubernetes.io/hostname": "x", "karpenter.sh/foo": "y"})
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=False).errors
    at = "trainforge:nodePools[0].labels."
    assert sorted(errors) == [
        f"{at}karpenter.sh/foo: got 'y'; expected a label key the NodePool CRD accepts (label "
        'domain "karpenter.sh" is restricted), such as example.com/team',
        f"{at}kubernetes.io/hostname: got 'x'; expected a label key the NodePool CRD accepts "
        '(label "kubernetes.io/hostname" is restricted), such as example.com/team',
    ]


# --- managed node groups: what EKS refuses ---------------------------------------------------


def test_the_eks_label_bounds_are_botocore_s_model():
    import botocore.session  # noqa: PLC0415

    model = botocore.session.get_session().get_service_model("eks")
    for shape in ("labelKey", "labelValue"):
        meta = model.shape_for(shape).metadata
        assert (meta["min"], meta["max"]) == (1, EKS_LABEL_MAX)


def test_a_node_group_label_eks_refuses_is_refused_naming_the_key():
    errors: list[str] = []
    long_key = "example.com/" + "a" * 52  # 64 characters: a Kubernetes label key, not an EKS one
    raw = {
        "name": "g",
        "instanceTypes": ["g5.xlarge"],
        "labels": {long_key: "x", "e": "", "ok": "y"},
    }
    assert validate(NodeGroupConfig, raw, "trainforge:nodeGroups[0]", errors) is None
    expected = "expected a label EKS accepts: a key and a value of 1 to 63 characters each"
    assert sorted(errors) == [
        f"trainforge:nodeGroups[0].labels.e: got ''; {expected}",
        f"trainforge:nodeGroups[0].labels.{long_key}: got 'x'; {expected}",
    ]


# The kubelet's own list, as its error prints it (KubeletLabelNamespaces, KubeletLabels), quoted
# from a failed join in a stored file that find_string returned, read 2026-11-30.
KUBELET_MESSAGE = (
    "--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix "
    "(kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically allowed set "
    "(beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, "
    "failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, "
    "kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, "
    "node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone)"
)


def test_the_kubelet_s_allowed_labels_are_its_own():
    prefixes, allowed = re.findall(r"\(([^)]*)\)", KUBELET_MESSAGE)
    assert tuple(prefixes.split(", ")) == labels.KUBELET_LABEL_NAMESPACES
    assert set(allowed.split(", ")) == labels.KUBELET_LABELS


@pytest.mark.parametrize(
    ("key", "refused_by"),
    [
        ("node-role.kubernetes.io/worker", "kubelet"),  # terraform-aws-eks#3346: never joined
        ("app.kubernetes.io/name", "kubelet"),
        ("app.k8s.io/x", "kubelet"),
        ("kubernetes.io/arch", "EKS"),
        ("k8s.io/x", "EKS"),
        ("eks.amazonaws.com/nodegroup", "EKS"),
        ("node.kubernetes.io/role", ""),
        ("a.kubelet.kubernetes.io/x", ""),
        ("topology.kubernetes.io/zone", ""),
        ("notkubernetes.io/x", ""),
        ("example.com/team", ""),
        ("team", ""),
    ],
)
def test_a_node_group_label_eks_or_the_kubelet_refuses(key, refused_by):
    why = labels.node_group_label_refusal(key)
    assert (refused_by in why) if refused_by else why == ""
    errors: list[str] = []
    raw = {"name": "g", "instanceTypes": ["g5.xlarge"], "labels": {key: "x"}}
    validate(NodeGroupConfig, raw, "trainforge:nodeGroups[0]", errors)
    assert [e.split(": got")[0] for e in errors] == (
        [f"trainforge:nodeGroups[0].labels.{key}"] if refused_by else []
    )
