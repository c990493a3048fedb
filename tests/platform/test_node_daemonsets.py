"""Which DaemonSets land on which pool, and the node shapes the platform publishes."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from trainforge.core.contract import Taint
from trainforge.plan.mocks import run_mocked
from trainforge.platform.config import load_config
from trainforge.platform.node_daemonsets import selects, tolerates
from trainforge.platform.published import pool_facts
from trainforge.stack.file import read_stack_file

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"


def _pools(repo_root, stack: str, edit=None):
    cfg = read_stack_file(repo_root / f"Pulumi.{stack}.yaml").engine()
    if edit:
        pools = json.loads(cfg["trainforge:nodePools"])
        edit(pools)
        cfg["trainforge:nodePools"] = json.dumps(pools)
    return run_mocked(lambda: pool_facts(load_config()), cfg).result


@pytest.fixture(scope="module")
def prod(repo_root):
    return _pools(repo_root, "prod")


def names(pool):
    return {d.name for d in pool.daemonsets}


EVERY_NODE = {
    "aws-node",
    "kube-proxy",
    "eks-pod-identity-agent",
    "ebs-csi-node",
    "fsx-csi-node",
    "eks-node-monitoring-agent",  # tolerates every taint (node_health.py)
}


def test_device_plugins_land_only_where_the_hardware_is(prod):
    # dcgm-server: the node monitoring agent's DCGM host engine, on NVIDIA instance types only
    gpu = {"nvidia-device-plugin", "dcgm-exporter", "dcgm-server"}
    assert names(prod["training-workloads"]) == EVERY_NODE | {"node-exporter"}
    assert names(prod["gpu-workloads"]) == EVERY_NODE | {"node-exporter"} | gpu
    efa = EVERY_NODE | {"node-exporter", "aws-efa-k8s-device-plugin"} | gpu
    # the node group through vpc.amazonaws.com/efa.present, Karpenter through its pool label
    assert names(prod["p4d-reserved"]) == efa
    assert names(prod["efa-training"]) == efa


def test_node_shapes_use_each_pools_max_pods(prod):
    (p4d,) = prod["p4d-reserved"].nodes
    assert (p4d.max_pods, p4d.kube_reserved_memory_mib) == (250, 11 * 737 + 255)  # MNG cap
    (p5,) = prod["efa-training"].nodes
    assert (p5.max_pods, p5.efa, p5.gpus) == (51, 32, 8)  # Karpenter: one ENI is efa-only
    assert [n.instance_type for n in prod["gpu-workloads"].nodes] == ["g5.12xlarge", "g5.48xlarge"]


def test_a_noexecute_taint_keeps_node_exporter_away(repo_root):
    def taint(pools):
        pools[2]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoExecute"}]

    pools = _pools(repo_root, "prod", taint)
    # node-exporter tolerates NoSchedule taints only; the add-ons tolerate everything
    assert names(pools["training-workloads"]) == EVERY_NODE


def test_dev_without_gpu_pools_has_no_gpu_daemonsets(repo_root):
    def cpu_only(pools):
        del pools[0]

    pools = _pools(repo_root, "dev", cpu_only)
    assert names(pools["training-workloads"]) == EVERY_NODE | {"node-exporter"}


def test_the_health_agent_leaves_room_on_every_node(prod):
    """A training pod sized to a node's leftover must leave room for the node monitoring
    agent (10m CPU, 30Mi from its chart), or a full-node pod would never schedule."""
    agent = {d.name: d for d in prod["efa-training"].daemonsets}["eks-node-monitoring-agent"]
    assert (agent.cpu_m, agent.memory_mib) == (10, 30)


def test_toleration_and_selector_semantics():
    gpu = Taint("nvidia.com/gpu", "NoSchedule", "true")
    assert tolerates(({"operator": "Exists"},), gpu)
    assert tolerates(({"key": "nvidia.com/gpu", "operator": "Exists"},), gpu)
    assert tolerates(({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},), gpu)
    assert not tolerates(({"key": "nvidia.com/gpu", "value": "false"},), gpu)
    assert not tolerates(({"operator": "Exists", "effect": "NoExecute"},), gpu)
    terms = ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["0"]}]},)
    assert selects(terms, {"n": "8"}) and not selects(terms, {"n": "0"}) and not selects(terms, {})
    both = (
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
    )
    assert selects(both, {"b": ""}) and not selects(both, {"a": "y"})
    notin = ({"matchExpressions": [{"key": "c", "operator": "NotIn", "values": ["fargate"]}]},)
    assert selects(notin, {}) and not selects(notin, {"c": "fargate"})


def _upstream_term_cases() -> list:
    """component-helpers' MatchNodeSelectorTerms and nodeaffinity cases
    (tests/fixtures/upstream/scheduling.yaml) a DaemonSet's terms can meet here: a node, terms
    present, label requirements only (no matchFields, no nodeSelector)."""
    data = yaml.safe_load((FIXTURES / "upstream" / "scheduling.yaml").read_text())
    found = [
        (c["case"], c["nodeSelector"], c["node"], c["want"]) for c in data["matchNodeSelectorTerms"]
    ]
    for c in data["podMatchesNodeSelectorAndAffinityTerms"]:
        spec = (c["pod"] or {}).get("spec") or {}
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        if not spec.get("nodeSelector"):
            found.append((c["case"], required, c["node"], c["want"]))
    out = []
    for case, selector, node, want in found:
        terms = (selector or {}).get("nodeSelectorTerms")
        if node is None or terms is None or any((t or {}).get("matchFields") for t in terms):
            continue
        out.append(pytest.param(tuple(terms), node["labels"], want, id=case))
    return out


@pytest.mark.parametrize(("terms", "labels", "want"), _upstream_term_cases())
def test_selects_gives_upstreams_answer(terms, labels, want):
    assert selects(terms, labels) is want


def test_an_empty_term_selects_no_node():
    # MatchNodeSelectorTerms: a term with no requirements matches nothing (upstream's "Pod with
    # empty MatchExpressions ... will match no objects"); the old AND over no expressions said
    # every node
    assert not selects(({},), {"kubernetes.io/os": "linux"})
    assert not selects(({"matchExpressions": []},), {"kubernetes.io/os": "linux"})
    assert selects(None, {})
