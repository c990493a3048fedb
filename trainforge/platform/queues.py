"""Kueue's objects for the teams and pools in the config, as plain dicts (no Pulumi here).

Why plain and pure: the `Kueue` component declares them, the offline plan's admission
simulation (trainforge.plan.check_queues) reads the same rendered objects, and tests
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

from trainforge.jobs.contract import PoolFacts
from trainforge.jobs.quantity import parse_quantity
from trainforge.platform import versions
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


def _eligible(pool: PoolFacts, resource: str) -> bool:
    return pool.gpus_per_node > 0 if resource == GPU else True


def _split(total: Fraction, parts: int, unit: Fraction) -> list[Fraction]:
    """`total` in `parts` whole multiples of `unit`, the remainder to the first parts."""
    if parts == 0:
        return []
    units = int(total / unit)
    base, extra = divmod(units, parts)
    return [(base + (1 if i < extra else 0)) * unit for i in range(parts)]


_UNIT = {"cpu": Fraction(1, 1000), "memory": Fraction(2**20), GPU: Fraction(1)}


def format_quantity(resource: str, value: Fraction) -> str:
    if resource == "memory":
        mib = int(value // 2**20)
        return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"
    if resource == "cpu":
        milli = int(value * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return str(int(value))


def nominal_quotas(team: TeamConfig, pools: Iterable[PoolFacts]) -> dict[str, dict[str, Fraction]]:
    """pool -> resource -> the team's nominal (guaranteed) quota there.

    The team's totals (`quota.gpus/cpu/memory`) are what its namespace may ever hold; Kueue
    counts quota per flavor. A pool listed under `quota.pools` gets what it says; the rest of
    each total is split evenly over the pools not listed that offer the resource (GPUs over
    GPU pools only), in whole GPUs, millicores and MiB, the remainder to the pools declared
    first. Even, because it is predictable for a team lead reading the config; a team that
    works on one pool says so under `quota.pools`. The sum never exceeds the totals, so the
    namespace's ResourceQuota never refuses a pod the queue admitted within nominal quota.
    """
    pools = list(pools)
    explicit = dict(team.quota.pools)
    out: dict[str, dict[str, Fraction]] = {p.name: {} for p in pools}
    for resource in COVERED:
        key = _CONFIG_KEY[resource]
        total = parse_quantity(getattr(team.quota, key))
        given = {}
        for p in pools:
            value = getattr(explicit[p.name], key) if p.name in explicit else None
            if value is not None:
                given[p.name] = parse_quantity(value) if _eligible(p, resource) else Fraction(0)
        rest = [p for p in pools if p.name not in given and _eligible(p, resource)]
        shares = _split(
            max(total - sum(given.values(), Fraction(0)), Fraction(0)), len(rest), _UNIT[resource]
        )
        for p in pools:
            out[p.name][resource] = given.get(p.name, Fraction(0))
        for p, share in zip(rest, shares, strict=True):
            out[p.name][resource] = share
    return out


def borrowing_limits(team: TeamConfig) -> dict[str, Fraction | None]:
    lim = team.quota.borrowing_limit
    return {
        r: (parse_quantity(v) if (v := getattr(lim, _CONFIG_KEY[r])) is not None else None)
        for r in COVERED
    }


def admissible_max(
    team: TeamConfig, teams: Iterable[TeamConfig], pools: Iterable[PoolFacts]
) -> dict[str, Fraction]:
    """The most the team's queue can ever admit, per resource, over all pools: nominal plus
    what it may borrow in each (its borrowing limit, or all the cohort's other nominal quota
    there). The namespace's ResourceQuota is set to this, so it stays a backstop for pods
    Kueue does not manage and never refuses pods the queue admitted."""
    pools = list(pools)
    mine = nominal_quotas(team, pools)
    peers = [t for t in teams if t.cohort == team.cohort and t.name != team.name]
    others = [nominal_quotas(t, pools) for t in peers]
    limits = borrowing_limits(team)
    out: dict[str, Fraction] = {}
    for resource in COVERED:
        total = Fraction(0)
        for p in pools:
            lendable = sum((o[p.name][resource] for o in others), Fraction(0))
            limit = limits[resource]
            total += mine[p.name][resource] + (lendable if limit is None else min(limit, lendable))
        out[resource] = total
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
    job is checked against at preview): its configured totals without Kueue; with Kueue,
    everything its queue may ever admit (`admissible_max`), so that the ResourceQuota stays
    a backstop for pods outside the queue and never refuses one the queue admitted."""
    q = team.quota
    if not kueue_enabled:
        return {"gpus": q.gpus, "cpu": q.cpu, "memory": q.memory}
    most = admissible_max(team, teams, pools)
    return {_CONFIG_KEY[r]: format_quantity(r, most[r]) for r in COVERED}
