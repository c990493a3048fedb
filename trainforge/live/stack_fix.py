"""`trainforge why --stack STACK`: the sized fix of a Workload Kueue never admits, the one the
plan prints (`queues.workload_fix` on `queues.quota_change`).

Why the stack: the fix names stack keys (`trainforge:teams[2].quota.pools.l40s.gpus`) and
sizes them with the quota model the ClusterQueues and Cohorts were rendered from
(trainforge.jobs.quota), which the cluster does not carry; a team reads its own ClusterQueue
only. So `why` reads the stack's config, builds the platform contract and renders its queues
as the plan's program does (under the plan's mocks, offline), and reads the Workload's pods
from the cluster: the same arithmetic, so the plan's line and `why`'s agree.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from pathlib import Path
from typing import Any

from trainforge.jobs import trainjob
from trainforge.live.gather import Gathered
from trainforge.plan import kueue as K
from trainforge.plan.checks.queues import Workload, others_held, workload_fix
from trainforge.plan.stack_platform import StackRefused, stack_platform


class StackUnread(Exception):
    """The stack cannot be read or its platform config is refused: the one-line reason."""


@functools.lru_cache(maxsize=2)
def stack_queues(root: Path, stack: str) -> tuple[Any, list[dict[str, Any]]]:
    """The stack's platform contract and its rendered Kueue objects (ClusterQueues, Cohorts,
    ResourceFlavors), as the plan's program builds them from `Pulumi.<stack>.yaml` in `root`
    (`plan.stack_platform`). Raises `StackUnread` with the key and value the check refuses."""
    from trainforge.platform.queues import queue_objects  # noqa: PLC0415

    try:
        built = stack_platform(root, stack)
    except StackRefused as e:
        raise StackUnread(f"--stack {stack}: {e}") from None
    teams = list(built.contract.teams.values())
    if built.kueue is None or not teams:
        return built.contract, []
    inputs = teams[0].quota_inputs
    return built.contract, queue_objects(inputs.teams, inputs.pools, built.kueue)


def never_fits(g: Gathered, root: Path, stack: str) -> bool:
    """Whether the stack's queues never hold `g`'s Workload whatever their usage
    (`K.never_fits` on its pod sets as Kueue counts them, in its LocalQueue's ClusterQueue):
    what decides Kueue's "previously considered podsets requests (12) + current podset
    request (3) > maximum capacity (14400m)" (`K.over_beside`), which its words alone
    cannot (a TrainJob's initializers beside its trainer in the one flavor they may take)."""
    _, objects = stack_queues(root, stack)
    m = K.read(objects)
    queue = ((g.local_queue or {}).get("spec") or {}).get("clusterQueue")
    q = m.queues.get(queue or "")
    if q is None:
        return False
    spec = (g.workload or {}).get("spec") or {}
    if any(ps.get("minCount") is not None for ps in spec.get("podSets") or []):
        return False  # partial admission may admit fewer pods: the model does not try counts
    sets = K.workload_podsets(g.workload or {}, g.limit_ranges)
    return bool(sets) and K.never_fits(q, list(sets), K.Quotas(m.queues, m.shared), m.flavors)


def never_fix(g: Gathered, root: Path, stack: str) -> str:
    """The sized fix of `g`'s Workload, which Kueue never admits: its pods as Kueue counts
    them (`K.workload_podsets`, the namespace's LimitRanges), on the stack's queues; "" where
    the fix names no change (no team, pool or quota over). A TrainJob's trainer pods are its
    pods (Kueue's pod set `node`), and its initializers' pod sets are held beside them in the
    flavors Kueue assigns them (`others_held`), as the plan sizes a TrainJob with
    initializers (queues.quota_change with `beside=`): the plan's line and why's are one."""
    wl = g.workload or {}
    contract, objects = stack_queues(root, stack)
    sets = K.workload_podsets(wl, g.limit_ranges)
    trainer = next(
        (p for p in sets if g.backend == trainjob.BACKEND and p.name == trainjob.REPLICATED_JOB),
        None,
    )
    own = [trainer] if trainer is not None else sets
    pods = sum(p.count for p in own)
    if not pods:
        return ""
    need: dict[str, Fraction] = {}
    for p in own:
        for r, v in p.total().items():
            need[r] = need.get(r, Fraction(0)) + v
    queue = ((g.local_queue or {}).get("spec") or {}).get("clusterQueue")
    m = K.read(objects)
    w = Workload(g.name, "", g.namespace, 0, queue=queue)
    w.pods = pods
    q = m.queues.get(queue or "")
    if trainer is not None and len(sets) > 1 and q is not None:
        got = K.Assigner(K.Quotas(m.queues, m.shared), m.flavors).assign(q, list(sets))
        w.init_need = others_held(got, sets, trainer.name)
    per_pod = {r: Fraction(v) / pods for r, v in need.items() if v}
    main = trainer or max(
        sets, key=lambda p: p.count
    )  # its workers' (a PyTorchJob's Master is one)
    return workload_fix([contract], m, w, per_pod, podset=main)
