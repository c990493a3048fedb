"""EC2 instance-type facts (GPUs, EFA interfaces, vCPUs, memory) and the checks that use them.

Why: whether a type has GPUs or EFA decides taints, launch templates, network interfaces and
what jobs may request. Asking AWS (`aws.ec2.get_instance_type`) keeps this true for every type
AWS sells; under mocks the same call is answered from moto's bundled catalog. Lookups are
cached per process because a plan may ask for the same type many times.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.core import catalog
from trainforge.core.labels import karpenter_type_labels
from trainforge.platform.regions import aws_regions, partition_regions
from trainforge.stack.base import problem, suggest


@dataclass(frozen=True)
class InstanceTypeFacts:
    name: str
    vcpus: int
    memory_mib: int
    gpus: int
    gpu_name: str | None
    gpu_memory_mib: int
    efa_supported: bool
    efa_interfaces: int
    network_cards: int
    architectures: tuple[str, ...]
    # Sustained (baseline) bandwidth in Gbit/s: all network cards (what EFA can use), and the
    # primary card's (what a pod's TCP traffic uses). 0 when AWS does not say.
    network_gbps: float = 0.0
    primary_network_gbps: float = 0.0
    # VPC CNI pod addresses: every ENI of the type (all cards) and IPv4 addresses per ENI.
    max_network_interfaces: int = 0
    ipv4_per_interface: int = 0
    # Local NVMe instance-store disks, total GB (0: none): EC2's TotalInstanceStorage.
    instance_storage_gb: int = 0
    # EC2's Gpus[0]: its Manufacturer and one GPU's MemoryInfo.SizeInMiB (Karpenter's labels)
    gpu_manufacturer: str | None = None
    gpu_memory_per_gpu_mib: int = 0
    hypervisor: str = ""  # "nitro", "xen"; "" on bare metal
    # EC2's SupportedUsageClasses ("on-demand", "spot", "capacity-block")
    usage_classes: tuple[str, ...] = ()
    # EC2 lists a GPU but counts none whole: a fraction of one (g6f, gr6f: GpuInfo.Gpus[0]
    # Count 0, GpuPartitionSize 0.125-0.5, LogicalGpuCount 1; DescribeInstanceTypes as moto
    # 5.2.5 bundles it, read 2026-12-01). Karpenter sums GpuInfo.Gpus[].Count into the type's
    # nvidia.com/gpu capacity (karpenter-provider-aws pkg/providers/instancetype/types.go
    # `nvidiaGPUs`), so it offers 0 for such a type and never launches one for a GPU pod.
    partial_gpu: bool = False


@functools.cache
def karpenter_bandwidth_megabits() -> dict[str, int]:
    """Karpenter's own table behind instance-network-bandwidth (karpenter-provider-aws v1.14.1
    zz_generated.bandwidth.go, vendored by tools/regen_karpenter_bandwidth.py): a type not in
    it has no such label."""
    data = resources.files("trainforge.platform").joinpath("data/karpenter_bandwidth.json")
    return json.loads(data.read_text("utf-8"))["megabits"]


def karpenter_labels(f: InstanceTypeFacts) -> dict[str, str | None]:
    """The labels Karpenter gives this type (core/labels.karpenter_type_labels), from the
    lookup and, for what it does not return (CPU manufacturer, NVMe support), the catalog."""
    held = catalog.instance_types().get(f.name, {})
    return karpenter_type_labels(
        f.name,
        f.vcpus,
        f.memory_mib,
        f.gpus,
        f.gpu_name,
        gpu_manufacturer=f.gpu_manufacturer,
        gpu_memory_mib=f.gpu_memory_per_gpu_mib or None,
        hypervisor=f.hypervisor,
        instance_storage_gb=f.instance_storage_gb,
        nvme_support=held.get("instanceStoreNvme"),
        cpu_manufacturer=held.get("cpuManufacturer"),
        bandwidth_megabits=karpenter_bandwidth_megabits().get(f.name, 0),
    )


@functools.cache
def instance_type_facts(name: str) -> InstanceTypeFacts:
    """Facts for one type from AWS (or the mocks). Raises LookupError for unknown types."""
    try:
        r = aws.ec2.get_instance_type(instance_type=name)
    except Exception as e:  # the provider reports unknown types as an invoke failure
        raise LookupError(f"no EC2 instance type {name!r}: {e}") from e
    gpus = list(r.gpuses or [])
    cards = sorted(r.network_cards or [], key=lambda c: int(c.index or 0))
    return InstanceTypeFacts(
        name=name,
        vcpus=int(r.default_vcpus or 0),
        memory_mib=int(r.memory_size or 0),
        gpus=sum(int(g.count or 0) for g in gpus),
        gpu_name=gpus[0].name if gpus else None,
        gpu_memory_mib=int(r.total_gpu_memory or 0),
        gpu_manufacturer=gpus[0].manufacturer if len(gpus) == 1 else None,
        gpu_memory_per_gpu_mib=int(gpus[0].memory_size or 0) if len(gpus) == 1 else 0,
        hypervisor=r.hypervisor or "",
        usage_classes=tuple(r.supported_usages_classes or ()),
        partial_gpu=bool(gpus) and not any(int(g.count or 0) for g in gpus),
        efa_supported=bool(r.efa_supported),
        efa_interfaces=int(r.efa_maximum_interfaces or 0) if r.efa_supported else 0,
        network_cards=int(r.maximum_network_cards or 1),
        architectures=tuple(r.supported_architectures or ()),
        network_gbps=float(sum(float(c.baseline_bandwidth or 0) for c in cards)),
        primary_network_gbps=float(cards[0].baseline_bandwidth or 0) if cards else 0.0,
        max_network_interfaces=int(r.maximum_network_interfaces or 0),
        ipv4_per_interface=int(r.maximum_ipv4_addresses_per_interface or 0),
        instance_storage_gb=int(r.total_instance_storage or 0)
        if r.instance_storage_supported
        else 0,
    )


def offered_in_region(instance_types: tuple[str, ...]) -> frozenset[str]:
    """Which of `instance_types` EC2 offers in the stack's region (DescribeInstanceTypeOfferings,
    location type region, read at preview; the offline plan answers from moto's bundled copy)."""
    # cached per region: one process may validate stacks of several regions (the plan, tests)
    return _offered(pulumi.Config("aws").get("region"), instance_types)


