"""What the platform publishes to jobs: the `PlatformContract`, built from stack config.

Why a pure builder: jobs are checked against the platform before any resource is registered
(`jobs.declare.check_jobs`), so the same contract must come out of the config alone. The
`TrainingPlatform` component builds it with this function too and only adds what exists once
resources do (the bucket's name, the Kubernetes provider, the resources jobs wait for).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainforge.jobs.contract import (
    DEFAULT_BACKEND,
    PlatformContract,
    PoolFacts,
    PoolLimits,
    Taint,
    TeamFacts,
    TeamQuota,
)
from trainforge.platform import versions
from trainforge.platform.config import (
    GPU_TAINT_KEY,
    POOL_LABEL,
    NodeGroupConfig,
    NodePoolConfig,
    PlatformConfig,
)
from trainforge.platform.instance_types import PoolTypeFacts, instance_type_facts, resolve_all

# Stands for the checkpoint bucket's name while only the config is known: a job is checked
# knowing *that* the platform has a bucket, before the bucket (and its name) exists.
PENDING_BUCKET = "<checkpoint-bucket>"


def _gpu_facts(f: PoolTypeFacts, ami: str) -> dict[str, Any]:
    """GPU models and architectures of the pool's types, its node image and that image's driver.

    Managed node groups run EKS's AL2023 NVIDIA AMI type, Karpenter pools the pinned alias;
    `versions.AMI_NVIDIA_DRIVER` says which driver branch each provides (compatibility table).
    """
    if not f.gpus_per_node:
        return {"ami": ami}
    models = tuple(
        dict.fromkeys(
            m for t in f.instance_types if (m := instance_type_facts(t).gpu_name) is not None
        )
    )
    return {
        "gpu_models": models,
        "gpu_archs": tuple(versions.GPU_ARCH.get(m, 0) for m in models),
        "ami": ami,
        "nvidia_driver": versions.AMI_NVIDIA_DRIVER.get(ami),
    }


def _facts_for_group(g: NodeGroupConfig, f: PoolTypeFacts) -> PoolFacts:
    cap = {"SPOT": "spot", "CAPACITY_BLOCK": "reserved"}.get(g.capacity_type, "on-demand")
    taints = (Taint(GPU_TAINT_KEY, "NoSchedule", "true"), *(_taint(t) for t in g.taints))
    return PoolFacts(
        name=g.name,
        kind="node-group",
        instance_types=f.instance_types,
        gpus_per_node=f.gpus_per_node,
        gpu_name=f.gpu_name,
        gpu_memory_mib=f.gpu_memory_mib,
        efa_interfaces=f.efa_interfaces,
        taints=taints,
        node_selector=((POOL_LABEL, g.name),),
        capacity_type=cap,
        capacity_types=(cap,),
        vcpus_per_node=f.vcpus_per_node,
        memory_mib_per_node=f.memory_mib_per_node,
        architecture=f.architecture,
        max_nodes=g.max_size,
        **_gpu_facts(f, versions.GPU_AMI_TYPE if f.gpus_per_node else versions.SYSTEM_AMI_TYPE),
    )


def _facts_for_pool(p: NodePoolConfig, f: PoolTypeFacts) -> PoolFacts:
    from trainforge.platform.karpenter import pool_taints  # noqa: PLC0415 - pulls in pulumi

    taints = tuple(Taint(t["key"], t["effect"], t.get("value")) for t in pool_taints(p, f))
    return PoolFacts(
        name=p.name,
        kind="karpenter",
        instance_types=f.instance_types,
        gpus_per_node=f.gpus_per_node,
        gpu_name=f.gpu_name,
        gpu_memory_mib=f.gpu_memory_mib,
        efa_interfaces=f.efa_interfaces,
        taints=taints,
        node_selector=((POOL_LABEL, p.name),),
        capacity_type="spot" if "spot" in p.capacity_types else p.capacity_types[0],
        capacity_types=tuple(p.capacity_types),
        vcpus_per_node=f.vcpus_per_node,
        memory_mib_per_node=f.memory_mib_per_node,
        architecture=f.architecture,
        limits=PoolLimits(cpu=p.limits.cpu, memory=p.limits.memory, gpus=p.limits.gpus),
        **_gpu_facts(f, versions.KARPENTER_AMI_ALIAS),
    )


def _taint(t: Any) -> Taint:
    return Taint(t.key, t.effect, t.value)


def pool_facts(
    config: PlatformConfig, type_facts: dict[str, PoolTypeFacts] | None = None
) -> dict[str, PoolFacts]:
    """Facts of every node group and Karpenter pool, from config and instance-type lookups."""
    from trainforge.platform.queues import uses_topology  # noqa: PLC0415

    type_facts = resolve_all(config) if type_facts is None else type_facts
    out = {g.name: _facts_for_group(g, type_facts[g.name]) for g in config.node_groups}
    out.update({p.name: _facts_for_pool(p, type_facts[p.name]) for p in config.node_pools})
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
    from trainforge.platform.fsx import claim_name  # noqa: PLC0415 - pulls in pulumi
    from trainforge.platform.mlflow_auth import CREDENTIALS_SECRET  # noqa: PLC0415
    from trainforge.platform.queues import LOCAL_QUEUE, namespace_quota  # noqa: PLC0415
    from trainforge.platform.teams import TRAINING_SERVICE_ACCOUNT  # noqa: PLC0415

    ready = ready or {}
    out = {}
    for t in services.teams:
        q = t.quota
        held = (
            namespace_quota(t, services.teams, pools.values(), services.kueue.enabled)
            if pools is not None
            else {"gpus": q.gpus, "cpu": q.cpu, "memory": q.memory}
        )
        out[t.name] = TeamFacts(
            name=t.name,
            namespace=t.name,
            service_account=TRAINING_SERVICE_ACCOUNT,
            claim_name=claim_name(t.name) if services.fsx.enabled else None,
            fsx_mount_path=services.fsx.mount_path,
            fsx_sub_path=t.name,
            checkpoint_prefix=f"{t.name}/",
            quota=TeamQuota(gpus=held["gpus"], cpu=held["cpu"], memory=held["memory"], pods=q.pods),
            run_as_user=t.run_as_user,
            run_as_group=t.run_as_group,
            queue=LOCAL_QUEUE if services.kueue.enabled else None,
            mlflow_secret=CREDENTIALS_SECRET if services.mlflow.enabled else None,
            mlflow_experiment=t.name if services.mlflow.enabled else None,
            ready=tuple(ready.get(t.name, ())),
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
) -> PlatformContract:
    """The contract the platform described by `config` offers its jobs.

    `checkpoint_bucket` defaults to `PENDING_BUCKET` when the config enables the bucket.
    """
    from trainforge.platform.monitoring import MLFLOW_TRACKING_URI  # noqa: PLC0415

    services = config.services
    pools = pool_facts(config, type_facts)
    teams = team_facts(services, ready=team_ready, pools=pools) if services is not None else {}
    mlflow = None
    if services is not None:
        if checkpoint_bucket is None and services.checkpoints.enabled:
            checkpoint_bucket = PENDING_BUCKET
        if services.mlflow.enabled:
            mlflow = MLFLOW_TRACKING_URI
    return PlatformContract(
        pools=pools,
        teams=teams,
        backend=DEFAULT_BACKEND,
        backends=(DEFAULT_BACKEND,),
        checkpoint_bucket=checkpoint_bucket,
        mlflow_tracking_uri=mlflow,
        k8s_provider=k8s_provider,
        ready=tuple(ready),
    )
