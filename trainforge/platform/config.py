"""Stack config (`trainforge:*` in Pulumi.<stack>.yaml) -> the platform's validated models.

Why: a typo in a stack file must fail `pulumi preview` in a second with a message naming the
key, the bad value and what would be valid, not after EKS spent 15 minutes creating a
cluster. Every key is declared once, in trainforge/stack/platform.py (the classes below are
those models); this module adds what needs more than the stack file: the region and
instance-type lookups, the services' keys (services_config.py) and the rules across them.
Every problem is collected and reported at once, before any resource is declared.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pydantic import Field, ValidationError

from trainforge.core import labels, versions
from trainforge.platform.node_taints import taint_problems
from trainforge.platform.regions import aws_regions, partition_regions
from trainforge.platform.services_config import ServicesConfig, parse_services_config
from trainforge.platform.tags import (
    karpenter_key_problems,
    platform_key_problems,
    tag_limit_problem,
)
from trainforge.stack.base import (
    NS,
    StackError,
    format_errors,
    own_keys,
    problem,
    suggest,
    validate,
    validate_as,
)
from trainforge.stack.file import decode_value
from trainforge.stack.fleet import FleetConfig, parse_fleet, trainjob_refusal
from trainforge.stack.model import unknown_keys
from trainforge.stack.platform import (
    Admins,
    KarpenterConfig,
    NetworkConfig,
    NodeGroupConfig,
    NodePoolConfig,
    PlatformKeys,
    SystemNodeGroupConfig,
    pools_problems,
    refuse,
)

POOL_LABEL = labels.POOL_LABEL
# The labels a node group's nodes carry (node_groups sets them; the device plugins select
# them, node_daemonsets places DaemonSets by them; Karpenter's GPU nodes carry
# core.labels.KARPENTER_GPU_COUNT instead).
GPU_NODE_LABEL = "nvidia.com/gpu.present"
EFA_NODE_LABEL = "vpc.amazonaws.com/efa.present"


class ConfigError(StackError):
    """One or more stack config problems; `errors` lists each as `trainforge:<key>: ...`."""


class PlatformConfig(PlatformKeys):
    """The platform's keys, plus the services' config parsed beside them."""

    services: ServicesConfig | None = Field(
        None, exclude=True, description="The services' config (services_config.py), not a key."
    )
    fleet: FleetConfig | None = Field(
        None, exclude=True, description="`trainforge:fleet` (stack/fleet.py); None: one cluster."
    )


def parse_config(
    raw: dict[str, Any],
    *,
    extra_keys: set[str] | frozenset = frozenset(),
    lookups: bool = False,
    region: str | None = None,
) -> PlatformConfig:
    """Parse the `trainforge:` config (bare camelCase keys, values already decoded from JSON).

    Raises ConfigError listing every problem. `extra_keys` are tolerated (other areas' keys).
    With `lookups`, the instance types of every node group, pool and the system node group are
    also looked up (`aws.ec2.get_instance_type`: needs the Pulumi runtime or its mocks), so
    that type problems come in the same report as the parse problems, not on a second run.
    `region` (the stack's `aws:region`) is checked against the regions AWS has.
    """
    if not isinstance(raw, dict):
        raise ConfigError([problem(f"{NS}:", raw, "a mapping of trainforge:<key> settings")])
    errors: list[str] = []
    if region is not None:
        _check_region(errors, region)
    errors.extend(unknown_keys(raw, also=extra_keys))  # a key no area declares
    own = {k: v for k, v in own_keys(PlatformKeys, raw).items() if v is not None}
    config = validate(PlatformConfig, own, f"{NS}:", errors)
    if config is not None:
        admins, system = config.admins, config.system_node_group
        groups: list[Any] = list(config.node_groups)
        pools: list[Any] = list(config.node_pools)
    else:  # the rules across sections and the lookups still judge the sections that are valid
        admins, system, groups, pools = _valid_parts(own, errors)
    facts = _lookup_instance_types(errors, system, groups, pools) if lookups else {}
    gpu_of = {name: f.gpus_per_node > 0 for name, f in facts.items()}
    services = parse_services_config(raw, errors, gpu_of)
    fleet = parse_fleet(raw, errors)
    refusal = trainjob_refusal(fleet, services.job_backends, versions.TRAINER_VERSION)
    if refusal is not None:
        errors.append(refusal)
    for i, team in enumerate(services.teams):
        for arn in sorted(set(team.access.principals) & set(admins)):
            errors.append(
                problem(
                    f"{NS}:teams[{i}].access.principals",
                    arn,
                    f"a principal not also in trainforge:admins (team {team.name!r}; EKS has "
                    "one access entry per principal, and admins already reach every namespace)",
                )
            )
    if config is not None and (too_many := tag_limit_problem(config)):
        errors.append(too_many)
    errors.extend(karpenter_key_problems(config) if config is not None else [])
    errors.extend(platform_key_problems(config) if config is not None else [])
    errors.extend(taint_problems(groups, pools, services.fsx.enabled, gpu_of))
    if errors or config is None:
        # the rules across pools judge both the partial config (stack/base.py) and the valid
        # pools (_valid_parts): a problem both find is one line
        raise ConfigError(list(dict.fromkeys(errors)))
    return config.model_copy(update={"services": services, "fleet": fleet})


def _valid_parts(own: dict[str, Any], errors: list[str]) -> tuple[Any, Any, list, list]:
    """Admins, system node group, groups and pools (None where invalid) of an invalid config;
    appends the problems across groups, pools and Karpenter among the valid ones."""
    seen: list[str] = []  # already reported by the whole config's validation

    def each(model: type, key: str) -> list:
        items = own.get(key)
        return [validate(model, x, "", seen) for x in items] if isinstance(items, list) else []

    groups, pools = each(NodeGroupConfig, "nodeGroups"), each(NodePoolConfig, "nodePools")
    karpenter = validate(KarpenterConfig, own.get("karpenter", {}), "", seen)
    network = validate(NetworkConfig, own.get("network", {}), "", seen)
    try:
        refuse("platform", pools_problems(groups, pools, karpenter or KarpenterConfig(), network))
    except ValidationError as exc:
        errors.extend(format_errors(exc, PlatformKeys, f"{NS}:"))
    admins = validate_as(Admins, own.get("admins", ()), "", seen) or ()
    system = validate(SystemNodeGroupConfig, own.get("systemNodeGroup", {}), "", seen)
    return admins, system, groups, pools


def _check_region(errors: list[str], region: Any) -> None:
    """`aws:region` must be a region AWS has: else some of its commercial regions, and the
    closest name (`us-west2` -> us-west-2)."""
    known = aws_regions()
    if not isinstance(region, str) or region not in known:
        examples = ", ".join(r for r in partition_regions("us-east-1") if r.startswith("us-"))
        errors.append(
            problem(
                "aws:region",
                region,
                f"an AWS region with EC2 (botocore's endpoint data: {len(known)} regions), "
                f"such as {examples}{suggest(region, known)}",
            )
        )


def _resolve_pools(groups, pools, errors: list[str]) -> dict[str, Any]:
    """Facts of every group and pool that parsed (None: did not); their problems to `errors`."""
    from trainforge.platform.instance_types import resolve_pool  # noqa: PLC0415 - pulumi_aws

    out: dict[str, Any] = {}
    for key, items in (("nodeGroups", groups), ("nodePools", pools)):
        for i, pool in enumerate(items):
            if pool is not None and pool.instance_types:
                facts = resolve_pool(
                    pool, f"{NS}:{key}[{i}]", errors, node_group=key == "nodeGroups"
                )
                out.update({pool.name: facts} if facts else {})
    return out


def _lookup_instance_types(errors: list[str], system, groups, pools) -> dict[str, Any]:
    """Type problems of every group and pool that parsed, and of the system node group;
    the facts of the groups and pools whose types were found, by name."""
    from trainforge.platform.instance_types import instance_type_facts, lookup_error  # noqa: PLC0415

    facts = _resolve_pools(groups, pools, errors)
    try:
        if system is not None:
            instance_type_facts(system.instance_type)
    except LookupError as e:
        errors.append(lookup_error(f"{NS}:systemNodeGroup.instanceType", system.instance_type, e))
    return facts


def resolve_all(config: PlatformConfig) -> dict[str, Any]:
    """Facts for every node group and pool; raises ConfigError listing every mismatch."""
    errors: list[str] = []
    out = _resolve_pools(config.node_groups, config.node_pools, errors)
    if errors:
        raise ConfigError(errors)
    return out


def load_config(config: pulumi.Config | None = None) -> PlatformConfig:
    """Read every `trainforge:` key of the current stack and parse it (see parse_config)."""
    from pulumi.runtime.config import CONFIG  # noqa: PLC0415 - the engine's config map

    config = config or pulumi.Config(NS)
    prefix = f"{config.name}:"
    raw: dict[str, Any] = {}
    for full in list(CONFIG.get().keys()):
        if full.startswith(prefix):
            key = full[len(prefix) :]
            raw[key] = decode_value(config.get(key))
    return parse_config(raw, lookups=True, region=pulumi.Config("aws").get("region"))
