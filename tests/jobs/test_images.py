"""The training image is chosen per pool from the compatibility table, and refused at preview
when the pool's nodes (driver, GPU architecture) or the bundled runtime (torch) cannot run it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.jobs.helpers import CPU_POOL, GPU_POOL, target
from trainforge.core import versions
from trainforge.core.contract import PoolFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs import images
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

CU130 = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
CU126 = "pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime"


def pool(models: tuple[str, ...], driver: int | None = 580, name: str = "gpus") -> PoolFacts:
    return dataclasses.replace(
        GPU_POOL,
        name=name,
        gpu_models=models,
        gpu_archs=tuple(versions.GPU_ARCH.get(m, 0) for m in models),
        ami=versions.KARPENTER_AMI_ALIAS,
        nvidia_driver=driver,
    )


def job(**kw):
    return parse_job({"name": "j", "team": "research", "pool": "gpus", **kw})


def test_default_tags_are_the_published_builds():
    assert [b.image for b in versions.TORCH_CUDA_BUILDS] == [CU130, CU126]
    assert all(versions.TORCH_VERSION in b.image for b in versions.TORCH_CUDA_BUILDS)


@pytest.mark.parametrize(
    ("models", "driver", "expected"),
    [
        (("T4", "A10G"), 580, CU130),  # the dev pool on the AL2023 580 driver
        (("H100",), 580, CU130),
        (("B200",), 580, CU130),
        (("A10G",), 570, CU126),  # an older AMI: CUDA 13 needs 580, 12.6 runs on 525+
        (("T4",), 535, CU126),
    ],
)
def test_default_image_follows_gpus_and_driver(models, driver, expected):
    assert images.default_image_for(pool(models, driver)) == expected


def test_emitted_pods_run_the_pools_default_image():
    p = pool(("A10G",), 570)
    resolved = resolve_job(job(), target(p))
    emitted = emit(resolved, target(p), None if resolved.code_source == "image" else _code())
    containers = emitted.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ]
    assert containers[0]["image"] == CU126


def _code():
    from tests.jobs.helpers import CODE

    return CODE


def test_no_build_for_blackwell_on_an_old_driver_is_refused_naming_pool_and_driver():
    with pytest.raises(JobConfigError) as e:
        resolve_job(job(), target(pool(("B200",), 570)), "trainforge:jobs[0]")
    msg = str(e.value)
    assert msg.startswith("trainforge:jobs[0].image:")
    assert "'gpus'" in msg and "driver 570" in msg and "sm_100" in msg and "\n" not in msg


def test_g7_needs_a_newer_driver_than_the_eks_ami():
    with pytest.raises(JobConfigError, match="RTX PRO 4500 GPUs need NVIDIA driver >= 595"):
        resolve_job(job(), target(pool(("RTX PRO 4500",), 580)), "j")


@pytest.mark.parametrize(
    "image",
    [
        "pytorch/pytorch:2.0.1-cuda11.8-cudnn8-runtime",  # the seeds' images
        "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime",
        "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
    ],
)
def test_user_image_with_torch_older_than_the_runtime_needs_is_refused(image):
    with pytest.raises(JobConfigError) as e:
        resolve_job(job(image=image, efa=False), target(pool(("A10G",))), "trainforge:jobs[1]")
    assert str(e.value).startswith(f"trainforge:jobs[1].image: got '{image}'")
    assert "older than 2.6" in str(e.value)


OWN = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:v1"
ROOT = Path(__file__).resolve().parents[2]


def test_own_image_with_a_declared_old_torch_is_refused_as_a_stock_tag_is():
    """imageFacts.torch is read by the old-torch check (image_facts.facts_for, the one model),
    not only a pytorch/pytorch tag: the bundled runtime would crash on import either way."""
    with pytest.raises(JobConfigError) as e:
        resolve_job(
            job(image=OWN, imageFacts={"torch": "2.1"}, efa=False),
            target(pool(("A10G",))),
            "trainforge:jobs[1]",
        )
    assert str(e.value).startswith(f"trainforge:jobs[1].image: got '{OWN}'")
    assert "its torch 2.1 (its imageFacts.torch) is older than 2.6" in str(e.value)
    for fine in ("2.6", "2.13.0", "2.6.0+cu124", "nightly"):
        spec = job(image=OWN, imageFacts={"torch": fine}, efa=False)
        assert resolve_job(spec, target(pool(("A10G",)))).image == OWN
    spec = job(image=OWN, imageFacts={"torch": "2.1"}, codeSource="image", efa=False)
    assert resolve_job(spec, target(pool(("A10G",)))).image == OWN


def test_a_declared_cuda_build_is_held_to_the_pools_driver():
    with pytest.raises(JobConfigError) as e:
        spec = job(image=OWN, imageFacts={"torch": "2.13.0", "cuda": "13.0"})
        resolve_job(spec, target(pool(("H100",), 570)), "trainforge:jobs[0]")
    assert "pool 'gpus' cannot run it: CUDA 13.0 needs NVIDIA driver >= 580" in str(e.value)


def test_the_runtime_images_cuda_build_is_held_to_the_pools_driver():
    """A job without an image runs the runtime image; its facts' CUDA meets the same check."""
    from trainforge.jobs.runtime_images import RuntimeImage, RuntimeImages, base_facts

    facts = dataclasses.replace(base_facts("runtime"), cuda="13.0")
    runtime = RuntimeImage(ref="registry.example/runtime:1", facts=facts, target="", base="")
    images_ = RuntimeImages(standard=runtime, efa=None)
    with pytest.raises(JobConfigError, match="CUDA 13.0 needs NVIDIA driver >= 580"):
        resolve_job(job(efa=False), target(pool(("H100",), 570), images=images_), "j")
    assert resolve_job(job(efa=False), target(pool(("H100",)), images=images_)).image == runtime.ref


