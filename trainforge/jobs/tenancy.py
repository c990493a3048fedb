"""What makes a job its team's: its queue and priority, its topology request, its UID/GID and
its MLflow credentials (a file under HOME, never an environment variable). Every job backend
builds its objects with these (no Pulumi here).

Queue and priority are labels on the job's own object (PyTorchJob, TrainJob, Job): Kueue's
webhook sees `kueue.x-k8s.io/queue-name`, suspends the job at creation and unsuspends it
once its team's queue admits all of its pods (gang admission). The program never sets the
fields Kueue owns from then on (the job's `suspend`, the pod templates' scheduling gates,
and node selector entries or tolerations of its own) - see docs/teams.md.
"""

from __future__ import annotations

from typing import Any

from trainforge.core.contract import JobTarget, TeamFacts
from trainforge.core.pods import QUEUE_LABEL
from trainforge.jobs.spec import PRIORITIES, TOPOLOGY_MODES, JobSpec

__all__ = ["PRIORITIES", "TOPOLOGY_MODES"]

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # Kueue's: the WorkloadPriorityClass
DEFAULT_PRIORITY = JobSpec.model_fields["priority"].default

# Topology-aware scheduling on pools that support it (PoolFacts.topology_aware): the pod
# template annotations Kueue reads (kueue.x-k8s.io/podset-*; v0.19 apis/kueue/v1beta2).
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
NETWORK_LAYER = "topology.k8s.aws/network-node-layer-{}"
# The job key `topology` (TOPOLOGY_MODES): `preferred` (default) packs the pods under as few
# network nodes as possible, lowest layer first; `layer-N` requires all of them under one
# network node of layer N (layer-3 is the closest); `none` lets Kueue place them anywhere
# (the unconstrained annotation: a pod set that asks no topology at all is never given a
# topology flavor, "supports only TopologyAwareScheduling", so it would never be admitted on
# such a pool; checkPodSetAndFlavorMatchForTAS and IsExplicitlyRequestingTAS at release-0.19
# c90ed70, trainforge.plan.kueue).
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
        return {UNCONSTRAINED_TOPOLOGY: "true"}
    if mode == "preferred":
        return {PREFERRED_TOPOLOGY: NETWORK_LAYER.format(3), PODSET_GROUP: job.name}
    return {REQUIRED_TOPOLOGY: NETWORK_LAYER.format(mode[-1]), PODSET_GROUP: job.name}


# Every training pod's HOME (trainforge.jobs.pod.env; a job's `env` may not change it): the
# root filesystem is read-only and /tmp is the pod's emptyDir. The team's MLflow credentials
# are mounted under it, where the MLflow client looks for them.
HOME = "/tmp"
MLFLOW_CREDENTIALS_VOLUME = "mlflow-credentials"
# The MLflow client reads `~/.mlflow/credentials` (mlflow.utils.credentials, an INI file with
# section [mlflow]) when MLFLOW_TRACKING_USERNAME/PASSWORD are not in its environment.
MLFLOW_CREDENTIALS_DIR = f"{HOME}/.mlflow"
MLFLOW_CREDENTIALS_FILE = "credentials"
# Owner read, group read: the kubelet gives a Secret volume's files to the pod's fsGroup,
# which is the team's GID (pod.pod_security_context), so the team's UID/GID can read it and
# nobody else on the node can.
MLFLOW_CREDENTIALS_MODE = 0o440


def _mlflow_on(target: JobTarget) -> bool:
    return target.mlflow_tracking_uri is not None and target.team.mlflow_secret is not None


def mlflow_env(target: JobTarget) -> list[dict[str, Any]]:
    """The team's experiment. Its identity is not in the environment: it is a file
    (`mlflow_credentials_mount`), as a Secret in the environment is inherited by every process
    the job starts and shows in crash reports and `/proc/<pid>/environ`."""
    if not _mlflow_on(target) or not target.team.mlflow_experiment:
        return []
    return [{"name": "MLFLOW_EXPERIMENT_NAME", "value": target.team.mlflow_experiment}]


def mlflow_credentials_volume(target: JobTarget) -> list[dict[str, Any]]:
    """The team's MLflow user as a file: the `credentials` key of its Secret, read-only."""
    if not _mlflow_on(target):
        return []
    key = target.team.mlflow_credentials_key
    return [
        {
            "name": MLFLOW_CREDENTIALS_VOLUME,
            "secret": {
                "secretName": target.team.mlflow_secret,
                "items": [{"key": key, "path": MLFLOW_CREDENTIALS_FILE}],
                "defaultMode": MLFLOW_CREDENTIALS_MODE,
            },
        }
    ]


def mlflow_credentials_mount(target: JobTarget) -> list[dict[str, Any]]:
    """$HOME/.mlflow (inside the /tmp emptyDir: the container runtime mounts the deeper path
    after /tmp whatever the order here, and makes the mount point). A directory rather than a
    `subPath` file: the kubelet refreshes a Secret volume when the Secret changes (a rotated
    password reaches running jobs), never a subPath mount."""
    if not _mlflow_on(target):
        return []
    return [
        {"name": MLFLOW_CREDENTIALS_VOLUME, "mountPath": MLFLOW_CREDENTIALS_DIR, "readOnly": True}
    ]


# Set by the platform for every job; a job's own `env` may not override them. The identity
# variables are not set (the credentials are a file), but MLflow prefers them to the file, so a
# job may not set them either.
PLATFORM_ENV = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_EXPERIMENT_NAME")


def run_as(team: TeamFacts) -> tuple[int, int]:
    """The team's UID and GID: its pods run as them and its FSx directory belongs to them."""
    return team.run_as_user, team.run_as_group
