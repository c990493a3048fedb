"""TrainingPlatform: the top component (network, cluster, GPU/EFA node groups, Karpenter,
and the platform services when that module is present).

Why one component: `__main__.py` stays a few lines, other Pulumi languages get one typed
resource to use, and jobs read everything they need (pool facts, the Kubernetes provider,
team wiring) from one object. Config is validated and instance types are looked up before
any resource is registered.
"""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.core import image_routes
from trainforge.core.contract import PlatformContract, PoolFacts, record
from trainforge.platform import capacity_placement
from trainforge.platform.acceptance import AcceptanceTests, AcceptanceTestsArgs, check_acceptance
from trainforge.platform.cluster import SYSTEM_LABEL, Cluster, ClusterArgs
from trainforge.platform.config import ConfigError, PlatformConfig, parse_config, resolve_all
from trainforge.platform.fleet import (
    Fleet,
    FleetArgs,
    ManagerReads,
    admission_checks,
    read_manager,
    worker_backends,
)
from trainforge.platform.karpenter import Karpenter, KarpenterArgs
from trainforge.platform.network import Network, NetworkArgs
from trainforge.platform.node_groups import GpuNodeGroup, GpuNodeGroupArgs
from trainforge.platform.node_health import NodeHealth, NodeHealthArgs
from trainforge.platform.published import contract_from_config, pool_facts
from trainforge.platform.stack_check import pool_label_problems
from trainforge.platform.tags import resource_tags
from trainforge.stack import component_args
from trainforge.stack.platform import (
    AcceptanceTestConfig,
    EndpointConfig,
    ImagesConfig,
    KarpenterConfig,
    NetworkConfig,
    NodeGroupConfig,
    NodeHealthConfig,
    NodePoolConfig,
    PlatformKeys,
    PoolLimitsKeys,
    SystemNodeGroupConfig,
    TaintKeys,
)
from trainforge.stack.services import ServiceKeys

__all__ = ["TrainingPlatform", "TrainingPlatformArgs", "config_from_args", "pool_facts"]


# --- args: TypedDicts generated from the stack model (the provider host's schema reads them)
_ARGS = component_args.generate(
    PlatformKeys,
    "TrainingPlatformArgs",
    module="trainforge.platform.training_platform_args",
    doc="The same settings as the `trainforge:` stack config (docs/configuration.md).",
    # the names other languages have used since the first schema
    names={
        NetworkConfig: "NetworkConfigArgs",
        SystemNodeGroupConfig: "SystemNodeGroupArgs",
        AcceptanceTestConfig: "AcceptanceTestArgs",
        TaintKeys: "TaintArgs",
        NodeGroupConfig: "NodeGroupArgs",
        PoolLimitsKeys: "PoolLimitsArgs",
        NodePoolConfig: "NodePoolArgs",
        KarpenterConfig: "KarpenterSettingsArgs",  # KarpenterArgs is the component's own
        NodeHealthConfig: "NodeHealthSettingsArgs",
        ImagesConfig: "ImagesArgs",
    },
    flatten=("endpoint",),  # public_access_cidrs, deploy_from: top-level arguments
    extra=((ServiceKeys, "job_backend"), (ServiceKeys, "job_backends")),
)
if TYPE_CHECKING:  # a type built at import: plain data to a type checker
    TrainingPlatformArgs = dict[str, Any]
else:
    TrainingPlatformArgs = _ARGS["TrainingPlatformArgs"]
_ENDPOINT = [f.alias or n for n, f in EndpointConfig.model_fields.items()]  # stack keys


def _to_config(value: Any, top: bool = False) -> Any:
    if isinstance(value, dict):
        out = {component_args.camel(k): _to_config(v) for k, v in value.items()}
        endpoint = {k: out.pop(k) for k in _ENDPOINT if top and k in out}
        if endpoint:  # the endpoint's keys, flattened among the arguments
            out["endpoint"] = endpoint
        return out
    if isinstance(value, list):
        return [_to_config(v) for v in value]
    return value


def config_from_args(args: TrainingPlatformArgs | dict) -> PlatformConfig:
    """Component args (snake_case, as other languages send them) -> validated PlatformConfig."""
    return parse_config(_to_config(dict(args), top=True))


