"""A GPU pool's capacity is what Karpenter can launch (jobs/quota.py `pool_capacity`): whole
nodes within *every* limit of the NodePool, each counted at its whole capacity, x the GPUs of
each, for the type that holds the least when the pool has several (Karpenter may launch any).
Each case: the figure, Karpenter's replayed provisioning launching no more, the quota fix
(`quota_raise`: the keys a refusal names) applied to the stack and re-planned, and the plan's
line that names the type it assumed."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainforge.jobs import capacity, packing, quota
from trainforge.plan.checks.scheduling import _pool_lines

GPU = "nvidia.com/gpu"


def _stack(pool: dict, gpus: str = "8") -> dict:
    """A stack of one GPU pool and one team (quota.gpus `gpus`)."""
    return {
        "cluster": "trainforge-cap",
        "monitoring": {"mode": "external"},
        "fsx": {"enabled": False},
        "nodePools": [{"name": "gpu", "capacityTypes": ["on-demand"], **pool}],
        "teams": [{"name": "llm", "quota": {"gpus": gpus, "cpu": "8", "memory": "32Gi"}}],
    }


def _inputs(cfg: dict) -> quota.QuotaInputs:
    """The team's quota inputs as the program publishes them (`TeamFacts.quota_inputs`)."""
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    contract = contract_from_config(parse_config(cfg))
    return next(iter(contract.teams.values())).quota_inputs


def _launched(pool, gpus_per_pod: int, pods: int) -> int:
    """GPUs Karpenter's replayed provisioning launches for `pods` pods of `gpus_per_pod`
    within the pool's limits (`packing.pack_rooms`, the one model of its launch)."""
    rooms = [r for r in capacity.rooms(pool) if r.node.gpus >= gpus_per_pod]
    pod = capacity.PodRequest(cpu_m=1000, memory_mib=Fraction(1024), gpus=gpus_per_pod)
    made = packing.pack_rooms(rooms, [pod] * pods, packing.limits_of(pool))
    return sum(len(c.pods) for c in made.claims) * gpus_per_pod


def _apply(cfg: dict, lift: quota.Lift) -> dict:
    """Every `(key, now, to)` of the fix written into the stack: the pool's limits, the team's
    quota."""
    for key, _, to in lift.changes:
        if ".limits." in key:
            name = key.rsplit(".", 1)[1]
            cfg["nodePools"][0].setdefault("limits", {})[name] = int(to) if name == "gpus" else to
        else:
            assert key == "trainforge:teams[0].quota.gpus", key
            cfg["teams"][0]["quota"]["gpus"] = to
    return cfg


