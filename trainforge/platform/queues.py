"""Kueue's objects for the teams and pools in the config, as plain dicts (no Pulumi here).

Why plain and pure: the `Kueue` component declares them, the offline plan's admission
simulation (trainforge.plan.checks.queues) reads the same rendered objects, and tests
validate them against the upstream v0.19 CRDs. One builder per kind:

- `resource_flavor(pool)`: one ResourceFlavor per node group or Karpenter pool. Its
  `nodeLabels` are the pool's own label (`trainforge.io/pool=<name>`, what every job's
  nodeSelector already says) and its `nodeTaints` the pool's taints, so Kueue assigns a job
  only the flavor of the pool it selects. Its `tolerations` tolerate exactly those taints:
  Kueue counts them when it checks a job against the flavor's taints and adds them to the
  pod templates of a job it admits there (with the flavor's node labels), so a job written
  without them (a Kubeflow SDK TrainJob) lands on the pool and its pods are scheduled.
  trainforge's own pods carry the same tolerations already, and Kueue adds a toleration
  only when an equal one is not there (pkg/podset PodSetInfo.Merge at v0.19.2): nothing
  changes on them (docs/teams.md, "Who owns which field").
- `cohort(...)`: per cohort, the part of every pool no team is guaranteed (`quota_plan`).
- `topology()` and `uses_topology(pool)`: topology-aware scheduling for EFA node groups.
- `cluster_queue(team, ...)`: the team's ClusterQueue, its nominal quota per flavor
  (`nominal_quotas`), its cohort, borrowing limit and preemption policies, and the order in
  which Kueue tries its flavors for a job that names no pool (`flavor_order`,
  `FLAVOR_FUNGIBILITY`).
- `local_queue(team)`: the LocalQueue `training` in the team's namespace, which jobs name,
  and `default`, where Kueue puts a job that names no queue.
- `priority_classes()`: WorkloadPriorityClasses `high`, `normal`, `low`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import GPU_RESOURCE, PoolFacts
from trainforge.core.labels import HOSTNAME, NAMESPACE_NAME
from trainforge.core.quantity import parse_quantity
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.platform.services_config import PRIORITIES, KueueConfig, TeamConfig

API_VERSION = versions.KUEUE_API_VERSION
LOCAL_QUEUE = "training"
# Kueue's webhook labels a job that names no queue with the LocalQueue named `default` of its
# namespace, when one exists and the namespace matches managedJobsNamespaceSelector. source:
# kubernetes-sigs/kueue v0.19.2 pkg/controller/constants/constants.go (DefaultLocalQueueName)
# and pkg/controller/jobframework/defaults.go (ApplyDefaultLocalQueueWithManagedJobsNamespace
# Selector, called by the Job, PyTorchJob and TrainJob webhooks); no feature gate at v0.19
# (LocalQueueDefaulting, alpha in v0.13, is gone from pkg/features): read 2026-11-27.
DEFAULT_LOCAL_QUEUE = "default"
GPU = GPU_RESOURCE
# What a team's quota covers. EFA devices (vpc.amazonaws.com/efa) come with the node a job
# fills and are excluded from quota in Kueue's configuration (resources.excludeResourcePrefixes).
COVERED = ("cpu", "memory", GPU)
_CONFIG_KEY = {"cpu": "cpu", "memory": "memory", GPU: "gpus"}

# Topology-aware scheduling. EKS labels nodes of the instance types that support EC2
# instance topology with their position in the AWS network, top layer first (source:
# docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html, checked 2026-11-23);
# `kubernetes.io/hostname` as the lowest level lets Kueue place pods on nodes directly.
TOPOLOGY_NAME = "aws-network"
NETWORK_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
TOPOLOGY_LEVELS = (*NETWORK_LAYERS, HOSTNAME)


def uses_topology(pool: PoolFacts) -> bool:
    """Topology-aware scheduling for EFA managed node groups only.

    Kueue's TAS computes free capacity from the nodes that exist and are Ready, and gates
    the pods of a TAS workload until it has placed them; a Karpenter pool that scales from
    zero has no nodes until pods are pending, so a TAS flavor there would never admit a job.
    Karpenter EFA pools keep their nodes together with a cluster placement group instead
    (trainforge.platform.karpenter).
    """
    return pool.efa_interfaces > 0 and pool.kind == "node-group"


def _meta(name: str, labels: Mapping[str, str] | None = None, namespace: str | None = None):
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "trainforge"}}
    meta["labels"].update(labels or {})
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def flavor_name(pool: str) -> str:
    return pool


def resource_flavor(pool: PoolFacts) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(pool.node_selector)}
    taints = [
        {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value is not None else {})}
        for t in pool.taints
    ]
    if taints:
        spec["nodeTaints"] = taints
        spec["tolerations"] = tolerations(pool)
    if uses_topology(pool):
        spec["topologyName"] = TOPOLOGY_NAME
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": _meta(flavor_name(pool.name)),
        "spec": spec,
    }


def tolerations(pool: PoolFacts) -> list[dict[str, str]]:
    """The tolerations of the pool's taints, as the pod builder writes them
    (trainforge.jobs.pod.pool_tolerations): equal ones, so Kueue adds nothing to
    trainforge's own pods."""
    from trainforge.jobs.pod import pool_tolerations  # noqa: PLC0415 - keeps imports light

    return pool_tolerations(pool, gpu=False)


