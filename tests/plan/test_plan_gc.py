"""`trainforge plan` sets the collector's thresholds before it imports and plans.

Why: with Python's defaults the cyclic collector walked the plan's whole, ever-growing heap
1,771 times (2.7 of 9.5 CPU s of `plan --stack prod`); see trainforge.plan.runner.tune_gc."""

import gc

import pytest

from trainforge.plan import cli, core
from trainforge.plan.runner import PLAN_GC_THRESHOLDS, ProjectError


@pytest.fixture
def default_gc():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults, whatever the session set
    yield
    gc.set_threshold(*saved)


def test_the_plan_runs_with_the_plan_thresholds(default_gc, monkeypatch, tmp_path, capsys):
    seen = []

    def plan_project(*args, **kwargs):
        seen.append(gc.get_threshold())
        raise ProjectError("stopped by the test")  # the plan's own config-error path

    monkeypatch.setattr(core, "plan_project", plan_project)
    (tmp_path / "Pulumi.yaml").write_text("name: t\nruntime: python\n")
    rc = cli.main(["--stack", "dev", "--project-dir", str(tmp_path)])
    assert seen == [PLAN_GC_THRESHOLDS]
    assert rc != 0 and "stopped by the test" in capsys.readouterr().err


def test_young_cycles_are_still_collected_under_the_plan_thresholds(default_gc):
    """Not a disabled collector: a cycle made while planning is freed without gc.collect()."""
    gc.set_threshold(*PLAN_GC_THRESHOLDS)
    gc.collect()
    freed = []

    class Node:
        def __del__(self):
            freed.append(1)

    for _ in range(10):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    del a, b
    junk = [[] for _ in range(3 * PLAN_GC_THRESHOLDS[0])]  # allocations past the threshold
    del junk
    assert len(freed) == 20


def test_the_test_session_runs_with_the_plan_thresholds():
    """tests/conftest.py: the suite's in-process plans get the CLI's collector settings."""
    assert gc.get_threshold() == PLAN_GC_THRESHOLDS


def test_run_local_runs_the_stacks_program_with_the_plan_thresholds(default_gc, monkeypatch):
    """`run-local --stack` runs the stack's program under the plan's mocks to resolve a job
    (trainforge.local.program_jobs): the same run as a plan's, with the same thresholds."""
    from trainforge import local
    from trainforge.plan import runner

    seen = []

    def run_project(*args, **kwargs):
        seen.append(gc.get_threshold())
        raise ProjectError("stopped by the test")

    monkeypatch.setattr(runner, "run_project", run_project)
    with pytest.raises(Exception, match="stopped by the test"):
        local.program_jobs("dev", ".")
    assert seen == [PLAN_GC_THRESHOLDS]
