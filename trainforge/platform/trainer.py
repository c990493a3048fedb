"""Kubeflow Trainer v2, which turns `trainer.kubeflow.org/v1alpha1` TrainJobs into JobSets and
pods (backend trainjob), with JobSet and trainforge's own ClusterTrainingRuntimes.

Why this way: the official charts `oci://ghcr.io/kubeflow/charts/kubeflow-trainer` and
JobSet's `oci://registry.k8s.io/jobset/charts/jobset` (pinned in versions.py) are rendered by
Pulumi's Helm Chart v4 and every object is applied through the Kubernetes provider with
server-side apply: the Trainer CRDs (ClusterTrainingRuntime and TrainingRuntime are ~0.9 MB
each, far over client-side apply's 256 KB annotation) and the JobSet CRD, which both charts
keep in their `crds/` folders and a Helm release would install once and never upgrade. JobSet
comes from its own chart, not the Trainer chart's bundled one: the pinned Trainer (2.2.1)
bundles JobSet 0.11.0, and Kueue 0.19 is built and tested with JobSet 0.12.0 beside Trainer
2.2.1 (versions.KUEUE_JOBSET, TRAINER_JOBSET). JobSet is created first: the Trainer's
controller watches JobSets. The chart's own runtimes are off (they need a Helm hook
Job with a shell image and kubectl); the platform declares its runtimes itself, from
`trainforge.jobs.trainjob.runtime_manifests()`, so that they carry exactly what the pod
builder puts on every pod. They are created after the chart (the Trainer's webhook validates
them). The controllers go to `kubeflow-system`, the Trainer's own default namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core import platform_names, versions
from trainforge.core.pod_security import ENFORCE as PSA_ENFORCE
from trainforge.jobs import trainjob
from trainforge.platform import chart_images
from trainforge.platform.chart_images import ChartImage
from trainforge.platform.k8s_provider import server_side_apply_provider
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR

NAMESPACE = platform_names.TRAINER_NAMESPACE
RELEASE = "kubeflow-trainer"
CHART = f"{versions.TRAINER_CHART_REPO}/{versions.TRAINER_CHART}"
# The controller manager's image, read from the vendored values of the pinned chart with its
# templates' tag rule (kubeflow-trainer 2.2.1 templates/_helpers.tpl `trainer.image`:
# `image.tag`, else `v` + the chart's version). JobSet's controller (jobset chart 0.12.0) is
# not listed: its values.yaml at tag v0.12.0 names a staging image
# (us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:main) that its release rewrites
# when it packages the chart (Makefile helm-chart-package, yq), and the packaged chart was
# not readable here. Read 2026-11-27.
CONTROLLER_IMAGES = (ChartImage("image", "v{version}"),)


JOBSET_RELEASE = "jobset"


def chart_values() -> dict:
    return {
        # The manager on the system node group (trainforge.platform.placement).
        "manager": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)},
        # JobSet comes from its own chart (jobset_values), at the version Kueue is built with.
        "jobset": {"install": False},
        # The chart's runtimes need a post-install hook Job that installs kubectl at run time;
        # the platform installs its own (see module docstring).
        "runtimes": {"defaultEnabled": False},
    }


def jobset_values() -> dict:
    """JobSet's controller on the system node group (jobset chart 0.12.0 `controller`)."""
    return {"controller": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)}}


@dataclass
class KubeflowTrainerArgs:
    k8s_provider: k8s.Provider
    # When given, a provider with server-side apply explicitly enabled is created from it.
    kubeconfig: pulumi.Input[str] | None = None


class KubeflowTrainer(pulumi.ComponentResource):
    """Kubeflow Trainer v2 and JobSet (Helm chart, pinned) and the ClusterTrainingRuntimes."""

    def __init__(
        self, name: str, args: KubeflowTrainerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:KubeflowTrainer", name, None, opts)
        provider = server_side_apply_provider(name, args.k8s_provider, args.kubeconfig, self)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=NAMESPACE,
                labels={PSA_ENFORCE: "baseline"},
            ),
            opts=child,
        )
        self.jobset = k8s.helm.v4.Chart(
            f"{name}-jobset",
            chart=versions.JOBSET_CHART,
            version=versions.JOBSET_VERSION,
            name=JOBSET_RELEASE,
            namespace=NAMESPACE,
            values=jobset_values(),
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[self.namespace])
            ),
        )
        self.source = f"{CHART}@{versions.TRAINER_VERSION}"
        # the manager's image through the stack's cache where it has a ghcr.io rule (a GitHub
        # credential), else as the chart names it; recorded for the plan
        routed = chart_images.route(name, RELEASE, versions.TRAINER_VERSION, CONTROLLER_IMAGES)
        self.chart = k8s.helm.v4.Chart(
            name,
            chart=CHART,
            version=versions.TRAINER_VERSION,
            name=RELEASE,
            namespace=NAMESPACE,
            values=chart_images.merge_into(chart_values(), routed),
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[self.namespace, self.jobset])
            ),
        )
        self.runtimes = [
            k8s.apiextensions.CustomResource(
                f"{name}-{doc['metadata']['name']}",
                api_version=doc["apiVersion"],
                kind=doc["kind"],
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=doc["metadata"]["name"], labels=doc["metadata"]["labels"]
                ),
                spec=doc["spec"],
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[self.chart])
                ),
            )
            for doc in trainjob.runtime_manifests()
        ]
        self.register_outputs({"source": self.source, "namespace": NAMESPACE})
