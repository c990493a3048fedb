"""Well-known label and annotation keys, spelled once (tests/test_one_spelling.py finds a second).

Kubernetes: k8s.io/api v0.35.7 core/v1/well_known_labels.go (the kubelet sets the node labels;
the API server sets `kubernetes.io/metadata.name` on every namespace). Karpenter:
kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go and karpenter-provider-aws v1.14.1
pkg/apis/v1/labels.go (Karpenter also tags its instances with the NodePool key). Read from the
mirrors on 2026-11-30.
"""

from __future__ import annotations

HOSTNAME = "kubernetes.io/hostname"  # LabelHostname
REGION = "topology.kubernetes.io/region"  # LabelTopologyRegion
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