def test_old_torch_is_fine_when_the_image_brings_its_own_code():
    image = "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime"
    resolved = resolve_job(job(image=image, codeSource="image"), target(pool(("A10G",))))
    assert resolved.image == image


def test_user_cuda13_image_on_a_570_driver_is_refused_naming_pool_image_and_driver():
    with pytest.raises(JobConfigError) as e:
        resolve_job(job(image=CU130), target(pool(("H100",), 570)), "trainforge:jobs[0]")
    msg = str(e.value)
    assert CU130 in msg and "pool 'gpus'" in msg and "driver 570" in msg
    assert "CUDA 13.0 needs NVIDIA driver >= 580" in msg


def test_user_cu126_image_has_no_blackwell_kernels():
    with pytest.raises(JobConfigError, match="sm_100"):
        resolve_job(job(image=CU126), target(pool(("B200",))), "j")


def test_images_that_state_nothing_are_not_second_guessed():
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:2.0.1"
    assert resolve_job(job(image=image), target(pool(("B200",), 570))).image == image


def test_cpu_pool_needs_no_driver():
    assert images.image_for(job(pool="training-workloads"), CPU_POOL) == CU130


def test_published_pool_facts_carry_gpus_ami_and_driver():
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import pool_facts

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    cfg = parse_config(
        {
            "cluster": "tf",
            "nodePools": [{"name": "gpu", "instanceTypes": ["g4dn.xlarge", "g5.xlarge"]}],
            "nodeGroups": [{"name": "p5", "instanceTypes": ["p5.48xlarge"]}],
        }
    )
    facts = pool_facts(cfg)
    assert facts["gpu"].gpu_models == ("T4", "A10G") and facts["gpu"].gpu_archs == (75, 86)
    assert facts["gpu"].ami == versions.KARPENTER_AMI_ALIAS and facts["gpu"].nvidia_driver == 580
    assert facts["p5"].ami == versions.GPU_AMI_TYPE and facts["p5"].gpu_archs == (90,)


def test_a_cuda_build_whose_gpu_archs_are_unknown_is_said_to_be_held_to_the_driver_only():
    """A declared `imageFacts.cuda` (or a stock tag's) outside versions.CUDA_ARCHS was checked
    against the driver alone, and nothing said so: the plan showed "CUDA 12.4" as if its
    kernels had been held to the pool's GPUs too. Not refused (torch 2.6's CUDA 12.4 build
    runs on an A100); the plan's Images section now says what was not checked."""
    from types import SimpleNamespace

    from trainforge.core.contract import Declared, DeclaredJob
    from trainforge.plan.checks import images as images_check

    a100 = pool(("A100",))
    for cuda, tag in (("12.4", OWN), ("11.8", "pytorch/pytorch:2.6.0-cuda11.8-cudnn9-runtime")):
        facts = {"imageFacts": {"torch": "2.6.0", "cuda": cuda}} if tag == OWN else {}
        spec = resolve_job(job(image=tag, efa=False, **facts), target(a100), "j")  # not refused
        said = images.archs_unknown(cuda, a100)
        assert said is not None
        assert said.startswith(f"CUDA {cuda}: held to the driver of pool 'gpus' only"), said
        assert "not to its A100 GPUs" in said and all(k in said for k in versions.CUDA_ARCHS)
        ctx = SimpleNamespace(
            declared=Declared(jobs=[DeclaredJob(spec, target(a100), None, "j")]),
            resources_of=lambda _type: [],
            inventory=None,
            root=None,
        )
        (section,) = images_check.check(ctx).sections
        assert f"    {said}" in section.lines, section.lines
    assert images.archs_unknown("12.6", a100) is None  # its archs are known and checked
    assert images.archs_unknown("12.4", CPU_POOL) is None  # no GPUs: nothing to hold it to
    assert images.archs_unknown(None, a100) is None
    # docs/images.md names the known builds as the model has them, and the line as printed
    doc = " ".join((ROOT / "docs" / "images.md").read_text().split())
    *most, last = versions.CUDA_ARCHS
    assert f"known for CUDA {', '.join(most)} and {last} " in doc
    said = images.archs_unknown("12.4", dataclasses.replace(a100, name="gpu-workloads"))
    assert f"(`{said.split(', not to')[0]}, ...`)" in doc


@pytest.mark.parametrize("cuda", ["twelve", "12", "cu124", "12.4.1"])
def test_a_cuda_that_is_not_major_minor_is_refused_naming_the_key(cuda):
    """`imageFacts.cuda: twelve` ended in a ValueError traceback at preview (the driver check
    reads its major as an integer)."""
    with pytest.raises(JobConfigError) as e:
        parse_job({"name": "j", "team": "research", "pool": "gpus", "image": OWN,
                   "imageFacts": {"cuda": cuda}}, "trainforge:jobs[0]")  # fmt: skip
    assert str(e.value) == (
        f"trainforge:jobs[0].imageFacts.cuda: got '{cuda}'; expected a CUDA version "
        "MAJOR.MINOR, e.g. 12.6"
    )