def topology() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Topology",
        "metadata": _meta(TOPOLOGY_NAME),
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def priority_classes() -> list[dict[str, Any]]:
    about = {
        "high": "may preempt the team's own normal and low jobs",
        "normal": "the default",
        "low": "runs on idle capacity; any team's borrowing job may preempt it there",
    }
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": _meta(name),
            "value": value,
            "description": f"trainforge {name}-priority training jobs: {about[name]}",
        }
        for name, value in PRIORITIES.items()
    ]


# --- quota ---------------------------------------------------------------------------------
#
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
# in a pool belongs to the cohort (a Kueue `Cohort` object with that nominal quota), so any
# member may borrow it while it is idle, and every team takes its own nominal quota back from
# borrowers by preemption (`reclaimWithinCohort`).


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


def pool_capacity(pool: PoolFacts, resource: str) -> Fraction | None:
    """The most of `resource` the pool's nodes can ever have (Karpenter `limits`, or a node
    group's maxSize nodes of its largest type); None when unbounded or unknown."""
    lim = pool.limits
    if resource == GPU:
        if lim.gpus is not None:
            return Fraction(lim.gpus)
        per = max((n.gpus for n in pool.nodes), default=pool.gpus_per_node)
    elif resource == "cpu":
        if lim.cpu is not None:
            return parse_quantity(lim.cpu)
        per = max((n.vcpus for n in pool.nodes), default=pool.vcpus_per_node or 0)
    else:
        if lim.memory is not None:
            return parse_quantity(lim.memory)
        per = max((n.memory_mib for n in pool.nodes), default=pool.memory_mib_per_node or 0)
        per = per * 2**20
    if pool.max_nodes is None or not per:
        return None
    return Fraction(per) * pool.max_nodes


def per_gpu(pool: PoolFacts) -> dict[str, Fraction] | None:
    """CPU and memory that come with one GPU of the pool: what a node leaves to pods after the
    kubelet and the DaemonSets, over its GPUs (the most over the pool's types, so that any
    pod sized for its GPUs fits; trainforge.jobs.capacity). None when the nodes are unknown."""
    from trainforge.jobs import capacity  # noqa: PLC0415 - pure; keeps this module's imports light

    rooms = [r for r in capacity.rooms(pool) if r.node.gpus]
    if not rooms:
        return None
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
    totals = {r: parse_quantity(getattr(team.quota, _CONFIG_KEY[r])) for r in COVERED}
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
            if p.name in explicit and (v := getattr(explicit[p.name], _CONFIG_KEY[r])) is not None
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
            value = getattr(explicit[p.name], _CONFIG_KEY[r]) if p.name in explicit else None
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


