"""A Docker official image without torch is known as such, by the plan as by the import (one
model: jobs/image_facts.py TORCHLESS), and a job whose pods need torch on one is refused before
anything is created (wave 19, torchless).

It was not: `image: public.ecr.aws/docker/library/python:3.11` on a shipped DDP script planned
CLEAN with "facts: torch ?, CUDA ?", and the pods could not start (the script imports torch;
several processes per pod start through trainforge's launcher, which imports it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainforge.core import versions
from trainforge.jobs import import_image
from trainforge.jobs.declare import check_jobs
from trainforge.jobs.image_facts import UNKNOWN, facts_for, torchless
from trainforge.plan.core import plan_project
from trainforge.plan.runner import find_config_error

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "public.ecr.aws/docker/library/python:3.11"
SCRIPT = "examples/mnist/train.py"  # a plain DDP script: `import torch`, no trainforge
OWN = {"team": "research", "pool": "training-workloads"}
DDP = {"name": "ddp-python", **OWN, "image": PYTHON, "workers": 2, "entrypoint": {"script": SCRIPT}}
FIX_RUNTIME = "leave image unset (the trainforge runtime image carries torch)"


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("python:3.11", "python"),
        ("docker.io/library/ubuntu:24.04", "ubuntu"),
        (PYTHON, "python"),
        ("public.ecr.aws/docker/library/debian:12", "debian"),
        # as the stack's pull-through cache serves them (preview's pending registry, a real one)
        (
            "<account>.dkr.ecr.<region>.amazonaws.com/ecr-public/docker/library/python:3.11",
            "python",
        ),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub/library/alpine:3.20", "alpine"),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/python:3.11", None),
        ("public.ecr.aws/deep-learning-containers/pytorch:2.13-cu133-amzn2023", None),
        ("pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime", None),
        ("ghcr.io/library/python:3.11", None),
        ("acme/python:3.11", None),
    ],
)
def test_the_facts_say_no_torch_for_the_official_torchless_images_only(image, name):
    assert torchless(image) == name
    facts = facts_for(image, None)
    if name:
        assert facts.torch is False and facts.describe().startswith("no torch, CUDA ?")
        assert facts.source == f"the Docker official {name} image (no torch)"
    else:
        assert facts.torch is not False


def test_the_import_reads_the_same_model():
    """No copy of the list in the import: its `torchless` is image_facts'."""
    assert import_image.torchless is torchless
    assert not hasattr(import_image, "TORCHLESS")


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (DDP, "train.py imports torch"),  # one process per pod: the script's own import
        (
            {**DDP, "name": "ddp-torchrun", "procsPerWorker": 2,
             "entrypoint": {"script": "examples/resumable/train.py"}},
            "they start your script with torchrun through trainforge's launcher, "
            "`python -m trainforge.training.launch` (shipped with it), which imports torch",
        ),
        (
            {"name": "bundled", **OWN, "image": "python:3.11", "preset": "ddp", "model": "mlp"},
            "they run the bundled runtime, `python -m trainforge.training`, which imports torch",
        ),
    ],
)  # fmt: skip
def test_pods_that_need_torch_on_a_torchless_image_are_refused_with_a_fix_that_works(
    platform, refusal, job, why
):
    line = refusal(job)
    image = job["image"]
    if job is DDP:  # docs/images.md shows this one as it is printed
        assert f"\n{line}\n" in (ROOT / "docs" / "images.md").read_text()
    assert line.startswith(
        f"trainforge:jobs[0].image: got {image!r}; the pods need torch, which image {image} "
        f"lacks: {why}; {FIX_RUNTIME}, or set image to one built FROM the trainforge runtime "
        'image (docs/images.md, "Extend it with your own dependencies") and declare '
        'imageFacts: {torch: "<its version>"}'
    ), line
    # followed: the runtime image, or an image of one's own built FROM it with torch declared
    check_jobs(platform, [{k: v for k, v in job.items() if k != "image"}])
    own = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/trainer:1.0"
    check_jobs(platform, [{**job, "image": own, "imageFacts": {"torch": "2.13.0"}}])


def test_what_does_not_need_torch_or_is_not_known_to_lack_it_is_not_refused(platform):
    """A `command` of the image, a script that never imports torch (the pod runs it through
    trainforge.training.usercode, which does not), the stock PyTorch image and an undeclared
    private image (facts unknown) pass as before."""
    command = {**DDP, "entrypoint": {"command": ["python", "-c", "print(1)"]}}
    plain = {**DDP, "workers": 1, "entrypoint": {"script": "tests/images/fixtures/plain.py"}}
    stock = {**DDP, "image": versions.PYTORCH_IMAGE}
    private = {**DDP, "image": "ghcr.io/acme/trainer:1.0"}
    for job in (command, plain, stock, private):
        check_jobs(platform, [job])
    assert facts_for(private["image"], None) is UNKNOWN
    assert facts_for(stock["image"], None).torch == versions.TORCH_VERSION


def test_the_plan_refuses_the_stack_job_and_plans_clean_with_the_fix(dev_jobs):
    """`trainforge plan` of dev with the job stops on the one line (exit 2 in the CLI); with
    image unset it plans CLEAN, and a `command` job kept on the python image is shown with
    "no torch" in the plan's Images section."""
    with pytest.raises(Exception) as err:  # noqa: PT011 - the runtime may wrap it
        plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": [DDP]})
    found = find_config_error(err.value)
    assert found is not None and "the pods need torch, which image" in str(found)
    assert FIX_RUNTIME in str(found)
    followed = {k: v for k, v in DDP.items() if k != "image"}
    command = {
        **DDP,
        "name": "py-command",
        "workers": 1,
        "entrypoint": {"command": ["python", "-c", "print(1)"]},
    }
    jobs = [*dev_jobs, followed, command]
    result = plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": jobs})
    assert result.clean, [v.message for v in result.failing]
    section = next(s for s in result.sections if s.title.startswith("Images"))
    text = "\n".join(section.lines)
    block = text.split("  research/py-command:")[1].split("  research/")[0]
    assert "facts: no torch, CUDA ?" in block
    assert "from: the Docker official python image (no torch)" in block


def test_the_docs_that_say_left_out_facts_are_unknown_name_the_torchless_images():
    """docs/jobs.md's import table said "facts left out are unknown and not refused" with no
    word of the exception, which the plan refuses: a Docker official OS or python image's
    missing torch is a fact (TORCHLESS). Each doc line that says so names every such image."""
    from trainforge.jobs.image_facts import TORCHLESS

    (row,) = [
        line
        for line in (ROOT / "docs" / "jobs.md").read_text().splitlines()
        if line.startswith("| a kept `image` the plan has no facts of")
    ]
    why = row.rstrip(" |").rsplit(" | ", 1)[1]
    assert "facts left out are unknown and not refused" in why, why
    images = " ".join((ROOT / "docs" / "images.md").read_text().split())
    start = images.index("Facts you leave out are unknown")
    said = images[start : images.index("```", start)]
    for name in TORCHLESS:
        assert f"`{name}`" in why, (name, why)
        assert f"`{name}`" in said, (name, said)
    assert "TORCHLESS" in why and "refuses" in why, why
