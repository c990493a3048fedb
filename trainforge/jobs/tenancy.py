"""What makes a job its team's: its queue and priority, its topology request, its UID/GID and
its MLflow credentials. Every job backend builds its objects with these (no Pulumi here).

Queue and priority are labels on the job's own object (PyTorchJob, TrainJob, Job): Kueue's
webhook sees `kueue.x-k8s.io/queue-name`, suspends the job at creation and unsuspends it
once its team's queue admits all of its pods (gang admission). The program never sets the
fields Kueue owns from then on (the job's `suspend`, the pod templates' scheduling gates,
and node selector entries or tolerations of its own) - see docs/teams.md.
"""

from __future__ import annotations

from typing import Any

from trainforge.jobs.contract import JobTarget
from trainforge.jobs.spec import PRIORITIES, TOPOLOGY_MODES

__all__ = ["PRIORITIES", "TOPOLOGY_MODES"]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_PRIORITY = "normal"

# Topology-aware scheduling on pools that support it (PoolFacts.topology_aware): the pod
# template annotations Kueue reads (kueue.x-k8s.io/podset-*; v0.19 apis/kueue/v1beta2).
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
NETWORK_LAYER = "topology.k8s.aws/network-node-layer-{}"
# The job key `topology` (TOPOLOGY_MODES): `preferred` (default) packs the pods under as few
# network nodes as possible, lowest layer first; `layer-N` requires all of them under one
# network node of layer N (layer-3 is the closest); `none` lets Kueue place them anywhere.
DEFAULT_TOPOLOGY = "preferred"


def queue_labels(job: Any, target: JobTarget) -> dict[str, str]:
    """Labels for the job's workload object: its team's LocalQueue and its priority."""
    if target.team.queue is None:
        return {}
    return {
        QUEUE_LABEL: target.team.queue,
        PRIORITY_LABEL: getattr(job, "priority", None) or DEFAULT_PRIORITY,
    }


def topology_annotations(job: Any, target: JobTarget) -> dict[str, str]:
    """Pod-template annotations asking Kueue to place the job's pods close together.

    The group name puts all of the job's pod sets (a PyTorchJob's Master and Workers) into
    one topology domain together instead of each on its own.
    """
    if not target.pool.topology_aware or target.team.queue is None:
        return {}
    mode = getattr(job, "topology", None) or DEFAULT_TOPOLOGY
    if mode == "none":
        return {}
    if mode == "preferred":
        return {PREFERRED_TOPOLOGY: NETWORK_LAYER.format(3), PODSET_GROUP: job.name}
    return {REQUIRED_TOPOLOGY: NETWORK_LAYER.format(mode[-1]), PODSET_GROUP: job.name}


def mlflow_env(target: JobTarget) -> list[dict[str, Any]]:
    """The team's MLflow identity: its user (from the team's Secret) and its experiment."""
    team = target.team
    if target.mlflow_tracking_uri is None or team.mlflow_secret is None:
        return []
    ref = lambda key: {"secretKeyRef": {"name": team.mlflow_secret, "key": key}}  # noqa: E731
    out: list[dict[str, Any]] = [
        {"name": "MLFLOW_TRACKING_USERNAME", "valueFrom": ref("username")},
        {"name": "MLFLOW_TRACKING_PASSWORD", "valueFrom": ref("password")},
    ]
    if team.mlflow_experiment:
        out.append({"name": "MLFLOW_EXPERIMENT_NAME", "value": team.mlflow_experiment})
    return out


# Set by the platform for every job; a job's own `env` may not override them.
PLATFORM_ENV = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_EXPERIMENT_NAME")


def run_as(target: JobTarget) -> tuple[int, int]:
    """The team's UID and GID: its pods run as them and its FSx directory belongs to them."""
    return target.team.run_as_user, target.team.run_as_group
