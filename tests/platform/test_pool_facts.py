"""What the jobs read from TrainingPlatform: per-pool facts and the Kubernetes provider."""

import pulumi
import pytest

from trainforge.plan.mocks import instance_type_result, run_mocked
from trainforge.platform.config import parse_config
from trainforge.platform.training_platform import TrainingPlatform

CFG = {
    "cluster": "tf",
    "nodeGroups": [{"name": "p4d", "instanceTypes": ["p4d.24xlarge"], "efa": True}],
    "nodePools": [
        {
            "name": "gpu-workloads",
            "instanceTypes": ["g5.xlarge", "g5.12xlarge"],
            "capacityTypes": ["spot"],
        },
        {"name": "training-workloads", "instanceTypes": ["c5.2xlarge"]},
        {"name": "p5", "instanceTypes": ["p5.48xlarge"], "efa": True},
    ],
}


@pytest.fixture(scope="module")
def platform():
    return run_mocked(lambda: TrainingPlatform("platform", parse_config(CFG)), CFG).result


def test_catalog_answers_match_moto():
    r = instance_type_result("p5.48xlarge")
    assert r["gpuses"][0]["count"] == 8
    assert r["efaSupported"] is True and r["efaMaximumInterfaces"] == 32


def test_pool_facts(platform):
    f = platform.node_pools
    assert f["gpu-workloads"].gpus_per_node == 1  # minimum over g5.xlarge (1) and g5.12xlarge (4)
    assert f["gpu-workloads"].capacity_type == "spot"
    assert f["gpu-workloads"].efa_interfaces == 0
    assert f["training-workloads"].gpus_per_node == 0
    assert f["training-workloads"].taints == ()
    assert f["p5"].gpus_per_node == 8 and f["p5"].efa_interfaces == 32
    assert f["p4d"].efa_interfaces == 4 and f["p4d"].kind == "node-group"
    assert f["p5"].node_selector == {"trainforge.io/pool": "p5"}
    assert [t.key for t in f["p5"].taints] == ["nvidia.com/gpu"]
    assert f["training-workloads"].vcpus_per_node == 8


def test_k8s_provider_exposed(platform):
    assert isinstance(platform.k8s_provider, pulumi.ProviderResource)


def test_jobs_wiring_reads_facts(platform):
    from trainforge.jobs.wiring import pool_facts

    pf = pool_facts("p5", platform.node_pools["p5"])
    assert pf.gpus_per_node == 8 and pf.efa_interfaces == 32
    assert pf.node_selector == (("trainforge.io/pool", "p5"),)


def test_dev_stack_wires_jobs_to_teams_and_pools(repo_root):
    from trainforge.jobs.wiring import target_from_platform
    from trainforge.plan.mocks import read_stack_file
    from trainforge.platform.config import load_config

    run = run_mocked(
        lambda: TrainingPlatform("platform", load_config()),
        read_stack_file(repo_root / "Pulumi.dev.yaml"),
    )
    target = target_from_platform(run.result, "research", "gpu-workloads")
    assert target.namespace == "research"
    assert target.pool.gpus_per_node == 1
    assert target.pool.instance_types == ("g4dn.xlarge", "g5.xlarge")
    assert [t.key for t in target.pool.taints] == ["nvidia.com/gpu"]
    assert run.result.job_depends_on  # the training operator
