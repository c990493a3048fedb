"""Team quotas per pool (jobs/quota.py) on the wave-20 review's stack
(tests/jobs/data/quota_cpu_pools.yaml): a CPU pool holds what its nodes leave to pods, an
over-asked pool is named with a fix that works, and a CPU pool's `gpus` is refused."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
import yaml

from tests.conftest import ROOT
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import capacity, packing, quota

DATA = ROOT / "tests/jobs/data/quota_cpu_pools.yaml"


def _inputs(cfg: dict):
    """Every team and pool of a stack config as the program publishes them (`quota_inputs`)."""
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    contract = contract_from_config(parse_config(cfg))
    return next(iter(contract.teams.values())).quota_inputs


@pytest.fixture(scope="module")
def review():
    cfg = yaml.safe_load(DATA.read_text())
    return cfg, _inputs(cfg)


def test_a_cpu_pool_holds_what_the_nodes_its_limits_allow_leave_to_pods(review):
    """cpu-batch: m7i.4xlarge, limits 256 cpu / 1024Gi. Karpenter counts a NodeClaim as 16 cpu
    and 60620Mi, so the limits allow 16 nodes (its replayed provisioning launches no 17th),
    each leaving 15700m / 57541Mi to pods: the pool holds 251.2 cores, not 256."""
    _, inputs = review
    pool = next(p for p in inputs.pools if p.name == "cpu-batch")
    (room,) = capacity.rooms(pool)
    assert packing.capacity_of(room.node) == {
        "cpu": 16, "memory": 60620 * 2**20, "nvidia.com/gpu": 0,
    }  # fmt: skip
    assert (room.cpu_m, room.memory_mib) == (15700, 57541)
    # one pod filling a node, 20 of them: Karpenter's replay makes 16 NodeClaims
    pods = [capacity.PodRequest(cpu_m=room.cpu_m, memory_mib=Fraction(room.memory_mib))] * 20
    made = packing.pack_rooms([room], pods, packing.limits_of(pool))
    assert (len(made.claims), len(made.unplaced)) == (16, 4)
    assert quota.pool_capacity(pool, "cpu") == Fraction(16 * 15700, 1000)
    assert quota.pool_capacity(pool, "memory") == 16 * 57541 * 2**20
    plan = quota.quota_plan(inputs.teams, inputs.pools)
    for r in ("cpu", "memory"):
        held = sum(plan.nominal[t.name]["cpu-batch"][r] for t in inputs.teams)
        assert held <= quota.pool_capacity(pool, r)


def _apply(cfg: dict, key: str, value: str) -> None:
    """`trainforge:teams[0].quota.pools.cpu-batch.cpu` set to `value` in `cfg`."""
    here, parts = cfg, re.findall(r"[^.\[\]]+|\[\d+\]", key.removeprefix("trainforge:"))
    for part in parts[:-1]:
        here = here[int(part[1:-1])] if part.startswith("[") else here.setdefault(part, {})
    here[parts[-1]] = value


def test_an_over_asked_pool_is_named_with_each_teams_share_and_a_fix_that_works(review):
    """llm's and vision's shares of cpu-batch plus research's explicit 64 cores pass what it
    holds, while training-workloads keeps cores nobody is guaranteed. The warning names the
    pool, each share and where it comes from; its fix applied, no warning, and every team is
    guaranteed what it asked in the CPU pools."""
    cfg, inputs = review
    warnings = quota.quota_plan(inputs.teams, inputs.pools).warnings
    assert len(warnings) == 2, warnings
    cpu, memory = warnings
    assert cpu.startswith(
        "pool cpu-batch holds 251200m cpu for pods (16 m7i.4xlarge nodes within its limits x "
        "15700m each), but they ask 258820m of it: team llm 142651m (its share of quota.cpu "
        "700), team vision 52169m (its share of quota.cpu 256), team research 64 "
        "(quota.pools.cpu-batch.cpu); each is guaranteed its part scaled down"
    ), cpu
    assert "while training-workloads keeps" in cpu and memory.startswith("pool cpu-batch holds")
    fixed = yaml.safe_load(DATA.read_text())
    for w in warnings:
        for change in w.split("; fix: set ")[1].split(" (the rest")[0].split(" and "):
            _apply(fixed, *change.split(" to "))
    assert fixed["teams"][0]["quota"]["pools"]["cpu-batch"] == {"cpu": "137", "memory": "470Gi"}
    after = _inputs(fixed)
    plan = quota.quota_plan(after.teams, after.pools)
    assert plan.warnings == ()
    for t in after.teams:
        for r in ("cpu", "memory"):
            got = sum(plan.nominal[t.name][p][r] for p in ("cpu-batch", "training-workloads"))
            assert got == parse_quantity(getattr(t.quota, quota.CONFIG_KEY[r])), (t.name, r)


@pytest.mark.parametrize("total", ["8", "10"])
def test_gpus_of_a_cpu_pool_are_refused_naming_the_key(review, total):
    """`quota.pools.cpu-batch.gpus` was spent nowhere but counted by the totals' check: with
    8 the refusal invited a lower l40s, with 10 it passed and spread 2 GPUs elsewhere."""
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import ConfigError, parse_config

    cfg, _ = review
    cfg = yaml.safe_load(yaml.safe_dump(cfg))
    cfg["teams"][2]["quota"] = {
        "gpus": total, "pools": {"l40s": {"gpus": 8}, "cpu-batch": {"gpus": 2}},
    }  # fmt: skip
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    with pytest.raises(ConfigError) as err:
        parse_config(cfg, lookups=True)
    assert err.value.errors == [
        "trainforge:teams[2].quota.pools.cpu-batch.gpus: got '2'; expected no gpus for pool "
        "cpu-batch, which has no GPUs (gpus only under a GPU pool: efa-training, "
        "gpu-workloads, l40s, p4d-reserved)"
    ]