@functools.cache
def _offered(region: str | None, instance_types: tuple[str, ...]) -> frozenset[str]:
    del region  # the cache key: the lookup itself answers for the provider's region
    r = aws.ec2.get_instance_type_offerings(
        filters=[{"name": "instance-type", "values": list(instance_types)}],
        location_type="region",
    )
    return frozenset(r.instance_types or ())


def _region() -> str:
    """The stack's region as messages name it ("this region" when unset or no region AWS has:
    `aws:region`'s own error says so)."""
    region = pulumi.Config("aws").get("region")
    return region if region in aws_regions() else "this region"


@functools.cache
def known_instance_types() -> tuple[str, ...]:
    """Every instance type we know AWS has, in any region, sorted: the `InstanceType` enum of
    botocore's bundled EC2 model (botocore 1.44.5 data/ec2/2016-11-15/service-2.json, shapes
    .InstanceType.enum: 1437 names), offline, and the GPU catalog's types (newer ones such as
    p6e-gb300.36xlarge are not in that model). Read only for an error (~0.3 CPU s)."""
    from botocore.loaders import create_loader  # noqa: PLC0415 - on the error path only

    model = create_loader().load_service_model("ec2", "service-2")
    names = set(model["shapes"]["InstanceType"]["enum"])
    return tuple(
        sorted(names | set(catalog.family_instance_types()) | set(catalog.instance_types()))
    )


