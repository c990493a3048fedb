"""What `trainforge import` can say about the image an imported job keeps: whether its pods need
torch, whether the image is known to lack it, and what to do where its facts are unknown.

Why: the import kept `python:3.11` for a torchrun job and said "the plan checks it against the
pool"; the plan passed it, and the pods could not start the launcher, which imports torch. What
an image carries is jobs/image_facts.py's (TORCHLESS), why pods need torch jobs/entrypoint.py's
(torch_need), read here as the preview reads them. Pulumi-free.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainforge.jobs import entrypoint
from trainforge.jobs.entrypoint import LAUNCHER
from trainforge.jobs.image_facts import EXTEND, torchless

__all__ = ["dropped_torchless", "torch_need", "torchless", "unknown_facts"]


def torch_need(torchrun: bool, files: Iterable[tuple[str, str]]) -> str:
    """`entrypoint.torch_need` of imported code: it ships with the runtime library, so
    several processes per pod start through trainforge's launcher."""
    return entrypoint.torch_need(LAUNCHER if torchrun else None, files)


def unknown_facts(image: str, need: str, runs: str) -> str:
    """The line for a kept image the plan has no torch/CUDA facts of: what the plan does with
    it, what the pods need and the keys that say it. A TORCHLESS image kept (nothing needs
    torch) is said to carry none, as the plan shows it."""
    if name := torchless(image):
        return (
            f"image {image}: kept; the Docker official {name} image carries no torch, which "
            "nothing shipped imports (the plan refuses it for pods that need torch); declare "
            "what else it carries with imageFacts (docs/images.md)"
        )
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
