"""The checks that read the stand-in run, in a child process (trainforge.plan.registry).

Why: `trainforge plan` runs the program twice, the preview and the stand-in run; the second
needs nothing the checks make, so a forked child runs it and the checks that read it
(registry.READS_STANDIN: the rules' re-judging, the IAM rehearsal, ...) on the second CPU
while the plan runs the other checks (registry.in_child). The plan must be the same either
way, a failing stand-in run must be reported as the sequential plan reports it, and no child
may outlive its plan (an error, Ctrl-C). Forking is safe because a plan process has no gRPC
thread: its runs resolve resource transforms in-process, without the SDK's callback server
(trainforge.plan.runner._in_process_callbacks; the last test).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import sys

import pytest

from trainforge.plan import cli, core, registry
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks.rules import STANDIN_NOTE
from trainforge.plan.runner import Inventory

# A policy built from an ARN the cloud assigns: judged only by the stand-in pass (the golden
# findings' "standin-iam" case, plan_programs.standin_iam, as a project).
STANDIN_IAM = f"""
import sys
sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parent)!r})
import plan_programs
plan_programs.standin_iam()
"""

# A program whose stand-in run (not a preview) stops on a configuration error.
FAILS_IN_STANDIN = """
import pulumi
import pulumi_aws as aws
from trainforge.stack.base import StackError

aws.s3.Bucket("data")
if not pulumi.runtime.is_dry_run():
    raise StackError(["trainforge:cluster: got 'tf'; refused by the stand-in run only"])
"""


def _children() -> list[int]:
    """The pids of this process's children that are still there (zombies included)."""
    me, out = os.getpid(), []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            out.append(int(stat.parent.name))
    return out


@pytest.fixture
def forks(monkeypatch):
    """Every fork the plan makes, with a child allowed even on a one-CPU runner."""
    made: list[int] = []
    real = os.fork

    def fork() -> int:
        made.append(1)
        return real()

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(registry, "may_fork", lambda: True)
    return made