def offering_regions(instance_type: str) -> tuple[list[str], list[str]]:
    """(regions of the stack region's partition that offer the type, regions that did not
    answer): DescribeInstanceTypeOfferings in each (the provider's `region` argument; a region
    not enabled for the account refuses). Asked only for an error."""
    region = _region()
    offered: list[str] = []
    silent: list[str] = []
    for r in partition_regions(region if region != "this region" else "us-east-1"):
        if r == region:
            continue
        try:
            got = aws.ec2.get_instance_type_offerings(
                filters=[{"name": "instance-type", "values": [instance_type]}],
                location_type="region",
                region=r,
            )
        except Exception:  # noqa: BLE001 - a region that does not answer is named as such
            silent.append(r)
            continue
        if instance_type in (got.instance_types or ()):
            offered.append(r)
    return offered, silent


def lookup_error(where: str, instance_type: str, why: object = "") -> str:
    """The one error line for a type AWS does not describe in the stack's region: a type EC2
    has nowhere (with the closest names), one this region does not offer (`not_offered_error`),
    or one it offers whose lookup failed (`why`: the provider's error, not the user's)."""
    known = known_instance_types()
    if instance_type in known and (data := offline_data()):
        # EC2 names it but the offline plan's data has no facts for it: the data is the cause
        alts = _alternatives(instance_type) if catalog.nvidia_gpu_family(instance_type) else []
        return problem(
            where,
            instance_type,
            f"an instance type the offline plan's EC2 data has ({data} has no {instance_type}: "
            "the plan cannot read its GPUs, vCPUs and memory offline, and cannot tell whether "
            f"{_region()} offers it; `pulumi up` asks EC2)"
            + (f", such as {', '.join(alts)}" if alts else ""),
        )
    if instance_type in known and instance_type in offered_in_region((instance_type,)):
        return (
            f"{where}: the lookup of {instance_type!r}, which {_region()} offers, failed: {why} "
            "(an AWS or provider failure, not this key's: run again)"
        )
    if instance_type in known:
        return not_offered_error(where, instance_type)
    return problem(
        where,
        instance_type,
        f"an EC2 instance type offered in {_region()}: {instance_type} is no instance type in "
        f"any region we know (the {len(known)} the EC2 API and the GPU catalog name)"
        f"{suggest(instance_type, known)}",
    )


def offline_data() -> str | None:
    """Under Pulumi's mocks (the offline plan, tests), what answers the EC2 lookups there
    (trainforge.plan.mocks: moto's bundled tables, at the installed version); None when EC2
    itself answers (`pulumi up`)."""
    from importlib.metadata import version  # noqa: PLC0415 - on the error path only

    from trainforge.platform.mocked import under_mocks  # noqa: PLC0415

    return f"moto {version('moto')}'s bundled EC2 catalog" if under_mocks() else None


def _alternatives(instance_type: str, limit: int = 4) -> list[str]:
    """GPU types of the catalog with the same size and GPU count that the region offers."""
    size = instance_type.partition(".")[2]
    try:
        wanted = instance_type_facts(instance_type).gpus
    except LookupError:
        wanted = None
    gpu_families = set(catalog.gpu_families())
    model = catalog.families().get(catalog.family_of(instance_type), {}).get("gpu")
    same_model = set(catalog.gpu_families(model)) if model else set()
    candidates = tuple(
        sorted(
            (
                t
                for t in catalog.family_instance_types()
                if t != instance_type
                and t.partition(".")[2] == size
                and catalog.family_of(t) in gpu_families
            ),
            key=lambda t: catalog.family_of(t) not in same_model,  # the same GPU model first
        )
    )
    if not candidates:
        return []
    offered = offered_in_region(candidates)
    out = []
    for t in candidates:
        if t not in offered:
            continue
        try:
            f = instance_type_facts(t)
        except LookupError:
            continue
        if wanted is None or f.gpus == wanted:
            out.append(f"{t} ({f.gpus} x {f.gpu_name})" if f.gpus else t)
    return out[:limit]


