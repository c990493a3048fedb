"""What an image a job runs carries, where that knowledge comes from, and what a job lacks.

Why: MLflow, the S3 checkpoint mirror, EFA and fp8 each need a piece of the job's image
(mlflow, boto3, libfabric + the aws-ofi-nccl plugin, torchao). A job whose image lacks the
piece starts and the feature silently does nothing (or NCCL falls back to TCP sockets on a
3200 Gbps fabric; `precision: fp8` is refused at pod start, training/fp8.py). So
every image a job can use has facts, each with its source:

* the trainforge runtime images: the Dockerfile and requirements.lock (what its pip layer
  installs, at the lock's pins) and the base image's pin in `trainforge.core.versions`;
* the stock `pytorch/pytorch` images: their tag (torch, CUDA) and what the official image is
  known to lack;
* the Docker official OS and python images (`TORCHLESS`): no torch, the rest unknown;
* any other image: what the job (`imageFacts`) declares, else unknown.

`missing_pieces(job, target, facts)` names what a job's configured features need and its image
lacks, torch included where the pods need it (`entrypoint.torch_need`); `wiring.resolve_job` and
`entrypoint.refuse_missing_pieces` refuse such a job with the fix, and the plan shows every
job's image and facts (trainforge.plan.checks.images). `trainforge import` reads the same
model (jobs/import_image.py). Pulumi-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from trainforge.core import image_routes
from trainforge.stack.jobs import ImageFactsKeys

# A fact is True/a version string (present), False (known absent) or None (unknown).
Fact = str | bool | None

# The pieces a job's features need: the imageFacts keys other than the versions.
PIECES = tuple(n for n in ImageFactsKeys.model_fields if n not in ("torch", "cuda", "python"))


@dataclass(frozen=True)
class ImageFacts:
    """The facts of one image. `source` says where they come from."""

    torch: Fact = None  # False: known to carry no torch (TORCHLESS)
    cuda: str | None = None
    python: str | None = None
    mlflow: Fact = None
    boto3: Fact = None
    libfabric: Fact = None
    aws_ofi_nccl: Fact = None
    # the trainforge runtime library is in the image (no ConfigMap needed)
    trainforge: Fact = None
    torchao: Fact = None  # precision: fp8 (training/fp8.py)
    source: str = "not declared"

    def describe(self) -> str:
        """One line for the plan: torch 2.13.0, CUDA 12.6, Python 3.11, mlflow 3.17.0, ..."""
        parts = []
        for name, label in (("torch", "torch"), ("cuda", "CUDA"), ("python", "Python")):
            value = getattr(self, name)
            parts.append(f"no {label}" if value is False else f"{label} {value or '?'}")
        for name in PIECES:
            value = getattr(self, name)
            label = name.replace("_", "-")
            if value is None:
                parts.append(f"{label} ?")
            elif value is False:
                parts.append(f"no {label}")
            else:
                parts.append(label if value is True else f"{label} {value}")
        return ", ".join(parts)


UNKNOWN = ImageFacts()
EXTEND = 'docs/images.md, "Extend it with your own dependencies"'
DECLARED_SOURCE = "declared by the job (imageFacts)"
STOCK_SOURCE = "the official pytorch/pytorch image (tag; no mlflow, boto3, torchao, EFA libraries)"


# `pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime` and friends: torch version and CUDA build.
_TORCH_TAG = re.compile(r"^(?P<torch>\d+\.\d+(?:\.\d+)?)(?:-cuda(?P<cuda>\d+\.\d+))?(?:-|$)")
# the release of a torch version string: `2.1`, `2.1.0`, `2.5.1+cu124`
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?(?:[+.-]|$)")


def stock_facts(image: str) -> ImageFacts | None:
    """Facts of an official `pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-runtime` image (also
    through the stack's pull-through cache): its tag says torch and CUDA, and the official
    image has none of mlflow, boto3, libfabric, aws-ofi-nccl, trainforge or torchao. None for
    any other image: a private image tagged `2.1.0` may carry any torch."""
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":")
    repo = repo.removeprefix("docker.io/").removeprefix("index.docker.io/")
    if "/" in tag or (
        repo != "pytorch/pytorch" and not repo.endswith("/docker-hub/pytorch/pytorch")
    ):
        return None
    m = _TORCH_TAG.match(tag)
    return ImageFacts(
        torch=m.group("torch") if m else None,
        cuda=m.group("cuda") if m else None,
        mlflow=False,
        boto3=False,
        libfabric=False,
        aws_ofi_nccl=False,
        trainforge=False,
        torchao=False,
        source=STOCK_SOURCE,
    )


def torch_release(facts: ImageFacts) -> tuple[int, int] | None:
    """(major, minor) of the image's torch, from its tag or its declared imageFacts.torch; None
    where no version is known (no torch, unknown, or a version string that says none)."""
    m = _RELEASE.match(facts.torch) if isinstance(facts.torch, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


# Docker official images that carry no torch: an OS base, or CPython with pip, setuptools and
# wheel only (docker-library/python 3.11/trixie/Dockerfile, FROM buildpack-deps:trixie, its
# one `pip3 install` is setuptools and wheel; github.com/docker-library/python at 1dc072bf,
# read 2026-11-30). Read where Docker Hub (`library/<name>`) or ECR Public's copies of the
# official images (`public.ecr.aws/docker/library/<name>`) serve them, also through the
# stack's pull-through cache.
TORCHLESS = ("python", "ubuntu", "debian", "alpine", "buildpack-deps", "busybox", "amazonlinux")


def upstream(image: str) -> str:
    """The upstream reference of an image the stack's cache serves
    (`<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/<path>`, image_routes.CacheRoutes
    .rewrite; at preview the host is runtime_images.PENDING_REGISTRY), else `image`: what the
    user wrote, so what a message shows."""
    host, rest = image_routes.split(image)
    if ".dkr.ecr." not in host:
        return image
    prefix, _, path = rest.partition("/")
    hosts = image_routes.UPSTREAMS.get(prefix, (None, ()))[1]
    return f"{hosts[0]}/{path}" if hosts and path else image


def torchless(image: str) -> str | None:
    """The official image's name (`python`) when `image` is one of TORCHLESS, else None."""
    image = upstream(image)
    host, repo, _, _ = image_routes.parts(image)
    if host != "public.ecr.aws" and not image_routes.is_docker_hub(image):
        return None
    prefix = "docker/library/" if host == "public.ecr.aws" else "library/"
    name = repo.removeprefix(prefix)
    return name if repo.startswith(prefix) and name in TORCHLESS else None


def torchless_facts(image: str) -> ImageFacts | None:
    """torch known absent (the rest unknown) for a TORCHLESS image; None for any other."""
    name = torchless(image)
    if name is None:
        return None
    return ImageFacts(torch=False, source=f"the Docker official {name} image (no torch)")


def declared(keys: Any) -> ImageFacts:
    """The facts a job declares (a validated `ImageFactsKeys`)."""
    return ImageFacts(**keys.model_dump(exclude_none=True), source=DECLARED_SOURCE)


def facts_for(image: str, declared: ImageFacts | None) -> ImageFacts:
    """Declared facts win; else the stock image's, or a torch-less official image's; else
    unknown."""
    if declared is not None:
        return declared
    return stock_facts(image) or torchless_facts(image) or UNKNOWN


@dataclass(frozen=True)
class Missing:
    """A feature a job has on, the piece its image lacks, the key to look at, and the fix."""

    feature: str
    piece: str
    key: str
    value: Any
    fix: str
    why: str = ""  # torch: why the pods need it (`torch_need`)

    def message(self, image: str) -> str:
        if self.why:
            return f"{self.feature} need {self.piece}, which image {image} lacks: {self.why}; {self.fix}"
        return f"{self.feature} needs {self.piece}, which image {image} lacks; {self.fix}"


def runtime_way(job: Any, target: Any) -> str | None:
    """The change that puts `job` on the trainforge runtime image without losing its code, or
    None where none does. Why: code of the job's own image (a `command`, or a module without
    codeDir) is not in the runtime image, and imageFacts or codeSource: image
    without image is refused (stack/jobs.py), so "leave image unset" alone is a fix only for
    shipped code with neither."""
    entry = getattr(job, "entrypoint", None)
    if entry is not None and not entry.ships_code:
        return None
    # the keys refused without an image (stack/jobs.py) go with it
    keys = ["image"] + ["imageFacts"] * (job.image_facts is not None)
    keys += ["codeSource"] * (getattr(job, "code_source", None) == "image")
    way = f"leave {', '.join(keys[:-1])} and {keys[-1]} unset" if keys[1:] else "leave image unset"
    images = getattr(target, "images", None)
    if images is None or images.standard is None:
        way += " with trainforge:images.runtime: true"  # else an unset image is the stock one
    return way


def _fix(
    piece: str, declare: str, runtime: str | None, carrier: str, *more: str, install: str = ""
) -> str:
    """What works for a job whose image lacks `piece`: the runtime image (`runtime_way`), an
    image of the user's that carries it, then the case's own ways out (`more`)."""
    ways = [f"{runtime} ({carrier} carries {piece})"] if runtime else []
    ways.append(
        f"set image to one built FROM {carrier} or with {piece} installed{install} "
        f"(docs/images.md) and declare imageFacts: {{{declare}: true}}"
    )
    return ", or ".join([*ways, *more])


def missing_pieces(
    facts: ImageFacts,
    *,
    mlflow: bool,
    s3_mirror: bool,
    efa: bool,
    where: str,
    pool: str | None = None,
    image: str | None = None,
    fp8: bool = False,
    runtime: str | None = None,
    waive: str | None = None,
    torch: str = "",
) -> list[Missing]:
    """What the job's features need and its image is known to lack (unknown facts pass).
    `image`: the image the job runs, as its config names it (the value a `.image` problem
    shows: never None for a job that names one). `runtime`: `runtime_way` of the job; `waive`:
    the plan rule when the caller reports a waivable finding (MLflow on the stock image, whose
    code may run without it: docs/images.md), None for a refusal at preview. `torch`: why the
    pods need torch (`entrypoint.job_torch_need`), refused on an image known to lack it: they cannot
    start, so no waiver."""
    std = "the trainforge runtime image"
    out = []
    if torch and facts.torch is False:
        ways = [f"{runtime} ({std} carries torch)"] if runtime else []
        ways.append(
            f"set image to one built FROM {std} ({EXTEND}) and declare imageFacts: "
            '{torch: "<its version>"}'
        )
        out.append(Missing("the pods", "torch", f"{where}.image", image, ", or ".join(ways), torch))
    if mlflow and facts.mlflow is False:
        reason = "the reason its code runs without MLflow"
        more = [f"waive {waive} for this job with {reason}"] if waive else []
        fix = _fix("mlflow", "mlflow", runtime, std, *more)
        feature = "MLflow (the platform's tracking server)"
        out.append(Missing(feature, "mlflow (mlflow-skinny)", f"{where}.image", image, fix))
    if s3_mirror and facts.boto3 is False:
        # Refused, not left to fail: the mirror is trainforge.training's CheckpointManager,
        # which copies each checkpoint with boto3. Callers pass s3_mirror only where the code
        # runs it: own code that never imports trainforge mirrors nothing on any image
        # (trainforge.jobs.entrypoint.refuse_missing_pieces, mirror_warnings).
        out.append(
            Missing(
                "the S3 checkpoint mirror (trainforge's checkpoint code copies each checkpoint "
                "to S3 with boto3: the bundled runtime runs it, your own code only if it "
                "imports trainforge)",
                "boto3",
                f"{where}.checkpoint.s3Mirror",
                True,
                _fix("boto3", "boto3", runtime, std, "set checkpoint.s3Mirror: false"),
            )
        )
    if efa:
        for piece, value in (("libfabric", facts.libfabric), ("aws-ofi-nccl", facts.aws_ofi_nccl)):
            if value is False:
                out.append(
                    Missing(
                        f"EFA on pool {pool!r} (NCCL over libfabric)" if pool else "EFA",
                        piece,
                        f"{where}.image",
                        image,
                        _fix(
                            piece,
                            "awsOfiNccl" if piece == "aws-ofi-nccl" else piece,
                            runtime,
                            "the trainforge EFA runtime image (or an AWS Deep Learning Container)",
                            "efa: false for TCP",
                        ),
                    )
                )
    if fp8 and facts.torchao is False:
        from trainforge.training.fp8 import INSTALL  # noqa: PLC0415 - torch, for fp8 jobs only

        out.append(
            Missing(
                "precision fp8 (torchao's float8 training)",
                "torchao",
                f"{where}.precision",
                "fp8",
                _fix(
                    "torchao", "torchao", runtime, std, "precision: bf16", install=f" ({INSTALL})"
                ),
            )
        )
    return out
