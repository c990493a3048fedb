"""Kueue's objects for the teams and pools in the config, as plain dicts (no Pulumi here).

Why plain and pure: the `Kueue` component declares them, the offline plan's admission
simulation (trainforge.plan.checks.queues) reads the same rendered objects, and tests
validate them against the upstream v0.19 CRDs. One builder per kind:

- `resource_flavor(pool)`: one ResourceFlavor per node group or Karpenter pool. Its
  `nodeLabels` are the pool's own label (`trainforge.io/pool=<name>`, what every job's
  nodeSelector already says) and its `nodeTaints` the pool's taints, so Kueue assigns a job
  only the flavor of the pool it selects and only if it tolerates the pool's taints. No
  `tolerations`: Kueue would append them to the pod template of every job it admits, a
  field the program owns (see docs/teams.md, "Who owns which field").
- `topology()` and `uses_topology(pool)`: topology-aware scheduling for EFA node groups.
- `cluster_queue(team, ...)`: the team's ClusterQueue, its nominal quota per flavor
  (`nominal_quotas`), its cohort, borrowing limit and preemption policies.
- `local_queue(team)`: the LocalQueue `training` in the team's namespace, which jobs name.
- `priority_classes()`: WorkloadPriorityClasses `high`, `normal`, `low`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import PoolFacts
from trainforge.core.quantity import parse_quantity
from trainforge.platform.services_config import PRIORITIES, KueueConfig, TeamConfig

API_VERSION = versions.KUEUE_API_VERSION
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
LOCAL_QUEUE = "training"
DEFAULT_PRIORITY = "normal"
GPU = "nvidia.com/gpu"
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
TOPOLOGY_LEVELS = (*NETWORK_LAYERS, "kubernetes.io/hostname")


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
    if uses_topology(pool):
        spec["topologyName"] = TOPOLOGY_NAME
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": _meta(flavor_name(pool.name)),
        "spec": spec,
    }


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


# --- quota -----------------------------------------------------------------------------------
#
# What a team's quota means (docs/teams.md, "Quota"): `quota.gpus` is how many GPUs the team
# may hold at once, in whichever GPU pools it likes; the CPU and memory that come with those
# GPUs follow them (a GPU pool's CPU and memory quota is its GPU quota times what a node
# leaves to pods per GPU); `quota.cpu` and `quota.memory` are for CPU-only work in CPU pools.
# Kueue counts quota per flavor and has no total across flavors, so every pool the team may
# use gets the whole total as its nominal quota there (no more than the pool can ever hold),
# and the namespace's ResourceQuota holds the total across pools (`namespace_quota`).


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


def _capped(total: Fraction, pool: PoolFacts, resource: str) -> Fraction:
    cap = pool_capacity(pool, resource)
    return total if cap is None else min(total, cap)


def nominal_quotas(team: TeamConfig, pools: Iterable[PoolFacts]) -> dict[str, dict[str, Fraction]]:
    """pool -> resource -> the team's nominal (guaranteed) quota there.

    GPU pools: the team's GPU total (no more than the pool can hold), and the CPU and memory
    that come with those GPUs (`per_gpu`; the team's cpu/memory totals when the nodes are
    unknown). CPU pools: the team's cpu and memory totals (no more than the pool can hold).
    A pool listed under `quota.pools` gets what it says instead, resource by resource (the
    way to split the total, or to keep a team out of a pool with 0).
    """
    explicit = dict(team.quota.pools)
    totals = {r: parse_quantity(getattr(team.quota, _CONFIG_KEY[r])) for r in COVERED}
    out: dict[str, dict[str, Fraction]] = {}
    for p in pools:
        mine: dict[str, Fraction] = {}
        if p.gpus_per_node:
            gpus = _capped(totals[GPU], p, GPU)
            mine[GPU] = gpus
            each = per_gpu(p)
            for r in ("cpu", "memory"):
                follow = totals[r] if each is None else _round_up(r, each[r] * gpus)
                mine[r] = _capped(follow, p, r)
        else:
            mine = {GPU: Fraction(0), **{r: _capped(totals[r], p, r) for r in ("cpu", "memory")}}
        given = explicit.get(p.name)
        if given is not None:
            for r in COVERED:
                value = getattr(given, _CONFIG_KEY[r])
                if value is not None:
                    mine[r] = (
                        parse_quantity(value) if (r != GPU or p.gpus_per_node) else Fraction(0)
                    )
        out[p.name] = mine
    return out


def borrowing_limits(team: TeamConfig) -> dict[str, Fraction | None]:
    lim = team.quota.borrowing_limit
    return {
        r: (parse_quantity(v) if (v := getattr(lim, _CONFIG_KEY[r])) is not None else None)
        for r in COVERED
    }


def team_total(team: TeamConfig, pools: Iterable[PoolFacts]) -> dict[str, Fraction]:
    """What the team may hold at once over all pools, per resource: its GPUs, and the most
    its nominal quota lets it hold of cpu and memory -- those of its CPU pools plus those that
    come with its GPUs in the GPU pool where they bring the most."""
    pools = list(pools)
    nominal = nominal_quotas(team, pools)
    gpu_pools = [nominal[p.name] for p in pools if p.gpus_per_node]
    cpu_pools = [nominal[p.name] for p in pools if not p.gpus_per_node]
    gpus = min(sum((q[GPU] for q in gpu_pools), Fraction(0)), parse_quantity(team.quota.gpus))
    out: dict[str, Fraction] = {GPU: gpus}
    for r in ("cpu", "memory"):
        with_gpus = sum((q[r] for q in gpu_pools), Fraction(0))
        ratios = [q[r] / q[GPU] for q in gpu_pools if q[GPU]]
        if ratios:
            with_gpus = min(with_gpus, _round_up(r, max(ratios) * gpus))
        out[r] = sum((q[r] for q in cpu_pools), Fraction(0)) + with_gpus
    return out


def admissible_max(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, Fraction]:
    """The most the team may hold at once, per resource, over all pools: its own total
    (`team_total`) plus what it may borrow from its cohort -- the other members' totals, or
    its borrowing limit in each pool when that is less. The namespace's ResourceQuota is set
    to this: the hard backstop that keeps the team within its total across pools (Kueue only
    counts per pool), and that never refuses a pod its queue admitted within quota."""
    pools = list(pools)
    mine = team_total(team, pools)
    peers = [t for t in teams if t.cohort == team.cohort and t.name != team.name]
    lendable = {r: Fraction(0) for r in COVERED}
    for t in peers:
        for r, v in team_total(t, pools).items():
            lendable[r] += v
    limits = borrowing_limits(team)
    out: dict[str, Fraction] = {}
    for r in COVERED:
        eligible = [p for p in pools if p.gpus_per_node or r != GPU]
        limit = limits[r]
        borrow = lendable[r] if limit is None else min(lendable[r], limit * len(eligible))
        out[r] = mine[r] + borrow
    return out


# --- queues ----------------------------------------------------------------------------------


def cluster_queue_name(team: str) -> str:
    return team


def cluster_queue(
    team: TeamConfig, pools: Iterable[PoolFacts], config: KueueConfig, namespace: str
) -> dict[str, Any]:
    pools = list(pools)
    nominal = nominal_quotas(team, pools)
    limits = borrowing_limits(team)
    flavors = []
    for p in pools:
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
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": config.queueing_strategy,
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
        "metadata": _meta(cluster_queue_name(team.name), {"trainforge.io/team": team.name}),
        "spec": spec,
    }


def local_queue(team: TeamConfig, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": _meta(LOCAL_QUEUE, {"trainforge.io/team": team.name}, namespace),
        "spec": {"clusterQueue": cluster_queue_name(team.name)},
    }


def queue_objects(
    teams: Iterable[TeamConfig], pools: Iterable[PoolFacts], config: KueueConfig
) -> list[dict[str, Any]]:
    """Every Kueue object for these teams and pools, in the order they can be applied."""
    pools = list(pools)
    out: list[dict[str, Any]] = []
    if any(uses_topology(p) for p in pools):
        out.append(topology())
    out += [resource_flavor(p) for p in pools]
    out += priority_classes()
    for t in teams:
        out.append(cluster_queue(t, pools, config, t.name))
        out.append(local_queue(t, t.name))
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
    (`admissible_max`). The hard backstop: Kueue counts quota per pool, this the total."""
    pools = list(pools)
    q = team.quota
    if not pools:
        return {"gpus": q.gpus, "cpu": q.cpu, "memory": q.memory}
    most = admissible_max(team, teams, pools) if kueue_enabled else team_total(team, pools)
    return {_CONFIG_KEY[r]: format_quantity(r, most[r]) for r in COVERED}
