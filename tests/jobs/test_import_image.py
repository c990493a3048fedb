"""`trainforge import` says of the image it keeps what the plan and the pods will do with it: a
Docker official python image cannot run the launcher the pods start (no torch), and an image of
unknown facts is said to be unchecked, with the key that declares them (the review's
mine/my-pytorchjob.yaml: "kept; the plan checks it against the pool", a CLEAN plan, pods that
could not start)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from tests.jobs.helpers import CPU_POOL, target
from tests.jobs.importing import (
    RUNTIME,
    WHERE,
    container,
    emitted,
    imp,
    pytorchjob_yaml,
    replica,
    write,
)
from trainforge.jobs import images
from trainforge.jobs.entrypoint import LAUNCHER
from trainforge.jobs.image_facts import UNKNOWN, facts_for
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import choose_image

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "tests" / "fixtures" / "import" / "review" / "python-image.yaml"


def pod_command(r: Any, entry: dict[str, Any] | None = None) -> list[str]:
    """The command the stack's pods run for the imported entry (Master's container)."""
    spec = emitted(entry or r.entry, files=r.files)["spec"]["pytorchReplicaSpecs"]["Master"]
    container = spec["template"]["spec"]["containers"][0]
    return [*container.get("command", []), *container.get("args", [])]


def test_the_reviews_python_image_gives_way_to_one_with_torch():
    """The pods start the script with torchrun through the launcher, which imports torch; a
    Docker official python image has none, so the import runs the job on one that has."""
    r = imp(REVIEW)
    line = next(c for c in r.changes if c.startswith("image "))
    # what the line says the pods run is what they run
    with_image = {**r.entry, "image": "public.ecr.aws/docker/library/python:3.11"}
    assert " ".join(LAUNCHER) in " ".join(pod_command(r, with_image))
    assert line.startswith(
        "image public.ecr.aws/docker/library/python:3.11: dropped; the Docker official python "
        "image carries no torch, and the pods need it: they start your script with torchrun "
        "through trainforge's launcher, `python -m trainforge.training.launch`"
    )
    assert f"The job runs {RUNTIME}" in line and 'imageFacts: {torch: "<its version>"}' in line
    assert "image" not in r.entry
    t = target(CPU_POOL, backends=("pytorchjob",))
    _, facts = choose_image(parse_job(r.entry, WHERE), t, efa=False)
    assert facts.torch  # the image the job now runs has torch


CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata: {name: code}
data:
  train.py: |
    SCRIPT
---
"""
TORCHRUN_JOB = CONFIGMAP + pytorchjob_yaml(
    "pj",
    Worker=replica(
        container(image="IMAGE", command="COMMAND",
                  volumeMounts=[{"name": "code", "mountPath": "/workspace"}]),
        2,
        volumes=[{"name": "code", "configMap": {"name": "code"}}],
    ),
)  # fmt: skip


def job_file(tmp_path: Path, image: str, command: str, script: str = "print(1)") -> Path:
    text = TORCHRUN_JOB.replace("IMAGE", image).replace("COMMAND", command)
    return write(tmp_path, textwrap.dedent(text).replace("SCRIPT", script))


def test_an_image_of_unknown_facts_is_said_to_be_unchecked_with_the_key_that_declares_them(
    tmp_path,
):
    """ghcr.io/acme/trainer:1.0 may or may not carry torch: the plan reads no facts of it and
    refuses nothing, which the line says, naming imageFacts (a key the entry takes)."""
    image = "ghcr.io/acme/trainer:1.0"
    r = imp(job_file(tmp_path, image, "[torchrun, --nproc_per_node=2, /workspace/train.py]"))
    line = next(c for c in r.changes if c.startswith("image "))
    assert r.entry["image"] == image
    assert "kept; its facts are unknown" in line and "checks nothing of it against the pool" in line
    assert "The pods need torch, as they start your script with torchrun" in line
    assert "the plan checks it against the pool" not in line
    # what the line says of the plan is what the plan does: no facts, no refusal
    assert facts_for(image, None) is UNKNOWN
    t = target(CPU_POOL, backends=("pytorchjob",))
    images.check_image(parse_job(r.entry, WHERE), CPU_POOL, WHERE)
    assert " ".join(LAUNCHER) in " ".join(pod_command(r))
    # the key it names is one the entry takes, and then the facts are known
    declared = parse_job({**r.entry, "imageFacts": {"torch": "2.13.0", "cuda": "12.6"}}, WHERE)
    assert choose_image(declared, t, efa=False)[1].torch == "2.13.0"


def test_one_process_per_pod_needs_torch_only_where_a_shipped_file_imports_it(tmp_path):
    image = "ghcr.io/acme/trainer:1.0"
    r = imp(job_file(tmp_path, image, "[python, /workspace/train.py]", "import torch"))
    line = next(c for c in r.changes if c.startswith("image "))
    assert "The pods need torch, as train.py imports torch" in line
    plain = imp(job_file(tmp_path, "public.ecr.aws/docker/library/python:3.11",
                         "[python, /workspace/train.py]"))  # fmt: skip
    assert plain.entry["image"] == "public.ecr.aws/docker/library/python:3.11"
    line = next(c for c in plain.changes if c.startswith("image "))
    # what it says is what the plan knows: no torch (image_facts), not refused (nothing needs it)
    assert line == (
        "image public.ecr.aws/docker/library/python:3.11: kept; the Docker official python "
        "image carries no torch, which nothing shipped imports (the plan refuses it for pods "
        "that need torch); declare what else it carries with imageFacts (docs/images.md)"
    )
    assert facts_for(plain.entry["image"], None).torch is False


def test_a_command_of_a_torchless_image_keeps_it_and_says_it_has_no_torch(tmp_path):
    image = "public.ecr.aws/docker/library/python:3.11-slim"
    r = imp(job_file(tmp_path, image, "[sleep, '1']"))
    line = next(c for c in r.changes if c.startswith("image "))
    assert r.entry["image"] == image
    assert line == (
        f"image {image}: kept (your command needs it); the Docker official python image "
        "carries no torch, so your command must not need it"
    )
