"""The restart budget (trainforge/jobs/restarts.py) and run-local's pod re-creation loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainforge.jobs.local import launch
from trainforge.jobs.restarts import budget, describe
from trainforge.jobs.spec import parse_job

BASE = {"name": "j", "team": "research", "pool": "cpu"}


def job(**kw):
    return parse_job({**BASE, **kw}, "t")


def test_budget_per_backend_and_policy():
    b = budget(job(backend="pytorchjob"))
    assert (b.in_pod, b.recreations, b.on, b.local_recreations) == (0, None, "retryable", 6)
    assert "does not count ExitCode re-creations" in b.bound
    assert budget(job(backend="indexed-job")).recreations == 6
    assert budget(job(backend="trainjob", runPolicy={"backoffLimit": 6})).recreations == 6
    assert budget(job(restartPolicy="Never")).local_recreations == 0
    assert budget(job(restartPolicy="OnFailure")).on == "any"
    elastic = job(preset="elastic", elastic={"minWorkers": 1, "maxWorkers": 3, "maxRestarts": 4})
    assert budget(elastic).in_pod == 4
    assert describe(elastic).startswith("torchrun restarts in the pod 4; pod re-created on exit")


def exits_in_order(tmp_path: Path, codes: list[int]) -> list[str]:
    """A command that exits with codes[n] on its n-th run."""
    counter = tmp_path / "runs"
    code = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) "
        "if p.exists() else 0; p.write_text(str(n + 1)); sys.exit(eval(sys.argv[2])[n])"
    )
    return [sys.executable, "-c", code, str(counter), repr(codes)]


@pytest.mark.parametrize(
    ("codes", "recreations", "on", "expected", "runs"),
    [
        ([202, 137, 0], 6, "retryable", 0, 3),  # lost peer, killed: re-created, then done
        ([202, 1, 0], 6, "retryable", 1, 2),  # a bug stops the job
        ([202, 202, 202], 2, "retryable", 202, 3),  # the budget is spent
        ([1, 0], 6, "any", 0, 2),  # OnFailure restarts any failure
        ([143, 0], 0, "retryable", 143, 1),  # no budget: no re-creation
    ],
)
def test_run_local_recreates_its_pod_like_the_cluster(
    tmp_path, codes, recreations, on, expected, runs
):
    cmd = exits_in_order(tmp_path, codes)
    assert launch(cmd, {"PATH": "/usr/bin:/bin"}, recreations=recreations, on=on) == expected
    assert int((tmp_path / "runs").read_text()) == runs
