"""Team access: who may ask the cluster about a team's jobs, and what they may do.

Each principal of `teams[].access.principals` gets an EKS access entry (authentication mode
API) whose Kubernetes group is `trainforge:team:<team>`; no EKS access policy is associated
(the managed View/Edit policies cover more than a team needs, Secrets-adjacent objects
included). Kubernetes RBAC grants that group, in the team's namespace only (a Role and a
RoleBinding):

* read: the jobs of every backend (PyTorchJob, TrainJob, JobSet, batch Job), Kueue's
  Workloads and LocalQueues and the queue positions (visibility API), pods, their logs,
  events, Services, ConfigMaps, the namespace's LimitRanges (whose defaults Kueue counts for
  a container without requests: `trainforge status|why|wait` count them too); `pods/proxy`
  GET to read rank 0's metrics (the team's own pods only);
* with `createJobs: true`, also create/update/delete those jobs, ConfigMaps (the runtime
  library and shipped code) and Services (the operator-free Indexed Job's headless rendezvous
  Service, jobs/indexed_job.service_manifest), nothing else; a Service must be ClusterIP
  without externalIPs and a pod must name no PriorityClass (the team's admission policies,
  platform/team_identity.py: RBAC cannot say either);
* never Secrets, ServiceAccounts, RBAC, quotas, NetworkPolicies or another namespace (nor
  any write to the LimitRanges).

Cluster-wide, a ClusterRole lets the group read its own team's ClusterQueue only
(`resourceNames`), for `trainforge status` to show quota usage.

`trainforge status|why|logs|wait` needs exactly the read part (trainforge.live; a waiting
job's expected start lists the namespace's Workloads and LocalQueues and reads the positions
of each LocalQueue: tests/live/test_wait.py checks each of its reads against these rules).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.jobs import backends
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.platform.services_config import TeamConfig

GROUP_PREFIX = "trainforge:team:"
ROLE = "trainforge-team-member"
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete"]
# (apiGroup, resources) a team member reads in the team namespace: every backend's workload
# object (as its emitter declares it), then what they run and queue in
READ_RESOURCES: list[tuple[str, list[str]]] = [
    *((group, [plural, f"{plural}/status"]) for group, plural in backends.RESOURCES.values()),
    ("jobset.x-k8s.io", ["jobsets", "jobsets/status"]),
    ("kueue.x-k8s.io", ["workloads", "workloads/status", "localqueues", "localqueues/status"]),
    ("", ["pods", "pods/log", "events", "services", "configmaps", "limitranges"]),
    ("events.k8s.io", ["events"]),
]
# what `createJobs` adds: the job objects of every backend, their ConfigMaps and Services
WRITE_RESOURCES: list[tuple[str, list[str]]] = [
    *((group, [plural]) for group, plural in backends.RESOURCES.values()),
    ("", ["configmaps", "services"]),
]


def group(team: str) -> str:
    return f"{GROUP_PREFIX}{team}"


def role_rules(create_jobs: bool) -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [g], "resources": list(res), "verbs": list(READ)} for g, res in READ_RESOURCES
    ]
    # rank 0's metrics through the API server's pod proxy (trainforge status)
    rules.append({"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]})
    rules.append(
        {
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": ["localqueues/pendingworkloads"],
            "verbs": ["get", "list"],
        }
    )
    if create_jobs:
        rules += [
            {"apiGroups": [g], "resources": list(res), "verbs": list(WRITE)}
            for g, res in WRITE_RESOURCES
        ]
    return rules


def rbac_objects(team: TeamConfig, namespace: str) -> list[dict[str, Any]]:
    """The team's Role, RoleBinding, and its ClusterQueue and ResourceFlavor reader (plain
    manifests)."""
    from trainforge.platform.queues import cluster_queue_name  # noqa: PLC0415

    labels = {TEAM_LABEL: team.name, "app.kubernetes.io/part-of": "trainforge"}
    subject = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group(team.name)}]
    cq_role = f"trainforge-team-{team.name}-queue"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": ROLE, "namespace": namespace, "labels": labels},
            "rules": role_rules(team.access.create_jobs),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": ROLE, "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": cq_role, "labels": labels},
            "rules": [
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["clusterqueues"],
                    "resourceNames": [cluster_queue_name(team.name)],
                    "verbs": ["get"],
                },
                # the nodes its flavors stand for (labels, taints): `trainforge wait/why` ask
                # Kueue's flavor assignment which one a pending job waits for (live/wait.py)
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["resourceflavors"],
                    "verbs": ["get"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cq_role, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cq_role,
            },
            "subjects": subject,
        },
    ]


def declare(
    name: str,
    team: TeamConfig,
    namespace: pulumi.Output[str],
    cluster_name: pulumi.Input[str] | None,
    child: pulumi.ResourceOptions,
    parent: pulumi.Resource,
) -> None:
    """The team's RBAC, and an access entry per principal (when the cluster is known)."""
    if not team.access.principals:
        return
    for obj in rbac_objects(team, team.name):
        kind = obj["kind"]
        meta = dict(obj["metadata"])
        if "namespace" in meta:
            meta["namespace"] = namespace
        cls = getattr(k8s.rbac.v1, kind)
        extra = {"rules": obj["rules"]} if "rules" in obj else {}
        if "roleRef" in obj:
            extra = {"role_ref": obj["roleRef"], "subjects": obj["subjects"]}
        cls(f"{name}-{team.name}-{kind.lower()}", metadata=meta, **extra, opts=child)
    if cluster_name is None:
        return
    for i, arn in enumerate(team.access.principals):
        aws.eks.AccessEntry(
            f"{name}-{team.name}-access-{i}",
            cluster_name=cluster_name,
            principal_arn=arn,
            type="STANDARD",
            kubernetes_groups=[group(team.name)],
            opts=pulumi.ResourceOptions(parent=parent),
        )
