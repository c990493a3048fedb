"""A team's quota: Kueue's nominal quotas per pool, the namespace's ResourceQuota, and the
stack keys that lift them (docs/teams.md, "Quotas").

Why in jobs/ and pure: the platform (trainforge.platform.queues) renders the ClusterQueues,
Cohorts and namespace quotas from it, and a job's quota refusal (trainforge.jobs.wiring)
computes its fix from the same data, which the platform publishes on `TeamFacts.quota_inputs`
(`QuotaInputs`: every team's quota config and every pool): one copy of the arithmetic, read by
both. It reads the node model (`capacity.rooms`: what a node leaves to pods per GPU), which
lives in jobs/.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from trainforge.core.contract import GPU_RESOURCE, PoolFacts
from trainforge.core.quantity import figure, parse_quantity
from trainforge.jobs import capacity, packing
from trainforge.stack.services import PoolQuota, TeamConfig

GPU = GPU_RESOURCE
# What a team's quota covers. EFA devices (vpc.amazonaws.com/efa) come with the node a job
# fills and are excluded from quota in Kueue's configuration (resources.excludeResourcePrefixes).
COVERED = ("cpu", "memory", GPU)
CONFIG_KEY = {"cpu": "cpu", "memory": "memory", GPU: "gpus"}

# What a team's quota means (docs/teams.md, "Quotas"): `quota.gpus` is the team's guarantee,
# how many GPUs it holds at once whatever the other teams do; `quota.cpu` and `quota.memory`
# are its guarantee for CPU-only work in CPU pools; the CPU and memory of a GPU pool follow
# its GPUs there (a GPU's share of what a node leaves to pods).
#
# Kueue counts quota per flavor (pool), and a nominal quota is only a guarantee if the pool
# can hold it: in every pool, the nominal quotas of all teams add up to at most what the pool
# can hold (`pool_capacity`). So a team's total is *split* over the pools it may use, by
# default in proportion to what each pool holds (`quota.pools` says otherwise, pool by
# pool); where the teams ask more of a pool than it holds, each team's part is scaled down
# (a warning names the key, what was asked and what is possible). What no team is guaranteed
# in a pool is shared out among the cohorts in proportion to their teams' guarantees there
# (evenly where none has one), whole: in a GPU pool its GPUs with their CPU and memory, by one
# set of weights (`_cohort_shares`); a team that may not borrow all of a pool's resources
# (a borrowingLimit of 0) counts for nothing there, and what no team could borrow is nobody's,
# which the plan warns of: each cohort's part is its Kueue `Cohort` object's nominal
# quota, a shared pool for its members only (kueue v0.19.2 apis/kueue/v1beta2/cohort_types.go,
# CohortSpec.ResourceGroups, 8eab687, read 2026-11-30), so any member may borrow it while it
# is idle, a team alone in its cohort included, and every team takes its own nominal quota
# back from borrowers by preemption (`reclaimWithinCohort`).


_UNIT = {"cpu": Fraction(1, 1000), "memory": Fraction(2**20), GPU: Fraction(1)}


def format_quantity(resource: str, value: Fraction) -> str:
    if resource == "memory":
        mib = int(value // 2**20)
        return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"
    if resource == "cpu":
        milli = int(value * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return str(int(value))


def _round_up(resource: str, value: Fraction) -> Fraction:
    unit = _UNIT[resource]
    return -(-value // unit) * unit


def limit_nodes(pool: PoolFacts) -> list[tuple[int, capacity.NodeRoom]] | None:
    """Per instance type of the pool: how many nodes of that type alone it may have, and what
    each leaves to pods (`capacity.rooms`: allocatable less the DaemonSets). Karpenter counts a
    NodeClaim's whole capacity against *every* limit of the pool (`packing.capacity_of`: 16
    cpu, 60620Mi for an m7i.4xlarge; 192 cpu and 8 GPUs for a p5.48xlarge) and launches none
    that would pass one (`packing.pack_rooms`), so the limits allow the fewest of
    floor(limit / capacity) over the limits it sets: whole nodes, fewer GPUs or cores than a
    limit that is no multiple of a node's; a node group allows maxSize. [] when unbounded;
    None when the nodes are unknown.

    Upstream: kubernetes-sigs/karpenter 6e7eab7a0f48 (the core karpenter-provider-aws v1.14.1
    builds with; read 2026-11-30), pkg/controllers/provisioning/scheduling/scheduler.go:
    `NewScheduler` starts each NodePool's `remainingResources` at its `spec.limits`,
    `calculateExistingNodeClaims`/`updateRemainingResources` subtract each existing node's
    `Capacity()`, `addToNewNodeClaim` keeps only the types `filterByRemainingResources` passes
    (every limited resource of the type's `Capacity` at most what remains) and `subtractMax`
    takes the largest capacity of the NodeClaim's types off what remains."""
    rs = capacity.rooms(pool)
    if not rs:
        return None
    lim = packing.limits_of(pool)
    out = []
    for r in rs:
        cap = packing.capacity_of(r.node)
        bounds = [int(lim[k] // cap[k]) for k in lim if cap[k] > 0]
        if pool.max_nodes is not None:
            bounds.append(pool.max_nodes)
        if not bounds:
            return []
        out.append((min(bounds), r))
    return out


def _in_room(room: capacity.NodeRoom, resource: str) -> Fraction:
    if resource == GPU:
        return Fraction(room.node.gpus)
    if resource == "cpu":
        return Fraction(room.cpu_m, 1000)
    return Fraction(room.memory_mib * 2**20)


def assumed(pool: PoolFacts, resource: str) -> tuple[int, capacity.NodeRoom] | None:
    """The instance type `pool_capacity` counts and its nodes: of the pool's types (its GPU
    types, for GPUs), the one whose nodes alone within the limits leave pods the least of
    `resource`. Why the least, not the best: Karpenter may launch any type of a NodePool (a
    NodeClaim launches the cheapest of the types that hold its pods: `packing.launch`), each
    counted whole against the limits, so a pool filled with that type is one the teams' jobs
    can bring about, and a guarantee has to hold there too (docs/teams.md, "Quotas"). None:
    unbounded, or no such type known."""
    counts = limit_nodes(pool)
    kept = [(n, r) for n, r in counts or () if resource != GPU or r.node.gpus]
    if not kept:
        return None
    return min(kept, key=lambda c: c[0] * _in_room(c[1], resource))


def pool_capacity(pool: PoolFacts, resource: str) -> Fraction | None:
    """The most of `resource` the pool's nodes are sure to give pods, whatever types Karpenter
    launches: whole nodes within every limit (and maxSize) x what each leaves to pods (GPUs:
    its GPUs), for the type that gives the least (`assumed`). A pool of p5.48xlarge with
    `limits.gpus: 20` holds 16 GPUs; with `limits.cpu: 200` as well, 8. With nodes unknown (a
    hand-built contract): its `limits`, or maxSize x a node's size. None when unbounded or
    unknown."""
    counts = limit_nodes(pool)
    if counts == []:
        return None
    if (least := assumed(pool, resource)) is not None:
        n, room = least
        return n * _in_room(room, resource)
    lim = pool.limits
    if resource == GPU:
        if lim.gpus is not None:
            return Fraction(lim.gpus)
        per = max((n.gpus for n in pool.nodes), default=pool.gpus_per_node)
        return None if pool.max_nodes is None or not per else Fraction(per * pool.max_nodes)
    if resource == "cpu":
        if lim.cpu is not None:
            return parse_quantity(lim.cpu)
        per = pool.vcpus_per_node or 0
    else:
        if lim.memory is not None:
            return parse_quantity(lim.memory)
        per = (pool.memory_mib_per_node or 0) * 2**20
    if pool.max_nodes is None or not per:
        return None
    return Fraction(per) * pool.max_nodes


def held_words(pool: PoolFacts, resource: str) -> str:
    """How `pool_capacity` came about, in the plan's words: `16 m7i.4xlarge nodes within its
    limits x 15700m each`, and with several types which one it assumed: `..., of c5.9xlarge,
    m5.8xlarge the type that holds the least (Karpenter may launch any)`."""
    least = assumed(pool, resource)
    if least is None:
        if resource == GPU:
            return "its limits.gpus" if pool.limits.gpus is not None else "its maxSize nodes"
        return "its limits"
    n, r = least
    allow = "its maxSize" if pool.kind == "node-group" else "its limits"
    each = format_quantity(resource, _in_room(r, resource))
    words = f"{n} {r.node.instance_type} nodes within {allow} x {each} each"
    kept = [(c, x) for c, x in limit_nodes(pool) or () if resource != GPU or x.node.gpus]
    types = ", ".join(x.node.instance_type for _, x in kept)
    if len({c * _in_room(x, resource) for c, x in kept}) > 1:
        launch = "the node group" if pool.kind == "node-group" else "Karpenter"
        words += f", of {types} the type that holds the least ({launch} may launch any)"
    elif len(kept) > 1:
        words += f", as many as any of {types} would"
    return words


def capacity_words(pool: PoolFacts) -> str | None:
    """What the pool holds for the teams' guarantees (`pool_capacity`), and how: a GPU pool's
    GPUs (its CPU and memory follow them), a CPU pool's cpu and memory, each with the type it
    assumed; the line the scheduling rehearsal prints per pool. None: no figure (unbounded or
    nodes unknown)."""
    kinds = (GPU,) if pool.gpus_per_node else ("cpu", "memory")
    unit = {GPU: " GPUs", "cpu": " cores", "memory": ""}
    parts = []
    for r in kinds:
        cap = pool_capacity(pool, r)
        if cap is None:
            return None
        name = "" if r == GPU else f"{r} "
        parts.append(f"{name}{figure(r, cap)}{unit[r]} ({held_words(pool, r)})")
    return "; ".join(parts)


def per_gpu(pool: PoolFacts) -> dict[str, Fraction] | None:
    """CPU and memory that come with one GPU of the pool. Bounded (`pool_capacity` known for
    all three): what the pool is sure to hold over the GPUs it is sure to hold, so that every
    GPU of the pool can be guaranteed or shared with its part and the parts add up to no more
    than the pool holds whatever types Karpenter launches (an l4-pool of g6.12xlarge and
    g6.48xlarge under `limits.gpus: 24`: 24 GPUs and 6 x 47520m, 11880m a GPU, not the
    g6.48xlarge's 23895m, which left the GPUs no team is guaranteed 46 cores for 14 GPUs).
    Unbounded: what a node leaves to pods after the kubelet and the DaemonSets, over its GPUs,
    the most over the pool's types (nothing caps it; any pod sized for its GPUs fits;
    trainforge.jobs.capacity). None when the nodes are unknown."""
    rooms = [r for r in capacity.rooms(pool) if r.node.gpus]
    if not rooms:
        return None
    gpus = pool_capacity(pool, GPU)
    held = {r: pool_capacity(pool, r) for r in ("cpu", "memory")}
    if gpus and all(v is not None for v in held.values()):
        return {r: v / gpus for r, v in held.items() if v is not None}
    return {
        "cpu": max(Fraction(r.cpu_m, 1000) / r.node.gpus for r in rooms),
        "memory": max(Fraction(r.memory_mib * 2**20) / r.node.gpus for r in rooms),
    }


def _holds(pool: PoolFacts, resource: str) -> Fraction | None:
    """What the pool can hold of `resource` as quota: its capacity; in a GPU pool, CPU and
    memory no more than what comes with all of its GPUs (when both are known)."""
    cap = pool_capacity(pool, resource)
    if resource == GPU:
        return cap if pool.gpus_per_node else Fraction(0)
    gpus = pool_capacity(pool, GPU) if pool.gpus_per_node else None
    each = per_gpu(pool) if pool.gpus_per_node else None
    if gpus is not None and each is not None:
        follow = _round_up(resource, each[resource] * gpus)
        cap = follow if cap is None else min(cap, follow)
    return cap


def _share(total: Fraction, weights: dict[str, Fraction], resource: str) -> dict[str, Fraction]:
    """`total` split in proportion to `weights`, in whole units of the resource (GPUs,
    millicores, MiB), the remainder to the largest fractions first (so the parts add up)."""
    unit = _UNIT[resource]
    units = total // unit
    weight = sum(weights.values(), Fraction(0))
    if not weights or not weight:
        return {n: Fraction(0) for n in weights}
    exact = {n: units * w / weight for n, w in weights.items()}
    out = {n: int(v) for n, v in exact.items()}
    left = int(units) - sum(out.values())
    for n in sorted(exact, key=lambda n: (-(exact[n] - int(exact[n])), list(weights).index(n)))[
        :left
    ]:
        out[n] += 1
    return {n: v * unit for n, v in out.items()}


@dataclass(frozen=True)
class QuotaPlan:
    """Every team's nominal quota per pool, what each cohort shares beyond them, and the
    warnings the split gave (a key, what it asks, what the pools can hold)."""

    nominal: dict[str, dict[str, dict[str, Fraction]]]  # team -> pool -> resource
    shared: dict[str, dict[str, dict[str, Fraction]]]  # cohort -> pool -> resource
    warnings: tuple[str, ...] = ()


def _asked(team: TeamConfig, pools: list[PoolFacts], gpus: dict[str, Fraction] | None):
    """pool -> resource -> what the team asks of the pool before other teams are counted.
    With `gpus` (its GPUs per pool after the pools' limits), the CPU and memory of its GPU
    pools follow those GPUs."""
    explicit = dict(team.quota.pools)
    totals = {r: parse_quantity(getattr(team.quota, CONFIG_KEY[r])) for r in COVERED}
    out: dict[str, dict[str, Fraction]] = {p.name: {} for p in pools}
    # GPUs over the GPU pools, cpu/memory over the CPU pools: what quota.pools does not say
    for r, eligible in (
        (GPU, [p for p in pools if p.gpus_per_node]),
        ("cpu", [p for p in pools if not p.gpus_per_node]),
        ("memory", [p for p in pools if not p.gpus_per_node]),
    ):
        given = {
            p.name: parse_quantity(v)
            for p in eligible
            if p.name in explicit and (v := getattr(explicit[p.name], CONFIG_KEY[r])) is not None
        }
        free = [p for p in eligible if p.name not in given]
        caps = {p.name: _holds(p, r) for p in free}
        bounded = [c for c in caps.values() if c is not None]
        fallback = max(bounded, default=Fraction(1)) or Fraction(1)
        weights = {n: (c if c is not None else fallback) for n, c in caps.items()}
        rest = max(totals[r] - sum(given.values(), Fraction(0)), Fraction(0))
        parts = _share(rest, weights, r)
        for p in eligible:
            out[p.name][r] = given.get(p.name, parts.get(p.name, Fraction(0)))
    for p in pools:
        mine = out[p.name]
        if not p.gpus_per_node:
            mine[GPU] = Fraction(0)
            continue
        each = per_gpu(p)
        held = (gpus or {}).get(p.name, mine[GPU])
        for r in ("cpu", "memory"):
            value = getattr(explicit[p.name], CONFIG_KEY[r]) if p.name in explicit else None
            if value is not None:
                mine[r] = parse_quantity(value)
            else:
                mine[r] = totals[r] if each is None else _round_up(r, each[r] * held)
    return out


def _fit(
    asked: dict[str, dict[str, dict[str, Fraction]]], pools: list[PoolFacts], resources
) -> dict[str, dict[str, dict[str, Fraction]]]:
    """Each pool's asks scaled down, in proportion, where together they exceed what it holds."""
    out = {t: {p: dict(rs) for p, rs in per.items()} for t, per in asked.items()}
    for p in pools:
        for r in resources:
            cap = _holds(p, r)
            total = sum((asked[t][p.name][r] for t in asked), Fraction(0))
            if cap is None or total <= cap:
                continue
            parts = _share(cap, {t: asked[t][p.name][r] for t in asked}, r)
            for t in asked:
                out[t][p.name][r] = parts[t]
    return out


Split = dict[str, dict[str, dict[str, Fraction]]]  # team -> pool -> resource


def _split(teams: list[TeamConfig], pools: list[PoolFacts]) -> tuple[Split, Split]:
    """What each team asks of each pool (GPUs before any pool's limit), and its nominal quota
    there: GPUs first (split, then fitted to each pool), then the CPU and memory that follow
    them and those of the CPU pools (fitted too)."""
    first = {t.name: _asked(t, pools, None) for t in teams}
    gpus = _fit(first, pools, (GPU,))
    asked = {
        t.name: _asked(t, pools, {p: rs[GPU] for p, rs in gpus[t.name].items()}) for t in teams
    }
    for t in teams:
        for p in pools:
            asked[t.name][p.name][GPU] = gpus[t.name][p.name][GPU]
    nominal = _fit(asked, pools, ("cpu", "memory"))
    for t in teams:
        for p in pools:
            asked[t.name][p.name][GPU] = first[t.name][p.name][GPU]
    return asked, nominal


def _eligible(pools: list[PoolFacts], resource: str) -> list[PoolFacts]:
    """The pools a team's total of `resource` is split over: GPUs over the GPU pools, CPU and
    memory over the CPU pools."""
    return [p for p in pools if bool(p.gpus_per_node) == (resource == GPU)]


def _over_asked(teams, pools, asked: Split, nominal: Split, resource: str) -> list[PoolFacts]:
    """The pools `_fit` scaled `resource` down in, when the pools together hold all that the
    teams ask (else the cause is the total, and the warnings say so)."""
    eligible = _eligible(pools, resource)
    holds = [_holds(p, resource) for p in eligible]
    want = sum((parse_quantity(getattr(t.quota, CONFIG_KEY[resource])) for t in teams), Fraction(0))
    if any(h is None for h in holds) or sum(holds, Fraction(0)) < want:
        return []
    return [
        p
        for p in eligible
        if any(nominal[t.name][p.name][resource] < asked[t.name][p.name][resource] for t in teams)
    ]


_WHOLE = {"cpu": Fraction(1), "memory": Fraction(2**30), GPU: Fraction(1)}


def _parts(teams, asked: Split, pool: PoolFacts, resource: str):
    """The teams whose part of `pool` is a share of their total, given an explicit part: what
    the explicit asks leave, split as their shares, in whole cores, Gi or GPUs. `(teams
    changed, [(key, value)])`; None when there is no share or the explicit asks alone are
    too many."""
    key = CONFIG_KEY[resource]
    explicit = {t.name for t in teams if getattr(dict(t.quota.pools).get(pool.name), key, None)}
    shares = {
        t.name: asked[t.name][pool.name][resource]
        for t in teams
        if t.name not in explicit and asked[t.name][pool.name][resource] > 0
    }
    cap = _holds(pool, resource) or Fraction(0)
    left = cap - sum((asked[t][pool.name][resource] for t in explicit), Fraction(0))
    if not shares or left < 0:
        return None
    whole = _WHOLE[resource]
    parts = {n: v // whole * whole for n, v in _share(left, shares, resource).items()}
    changed, fix = [], []
    for i, t in enumerate(teams):
        if t.name in parts:
            value = format_quantity(resource, parts[t.name])
            given = dict(t.quota.pools).get(pool.name, PoolQuota())
            split = {**dict(t.quota.pools), pool.name: given.model_copy(update={key: value})}
            t = t.model_copy(
                update={"quota": t.quota.model_copy(update={"pools": tuple(split.items())})}
            )
            fix.append((f"trainforge:teams[{i}].quota.pools.{pool.name}.{key}", value))
        changed.append(t)
    return changed, fix


def _settle(teams, pools, resource: str) -> list[tuple[str, str]] | None:
    """Explicit parts (`_parts`) for each pool still over-asked, one pool at a time, until
    every team is guaranteed its total (`_guaranteed`); None when that does not come."""
    fix: list[tuple[str, str]] = []
    for _ in _eligible(pools, resource):
        asked, nominal = _split(teams, pools)
        if _guaranteed(teams, pools, resource):
            return fix
        over = [
            p
            for p in _eligible(pools, resource)
            if any(nominal[t.name][p.name][resource] < asked[t.name][p.name][resource]
                   for t in teams)
        ]  # fmt: skip
        got = _parts(teams, asked, over[0], resource) if over else None
        if got is None:
            return None
        teams, more = got
        fix.extend(more)
    return fix if _guaranteed(teams, pools, resource) else None


def _pool_fix(teams, pools, asked: Split, pool: PoolFacts, resource: str) -> list[tuple[str, str]]:
    """`(key, value)` changes after which no team asks more of `pool` than it holds and every
    team is guaranteed its totals: the teams whose part there is a share of their total get an
    explicit part (`_parts`), the rest of their totals going to the other pools; where the
    pools together hold less than the teams ask, one team's total lowered by the excess too
    (the first, in config order, after which explicit parts of the pools still over-asked
    re-plan clean: `_settle`). Tried against `_split`; [] when it does not work (the explicit
    asks alone are too many, or the other pools are full)."""
    key = CONFIG_KEY[resource]
    got = _parts(teams, asked, pool, resource)
    if got is None:
        return []
    changed, fix = got
    if _guaranteed(changed, pools, resource):
        return fix
    holds = [_holds(p, resource) for p in _eligible(pools, resource)]
    if any(h is None for h in holds):
        return []
    excess = sum((parse_quantity(getattr(t.quota, key)) for t in teams), Fraction(0)) - sum(
        holds, Fraction(0)
    )
    if excess <= 0:
        return []
    for i, t in enumerate(changed):
        lower = parse_quantity(getattr(t.quota, key)) - excess
        if lower < 0:
            continue
        value = format_quantity(resource, lower)
        less = t.model_copy(update={"quota": t.quota.model_copy(update={key: value})})
        more = _settle([less if x.name == t.name else x for x in changed], pools, resource)
        if more is not None:
            return [*fix, (f"trainforge:teams[{i}].quota.{key}", value), *more]
    return []


def _guaranteed(teams: list[TeamConfig], pools: list[PoolFacts], resource: str) -> bool:
    """Whether every team is guaranteed its whole total of `resource` (`_split`): then no
    part of it was scaled down anywhere, so the plan gives no warning of it."""
    _, after = _split(teams, pools)
    key = CONFIG_KEY[resource]
    for t in teams:
        want = parse_quantity(getattr(t.quota, key))
        got = sum(
            (after[t.name][p.name][resource] for p in _eligible(pools, resource)), Fraction(0)
        )
        if got < want:
            return False
    return True


def _asks(teams, asked: Split, nominal: Split, pool: PoolFacts, r: str):
    """Each team's ask of `pool` and where it comes from (`team nlp 12
    (quota.pools.h100.gpus)`), what each is guaranteed there (`nlp 11`), and the asks' sum."""
    key, f = CONFIG_KEY[r], format_quantity
    asks, gets = [], []
    for t in teams:
        a = asked[t.name][pool.name][r]
        if not a:
            continue
        mine = getattr(dict(t.quota.pools).get(pool.name), key, None)
        why = (
            f"quota.pools.{pool.name}.{key}"
            if mine
            else f"its share of quota.{key} {getattr(t.quota, key)}"
        )
        asks.append(f"team {t.name} {f(r, a)} ({why})")
        gets.append(f"{t.name} {f(r, nominal[t.name][pool.name][r])}")
    return asks, gets, sum((asked[t.name][pool.name][r] for t in teams), Fraction(0))


def _keep_fix(teams, pools, resource: str) -> list[tuple[str, str]]:
    """`(key, value)` changes that make what each team is guaranteed now what it asks: an
    explicit part per pool it holds `resource` in, and its total their sum. Every pool then
    holds what is asked of it, so it re-plans clean (checked against `_split`); [] if not."""
    key = CONFIG_KEY[resource]
    _, nominal = _split(teams, pools)
    changed, fix = [], []
    for i, t in enumerate(teams):
        given = dict(t.quota.pools)
        for p in _eligible(pools, resource):
            now = getattr(given.get(p.name), key, None)
            held = nominal[t.name][p.name][resource]
            if held == 0 and now is None:
                continue
            value = format_quantity(resource, held)
            if now is None or parse_quantity(str(now)) != held:
                part = given.get(p.name, PoolQuota()).model_copy(update={key: value})
                given[p.name] = part
                fix.append((f"trainforge:teams[{i}].quota.pools.{p.name}.{key}", value))
        total = sum((nominal[t.name][p.name][resource] for p in _eligible(pools, resource)),
                    Fraction(0))  # fmt: skip
        quota_ = t.quota.model_copy(update={"pools": tuple(given.items())})
        if total != parse_quantity(getattr(t.quota, key)):
            quota_ = quota_.model_copy(update={key: format_quantity(resource, total)})
            fix.append((f"trainforge:teams[{i}].quota.{key}", format_quantity(resource, total)))
        changed.append(t.model_copy(update={"quota": quota_}))
    return fix if fix and _guaranteed(changed, pools, resource) else []


def _fix_words(teams, pools, asked: Split, pool: PoolFacts, r: str) -> str:
    """The fix of an over-asked pool (`_pool_fix`); where no split of the asks ends it, the
    asks lowered to what each team is guaranteed (`_keep_fix`), both re-planned clean."""
    key = CONFIG_KEY[r]
    fix = _pool_fix(teams, pools, asked, pool, r)
    if fix:
        return "set " + " and ".join(f"{k} to {v}" for k, v in fix)
    keep = _keep_fix(teams, pools, r)
    if keep:
        return "ask what each team is guaranteed now: set " + " and ".join(
            f"{k} to {v}" for k, v in keep
        )
    return f"ask less of pool {pool.name} (quota.pools.{pool.name}.{key}) or raise its limits"


def _part_warning(teams, pools, asked: Split, nominal: Split, t, pool: PoolFacts, r: str) -> str:
    """Team `t`'s explicit part of `pool` was scaled down while the pools together hold less
    than the teams ask (so no pool warning names the pool): why (the teams' asks of the pool,
    each with where it comes from), what each is guaranteed there, and a fix that re-plans
    clean (`_pool_fix`)."""
    key, f = CONFIG_KEY[r], format_quantity
    i = [x.name for x in teams].index(t.name)
    asks, gets, total = _asks(teams, asked, nominal, pool, r)
    eligible = _eligible(pools, r)
    holds = sum((_holds(p, r) or Fraction(0) for p in eligible), Fraction(0))
    want = sum((parse_quantity(getattr(x.quota, key)) for x in teams), Fraction(0))
    name = {"cpu": "cpu", "memory": "memory", GPU: "GPUs"}[r]
    kind = "GPU" if r == GPU else "CPU"
    value = getattr(dict(t.quota.pools)[pool.name], key)
    return (
        f"trainforge:teams[{i}].quota.pools.{pool.name}.{key}: {value} asked, but pool "
        f"{pool.name} holds {f(r, _holds(pool, r) or Fraction(0))} {name} "
        f"({held_words(pool, r)}) and the teams ask {f(r, total)} of it: {', '.join(asks)}; "
        f"each is guaranteed its part scaled to fit ({', '.join(gets)}), as the {kind} pools "
        f"({', '.join(p.name for p in eligible)}) hold {f(r, holds)} of the {f(r, want)} the "
        f"teams ask; fix: {_fix_words(teams, pools, asked, pool, r)}"
    )


def _applied(teams: list[TeamConfig], fix: list[tuple[str, str]]) -> list[TeamConfig]:
    """`teams` with `fix`'s `(key, value)` changes made (`trainforge:teams[i].quota.KEY`,
    `trainforge:teams[i].quota.pools.POOL.KEY`): what the user's config becomes when the fix
    is applied, so a fix made of several parts is tried as a whole."""
    teams = list(teams)
    for k, value in fix:
        head, _, rest = k.removeprefix("trainforge:teams[").partition("].quota.")
        i, t = int(head), teams[int(head)]
        if rest.startswith("pools."):
            pool, key = rest.removeprefix("pools.").rsplit(".", 1)
            given = dict(t.quota.pools)
            given[pool] = given.get(pool, PoolQuota()).model_copy(update={key: value})
            quota_ = t.quota.model_copy(update={"pools": tuple(given.items())})
        else:
            quota_ = t.quota.model_copy(update={rest: value})
        teams[i] = t.model_copy(update={"quota": quota_})
    return teams


def _pool_fix_words(teams, pools, asked: Split, pool: PoolFacts, over: list[str]) -> str:
    """One fix for pool `pool`, over-asked of each resource of `over` (a CPU pool: cpu and
    memory): each resource's fix (`_pool_fix`; else the asks lowered to what each team is
    guaranteed, `_keep_fix`) made on the config the fixes before it leave, and the whole
    tried against `_split`, so applying it ends every one of the pool's warnings (a fix per
    resource left the other's). One resource: `_fix_words`."""
    how = _pool_fix_once(teams, pools, asked, pool, over)
    if how.startswith("set "):
        keys = " and ".join(f"quota.{CONFIG_KEY[r]}" for r in over)
        how += f" (the rest of their {keys} goes to the other pools)"
    return how


def _pool_fix_once(teams, pools, asked: Split, pool: PoolFacts, over: list[str]) -> str:
    """`_pool_fix_words`' changes, said."""
    if len(over) == 1:
        return _fix_words(teams, pools, asked, pool, over[0])
    for make, words in (
        (lambda ts, r: _pool_fix(ts, pools, _split(ts, pools)[0], pool, r), "set "),
        (lambda ts, r: _keep_fix(ts, pools, r), "ask what each team is guaranteed now: set "),
    ):
        now, fix = list(teams), []
        for r in over:
            more = make(now, r)
            if not more:
                break
            now, fix = _applied(now, more), [*fix, *more]
        else:
            if all(_guaranteed(now, pools, r) for r in over):
                return words + " and ".join(f"{k} to {v}" for k, v in fix)
    asks = ", ".join(f"quota.pools.{pool.name}.{CONFIG_KEY[r]}" for r in over)
    return f"ask less of pool {pool.name} ({asks}) or raise its limits"


def _pool_warning(
    teams, pools, asked: Split, nominal: Split, pool: PoolFacts, r: str, how: str
) -> str:
    """Pool `pool` over-asked of `r`: what it holds, each team's ask there and where the ask
    comes from, what each is guaranteed, what the other pools keep, and `how`, the pool's one
    fix (`_pool_fix_words`), which ends this warning and the pool's other one."""
    f = format_quantity
    cap = _holds(pool, r) or Fraction(0)
    asks, gets, total = _asks(teams, asked, nominal, pool, r)
    spare = []
    for p in _eligible(pools, r):
        free = (_holds(p, r) or Fraction(0)) - sum(
            (nominal[t.name][p.name][r] for t in teams), Fraction(0)
        )
        if p.name != pool.name and free > 0:
            spare.append(f"{p.name} keeps {f(r, free)}")
    keeps = f", while {', '.join(spare)} unguaranteed" if spare else ""
    name = {"cpu": "cpu", "memory": "memory", GPU: "GPUs"}[r]
    return (
        f"pool {pool.name} holds {f(r, cap)} {name} for pods ({held_words(pool, r)}), "
        f"but they ask {f(r, total)} of it: {', '.join(asks)}; each is guaranteed its part "
        f"scaled down ({', '.join(gets)}){keeps}; fix: {how}"
    )


def _total_fix_words(teams: list[TeamConfig], pools: list[PoolFacts], i: int, r: str) -> str:
    """The fix of team `i`'s total of `r` that the pools together cannot guarantee: its own
    total lowered by what the teams ask beyond what the pools hold, with explicit parts for any
    pool still over-asked (`_settle`), so every team is then guaranteed its total; where that
    does not re-plan clean, every team's asks lowered to what it is guaranteed (`_keep_fix`).
    Both tried against `_split`, as the pool warnings' fixes are."""
    key, t = CONFIG_KEY[r], teams[i]
    holds = [_holds(p, r) for p in _eligible(pools, r)]
    if all(h is not None for h in holds):
        want = sum((parse_quantity(getattr(x.quota, key)) for x in teams), Fraction(0))
        lower = parse_quantity(getattr(t.quota, key)) - (want - sum(holds, Fraction(0)))
        if lower >= 0:
            value = format_quantity(r, lower)
            less = _applied(teams, [(f"trainforge:teams[{i}].quota.{key}", value)])
            more = _settle(less, pools, r)
            if more is not None:
                changes = [(f"trainforge:teams[{i}].quota.{key}", value), *more]
                return "set " + " and ".join(f"{k} to {v}" for k, v in changes)
    keep = _keep_fix(teams, pools, r)
    if keep:
        return "ask what each team is guaranteed now: set " + " and ".join(
            f"{k} to {v}" for k, v in keep
        )
    kind = "GPU" if r == GPU else "CPU"
    return f"ask less (quota.{key}) or raise the {kind} pools' limits"


def _takers(teams: list[TeamConfig], pool: PoolFacts) -> list[TeamConfig]:
    """The teams that could use a share of `pool` no team is guaranteed: a team borrows it
    whole or not at all (a GPU with its CPU and memory in a GPU pool, CPU with memory in a CPU
    pool), so a borrowingLimit of 0 on any of the pool's resources leaves it out."""
    needs = COVERED if pool.gpus_per_node else ("cpu", "memory")
    return [t for t in teams if all(borrowing_limits(t)[r] != 0 for r in needs)]


def _cohort_shares(
    teams: list[TeamConfig], pools: list[PoolFacts], nominal: Split
) -> tuple[Split, list[str]]:
    """cohort -> pool -> resource: what no team is guaranteed in each pool, shared out among
    the cohorts whose teams could borrow it (`_takers`), and a warning per pool where none
    could (that capacity is nobody's: Kueue admits no pod to it).

    Why one set of weights per pool, not one per resource: Kueue admits a pod only if every
    resource it requests fits (kueue v0.19.2 pkg/scheduler/flavorassigner), so a cohort given
    a pool's GPUs but not the CPU and memory that come with them, or the reverse, can use none
    of it. The weights are the takers' guarantees of the pool's leading resource (GPUs in a
    GPU pool, CPU in a CPU pool; evenly where none has one), and CPU and memory follow them."""
    shared: Split = {}
    warnings: list[str] = []
    cohorts = sorted({t.cohort for t in teams})
    for p in pools:
        lead = GPU if p.gpus_per_node else "cpu"
        takers = _takers(teams, p)
        weights = {
            c: sum((nominal[t.name][p.name][lead] for t in takers if t.cohort == c), Fraction(0))
            for c in cohorts
        }
        if not any(weights.values()):
            weights = {c: Fraction(any(t.cohort == c for t in takers)) for c in cohorts}
        for r in COVERED:
            cap = _holds(p, r)
            if cap is None:
                continue
            left = max(
                cap - sum((nominal[t.name][p.name][r] for t in teams), Fraction(0)), Fraction(0)
            )
            for c, v in _share(left, weights, r).items():
                shared.setdefault(c, {}).setdefault(p.name, {})[r] = v
            if r == lead and left > 0 and teams and not takers:
                warnings.append(_stranded_warning(teams, pools, p, r, left))
    return shared, warnings


def _stranded_warning(
    teams: list[TeamConfig], pools: list[PoolFacts], pool: PoolFacts, r: str, left: Fraction
) -> str:
    """Pool `pool` has `left` of `r` no team is guaranteed and no team may borrow: what holds
    each team back (its quota.borrowingLimit keys at 0) and the changes that end it."""
    needs = COVERED if pool.gpus_per_node else ("cpu", "memory")
    zero = [
        [f"{team_key(teams, t.name)}.quota.borrowingLimit.{CONFIG_KEY[x]}" for x in needs
         if borrowing_limits(t)[x] == 0]
        for t in teams
    ]  # fmt: skip
    held = [f"{k} is 0" for keys in zero for k in keys]
    name = "GPUs (with their CPU and memory)" if r == GPU else "CPU (with its memory)"
    return (
        f"pool {pool.name}: {format_quantity(r, left)} {name} are guaranteed to no team and no "
        f"team may borrow them ({', '.join(held)}), so Kueue admits no pod to them; fix: "
        f"unset {' and '.join(zero[0])} (then that team's cohort may borrow them), or "
        f"guarantee them to a team (quota.pools.{pool.name}.{CONFIG_KEY[r]})"
    )


def quota_plan(teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]) -> QuotaPlan:
    """The guarantees of all teams at once (`_split`), what each cohort shares beyond them,
    and a warning per over-asked pool, or per team where the pools together hold too little."""
    teams, pools = list(teams), list(pools)
    asked, nominal = _split(teams, pools)
    over = {r: _over_asked(teams, pools, asked, nominal, r) for r in COVERED}
    fixes = {
        p.name: _pool_fix_words(teams, pools, asked, p, [r for r in COVERED if p in over[r]])
        for p in {p.name: p for r in COVERED for p in over[r]}.values()
    }
    warnings = [
        _pool_warning(teams, pools, asked, nominal, p, r, fixes[p.name])
        for r in COVERED
        for p in over[r]
    ]
    for i, t in enumerate(teams):
        where = f"trainforge:teams[{i}].quota"
        for r in COVERED:
            key = CONFIG_KEY[r]
            eligible = _eligible(pools, r)
            if not eligible or over[r]:
                continue
            want = parse_quantity(getattr(t.quota, key))
            got = sum((nominal[t.name][p.name][r] for p in eligible), Fraction(0))
            holds = [_holds(p, r) for p in eligible]
            if got < want:
                room = (
                    format_quantity(r, sum(holds, Fraction(0)))
                    if all(h is not None for h in holds)
                    else "less"
                )
                kind = "GPU" if r == GPU else "CPU"
                # with no other team, no one is guaranteed the rest: it is not there to borrow
                rest = (
                    "the rest only while other teams leave it idle"
                    if len(teams) > 1
                    else "the pools hold no more"
                )
                warnings.append(
                    f"{where}.{key}: {getattr(t.quota, key)} asked, but the {kind} pools "
                    f"({', '.join(p.name for p in eligible)}) hold {room} shared by "
                    f"{len(teams)} team(s): team {t.name} is guaranteed "
                    f"{format_quantity(r, got)}; {rest}; "
                    f"fix: {_total_fix_words(teams, pools, i, r)}"
                )
        for pname, given in t.quota.pools:
            p = next((x for x in pools if x.name == pname), None)
            if p is None:
                continue
            for r in COVERED:
                value = getattr(given, CONFIG_KEY[r])
                if value is None or (r == GPU and not p.gpus_per_node) or p in over[r]:
                    continue
                if nominal[t.name][pname][r] < parse_quantity(value):
                    warnings.append(_part_warning(teams, pools, asked, nominal, t, p, r))
    shared, stranded = _cohort_shares(teams, pools, nominal)
    warnings.extend(stranded)
    return QuotaPlan(nominal, shared, tuple(warnings))


def nominal_quotas(
    team: TeamConfig, pools: Iterable[PoolFacts], teams: Iterable[TeamConfig] | None = None
) -> dict[str, dict[str, Fraction]]:
    """pool -> resource -> the team's nominal (guaranteed) quota there, given all `teams`
    (by default the team alone): its part of `quota_plan`."""
    teams = list(teams) if teams is not None else [team]
    if all(t.name != team.name for t in teams):
        teams.append(team)
    return quota_plan(teams, pools).nominal[team.name]


def borrowing_limits(team: TeamConfig) -> dict[str, Fraction | None]:
    lim = team.quota.borrowing_limit
    return {
        r: (parse_quantity(v) if (v := getattr(lim, CONFIG_KEY[r])) is not None else None)
        for r in COVERED
    }


def team_total(
    team: TeamConfig, pools: Iterable[PoolFacts], teams: Iterable[TeamConfig] | None = None
) -> dict[str, Fraction]:
    """What the team is guaranteed at once over all pools, per resource: the sum of its
    nominal quotas (`quota_plan`), given all `teams`."""
    pools = list(pools)
    nominal = nominal_quotas(team, pools, teams)
    return {r: sum((nominal[p.name][r] for p in pools), Fraction(0)) for r in COVERED}


def lendable(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, dict[str, Fraction]]:
    """pool -> resource -> what the team's cohort could ever lend it there: the other
    members' nominal quotas and the cohort's own share of the pool."""
    teams, pools = list(teams), list(pools)
    if all(t.name != team.name for t in teams):
        teams.append(team)
    plan = quota_plan(teams, pools)
    shared = plan.shared.get(team.cohort, {})
    out: dict[str, dict[str, Fraction]] = {}
    for p in pools:
        out[p.name] = {
            r: shared.get(p.name, {}).get(r, Fraction(0))
            + sum(
                (
                    plan.nominal[t.name][p.name][r]
                    for t in teams
                    if t.cohort == team.cohort and t.name != team.name
                ),
                Fraction(0),
            )
            for r in COVERED
        }
    return out


def pool_room(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, dict[str, Fraction]]:
    """pool -> resource -> the most the team's ClusterQueue may hold in the pool with all else
    idle: its nominal quota there plus what its cohort could lend it there, no more than its
    borrowing limit (Kueue's `PotentialAvailable`, trainforge.plan.kueue.quota). Kueue puts
    each of a job's pod sets in one flavor, so this, not the namespace's total, is the most a
    job in the pool may ever get."""
    teams, pools = list(teams), list(pools)
    nominal = nominal_quotas(team, pools, teams)
    lend = lendable(team, teams, pools)
    limits = borrowing_limits(team)
    out: dict[str, dict[str, Fraction]] = {}
    for p in pools:
        out[p.name] = {}
        for r in COVERED:
            borrow = lend[p.name][r]
            if limits[r] is not None:
                borrow = min(borrow, limits[r])
            out[p.name][r] = nominal[p.name][r] + borrow
    return out


def admissible_max(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, Fraction]:
    """The most the team may hold at once, per resource, over all pools: the sum of its
    `pool_room`. The namespace's ResourceQuota is set to this: the hard backstop for what the
    queue does not see, which never refuses a pod its queue admitted."""
    room = pool_room(team, teams, pools)
    return {r: sum((per[r] for per in room.values()), Fraction(0)) for r in COVERED}


def namespace_quota(
    team: TeamConfig,
    teams: Iterable[TeamConfig],
    pools: Iterable[PoolFacts],
    kueue_enabled: bool = True,
) -> dict[str, str]:
    """The team's namespace limits for gpus/cpu/memory (its ResourceQuota, and what a single
    job is checked against at preview): the team's total over its pools (`team_total`: CPU
    and memory follow the GPUs), and with Kueue also what it may borrow from its cohort
    (`admissible_max`). The hard backstop for what the queue does not see."""
    pools = list(pools)
    q = team.quota
    if not pools:
        return {"gpus": q.gpus, "cpu": q.cpu, "memory": q.memory}
    teams = list(teams)
    most = admissible_max(team, teams, pools) if kueue_enabled else team_total(team, pools, teams)
    return {CONFIG_KEY[r]: format_quantity(r, most[r]) for r in COVERED}


# --- the keys that lift a team's quota -----------------------------------------------------


@dataclass(frozen=True)
class QuotaInputs:
    """What team `team`'s quota is computed from, as data: every team's quota config (the
    pools are split between all of them), every pool in the config's order (Karpenter
    `limits`, a node group's `max_nodes` of its largest type, the CPU and memory per GPU) and
    whether Kueue lets it borrow. The platform publishes it on `TeamFacts.quota_inputs`;
    `held` and `quota_raise` read it with the platform's own arithmetic."""

    team: str
    teams: tuple[TeamConfig, ...]
    pools: tuple[PoolFacts, ...]
    kueue: bool

    def held(self) -> dict[str, str]:
        """The team's namespace quota (`namespace_quota`)."""
        me = next(t for t in self.teams if t.name == self.team)
        return namespace_quota(me, self.teams, self.pools, self.kueue)

    def room(self, pool: str) -> dict[str, Fraction] | None:
        """By key (gpus, cpu, memory): the most a job in `pool` may ever get, with Kueue
        (`pool_room`); None without (the namespace quota is all)."""
        me = next(t for t in self.teams if t.name == self.team)
        if not self.kueue or all(p.name != pool for p in self.pools):
            return None
        room = pool_room(me, self.teams, self.pools)[pool]
        return {CONFIG_KEY[r]: v for r, v in room.items()}


@dataclass(frozen=True)
class Lift:
    """Stack changes after which the quota model gives a team what a job needs: `(key, now,
    to)` each. `per_gpu`: set where cpu/memory of a GPU pool is lifted through its GPUs (what
    one GPU brings there; docs/teams.md: they follow the GPUs)."""

    changes: tuple[tuple[str, str, str], ...]
    per_gpu: Fraction | None = None


def team_key(teams: Iterable[TeamConfig], name: str) -> str:
    """`trainforge:teams[<index>]`: the stack's form of a list key (stack/base.py errors)."""
    return f"trainforge:teams[{[t.name for t in teams].index(name)}]"


def pool_key(pools: Iterable[PoolFacts], name: str) -> str:
    """`trainforge:nodePools[<index>]` or `trainforge:nodeGroups[<index>]`: the pool's key,
    its index among the pools of its kind in the config's order (as `pool_facts` lists them)."""
    pools = list(pools)
    p = next(x for x in pools if x.name == name)
    same = [x.name for x in pools if x.kind == p.kind]
    return (
        f"trainforge:{'nodeGroups' if p.kind == 'node-group' else 'nodePools'}[{same.index(name)}]"
    )


def node_most(pool: PoolFacts, r: str) -> Fraction:
    """The most of `r` one node of the pool has (what `pool_capacity` multiplies by maxSize)."""
    if r == GPU:
        return Fraction(max((n.gpus for n in pool.nodes), default=pool.gpus_per_node))
    if r == "cpu":
        return Fraction(max((n.vcpus for n in pool.nodes), default=pool.vcpus_per_node or 0))
    mib = max((n.memory_mib for n in pool.nodes), default=pool.memory_mib_per_node or 0)
    return Fraction(mib * 2**20)


Change = tuple[str, str, str]  # (key, now, to)


def _limits_for(pool: PoolFacts, r: str, target: Fraction) -> dict[str, Fraction]:
    """By resource: the least Karpenter `limits` (at least the pool's own, only those it sets)
    under which every type of the pool alone reaches `target` of `r` for pods (`assumed`
    counts the worst): ceil(target / what a node leaves) whole nodes, each counted at its
    whole capacity against every limit (`limit_nodes`)."""
    lim = packing.limits_of(pool)
    want = dict(lim)
    for _, room in limit_nodes(pool) or ():
        per = _in_room(room, r)
        if not per:
            continue
        nodes = math.ceil(target / per)
        for k, v in packing.capacity_of(room.node).items():
            if k in want:
                want[k] = max(want[k], nodes * v)
    return {k: v for k, v in want.items() if v > lim[k]}


def _pool_raise(
    pools: list[PoolFacts], p: PoolFacts, r: str, extra: Fraction, launch: Fraction
) -> tuple[tuple[Change, ...], PoolFacts] | None:
    """The pool's cap raised so that it holds `extra` more of `r` (`pool_capacity`), its own
    limit of `r` at least `launch` (what the job's NodeClaims count against it, or a node
    group's nodes it needs): a Karpenter pool's `limits`, every one that would stop the nodes
    first (a GPU pool's `limits.cpu` too where it caps the nodes before `limits.gpus`), or a
    node group's `maxSize` (nodes of the type `pool_capacity` counts); None where it has no
    cap."""
    key = pool_key(pools, p.name)
    cap = pool_capacity(p, r)
    lim = packing.limits_of(p)
    if p.kind == "karpenter" and lim:
        if cap is not None and limit_nodes(p):
            want = _limits_for(p, r, cap + extra)
        else:  # nodes unknown: its own limit, by `extra`
            want = {r: lim[r] + extra} if r in lim else {}
        if r in lim and launch > max(want.get(r, Fraction(0)), lim[r]):
            want[r] = launch
        if not want:
            return None
        changes, limits = [], p.limits
        for k in (GPU, "cpu", "memory"):
            if k not in want:
                continue
            name = CONFIG_KEY[k]
            to = format_quantity(k, -(-want[k] // _WHOLE[k]) * _WHOLE[k])
            now = getattr(p.limits, name)
            changes.append((f"{key}.limits.{name}", str(now), to))
            limits = replace(limits, **{name: int(to) if k == GPU else to})
        return tuple(changes), replace(p, limits=limits)
    least = assumed(p, r)
    per = _in_room(least[1], r) if least is not None else node_most(p, r)
    if p.kind == "node-group" and p.max_nodes is not None and per and cap is not None:
        most = node_most(p, r) or per
        nodes = max(math.ceil((cap + extra) / per), math.ceil(launch / most))
        return ((f"{key}.maxSize", str(p.max_nodes), str(nodes)),), replace(p, max_nodes=nodes)
    return None


def _team_raises(
    teams: list[TeamConfig],
    team: TeamConfig,
    pools: list[PoolFacts],
    p: PoolFacts,
    r: str,
    extra: Fraction,
    part: bool,
) -> list[tuple[tuple[tuple[str, str, str], ...], TeamConfig]]:
    """The team's own keys raised so that it asks `extra` more of `r` in pool `p`: its total
    `quota.<r>` alone (where `quota.pools` does not fix its part of `p`), and with `part` its
    part of `p` (`quota.pools.<p>.<r>`) with the total by as much, so that its other pools
    keep theirs (the totals bound the parts: TeamQuotaConfig)."""
    key, tkey = CONFIG_KEY[r], team_key(teams, team.name)
    now = getattr(team.quota, key)
    total = format_quantity(r, _round_up(r, parse_quantity(now) + extra))
    raised = team.quota.model_copy(update={key: total})
    out = []
    explicit = dict(team.quota.pools)
    mine = explicit.get(p.name)
    given = getattr(mine, key) if mine is not None else None
    if given is not None and r != GPU and p.gpus_per_node:
        # set in a GPU pool, its cpu/memory follows no GPU and no total (`_asked`): it alone
        to = format_quantity(r, _round_up(r, parse_quantity(given) + extra))
        pools_ = {**explicit, p.name: mine.model_copy(update={key: to})}
        raised = team.quota.model_copy(update={"pools": tuple(pools_.items())})
        change = ((f"{tkey}.quota.pools.{p.name}.{key}", str(given), to),)
        return [(change, team.model_copy(update={"quota": raised}))]
    if given is None:
        out.append(
            (((f"{tkey}.quota.{key}", now, total),), team.model_copy(update={"quota": raised}))
        )
    if not part:
        return out
    ask = _asked(team, pools, None)[p.name][r]
    now_part = f"unset ({format_quantity(r, ask)} by the split)" if given is None else str(given)
    to = format_quantity(r, _round_up(r, ask + extra))
    explicit[p.name] = (mine or PoolQuota()).model_copy(update={key: to})
    raised = raised.model_copy(update={"pools": tuple(explicit.items())})
    changes = (
        (f"{tkey}.quota.pools.{p.name}.{key}", now_part, to),
        (f"{tkey}.quota.{key}", now, total),
    )
    out.append((changes, team.model_copy(update={"quota": raised})))
    return out


def quota_raise(
    q: QuotaInputs,
    resource: str,
    need: Fraction,
    pool: str,
    launch: Mapping[str, Fraction] | None = None,
    also: Mapping[str, Fraction] | None = None,
) -> Lift | None:
    """The stack keys to raise so that the team may hold `need` of `resource` (gpus/cpu/memory)
    for a job in `pool`, each try checked against the model itself: with Kueue, what its
    ClusterQueue may hold in that pool (`pool_room`, from the same `quota_plan` the queues are
    rendered from), else its namespace quota. Tried: the team's quota (its total, or its part
    of the pool and the total with it), the cap of the pool (Karpenter `limits`, at least what
    the job's NodeClaims count against each, `launch` by gpus/cpu/memory; a node group's
    `maxSize`), both. A change that takes from another team's guarantee is no fix. CPU and
    memory of a GPU pool follow its GPUs: with Kueue, where no change of the resource itself
    lifts it, its GPUs are raised by what brings the rest. Then the team's borrowing limit
    alone (`_borrow`), then both together (`_raise_with_borrowing`), last the pool raised
    past what the other teams' asks take of it with the team's keys (`_raise_keys` `grow`).

    `also`: what the job needs of the other resources there (gpus/cpu/memory). Kueue admits
    a pod set only where every resource it requests fits the flavor (kueue v0.19.2
    pkg/scheduler/flavorassigner `fitsResourceQuota`, per resource), so each try must leave
    room for all of them: where one does not, the borrowing limits of those it leaves short
    are raised with it (`_borrow`), else the next try. None: no such change."""
    found = _quota_raise(q, resource, need, pool, launch, {**(also or {}), resource: need})
    return found.lift if found is not None else None


def _quota_raise(
    q: QuotaInputs,
    resource: str,
    need: Fraction,
    pool: str,
    launch: Mapping[str, Fraction] | None,
    needs: Mapping[str, Fraction],
    depth: int = 0,
) -> _Raised | None:
    """`quota_raise`'s tries, in its order, with the stack each makes."""
    found = _raise_keys(q, resource, need, pool, launch)
    if found is not None and (done := _complete(q, found, needs, pool, launch, depth)):
        return done
    alone = _borrow(q, needs, pool)
    if alone is not None and alone.lift.changes:
        return alone
    lifted = _raise_with_borrowing(q, resource, need, pool, launch, needs, depth)
    if lifted is not None:
        return lifted
    # last, the pool grown for the other teams' asks too: the largest change
    found = _raise_keys(q, resource, need, pool, launch, grow=True)
    return _complete(q, found, needs, pool, launch, depth) if found is not None else None


def _complete(
    q: QuotaInputs,
    found: _Raised,
    needs: Mapping[str, Fraction],
    pool: str,
    launch: Mapping[str, Fraction] | None,
    depth: int,
) -> _Raised | None:
    """`found`'s change where the stack it makes holds every one of `needs` in `pool`; else
    with the borrowing limits of those it leaves short raised too (`_borrow` on that stack);
    else with the first resource still short lifted on that stack by the same search (a job
    asking more CPU than its GPUs bring: the GPUs that bring it), up to one step per
    resource. None where that does not either."""
    after = QuotaInputs(q.team, found.teams, found.pools, q.kueue)
    more = _borrow(after, needs, pool)
    if more is None and depth < len(COVERED) - 1:
        held = after.room(pool) if q.kueue else None
        held = held or {k: parse_quantity(v) for k, v in after.held().items()}
        short = next(
            (k for k in ("gpus", "cpu", "memory") if needs.get(k, 0) > held.get(k, 0)), None
        )
        if short is not None:
            more = _quota_raise(after, short, needs[short], pool, launch, needs, depth + 1)
    if more is None:
        return None
    # a key raised twice: its first value before, its last after
    changes: dict[str, tuple[str, str]] = {}
    for key, now, to in (*found.lift.changes, *more.lift.changes):
        changes[key] = (changes[key][0] if key in changes else now, to)
    lift = Lift(tuple((k, now, to) for k, (now, to) in changes.items()), found.lift.per_gpu)
    return _Raised(lift, more.teams, more.pools)


def _raise_with_borrowing(
    q: QuotaInputs,
    resource: str,
    need: Fraction,
    pool: str,
    launch: Mapping[str, Fraction] | None,
    needs: Mapping[str, Fraction],
    depth: int = 0,
) -> _Raised | None:
    """Where neither the team's quota and the pool's cap nor its borrowing limit alone lift
    it: the quota raise `_raise_keys` finds with no borrowing limit of `resource`, then, on
    the stack so raised, the least borrowing limits `_borrow` finds (the raise alone may
    already be enough there: no limit change then). Why both: a pool too small for the job
    needs its cap raised, and what the raise adds to the pool goes to the cohort's share,
    which the team only reaches past its borrowing limit (Pulumi.pe3.yaml's research, 5 x 4
    GPUs in l40s: tests/plan/test_check_queues.py). Each step is checked against the model
    itself (`pool_room`); None where no combination does it."""
    teams = list(q.teams)
    team = next(t for t in teams if t.name == q.team)
    limit = team.quota.borrowing_limit
    if not q.kueue or getattr(limit, resource, None) is None:
        return None

    def with_limit(t: TeamConfig, lim: PoolQuota) -> tuple[TeamConfig, ...]:
        t = t.model_copy(update={"quota": t.quota.model_copy(update={"borrowing_limit": lim})})
        return tuple(t if x.name == t.name else x for x in teams)

    free = replace(q, teams=with_limit(team, limit.model_copy(update={resource: None})))
    found = _raise_keys(free, resource, need, pool, launch)
    if found is None:
        return None
    raised = next(t for t in found.teams if t.name == q.team)
    after = _Raised(found.lift, with_limit(raised, limit), found.pools)
    return _complete(q, after, needs, pool, launch, depth)


def borrow_raise(q: QuotaInputs, resource: str, need: Fraction, pool: str) -> Lift | None:
    """The team's `quota.borrowingLimit.<resource>` raised to the least value after which its
    ClusterQueue may hold `need` in `pool` (`_borrow` of that one need). None: no Kueue, no
    limit set, no raise needed, or the cohort cannot lend enough even without one."""
    found = _borrow(q, {resource: need}, pool)
    return found.lift if found is not None and found.lift.changes else None


def _borrow(q: QuotaInputs, needs: Mapping[str, Fraction], pool: str) -> _Raised | None:
    """The team's `quota.borrowingLimit` of each resource its ClusterQueue cannot hold
    `needs` (by gpus/cpu/memory) of in `pool` raised to the least value after which it can
    (`pool_room`, Kueue's PotentialAvailable: nominal plus what the cohort lends, within the
    limit): all of them, as Kueue checks every resource of the flavor. It takes no guarantee
    from another team (borrowed quota is reclaimable). No change where every need holds.
    None: one short with no Kueue or no limit to raise, or the cohort cannot lend enough even
    without the limits."""
    teams, pools = list(q.teams), list(q.pools)
    team = next(t for t in teams if t.name == q.team)
    if all(p.name != pool for p in pools):
        return None

    def limited(values: Mapping[str, Fraction | None]) -> list[TeamConfig]:
        lim = team.quota.borrowing_limit.model_copy(
            update={
                CONFIG_KEY[r]: None if v is None else format_quantity(r, v)
                for r, v in values.items()
            }
        )
        t = team.model_copy(
            update={"quota": team.quota.model_copy(update={"borrowing_limit": lim})}
        )
        return [t if x.name == t.name else x for x in teams]

    def room(ts: list[TeamConfig]) -> dict[str, Fraction]:
        if not q.kueue:
            held = QuotaInputs(q.team, tuple(ts), tuple(pools), False).held()
            return {r: parse_quantity(held[CONFIG_KEY[r]]) for r in COVERED}
        return pool_room(next(t for t in ts if t.name == q.team), ts, pools)[pool]

    want = {r: Fraction(needs.get(CONFIG_KEY[r], 0)) for r in COVERED}
    have = room(teams)
    short = [r for r in COVERED if want[r] > have[r]]
    if not short:
        return _Raised(Lift(()), tuple(teams), tuple(pools))
    # a short resource with no limit is short for want of a limit above 0 on another one
    # (the team is then no taker of the cohort's share): raised with them, or not at all
    now = borrowing_limits(team)
    raisable = [r for r in short if now[r] is not None]
    if not q.kueue or not raisable:
        return None
    # the bound is what the cohort lends a team with no limit of the short resources: at a
    # limit of 0 the team takes no part of what no team is guaranteed (`_takers`), so its
    # cohort's share of the pool would be left out of the bound and a raise that reaches it
    # never tried (Pulumi.bl.yaml: speech at 0 is lent nlp's 2 of t4-pool, at 5 also its
    # cohort's 3). Each limit is searched with the others' free; a limit raised from 0 to the
    # least that holds is above 0, so together they keep the team a taker as each was found.
    free: dict[str, Fraction | None] = {r: None for r in raisable}
    unbound = limited(free)
    if any(room(unbound)[r] < want[r] for r in short):
        return None
    me = next(t for t in unbound if t.name == q.team)
    high = lendable(me, unbound, pools)[pool]
    chosen: dict[str, Fraction | None] = {}
    for r in raisable:
        unit = _UNIT[r]
        lo, hi = int(now[r] // unit), max(math.ceil(high[r] / unit), int(now[r] // unit))
        while lo < hi:  # the least whole unit that holds it
            mid = (lo + hi) // 2
            holds = room(limited({**free, r: mid * unit}))[r] >= want[r]
            lo, hi = (lo, mid) if holds else (mid + 1, hi)
        chosen[r] = hi * unit
    after = limited(chosen)
    if any(room(after)[r] < want[r] for r in short):
        return None
    tkey = team_key(teams, team.name)
    changes = tuple(
        (
            f"{tkey}.quota.borrowingLimit.{CONFIG_KEY[r]}",
            str(getattr(team.quota.borrowing_limit, CONFIG_KEY[r])),
            format_quantity(r, chosen[r]),
        )
        for r in sorted(raisable, key=lambda r: (r != GPU, COVERED.index(r)))
    )
    return _Raised(Lift(changes), tuple(after), tuple(pools))


@dataclass(frozen=True)
class _Raised:
    """`_raise_keys`'s answer: the change, and the teams and pools it makes (what a further
    change is tried on: `_raise_with_borrowing`)."""

    lift: Lift
    teams: tuple[TeamConfig, ...]
    pools: tuple[PoolFacts, ...]


def _raise_keys(
    q: QuotaInputs,
    resource: str,
    need: Fraction,
    pool: str,
    launch: Mapping[str, Fraction] | None = None,
    grow: bool = False,
) -> _Raised | None:
    """`quota_raise`'s tries of the team's quota and the pool's cap; with `grow` also the
    pool raised past what the other teams' asks take of it (`grown`)."""
    teams, pools = list(q.teams), list(q.pools)
    launched = {r: Fraction((launch or {}).get(CONFIG_KEY[r], 0)) for r in COVERED}
    team = next(t for t in teams if t.name == q.team)
    r = next(r for r in COVERED if CONFIG_KEY[r] == resource)
    p = next((x for x in pools if x.name == pool), None)
    if p is None:
        return None

    def room_of(ts: list[TeamConfig], ps: list[PoolFacts], res: str) -> Fraction:
        if q.kueue:
            me = next(t for t in ts if t.name == q.team)
            return pool_room(me, ts, ps)[pool][res]
        held = QuotaInputs(q.team, tuple(ts), tuple(ps), False).held()
        return parse_quantity(held[CONFIG_KEY[res]])

    def room(ts: list[TeamConfig], ps: list[PoolFacts]) -> Fraction:
        return room_of(ts, ps, r)

    held = room(teams, pools)
    follows = r != GPU and bool(p.gpus_per_node)
    if need <= held:
        return None
    before = quota_plan(teams, pools).nominal

    def lifts(t: TeamConfig, ps: list[PoolFacts]) -> bool:
        ts = [t if x.name == t.name else x for x in teams]
        if room(ts, ps) < need:
            return False
        after = quota_plan(ts, ps).nominal
        return all(
            after[o.name][x.name][res] >= before[o.name][x.name][res]
            for o in teams
            if o.name != q.team
            for x in pools
            for res in COVERED
        )

    def fits(res: str, extra: Fraction, kind: int, ps: list[PoolFacts]):
        own = _team_raises(teams, team, pools, p, res, extra, part=res == GPU or not follows)
        if kind >= len(own) or not lifts(own[kind][1], ps):
            return None
        return own[kind]

    def least(res: str, extra: Fraction, kind: int, ps: list[PoolFacts]):
        """The team's change of `kind` by the least extra (whole units) that lifts it."""
        if fits(res, extra, kind, ps) is None:
            return None
        unit = _UNIT[res]
        low, high = 1, max(1, math.ceil(extra / unit))
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if fits(res, mid * unit, kind, ps) else (mid + 1, high)
        return fits(res, high * unit, kind, ps)

    def done(changes, t: TeamConfig, ps: list[PoolFacts], per: Fraction | None = None):
        ts = tuple(t if x.name == t.name else x for x in teams)
        return _Raised(Lift(tuple(changes), per), ts, tuple(ps))

    def first(res: str, extra: Fraction, by_pool, per: Fraction | None = None) -> _Raised | None:
        """The first try that lifts it: the team's keys, the pool's cap, both."""
        for kind in (0, 1):
            if (got := least(res, extra, kind, pools)) is not None:
                return done(got[0], got[1], pools, per)
        if by_pool is not None:
            changes, ps = by_pool
            if lifts(team, ps):
                return done(changes, team, ps, per)
            for kind in (0, 1):
                if (more := least(res, extra, kind, ps)) is not None:
                    return done((*changes, *more[0]), more[1], ps, per)
        return None

    def grown(res: str, want: Fraction, have: Fraction, per: Fraction | None = None):
        """Where the pool raised by what the team lacks goes to the other teams' asks (each
        is scaled to what the pool holds, so each takes a part of a raise): the least raise of
        the pool's `res`, in whole units, up to one that holds every team's ask there and
        `want` more (`have`: what the team holds of `res` there now), after which the team's
        keys lift it (rev22pe's solo research: 2 GPUs asked of 4 beside a team asking 100,
        then quota.gpus 6 with the pool at 106, not 10). CPU and memory of a GPU pool grow
        with its GPUs (`res` GPU, `want` the GPUs that bring them, `per` each GPU's part)."""
        cap = pool_capacity(p, res)
        if cap is None:
            return None
        asked, _ = _split(teams, pools)
        whole = _WHOLE[res]
        low = math.ceil((want - have) / whole)
        high = math.ceil((sum((asked[t.name][pool][res] for t in teams), Fraction(0)) + want
                          - cap) / whole)  # fmt: skip

        def tried(units: int) -> _Raised | None:
            raised = _pool_raise(pools, p, res, units * whole, launched[res])
            if raised is None:
                return None
            return first(res, want, (raised[0], [raised[1] if x is p else x for x in pools]), per)

        if high <= low or tried(high) is None:
            return None
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if tried(mid) is not None else (mid + 1, high)
        return tried(high)

    # cpu/memory set in a GPU pool's `quota.pools` follow no GPUs: raised as they are
    own = dict(team.quota.pools).get(pool)
    if not (follows and q.kueue) or getattr(own, resource, None) is not None:
        raised = _pool_raise(pools, p, r, need - held, launched[r])
        by_pool = (raised[0], [raised[1] if x is p else x for x in pools]) if raised else None
        found = first(r, need - held, by_pool)
        if found is not None:
            return found
        found = grown(r, need, held) if grow else None
        if found is not None:
            return found
    each = per_gpu(p) if follows else None
    if not each or not each[r]:
        return None
    # its GPUs bring the rest: whole GPUs, more if the split gives the pool only a part
    gpus = math.ceil((need - held) / each[r])
    for _ in range(6):
        raised = _pool_raise(pools, p, GPU, Fraction(gpus), launched[GPU])
        by_pool = None
        if raised is not None:
            changes, bigger = raised
            limit = getattr(bigger.limits, CONFIG_KEY[r])
            cap, have = pool_capacity(bigger, GPU), pool_capacity(bigger, r)
            if limit is not None and cap is not None and have is not None:
                # the pool's own limit of the resource would hold it back: at least what follows
                want = _round_up(r, each[r] * cap)
                if want > have or launched[r] > parse_quantity(str(limit)):
                    more = _pool_raise([bigger if x is p else x for x in pools], bigger, r,
                                       max(want - have, Fraction(0)), launched[r])  # fmt: skip
                    if more is not None:
                        done = {k for k, _, _ in more[0]}
                        changes = (*(c for c in changes if c[0] not in done), *more[0])
                        bigger = more[1]
            by_pool = (changes, [bigger if x is p else x for x in pools])
        found = first(GPU, Fraction(gpus), by_pool, each[r])
        if found is not None:
            return found
        gpus *= 2
    if not grow:
        return None
    # last, as for GPUs: the pool's GPUs grown past the other teams' asks, with what they bring
    have = room_of(teams, pools, GPU)
    return grown(GPU, have + math.ceil((need - held) / each[r]), have, each[r])