class TrainingPlatform(pulumi.ComponentResource):
    """An EKS training cluster with GPU/EFA capacity, Karpenter and the platform services."""

    cluster_name: pulumi.Output[str]
    """The EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig for the cluster (secret)."""
    node_role_name: pulumi.Output[str]
    """IAM role of Karpenter-launched nodes."""
    interruption_queue_name: pulumi.Output[str]
    """SQS queue Karpenter reads interruption events from."""
    pool_names: pulumi.Output[list[str]]
    """Names of every node group and Karpenter pool."""

    def __init__(
        self,
        name: str,
        args: TrainingPlatformArgs,
        opts: pulumi.ResourceOptions | None = None,
    ):
        # 1. Validate and look up instance types before anything is registered.
        config = args if isinstance(args, PlatformConfig) else config_from_args(args)
        type_facts = resolve_all(config)
        labels = pool_label_problems(config, type_facts)  # also for Python callers
        if labels:
            raise ConfigError(labels)
        self.config = config
        self.node_pools: dict[str, PoolFacts] = pool_facts(config, type_facts)
        check_acceptance(config, self.node_pools)

        super().__init__("trainforge:index:TrainingPlatform", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = resource_tags(config)

        fsx = config.services is not None and config.services.fsx.enabled
        repo = config.services.fsx.data_repository if fsx and config.services else None
        # the data repository's bucket may be another account's: the S3 endpoint names it
        buckets = (
            (repo.data_repository_path.removeprefix("s3://").split("/", 1)[0],) if repo else ()
        )
        self.network = Network(
            f"{name}-net", NetworkArgs(config.cluster, config.network, tags, fsx, buckets), child
        )
        # a fleet worker's endpoint also admits its manager's egress addresses (read now)
        fleet = config.fleet
        manager = (
            read_manager(fleet, self) if fleet is not None and fleet.worker_role else ManagerReads()
        )
        fleet_cidrs = manager.cidrs
        self.cluster = Cluster(
            f"{name}-eks",
            ClusterArgs(
                config,
                self.network.vpc_id,
                self.network.private_subnet_ids,
                tags,
                fleet_cidrs=fleet_cidrs,
            ),
            child,
        )
        # Every Kubernetes object waits for nodes and networking (charts need schedulable
        # nodes and working DNS), so the provider depends on them.
        self.k8s_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.cluster.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.cluster.system_node_group, *self.cluster.addons.values()],
            ),
        )
        self.node_groups: dict[str, GpuNodeGroup] = {}
        for g in config.node_groups:
            self.node_groups[g.name] = GpuNodeGroup(
                f"{name}-{g.name}",
                GpuNodeGroupArgs(
                    cluster_name=config.cluster,
                    config=g,
                    facts=type_facts[g.name],
                    node_role_arn=self.cluster.node_role.arn,
                    node_security_group_id=self.cluster.node_security_group_id,
                    vpc_id=self.network.vpc_id,
                    subnet_ids=self.network.private_subnet_ids,
                    tags=tags,
                    auto_repair=config.node_health.auto_repair,
                    subnet_zones=self.network.private_subnet_zones,
                    where=f"trainforge:nodeGroups[{config.node_groups.index(g)}]",
                    fsx_startup_taint=config.services is not None and config.services.fsx.enabled,
                ),
                pulumi.ResourceOptions(parent=self, depends_on=[self.cluster.eks]),
            )
        # GPU node health: the node monitoring agent on every node
        self.node_health: NodeHealth | None = None
        if config.node_health.monitoring_agent:
            self.node_health = NodeHealth(
                f"{name}-node-health",
                NodeHealthArgs(
                    cluster_name=self.cluster.cluster_name,
                    tags=tags,
                    depends_on=[self.cluster.eks, self.cluster.system_node_group],
                ),
                child,
            )
        self.karpenter: Karpenter | None = None
        if config.karpenter.enabled:
            self.karpenter = Karpenter(
                f"{name}-karpenter",
                KarpenterArgs(
                    config=config,
                    facts=type_facts,
                    node_security_group_id=self.cluster.node_security_group_id,
                    vpc_id=self.network.vpc_id,
                    private_subnet_ids=self.network.private_subnet_ids,
                    k8s_provider=self.k8s_provider,
                    depends_on=[self.cluster.eks, self.cluster.system_node_group],
                    tags=tags,
                    subnet_zones=self.network.private_subnet_zones,
                ),
                child,
            )
        self.system_node_selector = {SYSTEM_LABEL: "true"}
        # Images (docs/images.md): the ECR pull-through cache and the runtime images, set up
        # before anything that runs a pod; what runs a pod is declared with its routes current
        # (image_routes.routing), so every pod's image is pulled through the cache.
        self.images, self.image_cache = self._images(name, config, tags)
        cache = self.images.routes if self.images is not None else None
        if (rec := record()) is not None:  # a plan run: its checks rebuild pods with them
            rec.image_routes = cache

        # Services (FSx, checkpoint bucket, operator, device plugins, monitoring, teams) are
        # owned by the services engineer; composed here when their config was parsed.
        self.services = None
        if config.services is not None:
            with image_routes.routing(cache):  # their images through the cache
                self.services = self._services(name, config, tags)
        services = self.services
        # A MultiKueue fleet (platform/fleet.py): a worker's identity for its manager, or a
        # manager's MultiKueue objects; Kueue (its namespace, CRDs, webhooks) comes first.
        self.fleet: Fleet | None = None
        if fleet is not None:
            self.fleet = Fleet(
                f"{name}-fleet",
                FleetArgs(
                    fleet=fleet,
                    cluster=config.cluster,
                    k8s_provider=self.k8s_provider,
                    cluster_kubeconfig=self.cluster.kubeconfig,
                    region=aws.get_region().region,
                    backends=worker_backends(config.services),
                    egress_ips=self.network.nat_public_ips,
                    manager_checkpoints=manager.checkpoints,
                    manager_config_maps=manager.config_maps,
                    namespaces_ready=[services.team_namespaces] if services is not None else [],
                    team_roles=dict(services.checkpoints.team_roles)
                    if services is not None and services.checkpoints is not None
                    else {},
                    checkpoints=self._fleet_checkpoints(fleet, services),
                    depends_on=[services.kueue] if services and services.kueue else [],
                ),
                child,
            )
        # On-demand acceptance tests of GPU pools: suspended CronJobs
        self.acceptance: AcceptanceTests | None = None
        if any(g.acceptance.enabled for g in (*config.node_groups, *config.node_pools)):
            with image_routes.routing(cache):
                self.acceptance = AcceptanceTests(
                    f"{name}-acceptance",
                    AcceptanceTestsArgs(
                        config=config,
                        pools=self.node_pools,
                        k8s_provider=self.k8s_provider,
                        depends_on=[services] if services is not None else [],
                        cohort=self._acceptance_cohort(config),
                    ),
                    child,
                )
        # What jobs read: pools, teams, storage, bucket, MLflow, backends. Python only (not a
        # component output: the schema analyzer turns annotated attributes into outputs).
        self.contract: PlatformContract = contract_from_config(
            config,
            type_facts,
            checkpoint_bucket=services.checkpoint_bucket_name if services is not None else None,
            k8s_provider=self.k8s_provider,
            team_ready=services.team_ready if services is not None else None,
            # Jobs carry a queue label: Kueue's webhook and their team's LocalQueue must exist
            # before a job does, or it would start unqueued.
            ready=(
                *((services.kueue,) if services is not None and services.kueue else ()),
                # and the runtime images they run must have been pushed
                *(self.images.ready if self.images is not None else ()),
            ),
            # Jobs need their backend's CRDs and webhook first.
            backend_ready=services.backend_ready if services is not None else None,
            images=self.images,
            # A job's PodMonitor needs the monitoring release's CRD first.
            monitor_ready=services.monitor_ready if services is not None else (),
        )
        if (rec := record()) is not None:  # a plan run: its checks read the typed contract
            rec.contracts.append(self.contract)

        self.cluster_name = self.cluster.cluster_name
        self.kubeconfig = self.cluster.kubeconfig
        if self.karpenter is not None:
            self.node_role_name = self.karpenter.node_role_name
            self.interruption_queue_name = self.karpenter.interruption_queue_name
        else:
            self.node_role_name = self.cluster.node_role.name
            self.interruption_queue_name = pulumi.Output.from_input("")
        self.pool_names = pulumi.Output.from_input(list(self.node_pools))
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "nodeRoleName": self.node_role_name,
                "interruptionQueueName": self.interruption_queue_name,
                "poolNames": self.pool_names,
            }
        )

    @staticmethod
    def _fleet_checkpoints(fleet: Any, services: Any) -> dict[str, Any] | None:
        """A manager's checkpoint bucket as its workers need it (`fleetCheckpoints`, granted
        to their team roles: platform/fleet.py); None on a worker or without a bucket."""
        if not fleet.manager_role or services is None or services.checkpoints is None:
            return None
        return {
            "bucketName": services.checkpoints.bucket_name,
            "bucketArn": services.checkpoints.bucket_arn,
            "kmsKeyArn": services.kms_key_arn,
            "region": aws.get_region().region,
        }

    def _images(self, name: str, config: PlatformConfig, tags: dict[str, str]) -> Any:
        from trainforge.platform.image_cache import ImageCache, ImageCacheArgs  # noqa: PLC0415
        from trainforge.platform.published import images_from_config  # noqa: PLC0415

        region = aws.get_region().region
        account = aws.get_caller_identity().account_id
        images = images_from_config(config, image_routes.registry_host(account, region))
        routes = images.routes if images is not None else None
        roles = [self.cluster.node_role.name]
        if self.karpenter is not None:
            roles.append(self.karpenter.node_role_name)
        cache = ImageCache(
            f"{name}-images",
            ImageCacheArgs(
                config=config.images,
                cluster=config.cluster,
                region=region,
                account_id=account,
                partition=aws.get_partition().partition,
                routes=routes,
                images=images,
                node_role_names=roles,
                tags=tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        if images is not None and cache.builds:
            images = replace(images, ready=tuple(cache.builds))
        return images, cache

    @staticmethod
    def _acceptance_cohort(config: PlatformConfig) -> str | None:
        """The cohort the acceptance runs queue in: the teams' (the first by name when they
        use several); None without Kueue or teams (the runs are not queued then)."""
        services = config.services
        if services is None or not services.kueue.enabled or not services.teams:
            return None
        return sorted({t.cohort for t in services.teams})[0]

    def _efa_zone_index(self, config: PlatformConfig) -> int:
        """The private subnet of the first EFA pool or (unreserved) EFA group: the first zone
        offering its instance types (as its own placement picks it), else subnet 0."""
        zones = self.network.private_subnet_zones
        groups = [
            g.instance_types
            for g in config.node_groups
            if g.efa and not g.capacity_reservation_id and not g.subnet_id
        ]
        pools = [p.instance_types for p in config.node_pools if p.efa]
        for types in (*pools, *groups):
            if zones:
                return capacity_placement.zone_index("trainforge:fsx", types, zones)
        return 0

    def _services(self, name: str, config: PlatformConfig, tags: dict[str, str]) -> Any:
        from trainforge.platform.services import (  # noqa: PLC0415 - services area
            PlatformServices,
            PlatformServicesArgs,
        )

        facts = self.node_pools.values()
        return PlatformServices(
            f"{name}-services",
            PlatformServicesArgs(
                config=config.services,
                cluster_name=self.cluster.cluster_name,
                k8s_provider=self.k8s_provider,
                vpc_id=self.network.vpc_id,
                vpc_cidr=self.network.vpc_cidr,
                private_subnet_ids=self.network.private_subnet_ids,
                node_security_group_ids=[self.cluster.node_security_group_id],
                region=aws.get_region().region,
                account_id=aws.get_caller_identity().account_id,
                partition=aws.get_partition().partition,
                node_role_arn=self.cluster.node_role.arn,
                gpu_nodes=any(f.gpus_per_node > 0 for f in facts),
                efa_nodes=any(f.efa_interfaces > 0 for f in facts),
                # (services engineer) Karpenter EFA pools lack the EFA node label: name them so
                # the EFA device plugin is scheduled there too.
                efa_pool_names=[n for n, f in self.node_pools.items() if f.efa_interfaces > 0],
                # FSx goes next to the EFA capacity: the zone of the first EFA pool or group
                # that is placed by instance-type offerings (a reservation's own zone is
                # read later: keep the reservation in the same zone).
                fsx_subnet_index=self._efa_zone_index(config),
                kubeconfig=self.cluster.kubeconfig,
                pools=list(self.node_pools.values()),
                s3_cidrs=list(self.network.s3_cidrs),
                endpoint_cidrs=list(self.network.endpoint_cidrs),
                s3_vpc_endpoint_id=self.network.s3_endpoint_id,
                tags=tags,
                karpenter_namespace=config.karpenter.namespace if self.karpenter else None,
                admission_checks=admission_checks(config.fleet),
            ),
            pulumi.ResourceOptions(parent=self),
        )
