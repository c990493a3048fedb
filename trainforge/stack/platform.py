"""The platform's keys: cluster, network, endpoint, admins, node groups and pools, Karpenter,
node health, tags, images (read by trainforge/platform/config.py).

Why one declaration: each class here is both the schema of its `trainforge:` section (types,
defaults, bounds, descriptions for the JSON Schema and docs/configuration.md) and the frozen
config object the platform code reads (`config.node_pools[0].limits`). Taints and pool limits
are `core.contract` dataclasses (jobs read them from the published pool facts, and core cannot
import pydantic): `TaintKeys`/`PoolLimitsKeys` hold their rules and convert to them.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)

from trainforge.core import names
from trainforge.core.contract import PoolLimits, Taint
from trainforge.core.labels import (
    EKS_RESERVED_LABEL_PREFIXES,
    karpenter_template_label_refusal,
    node_group_label_refusal,
)
from trainforge.stack.base import Bool as Flag
from trainforge.stack.base import Float as Number
from trainforge.stack.base import (
    Int,
    Memory,
    Namespace,
    PinnedImage,
    Problems,
    Quantity,
    Section,
    StackModel,
    matching,
    refuse,
)

# --- value types: what a string, number or flag of this area must look like -------------------


def _text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int | float) else value


Text = Annotated[str, BeforeValidator(_text)]  # a scalar as text (`value: true` -> "true")


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value  # `pulumi config set k v`: one item


def _no_reserved(value: Any) -> Any:
    """`reserved` in a pool's capacityTypes matches no type: Karpenter adds it to a type's
    capacity types only for the reservations its EC2NodeClass's capacityReservationSelectorTerms
    find (karpenter-provider-aws v1.14.1 types.go `computeRequirements`; no terms, none found:
    pkg/controllers/nodeclass/capacityreservation.go, read 2026-11-30), and ours has none."""
    items = [value] if isinstance(value, str) else value
    if isinstance(items, list | tuple) and "reserved" in items:
        raise ValueError(
            "on-demand or spot (the pool's EC2NodeClass selects no capacity reservation, so "
            "Karpenter offers no type as reserved and it would never be used; reserved "
            "capacity is a nodeGroups[] entry with capacityReservationId)"
        )
    return value


PoolName = matching(
    names.DNS1035_LABEL,
    "a DNS label of at most 40 characters (lowercase letters, digits, '-')",
    40,
)
ClusterName = matching(
    r"[a-zA-Z][-a-zA-Z0-9_]{0,99}",
    "a cluster name: a letter then letters, digits, '-' or '_' (at most 100)",
)
VpcId = matching(r"vpc-[0-9a-f]+", "a VPC id (vpc-...)")
ReservationId = matching(r"cr-[0-9a-f]+", "a capacity reservation id (cr-...)")
InstanceType = matching(
    r"[a-z][a-z0-9-]*\.[a-z0-9-]+", "an EC2 instance type such as g5.xlarge or m6i.large"
)
Duration = matching(r"([0-9]+(s|m|h))+", "a duration such as 30s, 10m or 1h")
# A NodePool's spec.disruption.consolidateAfter, Karpenter's own pattern (the vendored
# karpenter.sh_nodepools.yaml: `^(([0-9]+(s|m|h))+|Never)$`; a test keeps them equal)
CONSOLIDATE_AFTER = r"([0-9]+(s|m|h))+|Never"
ConsolidateAfter = matching(CONSOLIDATE_AFTER, "a duration such as 30s, 10m or 1h, or Never")
SubnetId = matching(r"subnet-[0-9a-f]+", "a subnet id (subnet-...)")
IamPrincipal = matching(
    r"arn:aws[a-z-]*:(iam|sts)::[0-9]{12}:(role|user|assumed-role)/.+",
    "an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)",
)
PtcSecret = matching(
    r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:ecr-pullthroughcache/[\w/+=.@-]+",
    "the ARN of a Secrets Manager secret named ecr-pullthroughcache/<name> (ECR's rule)",
)


def _public_cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value)
    except ValueError:
        raise ValueError("an IPv4 CIDR such as 203.0.113.0/24") from None
    if net.prefixlen == 0:
        raise ValueError(
            "a specific allow-listed CIDR (0.0.0.0/0 would expose the API server to the internet)"
        )
    return str(net)


def _vpc_cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value)
        if net.version == 4 and 16 <= net.prefixlen <= 20:
            return value
    except ValueError:
        pass
    raise ValueError("an IPv4 CIDR between /16 and /20")


def _pair_problem(key: Any, value: Any, label_value: bool) -> str:
    """What is wrong with one entry ("" when nothing): its name a Kubernetes label key, and
    with `label_value` its value a label value (core/names.py, apimachinery's rules)."""
    if not isinstance(value, str | int | float | bool) or not names.is_label_key(str(key)):
        return "a Kubernetes label name with a string value"
    if label_value and not names.is_label_value(_text(value)):
        return (
            "a Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' or '.' "
            "that start and end with a letter or digit"
        )
    return ""


# AWS's own tag rules, as the Resource Groups Tagging API reference states them (API_Tag,
# docs.aws.amazon.com/resourcegroupstagging/latest/APIReference/API_Tag.html, read 2026-11-30
# through `search`): a key 1 to 128 characters, a value 0 to 256, both of Unicode letters (\p{L}),
# separators (\p{Z}), numbers (\p{N}) and _ . : / = + - @ ; and the `aws:` prefix, in any case,
# is reserved for AWS on keys and values (the same restrictions in the EKS CloudFormation Tag
# reference, AWS::EKS::AccessEntry Tag, and the Tagging AWS resources guide it links).
AWS_TAG_KEY_MAX, AWS_TAG_VALUE_MAX = 128, 256
_AWS_TAG_SYMBOLS = frozenset("_.:/=+-@")


def _aws_tag_text(text: str) -> bool:
    return all(c in _AWS_TAG_SYMBOLS or unicodedata.category(c)[0] in "LZN" for c in text)


def aws_tag_problem(key: Any, value: Any) -> str:
    """What AWS refuses in one tag ("" when nothing)."""
    if not isinstance(value, str | int | float | bool) or not isinstance(key, str):
        return "an AWS tag: a name with a string value"
    text = str(_text(value))
    if (
        1 <= len(key) <= AWS_TAG_KEY_MAX
        and len(text) <= AWS_TAG_VALUE_MAX
        and _aws_tag_text(key)
        and _aws_tag_text(text)
        and not key.lower().startswith("aws:")
        and not text.lower().startswith("aws:")
    ):
        return ""
    return (
        "an AWS tag: letters, digits, spaces and _ . : / = + - @, not starting with 'aws:'; "
        f"a key of 1 to {AWS_TAG_KEY_MAX} characters, a value of at most {AWS_TAG_VALUE_MAX}"
    )


def _names(label_value: bool | None) -> Any:
    """Label names checked (and label values; None: AWS tags, by AWS's rules), values as text:
    every bad entry named at its key."""

    def check(value: Any) -> Any:
        if isinstance(value, tuple):
            value = dict(value)  # the pairs the config holds (Python callers, model_copy)
        if not isinstance(value, Mapping):
            return value  # refused as "a mapping" by the dict type
        problems = {
            k: aws_tag_problem(k, v) if label_value is None else _pair_problem(k, v, label_value)
            for k, v in value.items()
        }
        refuse("labels", (((str(k),), value[k], what) for k, what in problems.items() if what))
        return {str(k): _text(v) for k, v in value.items()}

    return check


# A mapping as users write it; the config holds its sorted (name, value) pairs.
NO_PAIRS = {"default": {}}  # the JSON Schema's default of an unset Labels field


def _pairs(label_value: bool | None) -> Any:
    return Annotated[
        dict[str, str],
        BeforeValidator(_names(label_value)),
        AfterValidator(lambda d: tuple(sorted(d.items()))),
        PlainSerializer(dict),
    ]


Labels = _pairs(label_value=True)  # node labels: Kubernetes refuses a bad name or value
Tags = _pairs(label_value=None)  # AWS tags: AWS's rules (aws_tag_problem)


def contract(keys: type[StackModel], dc: type) -> Any:
    """`keys` validates (rules, descriptions, schema); the value is the core dataclass `dc`.

    The model's field names are the dataclass's (tests/stack/test_platform.py checks it), so
    the conversion is `dc(**fields)` and the dataclass stays the one type jobs and facts use.
    """
    return Annotated[
        keys,
        BeforeValidator(lambda v: dataclasses.asdict(v) if isinstance(v, dc) else v),
        AfterValidator(lambda m: dc(**dict(m))),
        PlainSerializer(dataclasses.asdict),
    ]


# --- sections --------------------------------------------------------------------------------


# Rules across the fields of a section are validators of its later field that read the earlier
# ones (`info.data`): they run even when another field of the section is wrong, so every
# problem comes in one run, and they name the key that breaks them. A field missing from
# `info.data` is invalid itself (already reported): its rules are skipped.


def _sizes(value: int | None, info: ValidationInfo, least_max: int) -> int | None:
    """`maxSize` (unset: the larger of `least_max` and `minSize`) at least `minSize`."""
    lo = info.data.get("min_size")
    if lo is None:
        return value
    if value is None:
        return max(least_max, lo)
    if value < lo:
        raise ValueError(f"at least minSize ({lo})")
    return value


def _desired(value: int | None, info: ValidationInfo) -> int | None:
    """`desiredSize` (unset: `minSize`) between `minSize` and `maxSize`."""
    lo, hi = info.data.get("min_size"), info.data.get("max_size")
    want = lo if value is None else value
    if lo is not None and hi is not None and want is not None and not lo <= want <= hi:
        refuse("size", [((), want, f"a size between minSize ({lo}) and maxSize ({hi})")])
    return want


class NetworkConfig(Section):
    """A new VPC (`vpcId` unset) or an existing one with its private subnets."""

    vpc_id: VpcId | None = Field(None, description="Existing VPC to use; unset: create one.")
    private_subnet_ids: Annotated[tuple[SubnetId, ...], BeforeValidator(_one_or_many)] = Field(
        (),
        validate_default=True,
        description="Existing private subnets (at least 2, different AZs) when `vpcId` is set. "
        "They are tagged for Karpenter discovery and internal load balancers. The first one "
        "holds EFA groups/pools and FSx.",
    )
    cidr: Annotated[str, AfterValidator(_vpc_cidr)] = Field(
        "10.0.0.0/16", description="CIDR of a new VPC (/16 to /20)."
    )
    availability_zones: Int = Field(
        3, ge=2, le=4, description="AZs of a new VPC (2-4): one private and one public subnet each."
    )
    nat_gateways: Literal["single", "onePerAz"] = Field(
        "single", description="`single` (cheap) or `onePerAz` (AZ-independent egress)."
    )
    vpc_endpoints: Flag = Field(
        True,
        description="An S3 gateway endpoint on the private route tables and interface endpoints "
        "(private DNS, HTTPS from the VPC only) for STS, ECR (api, dkr), EKS auth (Pod "
        "Identity), EC2 and SQS (Karpenter), SSM (AMI alias) and FSx. Training namespaces may "
        "only reach AWS through them ([teams.md](teams.md#network)). Set `false` for an "
        "existing VPC that already has them (two endpoints with private DNS for one service "
        "cannot coexist).",
    )

    @field_validator("private_subnet_ids")
    @classmethod
    def _existing_vpc(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if "vpc_id" not in info.data:
            return value
        if info.data["vpc_id"] and len(value) < 2:
            raise ValueError(
                "at least 2 private subnets in different AZs when vpcId is set (EKS requires 2)"
            )
        if value and not info.data["vpc_id"]:
            raise ValueError("no subnets unless network.vpcId names the VPC that holds them")
        return value


class EndpointConfig(Section):
    """API endpoint: always private; public only for the listed CIDRs and, with `deployFrom:
    deployer`, the address that runs `pulumi up` (otherwise private only)."""

    public_access_cidrs: Annotated[
        tuple[Annotated[str, AfterValidator(_public_cidr)], ...], BeforeValidator(_one_or_many)
    ] = Field(
        (),
        description="CIDRs allowed to reach the public API endpoint. Empty (and `deployFrom` "
        "not `deployer`) keeps the endpoint private; `0.0.0.0/0` is refused.",
    )
    deploy_from: Literal["allowList", "deployer", "vpc"] = Field(
        "allowList",
        description="How `pulumi up` reaches the API (every Kubernetes object and chart goes "
        "through it): `allowList`: from an address in `publicAccessCidrs`; `deployer`: the "
        "public endpoint also admits the public IPv4 address (/32) of each machine that ran "
        "`pulumi up` (learned from https://checkip.amazonaws.com; earlier deployers' addresses "
        "are kept from the live cluster, a preview adds none); "
        "`vpc`: `pulumi up` runs inside the cluster's VPC (or a network routed to it). A stack "
        "that creates its VPC with a private-only endpoint and no `vpc` runner cannot reach "
        "its API: a plan finding (TRAINFORGE_ENDPOINT_UNREACHABLE).",
    )

    @property
    def public(self) -> bool:
        return bool(self.public_access_cidrs) or self.deploy_from == "deployer"


class SystemNodeGroupConfig(Section):
    """On-demand nodes for the controllers (CoreDNS, Karpenter, operator, monitoring)."""

    instance_type: InstanceType = Field(
        "m6i.large",
        description="On-demand nodes for controllers (CoreDNS, Karpenter, operator, monitoring).",
    )
    min_size: Int = Field(2, ge=1, le=20, description="Fewest nodes.")
    max_size: Annotated[Int, Field(ge=1, le=20)] | None = Field(
        None,
        validate_default=True,
        description="Most nodes; unset: the larger of 3 and `minSize`.",
    )
    desired_size: Annotated[Int, Field(ge=1, le=20)] | None = Field(
        None,
        validate_default=True,
        description="Nodes at creation; unset: `minSize`.",
    )
    root_volume_gib: Int = Field(
        50, ge=20, le=16384, alias="rootVolumeGiB", description="Encrypted gp3 root volume (GiB)."
    )

    @field_validator("max_size")
    @classmethod
    def _max(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _sizes(value, info, 3)

    _desired = field_validator("desired_size")(_desired)


class AcceptanceTestConfig(Section):
    """An on-demand acceptance test of a GPU pool's nodes (trainforge/platform/acceptance.py).

    Declared as suspended CronJobs; a platform engineer runs one with
    `kubectl create job --from=cronjob/<pool>-<test> ...` (docs/reliability.md)."""

    enabled: Flag = Field(
        True, description="Declare the tests (default when the mapping is given)."
    )
    dcgm_level: Int = Field(
        2, ge=1, le=4, description="`dcgmi diag -r` level, 1 (about a minute) to 4 (hours)."
    )
    all_reduce: Flag | None = Field(
        None,
        description="The NCCL all-reduce across `nodes` nodes (EFA required on EFA pools); "
        "unset: on for EFA pools.",
    )
    nodes: Int = Field(
        2,
        ge=1,
        le=64,
        description="Nodes per run (one pod per node); at least 2 with `allReduce`, at most a "
        "node group's `maxSize`.",
    )
    min_bus_bandwidth_gbps: Annotated[Number, Field(gt=0)] | None = Field(
        None,
        alias="minBusBandwidthGBps",
        description="Pass floor (GB/s) for the all-reduce's peak bus bandwidth; unset: 80% of "
        "AWS's published two-node result for the instance family (p4d/p4de/p5/p5e/p5en), no "
        "floor otherwise.",
    )

    @field_validator("nodes")
    @classmethod
    def _all_reduce_nodes(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("all_reduce") and value < 2:
            raise ValueError("at least 2 when allReduce is on (it runs across nodes)")
        return value


def _acceptance_shorthand(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"  # Pulumi's string form of `acceptanceTest: true`
    return {"enabled": value} if isinstance(value, bool) else value  # `acceptanceTest: true`


Acceptance = Annotated[AcceptanceTestConfig, BeforeValidator(_acceptance_shorthand)]
ACCEPTANCE_OFF = AcceptanceTestConfig(enabled=False)
ACCEPTANCE_DOC = "On-demand acceptance tests of its nodes: `true` or a mapping; unset: off."


def _or_true(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [{"type": "boolean"}, {"$ref": schema.pop("$ref")}]  # the shorthand


# A node's taints as the API server validates them (k8s.io/kubernetes pkg/apis/core/validation
# validation.go `validateNodeTaints`, the stored kubernetes/kubernetes copy 000f2605 read
# 2026-11-30 via `read_file`): the key a label name (ValidateLabelName: IsQualifiedName), the
# value a label value (IsValidLabelValue), the effect one of validateTaintEffect's three, and
# no two taints with the same key and effect. A node or NodePool that breaks one is refused by
# the API server after `pulumi up` has begun; the stack refuses it first.
TAINT_KEY_RULE = (
    "a Kubernetes qualified name: an optional DNS subdomain and '/', then at most 63 letters, "
    "digits, '-', '_' or '.' that start and end with a letter or digit"
)
TAINT_VALUE_RULE = (
    "a Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' or '.' "
    "that start and end with a letter or digit"
)


def _taint_key(value: str) -> str:
    if not names.is_label_key(value):
        raise ValueError(TAINT_KEY_RULE)
    return value


def _taint_value(value: str | None) -> str | None:
    if value is not None and not names.is_label_value(value):
        raise ValueError(TAINT_VALUE_RULE)
    return value


class TaintKeys(Section):
    """A node taint `{key, value?, effect}` (the value is a `core.contract.Taint`)."""

    key: Annotated[str, AfterValidator(_taint_key)] = Field(
        description="The taint's key: a Kubernetes qualified name (`example.com/name`)."
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        "NoSchedule", description="`NoSchedule`, `PreferNoSchedule` or `NoExecute`."
    )
    value: Annotated[Text | None, AfterValidator(_taint_value)] = Field(
        None, description="The taint's value (optional): a Kubernetes label value."
    )


class PoolLimitsKeys(Section):
    """A Karpenter NodePool's ceilings (the value is a `core.contract.PoolLimits`)."""

    cpu: Quantity | None = Field(None, description="Most vCPUs of the pool's nodes together.")
    memory: Memory | None = Field(None, description="Most memory of the pool's nodes together.")
    gpus: Annotated[Int, Field(ge=0, le=100000)] | None = Field(
        None,
        description="Most GPUs (`nvidia.com/gpu`) of the pool's nodes; refused on a pool of "
        "CPU types.",
    )


Admins = Annotated[tuple[IamPrincipal, ...], BeforeValidator(_one_or_many)]


def _unique_taints(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """validateNodeTaints: "taints must be unique by key and effect pair"."""
    seen: set[tuple[str, str]] = set()
    for t in taints:
        if (t.key, t.effect) in seen:
            raise ValueError(f"taints unique by key and effect: {t.key}:{t.effect} is there twice")
        seen.add((t.key, t.effect))
    return taints


TaintList = Annotated[tuple[contract(TaintKeys, Taint), ...], AfterValidator(_unique_taints)]
Limits = contract(PoolLimitsKeys, PoolLimits)
InstanceTypes = Annotated[tuple[InstanceType, ...], BeforeValidator(_one_or_many)]


def _some_types(types: tuple[str, ...]) -> tuple[str, ...]:
    if not types:
        raise ValueError("a non-empty list of EC2 instance types")
    return types


# What EKS refuses in a managed node group's labels beyond Kubernetes' rules: botocore's EKS
# service model (2017-11-01, botocore 1.44.5 in requirements.lock; the API reference's
# CreateNodegroup/UpdateLabelsPayload say the same, read 2026-11-30): `labelKey` and
# `labelValue` are 1 to 63 characters (a prefixed key counts its prefix; an empty value is
# refused). tests/stack/test_pool_labels.py reads the bundled model. The reserved prefixes and
# the kubelet's namespaces: core/labels.node_group_label_refusal.
EKS_LABEL_MAX = 63


def _eks_labels(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    length = f"a key and a value of 1 to {EKS_LABEL_MAX} characters each"
    problems = []
    for k, v in labels:
        if not (len(k) <= EKS_LABEL_MAX and 1 <= len(v) <= EKS_LABEL_MAX):
            problems.append(((k,), v, f"a label EKS accepts: {length}"))
        elif why := node_group_label_refusal(k):
            problems.append(
                ((k,), v, f"a label key of your own domain, such as example.com/team ({why})")
            )
    Problems.raise_any(problems)
    return labels


# EKS's own bound on a managed node group's taint: botocore's `taintKey` is 1 to 63 characters,
# a prefixed key counting its prefix (Kubernetes allows a 253-character prefix more), and
# `taintValue` 0 to 63 (Kubernetes' bound already). Same model and date as EKS_LABEL_MAX;
# tests/stack/test_pool_labels.py reads it.
EKS_TAINT_KEY_MAX = 63


def _eks_taints(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """A taint key EKS refuses, named at its index, before `pulumi up` asks EKS: too long, or
    with a prefix EKS reserves ("Taint cannot contain reserved prefixes [kubernetes.io/, k8s.io/,
    eks.amazonaws.com/]", quoted in aws/containers-roadmap#1451; read 2026-11-30)."""
    rule = (
        f"a taint key EKS accepts: at most {EKS_TAINT_KEY_MAX} characters, not starting with "
        f"{', '.join(EKS_RESERVED_LABEL_PREFIXES)}"
    )
    Problems.raise_any(
        ((i, "key"), t.key, rule)
        for i, t in enumerate(taints)
        if len(t.key) > EKS_TAINT_KEY_MAX or t.key.startswith(EKS_RESERVED_LABEL_PREFIXES)
    )
    return taints


def _karpenter_labels(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The NodePool CRD refuses some template labels (core/labels.py): named here, at the
    key, rather than by the API server once `pulumi up` has begun."""
    Problems.raise_any(
        ((k,), v, f"a label key the NodePool CRD accepts ({why}), such as example.com/team")
        for k, v in labels
        if (why := karpenter_template_label_refusal(k))
    )
    return labels


class NodeGroupConfig(Section):
    """A managed GPU node group (fixed capacity, e.g. a capacity reservation)."""

    name: PoolName = Field(
        description="DNS label, max 40 chars, unique across node groups and pools. Nodes get "
        "`trainforge.io/pool=<name>`."
    )
    efa: Flag = Field(
        False,
        description="Every EFA interface the type supports, a cluster placement group, one "
        "subnet (AZ) and a self-referencing all-traffic security group.",
    )
    instance_types: Annotated[InstanceTypes, AfterValidator(_some_types)] = Field(
        description="GPU instance types (exactly one when `efa: true`)."
    )
    min_size: Int = Field(0, ge=0, le=1000, description="Fewest nodes.")
    max_size: Annotated[Int, Field(ge=1, le=1000)] | None = Field(
        None,
        validate_default=True,
        description="Most nodes; unset: the larger of 2 and `minSize`.",
    )
    desired_size: Annotated[Int, Field(ge=0, le=1000)] | None = Field(
        None,
        validate_default=True,
        description="Nodes at creation; unset: `minSize`. Ignored after creation (people and "
        "autoscalers change it).",
    )
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = Field(
        "ON_DEMAND",
        description="`ON_DEMAND`, `SPOT` or `CAPACITY_BLOCK` (set for you when the reservation "
        "is a Capacity Block; `CAPACITY_BLOCK` with an On-Demand Capacity Reservation is an "
        "error at preview).",
    )
    root_volume_gib: Int = Field(
        200, ge=20, le=16384, alias="rootVolumeGiB", description="Encrypted gp3 root volume (GiB)."
    )
    capacity_reservation_id: ReservationId | None = Field(
        None,
        validate_default=True,
        description="Target a capacity reservation (`cr-...`); required for `CAPACITY_BLOCK`. "
        "Looked up at preview: the group goes to the reservation's zone and placement group.",
    )
    labels: Annotated[Labels, AfterValidator(_eks_labels)] = Field(
        (),
        description="Extra node labels: keys and values of 1 to 63 characters; no key starting "
        "with `kubernetes.io/`, `k8s.io/` or `eks.amazonaws.com/` (EKS refuses them) nor in "
        "another `kubernetes.io` or `k8s.io` namespace but `node.kubernetes.io` and "
        "`kubelet.kubernetes.io` (the kubelet refuses them and the node never joins); not "
        "`trainforge.io/pool`, `nvidia.com/gpu.present` or `vpc.amazonaws.com/efa.present` "
        "(the platform sets them); `topology.kubernetes.io/zone` only with the one zone of "
        "the group's nodes (an EFA or reserved group's).",
        json_schema_extra=NO_PAIRS,
    )
    taints: Annotated[TaintList, AfterValidator(_eks_taints)] = Field(
        (),
        description="Extra taints `{key, value?, effect}`: keys of at most 63 characters not "
        "starting with `kubernetes.io/`, `k8s.io/` or `eks.amazonaws.com/`, at most 50 taints "
        "with the platform's (EKS refuses others); `nvidia.com/gpu=true:NoSchedule` "
        "is always set, and `fsx.csi.aws.com/agent-not-ready:NoExecute` when the stack has FSx: "
        "one more with the key and effect of either is refused (a node would carry both).",
    )
    subnet_id: SubnetId | None = Field(
        None,
        description="Subnet (AZ) of an EFA group, one of `network.privateSubnetIds` whose zone "
        "offers the type (a reserved group: the one in the reservation's zone; no group "
        "without EFA takes one); unset: the first private subnet whose zone offers the type "
        "(a reserved group: the reservation's zone).",
    )
    acceptance: Acceptance = Field(
        ACCEPTANCE_OFF,
        alias="acceptanceTest",
        description=ACCEPTANCE_DOC,
        json_schema_extra=_or_true,
    )

    @field_validator("instance_types")
    @classmethod
    def _one_efa_type(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if info.data.get("efa") and len(value) > 1:
            raise ValueError(
                "exactly one instance type for an EFA node group (interfaces are laid out per type)"
            )
        return value

    @field_validator("max_size")
    @classmethod
    def _max(cls, value: int | None, info: ValidationInfo) -> int | None:
        return _sizes(value, info, 2)

    _desired = field_validator("desired_size")(_desired)

    @field_validator("capacity_reservation_id")
    @classmethod
    def _block(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("capacity_type") == "CAPACITY_BLOCK" and not value:
            raise ValueError(
                "the capacity block reservation id (required with capacityType CAPACITY_BLOCK)"
            )
        return value


class NodePoolConfig(Section):
    """A Karpenter NodePool (scales from zero on demand, back to zero when empty)."""

    name: PoolName = Field(
        description="DNS label, max 40 chars, unique across node groups and pools; NodePool and "
        "EC2NodeClass name. Nodes get `trainforge.io/pool=<name>` and "
        "`karpenter.sh/nodepool=<name>`."
    )
    instance_types: Annotated[InstanceTypes, AfterValidator(_some_types)] = Field(
        description="Allowed instance types; all GPU or all CPU, one architecture."
    )
    capacity_types: Annotated[
        tuple[Literal["on-demand", "spot"], ...],
        BeforeValidator(_no_reserved),
        BeforeValidator(_one_or_many),
        AfterValidator(lambda types: types or ("on-demand",)),
    ] = Field(
        ("on-demand",),
        description="Any of `on-demand`, `spot` that one of the pool's types offers (EC2's "
        "usage classes). Not `reserved`: the pool's EC2NodeClass selects no capacity "
        "reservation, so Karpenter offers no type as reserved; reserved capacity is a "
        "`nodeGroups[]` entry with `capacityReservationId`.",
    )
    gpu: Flag | None = Field(
        None,
        description="`true` requires GPU types; unset: inferred from the types. GPU pools get "
        "the `nvidia.com/gpu=true:NoSchedule` taint. Types with a fraction of a GPU (g6f, "
        "gr6f: EC2 counts 0 whole GPUs, so Karpenter offers 0 `nvidia.com/gpu`) are refused, "
        "naming them.",
    )
    efa: Flag = Field(
        False,
        description="EFA-capable types only: the EC2NodeClass declares every EFA interface, a "
        "cluster placement group, one subnet and an EFA security group.",
    )
    taints: TaintList = Field(
        (),
        description="Extra taints `{key, value?, effect}`. Always set: "
        "`nvidia.com/gpu=true:NoSchedule` on GPU pools, `trainforge.io/jobs-only=true:"
        "NoSchedule` on CPU pools; with FSx, the startup taint "
        "`fsx.csi.aws.com/agent-not-ready:NoExecute`. One more with the key and effect of "
        "one of these is refused (a node would carry both).",
    )
    labels: Annotated[Labels, AfterValidator(_karpenter_labels)] = Field(
        (),
        description="Extra node labels: not `kubernetes.io/hostname`, `karpenter.sh/nodepool` "
        "or another key of Karpenter's restricted domains (the NodePool CRD refuses them); a "
        "key the pool's requirements restrict (`kubernetes.io/arch`, `kubernetes.io/os`, "
        "`node.kubernetes.io/instance-type`, `karpenter.sh/capacity-type`) or Karpenter derives "
        "from the instance type (`karpenter.k8s.aws/instance-family`, `-size`, `-category`, "
        "`-generation`, `-cpu`, `-memory`, `-gpu-count`, `-gpu-name`, `-capability-flex`, "
        "`-gpu-memory` (one GPU's MiB), `-gpu-manufacturer`, `-network-bandwidth`, "
        "`-hypervisor`, and for the catalog's types `-local-nvme` and `-cpu-manufacturer`) only "
        "with values one of the pool's types gives; `topology.kubernetes.io/zone` only with a zone of the VPC's "
        "private subnets that offers them; not `trainforge.io/pool`, `nvidia.com/gpu.present` or "
        "`vpc.amazonaws.com/efa.present` (the platform sets them); at most 99 (the CRD holds "
        "100 with the platform's).",
        json_schema_extra=NO_PAIRS,
    )
    limits: Limits = Field(
        default_factory=PoolLimits,
        description="Pool ceilings (`cpu`, `memory`, `gpus`); unset: none.",
    )
    consolidate_after: ConsolidateAfter = Field(
        "10m",
        description="How long a node must be empty before it is removed (pools consolidate only "
        "empty nodes and nodes never expire, so running jobs are never evicted); `Never` keeps "
        "empty nodes (and pays for them) until the pool is changed.",
    )
    root_volume_gib: Int = Field(
        100, ge=20, le=16384, alias="rootVolumeGiB", description="Encrypted gp3 root volume (GiB)."
    )
    weight: Annotated[Int, Field(ge=1, le=100)] | None = Field(
        None, description="Karpenter pool priority (1-100)."
    )
    acceptance: Acceptance = Field(
        ACCEPTANCE_OFF,
        alias="acceptanceTest",
        description=ACCEPTANCE_DOC,
        json_schema_extra=_or_true,
    )


class KarpenterConfig(Section):
    """Karpenter, which runs the node pools."""

    enabled: Flag = Field(True, description="Install Karpenter (required when `nodePools` is set).")
    namespace: Namespace = Field(
        "kube-system", description="Namespace of the Karpenter controller."
    )


class NodeHealthConfig(Section):
    """GPU node health: the EKS node monitoring agent and automatic node repair."""

    monitoring_agent: Flag = Field(
        True,
        description="The EKS node monitoring agent add-on on every node. Off: the plan refuses "
        "GPU capacity (`TRAINFORGE_GPU_HEALTH_MONITORING`) unless waived with a reason.",
    )
    auto_repair: Flag = Field(
        True,
        description="Node auto repair (`nodeRepairConfig` on GPU node groups, Karpenter's "
        "`NodeRepair` gate). Off: the plan refuses GPU capacity (`TRAINFORGE_GPU_NODE_REPAIR`) "
        "unless waived.",
    )


class ImagesConfig(Section):
    """Where pods' images come from (docs/images.md): the ECR pull-through cache and the
    trainforge runtime images jobs run when they name no image of their own."""

    pull_through_cache: Flag = Field(
        True,
        description="ECR pull-through cache rules as resources of the stack; every public image "
        "the stack renders is pulled through them. See [images.md](images.md).",
    )
    docker_hub_credential_arn: PtcSecret | None = Field(
        None,
        description="ARN of a Secrets Manager secret `ecr-pullthroughcache/<name>` with Docker "
        "Hub credentials: adds the `docker-hub` rule. Unset: Docker Hub images are pulled "
        "directly (a plan finding, `TRAINFORGE_DOCKER_HUB`).",
    )
    github_credential_arn: PtcSecret | None = Field(
        None,
        description="The same for ghcr.io (the `github` rule); unset: ghcr.io images are pulled "
        "from ghcr.io directly.",
    )
    runtime: Flag = Field(
        True,
        description="Jobs that name no `image` run the trainforge runtime image for their pool; "
        "`false`: the stock PyTorch image (no MLflow, no S3 mirror, no EFA).",
    )
    runtime_image: PinnedImage | None = Field(
        None,
        description="A prebuilt runtime image (target `runtime` of images/runtime/Dockerfile); "
        "unset: the stack builds it.",
    )
    runtime_efa_image: PinnedImage | None = Field(
        None,
        description="A prebuilt EFA runtime image (target `runtime-efa`); unset: the stack "
        "builds it.",
    )


# --- the area ------------------------------------------------------------------------------


def pools_problems(
    groups: Iterable[NodeGroupConfig | None],
    pools: Iterable[NodePoolConfig | None],
    karpenter: KarpenterConfig,
    network: NetworkConfig | None = None,
) -> list[tuple[tuple[str | int, ...], Any, str]]:
    """Unique names across node groups and pools; Karpenter on for pools; each group's subnetId
    (group_subnet_problems). None stands for an invalid group or pool: the reader
    (platform/config.py) judges the valid parts of a stack that has other problems too."""
    out: list[tuple[tuple[str | int, ...], Any, str]] = []
    seen: set[str] = set()
    groups, pools = list(groups), list(pools)
    if network is not None:
        out += group_subnet_problems(groups, network)
    unique = "a name not used by another node group or node pool"
    for key, items in (("nodeGroups", groups), ("nodePools", pools)):
        for i, item in enumerate(items):
            if item is not None and item.name in seen:
                out.append(((key, i, "name"), item.name, unique))
            seen.update([item.name] if item is not None else [])
    if pools and not karpenter.enabled:
        enabled = "true while nodePools are declared (Karpenter runs them)"
        out.append((("karpenter", "enabled"), False, enabled))
    return out


def group_subnet_problems(
    groups: Iterable[NodeGroupConfig | None], network: NetworkConfig
) -> list[tuple[tuple[str | int, ...], Any, str]]:
    """A node group's subnetId that places it nowhere the stack's nodes can be.

    Why: only an EFA group goes to its subnetId (platform/node_groups.py); any other group spans
    the private subnets whose zones offer its types, so a subnetId there was silently unread.
    A subnet outside network.privateSubnetIds is outside what the stack tags and routes, and
    outside a new VPC (which creates its own) or another VPC EKS refuses the node group
    ("InvalidParameterException: Specified subnets must belong to cluster's vpc", quoted in
    rancher/rancher#28144, read 2026-11-30 via `search`)."""
    out: list[tuple[tuple[str | int, ...], Any, str]] = []
    mine = tuple(network.private_subnet_ids)
    for i, group in enumerate(groups):
        if group is None or group.subnet_id is None:
            continue
        at: tuple[str | int, ...] = ("nodeGroups", i, "subnetId")
        if not group.efa:
            out.append(
                (
                    at,
                    group.subnet_id,
                    "no subnetId on a group without EFA (unset it): such a "
                    "group spans every private subnet whose zone offers its types",
                )
            )
        elif group.subnet_id not in mine:
            subnets = (
                f"one of network.privateSubnetIds: {', '.join(mine)}"
                if mine
                else "no subnetId while the stack creates its VPC (network.vpcId unset: its "
                "subnets do not exist yet; the group goes to the first whose zone offers its type)"
            )
            out.append(
                (
                    at,
                    group.subnet_id,
                    f"{subnets} (the stack's private subnets; EKS refuses a "
                    "subnet outside the cluster's VPC)",
                )
            )
    return out


class PlatformKeys(StackModel):
    """The platform's top-level `trainforge:` keys."""

    cluster: ClusterName = Field(
        description="EKS cluster name: a letter, then letters, digits, `-`, `_` (max 100). Also "
        "names the queue, roles and placement groups."
    )
    network: NetworkConfig = Field(NetworkConfig(), description="The VPC.")
    endpoint: EndpointConfig = Field(EndpointConfig(), description="The EKS API endpoint.")
    admins: Admins = Field(
        (),
        description="IAM role/user ARNs granted `AmazonEKSClusterAdminPolicy` through access "
        "entries.",
    )
    system_node_group: SystemNodeGroupConfig = Field(
        SystemNodeGroupConfig(), description="The on-demand node group of the controllers."
    )
    node_groups: tuple[NodeGroupConfig, ...] = Field(
        (), description="Managed GPU node groups (fixed capacity)."
    )
    node_pools: tuple[NodePoolConfig, ...] = Field(
        (), description="Karpenter node pools (scale from and back to zero)."
    )
    karpenter: KarpenterConfig = Field(KarpenterConfig(), description="Karpenter.")
    node_health: NodeHealthConfig = Field(
        NodeHealthConfig(), description="GPU node health monitoring and repair."
    )
    tags: Tags = Field(
        (),
        description="Extra AWS tags on every resource, by AWS's tag rules: keys of 1 to 128 "
        "characters, values of at most 256, letters, digits, spaces and _ . : / = + - @, "
        "no 'aws:' prefix, no 'trainforge.io/' prefix (the platform's own keys: the cluster tag "
        "the budgets filter on, component, purpose, team, pool). AWS allows 50 tags on a resource and the platform sets its own beside "
        "them (10 on a Karpenter node, 6 on a new VPC's private subnet): tags that leave a "
        "resource over 50 are refused, the error naming the limit. With node pools, not the "
        "keys Karpenter sets itself (`kubernetes.io/cluster*`, `eks:eks-cluster-name`, "
        "`karpenter.sh/nodepool`, `karpenter.sh/nodeclaim`, `karpenter.k8s.aws/ec2nodeclass`).",
        json_schema_extra=NO_PAIRS,
    )
    images: ImagesConfig = Field(
        ImagesConfig(), description="The pull-through cache and the runtime images."
    )

    @model_validator(mode="after")
    def _across_pools(self) -> PlatformKeys:
        refuse(
            "platform",
            pools_problems(self.node_groups, self.node_pools, self.karpenter, self.network),
        )
        return self
