"""`run-local --stack S JOB` prints the warnings the plan prints for JOB (the program's
`TrainingJob` warnings: jobs/component.py builds them once, logs them for the plan and keeps
them on the job's DeclaredJob) before the run starts. Before, it kept only the lines that
began "TrainingJob NAME:", so `hangTimeout` and `checkpoint.s3Mirror` ("TrainingJob
NAME.hangTimeout: ...") never showed and run-local ran the job silently past them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from trainforge.plan.runner import run_project

ROOT = Path(__file__).resolve().parents[2]
JOB = "no-watchdog"
SCRIPT = "print('trained')\n"  # imports no trainforge: no Watchdog, no S3 mirror


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("run_local_job_warnings")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, root / name)
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] = [
        {
            "name": JOB,
            "team": "research",
            "pool": "training-workloads",
            "hangTimeout": 600,
            "checkpoint": {"s3Mirror": True},
            "entrypoint": {"script": "code/train.py"},
        }
    ]
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    (root / "code").mkdir()
    (root / "code" / "train.py").write_text(SCRIPT)
    return root


def test_run_local_prints_the_plans_warnings_for_the_job_before_it_runs(
    project, trainforge_here, monkeypatch
):
    monkeypatch.chdir(project)
    planned = run_project(project, "dev", echo_warnings=False).warnings  # the plan's lines
    said = [w for w in planned if w.startswith("TrainingJob ") and " nothing: " in w]
    assert [w.split(": ", 1)[0].rsplit(".", 1)[1] for w in said] == ["s3Mirror", "hangTimeout"]
    ran = trainforge_here(project, "run-local", "--stack", "dev", JOB)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    assert "trained" in ran.stdout
    for line in said:  # once, not once per lookup of the job
        assert ran.stderr.count(line) == 1, ran.stderr[-3000:]
    # before anything runs: a dry run, which starts nothing, says it too
    dry = trainforge_here(project, "run-local", "--stack", "dev", JOB, "--dry-run")
    assert dry.returncode == 0 and "trained" not in dry.stdout, dry.stderr[-3000:]
    assert all(line in dry.stderr for line in said), dry.stderr[-3000:]
