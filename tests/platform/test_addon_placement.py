"""Add-on controllers stay off job pools, and new nodes that mount FSx wait for its driver.

Under mocks, from the dev and prod stacks: every Karpenter pool and GPU node group carries a
taint that CoreDNS and the CSI controllers (their tolerations at the pinned versions,
trainforge/platform/addon_controllers.py) do not tolerate, jobs tolerate their pool's taints
(PoolFacts -> pod tolerations), the system node group has node auto repair, and nodes of job
pools start with the FSx CSI driver's startup taint when the stack has FSx.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_stack
from trainforge.core.contract import Taint
from trainforge.platform.addon_controllers import ADDON_CONTROLLERS, admitted
from trainforge.platform.node_daemonsets import tolerates
from trainforge.platform.node_taints import FSX_AGENT_NOT_READY_TAINT, JOBS_TAINT_KEY

NG = "aws:eks/nodeGroup:NodeGroup"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
LINUX = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request):
    return run_stack(request.param)


def pool_taints(run) -> dict[str, tuple[Taint, ...]]:
    """Each job pool's taints as the cluster gets them (NodePool / node group inputs)."""
    out = {}
    for np in run.of_type(NODEPOOL):
        spec = np.inputs["spec"]["template"]["spec"]
        out[np.inputs["metadata"]["name"]] = tuple(
            Taint(t["key"], t["effect"], t.get("value")) for t in spec["taints"]
        )
    effects = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute"}
    for ng in run.of_type(NG):
        if ng.inputs["nodeGroupName"].endswith("-system"):
            continue
        out[ng.inputs["labels"]["trainforge.io/pool"]] = tuple(
            Taint(t["key"], effects[t["effect"]], t.get("value"))
            for t in ng.inputs["taints"]
            if t["key"] != FSX_AGENT_NOT_READY_TAINT  # removed once the driver is ready
        )
    return out


def test_no_addon_controller_can_land_on_a_job_pool(stack):
    pools = pool_taints(stack)
    assert "training-workloads" in pools  # the spot CPU pool is among them
    for pool, taints in pools.items():
        assert admitted(taints, LINUX) == [], pool
    # the check can fail: an untainted node (the system group) admits every one of them
    assert admitted((), LINUX) == [c.name for c in ADDON_CONTROLLERS]


def test_cpu_pools_carry_the_jobs_only_taint_and_jobs_tolerate_it(stack):
    pools = pool_taints(stack)
    assert Taint(JOBS_TAINT_KEY, "NoSchedule", "true") in pools["training-workloads"]
    jobs = [
        j
        for j in stack.of_type("kubernetes:kubeflow.org/v1:PyTorchJob")
        if "training-workloads" in str(j.inputs)
    ]
    if stack.outputs["clusterName"].endswith("-prod"):
        assert not jobs  # prod declares no CPU job; dev's run there
        return
    assert jobs, "a job on the CPU pool"
    for job in jobs:
        for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
            tols = tuple(replica["template"]["spec"]["tolerations"])
            for taint in pools["training-workloads"]:
                assert tolerates(tols, taint), (job.name, taint)


def test_system_group_has_auto_repair_and_no_startup_taint(stack):
    (system,) = [n for n in stack.of_type(NG) if n.inputs["nodeGroupName"].endswith("-system")]
    assert system.inputs["nodeRepairConfig"] == {"enabled": True}
    assert "taints" not in system.inputs  # add-ons installed before the FSx driver run here


def test_new_job_nodes_wait_for_the_fsx_driver(stack):
    for np in stack.of_type(NODEPOOL):
        spec = np.inputs["spec"]["template"]["spec"]
        assert spec["startupTaints"] == [
            {"key": FSX_AGENT_NOT_READY_TAINT, "effect": "NoExecute"}
        ], np.name
    for ng in stack.of_type(NG):
        if not ng.inputs["nodeGroupName"].endswith("-system"):
            assert {"key": FSX_AGENT_NOT_READY_TAINT, "effect": "NO_EXECUTE"} in ng.inputs["taints"]


def test_without_fsx_nodes_get_no_startup_taint():
    run = run_stack("dev", {"trainforge:fsx": '{"enabled": false}', "trainforge:jobs": "[]"})
    for np in run.of_type(NODEPOOL):
        assert "startupTaints" not in np.inputs["spec"]["template"]["spec"]
