"""`PlatformServices`: everything a cluster needs before it can train, as one component.

Why one component: the platform core composes a single object. What jobs need of each team
is published by the platform as a typed contract (`trainforge.platform.published`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.core.contract import PoolFacts
from trainforge.core.labels import PRIVILEGED_REASON
from trainforge.platform.checkpoint_bucket import CheckpointBucket, CheckpointBucketArgs
from trainforge.platform.device_plugins import DevicePlugins, DevicePluginsArgs
from trainforge.platform.fsx import FsxLustre, FsxLustreArgs
from trainforge.platform.kueue import NAMESPACE as KUEUE_NAMESPACE
from trainforge.platform.kueue import Kueue, KueueArgs
from trainforge.platform.monitoring import MLFLOW_NAMESPACE, Monitoring, MonitoringArgs
from trainforge.platform.opencost import team_budgets
from trainforge.platform.placement import (
    NODE_AGENTS_NAMESPACE,
    PRIVILEGED_NAMESPACE_REASON,
    psa_labels,
)
from trainforge.platform.published import team_facts
from trainforge.platform.services_config import ServicesConfig
from trainforge.platform.tags import services_tags
from trainforge.platform.teams import (
    TRAINING_SERVICE_ACCOUNT,
    TeamNamespaces,
    TeamNamespacesArgs,
)
from trainforge.platform.trainer import KubeflowTrainer, KubeflowTrainerArgs
from trainforge.platform.training_operator import TrainingOperator, TrainingOperatorArgs


@dataclass
class PlatformServicesArgs:
    """What the services need from the cluster (the platform core provides all of it)."""

    config: ServicesConfig
    cluster_name: pulumi.Input[str]
    k8s_provider: k8s.Provider
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    node_security_group_ids: list[pulumi.Input[str]]
    region: str
    account_id: str
    partition: str = "aws"
    # Customer KMS key for FSx (PERSISTENT_2) and the checkpoint bucket; None creates one
    # with yearly rotation.
    kms_key_arn: pulumi.Input[str] | None = None
    # Accepted for completeness; deliberately granted nothing: pods reach S3 through their
    # own Pod Identity roles, never through the node role.
    node_role_arn: pulumi.Input[str] | None = None
    gpu_nodes: bool = True
    efa_nodes: bool = False
    # Names of node groups/pools with EFA: their nodes (label `trainforge.io/pool`) get the
    # EFA device plugin even when they lack `vpc.amazonaws.com/efa.present=true`.
    efa_pool_names: list[str] = field(default_factory=list)
    # FSx lives in one subnet/AZ: put GPU node pools in the same AZ for bandwidth and cost.
    fsx_subnet_index: int = 0
    # When set, the training operator gets its own provider with server-side apply forced on.
    kubeconfig: pulumi.Input[str] | None = None
    # Every node group and Karpenter pool (Kueue flavors, team quotas per pool).
    pools: list[PoolFacts] = field(default_factory=list)
    # Karpenter's namespace when it runs (its metrics feed the capacity alerts).
    karpenter_namespace: str | None = None
    # S3's address ranges (HTTPS egress of training namespaces) and the S3 gateway endpoint
    # (the checkpoint bucket refuses team roles that do not come through it); None: no endpoint.
    s3_cidrs: list[str] = field(default_factory=list)
    # Where the VPC's interface endpoints answer (network.endpoint_cidrs); empty: the VPC CIDR
    endpoint_cidrs: list[pulumi.Input[str]] = field(default_factory=list)
    s3_vpc_endpoint_id: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # AdmissionChecks the team ClusterQueues list (a fleet manager's: platform/fleet.py)
    admission_checks: tuple[str, ...] = ()


class PlatformServices(pulumi.ComponentResource):
    """FSx, checkpoint bucket, job controllers, device plugins, monitoring and teams."""

    checkpoint_bucket_name: pulumi.Output[str] | None
    mlflow_tracking_uri: str | None
    fsx_mount_path: str

    def __init__(
        self, name: str, args: PlatformServicesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:PlatformServices", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        tags = services_tags(args.tags)

        persistent_fsx = cfg.fsx.enabled and cfg.fsx.deployment_type == "PERSISTENT_2"
        self.kms_key: aws.kms.Key | None = None
        kms_key_arn = args.kms_key_arn
        if kms_key_arn is None and (persistent_fsx or cfg.checkpoints.enabled):
            self.kms_key = aws.kms.Key(
                f"{name}-data",
                description="trainforge: FSx for Lustre and checkpoint bucket encryption",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                tags=tags,
                # The bucket outlives a destroy (retained), so must its key: a key scheduled
                # for deletion makes every surviving checkpoint unreadable 30 days later, and
                # FSx backups are encrypted with it too. Protected and retained.
                opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
            )
            kms_key_arn = self.kms_key.arn
        self.kms_key_arn = kms_key_arn

        self.team_namespaces = TeamNamespaces(
            f"{name}-teams",
            TeamNamespacesArgs(
                teams=list(cfg.teams),
                k8s_provider=args.k8s_provider,
                monitoring_namespace=cfg.monitoring.namespace,
                mlflow_namespace=MLFLOW_NAMESPACE if cfg.mlflow.enabled else None,
                vpc_cidr=args.vpc_cidr,
                s3_cidrs=list(args.s3_cidrs),
                endpoint_cidrs=list(args.endpoint_cidrs),
                pools=list(args.pools),
                kueue_enabled=cfg.kueue.enabled,
                cluster_name=args.cluster_name,
            ),
            opts=child,
        )
        namespaces = self.team_namespaces.namespaces

        # The one platform namespace that admits privileged pods: node agents only.
        k8s_child = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.node_agents = k8s.core.v1.Namespace(
            f"{name}-node-agents",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=NODE_AGENTS_NAMESPACE,
                labels=psa_labels("privileged", PRIVILEGED_NAMESPACE_REASON),
                annotations={PRIVILEGED_REASON: PRIVILEGED_NAMESPACE_REASON},
            ),
            opts=k8s_child,
        )

        self.monitoring = Monitoring(
            f"{name}-monitoring",
            MonitoringArgs(
                config=cfg.monitoring,
                mlflow=cfg.mlflow,
                k8s_provider=args.k8s_provider,
                gpu_nodes=args.gpu_nodes,
                team_namespaces=dict(namespaces),
                node_agents_namespace=self.node_agents.metadata.name,
                kueue_namespace=KUEUE_NAMESPACE if cfg.kueue.enabled else None,
                karpenter_namespace=args.karpenter_namespace,
                cluster_name=args.cluster_name,
                team_budgets=team_budgets({t.name for t in cfg.teams}),
            ),
            opts=child,
        )
        self.mlflow_tracking_uri = self.monitoring.mlflow_tracking_uri

        self.kueue: Kueue | None = None
        if cfg.kueue.enabled:
            self.kueue = Kueue(
                f"{name}-kueue",
                KueueArgs(
                    config=cfg.kueue,
                    teams=list(cfg.teams),
                    pools=list(args.pools),
                    k8s_provider=args.k8s_provider,
                    team_namespaces=dict(namespaces),
                    selected_namespaces=list(self.team_namespaces.namespace_objects),
                    admission_checks=tuple(args.admission_checks),
                ),
                opts=child,
            )

        self.fsx: FsxLustre | None = None
        self.fsx_mount_path = cfg.fsx.mount_path
        if cfg.fsx.enabled:
            subnets = args.private_subnet_ids
            self.fsx = FsxLustre(
                f"{name}-fsx",
                FsxLustreArgs(
                    config=cfg.fsx,
                    cluster_name=args.cluster_name,
                    vpc_id=args.vpc_id,
                    subnet_id=subnets[min(args.fsx_subnet_index, len(subnets) - 1)],
                    node_security_group_ids=list(args.node_security_group_ids),
                    k8s_provider=args.k8s_provider,
                    partition=args.partition,
                    account_id=args.account_id,
                    kms_key_arn=kms_key_arn if persistent_fsx else None,
                    team_namespaces=dict(namespaces),
                    team_ids={
                        n: (f.run_as_user, f.run_as_group) for n, f in team_facts(cfg).items()
                    },
                    tags=tags,
                ),
                opts=child,
            )

        self.checkpoints: CheckpointBucket | None = None
        self.checkpoint_bucket_name = None
        if cfg.checkpoints.enabled:
            self.checkpoints = CheckpointBucket(
                f"{name}-ckpt",
                CheckpointBucketArgs(
                    config=cfg.checkpoints,
                    cluster_name=args.cluster_name,
                    kms_key_arn=kms_key_arn,
                    partition=args.partition,
                    account_id=args.account_id,
                    region=args.region,
                    teams={
                        t.name: (namespaces[t.name], TRAINING_SERVICE_ACCOUNT) for t in cfg.teams
                    },
                    s3_vpc_endpoint_id=args.s3_vpc_endpoint_id,
                    tags=tags,
                ),
                opts=child,
            )
            self.checkpoint_bucket_name = self.checkpoints.bucket_name

        # The job backends' controllers: only those the config's jobs use (`job_backends`);
        # indexed-job needs none. `trainingOperator.enabled: false` means "already installed".
        self.training_operator: TrainingOperator | None = None
        if cfg.training_operator.enabled and "pytorchjob" in cfg.job_backends:
            self.training_operator = TrainingOperator(
                f"{name}-training-operator",
                TrainingOperatorArgs(
                    config=cfg.training_operator,
                    k8s_provider=args.k8s_provider,
                    kubeconfig=args.kubeconfig,
                ),
                opts=child,
            )

        self.trainer: KubeflowTrainer | None = None
        if "trainjob" in cfg.job_backends:
            self.trainer = KubeflowTrainer(
                f"{name}-trainer",
                KubeflowTrainerArgs(k8s_provider=args.k8s_provider, kubeconfig=args.kubeconfig),
                opts=child,
            )
        # What a job of each backend waits for: its controller (CRDs, webhook, runtimes).
        self.backend_ready: dict[str, tuple[pulumi.Resource, ...]] = {
            "pytorchjob": (self.training_operator,) if self.training_operator else (),
            "trainjob": (self.trainer,) if self.trainer else (),
        }

        # What a job's PodMonitor waits for: the release installing monitoring.coreos.com.
        self.monitor_ready: tuple[pulumi.Resource, ...] = (
            (self.monitoring.stack,) if self.monitoring.stack is not None else ()
        )

        self.device_plugins = DevicePlugins(
            f"{name}-device-plugins",
            DevicePluginsArgs(
                config=cfg.device_plugins,
                k8s_provider=args.k8s_provider,
                gpu_nodes=args.gpu_nodes,
                efa_nodes=args.efa_nodes,
                efa_pool_names=list(args.efa_pool_names),
            ),
            opts=child,
        )

        # What each team's jobs wait for: the Job that makes the team's FSx directory theirs,
        # and what their pods name (the team's claim, ServiceAccount, MLflow credentials):
        # the plan's existence rehearsal (trainforge.plan.checks.existence) checks each edge.
        self.team_ready: dict[str, tuple[pulumi.Resource, ...]] = {
            t.name: (
                *(self.fsx.team_ready(t.name) if self.fsx else ()),
                *(
                    (self.team_namespaces.service_accounts[t.name],)
                    if t.name in self.team_namespaces.service_accounts
                    else ()
                ),
                *(
                    (self.monitoring.team_secrets[t.name],)
                    if t.name in self.monitoring.team_secrets
                    else ()
                ),
            )
            for t in cfg.teams
        }
        self.register_outputs(
            {
                "checkpointBucket": self.checkpoint_bucket_name or "",
                "fsxFileSystemId": self.fsx.file_system_id if self.fsx else "",
                "mlflowTrackingUri": self.mlflow_tracking_uri or "",
                "teams": sorted(t.name for t in cfg.teams),
            }
        )
