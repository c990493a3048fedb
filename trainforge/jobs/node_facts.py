"""What a node of an EKS pool really offers pods: the kubelet's reservations on our AMI.

Why: the scheduler places a pod against a node's *allocatable* resources, not its EC2 size.
A pod that asks for a whole 4-vCPU node never schedules (allocatable is 3.92 before any
DaemonSet), and Karpenter will not even launch a node for it. These are the formulas the
nodes we run use, so that a job that can never run is refused at preview, with the numbers.

Facts (checked 2026-11-23; the AMI is EKS-optimized Amazon Linux 2023, standard and NVIDIA
variants, bootstrapped by `nodeadm`: versions.SYSTEM_AMI_TYPE / GPU_AMI_TYPE for managed node
groups, versions.KARPENTER_AMI_ALIAS for Karpenter). Read in github.com/awslabs/amazon-eks-ami
at tags v20251023 and v20260724 (the newest release the source snapshot we could read has;
the pinned al2023@v20260903 was not readable there): the formulas below are the same in both.

- kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the third and fourth,
  0.25% of every core above four (millicores, integer division per range).
  nodeadm/internal/kubelet/config.go,
  `getCPUMillicoresToReserve` / `getResourceToReserveInRange`; Karpenter v1.14.1 computes
  the same (github.com/aws/karpenter-provider-aws pkg/providers/instancetype/types.go,
  `kubeReservedResources`).
- kube-reserved memory: 11 MiB x maxPods + 255 MiB, where maxPods is nodeadm's own ENI value
  for the instance type (same file, `withDefaultReservedResources`, `getMemoryMebibytesToReserve`).
  A `maxPods` that EKS or Karpenter set later through a kubelet drop-in does not recompute it.
- eviction threshold: evictionHard memory.available 100Mi (same file, `defaultKubeletSubConfig`);
  no systemReserved is set, so allocatable = capacity - kube-reserved - 100Mi.
- maxPods (nodeadm default): ENIs on the default network card x (IPv4 addresses per ENI - 1)
  + 2 (same tags, nodeadm/internal/kubelet/eni_max_pods.go, `calculateStandardMaxPods`, over
  instance-info.jsonl). ENIS_PER_CARD below holds that file's values for the types our stacks
  use; other types divide EC2's maximum network interfaces by the network cards.
- managed node groups (no custom AMI) cap maxPods at 110 below 30 vCPUs and 250 above
  (docs.aws.amazon.com/eks/latest/userguide/choosing-instance-type.html, "How maxPods is
  determined").
- Karpenter passes its own maxPods: the same ENI formula, minus one ENI per `efa-only`
  interface on network card 0 (Karpenter v1.14.1 types.go `ENILimitedPods`;
  amifamily/resolver.go sets kubelet maxPods from it).
- memory capacity: Karpenter does not know a type's real MemTotal before it has launched
  one; it assumes 7.5% of the EC2 memory is lost to the VM (`--vm-memory-overhead-percent`,
  default 0.075, Karpenter v1.14.1 pkg/operator/options/options.go, `memory()` in types.go)
  and will not launch a node for a pod that does not fit that estimate. We use the same
  estimate for managed node groups (the kernel also keeps part of the EC2 memory; the
  kubelet reports MemTotal as capacity), which errs on the safe side.

Pure data and arithmetic: no Pulumi, no AWS calls (the plan and `check_jobs` use it).
"""

from __future__ import annotations

import math

from trainforge.core import catalog
from trainforge.core.contract import NodeShape

EVICTION_HARD_MEMORY_MIB = 100
VM_MEMORY_OVERHEAD = 0.075
KUBELET_DEFAULT_MAX_PODS = 110  # nodeadm's fallback when it cannot look the type up
MNG_MAX_PODS_SMALL, MNG_MAX_PODS_LARGE, MNG_LARGE_VCPUS = 110, 250, 30

# (ENIs on the default network card, IPv4 addresses per ENI) from amazon-eks-ami v20260724
# (same values at v20251023) nodeadm/internal/kubelet/instance-info.jsonl, for the types the
# shipped stacks use: the GPU/instance catalog's instanceTypes.*.enisOnDefaultCard.
ENIS_PER_CARD: dict[str, tuple[int, int]] = {
    t: (int(v[0]), int(v[1])) for t, v in catalog.type_field("enisOnDefaultCard").items()
}


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """nodeadm's kube-reserved CPU for a node with `vcpus` cores."""
    total = vcpus * 1000
    reserved = 0
    for start, end, per_10000 in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50)):
        if total > start:
            reserved += (min(total, end) - start) * per_10000 // 10000
    if total > 4000:
        reserved += (total - 4000) * 25 // 10000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    return 11 * max_pods + 255


def eni_max_pods(enis_on_default_card: int, ipv4_per_eni: int) -> int:
    """nodeadm's default maxPods: ENIs x (addresses per ENI - 1) + 2 (kube-proxy, aws-node)."""
    if enis_on_default_card <= 0 or ipv4_per_eni <= 0:
        return KUBELET_DEFAULT_MAX_PODS
    return enis_on_default_card * (ipv4_per_eni - 1) + 2


def enis_per_card(instance_type: str, max_network_interfaces: int, network_cards: int) -> int:
    """ENIs on the default network card: nodeadm's table, else EC2's total over the cards."""
    if instance_type in ENIS_PER_CARD:
        return ENIS_PER_CARD[instance_type][0]
    return max_network_interfaces // max(network_cards, 1)


def capacity_memory_mib(memory_mib: int) -> int:
    """Karpenter's estimate of a type's memory capacity (EC2 size minus the VM overhead)."""
    return memory_mib - math.ceil(memory_mib * VM_MEMORY_OVERHEAD)


def node_shape(
    instance_type: str,
    vcpus: int,
    memory_mib: int,
    *,
    eni_pods: int = KUBELET_DEFAULT_MAX_PODS,
    max_pods: int | None = None,
    gpus: int = 0,
    efa: int = 0,
) -> NodeShape:
    """A node of `instance_type` as the scheduler sees it.

    `eni_pods` is nodeadm's ENI maxPods (it sizes kube-reserved memory); `max_pods` is what
    the kubelet finally runs with (a node group's cap, Karpenter's value), default the same.
    """
    capacity = capacity_memory_mib(memory_mib)
    return NodeShape(
        instance_type=instance_type,
        vcpus=vcpus,
        memory_mib=memory_mib,
        capacity_memory_mib=capacity,
        max_pods=eni_pods if max_pods is None else max_pods,
        kube_reserved_cpu_m=kube_reserved_cpu_millis(vcpus),
        kube_reserved_memory_mib=kube_reserved_memory_mib(eni_pods),
        eviction_memory_mib=EVICTION_HARD_MEMORY_MIB,
        gpus=gpus,
        efa=efa,
    )


def managed_node_group_max_pods(eni_pods: int, vcpus: int) -> int:
    cap = MNG_MAX_PODS_LARGE if vcpus > MNG_LARGE_VCPUS else MNG_MAX_PODS_SMALL
    return min(eni_pods, cap)


def karpenter_max_pods(enis: int, ipv4_per_eni: int, efa_only_on_card0: int) -> int:
    usable = max(enis - efa_only_on_card0, 0)
    if usable == 0:
        return 0
    return eni_max_pods(usable, ipv4_per_eni)
