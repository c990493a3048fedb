"""An upstream name is spelled once in trainforge/ (issue #42: one model per concept): the
resource names the device plugins advertise, the labels the GPU nodes carry, Kubernetes' and
Karpenter's well-known labels (core/labels.py), Kueue's job labels, and Kubernetes' name
formats (core/names.py). A second string literal of one is a copy that can drift."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

PKG = ROOT / "trainforge"

# the literal -> the modules that may spell it (its definition; a different concept that
# happens to share the spelling is named with why)
ONE_PLACE = {
    "nvidia.com/gpu": {
        "core/contract.py",  # GPU_RESOURCE, the device plugin's resource
        "platform/node_taints.py",  # GPU_TAINT_KEY: the taint, not the resource
    },
    "vpc.amazonaws.com/efa": {"core/contract.py"},
    "nvidia.com/gpu.present": {"platform/config.py"},
    "vpc.amazonaws.com/efa.present": {"platform/config.py"},
    **dict.fromkeys(
        (
            "kubernetes.io/hostname",
            "topology.kubernetes.io/region",
            "node.kubernetes.io/instance-type",
            "kubernetes.io/os",
            "kubernetes.io/arch",
            "kubernetes.io/metadata.name",
            "karpenter.sh/nodepool",
            "karpenter.sh/capacity-type",
            "karpenter.k8s.aws/instance-gpu-count",
        ),
        {"core/labels.py"},
    ),
    "kueue.x-k8s.io/queue-name": {"core/pods.py"},
    "kueue.x-k8s.io/priority-class": {"jobs/tenancy.py"},
    "kueue.x-k8s.io/multikueue": {"stack/fleet.py"},  # MULTIKUEUE_CONTROLLER
    # trainforge's own: a team's objects (and S3 tags), a pool's nodes
    "trainforge.io/team": {"jobs/pod.py"},
    "trainforge.io/pool": {"core/labels.py"},  # POOL_LABEL, re-exported by platform/config
    "trainforge.io/cluster": {"platform/tags.py"},  # CLUSTER_TAG
    "trainforge.io/system": {"platform/cluster.py"},  # SYSTEM_LABEL
    "karpenter.sh/discovery": {"platform/tags.py"},  # KARPENTER_DISCOVERY_TAG
    "trainforge.io/privileged-reason": {"core/labels.py"},
    "trainforge.io/root-reason": {"core/labels.py"},
    "kubernetes.io/cluster/": {"core/labels.py"},  # cluster_tag(name), an f-string's head
    **dict.fromkeys(
        (
            "kueue.x-k8s.io/podset-preferred-topology",
            "kueue.x-k8s.io/podset-required-topology",
            "kueue.x-k8s.io/podset-unconstrained-topology",
        ),
        {"jobs/tenancy.py"},
    ),
}
# Kubernetes' name formats: a string literal that holds one is a copy of core/names.py
FORMATS = ("[a-z0-9]([-a-z0-9]*[a-z0-9])?", "[a-z]([-a-z0-9]*[a-z0-9])?", "[-A-Za-z0-9_.]")
# Readers still to fold (a file another engineer holds while a wave works); empty since wave 14.
NOT_YET: set[tuple[str, str]] = set()


def _literals() -> list[tuple[str, str]]:
    """(module, string) for every string constant that is not a docstring."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        rel = path.relative_to(PKG).as_posix()
        found += [
            (rel, n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
        ]
    return found


LITERALS = _literals()


@pytest.mark.parametrize("name", sorted(ONE_PLACE))
def test_each_upstream_name_is_spelled_in_its_one_place(name):
    where = {rel for rel, s in LITERALS if s == name} - {r for n, r in NOT_YET if n == name}
    assert where == ONE_PLACE[name]


@pytest.mark.parametrize("fmt", FORMATS)
def test_kubernetes_name_formats_are_written_in_core_names_only(fmt):
    where = {rel for rel, s in LITERALS if fmt in s} - {r for f, r in NOT_YET if f == fmt}
    assert where == {"core/names.py"}


def test_the_readers_left_to_fold_still_spell_it():
    """When one is folded, its line in NOT_YET goes too."""
    assert {
        (n, r) for n, r in NOT_YET if not any(rel == r and n in s for rel, s in LITERALS)
    } == set()
