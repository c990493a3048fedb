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

from trainforge.core import versions
from trainforge.core.contract import PoolFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs.image_facts import DECLARED_SOURCE, facts_for, torch_release


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


def archs_unknown(cuda: str | None, pool: PoolFacts) -> str | None:
    """What `build_problem` could not check of a CUDA build on a GPU pool: the GPU
    architectures its kernels cover, for a CUDA release outside versions.CUDA_ARCHS (not
    refused: an image of torch 2.6 built for CUDA 12.4 runs on an A100). None otherwise."""
    if cuda is None or not pool.has_gpus or cuda in versions.CUDA_ARCHS:
        return None
    known = ", ".join(versions.CUDA_ARCHS)
    pinned = ", ".join(b.cuda for b in versions.TORCH_CUDA_BUILDS)
    gpus = f"its {', '.join(pool.gpu_models)} GPUs" if pool.gpu_models else "its GPUs"
    return (
        f"CUDA {cuda}: held to the driver of pool {pool.name!r} only, not to {gpus}: the GPU "
        f"architectures of a build are known for CUDA {known} (torch "
        f"{versions.TORCH_VERSION} builds {pinned})"
    )


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
    # what the image carries (jobs/image_facts.py): its tag's, or what the job declares
    facts = facts_for(image, getattr(job, "image_facts", None))
    bundled = getattr(job, "code_source", "configmap") == "configmap"
    if needs_runtime is not None:
        bundled = needs_runtime
    torch = torch_release(facts)
    if bundled and torch is not None and torch < versions.MIN_RUNTIME_TORCH:
        need = ".".join(str(x) for x in versions.MIN_RUNTIME_TORCH)
        said = " (its imageFacts.torch)" if facts.source == DECLARED_SOURCE else ""
        raise JobConfigError(
            f"{where}.image",
            image,
            f"its torch {facts.torch}{said} is older than {need}, which the "
            "bundled runtime needs (FSDP2 fully_shard in torch.distributed.fsdp); the pods "
            f"would crash on import. Use torch >= {need}, e.g. {versions.PYTORCH_IMAGE}",
        )
    if facts.cuda is not None:
        # the stock tag's, the runtime image's or a declared CUDA build against the pool
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
