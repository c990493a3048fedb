"""The Kubeflow training operator v1, which turns `kubeflow.org/v1` PyTorchJobs into pods.

Why this way: v1 has no official Helm chart (the `helm install kubeflow/training-operator`
found in blog posts points at a chart the project never published), so the default installs
the official upstream `manifests/overlays/standalone` kustomize overlay at a pinned tag.
Its PyTorchJob CRD is ~600 KB, over the 256 KB `last-applied-configuration` annotation limit
of client-side apply, so it must be applied server-side: pulumi-kubernetes v4 providers use
server-side apply unless `enableServerSideApply: false` is set; when a kubeconfig is given,
a dedicated provider with it explicitly on is created. A Helm release is used instead only
when the stack config names a chart repository and version (e.g. an internal mirror).

Placement: the overlay's Deployment has no node selector, so it could land on a (spot)
training node. A Pulumi `transforms` hook (`system_placement`) adds the system node group's
selector to every pod template the overlay declares, as the provider registers them. A
Helm chart from config is the user's; its values must place it (docs/services.md).

Images: the overlay's operator image is on GitHub's registry (ghcr.io, anonymous pulls, no
credential needed), read from the overlay itself: it is vendored as package data at the
pinned tag (trainforge/platform/data/training-operator-<version>/) and
`trainforge.platform.overlay_images` reads the images its pod templates run. Another
transform (`images_through_cache`) points every container at the stack's pull-through cache
where a rule covers its registry, and the component records each image
(`image_routes.installed`) so the plan, which renders no pod of the overlay, reports it
(docs/images.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core import versions
from trainforge.core.image_routes import CacheRoutes, cached, current, installed
from trainforge.core.platform_names import TRAINING_OPERATOR_NAMESPACE
from trainforge.platform import overlay_images as overlay_images_mod
from trainforge.platform.k8s_provider import server_side_apply_provider
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR
from trainforge.platform.services_config import TrainingOperatorConfig

# Workload kinds whose pod template sits at spec.template (Jobs' too, for completeness).
_POD_TEMPLATE_KINDS = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:Job",
)


def system_placement(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Add the system node group's nodeSelector to a pod template the overlay declares.

    DaemonSets are left alone (they belong on every node they select); a selector the
    manifest already has is kept and ours added beside it.
    """
    if args.type_ not in _POD_TEMPLATE_KINDS or args.type_.endswith(":DaemonSet"):
        return None
    props = dict(args.props)
    spec = dict(props.get("spec") or {})
    template = dict(spec.get("template") or {})
    pod = dict(template.get("spec") or {})
    pod["nodeSelector"] = {**dict(pod.get("nodeSelector") or {}), **SYSTEM_NODE_SELECTOR}
    template["spec"] = pod
    spec["template"] = template
    props["spec"] = spec
    return pulumi.ResourceTransformResult(props, args.opts)


# The operator injects an init container into every Worker pod of a PyTorchJob with a Master
# (pkg/controller.v1/pytorch/initcontainer.go at v1.9.4: `sh -c` with `seq` and `nslookup`
# until the Master's Service resolves), from `--pytorch-init-container-image`, whose default is
# alpine:3.10 (pkg/config/config.go): end of life, and pulled from Docker Hub.
INIT_CONTAINER_FLAG = "--pytorch-init-container-image"