def not_offered_error(where: str, instance_type: str) -> str:
    """The one error line for a type EC2 does not offer in the stack's region."""
    region = _region()
    alts = _alternatives(instance_type)
    such = f", such as {', '.join(alts)}," if alts else ""
    offered, silent = offering_regions(instance_type)
    where_offered = f"offered in: {', '.join(offered)}" if offered else "no other region offers it"
    data = offline_data()
    if silent:
        why = f"{data} has no table for" if data else "did not answer"
        where_offered += f"; {len(silent)} region(s) {why}: {', '.join(silent)}"
    source = f"{data}'s instance-type offerings" if data else "EC2 instance-type offerings"
    return problem(
        where,
        instance_type,
        f"an instance type offered in {region} ({instance_type} is not offered in {region}: "
        f"{source}){such} or a region that offers {instance_type}"
        f" ({where_offered})",
    )


def not_nvidia_error(where: str, instance_type: str, kind: str) -> str:
    """The one error line for a GPU type (or one meant for GPUs) whose family the GPU catalog
    does not list as NVIDIA GPU capacity (core/catalog.nvidia_gpu_family); `kind`: what holds
    it (a node group, a GPU pool, a pool)."""
    return problem(
        where,
        instance_type,
        f"an NVIDIA GPU type of the GPU catalog for a {kind}: the catalog lists no "
        f"{catalog.family_of(instance_type)} family as NVIDIA GPU capacity, so its nodes "
        "offer no nvidia.com/gpu to a job (g4ad: AMD Radeon; trn: Trainium; a newer NVIDIA "
        "family becomes one by adding it to core/data/gpu_catalog.json, docs/gpu-catalog.md)",
    )


@dataclass(frozen=True)
class PoolTypeFacts:
    """What every instance type of a pool guarantees (minimum across its types)."""

    instance_types: tuple[str, ...]
    gpus_per_node: int
    efa_interfaces: int
    network_cards: int
    vcpus_per_node: int
    memory_mib_per_node: int
    architecture: str
    # The GPU model when every type has the same one (else None), and the memory of one GPU
    # (minimum over the types; 0 on CPU pools).
    gpu_name: str | None = None
    gpu_memory_mib: int = 0
    network_gbps: float = 0.0  # minimum over the types (see InstanceTypeFacts)
    primary_network_gbps: float = 0.0
    # Each type's own facts, in the pool's order (the cost report picks the type a pod
    # lands on, the scheduling rehearsal fits pods on each; the minimums above are what a pod
    # may be sized for).
    per_type: tuple[InstanceTypeFacts, ...] = ()
    # The smallest local instance store over the types, GB (0: a type has none).
    instance_storage_gb: int = 0


