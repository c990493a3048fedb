"""Bring your own code, run for real (2-process gloo jobs; heavy: run this file on its own).

* the dev stack's `mnist-user` (a seed-style script: DistributedSampler, DDP, env variables,
  rank-0 save) under `trainforge run-local --stack dev mnist-user` with 2 workers;
* the same job's PyTorchJob, as the dev stack's program renders it: its ConfigMaps written out
  as the kubelet projects them, its container command and env run as 2 pods (tests/jobs/podsim);
* a function declared through the Python API, both ways;
* a user script that uses trainforge's checkpoint manager and SIGTERM handler
  (examples/resumable) through the rehearsals of docs/checkpointing.md: a worker killed with
  SIGKILL, and SIGTERM to one rank, both end with the weights of an uninterrupted run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import shipped_plan
from tests.jobs import podsim
from tests.jobs import user_functions as uf
from tests.jobs.helpers import CPU_POOL, target
from trainforge.jobs import codeship, entrypoint
from trainforge.jobs.backends import emit
from trainforge.jobs.local import run_local
from trainforge.jobs.spec import function_job
from trainforge.jobs.wiring import resolve_job

ROOT = Path(__file__).resolve().parents[2]


def dev_job(name: str) -> dict:
    doc = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    (job,) = [j for j in doc["config"]["trainforge:jobs"] if j["name"] == name]
    return job


def project_with(tmp_path: Path, example: str, jobs: list[dict]) -> Path:
    """A user's repository: the example's directory and a stack declaring `jobs`."""
    shutil.copytree(ROOT / "examples" / example, tmp_path / "examples" / example)
    stack = {"config": {"aws:region": "us-west-2", "trainforge:jobs": jobs}}
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    return tmp_path


def run_local_cli(project: Path, *args: str, env: dict | None = None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    full.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "trainforge", "run-local", *args],
        cwd=project,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def state_keys(path: Path) -> set[str]:
    import torch

    return set(torch.load(path, weights_only=True))


def test_the_seed_style_script_runs_under_run_local_with_two_workers(tmp_path):
    project = project_with(tmp_path, "mnist", [dev_job("mnist-user")])
    proc = run_local_cli(project, "--stack", "dev", "mnist-user")
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-3000:]
    assert "rank 0/2 (local rank 0)" in logs and "rank 1/2 (local rank 1)" in logs
    assert "epoch 0: loss" in logs
    # rank 0 saved to TRAINFORGE_OUTPUT_DIR, whose local stand-in is ./runs/<job>
    model = project / "runs" / "mnist-user" / "model.pt"
    assert state_keys(model) == {"net.1.weight", "net.1.bias", "net.3.weight", "net.3.bias"}
    # it ran the shipped copy (the ConfigMap's files), read-only, from its directory
    code = project / "runs" / "mnist-user" / "code"
    assert sorted(p.name for p in code.iterdir()) == ["train.py"]
    assert (code / "train.py").stat().st_mode & 0o222 == 0


@pytest.fixture(scope="module")
def dev_plan():
    return shipped_plan("dev")


def test_its_pytorchjob_runs_the_same_file_from_the_shipped_configmap(tmp_path, dev_plan):
    docs = [o.doc for o in dev_plan.objects]
    (job,) = [
        d for d in docs if d["kind"] == "PyTorchJob" and d["metadata"]["name"] == "mnist-user"
    ]
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    names = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    configmaps = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] in names]
    # examples/mnist only: the job runs the runtime image, which carries the library
    assert "trainforge-runtime" in pod["containers"][0]["image"]
    assert len(configmaps) == 1
    src = next(cm for cm in configmaps if "-src-" in cm["metadata"]["name"])
    assert src["data"]["train.py"] == (ROOT / "examples/mnist/train.py").read_text()

    results = podsim.run_pods(job, configmaps, tmp_path)
    assert len(results) == 2  # Master + 1 Worker
    for code, out in results:
        assert code == 0, out[-3000:]
    master, worker = (out for _, out in results)
    assert "rank 0/2 (local rank 0)" in master and "rank 1/2 (local rank 0)" in worker
    saved = tmp_path / "fsx" / "runs" / "research" / "mnist-user" / "model.pt"
    assert state_keys(saved) == {"net.1.weight", "net.1.bias", "net.3.weight", "net.3.bias"}


def test_a_python_function_runs_locally_and_from_its_configmap(tmp_path, monkeypatch):
    job = function_job(
        "fn-job", uf.train, "research", CPU_POOL.name, workers=2, function_args={"steps": 3}
    )
    # on this machine, as `run_local` runs it: 2 torchrun workers, the contract's variables
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert run_local(job, tmp_path, extra_args=()) == 0
    assert (tmp_path / "runs" / "fn-job" / "run.txt").read_text() == "world=2 ranksum=1 steps=3\n"

    # its PyTorchJob: the generated file from the ConfigMap, as 2 pods
    t = target(CPU_POOL)
    resolved = resolve_job(job, t, "fn-job")
    out = emit(resolved, t, codeship.collect(), entrypoint.user_code(resolved, ".", "fn-job"))
    pods = tmp_path / "pods"
    results = podsim.run_pods(out.pytorchjob, [out.configmap, out.user_configmap], pods)
    for code, text in results:
        assert code == 0, text[-3000:]
    written = pods / "fsx" / "runs" / "team-research" / "fn-job" / "run.txt"
    assert written.read_text() == "world=2 ranksum=1 steps=3\n"


RESUMABLE = {
    "name": "resumable",
    "team": "research",
    "pool": "training-workloads",
    "workers": 2,
    "entrypoint": {
        "script": "examples/resumable/train.py",
        "args": ["--epochs", "2", "--samples", "1024", "--log-every", "8"],
    },
    # Synchronous saves: step 10's checkpoint is complete before step 11 starts, so the kill
    # after step 17 always finds it on a loaded machine (async saves: the checkpoint tests).
    "checkpoint": {"every": 10, "keepLast": 2, "gracePeriod": 60, "async": False},
}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    project = project_with(tmp_path_factory.mktemp("ref"), "resumable", [RESUMABLE])
    proc = run_local_cli(project, "--stack", "dev", "resumable")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "saved" in proc.stdout and "after step 32" in proc.stdout
    return project / "runs" / "resumable" / "model.pt"


def assert_same_weights(a: Path, b: Path) -> None:
    import torch

    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert sa.keys() == sb.keys() and sa
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_a_user_script_with_the_checkpoint_manager_survives_kill_9(tmp_path, uninterrupted):
    project = project_with(tmp_path, "resumable", [RESUMABLE])
    proc = run_local_cli(
        project,
        "--stack",
        "dev",
        "resumable",
        "--max-restarts",
        "2",
        env={"TRAINFORGE_TEST_FAULT": "1:17:KILL"},
    )
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-4000:]
    assert "rank 1 sends itself SIGKILL after step 17" in logs
    assert "checkpoint: resumed from" in logs and "step_000010 at step 10" in logs
    ckpts = sorted(p.name for p in (project / "runs/resumable/checkpoints").iterdir())
    assert ckpts == [".trainforge", "step_000030", "step_000032"]  # keepLast 2, the ledger
    assert_same_weights(uninterrupted, project / "runs" / "resumable" / "model.pt")

    # `trainforge report` on what it left: its real checkpoints, the restart and its cause
    report = subprocess.run(
        [sys.executable, "-m", "trainforge", "report", "runs/resumable"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    text = report.stdout
    assert "checkpoints: 2 (steps 30, 32) in runs/resumable/checkpoints" in text, text
    assert "attempts: 2 (run ledger; the last finished)" in text, text
    assert "restarts: 1: " in text and "attempt 0 ended with node_lost (rank 1)" in text, text
    assert "loss: " in text  # MetricsReporter's metrics.jsonl
    assert "not shown: throughput panel" in text  # a panel without data is named, not drawn


def test_sigterm_makes_a_user_script_checkpoint_the_same_step_and_resume(tmp_path, uninterrupted):
    project = project_with(tmp_path, "resumable", [RESUMABLE])
    proc = run_local_cli(
        project,
        "--stack",
        "dev",
        "resumable",
        "--max-restarts",
        "1",
        env={"TRAINFORGE_TEST_FAULT": "0:13:TERM"},
    )
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-4000:]
    assert "preemption: stop requested (SIGTERM on this rank)" in logs
    assert "preemption: stop requested (another rank)" in logs
    saved = [line for line in logs.splitlines() if "(preemption)" in line]
    assert len(saved) == 1, saved  # rank 0 logs the one checkpoint both ranks wrote
    step = saved[0].split("step_")[1][:6]
    assert f"step_{step} at step {int(step)}" in logs  # the restart resumed from it
    assert_same_weights(uninterrupted, project / "runs" / "resumable" / "model.pt")
