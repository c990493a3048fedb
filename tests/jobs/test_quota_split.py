"""What no team is guaranteed in a pool goes to the cohorts whole (jobs/quota.py
`_cohort_shares`): in a GPU pool the GPUs with their CPU and memory, to the cohorts whose
teams may borrow them, and a warning where none may (the wave-21 review's stacks)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import yaml

from tests.conftest import ROOT
from tests.jobs.test_quota_pools import _inputs
from trainforge.jobs import quota

WHOLE = ROOT / "tests/jobs/data/quota_whole_split.yaml"
GPU = quota.GPU


@pytest.fixture(scope="module")
def whole():
    cfg = yaml.safe_load(WHOLE.read_text())
    return cfg, _inputs(cfg)


def test_a_gpu_pools_unguaranteed_gpus_go_with_their_cpu_and_memory(whole):
    """mine7 at 1969f598: cohort trainforge got l4-pool's 14 GPUs with cpu 0 and memory 0,
    cohort nlp-only its CPU without a GPU (nlp may not borrow GPUs): 26 GPUs nobody could use.
    Now every cohort's part of a GPU pool is whole GPUs, each with at least most of the CPU
    and memory a GPU brings, and Kueue's own arithmetic (the queue model the plan replays)
    lets cv hold every such GPU of the pool with its CPU and memory."""
    _, inputs = whole
    plan = quota.quota_plan(inputs.teams, inputs.pools)
    assert plan.warnings == ()
    for p in inputs.pools:
        if not p.gpus_per_node:
            continue
        each = quota.per_gpu(p)
        for per in plan.shared.values():
            gpus = per[p.name][GPU]
            for r in ("cpu", "memory"):
                # the GPUs a cohort holds come with their CPU and memory, nothing without them
                assert per[p.name][r] >= (gpus - 1) * each[r] if gpus else per[p.name][r] == 0
        assert plan.shared["nlp-only"][p.name][GPU] == 0  # nlp may borrow no GPU
        left = quota.pool_capacity(p, GPU) - sum(plan.nominal[t][p.name][GPU] for t in plan.nominal)
        assert plan.shared["trainforge"][p.name][GPU] == left > 0
        cv = next(t for t in inputs.teams if t.name == "cv")
        room = quota.pool_room(cv, inputs.teams, inputs.pools)[p.name]
        # cv's queue may hold all those GPUs at once, each with what a GPU brings
        assert room[GPU] == left
        for r in ("cpu", "memory"):
            assert room[r] >= left * each[r] - (1 if r == "cpu" else 2**20) * len(plan.shared)


def test_capacity_no_team_may_borrow_is_named_with_a_fix_that_works(whole):
    """Both teams may borrow no GPU: l4-pool's, a10-small's and h100's unguaranteed GPUs are
    nobody's. The plan says so per pool, naming the limits; the fix applied, no warning."""
    cfg, _ = whole
    cfg = yaml.safe_load(yaml.safe_dump(cfg))
    cfg["teams"][1]["quota"]["borrowingLimit"] = {"gpus": 0}
    inputs = _inputs(cfg)
    warnings = quota.quota_plan(inputs.teams, inputs.pools).warnings
    assert len(warnings) == 3, warnings
    assert warnings[0] == (
        "pool l4-pool: 14 GPUs (with their CPU and memory) are guaranteed to no team and no team "
        "may borrow them (trainforge:teams[0].quota.borrowingLimit.gpus is 0, "
        "trainforge:teams[1].quota.borrowingLimit.gpus is 0), so Kueue admits no pod to them; "
        "fix: unset trainforge:teams[0].quota.borrowingLimit.gpus (then that team's cohort may "
        "borrow them), or guarantee them to a team (quota.pools.l4-pool.gpus)"
    )
    del cfg["teams"][0]["quota"]["borrowingLimit"]
    after = _inputs(cfg)
    plan = quota.quota_plan(after.teams, after.pools)
    assert plan.warnings == ()
    assert plan.shared["nlp-only"]["l4-pool"][GPU] == Fraction(14)


