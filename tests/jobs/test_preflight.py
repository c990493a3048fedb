"""A bad job in stack config fails the program before the platform registers anything.

`pulumi up` starts creating resources as soon as they are registered, so a job error found
only after the platform was declared would leave a half-applied stack. `check_jobs` runs first.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.stack.base import StackError
from trainforge.stack.file import read_stack_file

GOOD_JOB = {"name": "mnist", "team": "research", "pool": "training-workloads", "model": "mlp"}


def _run(jobs: list[dict], project=ROOT) -> tuple[TrainforgeMocks, BaseException | None]:
    """Run the program (in `project`, its directory); a bad job surfaces as pulumi.RunError
    (printed without a traceback by the language host) caused by the StackError that lists
    every problem of every area."""
    import json

    import pulumi

    config = read_stack_file(ROOT / "Pulumi.dev.yaml").engine()
    config["trainforge:jobs"] = json.dumps(jobs)
    mocks = TrainforgeMocks(preview=True)
    try:
        run_mocked(project / "__main__.py", config, stack="dev", preview=True, mocks=mocks)
    except pulumi.RunError as err:
        assert isinstance(err.__cause__, StackError)
        assert str(err) == str(err.__cause__)
        return mocks, err
    return mocks, None


@pytest.mark.parametrize(
    ("bad", "field", "hint"),
    [
        (
            {"pool": "p5-nowhere"},
            "trainforge:jobs[1] (second).pool",
            "expected one of the node pools: gpu-workloads",
        ),
        (
            {"team": "nobody"},
            "trainforge:jobs[1] (second).team",
            "expected one of the teams: research",
        ),
        (
            {"pool": "gpu-workload"},
            "trainforge:jobs[1] (second).pool",
            "gpu-workloads, training-workloads (did you mean 'gpu-workloads'?)",
        ),
        (
            {"pool": "gpu-workloads", "gpusPerWorker": 8},
            "trainforge:jobs[1] (second).gpusPerWorker",
            "GPU",
        ),
    ],
)
def test_bad_job_fails_before_any_resource(bad, field, hint):
    mocks, err = _run([GOOD_JOB, {**GOOD_JOB, "name": "second", **bad}])
    assert err is not None, "the bad job was accepted"
    assert field in str(err) and hint in str(err)
    assert mocks.resources == [], [r.type for r in mocks.resources][:5]


def test_good_jobs_are_declared_as_pytorchjobs():
    mocks, err = _run([GOOD_JOB])
    assert err is None
    jobs = [r for r in mocks.resources if r.inputs.get("kind") == "PyTorchJob"]
    assert [j.inputs["metadata"]["name"] for j in jobs] == ["mnist"]


def test_every_bad_job_is_reported_in_one_run_before_any_resource():
    """Declarations, cross-area names (team, pool) and what only the pool can tell (GPUs) of
    three jobs come back together, each with its key and a suggestion where one exists."""
    import json

    import pulumi

    config = read_stack_file(ROOT / "Pulumi.dev.yaml").engine()
    jobs = [
        {**GOOD_JOB, "name": "a", "pool": "gpu-workload"},
        {**GOOD_JOB, "name": "b", "team": "reserch", "workrs": 2},
        {**GOOD_JOB, "name": "c", "pool": "gpu-workloads", "gpusPerWorker": 8},
        GOOD_JOB,
        {**GOOD_JOB, "name": "d", "team": "reserch"},
    ]
    config["trainforge:jobs"] = json.dumps(jobs)
    mocks = TrainforgeMocks(preview=True)
    with pytest.raises(pulumi.RunError) as err:
        run_mocked(ROOT / "__main__.py", config, stack="dev", preview=True, mocks=mocks)
    lines = err.value.__cause__.errors
    assert [line.split(": ")[0] for line in lines] == [
        "trainforge:jobs[1] (b).workrs",
        "trainforge:jobs[0] (a).pool",
        "trainforge:jobs[1] (b).team",
        "trainforge:jobs[2] (c).gpusPerWorker",
        "trainforge:jobs[4] (d).team",
    ]
    assert "(did you mean 'workers'?)" in lines[0]
    assert "(did you mean 'gpu-workloads'?)" in lines[1]
    assert lines[2].endswith("expected one of the teams: research (did you mean 'research'?)")
    assert lines[4].endswith("expected one of the teams: research (did you mean 'research'?)")
    assert mocks.resources == []


def test_a_shipped_file_that_shadows_a_start_up_module_fails_the_plan(tmp_path):
    """The job's code is known at plan time: a `queue.py` beside its script (what
    `import torch` and the launcher import as `queue`) is one line naming the job's key, the
    file and the fix, before any resource. Before: planned, and every pod failed at start."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("import torch\n")
    (tmp_path / "code" / "queue.py").write_text("jobs = []\n")
    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")  # the user's project
    job = {**GOOD_JOB, "name": "mine", "entrypoint": {"script": "code/train.py"}}
    del job["model"]
    mocks, err = _run([GOOD_JOB, job], project=tmp_path)
    assert err is not None, "the shadowing file was shipped"
    assert err.__cause__.errors == [
        "trainforge:jobs[1] (mine).entrypoint.script: got 'code/queue.py'; this file shadows "
        "the module 'queue', which Python, torch or the launcher import before your code runs "
        "(your code's directory is first on sys.path, so they would import your file "
        "instead); rename it, e.g. my_queue.py, and your imports of it"
    ]
    assert mocks.resources == []
