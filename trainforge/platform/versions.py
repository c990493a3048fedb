"""Every pinned version the platform deploys, in one place.

Why: an upgrade (Kubernetes, an add-on, a chart, the node AMI) should be a one-line diff that
reviewers can spot, and nothing may float (`@latest`, unpinned charts) because a node image
or chart that changes under a running training job is an outage nobody asked for.
"""

from __future__ import annotations

# --- EKS control plane and add-ons (versions must be compatible with KUBERNETES_VERSION) ---
KUBERNETES_VERSION = "1.33"

EKS_ADDON_VERSIONS: dict[str, str] = {
    "vpc-cni": "v1.19.6-eksbuild.7",
    "coredns": "v1.12.1-eksbuild.2",
    "kube-proxy": "v1.33.0-eksbuild.2",
    "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
    "aws-ebs-csi-driver": "v1.46.0-eksbuild.1",
}

# --- Managed node groups (EKS-optimized AMI types; EKS picks the release for the version) ---
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"

# --- Karpenter ---
# >= 1.11: EC2NodeClass.spec.networkInterfaces (efa-only interfaces) and placementGroupSelector.
KARPENTER_VERSION = "1.14.1"
KARPENTER_CHART_REPO = "oci://public.ecr.aws/karpenter"
KARPENTER_CHART = "karpenter"
KARPENTER_CRD_CHART = "karpenter-crd"
# Pinned EKS-optimized AL2023 release for Karpenter nodes (never `al2023@latest`: a new AMI
# would drift every node, including ones running training jobs).
KARPENTER_AMI_ALIAS = "al2023@v20251023"

# --- BEGIN platform services pins (owned by the platform-services engineer) ---
# Kubeflow training operator v1 (PyTorchJob). v1.9.4 is the last v1 release; there is no
# official Helm chart for v1, so the pinned upstream kustomize overlay is installed.
TRAINING_OPERATOR_VERSION = "v1.9.4"
TRAINING_OPERATOR_KUSTOMIZE_URL = (
    "https://github.com/kubeflow/training-operator//manifests/overlays/standalone"
    f"?ref={TRAINING_OPERATOR_VERSION}"
)
# Kubeflow Trainer v2 (TrainJob; backend trainjob). Checked 2026-11-23 in github.com/kubeflow/
# trainer: tag v2.3.0 (2026-08-06) is the newest release; charts/kubeflow-trainer/Chart.yaml
# there is version 2.3.0, and .github/workflows/publish-helm-charts.yaml pushes that version to
# oci://ghcr.io/kubeflow/charts. The chart renders the Trainer CRDs as templates
# (crds.enabled) and bundles JobSet's chart 0.12.0 (oci://registry.k8s.io/jobset/charts,
# condition jobset.install), whose CRD is in its crds/ folder. (Not fetched from ghcr here:
# no network to it from this workplace.)
TRAINER_VERSION = "2.3.0"
TRAINER_CHART_REPO = "oci://ghcr.io/kubeflow/charts"
TRAINER_CHART = "kubeflow-trainer"
JOBSET_VERSION = "0.12.0"  # bundled by the Trainer chart above; listed for reviewers
# FSx for Lustre CSI driver as an EKS add-on (compatible with KUBERNETES_VERSION).
FSX_CSI_ADDON_VERSION = "v1.5.0-eksbuild.1"
LUSTRE_VERSION = "2.15"
NVIDIA_DEVICE_PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.17.1"
EFA_DEVICE_PLUGIN_CHART_REPO = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.7"
KUBE_PROMETHEUS_STACK_CHART_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART_VERSION = "66.2.1"
DCGM_EXPORTER_CHART_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_EXPORTER_CHART_VERSION = "4.1.1"
MLFLOW_IMAGE = "ghcr.io/mlflow/mlflow:v2.20.3"
# --- END platform services pins ---

# --- training jobs ---
# Stock PyTorch CUDA runtime image that jobs run by default: torch + CUDA + cuDNN, no trainforge
# code (that ships in a ConfigMap). Its torch matches the one the runtime is tested with
# (requirements.lock); torchrun honours TORCH_ELASTIC_SHUTDOWN_TIMEOUT, which the
# checkpoint-on-SIGTERM grace period relies on. Pinned by tag; jobs may name a digest instead.
PYTORCH_IMAGE = "pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime"
# One-shot helper pods (FSx team directories): a small, pinned shell image.
BUSYBOX_IMAGE = "busybox:1.37.0"
