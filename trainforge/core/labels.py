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
