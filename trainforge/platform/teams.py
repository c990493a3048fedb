"""Team namespaces: fair sharing and isolation between the teams that train on the cluster.

Each team gets a namespace (named after the team) with:
- Pod Security Admission: `restricted` warned and audited, `baseline` enforced by default.
  trainforge's own containers qualify for `restricted` (non-root, no privilege escalation, ALL
  capabilities dropped, RuntimeDefault seccomp; EFA needs no privileges through the device
  plugin; /dev/shm is a memory emptyDir), but the training operator v1 injects an
  `init-pytorch` container (no securityContext) into the Worker pods of Master/Worker
  PyTorchJobs, which `restricted` would reject. Teams that only run elastic (Worker-only)
  jobs can set `podSecurity: restricted`.
- a ResourceQuota (GPUs, CPU and memory requests and limits, pods) and a LimitRange giving
  containers that do not say what they need default requests/limits (the quota on limits
  would otherwise reject them). With Kueue, the queue is what admits jobs, pool by pool; the
  quota is the hard backstop over all pools: the team's total (its GPUs wherever they run,
  the CPU and memory that come with them, its CPU-pool quota) plus what it may borrow from
  its cohort (queues.namespace_quota; the mapping is in docs/teams.md, "Quota").
- NetworkPolicies: deny all by default; allow traffic between the team's own pods (NCCL,
  rendezvous), DNS to kube-system, scraping of the `metrics` port from the monitoring
  namespace, the EKS Pod Identity agent (credentials), HTTPS to the VPC's interface
  endpoints (addresses in the VPC CIDR) and to S3 through its gateway endpoint (S3's
  address ranges from the region's managed prefix list), and MLflow when it is enabled.
  Nothing else: no `0.0.0.0/0` (tests/platform/test_team_isolation.py).
- a `training` ServiceAccount (no API token: training pods do not talk to the Kubernetes API;
  Pod Identity injects its own token).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core.contract import GPU_RESOURCE, PoolFacts
from trainforge.core.labels import NAMESPACE_NAME
from trainforge.core.pod_security import AUDIT as PSA_AUDIT
from trainforge.core.pod_security import ENFORCE as PSA_ENFORCE
from trainforge.core.pod_security import ENFORCE_VERSION as PSA_ENFORCE_VERSION
from trainforge.core.pod_security import WARN as PSA_WARN
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.platform import team_access, team_identity
from trainforge.platform.services_config import TeamConfig

TRAINING_SERVICE_ACCOUNT = "training"
QUOTA_NAME = "team-quota"
LIMIT_RANGE_NAME = "container-defaults"
# Namespaces whose Jobs Kueue manages (its managedJobsNamespaceSelector, which the chart also
# makes its job webhooks' namespaceSelector): the team namespaces and the acceptance tests'.
QUEUED_LABEL = "trainforge.io/queued"
NS_NAME_LABEL = NAMESPACE_NAME
# EKS Pod Identity agent (link-local, on every node): serves the role's credentials.
POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
# The one ingress a team namespace admits from outside: the monitoring namespace's scrape of
# the `metrics` port. Not the API server's pod proxy: it connects from the control plane's
# ENIs, which no NetworkPolicy selector can name (aws-network-policy-agent#281, 2024-07-26:
# "no easy way to select API Server (control plane) IPs"), and an ipBlock of their subnets
# (the node subnets, where pods get their addresses too) would admit every team's pods.
# `trainforge status` says so when it cannot read rank 0's metrics (live.gather).
METRICS_SCRAPE_POLICY = "allow-metrics-scrape"


def quota_hard(
    team: TeamConfig,
    teams: list[TeamConfig] | None = None,
    pools: list[PoolFacts] | None = None,
    kueue_enabled: bool = False,
) -> dict[str, str]:
    """The ResourceQuota `hard` limits for a team: its total over the pools, with Kueue plus
    what it may borrow (trainforge.platform.queues.namespace_quota)."""
    from trainforge.platform.queues import namespace_quota  # noqa: PLC0415

    q = team.quota
    held = namespace_quota(team, teams or [team], pools or [], kueue_enabled)
    return {
        f"requests.{GPU_RESOURCE}": held["gpus"],
        "requests.cpu": held["cpu"],
        "limits.cpu": held["cpu"],
        "requests.memory": held["memory"],
        "limits.memory": held["memory"],
        "pods": q.pods,
    }


def network_policies(
    namespace: str,
    monitoring_namespace: str | None,
    mlflow_namespace: str | None,
    vpc_cidr: pulumi.Input[str] | None = None,
    s3_cidrs: list[str] | None = None,
    endpoint_cidrs: list[pulumi.Input[str]] | None = None,
) -> list[dict]:
    """The team's NetworkPolicy specs as plain dicts: name -> spec.

    Egress beyond the namespace is HTTPS to the VPC's interface endpoints (their own subnets,
    `endpoint_cidrs`: not the node subnets, where the API server's ENIs are; without them, the
    VPC CIDR) and to S3's address ranges (the gateway endpoint), the Pod Identity agent, DNS
    and MLflow. Team pods need no Kubernetes API (no ServiceAccount token is mounted).
    """
    same_ns = [{"podSelector": {}}]
    policies = [
        {"name": "default-deny", "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}},
        {
            "name": "allow-same-namespace",
            "spec": {
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": same_ns}],
                "egress": [{"to": same_ns}],
            },
        },
        {
            "name": "allow-dns",
            "spec": {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {NS_NAME_LABEL: "kube-system"}
                                },
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                            }
                        ],
                        "ports": [
                            {"protocol": "UDP", "port": 53},
                            {"protocol": "TCP", "port": 53},
                        ],
                    }
                ],
            },
        },
        {
            "name": "allow-aws-endpoints",
            "spec": {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT_CIDR}}],
                        "ports": [{"protocol": "TCP", "port": 80}],
                    }
                ],
            },
        },
    ]
    https = [{"protocol": "TCP", "port": 443}]
    aws_egress = policies[-1]["spec"]["egress"]
    if endpoint_cidrs:
        # Interface VPC endpoints (STS, ECR, EKS auth, ...) answer in their own subnets.
        aws_egress.append(
            {"to": [{"ipBlock": {"cidr": c}} for c in endpoint_cidrs], "ports": list(https)}
        )
    elif vpc_cidr:
        # ... or, where they share the node subnets, somewhere in the VPC.
        aws_egress.append({"to": [{"ipBlock": {"cidr": vpc_cidr}}], "ports": https})
    if s3_cidrs:
        # S3 through the gateway endpoint answers on S3's own address ranges.
        aws_egress.append(
            {"to": [{"ipBlock": {"cidr": c}} for c in s3_cidrs], "ports": list(https)}
        )
    if monitoring_namespace:
        policies.append(
            {
                "name": METRICS_SCRAPE_POLICY,
                "spec": {
                    "podSelector": {},
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {
                            "from": [
                                {
                                    "namespaceSelector": {
                                        "matchLabels": {NS_NAME_LABEL: monitoring_namespace}
                                    }
                                }
                            ],
                            # the training runtime's named container port
                            "ports": [{"protocol": "TCP", "port": "metrics"}],
                        }
                    ],
                },
            }
        )
    if mlflow_namespace:
        policies.append(
            {
                "name": "allow-mlflow",
                "spec": {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {
                            "to": [
                                {
                                    "namespaceSelector": {
                                        "matchLabels": {NS_NAME_LABEL: mlflow_namespace}
                                    }
                                }
                            ],
                            "ports": [{"protocol": "TCP", "port": 5000}],
                        }
                    ],
                },
            }
        )
    return policies


def limit_range_spec(team: TeamConfig) -> dict:
    d = team.defaults
    return {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": d.cpu_limit, "memory": d.memory_limit},
                "defaultRequest": {"cpu": d.cpu_request, "memory": d.memory_request},
            }
        ]
    }


@dataclass
class TeamNamespacesArgs:
    teams: list[TeamConfig]
    k8s_provider: k8s.Provider
    monitoring_namespace: str | None = "monitoring"
    mlflow_namespace: str | None = None
    vpc_cidr: pulumi.Input[str] | None = None
    # S3's address ranges (the region's managed prefix list): HTTPS egress to S3
    s3_cidrs: list[str] = field(default_factory=list)
    # Where the interface endpoints answer (their own subnets); empty: the whole VPC CIDR
    endpoint_cidrs: list[pulumi.Input[str]] = field(default_factory=list)
    # with Kueue, the quota backstop is what the team's queue may admit over these pools
    pools: list[PoolFacts] = field(default_factory=list)
    kueue_enabled: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    # the EKS cluster: teams' access entries (team_access.py); None declares RBAC only
    cluster_name: pulumi.Input[str] | None = None


class TeamNamespaces(pulumi.ComponentResource):
    """Namespace, quota, limits, network policies and training ServiceAccount per team."""

    namespaces: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: TeamNamespacesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:TeamNamespaces", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.namespaces = {}
        # The Namespace objects themselves (Kueue's release waits for their labels: kueue.py)
        self.namespace_objects: list[k8s.core.v1.Namespace] = []
        # team -> its jobs' ServiceAccount (the jobs name it, so they wait for it)
        self.service_accounts: dict[str, k8s.core.v1.ServiceAccount] = {}
        for team in args.teams:
            t = team.name
            ns = k8s.core.v1.Namespace(
                f"{name}-{t}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=t,
                    labels={
                        **args.labels,
                        TEAM_LABEL: t,
                        QUEUED_LABEL: "true",
                        PSA_ENFORCE: team.pod_security,
                        PSA_ENFORCE_VERSION: "latest",
                        PSA_AUDIT: "restricted",
                        PSA_WARN: "restricted",
                    },
                ),
                opts=child,
            )
            namespace = ns.metadata.name
            self.namespaces[t] = namespace
            self.namespace_objects.append(ns)
            meta = lambda n, ns=namespace, t=t: k8s.meta.v1.ObjectMetaArgs(  # noqa: E731
                name=n, namespace=ns, labels={TEAM_LABEL: t}
            )
            k8s.core.v1.ResourceQuota(
                f"{name}-{t}-quota",
                metadata=meta(QUOTA_NAME),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(
                    hard=quota_hard(team, args.teams, args.pools, args.kueue_enabled)
                ),
                opts=child,
            )
            k8s.core.v1.LimitRange(
                f"{name}-{t}-limits",
                metadata=meta(LIMIT_RANGE_NAME),
                spec=limit_range_spec(team),
                opts=child,
            )
            policies = network_policies(
                t,
                args.monitoring_namespace,
                args.mlflow_namespace,
                args.vpc_cidr,
                args.s3_cidrs,
                endpoint_cidrs=args.endpoint_cidrs,
            )
            for pol in policies:
                k8s.networking.v1.NetworkPolicy(
                    f"{name}-{t}-{pol['name']}",
                    metadata=meta(pol["name"]),
                    spec=pol["spec"],
                    opts=child,
                )
            self.service_accounts[t] = k8s.core.v1.ServiceAccount(
                f"{name}-{t}-sa",
                metadata=meta(TRAINING_SERVICE_ACCOUNT),
                automount_service_account_token=False,
                opts=child,
            )
            # its pods run as its own UID/GID, enforced by the API server (team_identity.py)
            team_identity.declare(
                name, t, team.run_as_user, team.run_as_group, {TEAM_LABEL: t}, child
            )
            # who may use the cluster as this team, and what they may do
            team_access.declare(name, team, namespace, args.cluster_name, child, self)
        self.register_outputs({"namespaces": self.namespaces})