def test_a_forked_stand_in_pass_gives_the_same_plan(make_project, forks, monkeypatch):
    root = make_project(body=STANDIN_IAM)
    runs: list[bool] = []  # the program runs of this process (preview or not)
    real = core.run_project

    def run_project(*args, **kwargs):
        runs.append(kwargs.get("preview", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "run_project", run_project)
    child = core.plan_project(root, "test", standins=True, fork=True)
    assert len(forks) == len(registry.APART)
    assert runs == [True]  # the stand-in run was a child's
    here = core.plan_project(root, "test", standins=True, fork=False)
    assert len(forks) == len(registry.APART)
    assert runs == [True, True, False]
    assert child.to_json() == here.to_json()
    # the rules' count of re-judged resources came back with the child's results (ctx.memo)
    assert child.standin_judged == here.standin_judged == 1
    assert any(STANDIN_NOTE in f.message for f in child.failing)
    assert _children() == []


def test_a_failing_stand_in_run_is_reported_as_without_a_child(
    make_project, forks, capsys, monkeypatch
):
    root = make_project(body=FAILS_IN_STANDIN)
    argv = ["--stack", "test", "--project-dir", str(root)]
    monkeypatch.setattr(registry, "may_fork", lambda: False)  # as TRAINFORGE_PLAN_FORK=0 does
    rc_here = cli.main(argv)
    here = capsys.readouterr()
    monkeypatch.setattr(registry, "may_fork", lambda: True)
    assert forks == []
    rc_child = cli.main(argv)
    child = capsys.readouterr()
    assert len(forks) == len(registry.APART)
    assert rc_child == rc_here == cli.EXIT_CONFIG
    assert child.err == here.err
    assert "refused by the stand-in run only" in child.err
    assert "Traceback" not in child.err + child.out
    assert _children() == []


def _inventory() -> Inventory:
    return Inventory(project="p", stack="s", resources=[], outputs={"where": "made"})


@pytest.mark.parametrize("fails", ["killed", "unpicklable"])
def test_a_child_that_fails_is_replaced_by_a_run_here(forks, fails):
    parent = os.getpid()

    def run() -> Inventory:
        inv = _inventory()
        if os.getpid() != parent:
            if fails == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            inv.outputs["where"] = lambda: "a value pickle refuses"
        return inv

    with registry.in_child(run, fork=True) as standin:
        assert standin().outputs == {"where": "made"}
        assert standin() is standin()  # once
    assert forks == [1]
    assert _children() == []


class _Finalized:
    """A cycle whose finalizer writes the pid of the process that collects it."""

    def __init__(self, log: pathlib.Path) -> None:
        self.log, self.me = log, self

    def __del__(self) -> None:
        with self.log.open("a") as f:
            f.write(f"{os.getpid()}\n")


def test_the_child_never_collects_what_it_inherited(forks, tmp_path):
    """A forked child that collected an inherited cycle ran its finalizer in a process
    without the parent's threads (Pulumi's executor, gRPC): CI logs showed the child
    segfaulting inside the collector. The child collects only what it made; the parent
    collects its own garbage as before."""
    import gc

    log = tmp_path / "collected-by"
    gc.disable()  # the cycle must still be there at the fork
    try:
        _Finalized(log)  # unreachable at once: garbage for the next collection
        with registry.in_child(lambda: (gc.collect(), os.getpid())[1], fork=True) as child:
            child_pid = child()
        assert child_pid != os.getpid()
        gc.collect()
    finally:
        gc.enable()
    assert log.read_text().split() == [str(os.getpid())]  # here, and only here
    assert gc.get_freeze_count() == 0  # the parent's objects are its collector's again


def test_an_error_raised_in_the_child_is_raised_here_as_it_is(forks):
    def run() -> Inventory:
        raise ValueError("trainforge:cluster: got 'x'; expected a name")

    with registry.in_child(run, fork=True) as standin, pytest.raises(ValueError, match="got 'x'"):
        standin()
    assert _children() == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_plan_that_stops_before_reading_the_stand_in_run_leaves_no_child(forks, stop):
    def run() -> Inventory:
        signal.pause()  # a child that would never end by itself
        return _inventory()

    with pytest.raises(stop), registry.in_child(run, fork=True):
        raise stop()
    assert forks == [1]
    assert _children() == []


def test_a_fork_that_fails_runs_here(monkeypatch):
    def fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(registry, "may_fork", lambda: True)
    with registry.in_child(_inventory, fork=True) as standin:
        assert standin().outputs == {"where": "made"}


def test_the_plan_runs_in_this_process_where_a_child_cannot_help(monkeypatch):
    monkeypatch.delenv(registry.FORK_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert not registry.may_fork()  # one usable CPU
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert registry.may_fork() == hasattr(os, "fork")
    monkeypatch.setenv(registry.FORK_ENV, "0")
    assert not registry.may_fork()
    with registry.in_child(_inventory, fork=True) as standin:
        assert standin().outputs == {"where": "made"}
    with registry.in_child(_inventory, fork=False) as standin:
        assert standin().outputs == {"where": "made"}


@pytest.mark.parametrize("fork", [False, True])
def test_the_apart_groups_run_after_the_others_and_print_in_order(monkeypatch, forks, fork):
    """The checks run here, then each APART group (in its own child with `fork`: what a child
    ran comes back with its results); every result in registry order."""
    names = [m.__name__.rpartition(".")[2] for m in registry._MODULES]
    monkeypatch.setattr(registry, "CHECKS", list(registry.CHECKS))
    for i, check in enumerate(registry.CHECKS):

        def run(ctx, name=names[i]):
            ctx.memo.setdefault("ran", []).append(name)
            ctx.memo[name] = True
            return name

        registry.CHECKS[i] = registry.Check(run, check.rules)
    ctx = PlanContext(inventory=None, objects=[])
    results = registry.run_checks(ctx, fork)
    assert results == names  # in registry order
    assert all(ctx.memo[n] for n in names)  # every check's memo entry, here or from a child
    apart = [n for group in registry.APART for n in names if n in group]
    assert sorted(apart) == sorted(n for group in registry.APART for n in group)
    here = [n for n in names if n not in apart]
    if fork:  # a memo entry this process made stays its own; the children ran the rest
        assert len(forks) == len(registry.APART)
        assert ctx.memo["ran"] == here
    else:
        assert ctx.memo["ran"] == here + apart
    assert _children() == []


def test_every_check_that_reads_the_stand_in_run_is_listed():
    """A check that reads `ctx.standin_inventory()` (or the IAM facts read from it) and is not
    in READS_STANDIN would wait for the child before the other checks have run."""
    folder = pathlib.Path(registry._package.__path__[0])
    readers = {
        p.stem
        for p in folder.glob("*.py")
        if "standin_inventory()" in p.read_text() or "stack_iam(ctx)" in p.read_text()
    }
    checks = {m.__name__.rpartition(".")[2] for m in registry._MODULES}
    assert readers & checks <= set(registry.READS_STANDIN)
    assert set(registry.READS_STANDIN) <= checks


def test_transforms_reach_the_mocks_without_a_grpc_server(monkeypatch):
    """The plan's runs resolve resource transforms in-process (runner._in_process_callbacks):
    no gRPC server, and so no gRPC poller thread that would make a fork unsafe; the mocks of
    a stand-in run still get each resource's transforms."""
    import grpc.aio
    import pulumi
    import pulumi_aws as aws

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.plan.runner import run_program

    def no_server(*args, **kwargs):
        raise AssertionError("the plan started a gRPC server")

    monkeypatch.setattr(grpc.aio, "server", no_server)
    seen: dict[str, list] = {}

    class Mocks(TrainforgeMocks):
        def new_resource(self, args):
            seen[args.name] = list(args.transforms)
            return super().new_resource(args)

    def tag(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        return pulumi.ResourceTransformResult({**args.props, "tags": {"by": "tag"}}, args.opts)

    def prog() -> None:
        aws.s3.Bucket("data", opts=pulumi.ResourceOptions(transforms=[tag]))

    run_program(prog, mocks=Mocks(preview=False), preview=False)
    assert seen["data"] == [tag]


KILLED_PLAN = """
import os, pathlib, signal, sys, time
from trainforge.plan import registry

registry.may_fork = lambda: True
with registry.in_child(lambda: time.sleep(60), fork=True):
    me = str(os.getpid())
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
            print(stat.parent.name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _running(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_plan_killed_outright_leaves_no_child_running():
    """SIGKILL skips every cleanup of the plan process: its child dies with it
    (registry._die_with) instead of running on."""
    import subprocess
    import time

    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_PLAN],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    with proc.stdout:  # not read to its end: a surviving child would hold it open
        child = int(proc.stdout.readline())
    try:
        assert proc.wait(timeout=120) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)


UNDER_COVERAGE = """
import os
from trainforge.plan import registry

def measured():
    return os.getpid()

with registry.in_child(measured, fork=True) as ran:
    print(registry.may_fork(), ran() == os.getpid())
"""


def test_a_coverage_run_runs_the_checks_in_the_plan_process(tmp_path):
    """A forked child ends with os._exit, which skips coverage's save: under coverage.py the
    plan does not fork (what the children ran was lost from coverage runs), and coverage sees
    the lines the child would have run."""
    import subprocess

    import coverage

    script = tmp_path / "plan_like.py"
    script.write_text(UNDER_COVERAGE)
    data = tmp_path / "coverage-data"
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2])}
    env.pop(registry.FORK_ENV, None)
    run = [sys.executable, "-m", "coverage", "run", f"--data-file={data}", str(script)]
    out = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    assert out == "False True\n"  # no child: measured() ran in the measured process
    cov = coverage.Coverage(data_file=str(data))
    cov.load()
    lines = cov.get_data().lines(str(script.resolve())) or []
    assert UNDER_COVERAGE.splitlines().index("    return os.getpid()") + 1 in lines
    if len(os.sched_getaffinity(0)) > 1:  # without coverage, a child runs it
        plain = [sys.executable, str(script)]
        out = subprocess.run(plain, env=env, capture_output=True, text=True, check=True).stdout
        assert out == "True False\n"


def test_a_check_s_early_work_runs_in_a_child_of_the_stand_in_child_meanwhile(monkeypatch, forks):
    """A READS_STANDIN check's `ahead(ctx, start)` (the IAM rehearsal's S3 recording, ~40% of
    that child's CPU) is called before the group's first check (the rules, which make the
    stand-in run) and starts its work in a child of the stand-in child; the check reads what
    that made. Without a fork nothing is started: the check does the work itself, here."""
    from trainforge.plan.checks import iam_rehearsal

    names = [m.__name__.rpartition(".")[2] for m in registry._MODULES]
    at, first = names.index("iam_rehearsal"), names.index("rules")
    monkeypatch.setattr(registry, "CHECKS", [registry.Check(lambda ctx: None, {})] * len(names))

    def ahead(ctx, start):
        ctx.early = start(os.getpid)

    def check(ctx):
        return os.getpid(), ctx.early() if hasattr(ctx, "early") else os.getpid()

    monkeypatch.setattr(iam_rehearsal, "ahead", ahead)
    registry.CHECKS[at] = registry.Check(check, {})
    registry.CHECKS[first] = registry.Check(lambda ctx: hasattr(ctx, "early"), {})
    results = registry.run_checks(PlanContext(inventory=None, objects=[]), fork=True)
    group, work = results[at]
    assert len({os.getpid(), group, work}) == 3
    assert results[first] is True  # started before the stand-in run
    assert len(forks) == len(registry.APART)  # this process's: the third is the child's fork
    here = registry.run_checks(PlanContext(inventory=None, objects=[]), fork=False)
    assert here[at] == (os.getpid(), os.getpid())
    assert here[first] is False
    assert len(forks) == len(registry.APART)
    assert _children() == []