def quota_plan(teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]) -> QuotaPlan:
    """The guarantees of all teams at once: GPUs first (split, then fitted to each pool),
    then the CPU and memory that follow them and those of the CPU pools (fitted too)."""
    teams, pools = list(teams), list(pools)
    first = {t.name: _asked(t, pools, None) for t in teams}
    gpus = _fit(first, pools, (GPU,))
    asked = {
        t.name: _asked(t, pools, {p: rs[GPU] for p, rs in gpus[t.name].items()}) for t in teams
    }
    for t in teams:
        for p in pools:
            asked[t.name][p.name][GPU] = gpus[t.name][p.name][GPU]
    nominal = _fit(asked, pools, ("cpu", "memory"))
    warnings = []
    for i, t in enumerate(teams):
        where = f"trainforge:teams[{i}].quota"
        for r in COVERED:
            key = _CONFIG_KEY[r]
            eligible = [p for p in pools if bool(p.gpus_per_node) == (r == GPU)]
            if not eligible:
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
                warnings.append(
                    f"{where}.{key}: {getattr(t.quota, key)} asked, but the {kind} pools "
                    f"({', '.join(p.name for p in eligible)}) hold {room} shared by "
                    f"{len(teams)} team(s): team {t.name} is guaranteed "
                    f"{format_quantity(r, got)}; the rest only while other teams leave it idle"
                )
        for pname, given in t.quota.pools:
            p = next((x for x in pools if x.name == pname), None)
            if p is None:
                continue
            for r in COVERED:
                value = getattr(given, _CONFIG_KEY[r])
                if value is None or (r == GPU and not p.gpus_per_node):
                    continue
                if nominal[t.name][pname][r] < parse_quantity(value):
                    warnings.append(
                        f"{where}.pools.{pname}.{_CONFIG_KEY[r]}: {value} asked, but pool "
                        f"{pname} holds {format_quantity(r, _holds(p, r) or Fraction(0))} "
                        f"shared by the teams: team {t.name} is guaranteed "
                        f"{format_quantity(r, nominal[t.name][pname][r])} there"
                    )
    shared: dict[str, dict[str, dict[str, Fraction]]] = {}
    cohorts = sorted({t.cohort for t in teams})
    for p in pools:
        for r in COVERED:
            cap = _holds(p, r)
            if cap is None:
                continue
            left = cap - sum((nominal[t.name][p.name][r] for t in teams), Fraction(0))
            by_cohort = {
                c: sum((nominal[t.name][p.name][r] for t in teams if t.cohort == c), Fraction(0))
                for c in cohorts
            }
            if not any(by_cohort.values()):
                by_cohort = {c: Fraction(1) for c in cohorts}
            for c, v in _share(max(left, Fraction(0)), by_cohort, r).items():
                shared.setdefault(c, {}).setdefault(p.name, {})[r] = v
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
        r: (parse_quantity(v) if (v := getattr(lim, _CONFIG_KEY[r])) is not None else None)
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


def admissible_max(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, Fraction]:
    """The most the team may hold at once, per resource, over all pools: in each pool its
    nominal quota plus what it may borrow there (what its cohort could lend, no more than its
    borrowing limit). The namespace's ResourceQuota is set to this: the hard backstop for
    what the queue does not see, which never refuses a pod its queue admitted."""
    teams, pools = list(teams), list(pools)
    nominal = nominal_quotas(team, pools, teams)
    lend = lendable(team, teams, pools)
    limits = borrowing_limits(team)
    out: dict[str, Fraction] = {}
    for r in COVERED:
        total = Fraction(0)
        for p in pools:
            borrow = lend[p.name][r]
            if limits[r] is not None:
                borrow = min(borrow, limits[r])
            total += nominal[p.name][r] + borrow
        out[r] = total
    return out


# --- queues ----------------------------------------------------------------------------------


def cluster_queue_name(team: str) -> str:
    return team


