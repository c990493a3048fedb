"""What the platform publishes to jobs: the `PlatformContract`, built from stack config.

Why a pure builder: jobs are checked against the platform before any resource is registered
(`jobs.declare.check_jobs`), so the same contract must come out of the config alone. The
`TrainingPlatform` component builds it with this function too and only adds what exists once
resources do (the bucket's name, the Kubernetes provider, the resources jobs wait for).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import (
    DEFAULT_BACKEND,
    NodeShape,
    NodeType,
    PlatformContract,
    PoolFacts,
    Taint,
    TeamFacts,
    TeamQuota,
)
from trainforge.jobs import node_facts
from trainforge.platform.config import (
    POOL_LABEL,
    NodeGroupConfig,
    NodePoolConfig,
    PlatformConfig,
    resolve_all,
)
from trainforge.platform.instance_types import PoolTypeFacts, instance_type_facts
from trainforge.platform.node_taints import platform_taint, pool_taints
from trainforge.stack.fleet import MULTIKUEUE_CONTROLLER

# Stands for the checkpoint bucket's name while only the config is known: a job is checked
# knowing *that* the platform has a bucket, before the bucket (and its name) exists.
PENDING_BUCKET = "<checkpoint-bucket>"
# Stands for the stack's ECR registry host (account and region) in the same way.
PENDING_REGISTRY = "<account>.dkr.ecr.<region>.amazonaws.com"


def _type_facts(f: PoolTypeFacts, ami: str) -> dict[str, Any]:
    """The PoolFacts fields that come from the pool's instance types: their shared minimums,
    each type as a node, GPU models and architectures, the node image and that image's driver.

    Managed node groups run EKS's AL2023 NVIDIA AMI type, Karpenter pools the pinned alias;
    `versions.AMI_NVIDIA_DRIVER` says which driver branch each provides (compatibility table).
    """
    out: dict[str, Any] = {
        "instance_types": f.instance_types,
        "gpus_per_node": f.gpus_per_node,
        "gpu_name": f.gpu_name,
        "gpu_memory_mib": f.gpu_memory_mib,
        "network_gbps": f.network_gbps,
        "primary_network_gbps": f.primary_network_gbps,
        "efa_interfaces": f.efa_interfaces,
        "vcpus_per_node": f.vcpus_per_node,
        "memory_mib_per_node": f.memory_mib_per_node,
        "architecture": f.architecture,
        "node_types": tuple(
            NodeType(
                t.name,
                t.vcpus,
                t.memory_mib,
                t.gpus,
                gpu_name=t.gpu_name,
                gpu_memory_mib=t.gpu_memory_mib // t.gpus if t.gpus else 0,
                network_gbps=t.network_gbps,
                primary_network_gbps=t.primary_network_gbps,
            )
            for t in f.per_type
        ),
        "ami": ami,
    }
    if not f.gpus_per_node:
        return out
    models = tuple(
        dict.fromkeys(
            m for t in f.instance_types if (m := instance_type_facts(t).gpu_name) is not None
        )
    )
    return {
        **out,
        "gpu_models": models,
        "gpu_archs": tuple(versions.GPU_ARCH.get(m, 0) for m in models),
        "nvidia_driver": versions.AMI_NVIDIA_DRIVER.get(ami),
    }


def _facts_for_group(g: NodeGroupConfig, f: PoolTypeFacts) -> PoolFacts:
    cap = {"SPOT": "spot", "CAPACITY_BLOCK": "reserved"}.get(g.capacity_type, "on-demand")
    gpu = platform_taint(True)
    taints = (Taint(gpu["key"], gpu["effect"], gpu["value"]), *g.taints)
    return PoolFacts(
        name=g.name,
        kind="node-group",
        taints=taints,
        node_selector=((POOL_LABEL, g.name),),
        capacity_type=cap,
        capacity_types=(cap,),
        max_nodes=g.max_size,
        **_type_facts(f, versions.GPU_AMI_TYPE if f.gpus_per_node else versions.SYSTEM_AMI_TYPE),
    )


def _facts_for_pool(p: NodePoolConfig, f: PoolTypeFacts) -> PoolFacts:
    own = pool_taints(p, f.gpus_per_node > 0)
    taints = tuple(Taint(t["key"], t["effect"], t.get("value")) for t in own)
    return PoolFacts(
        name=p.name,
        kind="karpenter",
        taints=taints,
        node_selector=((POOL_LABEL, p.name),),
        capacity_type="spot" if "spot" in p.capacity_types else p.capacity_types[0],
        capacity_types=tuple(p.capacity_types),
        limits=p.limits,
        **_type_facts(f, versions.KARPENTER_AMI_ALIAS),
    )


def _nodes(pool: NodeGroupConfig | NodePoolConfig, f: PoolTypeFacts) -> tuple[NodeShape, ...]:
    """Each instance type of the pool as a node: the AMI's kubelet reservations and the
    maxPods its nodes run with (a managed node group's cap, or Karpenter's own value)."""
    out = []
    for t in f.per_type:
        enis = node_facts.enis_per_card(t.name, t.max_network_interfaces, t.network_cards)
        ips = node_facts.ENIS_PER_CARD.get(t.name, (0, t.ipv4_per_interface))[1]
        eni_pods = node_facts.eni_max_pods(enis, ips)
        efa = f.efa_interfaces if pool.efa else 0
        if isinstance(pool, NodeGroupConfig):
            max_pods = node_facts.managed_node_group_max_pods(eni_pods, t.vcpus)
        else:
            # karpenter.efa_network_interfaces puts one efa-only interface on card 0
            max_pods = node_facts.karpenter_max_pods(enis, ips, 1 if efa else 0)
        gpus = t.gpus if f.gpus_per_node else 0
        out.append(
            node_facts.node_shape(
                t.name,
                t.vcpus,
                t.memory_mib,
                eni_pods=eni_pods,
                max_pods=max_pods,
                gpus=gpus,
                efa=efa,
            )
        )
    return tuple(out)


def pool_facts(
    config: PlatformConfig, type_facts: dict[str, PoolTypeFacts] | None = None
) -> dict[str, PoolFacts]:
    """Facts of every node group and Karpenter pool, from config and instance-type lookups:
    what a node offers (per instance type), which DaemonSets run on it, and whether Kueue
    places jobs there by network topology."""
    from trainforge.platform.node_daemonsets import (  # noqa: PLC0415 - pulls in pulumi
        lands_on,
        node_labels,
        platform_daemonsets,
    )
    from trainforge.platform.queues import uses_topology  # noqa: PLC0415

    type_facts = resolve_all(config) if type_facts is None else type_facts
    configs: dict[str, NodeGroupConfig | NodePoolConfig] = {g.name: g for g in config.node_groups}
    configs.update({p.name: p for p in config.node_pools})
    out = {g.name: _facts_for_group(g, type_facts[g.name]) for g in config.node_groups}
    out.update({p.name: _facts_for_pool(p, type_facts[p.name]) for p in config.node_pools})
    daemonsets = platform_daemonsets(
        config,
        gpu_nodes=any(f.gpus_per_node > 0 for f in out.values()),
        efa_nodes=any(f.efa_interfaces > 0 for f in out.values()),
        efa_pools=[n for n, f in out.items() if f.efa_interfaces > 0],
    )
    for name, facts in out.items():
        pool, tf = configs[name], type_facts[name]
        nodes = _nodes(pool, tf)
        # Every type of a pool carries the same taints; a DaemonSet lands on the pool when
        # it lands on its nodes (labels differ per type only in the instance type).
        landing = tuple(
            ds.load()
            for ds in daemonsets
            if any(
                lands_on(
                    ds, node_labels(pool, n.instance_type, n.gpus, facts.architecture), facts.taints
                )
                for n in nodes
            )
        )
        out[name] = replace(facts, nodes=nodes, daemonsets=landing)
    services = config.services
    if services is not None and services.kueue.enabled:
        out = {n: replace(f, topology_aware=uses_topology(f)) for n, f in out.items()}
    return out


def team_facts(
    services: Any,
    *,
    ready: dict[str, tuple[Any, ...]] | None = None,
    pools: dict[str, PoolFacts] | None = None,
) -> dict:
    """TeamFacts of every team in the services config (`ServicesConfig`). With `pools`, a
    team's quota is what its namespace may hold (queues.namespace_quota: with Kueue, its
    nominal quota plus what it may borrow); without, its configured totals."""
    from trainforge.jobs.quota import QuotaInputs  # noqa: PLC0415
    from trainforge.platform.fsx import claim_name  # noqa: PLC0415 - pulls in pulumi
    from trainforge.platform.mlflow_auth import CREDENTIALS_KEY, CREDENTIALS_SECRET  # noqa: PLC0415
    from trainforge.platform.queues import LOCAL_QUEUE, namespace_quota  # noqa: PLC0415
    from trainforge.platform.teams import TRAINING_SERVICE_ACCOUNT  # noqa: PLC0415

    ready = ready or {}
    out = {}
    for t in services.teams:
        q = t.quota
        inputs = (
            QuotaInputs(
                t.name, tuple(services.teams), tuple(pools.values()), services.kueue.enabled
            )
            if pools is not None
            else None
        )
        held = (
            inputs.held()
            if inputs is not None
            else {"gpus": q.gpus, "cpu": q.cpu, "memory": q.memory}
        )
        out[t.name] = TeamFacts(
            name=t.name,
            namespace=t.name,
            service_account=TRAINING_SERVICE_ACCOUNT,
            claim_name=claim_name(t.name) if services.fsx.enabled else None,
            fsx_mount_path=services.fsx.mount_path,
            # The team's claim mounts its own directory of the file system (trainforge.platform
            # .fsx): no subPath.
            fsx_sub_path=None,
            checkpoint_prefix=f"{t.name}/",
            quota=TeamQuota(gpus=held["gpus"], cpu=held["cpu"], memory=held["memory"], pods=q.pods),
            guarantee=(
                TeamQuota(**namespace_quota(t, services.teams, pools.values(), False), pods=q.pods)
                if pools is not None and services.kueue.enabled
                else None
            ),
            run_as_user=t.run_as_user,
            run_as_group=t.run_as_group,
            queue=LOCAL_QUEUE if services.kueue.enabled else None,
            mlflow_secret=CREDENTIALS_SECRET if services.mlflow.enabled else None,
            mlflow_credentials_key=CREDENTIALS_KEY,
            mlflow_experiment=t.name if services.mlflow.enabled else None,
            claims=tuple(t.claims),
            ready=tuple(ready.get(t.name, ())),
            quota_inputs=inputs,
        )
    return out


def contract_from_config(
    config: PlatformConfig,
    type_facts: dict[str, PoolTypeFacts] | None = None,
    *,
    checkpoint_bucket: Any = None,
    k8s_provider: Any = None,
    ready: tuple[Any, ...] = (),
    team_ready: dict[str, tuple[Any, ...]] | None = None,
    backend_ready: dict[str, tuple[Any, ...]] | None = None,
    images: Any = None,
    monitor_ready: tuple[Any, ...] = (),
) -> PlatformContract:
    """The contract the platform described by `config` offers its jobs.

    `checkpoint_bucket` defaults to `PENDING_BUCKET` when the config enables the bucket. The
    backends are the services config's: the default (`trainforge:jobBackend`) and every one
    whose controller the platform installs.
    """
    from trainforge.platform.monitoring import MLFLOW_TRACKING_URI  # noqa: PLC0415

    services = config.services
    pools = pool_facts(config, type_facts)
    teams = team_facts(services, ready=team_ready, pools=pools) if services is not None else {}
    backend, backends = DEFAULT_BACKEND, (DEFAULT_BACKEND,)
    if services is not None:
        backend, backends = services.job_backend, tuple(services.job_backends)
    mlflow = None
    if services is not None:
        if checkpoint_bucket is None and services.checkpoints.enabled:
            checkpoint_bucket = PENDING_BUCKET
        if services.mlflow.enabled:
            mlflow = MLFLOW_TRACKING_URI
    if images is None:
        images = images_from_config(config, PENDING_REGISTRY)
    return PlatformContract(
        pools=pools,
        teams=teams,
        backend=backend,
        backends=backends,
        checkpoint_bucket=checkpoint_bucket,
        mlflow_tracking_uri=mlflow,
        images=images,
        managed_by=MULTIKUEUE_CONTROLLER if _manager(config) else None,
        k8s_provider=k8s_provider,
        ready=tuple(ready),
        backend_ready=dict(backend_ready or {}),
        monitor_ready=tuple(monitor_ready),
    )


def images_from_config(config: PlatformConfig, registry: str) -> Any:
    """The runtime images and pull-through cache routes of `config` with the stack's ECR
    registry host (`PENDING_REGISTRY` while only the config is known). None when jobs do not
    run the runtime image, or when this checkout has no runtime Dockerfile and no prebuilt
    images are named (an installed package without the repository)."""
    from trainforge.core.image_routes import routes_for  # noqa: PLC0415
    from trainforge.jobs import dockerfile, runtime_images  # noqa: PLC0415

    cfg = config.images
    routes = routes_for(
        registry,
        docker_hub=bool(cfg.docker_hub_credential_arn),
        github=bool(cfg.github_credential_arn),
        enabled=cfg.pull_through_cache,
    )
    if not cfg.runtime:
        return runtime_images.NoRuntime(routes) if routes is not None else None
    if not (dockerfile.ROOT / dockerfile.DOCKERFILE).exists():
        return runtime_images.NoRuntime(routes) if routes is not None else None
    return runtime_images.plan_images(
        config.cluster,
        registry,
        routes,
        prebuilt=cfg.runtime_image,
        prebuilt_efa=cfg.runtime_efa_image,
        efa_pools=any(p.efa for p in (*config.node_groups, *config.node_pools)),
    )


def _manager(config: PlatformConfig) -> bool:
    """True for a fleet manager's config (its jobs are MultiKueue's to dispatch)."""
    fleet = getattr(config, "fleet", None)
    return fleet is not None and fleet.manager_role