def resolve_pool(
    pool: Any, where: str, errors: list[str], *, node_group: bool = False
) -> PoolTypeFacts | None:
    """Look up every type of a pool and check its GPU/EFA settings against them.

    `pool` is a `NodeGroupConfig` (`node_group`) or `NodePoolConfig` (stack/platform.py); `where`
    is its key (`trainforge:nodePools[0]`) for the messages appended to `errors`. Typed loosely
    so this module does not import config, which calls it (config.resolve_all).
    """
    facts: list[InstanceTypeFacts] = []
    at, types = f"{where}.instanceTypes", list(pool.instance_types)
    offered = offered_in_region(tuple(types))
    limits = getattr(pool, "limits", None)
    wants_gpu = node_group or getattr(pool, "gpu", None) or getattr(limits, "gpus", None)
    kind = "node group" if node_group else "GPU pool (gpu: true or limits.gpus)"
    for i, t in enumerate(types):
        try:
            f = instance_type_facts(t)
        except LookupError as e:
            # the catalog's reason before the lookup's: a type meant for GPUs whose family is
            # no NVIDIA GPU capacity is refused for that, whatever EC2 (or the data) knows
            errors.append(
                not_nvidia_error(f"{at}[{i}]", t, kind)
                if wants_gpu and not catalog.nvidia_gpu_family(t)
                else lookup_error(f"{at}[{i}]", t, e)
            )
            continue
        if f.gpus and not catalog.nvidia_gpu_family(t):  # GPUs EC2 counts, none NVIDIA's
            errors.append(not_nvidia_error(f"{at}[{i}]", t, kind if wants_gpu else "pool"))
            continue
        facts.append(f)
        if t not in offered:
            errors.append(not_offered_error(f"{at}[{i}]", t))
            facts.pop()
    if not facts or len(facts) != len(types):
        return None
    partial = [f.name for f in facts if f.partial_gpu]
    if partial:
        # no silent CPU pool on GPU instances: Karpenter sees 0 nvidia.com/gpu on them (see
        # InstanceTypeFacts.partial_gpu), so a GPU job never lands there, and CPU-only work
        # would be routed onto GPU instances and pay for a GPU it cannot use
        gpu = next(f.gpu_name for f in facts if f.partial_gpu) or "GPU"
        errors.append(
            problem(
                at,
                types,
                f"instance types with whole GPUs (g6, g5, p5, ...) or none (m7i, c7i, ...): "
                f"{', '.join(partial)} have a fraction of one {gpu} (EC2 counts 0 whole GPUs), "
                "which Karpenter offers as 0 nvidia.com/gpu, so no GPU job could run there",
            )
        )
        return None
    wants_gpu = True if node_group else getattr(pool, "gpu", None)  # node groups are for GPUs
    no_gpu = [f.name for f in facts if f.gpus == 0]
    has_gpu = [f.name for f in facts if f.gpus > 0]
    if wants_gpu and no_gpu:
        kind = "node group" if node_group else "pool with gpu: true"
        gpus = f"GPU instance types (g5, g6, p4d, p5, ...) for a {kind}"
        errors.append(problem(at, types, f"{gpus}; {', '.join(no_gpu)} have no GPUs"))
    if wants_gpu is None and has_gpu and no_gpu:
        errors.append(problem(at, types, "all GPU types or all CPU types in one pool, not both"))
    limits = getattr(pool, "limits", None)
    if not has_gpu and not wants_gpu and getattr(limits, "gpus", None) is not None:
        # a CPU pool's GPU limit bounds nothing, and the quota model would count it as GPUs
        errors.append(
            problem(
                f"{where}.limits.gpus",
                limits.gpus,
                f"no limits.gpus for a pool of CPU types ({', '.join(types)}); "
                "limits.cpu and limits.memory bound it",
            )
        )
    no_efa = [f.name for f in facts if not f.efa_supported] if pool.efa else []
    if no_efa:
        efa = "false, or EFA-capable types (p4d.24xlarge, p5.48xlarge, ...)"
        errors.append(problem(f"{where}.efa", True, f"{efa}: {', '.join(no_efa)} have no EFA"))
    arches = {a for f in facts for a in f.architectures[:1]}
    if len(arches) > 1:
        errors.append(
            problem(at, types, f"one architecture per pool, not {' and '.join(sorted(arches))}")
        )
    arch = "arm64" if "arm64" in arches else "amd64"
    gpu_names = {f.gpu_name for f in facts if f.gpus}
    per_gpu = [f.gpu_memory_mib // f.gpus for f in facts if f.gpus]
    return PoolTypeFacts(
        instance_types=tuple(pool.instance_types),
        gpus_per_node=min(f.gpus for f in facts),
        efa_interfaces=min(f.efa_interfaces for f in facts) if pool.efa else 0,
        network_cards=min(f.network_cards for f in facts),
        vcpus_per_node=min(f.vcpus for f in facts),
        memory_mib_per_node=min(f.memory_mib for f in facts),
        architecture=arch,
        gpu_name=gpu_names.pop() if len(gpu_names) == 1 and not no_gpu else None,
        gpu_memory_mib=min(per_gpu) if per_gpu and not no_gpu else 0,
        network_gbps=min(f.network_gbps for f in facts),
        primary_network_gbps=min(f.primary_network_gbps for f in facts),
        per_type=tuple(facts),
        instance_storage_gb=min(f.instance_storage_gb for f in facts),
    )
