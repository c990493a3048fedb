"""Which container image a job's pods run, and whether the pool's nodes can run it.

Why: a pod whose CUDA runtime is newer than the node's NVIDIA driver, whose torch has no
kernels for the node's GPU, or whose torch is older than the bundled runtime imports, is
scheduled, pulls gigabytes and then crashes, at GPU prices, after the preview said nothing.
The compatibility table in `trainforge.core.versions` (torch build, CUDA, minimum driver,
GPU architectures, the driver each node AMI provides) answers all three at preview, from pool
facts the platform publishes (`PoolFacts.gpu_models`, `gpu_archs`, `nvidia_driver`, `ami`).

The emitters call `image_for(job, pool)` (one function, so that every backend picks the same
image); `check_image(job, pool, where)` raises the one-line error that `resolve_job` reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainforge.core import versions
from trainforge.core.contract import PoolFacts
from trainforge.core.errors import JobConfigError

# `pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime` and friends: torch version and CUDA build.
_TORCH_TAG = re.compile(r"^(?P<torch>\d+\.\d+(?:\.\d+)?)(?:-cuda(?P<cuda>\d+\.\d+))?(?:-|$)")


@dataclass(frozen=True)
class ImageFacts:
    """What an image's reference says about it (None where the reference does not say)."""

    torch: tuple[int, int] | None = None
    cuda: str | None = None


def image_facts(image: str) -> ImageFacts:
    """Torch version and CUDA build stated by a `pytorch/pytorch` tag; nothing for other images.

    Only the official repository's tag scheme is trusted: a private image tagged `2.1.0` may
    carry any torch, so it is not second-guessed.
    """
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":")
    if "/" in tag or not repo:
        return ImageFacts()
    repo = repo.removeprefix("docker.io/").removeprefix("index.docker.io/")
    # the same image through an ECR pull-through cache (trainforge.core.image_routes)
    if repo.endswith(".amazonaws.com/docker-hub/pytorch/pytorch"):
        repo = "pytorch/pytorch"
    if repo != "pytorch/pytorch":
        return ImageFacts()
    m = _TORCH_TAG.match(tag)
    if not m:
        return ImageFacts()
    major, minor = (int(x) for x in m.group("torch").split(".")[:2])
    return ImageFacts(torch=(major, minor), cuda=m.group("cuda"))


def _runs_arch(archs: tuple[int, ...], ptx: int | None, gpu: int) -> bool:
    """A GPU runs a cubin of its major and an equal or lower minor, or newer-than-PTX via JIT."""
    if any(a // 10 == gpu // 10 and a <= gpu for a in archs):
        return True
    return ptx is not None and ptx <= gpu


def _pool_driver(pool: PoolFacts) -> str:
    return f"NVIDIA driver {pool.nvidia_driver}" if pool.nvidia_driver else "no known driver"


def build_problem(
    cuda: str, archs: tuple[tuple[int, ...], int | None] | None, pool: PoolFacts
) -> str | None:
    """Why a CUDA build cannot run on the pool's nodes, or None when it can (or no GPUs)."""
    if not pool.has_gpus:
        return None
    need = versions.CUDA_MIN_DRIVER.get(int(cuda.split(".")[0]))
    node = f"node image {pool.ami or 'unknown'} ({_pool_driver(pool)})"
    if need and pool.nvidia_driver is not None and pool.nvidia_driver < need:
        return f"CUDA {cuda} needs NVIDIA driver >= {need}; {node}"
    for model in pool.gpu_models:
        gpu_need = versions.GPU_MIN_DRIVER.get(model)
        if gpu_need and pool.nvidia_driver is not None and pool.nvidia_driver < gpu_need:
            return f"{model} GPUs need NVIDIA driver >= {gpu_need}; {node}"
    if archs is not None:
        cubins, ptx = archs
        for model, arch in zip(pool.gpu_models, pool.gpu_archs, strict=True):
            if arch and not _runs_arch(cubins, ptx, arch):
                built = ", ".join(f"sm_{a}" for a in cubins)
                return (
                    f"its CUDA {cuda} build has kernels for {built} only; the pool's {model} "
                    f"is sm_{arch}"
                )
    return None


def default_image_for(pool: PoolFacts) -> str:
    """The first build of the pinned torch that the pool's GPUs and driver can run.

    Raises ValueError with every build's reason when none can (`check_image` turns it into
    the job's one-line error).
    """
    reasons = []
    for b in versions.TORCH_CUDA_BUILDS:
        why = build_problem(b.cuda, (b.archs, b.ptx), pool)
        if why is None:
            return b.image
        reasons.append(f"{b.image}: {why}")
    raise ValueError("; ".join(reasons))


def image_for(job: object, pool: PoolFacts) -> str:
    """The image a job's containers run: its own, or the default for its pool."""
    image = getattr(job, "image", None)
    return image if image else default_image_for(pool)


def check_image(
    job: object, pool: PoolFacts, where: str, *, needs_runtime: bool | None = None
) -> None:
    """Refuse, at preview, an image the pool's nodes cannot run or the runtime cannot use.

    `needs_runtime`: whether the pods import the shipped runtime (default: codeSource is
    configmap). A job with its own code needs it only if that code imports trainforge, which
    `trainforge.jobs.entrypoint.user_code` checks with the shipped files."""
    image = getattr(job, "image", None)
    if not image:
        try:
            default_image_for(pool)
        except ValueError as e:
            raise JobConfigError(
                f"{where}.image",
                None,
                f"no build of torch {versions.TORCH_VERSION} runs on pool {pool.name!r} "
                f"({e}); set image to one built for these GPUs and this driver",
            ) from None
        return
    facts = image_facts(image)
    bundled = getattr(job, "code_source", "configmap") == "configmap"
    if needs_runtime is not None:
        bundled = needs_runtime
    if bundled and facts.torch is not None and facts.torch < versions.MIN_RUNTIME_TORCH:
        need = ".".join(str(x) for x in versions.MIN_RUNTIME_TORCH)
        raise JobConfigError(
            f"{where}.image",
            image,
            f"its torch {facts.torch[0]}.{facts.torch[1]} is older than {need}, which the "
            "bundled runtime needs (FSDP2 fully_shard in torch.distributed.fsdp); the pods "
            f"would crash on import. Use torch >= {need}, e.g. {versions.PYTORCH_IMAGE}",
        )
    if facts.cuda is not None:
        why = build_problem(facts.cuda, versions.CUDA_ARCHS.get(facts.cuda), pool)
        if why is not None:
            raise JobConfigError(
                f"{where}.image",
                image,
                f"pool {pool.name!r} cannot run it: {why}",
            )


def default_image() -> str:
    """The build that needs the oldest driver (callers that know no pool), through the stack's
    pull-through cache; without a Docker Hub rule there, the pinned AWS Deep Learning Container
    (ECR Public) instead, so that nothing is pulled from Docker Hub unauthenticated."""
    from trainforge.core import image_routes  # noqa: PLC0415

    if image_routes.current() is None:
        return versions.PYTORCH_IMAGE
    return image_routes.torch_image()