# Which flavor a job that names no pool lands on (a `kubectl` Job, a CronJob's Job, a Kubeflow
# SDK TrainJob): Kueue tries a ClusterQueue's flavors in order and, with `MayStopSearch`, stops
# at the first that fits, by borrowing (whenCanBorrow) or by preempting (whenCanPreempt); a
# flavor whose quota the job can never fit (no GPUs in a CPU pool), or where preemption finds
# no candidates, is passed over whatever the policy; a topology flavor is skipped for a job
# that asks no topology (pkg/scheduler/flavorassigner at release-0.19 c90ed70, modelled in
# trainforge.plan.kueue). So with the order of `flavor_order`, CPU-only work lands on a CPU
# pool, borrowing or preempting there before it would take a GPU node, and GPU work lands on
# a pool where the team has nominal GPUs before one where it only borrows. TryNextFlavor for
# borrowing would do worse here: a CPU job that must borrow in the CPU pool would move on to
# a GPU pool, where the team's CPU quota (which follows its GPUs) fits it without borrowing.
# What is left: when the CPU pool is full of work nothing may preempt, a CPU-only job that
# names no pool still lands on a GPU pool where its team has nominal CPU quota.
# v1beta2 field names and values (CRD kueue.x-k8s.io_clusterqueues.yaml at v0.19.5: enum
# MayStopSearch/TryNextFlavor, defaults MayStopSearch and TryNextFlavor).
FLAVOR_FUNGIBILITY = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}


def flavor_order(
    pools: Iterable[PoolFacts], nominal: Mapping[str, Mapping[str, Fraction]]
) -> list[PoolFacts]:
    """The team's flavors in the order Kueue should try them for a job that names no pool:
    the CPU pools, then the GPU pools where the team has nominal GPUs, then the other GPU
    pools (each in the config's order)."""
    pools = list(pools)
    cpu = [p for p in pools if not p.gpus_per_node]
    own = [p for p in pools if p.gpus_per_node and nominal[p.name][GPU] > 0]
    rest = [p for p in pools if p.gpus_per_node and not nominal[p.name][GPU] > 0]
    return cpu + own + rest


def cluster_queue(
    team: TeamConfig,
    pools: Iterable[PoolFacts],
    config: KueueConfig,
    namespace: str,
    teams: Iterable[TeamConfig] | None = None,
) -> dict[str, Any]:
    pools = list(pools)
    nominal = nominal_quotas(team, pools, teams)
    limits = borrowing_limits(team)
    flavors = []
    for p in flavor_order(pools, nominal):
        resources = []
        for r in COVERED:
            entry: dict[str, Any] = {
                "name": r,
                "nominalQuota": format_quantity(r, nominal[p.name][r]),
            }
            if limits[r] is not None:
                entry["borrowingLimit"] = format_quantity(r, limits[r])
            resources.append(entry)
        flavors.append({"name": flavor_name(p.name), "resources": resources})
    borrow: dict[str, Any] = {"policy": config.borrow_within_cohort}
    if config.borrow_within_cohort != "Never":
        borrow["maxPriorityThreshold"] = PRIORITIES["low"]
    spec: dict[str, Any] = {
        "cohortName": team.cohort,
        # Only the team's own namespace may submit to its queue: a LocalQueue elsewhere that
        # names this ClusterQueue admits nothing.
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME: namespace}},
        "queueingStrategy": config.queueing_strategy,
        "flavorFungibility": dict(FLAVOR_FUNGIBILITY),
        "preemption": {
            "withinClusterQueue": config.within_cluster_queue,
            "reclaimWithinCohort": config.reclaim_within_cohort,
            "borrowWithinCohort": borrow,
        },
        "resourceGroups": [{"coveredResources": list(COVERED), "flavors": flavors}],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": _meta(cluster_queue_name(team.name), {TEAM_LABEL: team.name}),
        "spec": spec,
    }


def local_queue(team: TeamConfig, namespace: str, name: str = LOCAL_QUEUE) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": _meta(name, {TEAM_LABEL: team.name}, namespace),
        "spec": {"clusterQueue": cluster_queue_name(team.name)},
    }


