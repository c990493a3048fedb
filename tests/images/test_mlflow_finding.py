"""MLflow on the platform needs mlflow in a job's image only when the job's code uses it
(issue #43: a plain DDP script on the stock PyTorch image got "MLflow ... needs mlflow, which
image ... lacks", though it never imports mlflow)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainforge.core import versions
from trainforge.jobs.entrypoint import first_importer, logs_to_mlflow, runs_s3_mirror
from trainforge.jobs.spec import parse_job
from trainforge.plan.core import plan_project

ROOT = Path(__file__).resolve().parents[2]


def _job(**entry):
    raw = {"name": "j", "team": "research", "pool": "training-workloads"}
    if entry:
        raw["entrypoint"] = entry
    return parse_job(raw, "j")


def test_who_uses_mlflow_is_read_from_the_shipped_code():
    plain = [("train.py", "import torch\nimport os\n")]
    tracked = [("train.py", "import log\n"), ("log.py", "from mlflow import log_metric\n")]
    beside = [("train.py", "import torch\n"), ("log.py", "from mlflow import log_metric\n")]
    reporter = [("train.py", "from trainforge.training.metrics import MetricsReporter\n")]
    script = _job(script="examples/plain/train.py")
    assert not logs_to_mlflow(script, plain)
    assert logs_to_mlflow(script, tracked)
    assert not logs_to_mlflow(script, beside)  # shipped, never imported by what runs
    assert logs_to_mlflow(script, reporter)  # MetricsReporter logs to MLflow
    assert logs_to_mlflow(_job(), None)  # the bundled runtime logs to MLflow
    assert first_importer([("a.txt", "import mlflow")], "mlflow") is None  # not Python
    assert first_importer([("x.py", "import mlflowish")], "mlflow") is None


def test_who_mirrors_checkpoints_to_s3_is_read_from_the_shipped_code():
    """The S3 mirror is trainforge.training's CheckpointManager: a plain script that never
    imports trainforge mirrors nothing, whatever TRAINFORGE_CHECKPOINT_S3 its pods get (the
    dev plan said "S3 mirror: on" for mnist-user, examples/mnist/train.py)."""
    plain = [("train.py", "import torch\nimport os\n")]
    own_loop = [("train.py", "from trainforge.training import CheckpointManager\n")]
    script = _job(script="examples/plain/train.py")
    assert not runs_s3_mirror(script, plain)
    assert not runs_s3_mirror(script, [("x.py", "import boto3\n")])  # not the mirror
    assert runs_s3_mirror(script, own_loop)
    assert runs_s3_mirror(_job(), None)  # the bundled runtime mirrors


def test_the_plan_flags_only_the_job_whose_code_imports_mlflow():
    doc = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    jobs = doc["config"]["trainforge:jobs"]
    stock = versions.PYTORCH_IMAGE
    for name, script in (
        ("plain-stock", "examples/plain/train.py"),
        ("tracked-stock", "tests/fixtures/import/tracked/train.py"),
    ):
        jobs.append(
            {
                "name": name,
                "team": "research",
                "pool": "training-workloads",
                "image": stock,
                "entrypoint": {"script": script},
            }
        )
    result = plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": jobs})
    pieces = [v for v in result.failing if v.rule == "TRAINFORGE_IMAGE_PIECE"]
    assert [v.message.split(":")[0] for v in pieces] == ["research/tracked-stock"]
    assert "needs mlflow" in pieces[0].message
    section = next(s for s in result.sections if s.title.startswith("Images"))
    text = "\n".join(section.lines)
    assert "MLflow: not used (no file your entry runs imports mlflow or trainforge)" in text
    # the mirror is claimed only where code that runs it ships: not for mnist-user's plain
    # DDP script, still for resumable's own loop on trainforge.training
    by_job = {
        line.split(":")[0].strip(): section.lines[i + 3]
        for i, line in enumerate(section.lines)
        if line.startswith("  research/")
    }
    assert (
        "S3 mirror: not used (no file your entry runs imports trainforge)"
        in by_job["research/mnist-user"]
    )
    assert "S3 mirror: on" in by_job["research/resumable"]
    assert "S3 mirror: on" in by_job["research/mnist-ddp"]


def test_declared_no_mlflow_refuses_only_own_code_that_uses_it(monkeypatch):
    """`imageFacts: {mlflow: false}` with the platform's MLflow on: the bundled runtime and a
    script importing mlflow are refused at preview; a plain script is not (it was, before)."""
    import pulumi

    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.declare import check_jobs
    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config

    monkeypatch.chdir(ROOT)  # scripts are relative to the project directory
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    config = {
        k.removeprefix("trainforge:"): v for k, v in raw.items() if k.startswith("trainforge:")
    }
    platform = contract_from_config(parse_config(config))
    assert platform.mlflow_tracking_uri is not None
    job = {
        "name": "own",
        "team": "research",
        "pool": "training-workloads",
        "image": "ghcr.io/acme/trainer:1.0",
        "imageFacts": {"mlflow": False},
    }
    check_jobs(platform, [{**job, "entrypoint": {"script": "examples/plain/train.py"}}])
    tracked = {**job, "entrypoint": {"script": "tests/fixtures/import/tracked/train.py"}}
    for refused in (tracked, job):  # own code importing mlflow; the bundled runtime
        with pytest.raises(JobConfigError) as err:
            check_jobs(platform, [refused])
        (line,) = err.value.errors
        assert line.startswith("trainforge:jobs[0].image: got 'ghcr.io/acme/trainer:1.0'")
        assert "needs mlflow (mlflow-skinny)" in line


def test_s3_mirror_of_code_without_trainforge_is_one_rule_on_every_image():
    """Own code that never imports trainforge with `checkpoint.s3Mirror: true`: nothing in its
    pods copies a checkpoint to S3 (the mirror is trainforge's CheckpointManager; the wrapper
    the script runs under mirrors nothing), whatever the image carries. It was told "not used"
    on the runtime image (boto3) and refused at preview on the stock PyTorch image (no boto3):
    two answers for one pod. Now both plan, with the same warning and the same images line."""
    own = {"team": "research", "pool": "training-workloads", "checkpoint": {"s3Mirror": True},
           "entrypoint": {"script": "examples/mnist/train.py"}}  # fmt: skip
    jobs = [
        {"name": "own-runtime", **own},
        {"name": "own-stock", "image": versions.PYTORCH_IMAGE, **own},
    ]
    result = plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": jobs})
    assert not [v for v in result.failing if v.rule == "TRAINFORGE_IMAGE_PIECE"]
    warned = next(s for s in result.sections if s.title.startswith("Program warnings")).data
    said = {
        w.split(".checkpoint.s3Mirror: ")[0]: w.split(": ", 1)[1]
        for w in warned
        if ".s3Mirror" in w
    }
    assert sorted(said) == [
        "TrainingJob job-research-own-runtime",
        "TrainingJob job-research-own-stock",
    ]
    assert len(set(said.values())) == 1, said  # one message, whatever the image
    assert "mirrors nothing: no file your entry runs imports trainforge" in next(
        iter(said.values())
    )
    section = next(s for s in result.sections if s.title.startswith("Images"))
    mirror = [line.split("; ")[1] for line in section.lines if "S3 mirror:" in line]
    assert mirror == ["S3 mirror: not used (no file your entry runs imports trainforge)"] * 2, (
        mirror
    )


def test_s3_mirror_needs_boto3_only_where_the_code_runs_it(monkeypatch):
    """On the stock PyTorch image (no boto3), own code importing trainforge runs the mirror and
    is refused with s3Mirror: true; a plain script is not (its pods never call boto3)."""
    import pulumi

    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.declare import check_jobs
    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config

    monkeypatch.chdir(ROOT)
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    config = {
        k.removeprefix("trainforge:"): v for k, v in raw.items() if k.startswith("trainforge:")
    }
    platform = contract_from_config(parse_config(config))
    job = {"name": "own", "team": "research", "pool": "training-workloads",
           "image": versions.PYTORCH_IMAGE, "checkpoint": {"s3Mirror": True}}  # fmt: skip
    check_jobs(platform, [{**job, "entrypoint": {"script": "examples/plain/train.py"}}])
    with pytest.raises(JobConfigError) as err:
        check_jobs(platform, [{**job, "entrypoint": {"script": "examples/resumable/train.py"}}])
    (line,) = err.value.errors
    assert line.startswith("trainforge:jobs[0].checkpoint.s3Mirror: got True; the S3 checkpoint")
    assert f"needs boto3, which image {versions.PYTORCH_IMAGE} lacks" in line