def _refusal(pool: dict) -> list[str]:
    """The config errors of the whole-split stack with `pool` listed first (as mine4 did)."""
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import ConfigError, parse_config

    cfg = yaml.safe_load(WHOLE.read_text())
    cfg["nodePools"].insert(0, pool)
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    with pytest.raises(ConfigError) as err:
        parse_config(cfg, lookups=True)
    return err.value.errors


@pytest.mark.parametrize("gpu", [None, True, False])
def test_a_fractional_gpu_pool_is_refused_naming_the_types_and_why(gpu):
    """mine4 at 1969f598: a g6f pool (EC2: a fraction of one L4, Count 0) planned clean as a
    CPU pool, first in cv's ClusterQueue, so CPU-only work went onto GPU instances; with
    `gpu: true` it was refused as having "no GPUs". Karpenter offers 0 nvidia.com/gpu on it,
    so it is refused in one line whatever `gpu` says."""
    pool = {"name": "frac", "instanceTypes": ["g6f.xlarge", "g6f.4xlarge"],
            "capacityTypes": ["on-demand"], "limits": {"gpus": 4}}  # fmt: skip
    if gpu is not None:
        pool["gpu"] = gpu
    assert _refusal(pool) == [
        "trainforge:nodePools[0].instanceTypes: got ['g6f.xlarge', 'g6f.4xlarge']; expected "
        "instance types with whole GPUs (g6, g5, p5, ...) or none (m7i, c7i, ...): g6f.xlarge, "
        "g6f.4xlarge have a fraction of one L4 (EC2 counts 0 whole GPUs), which Karpenter "
        "offers as 0 nvidia.com/gpu, so no GPU job could run there"
    ]


def test_a_cpu_pools_gpu_limit_is_refused():
    """`limits.gpus` on a pool of CPU types bounds nothing real (mine4's frac was read so)."""
    pool = {"name": "batch", "instanceTypes": ["m6i.4xlarge"], "limits": {"gpus": 4}}
    assert _refusal(pool) == [
        "trainforge:nodePools[0].limits.gpus: got 4; expected no limits.gpus for a pool of CPU "
        "types (m6i.4xlarge); limits.cpu and limits.memory bound it"
    ]


def test_a_cut_explicit_part_says_why_names_each_share_and_a_fix_that_replans_clean():
    """mine2 at 1969f598: nlp `gpus: 36` with `pools: {h100: {gpus: 12}}`, cv 14: they ask 50
    of 46 GPUs. The line said "12 asked, but pool h100 holds 16 shared by the teams: team nlp
    is guaranteed 11 there": no cv share, no cause, no fix. Now it names the pool's asks
    (each with where it comes from), what each is guaranteed and a fix; applied, the plan
    gives no quota warning and every team is guaranteed its (new) totals."""
    from tests.jobs.test_quota_pools import _apply

    cfg = yaml.safe_load(WHOLE.read_text())
    cfg["teams"] = [
        {"name": "nlp", "quota": {"gpus": "36", "cpu": "128", "memory": "512Gi",
                                  "borrowingLimit": {"gpus": 8}, "pools": {"h100": {"gpus": 12}}}},
        {"name": "cv", "quota": {"gpus": "14", "cpu": "64", "memory": "256Gi"}},
    ]  # fmt: skip
    inputs = _inputs(cfg)
    warnings = quota.quota_plan(inputs.teams, inputs.pools).warnings
    (part,) = [w for w in warnings if ".quota.pools." in w.split(":")[1]]
    assert part == (
        "trainforge:teams[0].quota.pools.h100.gpus: 12 asked, but pool h100 holds 16 GPUs (2 "
        "p5.48xlarge nodes within its limits x 8 each) and the teams ask 17 of it: team nlp 12 "
        "(quota.pools.h100.gpus), team cv 5 (its share of quota.gpus 14); each is guaranteed its "
        "part scaled to fit (nlp 11, cv 5), as the GPU pools (l4-pool, a10-small, h100) hold 46 "
        "of the 50 the teams ask; fix: set trainforge:teams[1].quota.pools.h100.gpus to 4 and "
        "trainforge:teams[0].quota.gpus to 32"
    )
    for change in part.split("; fix: set ")[1].split(" and "):
        _apply(cfg, *change.split(" to "))
    after = _inputs(cfg)
    plan = quota.quota_plan(after.teams, after.pools)
    assert plan.warnings == ()
    for t in after.teams:
        got = sum(plan.nominal[t.name][p.name][GPU] for p in after.pools)
        assert got == int(t.quota.gpus), t.name


