"""Well-known label and annotation keys, spelled once (tests/test_one_spelling.py finds a second).

Kubernetes: k8s.io/api v0.35.7 core/v1/well_known_labels.go (the kubelet sets the node labels;
the API server sets `kubernetes.io/metadata.name` on every namespace). Karpenter:
kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go and karpenter-provider-aws v1.14.1
pkg/apis/v1/labels.go (Karpenter also tags its instances with the NodePool key). Read from the
mirrors on 2026-11-30.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

HOSTNAME = "kubernetes.io/hostname"  # LabelHostname
REGION = "topology.kubernetes.io/region"  # LabelTopologyRegion
ZONE = "topology.kubernetes.io/zone"  # LabelTopologyZone
INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # LabelInstanceTypeStable
OS = "kubernetes.io/os"  # LabelOSStable
ARCH = "kubernetes.io/arch"  # LabelArchStable
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # LabelMetadataName

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"  # NodePoolLabelKey
KARPENTER_CAPACITY_TYPE = "karpenter.sh/capacity-type"  # CapacityTypeLabelKey
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"  # LabelInstanceGPUCount


def cluster_tag(cluster: str) -> str:
    """The AWS tag key that marks a resource as a Kubernetes cluster's (`owned` or `shared`):
    the cloud provider's TagNameKubernetesClusterPrefix + name, which Karpenter puts on every
    instance it launches (karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass.go)."""
    return f"kubernetes.io/cluster/{cluster}"


# trainforge's own annotations on a pod that is an exception to a policy rule: the platform
# writes them, plan/checks/rules (which cannot import the platform) reads them
PRIVILEGED_REASON = "trainforge.io/privileged-reason"
ROOT_REASON = "trainforge.io/root-reason"
# trainforge's own label on a pool's nodes: the platform sets it (platform/config re-exports it),
# `trainforge import` reads it off a foreign job's nodeSelector (jobs cannot import the platform)
POOL_LABEL = "trainforge.io/pool"


# What a Karpenter NodePool's `spec.template.metadata.labels` may not hold: the CEL rules of its
# CRD (karpenter-provider-aws v1.14.1 pkg/apis/crds/karpenter.sh_nodepools.yaml, vendored as
# trainforge/plan/data/crds/karpenter.sh_nodepools.yaml; read 2026-11-30), generated from
# kubernetes-sigs/karpenter pkg/apis/v1/labels.go (RestrictedLabels, RestrictedLabelDomains)
# and the provider's well-known labels. A key's domain is the text before its first '/' (the
# whole key without one: the rules' `x.find("^([^/]+)")`), restricted when it ends with a
# restricted domain, unless the key is one of that domain's exceptions.
# tests/stack/test_pool_labels.py evaluates the vendored rules with plan/crd_cel on every key
# here and proves the lists equal to the rules'.
KARPENTER_RESTRICTED_TEMPLATE_LABELS = (KARPENTER_NODEPOOL, HOSTNAME)
KARPENTER_RESTRICTED_DOMAINS: dict[str, frozenset[str]] = {
    "karpenter.sh": frozenset({KARPENTER_CAPACITY_TYPE, KARPENTER_NODEPOOL}),
    "karpenter.k8s.aws": frozenset(
        f"karpenter.k8s.aws/{name}"
        for name in (
            "capacity-reservation-id",
            "capacity-reservation-interruptible",
            "capacity-reservation-type",
            "ec2nodeclass",
            "instance-accelerator-count",
            "instance-accelerator-manufacturer",
            "instance-accelerator-name",
            "instance-capability-flex",
            "instance-category",
            "instance-cpu",
            "instance-cpu-manufacturer",
            "instance-cpu-sustained-clock-speed-mhz",
            "instance-ebs-bandwidth",
            "instance-encryption-in-transit-supported",
            "instance-family",
            "instance-generation",
            "instance-gpu-count",
            "instance-gpu-manufacturer",
            "instance-gpu-memory",
            "instance-gpu-name",
            "instance-hypervisor",
            "instance-local-nvme",
            "instance-memory",
            "instance-network-bandwidth",
            "instance-size",
            "instance-tenancy",
            "placement-group-id",
            "placement-group-partition",
        )
    ),
}


def karpenter_template_label_refusal(key: str) -> str:
    """The NodePool CRD's message refusing `key` as a template label ("" when it may be one)."""
    if key in KARPENTER_RESTRICTED_TEMPLATE_LABELS:
        return f'label "{key}" is restricted'
    domain = key.split("/", 1)[0]
    for restricted, allowed in KARPENTER_RESTRICTED_DOMAINS.items():
        if domain.endswith(restricted) and key not in allowed:
            return f'label domain "{restricted}" is restricted'
    return ""


