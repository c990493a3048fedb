"""The queue rehearsal: two teams sharing GPU pools submit in both orders, through the plan's
own queue simulation on the Kueue objects the platform renders. Why and what it shows:
docs/rehearsals.md, "Queue rehearsal"; docs/teams.md shows `worked_example()`'s text (a test
checks that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from trainforge.core.contract import PoolFacts, PoolLimits, Taint
from trainforge.jobs.capacity import Gang, PodRequest
from trainforge.jobs.duration import duration_text
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q
from trainforge.platform import queues as platform_queues
from trainforge.platform.services_config import KueueConfig, PoolQuota, TeamConfig, TeamQuotaConfig


@dataclass(frozen=True)
class Submit:
    job: str
    team: str
    pool: str
    gpus: int  # the gang's GPUs (pods of a whole node each)
    at: float  # seconds
    hours: float  # expected run time


def simulate(
    docs: list[dict[str, Any]], pools: list[PoolFacts], jobs: list[Submit]
) -> tuple[dict[str, Q.Workload], Q.Simulation]:
    """Run the jobs through the queues the docs describe (all jobs `normal` priority)."""
    m = K.read(docs)
    sim = Q.Simulation(m.queues, m.flavors, shared=m.shared, pools=pools)
    work = []
    for i, j in enumerate(jobs):
        per_node = next(p.gpus_per_node for p in pools if p.name == j.pool)
        w = Q.Workload(j.job, j.team, j.team, i, queue=j.team, flavor=j.pool)
        w.need = {Q.GPU: Fraction(j.gpus)}
        w.pods = max(j.gpus // per_node, 1)  # pods of a whole node each
        w.gang = Gang((PodRequest(0, Fraction(0), j.gpus // w.pods),) * w.pods)
        w.submitted, w.duration = j.at, j.hours * 3600
        work.append(w)
    sim.run_timed(work)
    return {w.job: w for w in work}, sim


# The worked example of docs/teams.md: two teams, two 32-GPU pools of 8-GPU nodes.
POOLS = [
    PoolFacts(
        name,
        gpus_per_node=8,
        node_selector=(("trainforge.io/pool", name),),
        taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),),
        limits=PoolLimits(gpus=32),
    )
    for name in ("h100", "a100")
]
TEAMS = [
    TeamConfig(name="llm", quota=TeamQuotaConfig(gpus="40")),
    TeamConfig(
        name="vision",
        quota=TeamQuotaConfig(gpus="16", pools=(("h100", PoolQuota(gpus="8")),)),
    ),
]


def orders() -> dict[str, list[Submit]]:
    """Each team first in turn: the first fills a pool, the other asks for its guarantee
    there an hour later."""
    return {
        "llm first": [
            Submit("llm-pretrain", "llm", "h100", 32, 0, 10),
            Submit("vision-finetune", "vision", "h100", 8, 3600, 4),
        ],
        "vision first": [
            Submit("vision-sweep", "vision", "a100", 32, 0, 6),
            Submit("llm-eval", "llm", "a100", 16, 3600, 2),
        ],
    }


def worked_example(docs: list[dict[str, Any]] | None = None) -> str:
    """The text docs/teams.md shows: the guarantees and the two orders' timelines."""
    plan = platform_queues.quota_plan(TEAMS, POOLS)
    docs = docs if docs is not None else platform_queues.queue_objects(TEAMS, POOLS, KueueConfig())
    lines = ["guaranteed GPUs (nominalQuota) per pool:"]
    for p in POOLS:
        parts = [f"{t.name} {int(plan.nominal[t.name][p.name][Q.GPU])}" for t in TEAMS]
        shared = int(plan.shared["trainforge"][p.name][Q.GPU])
        lines.append(f"  {p.name} (holds {p.limits.gpus}): {', '.join(parts)}, cohort {shared}")
    for title, jobs in orders().items():
        by, sim = simulate(docs, POOLS, jobs)
        lines.append(f"{title}:")
        for j in jobs:
            w = by[j.job]
            start = "never" if w.started is None else duration_text(w.started)
            how = f"borrowing {int(w.borrowed_at_once.get(Q.GPU, 0))}" if w.borrowed_at_once else ""
            if w.preempted_by:
                back = (
                    ""
                    if w.running_since is None
                    else f", resumes at {duration_text(w.running_since)}"
                )
                how = (how + ", " if how else "") + f"preempted by {w.preempted_by}{back}"
            if w.first_preempts:  # Q.preempt_words: its pods start once theirs are gone
                gone = " and ".join(n for n, _ in w.first_preempts)
                how = (how + ", " if how else "") + f"once {gone}'s pods are gone"
            lines.append(
                f"  t={duration_text(j.at)}: {j.team} submits {j.job} "
                f"({j.gpus} GPUs, {j.hours:g} h) -> starts at {start}"
                + (f" ({how})" if how else "")
            )
        lines.append(f"  gangs the pool could not launch: {len(sim.unlaunchable)}")
    return "\n".join(lines) + "\n"
