"""A missing image piece's fix works when followed, in each case (wave 19, imagefix item 1).

It was one text for all: "use the trainforge runtime image (leave image unset) ...". On a job
whose code is its image's (a `command`), leaving image unset drops that code; on a job that
declares `imageFacts: {mlflow: false}`, leaving image unset alone is refused (imageFacts needs
an image); and the plan's finding on the stock image never named the waiver docs/images.md
says is its way out. Each test here applies the printed fix and sees the problem go away."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainforge.core import versions
from trainforge.core.errors import JobConfigError
from trainforge.jobs.declare import check_jobs
from trainforge.plan.core import plan_project

ROOT = Path(__file__).resolve().parents[2]
RULE = "TRAINFORGE_IMAGE_PIECE"
TRACKED = "tests/fixtures/import/tracked/train.py"  # imports mlflow


def test_the_plans_mlflow_fix_on_the_stock_image_works_when_followed(dev_jobs):
    """Shipped code importing mlflow on the stock image: "leave image unset" (its code still
    ships to the runtime image). Code of the image (a command): no "leave image unset", the
    waiver instead. Following both, the second plan has no open finding and one waived."""
    stock = versions.PYTORCH_IMAGE
    own = {"team": "research", "pool": "training-workloads", "image": stock}
    shipped = {"name": "tracked-stock", **own, "entrypoint": {"script": TRACKED}}
    baked = {"name": "baked-stock", **own, "entrypoint": {"command": ["python", "/app/t.py"]}}
    jobs = [*dev_jobs, shipped, baked]
    result = plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": jobs})
    fixes = {v.message.split(":")[0]: v.fix for v in result.failing if v.rule == RULE}
    assert sorted(fixes) == ["research/baked-stock", "research/tracked-stock"], fixes
    assert fixes["research/tracked-stock"].startswith("leave image unset (")
    assert "leave image" not in fixes["research/baked-stock"]  # it would drop /app/t.py
    assert f"waive {RULE} for this job" in fixes["research/baked-stock"]
    # follow them: the shipped job without image, the command job waived
    followed = [*dev_jobs, {k: v for k, v in shipped.items() if k != "image"}, baked]
    waiver = {"resource": "baked-stock", "rule": RULE, "reason": "logs to stdout only"}
    overrides = {"trainforge:jobs": followed, "trainforge-policy:waivers": [waiver]}
    again = plan_project(ROOT, "dev", standins=False, config_overrides=overrides)
    assert not [v for v in again.failing if v.rule == RULE]
    assert [v.message.split(":")[0] for v in again.waived if v.rule == RULE] == [
        "research/baked-stock"
    ]


def test_the_previews_mlflow_fix_on_declared_facts_works_when_followed(platform, refusal):
    """`imageFacts: {mlflow: false}` refuses at preview, where no waiver applies: the fix names
    none, and each way it names is accepted when followed. The old "leave image unset" alone
    is refused (imageFacts without image)."""
    job = {"name": "own", "team": "research", "pool": "training-workloads",
           "image": "ghcr.io/acme/trainer:1.0", "imageFacts": {"mlflow": False},
           "entrypoint": {"script": TRACKED}}  # fmt: skip
    line = refusal(job)
    assert "waive" not in line
    assert (
        "; leave image and imageFacts unset (the trainforge runtime image carries mlflow)" in line
    )
    assert "and declare imageFacts: {mlflow: true}" in line
    unset = {k: v for k, v in job.items() if k not in ("image", "imageFacts")}
    check_jobs(platform, [unset])  # followed: the runtime image
    check_jobs(platform, [{**job, "imageFacts": {"mlflow": True}}])  # followed: own image
    with pytest.raises(JobConfigError, match="no imageFacts without image"):
        check_jobs(platform, [{k: v for k, v in job.items() if k != "image"}])
    # the bundled runtime from the image (codeSource: image): that key goes too, or the job
    # is refused for it ("an image: codeSource: image runs trainforge from your image")
    runtime = {k: v for k, v in job.items() if k != "entrypoint"} | {"codeSource": "image"}
    line = refusal(runtime)
    assert "; leave image, imageFacts and codeSource unset (the trainforge runtime" in line
    check_jobs(platform, [{k: v for k, v in runtime.items() if k not in ("image", "imageFacts",
                                                                      "codeSource")}])  # fmt: skip
    with pytest.raises(JobConfigError, match="codeSource: image runs trainforge from your image"):
        check_jobs(
            platform, [{k: v for k, v in runtime.items() if k not in ("image", "imageFacts")}]
        )
    # code of the image: leaving image unset would drop it, so the fix does not say so
    baked = {**job, "entrypoint": {"command": ["python", "-c", "import mlflow"]}}
    assert "leave image" not in refusal(baked)
