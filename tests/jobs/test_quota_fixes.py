"""Every quota warning carries a fix that, applied alone and re-planned, leaves no warning:
a team's whole total the pools together cannot guarantee (`quota_plan`'s per-team line, which
gave no fix), and a CPU pool over-asked of both cpu and memory (each warning's fix was its own
resource's, so applying the cpu one left the memory warning)."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.jobs.test_quota_pools import DATA, _apply, _inputs
from tests.jobs.test_quota_split import WHOLE
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import quota


def _replanned(cfg: dict, warning: str, prefix: str = "; fix: set ") -> dict:
    """A copy of `cfg` with `warning`'s fix (its `KEY to VALUE and ...` changes) applied."""
    fixed = copy.deepcopy(cfg)
    changes = warning.split(prefix)[1].split(" (the rest")[0]
    for change in changes.split(" and "):
        _apply(fixed, *change.split(" to "))
    return fixed


def _clean(cfg: dict) -> None:
    """The plan of `cfg` gives no quota warning, and every team is guaranteed its totals."""
    after = _inputs(cfg)
    plan = quota.quota_plan(after.teams, after.pools)
    assert plan.warnings == (), plan.warnings
    for t in after.teams:
        for r in quota.COVERED:
            got = sum(plan.nominal[t.name][p.name][r] for p in quota._eligible(after.pools, r))
            assert got == parse_quantity(getattr(t.quota, quota.CONFIG_KEY[r])), (t.name, r)


NLP = {"name": "nlp", "quota": {"gpus": "36", "cpu": "128", "memory": "512Gi"}}
CV = {"name": "cv", "quota": {"gpus": "14", "cpu": "64", "memory": "256Gi"}}
NLP_H100 = copy.deepcopy(NLP)
NLP_H100["quota"]["pools"] = {"h100": {"gpus": 12}}


@pytest.mark.parametrize("teams", [[NLP, CV], [NLP_H100, CV]], ids=["shares", "explicit-h100"])
def test_each_total_warning_carries_a_fix_that_applied_alone_replans_clean(teams):
    """nlp 36 and cv 14 GPUs of the 46 the GPU pools hold: each team's line said what it is
    guaranteed and nothing to do. Now each names its own total lowered by the 4 asked beyond
    what the pools hold (with an explicit part of a pool that is then still over-asked), and
    each fix alone, applied and re-planned, leaves no warning."""
    cfg = yaml.safe_load(WHOLE.read_text())
    cfg["teams"] = copy.deepcopy(teams)
    inputs = _inputs(cfg)
    warnings = quota.quota_plan(inputs.teams, inputs.pools).warnings
    totals = [w for w in warnings if w.split(":")[1].endswith(".quota.gpus")]
    assert len(totals) == 2, warnings
    assert totals[1] == (
        "trainforge:teams[1].quota.gpus: 14 asked, but the GPU pools (l4-pool, a10-small, h100) "
        "hold 46 shared by 2 team(s): team cv is guaranteed 13; the rest only while other teams "
        "leave it idle; fix: set trainforge:teams[1].quota.gpus to 10"
    )
    assert totals[0].endswith(
        "fix: set trainforge:teams[0].quota.gpus to 32"
        + (" and trainforge:teams[1].quota.pools.h100.gpus to 4" if "pools" in teams[0]["quota"]
           else "")
    ), totals[0]  # fmt: skip
    for w in warnings:
        _clean(_replanned(cfg, w))


def test_a_single_team_over_the_cluster_is_told_to_ask_what_exists():
    """One team asking 64 of 32 GPUs (tests/plan/test_check_queues.py's plan line): the fix is
    its total at what the pools hold."""
    cfg = yaml.safe_load(WHOLE.read_text())
    cfg["teams"] = [{"name": "vision", "quota": {"gpus": "64", "cpu": "32", "memory": "100Gi"}}]
    inputs = _inputs(cfg)
    (w,) = quota.quota_plan(inputs.teams, inputs.pools).warnings
    assert w.endswith("; the pools hold no more; fix: set trainforge:teams[0].quota.gpus to 46"), w
    _clean(_replanned(cfg, w))


def test_a_cpu_pools_cpu_and_memory_warnings_carry_one_fix_that_clears_both():
    """cpu-batch is over-asked of cpu and of memory (tests/jobs/data/quota_cpu_pools.yaml):
    each warning's fix was its own resource's explicit parts, so the cpu warning's, applied,
    left the memory warning. Now both carry the pool's one fix, and either alone re-plans
    clean."""
    cfg = yaml.safe_load(DATA.read_text())
    inputs = _inputs(cfg)
    cpu, memory = quota.quota_plan(inputs.teams, inputs.pools).warnings
    fix = cpu.split("; fix: ")[1]
    assert fix == memory.split("; fix: ")[1]
    assert fix == (
        "set trainforge:teams[0].quota.pools.cpu-batch.cpu to 137 and "
        "trainforge:teams[1].quota.pools.cpu-batch.cpu to 50 and "
        "trainforge:teams[0].quota.pools.cpu-batch.memory to 470Gi and "
        "trainforge:teams[1].quota.pools.cpu-batch.memory to 172Gi (the rest of their "
        "quota.cpu and quota.memory goes to the other pools)"
    )
    _clean(_replanned(cfg, cpu))
