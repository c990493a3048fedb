"""GPU node health (issue 15): the node monitoring agent add-on with a configuration its
schema accepts and whose DaemonSets really land on every GPU pool (taints tolerated), node
auto repair on GPU node groups, Karpenter's NodeRepair gate; and the plan refuses GPU capacity
without them unless a waiver gives the reason."""

from __future__ import annotations

import json
import pathlib
import shutil

import jsonschema
import pytest
import yaml

from tests.conftest import run_stack
from trainforge.core import versions
from trainforge.core.taints import untolerated
from trainforge.plan import cli
from trainforge.platform.config import ConfigError, parse_config
from trainforge.platform.node_health import ADDON_NAME, addon_configuration
from trainforge.platform.published import pool_facts

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load(
    (
        pathlib.Path(__file__).parent
        / "vendor"
        / "eks_node_monitoring_agent_configuration_schema.yaml"
    ).read_text()
)


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request):
    return request.param, run_stack(request.param)


def test_the_agent_addon_is_pinned_and_configured_within_its_schema(stack) -> None:
    _, run = stack
    (addon,) = [
        r for r in run.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == ADDON_NAME
    ]
    assert addon.inputs["addonVersion"] == versions.EKS_NODE_MONITORING_AGENT_VERSION
    values = json.loads(addon.inputs["configurationValues"])
    jsonschema.validate(values, SCHEMA)  # the add-on rejects keys its schema does not know
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"dcgmAgent": {"tolerations": [], "tolerate": True}}, SCHEMA)


def test_both_agent_daemonsets_tolerate_every_gpu_pools_taints(stack) -> None:
    """Shape is not behaviour: the chart's dcgm-server tolerates nothing by default, so on
    our tainted GPU nodes DCGM would never run. Every GPU pool's real taints are tolerated."""
    name, run = stack
    config = parse_config(_trainforge_config(name))
    gpu = {n: f for n, f in pool_facts(config).items() if f.has_gpus}
    assert gpu
    values = addon_configuration()
    for pool, facts in gpu.items():
        assert facts.taints, pool
        for part in ("nodeAgent", "dcgmAgent"):
            for t in facts.taints:
                taint = {"key": t.key, "value": t.value, "effect": t.effect}
                assert not untolerated([taint], values[part]["tolerations"]), (pool, part, t)
    # and the chart's default would not have
    assert untolerated([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], [])


def test_gpu_node_groups_repair_and_karpenter_gate_is_on(stack) -> None:
    _, run = stack
    for ng in run.of_type("aws:eks/nodeGroup:NodeGroup"):
        if ng.inputs["amiType"] == versions.GPU_AMI_TYPE:
            assert ng.inputs["nodeRepairConfig"] == {"enabled": True}
    (release,) = [
        r
        for r in run.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"].endswith("/karpenter")
    ]
    assert release.inputs["values"]["settings"]["featureGates"] == {"nodeRepair": True}


def test_tolerations_follow_kubernetes_matching() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert not untolerated([gpu], [{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert not untolerated([gpu], [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}])
    assert untolerated([gpu], [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "x"}])
    assert untolerated([gpu], [{"operator": "Exists", "effect": "NoExecute"}])
    assert untolerated([gpu], [{"key": "other", "operator": "Exists"}])


def _trainforge_config(stack: str) -> dict:
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("trainforge:")}


def _project(tmp_path: pathlib.Path, stack: str, change) -> pathlib.Path:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    # the stacks' user-code jobs ship scripts of the project directory
    shutil.copytree(ROOT / "examples", root / "examples")
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    change(data["config"])
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(data))
    return root


def test_plan_refuses_gpu_capacity_without_monitoring_and_repair(tmp_path, capsys) -> None:
    def off(config):
        config["trainforge:nodeHealth"] = {"monitoringAgent": False, "autoRepair": False}

    root = _project(tmp_path, "prod", off)
    assert cli.main(["--stack", "prod", "--project-dir", str(root), "--summary"]) == 1
    out = capsys.readouterr().out
    for rule in ("TRAINFORGE_GPU_HEALTH_MONITORING", "TRAINFORGE_GPU_NODE_REPAIR"):
        assert rule in out
    # every GPU group and pool is named; the CPU pool is not
    for name in ("platform-p4d-reserved", "platform-karpenter-efa-training",
                 "platform-karpenter-gpu-workloads"):  # fmt: skip
        assert name in out
    assert "Violations (6)" in out  # 3 GPU resources x 2 rules; the CPU pool is not named
    assert "NodePool::platform-karpenter-training-workloads" not in out


def test_a_waiver_with_a_reason_lets_it_through(tmp_path, capsys) -> None:
    def off_and_waived(config):
        config["trainforge:nodeHealth"] = {"autoRepair": False}
        config["trainforge-policy:waivers"] = [
            {
                "resource": "platform-karpenter-gpu-workloads",
                "rule": "TRAINFORGE_GPU_NODE_REPAIR",
                "reason": "dev pool: spot nodes are replaced on interruption anyway",
            },  # fmt: skip
        ]

    root = _project(tmp_path, "dev", off_and_waived)
    assert cli.main(["--stack", "dev", "--project-dir", str(root), "--summary"]) == 0, (
        capsys.readouterr().out
    )
    assert "spot nodes are replaced" in capsys.readouterr().out


def test_node_health_and_acceptance_config_errors_name_the_key() -> None:
    base = {"cluster": "c"}
    with pytest.raises(ConfigError) as e:
        parse_config({**base, "nodeHealth": {"autoRepiar": True}})
    assert "trainforge:nodeHealth.autoRepiar" in str(e.value)
    with pytest.raises(ConfigError) as e:
        parse_config(
            {
                **base,
                "nodePools": [
                    {
                        "name": "p",
                        "instanceTypes": ["p5.48xlarge"],
                        "acceptanceTest": {"dcgmLevel": 7, "nodes": 1, "allReduce": True},
                    }
                ],
            }  # fmt: skip
        )
    text = str(e.value)
    assert "nodePools[0].acceptanceTest.dcgmLevel: got 7" in text
    assert "nodePools[0].acceptanceTest.nodes: got 1" in text and "allReduce" in text
