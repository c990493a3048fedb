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
- `cohort(...)`: per cohort, its share of every pool's part no team is guaranteed (`quota_plan`).
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
from fractions import Fraction
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import PoolFacts
from trainforge.core.labels import HOSTNAME, NAMESPACE_NAME
from trainforge.jobs.pod import TEAM_LABEL

# The quota model (docs/teams.md, "Quotas"): one copy, in jobs/ where a job's quota refusal
# reads it too; its names that the platform's readers use are re-exported here.
from trainforge.jobs.quota import (
    COVERED,
    GPU,
    borrowing_limits,
    format_quantity,
    nominal_quotas,
    quota_plan,
)
from trainforge.jobs.quota import namespace_quota as namespace_quota
from trainforge.jobs.quota import pool_capacity as pool_capacity
from trainforge.jobs.quota import team_total as team_total
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
    """The cohort's own quota: per pool, its share of what no team is guaranteed. Members
    borrow it while it is idle; it belongs to nobody, so any member may take it (and loses it
    to a member that reclaims its own nominal quota)."""
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
