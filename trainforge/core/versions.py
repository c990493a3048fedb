"""Every pinned version the platform deploys, in one place, each one a fact with its source.

Why: an upgrade (Kubernetes, an add-on, a chart, the node AMI) should be a one-line diff that
reviewers can spot, and nothing may float (`@latest`, unpinned charts) because a node image
or chart that changes under a running training job is an outage nobody asked for. And a pin
is only as good as the record it was read from: a tag that was never published fails the
first `pulumi up`, an add-on build not published for the cluster's Kubernetes minor is refused
by EKS, a CUDA build the node's driver cannot load crashes every pod.

Convention (tests/platform/test_versions.py enforces it, so add pins the same way):

    NAME = "x.y.z"  # source: <where it was read>, checked YYYY-MM-DD

A pin is a module-level UPPER_CASE constant holding a literal. Its comment, on the same line
or in the comment block of its paragraph (pins that belong together, like a chart's repository
and version, share one), says where the version was read (a release page, a
repository file at a tag, the EKS user guide table ...) and `checked YYYY-MM-DD` (the day it
was read). A mapping of pins carries the comment on each entry. Constants built from other
pins (f-strings, references) need none. A pin that could not be confirmed says so in its
comment ("NOT confirmed: ...") and keeps the best confirmed value; never invent a tag.

The compatibility table at the end (torch build <-> CUDA <-> minimum NVIDIA driver <-> GPU
architectures <-> node AMIs) is data the preview uses: `trainforge.jobs.images` picks each
pool's default training image from it and refuses an image the pool's nodes cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainforge.core import catalog

# --- EKS control plane and add-ons (versions must be published for KUBERNETES_VERSION) ---
# source: docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html (14 months of
# standard support) and endoflife.date/amazon-eks (1.35 released 2026-01-28, standard support
# until 2027-03-27; 1.33 left standard support 2026-07-29), checked 2026-11-23
# re-checked 2026-11-29: EKS offers 1.36 (endoflife-date/endoflife.date#10240, merged, adds
# EKS 1.36; aws-samples/aws-eks-samples#20, 2026-06-28, calls 1.36 "the latest supported";
# public cluster configs pin cluster_version 1.36); its EKS release and end-of-support dates
# were NOT read here. Not moved: the add-on builds for 1.36 (EKS_ADDON_VERSIONS), Karpenter
# 1.14.1's support of 1.36 and the charts' kubeVersion are not confirmed for it here (the
# Karpenter and chart mirrors end 2026-08), and every add-on must be, so the cluster stays on
# 1.35 (in standard support until 2027-03-27).
KUBERNETES_VERSION = "1.35"
# End of EKS standard support per minor (extended support costs extra per cluster hour; the
# plan's cost report reads this calendar: trainforge.plan.price_facts.eks_support).
# source: endoflife.date/amazon-eks and the EKS user guide's release calendar
# (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), checked 2026-11-23
EKS_STANDARD_SUPPORT_ENDS: dict[str, str] = {
    "1.29": "2025-03-23",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.30": "2025-07-23",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.31": "2025-11-26",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.32": "2026-03-23",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.33": "2026-07-29",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.34": "2026-12-02",  # source: endoflife.date/amazon-eks, checked 2026-11-23
    "1.35": "2027-03-27",  # source: endoflife.date/amazon-eks, checked 2026-11-23
}

EKS_ADDON_VERSIONS: dict[str, str] = {
    # source: EKS user guide "Amazon VPC CNI versions" table, 1.35 row (read from a public
    # mirror of the table; the awsdocs source file stored here predates 1.35), checked 2026-11-23
    # re-checked 2026-11-27: the awsdocs/amazon-eks-user-guide mirror the tools hold ends
    # 2024-12-18 (before 1.35): NOT verified against AWS's own table; a third-party 1.35
    # cluster config pins this build with "aws eks describe-addon-versions
    # --kubernetes-version 1.35" beside it (code search; its repository not named by the tool)
    "vpc-cni": "v1.21.1-eksbuild.8",
    # source: docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md, 1.35 row, checked 2026-11-23
    # re-checked 2026-11-27: NOT verified against AWS's docs (mirror predates 1.35); a
    # third-party 1.35 config pins it with kube-proxy v1.35.3-eksbuild.13 (code search)
    "coredns": "v1.14.3-eksbuild.3",
    # source: docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md, 1.35 row, checked 2026-11-23
    # re-checked 2026-11-27: as coredns (the same 1.35 config; a 1.35 security report calls it
    # "the latest available build"); later builds (-eksbuild.18, .21) appear in newer configs
    "kube-proxy": "v1.35.3-eksbuild.13",
    # source: public EKS add-on maps pin it for 1.32-1.34; NOT confirmed for 1.35 from a public
    # record (run `aws eks describe-addon-versions --addon-name eks-pod-identity-agent
    # --kubernetes-version 1.35` before `pulumi up`), checked 2026-11-23
    # re-checked 2026-11-27: still NOT confirmed for 1.35; 1.35 configs found by the code
    # search pin v1.3.10-eksbuild.3 instead (asked of EKS at preview: EKS_ADDONS_ASKED_AT_PREVIEW)
    "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
    # source: public EKS add-on maps pin it for 1.33 and 1.34 (upstream driver is at v1.59.0);
    # NOT confirmed for 1.35 from a public record (describe-addon-versions as above), checked 2026-11-23
    # re-checked 2026-11-27: still NOT confirmed for 1.35; 1.35 configs pin v1.59.0-eksbuild.1
    # and v1.60.0-eksbuild.1 (asked of EKS at preview: EKS_ADDONS_ASKED_AT_PREVIEW)
    "aws-ebs-csi-driver": "v1.50.1-eksbuild.1",
}

# --- GPU node health (trainforge/platform/node_health.py) ---
# EKS node monitoring agent add-on: NodeConditions (AcceleratedHardwareReady, NetworkingReady,
# KernelReady, StorageReady, ContainerRuntimeReady) that node auto repair acts on.
# source: github.com/aws/eks-node-monitoring-agent tag v1.7.0 (2026-08-04, its latest release,
# CHANGELOG.md); its chart (charts/eks-node-monitoring-agent/values.yaml at v1.7.0) ships image
# tag v1.7.0-eksbuild.1; a Kubernetes 1.35 cluster config generated from `aws eks
# describe-addon-versions` pins the add-on at v1.7.0-eksbuild.1 (github.com/devopscoop/
# project1-dev terraform.tfvars, cluster_version 1.35). v1.7.2-eksbuild.1 is pinned for a 1.36
# cluster elsewhere but NOT confirmed for 1.35 (re-check with `aws eks describe-addon-versions
# --addon-name eks-node-monitoring-agent --kubernetes-version 1.35`), checked 2026-11-23
EKS_NODE_MONITORING_AGENT_VERSION = "v1.7.0-eksbuild.1"

# --- Managed node groups (EKS-optimized AMI types; EKS picks the newest release for the version) ---
# source: docs.aws.amazon.com/eks/latest/userguide/eks-optimized-ami.html (AL2023 AMI types), checked 2026-11-23
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# source: same page; NVIDIA driver, CUDA user-mode driver, container toolkit, EFA, checked 2026-11-23
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"

# --- Karpenter ---
# >= 1.11: EC2NodeClass.spec.networkInterfaces (efa-only interfaces) and placementGroupSelector.
# source: endoflife.date/karpenter (1.11+ supports Kubernetes 1.29-1.35) and karpenter.sh/v1.14
# (v1.14.0 2026-07-11); v1.15.0 (2026-10-10) exists and is not adopted here, checked 2026-11-23
# re-checked 2026-11-29: v1.15.0 is NOT adopted: its chart values are not readable here (the
# aws/karpenter-provider-aws mirror ends 2026-08-23 at tag v1.14.1, charts/karpenter 1.14.1).
KARPENTER_VERSION = "1.14.1"
KARPENTER_CHART_REPO = (
    "oci://public.ecr.aws/karpenter"  # source: karpenter.sh upgrade guide, checked 2026-11-23
)
KARPENTER_CHART = "karpenter"  # source: karpenter.sh upgrade guide, checked 2026-11-23
KARPENTER_CRD_CHART = "karpenter-crd"  # source: karpenter.sh upgrade guide, checked 2026-11-23
# Pinned EKS-optimized AL2023 release for Karpenter nodes (never `al2023@latest`: a new AMI
# would drift every node, including ones running training jobs). A dated alias must be
# published for KUBERNETES_VERSION: releases before 1.35 went GA (2026-01-28) are not
# (aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow#170: al2023@v20251103
# "was never published for EKS 1.35").
# source: pinned in two independent public EC2NodeClass configs (Sept 2026); the release page
# itself was not readable here (NOT confirmed from awslabs/amazon-eks-ami releases); its NVIDIA
# driver is the 580 branch (awslabs/amazon-eks-ami#2470; the 1.35 v20260512 AMI ships
# 580.159.03), checked 2026-11-23
# re-checked 2026-11-27: still NOT confirmed from the release page: the awslabs/amazon-eks-ami
# mirror the tools hold ends at tag v20260724 (2026-07-23). Corroborated by third parties: a
# managed-node-group AMI bump to AL2023 release 1.35.7-20260903 (entigolabs/entigo-infralib
# PR #1488) and configs naming "system-node release 1.36.3-20260903" from
# github.com/awslabs/amazon-eks-ami/releases/tag/v20260903, i.e. the release has 1.35 AMIs.
KARPENTER_AMI_ALIAS = "al2023@v20260903"

# --- BEGIN platform services pins (owned by the platform-services engineer) ---
# Kubeflow training operator v1 (PyTorchJob). There is no official Helm chart for v1, so the
# pinned upstream kustomize overlay is installed, from the repository's current name
# (`kubeflow/training-operator` only redirects to `kubeflow/trainer`).
# source: github.com/kubeflow/trainer PR #3946/#3947 (v1.9.4 released 2026-08-18 for the
# Kubernetes version upgrade), checked 2026-11-23
TRAINING_OPERATOR_VERSION = "v1.9.4"
TRAINING_OPERATOR_KUSTOMIZE_URL = (
    "https://github.com/kubeflow/trainer//manifests/overlays/standalone"
    f"?ref={TRAINING_OPERATOR_VERSION}"
)
# Kubeflow Trainer v2 (TrainJob; backend trainjob). Pinned to the Trainer that the pinned
# Kueue line is built and tested with (KUEUE_TRAINER below): Kueue 0.19 vendors Trainer
# v2.2.1's API, and Trainer v2.2 and v2.3 do not share one (kubernetes-sigs/kueue#14504). The
# 2.2.1 chart keeps the Trainer CRDs in its crds/ folder (Pulumi's Helm Chart v4 renders them)
# and bundles JobSet's chart 0.11.0; the platform installs JobSet 0.12.0 itself instead
# (JOBSET_VERSION), as Kueue's release-0.19 end-to-end tests do. The OCI artifact itself was
# not pulled here (no network to ghcr.io from this workplace).
# source: github.com/kubeflow/trainer tag v2.2.1 (c505fc7c, 2026-06-17):
# charts/kubeflow-trainer/Chart.yaml version 2.2.1 (vendored:
# trainforge/platform/data/charts/kubeflow-trainer-2.2.1), pushed to oci://ghcr.io/kubeflow/
# charts by .github/workflows/publish-helm-charts.yaml. Newer: v2.3.0 (2026-08-06, built and
# tested with Kueue 0.20, whose release artifacts are not readable here: see KUEUE_CHART_VERSION);
# a v2.4.0 is cited by later records, but the mirror of kubeflow/trainer (2026-08-22) has no
# such tag, so it is not readable here either, checked 2026-11-29
TRAINER_VERSION = "2.2.1"
TRAINER_CHART_REPO = "oci://ghcr.io/kubeflow/charts"
TRAINER_CHART = "kubeflow-trainer"
# JobSet, installed from its own chart (the Trainer chart's bundled one is off): the version
# Kueue 0.19 is built with (go.mod sigs.k8s.io/jobset v0.12.0) and installs beside Trainer
# v2.2.1 in its end-to-end tests (hack/testing/e2e-common.sh install_kubeflow_trainer drops the
# Trainer's third-party/jobset when JOBSET_VERSION is set; hack/make/deps.mk reads both from
# go.mod). The chart location is the Trainer chart's dependency repository
# (kubeflow/trainer v2.2.1 charts/kubeflow-trainer/Chart.yaml: oci://registry.k8s.io/jobset/
# charts, name jobset).
# source: kubernetes-sigs/kueue release-0.19 go.mod and hack/ at c90ed700c1 (2026-08-22) and
# github.com/kubernetes-sigs/jobset charts/jobset/Chart.yaml at tag v0.12.0 (vendored:
# trainforge/platform/data/charts/jobset-0.12.0), checked 2026-11-29
JOBSET_VERSION = "0.12.0"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
# FSx for Lustre CSI driver as an EKS add-on.
# source: existing pin; upstream driver v1.9.0 exists (public.ecr.aws/fsx-csi-driver); the
# add-on build published for 1.35 is NOT confirmed from a public record (run `aws eks
# describe-addon-versions --addon-name aws-fsx-csi-driver --kubernetes-version 1.35`), checked 2026-11-23
FSX_CSI_ADDON_VERSION = "v1.5.0-eksbuild.1"
LUSTRE_VERSION = "2.15"  # source: docs.aws.amazon.com/fsx/latest/LustreGuide (FileSystemTypeVersion 2.15), checked 2026-11-23
# source: github.com/NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/Chart.yaml
# at tag v0.20.0 (chart version 0.20.0 = plugin 0.20.0), checked 2026-11-23
NVIDIA_DEVICE_PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
# The eks-charts EFA chart version is not the plugin version: chart v0.5.30 ships plugin v0.5.20.
# source: github.com/aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml (version
# v0.5.30, appVersion v0.5.20) at 5239609 (2026-08-03), checked 2026-11-23
EFA_DEVICE_PLUGIN_CHART_REPO = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"
# source: github.com/prometheus-community/helm-charts tag kube-prometheus-stack-88.5.3
# (operator v0.93.1; values.yaml read at that tag), checked 2026-11-23
KUBE_PROMETHEUS_STACK_CHART_REPO = "https://prometheus-community.github.io/helm-charts"
# re-checked 2026-11-29: newer charts (93.x) exist and are NOT adopted: their values are not
# readable here (the prometheus-community/helm-charts mirror ends 2026-08-22 at tag
# kube-prometheus-stack-88.5.3, also the chart's version on main then).
KUBE_PROMETHEUS_STACK_CHART_VERSION = "88.5.3"
# Grafana, a dependency of that chart: its values.yaml is vendored
# (trainforge/platform/data/charts/grafana-12.11.1) and the images it runs are read from it.
# source: charts/kube-prometheus-stack/Chart.yaml at tag kube-prometheus-stack-88.5.3
# (tests/platform/test_chart_values.py SUBCHARTS), checked 2026-11-23
GRAFANA_CHART_VERSION = "12.11.1"
# The DCGM exporter chart version is its own: chart 4.8.2 ships exporter 4.5.3-4.8.2.
# source: github.com/NVIDIA/dcgm-exporter deployment/Chart.yaml at tag 4.5.3-4.8.2, checked 2026-11-23
DCGM_EXPORTER_CHART_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
# re-checked 2026-11-29: chart 4.8.3 exists and is NOT adopted: its values are not readable
# here (the NVIDIA/dcgm-exporter mirror ends 2026-05-18 at tag 4.5.3-4.8.2, chart 4.8.2).
DCGM_EXPORTER_CHART_VERSION = "4.8.2"
# The server's version is the client's (`mlflow==3.17.0`, pyproject's `mlflow` extra).
# The `-full` variant: the plain image lacks Flask-WTF, which the basic-auth app the server
# runs with imports at start (mlflow/mlflow#14610; kubeflow/pipelines#14260, 2026-09-03:
# "Only Flask-WTF is missing from the image"); `-full` images exist from v3.9.0
# (docker/README.md) and install the `auth` extra since mlflow/mlflow#23892 (2026-06-10,
# docker/Dockerfile.full: `mlflow[extras,azure,db,gateway,genai,auth]==$VERSION`).
# source: public Dockerfiles build `FROM ghcr.io/mlflow/mlflow:v3.17.0-full` (the newest -full
# tag found in a public record; v3.16.1-full is cited too); no 3.18 image was found, and
# mlflow 3.17.0 with its mlflow-skinny/mlflow-tracing 3.17.0 is on PyPI (the server the
# tests start), checked 2026-11-23
MLFLOW_IMAGE = "ghcr.io/mlflow/mlflow:v3.17.0-full"
# Kueue: queueing with gang admission, quotas, cohorts and topology-aware scheduling. The
# chart installs its CRDs (templates/crd) and the controller; jobs' objects are applied
# after it (trainforge.platform.kueue).
# source: kubernetes-sigs/kueue#15458 ("Release v0.19.5": published
# github.com/kubernetes-sigs/kueue/releases/tag/v0.19.5, release notes synced 2026-09-17)
# and project-codeflare/appwrapper#424 ("CI: use Kueue 0.19.5"); v0.19.4 promoted
# 2026-09-10 (kubernetes/k8s.io#9917); chart location from the v0.19 install docs
# (`helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version=0.19.0`); no
# v0.19.6 found. checked 2026-11-23
# re-checked 2026-11-29: newer releases exist and are NOT adopted, because their artifacts
# (go.mod, CRDs, chart) are not readable here: the kubernetes-sigs/kueue mirror ends
# 2026-08-22 (tags up to v0.19.2, branch release-0.19 at c90ed700c1, main at ff69552e79 =
# v0.20.0-devel); v0.20.0 (2026-09-30, stops serving kueue.x-k8s.io/v1beta1) and later 0.20
# and 0.19 patches (0.20.7, 0.19.14) are known from release notes quoted elsewhere only. The
# release-0.19 line is built and tested with Trainer v2.2.1 and JobSet v0.12.0 (KUEUE_TRAINER).
# An OCI chart is named whole in the Release's `chart` (pulumi-kubernetes resolves a
# `repository_opts.repo` as a classic repository's index.yaml, which a registry does not serve).
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_CHART_VERSION = "0.19.5"
# The Kueue API version the objects are written in (v1beta2 is the storage version of the
# v0.19 CRDs; v1beta1 is served but deprecated). source: the v0.19 CRDs
# (kueue.x-k8s.io_clusterqueues.yaml: v1beta1 `deprecated: true`, v1beta2 `storage: true`),
# checked 2026-11-23
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
# OpenCost (real spend per namespace, trainforge.platform.opencost): its Helm chart, whose
# values.yaml names the images it runs (the exporter's, by tag and digest): its values.yaml and
# Chart.yaml are vendored (trainforge/platform/data/charts/opencost-2.5.17) and the images it
# runs are read from them (trainforge.platform.chart_images).
# source: github.com/opencost/opencost-helm-chart tag opencost-2.5.17 (725bb93, 2026-04-28):
# charts/opencost/Chart.yaml version 2.5.17, appVersion 1.120.1; the repository URL from its
# README (`helm repo add opencost https://opencost.github.io/opencost-helm-chart`). Newer
# charts exist (2.5.22 with OpenCost 1.120.3, 2026-05-31, walnuts1018/infra#3912; 2.5.30 by
# 2026-09-09, adfinis/helm-charts#1993) but their values.yaml was NOT readable here, so the
# pin stays at the newest tag whose values were read, checked 2026-11-27
# re-checked 2026-11-29: chart 2.5.34 exists and is NOT adopted: the
# opencost/opencost-helm-chart mirror still ends 2026-04-30 at tag opencost-2.5.17.
OPENCOST_CHART_REPO = "https://opencost.github.io/opencost-helm-chart"
OPENCOST_CHART_VERSION = "2.5.17"
# --- END platform services pins ---

# --- version pairs upstream builds and tests together (the plan refuses any other) ---
# Kueue's integrations compile against the Trainer and JobSet Go APIs in its go.mod, and its
# end-to-end tests install exactly those versions (hack/make/deps.mk: `go list -m` of
# github.com/kubeflow/trainer/v2 and sigs.k8s.io/jobset; hack/testing/e2e-common.sh installs
# Trainer's manifests at that tag and JobSet's release at that tag). A Trainer of another minor
# is an API Kueue was not built for: "Trainer v2.2 and v2.3 don't have API compatibility"
# (kubernetes-sigs/kueue#14504, which moved Kueue to v2.3.0 on main only). Keyed by Kueue minor.
KUEUE_TRAINER: dict[str, str] = {
    # source: kubernetes-sigs/kueue go.mod at tag v0.19.2 and on branch release-0.19 at
    # c90ed700c1 (2026-08-22): github.com/kubeflow/trainer/v2 v2.2.1, checked 2026-11-29
    "0.19": "2.2.1",
    # source: kubernetes-sigs/kueue go.mod on main at ff69552e79 (2026-08-22, v0.20.0-devel)
    # after #14504 (2026-08-16): v2.3.0; the released 0.20.x go.mod NOT read, checked 2026-11-29
    "0.20": "2.3.0",
}
KUEUE_JOBSET: dict[str, str] = {
    # source: kubernetes-sigs/kueue release-0.19 go.mod (as above): sigs.k8s.io/jobset
    # v0.12.0, checked 2026-11-29
    "0.19": "0.12.0",
    # source: kubernetes-sigs/kueue main go.mod (as above): v0.12.0, checked 2026-11-29
    "0.20": "0.12.0",
}
# Trainer -> the JobSet versions it is built or tested with: its chart's bundled JobSet (and
# go.mod), and the JobSet Kueue's end-to-end tests run it with (KUEUE_JOBSET).
TRAINER_JOBSET: dict[str, tuple[str, ...]] = {
    # source: kubeflow/trainer v2.2.1 charts/kubeflow-trainer/Chart.yaml (jobset 0.11.0; go.mod
    # sigs.k8s.io/jobset v0.11.1) and kubernetes-sigs/kueue release-0.19 e2e (0.12.0), checked 2026-11-29
    "2.2.1": ("0.11.0", "0.12.0"),
    # source: kubeflow/trainer v2.3.0 charts/kubeflow-trainer/Chart.yaml (jobset 0.12.0; go.mod
    # v0.12.0), checked 2026-11-29
    "2.3.0": ("0.12.0",),
}
# The Kubeflow SDK (PyPI `kubeflow`, tools/kubeflow-sdk/requirements.lock) -> the
# kubeflow_trainer_api releases its wheel accepts, as [lowest, below) (None: no upper bound).
# kubeflow_trainer_api is generated from the Trainer's API and released with it, at the same
# version (kubeflow/trainer api/python_api/kubeflow_trainer_api/__init__.py `__version__ =
# "2.2.1"` at tag v2.2.1, read 2026-11-29), so it names the Trainer the SDK speaks to.
SDK_TRAINER_API: dict[str, tuple[str, str | None]] = {
    # source: PyPI kubeflow 0.4.1 wheel METADATA (pip download --no-deps): Requires-Dist
    # kubeflow-trainer-api>=2.2.0, kubernetes<36.0.0,>=27.2.0, checked 2026-11-29
    "0.4.1": ("2.2.0", None),
    # source: PyPI kubeflow 0.5.0 wheel METADATA: kubeflow-trainer-api<2.4,>=2.3.0, checked 2026-11-29
    "0.5.0": ("2.3.0", "2.4"),
}
# The SDK the platform documents and tests (tools/kubeflow-sdk/requirements.lock): 0.4.1 with
# the trainer API of TRAINER_VERSION; kubeflow 0.5.0 (the newest on PyPI) requires
# kubeflow_trainer_api 2.3.x, i.e. Trainer 2.3, which the pinned Kueue line is not built with.
# source: PyPI (pip index versions kubeflow: 0.5.0, 0.4.1, ...; kubeflow-trainer-api: 2.3.0,
# 2.2.1, ...) and the METADATA above, checked 2026-11-29
KUBEFLOW_SDK_VERSION = "0.4.1"
KUBEFLOW_TRAINER_API_VERSION = "2.2.1"


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split(".")[:2])


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.lstrip("v").split("-")[0].split("."))


def version_pair_problems(
    kueue: str | None,
    trainer: str | None,
    jobset: str | None,
    sdk: str | None = None,
    trainer_api: str | None = None,
) -> list[str]:
    """Each pair of the given versions that upstream does not build and test together, as a
    sentence naming both versions and the supported ones (None: that piece is not deployed).

    Kueue <-> Trainer and Kueue <-> JobSet by Kueue minor (KUEUE_TRAINER, KUEUE_JOBSET: the
    Trainer minor must match, the JobSet must be the one Kueue is built with); Trainer <->
    JobSet (TRAINER_JOBSET); the SDK <-> its trainer API (SDK_TRAINER_API) <-> the Trainer
    (the same minor). A version the table does not know is a problem too: nobody read what it
    is built with."""
    out: list[str] = []
    if kueue and trainer:
        want = KUEUE_TRAINER.get(_minor(kueue))
        if want is None:
            out.append(
                f"Kueue {kueue}: no record of the Trainer it is built with (known Kueue lines: "
                + ", ".join(f"{k}.x with Trainer {v}" for k, v in KUEUE_TRAINER.items())
                + ")"
            )
        elif _minor(trainer) != _minor(want):
            lines = [k for k, v in KUEUE_TRAINER.items() if _minor(v) == _minor(trainer)]
            other = f"; Trainer {trainer} goes with Kueue {', '.join(lines)}.x" if lines else ""
            out.append(
                f"Kueue {kueue} with Trainer {trainer}: Kueue {_minor(kueue)}.x is built and "
                f"tested with Trainer {want} (its go.mod){other}"
            )
    if kueue and jobset:
        want = KUEUE_JOBSET.get(_minor(kueue))
        if want is not None and jobset != want:
            out.append(
                f"Kueue {kueue} with JobSet {jobset}: Kueue {_minor(kueue)}.x is built and "
                f"tested with JobSet {want} (its go.mod)"
            )
    if trainer and jobset:
        ok = TRAINER_JOBSET.get(trainer)
        if ok is None:
            out.append(
                f"Trainer {trainer}: no record of the JobSet it is built with (known: "
                + ", ".join(
                    f"Trainer {t} with JobSet {' or '.join(j)}" for t, j in TRAINER_JOBSET.items()
                )
                + ")"
            )
        elif jobset not in ok:
            out.append(
                f"Trainer {trainer} with JobSet {jobset}: Trainer {trainer} is built and tested "
                f"with JobSet {' or '.join(ok)}"
            )
    if sdk and trainer_api:
        rng = SDK_TRAINER_API.get(sdk)
        if rng is None:
            out.append(
                f"Kubeflow SDK {sdk}: no record of the trainer API it accepts (known: "
                + ", ".join(SDK_TRAINER_API)
                + ")"
            )
        else:
            low, below = rng
            if _key(trainer_api) < _key(low) or (below and _key(trainer_api) >= _key(below)):
                bound = f">={low}" + (f",<{below}" if below else "")
                out.append(
                    f"Kubeflow SDK {sdk} with kubeflow_trainer_api {trainer_api}: the SDK "
                    f"requires kubeflow_trainer_api{bound}"
                )
    if trainer_api and trainer and _minor(trainer_api) != _minor(trainer):
        out.append(
            f"kubeflow_trainer_api {trainer_api} with Trainer {trainer}: the SDK's trainer API "
            f"is generated from Trainer {trainer_api}; use kubeflow_trainer_api {_minor(trainer)}.x"
        )
    return out


# --- training jobs ---
# The default training image is chosen per pool from TORCH_CUDA_BUILDS below
# (trainforge.jobs.images.image_for). The stock PyTorch CUDA runtime image carries torch + CUDA
# + cuDNN and no trainforge code (that ships in a ConfigMap); its torch matches the one the
# runtime is tested with (requirements.lock).
# source: pypi.org/project/torch 2.13.0 (requirements.lock), checked 2026-11-23
TORCH_VERSION = "2.13.0"
# One-shot helper pods (FSx team directories) and the training operator's Worker init
# container (`--pytorch-init-container-image`; its default alpine:3.10 is end of life): a
# small, pinned shell image with `nslookup` and `seq`, from the Docker official image's copy on
# ECR Public (no Docker Hub credential needed; pulled through the stack's cache).
# source: gallery.ecr.aws/docker/library/busybox; public.ecr.aws/docker/library/busybox:1.37.0
# is pinned in several public manifests, checked 2026-11-25
BUSYBOX_IMAGE = "public.ecr.aws/docker/library/busybox:1.37.0"

# --- the trainforge runtime images (images/runtime/Dockerfile; docs/images.md) ---
# `runtime` target: the official PyTorch CUDA 12.6 runtime image by digest (Docker Hub: built
# only when the stack has a Docker Hub credential for its pull-through cache).
# source: pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime@sha256:6acf597e... pinned in several
# public Dockerfiles and job configs; its Python version is NOT confirmed from a public record,
# checked 2026-11-25
RUNTIME_BASE_IMAGE = (
    "pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime"
    "@sha256:6acf597eeb8e376a96580dde4952f37cc017fef732bb40bfc73f28f25e3f64b4"
)
RUNTIME_BASE_TORCH = "2.13.0"  # source: the image tag, checked 2026-11-25
RUNTIME_BASE_CUDA = "12.6"  # source: the image tag, checked 2026-11-25
# `runtime-efa` target: the AWS Deep Learning Container for PyTorch 2.13 (ECR Public): torch
# 2.13.0, CUDA 13.3, NCCL 2.30.7, EFA installer 1.49.0 with libfabric and the AWS NCCL OFI
# plugin (aws-ofi-nccl), Python 3.12 in /opt/venv. AWS patches this tag in place; no digest of
# it was found in a public record, so it is pinned by tag and the build records the digest.
# source: github.com/aws/deep-learning-containers docs (ML Training using PyTorch DLC: Images
# and What's Included), checked 2026-11-25
# VERIFIED 2026-11-27: aws/deep-learning-containers at commit e0ecedea (2026-08-21):
# docs/src/data/pytorch/2.13-cuda-ec2.yml (tags 2.13.0-cu133-amzn2023 and 2.13-cu133-amzn2023,
# public_registry: true, ga 2026-07-20, python py312), docs/pytorch/index.md (EKS GPU image
# public.ecr.aws/deep-learning-containers/pytorch:2.13-cu133-amzn2023) and
# .github/config/image/pytorch/2.13-ec2-cuda.yml (torch 2.13.0, CUDA 13.3.0, NCCL 2.30.7-1,
# EFA 1.49.0, Python 3.12): every fact below agrees.
RUNTIME_EFA_BASE_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch:2.13-cu133-amzn2023"
RUNTIME_EFA_BASE_TORCH = "2.13.0"  # source: DLC docs, checked 2026-11-25
RUNTIME_EFA_BASE_CUDA = "13.3"  # source: DLC docs, checked 2026-11-25
RUNTIME_EFA_BASE_PYTHON = "3.12"  # source: DLC docs (venv at /opt/venv), checked 2026-11-25
RUNTIME_EFA_BASE_EFA = (
    "1.49.0"  # EFA installer (libfabric, aws-ofi-nccl); source: DLC docs, checked 2026-11-25
)
# Builds and pushes the runtime images as a Pulumi resource (BuildKit, registry cache in ECR).
# source: pypi.org/project/pulumi-docker-build (0.0.22, newest; pip index versions), checked 2026-11-25
DOCKER_BUILD_PROVIDER_VERSION = "0.0.22"


# --- compatibility table: torch build <-> CUDA <-> driver <-> GPU architecture <-> node AMI ---


@dataclass(frozen=True)
class CudaBuild:
    """One published CUDA build of a torch release.

    `archs` are the compute capabilities (sm_XY as XY) the build ships kernels (cubins) for; a
    GPU runs a cubin of its own major version and an equal or lower minor (sm_86 cubins run on
    an sm_89 L4). `ptx` is the newest architecture it also ships PTX for, which the driver
    JIT-compiles for newer GPUs (None: no PTX, so nothing newer than `archs` runs).
    `min_driver` is the NVIDIA driver major the CUDA runtime needs (minor-version
    compatibility: any 12.x runs on R525+, 13.x needs R580+).
    """

    cuda: str
    image: str
    min_driver: int
    archs: tuple[int, ...]
    ptx: int | None = None


# Preference order: the first build a pool can run is its default image (newest CUDA first).
TORCH_CUDA_BUILDS: tuple[CudaBuild, ...] = (
    # source: image tag and digest sha256:db80a41f... pinned in public Dockerfiles; arch list
    # from pytorch .ci/manywheel/build_cuda.sh (13.0 on x86_64: 7.5;8.0;8.6;9.0;10.0;12.0+PTX);
    # driver: NVIDIA CUDA 13.x minor-version compatibility needs R580, checked 2026-11-23
    CudaBuild(
        cuda="13.0",
        image="pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
        min_driver=580,
        archs=(75, 80, 86, 90, 100, 120),
        ptx=120,
    ),
    # source: image tag and digest sha256:6acf597e... pinned in two public projects; arch list
    # from pytorch .ci/manywheel/build_cuda.sh (12.6: 5.0;6.0;7.0;7.5;8.0;8.6;9.0, no PTX, so
    # no Blackwell); driver: CUDA 12.x minor-version compatibility needs R525, checked 2026-11-23
    CudaBuild(
        cuda="12.6",
        image="pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime",
        min_driver=525,
        archs=(50, 60, 70, 75, 80, 86, 90),
    ),
)

# Architectures of CUDA builds of any torch release, for user images that name their build in
# the tag (`pytorch/pytorch:<torch>-cuda<X.Y>-...`). Builds not listed are checked for the
# driver only. source: pytorch .ci/manywheel/build_cuda.sh (12.6, 12.8, 12.9, 13.0 cases),
# checked 2026-11-23
CUDA_ARCHS: dict[str, tuple[tuple[int, ...], int | None]] = {
    "12.6": ((50, 60, 70, 75, 80, 86, 90), None),  # source: build_cuda.sh, checked 2026-11-23
    "12.8": ((70, 75, 80, 86, 90, 100, 120), None),  # source: build_cuda.sh, checked 2026-11-23
    "12.9": ((70, 75, 80, 86, 90, 100, 120), 120),  # source: build_cuda.sh, checked 2026-11-23
    "13.0": ((75, 80, 86, 90, 100, 120), 120),  # source: build_cuda.sh, checked 2026-11-23
}
# Driver major a CUDA major needs (minor-version compatibility).
# source: NVIDIA CUDA Toolkit release notes, "minimum required driver for minor version
# compatibility" (12.x: >= 525.60.13; 13.x: >= 580), checked 2026-11-23
CUDA_MIN_DRIVER: dict[int, int] = {
    11: 450,  # source: CUDA 11.x minor-version compatibility (>= 450.80.02), checked 2026-11-23
    12: 525,  # source: CUDA 12.x minor-version compatibility (>= 525.60.13), checked 2026-11-23
    13: 580,  # source: CUDA 13.x minor-version compatibility (>= 580), checked 2026-11-23
}

# GPU model (EC2 `GpuInfo.Gpus[].Name`) -> compute capability, from the GPU/instance catalog.
# source: core/data/gpu_catalog.json gpus.*.computeCapability (its source "cuda-gpus":
# developer.nvidia.com/cuda-gpus), checked 2026-11-23
GPU_ARCH: dict[str, int] = catalog.gpu_field("computeCapability")
# GPUs whose driver support starts later than the AMI's branch.
# source: core/data/gpu_catalog.json gpus.*.minDriver (its source "eks-g7-driver": the EKS
# user guide's G7 note), checked 2026-11-23
GPU_MIN_DRIVER: dict[str, int] = catalog.gpu_field("minDriver")

# NVIDIA driver branch (major) each node image we use provides.
# source: awslabs/amazon-eks-ami#2470 (AL2023 NVIDIA AMIs moved to the 580 branch from
# late 2025 for 1.33+) and the 1.35 v20260512 AMI (580.159.03, aws-samples
# sample-eks-enterprise-quickstart AMI_VERSIONS.md); managed node groups get EKS's newest
# AL2023_x86_64_NVIDIA release for KUBERNETES_VERSION, Karpenter nodes the pinned alias.
# Bottlerocket is not used. checked 2026-11-23
AMI_NVIDIA_DRIVER: dict[str, int] = {
    GPU_AMI_TYPE: 580,  # source: awslabs/amazon-eks-ami#2470, checked 2026-11-23
    KARPENTER_AMI_ALIAS: 580,  # source: awslabs/amazon-eks-ami#2470, checked 2026-11-23
}

# The oldest torch the bundled runtime imports cleanly: FSDP2's `fully_shard` and
# `MixedPrecisionPolicy` are public in `torch.distributed.fsdp` from 2.6 (before, they lived in
# `torch.distributed._composable.fsdp`); DCP `async_save` and `state_dict.get_state_dict` are
# older. An image with torch 2.0/2.1 (the seeds') starts and dies on import.
# source: pytorch 2.6 release notes (FSDP2 public API) and trainforge/training/parallel.py's
# imports, checked 2026-11-23
MIN_RUNTIME_TORCH = (2, 6)

# The build that needs the oldest driver: what a pool without GPUs (or a caller that knows no
# pool) runs. Jobs get theirs from `trainforge.jobs.images.image_for(job, pool)`.
PYTORCH_IMAGE = TORCH_CUDA_BUILDS[-1].image

# --- acceptance tests of GPU capacity (trainforge/platform/acceptance.py) ---
# DCGM client (dcgmi) for `dcgmi diag` against the node monitoring agent's host engine.
# source: NVIDIA/gpu-operator v26.7.0 (2026-08-20) deployments/gpu-operator/values.yaml
# (dcgm.version 4.6.0-1-ubuntu24.04), checked 2026-11-23
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
# The NCCL all-reduce test runs our torch.distributed benchmark in an image whose NCCL has the
# EFA stack (libfabric + the aws-ofi-nccl plugin); the stock PyTorch image has neither, so a
# job on it never uses EFA (the test says so). AWS Deep Learning Container for PyTorch 2.13
# (torch 2.13.0, CUDA 13.3 (driver 580+, which the AL2023 NVIDIA AMIs have), NCCL 2.30.7, EFA
# installer 1.49.0 with the AWS NCCL OFI plugin). The tag is patched in place by AWS with
# security fixes (same framework versions); pin a digest for bit-for-bit reproducibility.
# source: github.com/aws/deep-learning-containers docs/pytorch/index.md and
# docs/pytorch/changelog/index.md ("PyTorch 2.13 - 2026-07-20", tag 2.13-cu133-amzn2023 on
# public.ecr.aws/deep-learning-containers/pytorch), checked 2026-11-23
# VERIFIED 2026-11-27 (aws/deep-learning-containers at e0ecedea; see RUNTIME_EFA_BASE_IMAGE)
EFA_TEST_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch:2.13-cu133-amzn2023"

# --- add-on builds no public record confirmed for KUBERNETES_VERSION ---
# For these the program asks EKS itself at preview which build is the default for
# KUBERNETES_VERSION (`aws.eks.get_addon_version`, what `aws eks describe-addon-versions`
# marks as the default; trainforge/platform/addons.py), so `pulumi up` never sends a build EKS
# does not offer for the cluster. Their pins above are what the offline plan (no AWS account)
# shows in that answer's place (trainforge.platform.addons.pin). Confirm one (a source for the minor) and take it off this list.
# source: the NOT-confirmed notes on each pin above, checked 2026-11-23
EKS_ADDONS_ASKED_AT_PREVIEW = frozenset(
    {
        "eks-pod-identity-agent",
        "aws-ebs-csi-driver",
        "aws-fsx-csi-driver",
        "eks-node-monitoring-agent",
    }
)