# What a managed node group's labels may not hold. The kubelet (EKS passes a node group's
# labels to it as --node-labels) refuses to start with a label in the `kubernetes.io` or `k8s.io`
# namespaces (the namespace or a subdomain of it) unless the kubelet may set it itself: the
# namespaces `kubelet.kubernetes.io`, `node.kubernetes.io` (and their subdomains) or one of
# KUBELET_LABELS (kubernetes/kubernetes cmd/kubelet/app/options/options.go ValidateKubeletFlags
# and staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go IsKubeletLabel, the stored copy
# 1c7b3d91 read 2026-11-30 via `read_file`/`find_string`); the node never joins
# (NodeCreationFailure). The EKS API itself refuses keys starting with these prefixes: its
# InvalidParameterException "Label cannot contain reserved prefixes [kubernetes.io/, k8s.io/,
# eks.amazonaws.com/]", quoted in eksctl-io/eksctl#4007 and aws/containers-roadmap#1451 (not
# in the API reference; read 2026-11-30 via `search`).
KUBELET_LABELS = frozenset(
    {
        HOSTNAME,
        ZONE,
        REGION,
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        INSTANCE_TYPE,
        OS,
        ARCH,
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
EKS_RESERVED_LABEL_PREFIXES = ("kubernetes.io/", "k8s.io/", "eks.amazonaws.com/")


def _in_namespace(namespace: str, parent: str) -> bool:
    return namespace == parent or namespace.endswith("." + parent)


def node_group_label_refusal(key: str) -> str:
    """Why EKS or the kubelet refuses `key` as a managed node group's label ("" when neither)."""
    if key.startswith(EKS_RESERVED_LABEL_PREFIXES):
        return f"EKS refuses the reserved prefixes {', '.join(EKS_RESERVED_LABEL_PREFIXES)}"
    namespace = key.split("/", 1)[0] if "/" in key else ""
    kubernetes = any(_in_namespace(namespace, ns) for ns in ("kubernetes.io", "k8s.io"))
    kubelet = key in KUBELET_LABELS or any(
        _in_namespace(namespace, ns) for ns in KUBELET_LABEL_NAMESPACES
    )
    if kubernetes and not kubelet:
        return (
            "the kubelet refuses kubernetes.io and k8s.io labels but those of "
            f"{' and '.join(KUBELET_LABEL_NAMESPACES)}: the node would never join"
        )
    return ""


# The labels Karpenter derives from an instance type and puts in its requirements
# (karpenter-provider-aws v1.14.1, commit bde0065 of 2026-08-20, pkg/providers/instancetype/
# types.go `computeRequirements`, read 2026-11-30): a template label is added to the NodePool's
# requirements too, so one of these whose value none of the pool's types gives matches no
# type, and no node launches. None: the type has none (Karpenter's DoesNotExist, no value
# matches); a label whose fact we do not hold for the type is left out (not checked).
KARPENTER_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
KARPENTER_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
KARPENTER_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
KARPENTER_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
KARPENTER_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
# `instanceTypeScheme` in types.go: category, an optional `-Ntb`, generation, then anything
_TYPE_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")


def _kabob(text: str) -> str:
    """types.go `lowerKabobCase`: "L40S" -> "l40s", "Radeon Pro V520" -> "radeon-pro-v520"."""
    return text.replace(" ", "-").lower()


def karpenter_type_labels(
    instance_type: str,
    vcpus: int,
    memory_mib: int,
    gpus: int,
    gpu_name: str | None,
    *,
    gpu_manufacturer: str | None = None,
    gpu_memory_mib: int | None = None,
    hypervisor: str | None = None,
    instance_storage_gb: int | None = None,
    nvme_support: str | None = None,
    cpu_manufacturer: str | None = None,
    bandwidth_megabits: int | None = None,
) -> dict[str, str | None]:
    """The values Karpenter gives an instance type's well-known labels (types.go).

    EC2's facts as DescribeInstanceTypes names them: `gpu_memory_mib` is one GPU's
    (Gpus[0].MemoryInfo.SizeInMiB, not TotalGpuMemoryInMiB), `nvme_support` the instance
    store's NvmeSupport, `cpu_manufacturer` ProcessorInfo.Manufacturer, `bandwidth_megabits`
    the type's entry in Karpenter's own table (zz_generated.bandwidth.go; 0: not in it). A
    keyword left None is a fact not held: its label is left out (`instance_storage_gb` 0: no
    instance store)."""
    family, _, size = instance_type.partition(".")
    scheme = _TYPE_SCHEME.match(instance_type)
    gpu = gpus > 0 and gpu_name is not None
    out: dict[str, str | None] = {
        INSTANCE_TYPE: instance_type,
        "karpenter.k8s.aws/instance-category": scheme.group(1) if scheme else None,
        "karpenter.k8s.aws/instance-generation": scheme.group(3) if scheme else None,
        KARPENTER_INSTANCE_FAMILY: family if size else None,
        "karpenter.k8s.aws/instance-size": size or None,
        "karpenter.k8s.aws/instance-capability-flex": str("-flex" in family).lower(),
        "karpenter.k8s.aws/instance-cpu": str(vcpus),
        "karpenter.k8s.aws/instance-memory": str(memory_mib),
        KARPENTER_GPU_COUNT: str(gpus) if gpu else None,
        "karpenter.k8s.aws/instance-gpu-name": _kabob(gpu_name) if gpu_name and gpu else None,
    }
    if bandwidth_megabits is not None:
        out[KARPENTER_NETWORK_BANDWIDTH] = str(bandwidth_megabits) if bandwidth_megabits else None
    if gpu_memory_mib is not None:
        out[KARPENTER_GPU_MEMORY] = str(gpu_memory_mib) if gpu else None
    if gpu_manufacturer is not None:
        manufacturer = _kabob(gpu_manufacturer) if gpu else None
        out["karpenter.k8s.aws/instance-gpu-manufacturer"] = manufacturer
    if hypervisor is not None:
        out[KARPENTER_HYPERVISOR] = hypervisor  # In string(info.Hypervisor): "" on metal
    if instance_storage_gb == 0:
        out[KARPENTER_LOCAL_NVME] = None
    elif instance_storage_gb is not None and nvme_support is not None:
        nvme = nvme_support != "unsupported"
        out[KARPENTER_LOCAL_NVME] = str(instance_storage_gb) if nvme else None
    if cpu_manufacturer is not None:
        out[KARPENTER_CPU_MANUFACTURER] = _kabob(cpu_manufacturer)
    return out


# --- label selectors (metav1.LabelSelector) -------------------------------------------------

_SELECTOR_OPERATORS = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a metav1 LabelSelector (`matchLabels`, `matchExpressions`) selects an object
    with `labels`: the project's one reader of a label selector (a pod affinity term's or a
    topology spread's `labelSelector`, an admission binding's `namespaceSelector`).

    Why one: jobs/packing and plan/checks/admission_policies each had a copy, and they
    disagreed on an operator Kubernetes does not know (one ignored the requirement, the other
    selected nothing). The rules are apimachinery's (kubernetes/apimachinery tag v0.35.7,
    3e341b59, read 2026-12-01): pkg/apis/meta/v1/helpers.go `LabelSelectorAsSelector` (a nil
    selector selects nothing, an empty one everything; an unknown operator is an error) and
    pkg/labels/selector.go `NewRequirement` (In/NotIn need values, Exists/DoesNotExist take
    none) and `Requirement.Matches` (NotIn and DoesNotExist hold for a missing key). A
    selector upstream refuses selects nothing here, as the refusal admits nothing. Where the
    API defaults an absent selector to the empty one (a binding's namespaceSelector), the
    caller passes `{}`. Key and value syntax is left to the API server's validation.
    tests/core/test_label_selector.py runs upstream's cases.
    """
    if not isinstance(selector, Mapping):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), list(e.get("values") or [])
        if op not in _SELECTOR_OPERATORS or bool(values) != _SELECTOR_OPERATORS[op]:
            return False  # LabelSelectorAsSelector's error
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True
