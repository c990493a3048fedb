"""The names the platform itself takes in a cluster: the one list a team's name is checked
against, and the constants the components that create those objects read.

A team's name becomes cluster-wide names (its Namespace, its Kueue ClusterQueue), so a team
named like one of the platform's would share that object with the platform: a second
Namespace or ClusterQueue of the same name (the API server keeps one, Pulumi fights over it)
and the team's Role next to the platform's workloads. The components import their names from
here (`acceptance.NAMESPACE` is `ACCEPTANCE_NAMESPACE`, ...), so a new platform namespace or
ClusterQueue added here is refused as a team name without a second list to keep in step;
tests/stack/test_reserved_names.py checks every Namespace and ClusterQueue a plan declares
that is not a team's is here, and the plan flags any two objects of one kind, namespace and
name (trainforge/plan/checks/duplicates.py).

The configurable namespaces (`trainingOperator.namespace`, `monitoring.namespace`,
`karpenter.namespace`) are checked against the teams where the config is read
(stack/services.py, `ServiceKeys`); their defaults are here.
"""

from __future__ import annotations

# The API server's own namespaces (kube-apiserver creates default, kube-system, kube-public,
# kube-node-lease); every `kube-` name is reserved for Kubernetes.
KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KUBERNETES_PREFIX = "kube-"

# The training operator v1's upstream standalone overlay hard-codes `kubeflow`
# (trainforge/platform/data/training-operator-v1.9.4/manifests/overlays/standalone/namespace.yaml)
TRAINING_OPERATOR_NAMESPACE = "kubeflow"
TRAINER_NAMESPACE = "kubeflow-system"  # Kubeflow Trainer v2 and JobSet (platform/trainer.py)
MONITORING_NAMESPACE = "monitoring"  # the default of `monitoring.namespace`
MLFLOW_NAMESPACE = "mlflow"  # platform/monitoring.py
KUEUE_NAMESPACE = "kueue-system"  # platform/kueue.py
NODE_AGENTS_NAMESPACE = "node-agents"  # the privileged node agents (platform/placement.py)
FSX_ADMIN_NAMESPACE = "fsx-admin"  # the FSx root claim and the team-directory Jobs (fsx.py)
ACCEPTANCE_NAMESPACE = "trainforge-acceptance"  # the acceptance CronJobs (acceptance.py)

# Kueue ClusterQueues of the platform's own (a team's ClusterQueue is named after the team)
ACCEPTANCE_CLUSTER_QUEUE = "trainforge-acceptance"

PLATFORM_NAMESPACES = (
    *KUBERNETES_NAMESPACES,
    TRAINING_OPERATOR_NAMESPACE,
    TRAINER_NAMESPACE,
    MONITORING_NAMESPACE,
    MLFLOW_NAMESPACE,
    KUEUE_NAMESPACE,
    NODE_AGENTS_NAMESPACE,
    FSX_ADMIN_NAMESPACE,
    ACCEPTANCE_NAMESPACE,
)
PLATFORM_CLUSTER_QUEUES = (ACCEPTANCE_CLUSTER_QUEUE,)

# What a team may not be named: every namespace and ClusterQueue the platform creates.
RESERVED_TEAM_NAMES = frozenset({*PLATFORM_NAMESPACES, *PLATFORM_CLUSTER_QUEUES})


def reserved_team_name(name: str) -> bool:
    """Whether `name` is the platform's (a namespace or ClusterQueue it creates, or `kube-*`)."""
    return name in RESERVED_TEAM_NAMES or name.startswith(KUBERNETES_PREFIX)


def reserved_rule() -> str:
    """The error's "what is valid" for a team name: every reserved name, sorted."""
    return f"a name other than {', '.join(sorted(RESERVED_TEAM_NAMES))} and {KUBERNETES_PREFIX}*"