def _fixed(cfg: dict, need: int) -> quota.QuotaInputs:
    """The quota fix for a job of `need` GPUs in the pool, applied and re-planned: the team's
    queue may hold it there, the pool holds it, and Karpenter launches it."""
    before = _inputs(cfg)
    assert before.room("gpu")["gpus"] < need
    lift = quota.quota_raise(before, "gpus", Fraction(need), "gpu")
    assert lift is not None
    after = _inputs(_apply(cfg, lift))
    (pool,) = after.pools
    assert after.room("gpu")["gpus"] >= need
    assert quota.pool_capacity(pool, GPU) >= need
    assert _launched(pool, 8, need // 8) == need
    assert quota.quota_plan(after.teams, after.pools).warnings == ()
    return after


def test_a_gpu_limit_no_multiple_of_a_node_s_gpus_holds_whole_nodes():
    """p5.48xlarge (8 GPUs) with `limits.gpus: 20`: Karpenter launches no third node (it
    would pass 20), so the pool holds 16, not 20; quota.gpus 20 is no guarantee there."""
    cfg = _stack({"instanceTypes": ["p5.48xlarge"], "limits": {"gpus": 20}}, gpus="20")
    inputs = _inputs(cfg)
    (pool,) = inputs.pools
    assert quota.pool_capacity(pool, GPU) == 16
    assert _launched(pool, 1, 20) == 16
    (warning,) = quota.quota_plan(inputs.teams, inputs.pools).warnings
    assert "20 asked, but the GPU pools (gpu) hold 16" in warning, warning
    after = _fixed(cfg, 24)
    assert after.pools[0].limits.gpus == 24


def test_a_cpu_limit_that_stops_the_nodes_first_bounds_the_gpus():
    """`limits.gpus: 64` but `limits.cpu: 400`: a p5.48xlarge counts 192 cpu, so 2 nodes,
    16 GPUs. The fix raises limits.cpu (raising limits.gpus alone would lift nothing)."""
    cfg = _stack({"instanceTypes": ["p5.48xlarge"], "limits": {"gpus": 64, "cpu": "400"}})
    (pool,) = _inputs(cfg).pools
    assert quota.pool_capacity(pool, GPU) == 16
    assert quota.held_words(pool, GPU) == "2 p5.48xlarge nodes within its limits x 8 each"
    assert _launched(pool, 8, 8) == 16
    after = _fixed(cfg, 32)
    assert after.pools[0].limits.cpu == "768"  # 4 nodes x 192


def test_a_pool_of_several_types_holds_what_its_least_type_does_and_says_which():
    """g5.12xlarge (4 GPUs, 48 cpu) and g5.48xlarge (8 GPUs, 192 cpu) with `limits.cpu: 480`:
    10 g5.12xlarge alone would hold 40 GPUs, but pods of 8 GPUs make Karpenter launch
    g5.48xlarge, of which the limit allows 2: the pool is sure of 16, and the plan names the
    type it assumed."""
    cfg = _stack(
        {"instanceTypes": ["g5.12xlarge", "g5.48xlarge"], "limits": {"gpus": 64, "cpu": "480"}}
    )
    (pool,) = _inputs(cfg).pools
    assert quota.pool_capacity(pool, GPU) == 16
    assert _launched(pool, 8, 5) == 16  # the worst case is one its jobs bring about
    # 4-GPU pods do better, yet not 40: Karpenter packs two on one g5.48xlarge while the
    # limit leaves room for one, then fills the rest with g5.12xlarge (a mix, over 16)
    assert _launched(pool, 4, 10) == 24
    lines, data = _pool_lines(pool)
    said = (
        "holds for quota: 16 GPUs (2 g5.48xlarge nodes within its limits x 8 each, of "
        "g5.12xlarge, g5.48xlarge the type that holds the least (Karpenter may launch any))"
    )
    assert lines[1] == f"  {said}" and data["quotaCapacity"] == said.split(": ", 1)[1]
    after = _fixed(cfg, 40)
    assert after.pools[0].limits.cpu == "960"  # 5 g5.48xlarge x 192


@pytest.mark.parametrize(("types", "held"), [(["c5.2xlarge", "m5.2xlarge"], "c5.2xlarge")])
def test_a_cpu_pool_s_memory_is_its_memory_poor_type_s(types, held):
    """dev's training-workloads: Karpenter launches the cheaper c5.2xlarge for CPU work
    (16 GiB, against m5.2xlarge's 32), 8 within limits.cpu 64: that is the memory it is sure
    of, and dev's quota.memory asks no more."""
    import yaml

    from tests.conftest import ROOT

    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    (pool,) = [p for p in dev["trainforge:nodePools"] if p["name"] == "training-workloads"]
    assert pool["instanceTypes"] == types
    cfg = _stack({})
    cfg["nodePools"] = [{k: v for k, v in pool.items() if k != "consolidateAfter"}]
    cfg["teams"][0]["quota"]["gpus"] = "0"
    inputs = _inputs(cfg)
    (facts,) = inputs.pools
    n, room = quota.assumed(facts, "memory")
    assert (n, room.node.instance_type) == (8, held)
    memory = quota.pool_capacity(facts, "memory")
    team = dev["trainforge:teams"][0]["quota"]["memory"]
    assert Fraction(int(team.removesuffix("Gi")) * 2**30) <= memory