def init_container_image(image: str):
    """A transform giving the operator's Deployment `--pytorch-init-container-image=<image>`
    (`image`: a pinned busybox, which has `sh`, `seq` and `nslookup`, through the cache)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != "kubernetes:apps/v1:Deployment":
            return None
        props = dict(args.props)
        spec = dict(props.get("spec") or {})
        template = dict(spec.get("template") or {})
        pod = dict(template.get("spec") or {})
        containers = []
        for c in pod.get("containers") or []:
            c = dict(c)
            if c.get("name") == "training-operator":
                kept = [a for a in c.get("args") or [] if not a.startswith(INIT_CONTAINER_FLAG)]
                c["args"] = [*kept, f"{INIT_CONTAINER_FLAG}={image}"]
            containers.append(c)
        pod["containers"] = containers
        template["spec"] = pod
        spec["template"] = template
        props["spec"] = spec
        return pulumi.ResourceTransformResult(props, args.opts)

    return transform


def overlay_images(version: str = versions.TRAINING_OPERATOR_VERSION) -> list[str]:
    """The images the pinned overlay's pod templates run, read from its vendored files
    (manifests/base/deployment.yaml names the image, the overlay's kustomization.yaml its tag;
    at v1.9.4: ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489)."""
    overlay = overlay_images_mod.training_operator_overlay(version)
    return list(dict.fromkeys(i.image for i in overlay_images_mod.images(overlay)))


def images_through_cache(routes: CacheRoutes | None):
    """A transform pointing every container of the overlay's pod templates at the stack's
    pull-through cache (`routes.rewrite`: unchanged where no rule covers its registry, which
    the plan reports for Docker Hub, see `installed`)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if routes is None or args.type_ not in _POD_TEMPLATE_KINDS:
            return None
        props = dict(args.props)
        spec = dict(props.get("spec") or {})
        template = dict(spec.get("template") or {})
        pod = dict(template.get("spec") or {})
        for key in ("containers", "initContainers"):
            if pod.get(key):
                pod[key] = [
                    {**c, "image": routes.rewrite(c["image"])} if c.get("image") else c
                    for c in pod[key]
                ]
        template["spec"] = pod
        spec["template"] = template
        props["spec"] = spec
        return pulumi.ResourceTransformResult(props, args.opts)

    return transform


@dataclass
class TrainingOperatorArgs:
    config: TrainingOperatorConfig
    k8s_provider: k8s.Provider
    # When given, a provider with server-side apply explicitly enabled is created from it.
    kubeconfig: pulumi.Input[str] | None = None


class TrainingOperator(pulumi.ComponentResource):
    """Kustomize overlay (default) or Helm release of the training operator, pinned."""

    def __init__(
        self, name: str, args: TrainingOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:TrainingOperator", name, None, opts)
        cfg = args.config
        provider = server_side_apply_provider(name, args.k8s_provider, args.kubeconfig, self)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        self.namespace = cfg.namespace
        self.init_image = cached(versions.BUSYBOX_IMAGE)
        self.image: str | None = None  # the overlay's operator image, as pulled
        self.release: k8s.helm.v3.Release | None = None
        self.directory: k8s.kustomize.v2.Directory | None = None
        if cfg.chart is not None:
            self.source = f"{cfg.chart.repository} {cfg.chart.name}@{cfg.chart.version}"
            self.release = k8s.helm.v3.Release(
                name,
                name="training-operator",
                chart=cfg.chart.release_chart,
                version=cfg.chart.version,
                # OCI: the chart reference alone (see HelmChartRef); classic: repo + name.
                repository_opts=(
                    k8s.helm.v3.RepositoryOptsArgs(repo=cfg.chart.release_repo)
                    if cfg.chart.release_repo
                    else None
                ),
                namespace=cfg.namespace,
                create_namespace=True,
                atomic=True,
                opts=child,
            )
        else:
            if cfg.namespace != TRAINING_OPERATOR_NAMESPACE:
                # The upstream overlay hard-codes the `kubeflow` namespace.
                pulumi.log.warn(
                    "trainforge:trainingOperator.namespace is ignored by the upstream overlay, "
                    "which installs into 'kubeflow'",
                    self,
                )
                self.namespace = TRAINING_OPERATOR_NAMESPACE
            self.source = versions.TRAINING_OPERATOR_KUSTOMIZE_URL
            # recorded for the plan, which renders no pod of the overlay
            pulled = [installed(name, image) for image in overlay_images()]
            self.image = pulled[0] if pulled else None
            self.directory = k8s.kustomize.v2.Directory(
                name,
                directory=versions.TRAINING_OPERATOR_KUSTOMIZE_URL,
                opts=pulumi.ResourceOptions.merge(
                    child,
                    pulumi.ResourceOptions(
                        transforms=[
                            system_placement,
                            init_container_image(self.init_image),
                            images_through_cache(current()),
                        ]
                    ),
                ),
            )
        self.register_outputs(
            {
                "source": self.source,
                "namespace": self.namespace,
                "initImage": self.init_image,
                "image": self.image,
            }
        )
