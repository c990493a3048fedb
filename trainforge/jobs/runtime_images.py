"""The trainforge runtime images a platform offers jobs: references, facts, and the choice per pool.

Why: a job that names no image runs the bundled runtime. On the stock PyTorch image that
runtime had to be shipped in a ConfigMap and could not log to MLflow, mirror to S3 or use EFA.
The runtime images (images/runtime/Dockerfile) carry the runtime, mlflow-skinny and boto3, and
the EFA one libfabric and aws-ofi-nccl, so a job on them gets every platform feature and no
code ConfigMap. Their facts come from the Dockerfile and the lock (`dockerfile`), the base
pins from `trainforge.core.versions`; their tag is a hash of the build's content, so a new
runtime is a new tag (ECR tags are immutable) and the jobs on it are replaced.

Pulumi-free: the platform builds `RuntimeImages` from config (`plan_images`), jobs read it
from their `JobTarget.images`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainforge.core import versions
from trainforge.core.image_routes import DOCKER_HUB, CacheRoutes
from trainforge.jobs import dockerfile
from trainforge.jobs.image_facts import ImageFacts

STANDARD, EFA = "runtime", "runtime-efa"  # Dockerfile targets
# Stands for the stack's registry while only the config is known (`check_jobs`).
PENDING_REGISTRY = "<account>.dkr.ecr.<region>.amazonaws.com"


@dataclass(frozen=True)
class RuntimeImage:
    ref: str
    facts: ImageFacts
    target: str  # the Dockerfile target it is built from ("" for a prebuilt reference)
    base: str  # the FROM reference the build uses (through the cache)


@dataclass(frozen=True)
class RuntimeImages:
    """The standard and EFA runtime images, and the cache that rewrites public images."""

    standard: RuntimeImage | None
    efa: RuntimeImage | None
    routes: CacheRoutes | None = None
    # Pulumi resources that push the images; jobs wait for them. Not data.
    ready: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    def for_pool(self, efa_pool: bool) -> RuntimeImage | None:
        return self.efa if efa_pool else self.standard

    def rewrite(self, image: str) -> str:
        return self.routes.rewrite(image) if self.routes is not None else image


def NoRuntime(routes: CacheRoutes | None) -> RuntimeImages:  # noqa: N802 - reads as a value
    """Only the cache (jobs without an image run the stock PyTorch image)."""
    return RuntimeImages(standard=None, efa=None, routes=routes)


def base_facts(target: str) -> ImageFacts:
    """What the base image of a target brings (versions.py pins, with their sources)."""
    if target == EFA:
        return ImageFacts(
            torch=versions.RUNTIME_EFA_BASE_TORCH,
            cuda=versions.RUNTIME_EFA_BASE_CUDA,
            python=versions.RUNTIME_EFA_BASE_PYTHON,
            libfabric=f"EFA installer {versions.RUNTIME_EFA_BASE_EFA}",
            aws_ofi_nccl=True,
        )
    return ImageFacts(
        torch=versions.RUNTIME_BASE_TORCH,
        cuda=versions.RUNTIME_BASE_CUDA,
        libfabric=False,
        aws_ofi_nccl=False,
    )


def target_facts(target: str, root: Path = dockerfile.ROOT) -> ImageFacts:
    """A target's facts: its base's, plus what its pip layer installs at the lock's pins, plus
    the runtime its COPY puts in."""
    df = dockerfile.parse(root / dockerfile.DOCKERFILE)
    stage = df.stage(target)
    pins = {k.lower(): v for k, v in dockerfile.installed_pins(stage, root).items()}
    # the runtime imports core (the GPU catalog, the contract): both must be copied in
    copied = {src.rstrip("/") for sources, _ in stage.copies for src in sources}
    has_runtime = {"trainforge/training", "trainforge/core"} <= copied
    return replace(
        base_facts(target),
        mlflow=pins.get("mlflow-skinny") or pins.get("mlflow") or False,
        boto3=pins.get("boto3") or False,
        torchao=pins.get("torchao") or False,
        trainforge=has_runtime,
        source=f"{dockerfile.DOCKERFILE} target {target} + {dockerfile.LOCK} (base {df.base(target)})",
    )


def repository(cluster: str) -> str:
    return f"{cluster}/trainforge-runtime"


def plan_images(
    cluster: str,
    registry: str,
    routes: CacheRoutes | None,
    *,
    prebuilt: str | None = None,
    prebuilt_efa: str | None = None,
    root: Path = dockerfile.ROOT,
    efa_pools: bool = True,
) -> RuntimeImages:
    """The runtime images of a stack. Built ones are tagged `<target>-<content hash>` in the
    stack's repository. Without a Docker Hub rule the standard target (FROM the Docker Hub
    PyTorch image) is not built: the EFA image serves every pool. A stack without EFA pools
    (`efa_pools` False) that can build or names the standard image builds no EFA image: no
    pod would run it (an EFA job on a pool without EFA is refused)."""
    df = dockerfile.parse(root / dockerfile.DOCKERFILE)

    def built(target: str) -> RuntimeImage:
        args = {}
        if routes is not None:
            args = {
                "REGISTRY": routes.registry_for(DOCKER_HUB),
                "EFA_REGISTRY": routes.registry_for("ecr-public"),
            }
        digest = dockerfile.content_digest(root, target)[:20]
        return RuntimeImage(
            ref=f"{registry}/{repository(cluster)}:{target}-{digest}",
            facts=target_facts(target, root),
            target=target,
            base=df.base(target, args),
        )

    def given(ref: str, target: str) -> RuntimeImage:
        facts = target_facts(target, root)
        source = f"prebuilt {ref}, declared built from {facts.source}"
        return RuntimeImage(ref, replace(facts, source=source), "", df.base(target))

    standard: RuntimeImage | None = None
    if prebuilt:
        standard = given(prebuilt, STANDARD)
    elif routes is not None and DOCKER_HUB in routes.prefixes:
        standard = built(STANDARD)
    if standard is not None and not efa_pools and not prebuilt_efa:
        return RuntimeImages(standard=standard, efa=None, routes=routes)
    efa = given(prebuilt_efa, EFA) if prebuilt_efa else built(EFA)
    if standard is None:
        standard = efa  # its base is on ECR Public; the PyTorch image needs Docker Hub
    return RuntimeImages(standard=standard, efa=efa, routes=routes)