def test_kueue_admits_a_job_on_the_unguaranteed_gpus_with_their_cpu(whole):
    """The plan's Kueue replay reads the emitted ClusterQueues and Cohorts: cv (guaranteed no
    GPU) runs 3 workers x 4 L4s in l4-pool by borrowing 12 of the 14 GPUs no team is
    guaranteed, with their CPU and memory. At 1969f598 it was never admitted (cohort
    trainforge held those GPUs with cpu 0)."""
    from tests.plan.test_check_queues import admission
    from trainforge.plan.core import plan_project

    cfg, _ = whole
    job = {"name": "cv-l4", "team": "cv", "pool": "l4-pool", "workers": 3, "model": "mlp",
           "steps": 100}  # fmt: skip
    overrides = {f"trainforge:{k}": cfg[k] for k in ("nodePools", "teams")}
    overrides["trainforge:jobs"] = [job]
    result = plan_project(ROOT, "dev", standins=False, config_overrides=overrides)
    _, by_job = admission(result)
    assert by_job["cv-l4"]["state"] == "runs", by_job
    assert by_job["cv-l4"]["borrowing"]["nvidia.com/gpu"] == "12"


def test_where_no_split_ends_the_cut_the_fix_asks_what_is_guaranteed():
    """tests/jobs/data/quota_borrow_limit.yaml: the teams ask 224 of 176 GPUs, and llm's
    explicit efa-training 32 leaves that pool's other 32 to no one, so no explicit split with
    one total lowered ends the cuts; the fix said "ask less of pool l40s ... or raise its
    limits", tried nowhere. Now it is the asks lowered to what each team is guaranteed,
    which, applied, leaves no GPU warning."""
    from tests.jobs.test_quota_pools import _apply

    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_borrow_limit.yaml").read_text())
    inputs = _inputs(cfg)
    warnings = quota.quota_plan(inputs.teams, inputs.pools).warnings
    parts = [w for w in warnings if ".quota.pools." in w.split(":")[1]]
    # cpu-batch's memory too: 16 m7i.4xlarge within its limits leave pods 918992Mi (poolcap's
    # whole nodes), and the teams ask 1607706Mi of it
    assert [w.split(":")[1] for w in parts] == [
        "teams[1].quota.pools.gpu-workloads.gpus", "teams[2].quota.pools.l40s.gpus",
        "teams[2].quota.pools.cpu-batch.memory",
    ]  # fmt: skip
    fix = parts[0].split("; fix: ask what each team is guaranteed now: set ")[1]
    assert fix == parts[1].split("; fix: ask what each team is guaranteed now: set ")[1]
    for change in fix.split(" and "):
        _apply(cfg, *change.split(" to "))
    after = _inputs(cfg)
    left = quota.quota_plan(after.teams, after.pools).warnings
    assert not [w for w in left if "gpus" in w.split(":")[1] or "GPUs" in w], left
    # the memory part's fix, applied too, leaves no memory warning
    fix = parts[2].split("; fix: ask what each team is guaranteed now: set ")[1]
    for change in fix.split(" and "):
        _apply(cfg, *change.split(" to "))
    after = _inputs(cfg)
    left = quota.quota_plan(after.teams, after.pools).warnings
    assert not [w for w in left if "memory" in w.split(":")[1] or "memory" in w], left
