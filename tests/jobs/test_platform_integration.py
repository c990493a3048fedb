"""Jobs on the real TrainingPlatform (dev stack config) under the project's Pulumi mocks:
the wiring the platform exposes reaches the emitted PyTorchJob, and the job's pod template,
CRD schema and webhook rules still hold with the platform's actual pool and team facts."""

from __future__ import annotations

import pathlib

import pytest

from tests.jobs.helpers import validate_pod_templates, webhook_errors
from tests.jobs.schemas import crd_errors
from trainforge.core.errors import JobConfigError
from trainforge.jobs.declare import declare_jobs
from trainforge.plan.mocks import run_mocked
from trainforge.platform.config import load_config
from trainforge.platform.training_platform import TrainingPlatform
from trainforge.stack.file import read_stack_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOBS = [
    {
        "name": "gpt-small",
        "team": "research",
        "pool": "gpu-workloads",
        "preset": "fsdp",
        "workers": 2,
        "model": "gpt",
        "steps": 100,
        "image": "ghcr.io/acme/trainforge:1.0",  # a user image (with boto3): S3 mirror on
    },
    {
        "name": "mnist",
        "team": "research",
        "pool": "training-workloads",
        "preset": "elastic",
        "elastic": {"minWorkers": 1, "maxWorkers": 3},
        "model": "mlp",
    },
]


def program(jobs):
    def run():
        platform = TrainingPlatform("platform", load_config())
        return platform, declare_jobs(platform.contract, jobs)

    return run


@pytest.fixture(scope="module")
def dev():
    return run_mocked(program(JOBS), read_stack_file(ROOT / "Pulumi.dev.yaml").engine())


@pytest.fixture(scope="module")
def dev_platform(dev):
    return dev.result[0]


def job_inputs(run, name):
    return next(
        r for r in run.of_type("kubernetes:kubeflow.org/v1:PyTorchJob") if r.name == name
    ).inputs


def test_dev_platform_wiring_reaches_the_job(dev):
    gpt = job_inputs(dev, "job-research-gpt-small")
    assert gpt["metadata"]["namespace"] == "research"
    pod = gpt["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["nodeSelector"] == {"trainforge.io/pool": "gpu-workloads"}
    assert pod["serviceAccountName"] == "training"
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"  # g4dn.xlarge / g5.xlarge
    fsx = next(m for m in c["volumeMounts"] if m["name"] == "fsx")
    # the team's claim is its own directory of the file system (a Lustre fileset): no subPath
    assert "subPath" not in fsx and fsx["mountPath"] == "/fsx"
    claim = next(v for v in pod["volumes"] if v["name"] == "fsx")["persistentVolumeClaim"][
        "claimName"
    ]
    assert claim == "fsx-research"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.mlflow.svc.cluster.local:5000"
    s3 = c["command"][c["command"].index("--checkpoint-s3") + 1]
    assert s3.startswith("s3://") and s3.endswith("/research/checkpoints/gpt-small")


def test_every_job_object_is_valid_on_the_dev_platform(dev):
    for r in dev.of_type("kubernetes:kubeflow.org/v1:PyTorchJob"):
        doc = {
            "apiVersion": r.inputs["apiVersion"],
            "kind": r.inputs["kind"],
            "metadata": r.inputs["metadata"],
            "spec": r.inputs["spec"],
        }
        assert crd_errors(doc) == [] and webhook_errors(doc) == []
        assert validate_pod_templates(doc) >= 1
        assert (
            dev.find("kubernetes:kubeflow.org/v1:PyTorchJob", r.name).options["deleteBeforeReplace"]
            is True
        )


# declare_jobs checks every job against the platform before it declares anything, so these
# run against the already-built dev platform object.


def test_dev_quota_rejects_a_job_too_big_for_the_team(dev_platform):
    contract = dev_platform.contract
    gpus = int(contract.teams["research"].quota.gpus)
    per_node = contract.pools["gpu-workloads"].gpus_per_node
    too_big = [
        {
            "name": "big",
            "team": "research",
            "pool": "gpu-workloads",
            "workers": gpus // per_node + 1,
        }
    ]
    with pytest.raises(
        JobConfigError, match=rf"trainforge:jobs\[0\]\.workers: .*may hold at most {gpus} gpus\b"
    ):
        declare_jobs(dev_platform.contract, too_big)


def test_unknown_pool_and_team_name_the_dev_ones(dev_platform):
    bad = [{"name": "x", "team": "research", "pool": "p5"}]
    with pytest.raises(
        JobConfigError,
        match=r"jobs\[0\]\.pool: got 'p5'; known node pools: gpu-workloads, training-workloads",
    ):
        declare_jobs(dev_platform.contract, bad)
    with pytest.raises(
        JobConfigError, match=r"jobs\[0\]\.team: got 'vision'; known teams: research"
    ):
        declare_jobs(
            dev_platform.contract, [{"name": "x", "team": "vision", "pool": "gpu-workloads"}]
        )