def cohort(name: str, shared: Mapping[str, Mapping[str, Fraction]], pools: list[PoolFacts]):
    """The cohort's own quota: per pool, what no member is guaranteed. Members borrow it
    while it is idle; it belongs to nobody, so any member may take it (and loses it to a
    member that reclaims its own nominal quota)."""
    flavors = [
        {
            "name": flavor_name(p.name),
            "resources": [
                {
                    "name": r,
                    "nominalQuota": format_quantity(r, shared.get(p.name, {}).get(r, Fraction(0))),
                }
                for r in COVERED
            ],
        }
        for p in pools
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": _meta(name),
        "spec": {"resourceGroups": [{"coveredResources": list(COVERED), "flavors": flavors}]},
    }


def queue_objects(
    teams: Iterable[TeamConfig], pools: Iterable[PoolFacts], config: KueueConfig
) -> list[dict[str, Any]]:
    """Every Kueue object for these teams and pools, in the order they can be applied."""
    teams, pools = list(teams), list(pools)
    out: list[dict[str, Any]] = []
    if any(uses_topology(p) for p in pools):
        out.append(topology())
    out += [resource_flavor(p) for p in pools]
    out += priority_classes()
    plan = quota_plan(teams, pools)
    for name in sorted({t.cohort for t in teams}):
        out.append(cohort(name, plan.shared.get(name, {}), pools))
    for t in teams:
        out.append(cluster_queue(t, pools, config, t.name, teams))
        out.append(local_queue(t, t.name))
        # jobs without a queue label land here (Kueue's LocalQueue defaulting)
        out.append(local_queue(t, t.name, DEFAULT_LOCAL_QUEUE))
    return out


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
    return {_CONFIG_KEY[r]: format_quantity(r, most[r]) for r in COVERED}


def quota_raise(
    team: TeamConfig,
    teams: Iterable[TeamConfig],
    pools: Iterable[PoolFacts],
    kueue_enabled: bool,
    resource: str,
    need: Fraction,
    pool: str,
    launch: Fraction = Fraction(0),
) -> tuple[tuple[str, str, str], ...] | None:
    """The stack keys to raise so that `namespace_quota` gives the team `need` of `resource`
    (gpus/cpu/memory): `((key, now, to), ...)`, tried in turn and checked against the model
    itself: the team's quota, the limit of the job's Karpenter `pool` (at least `launch`: what
    the job's NodeClaims count against it), both. None: no such
    change (other teams' guarantees, a borrowing limit or a node group's size hold it)."""
    teams, pools = list(teams), list(pools)
    r = next(r for r in COVERED if _CONFIG_KEY[r] == resource)
    held = parse_quantity(namespace_quota(team, teams, pools, kueue_enabled)[resource])
    to_team = format_quantity(r, _round_up(r, need))
    now_team = getattr(team.quota, resource)
    raised_team = team.model_copy(
        update={"quota": team.quota.model_copy(update={resource: to_team})}
    )
    team_change = (f"trainforge:teams[{team.name}].quota.{resource}", now_team, to_team)
    p = next((x for x in pools if x.name == pool), None)
    limit = getattr(p.limits, resource) if p is not None and p.kind == "karpenter" else None
    pool_change = None
    if limit is not None and need > held:
        bigger = _round_up(r, max(parse_quantity(str(limit)) + need - held, launch))
        to_pool = format_quantity(r, bigger)
        raised_pool = replace(
            p, limits=replace(p.limits, **{resource: int(bigger) if r == GPU else to_pool})
        )
        pool_change = (
            (f"trainforge:nodePools[{pool}].limits.{resource}", str(limit), to_pool),
            [raised_pool if x is p else x for x in pools],
        )
    tries = []
    if parse_quantity(now_team) < parse_quantity(to_team):
        tries.append(((team_change,), raised_team, pools))
    if pool_change is not None:
        tries.append(((pool_change[0],), team, pool_change[1]))
        if parse_quantity(now_team) < parse_quantity(to_team):
            tries.append(((pool_change[0], team_change), raised_team, pool_change[1]))
    for changes, t, ps in tries:
        others = [t if x.name == t.name else x for x in teams]
        got = parse_quantity(namespace_quota(t, others, ps, kueue_enabled)[resource])
        if got >= need:
            return changes
    return None
