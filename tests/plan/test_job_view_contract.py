"""A job's checkpoint directory and resume mode, read from its environment, are what the
runtime reads there (training/contract.job_env), for a job whose code is not the runtime."""

from __future__ import annotations

import pytest

from trainforge.jobs.pod import JOB_LABEL
from trainforge.plan.job_view import job_view
from trainforge.training import contract


def _view(env: dict[str, str]):
    container = {
        "name": "trainer",
        "image": "i",
        "command": ["python", "train.py"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "a", "labels": {JOB_LABEL: "j"}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
            }
        },
    }
    view = job_view(doc)
    assert view is not None and view.runtime_args is None  # user code: the env is read
    return view


@pytest.mark.parametrize(
    "env",
    [
        {},
        {contract.RESUME: "", contract.CHECKPOINT_DIR: ""},  # set empty: the defaults
        {contract.RESUME: "never", contract.CHECKPOINT_DIR: "/ckpt/j"},
    ],
)
def test_the_plan_reads_the_env_as_the_runtime_does(env, monkeypatch):
    for name in (contract.RESUME, contract.CHECKPOINT_DIR):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime = contract.job_env()
    view = _view(env)
    assert (view.resume, view.checkpoint_dir) == (runtime.resume, runtime.checkpoint_dir)
