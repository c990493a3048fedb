"""What `trainforge import` can say about the image an imported job keeps: whether its pods need
torch, whether the image is known to lack it, and what to do where its facts are unknown.

Why: the import kept `python:3.11` for a torchrun job and said "the plan checks it against the
pool"; the plan reads facts from `pytorch/pytorch` tags and `imageFacts` only (jobs/image_facts.py,
docs/images.md: facts left out are unknown and not refused), so it passed, and the pods could
not start the launcher, which imports torch. Pulumi-free.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainforge.core import image_routes
from trainforge.jobs.entrypoint import LAUNCHER, first_importer

# Docker official images that carry no torch: an OS base, or CPython with pip, setuptools and
# wheel only (docker-library/python 3.11/trixie/Dockerfile, FROM buildpack-deps:trixie, its
# one `pip3 install` is setuptools and wheel; github.com/docker-library/python at 1dc072bf,
# read 2026-11-30). Read where Docker Hub (`library/<name>`) or ECR Public's copies of the
# official images (`public.ecr.aws/docker/library/<name>`) serve them.
TORCHLESS = ("python", "ubuntu", "debian", "alpine", "buildpack-deps", "busybox", "amazonlinux")
EXTEND = 'docs/images.md, "Extend it with your own dependencies"'


def torchless(image: str) -> str | None:
    """The official image's name (`python`) when `image` is one of TORCHLESS, else None."""
    host, repo, _, _ = image_routes.parts(image)
    prefix = {"public.ecr.aws": "docker/library/"}.get(host, "library/")
    if host != "public.ecr.aws" and not image_routes.is_docker_hub(image):
        return None
    name = repo.removeprefix(prefix)
    return name if repo.startswith(prefix) and name in TORCHLESS else None


def torch_need(torchrun: bool, files: Iterable[tuple[str, str]]) -> str:
    """Why the pods of shipped code need torch in the image ('' where nothing says so): a pod
    running several processes starts them with torchrun through trainforge's launcher
    (jobs/entrypoint.py `torchrun`, shipped with the code), which imports torch; else a shipped
    file that imports it."""
    if torchrun:
        return (
            "they start your script with torchrun through trainforge's launcher, "
            f"`{' '.join(LAUNCHER)}` (shipped with it), which imports torch"
        )
    user = first_importer(files, "torch")
    return f"{user} imports torch" if user else ""


def unknown_facts(image: str, need: str, runs: str) -> str:
    """The line for an image kept with unknown facts: what the plan does with it, what the
    pods need and the keys that say it."""
    said = (
        f"image {image}: kept; its facts are unknown (the plan reads torch and CUDA from "
        "pytorch/pytorch tags and from an entry's imageFacts only), so the plan shows them as ? "
        "and checks nothing of it against the pool"
    )
    if not need:
        return f"{said}; declare what it carries with imageFacts (docs/images.md)"
    return (
        f"{said}. The pods need torch, as {need}: make sure the image has it, best built FROM "
        f'the runtime image ({EXTEND}), and declare it on the entry, imageFacts: {{torch: "<its '
        f'version>", cuda: "<its CUDA>"}}; or leave image unset to run {runs}'
    )


def dropped_torchless(image: str, name: str, need: str, runs: str) -> str:
    """The line for a kept-image candidate known to lack torch, which the pods need."""
    return (
        f"image {image}: dropped; the Docker official {name} image carries no torch, and the "
        f"pods need it: {need}. The job runs {runs}, which has torch and the pieces the "
        f"platform's features need; to use an image of yours, build it FROM the runtime image "
        f'({EXTEND}), set image to it and declare imageFacts: {{torch: "<its version>"}}'
    )
