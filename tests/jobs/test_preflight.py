"""A bad job in stack config fails the program before the platform registers anything.

`pulumi up` starts creating resources as soon as they are registered, so a job error found
only after the platform was declared would leave a half-applied stack. `check_jobs` runs first.
"""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from trainforge.plan.mocks import TrainforgeMocks, read_stack_file, run_mocked
from trainforge.stack.base import StackError

GOOD_JOB = {"name": "mnist", "team": "research", "pool": "training-workloads", "model": "mlp"}


def _run(jobs: list[dict]) -> tuple[TrainforgeMocks, BaseException | None]:
    """Run the program; a bad job surfaces as pulumi.RunError (printed without a traceback by
    the language host) caused by the StackError that lists every problem of every area."""
    import json

    import pulumi

    config = read_stack_file(ROOT / "Pulumi.dev.yaml")
    config["trainforge:jobs"] = json.dumps(jobs)
    mocks = TrainforgeMocks(preview=True)
    try:
        run_mocked(ROOT / "__main__.py", config, stack="dev", preview=True, mocks=mocks)
    except pulumi.RunError as err:
        assert isinstance(err.__cause__, StackError)
        assert str(err) == str(err.__cause__)
        return mocks, err
    return mocks, None


@pytest.mark.parametrize(
    ("bad", "field", "hint"),
    [
        ({"pool": "p5-nowhere"}, "trainforge:jobs[1].pool", "known node pools"),
        ({"team": "nobody"}, "trainforge:jobs[1].team", "known teams"),
        ({"pool": "gpu-workloads", "gpusPerWorker": 8}, "trainforge:jobs[1].gpusPerWorker", "GPU"),
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
