"""The plan's checks: every module of `trainforge/plan/checks/` with `check` and `RULES`
(`{rule_id: fix}`, each id of one check); its `diff_check(ctx: review.DiffContext)`, if any,
runs only under `plan --diff` (docs/architecture.md, "The offline plan")."""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
import pickle
import pkgutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from trainforge.plan import checks as _package
from trainforge.plan.check_types import CheckResult, PlanContext

T = TypeVar("T")

# Where each check's report section prints (one not named here runs after these, by name).
ORDER = (
    "validate",
    "rules",
    "iam_rehearsal",
    "controller_identity",
    "helm_charts",
    "version_pairs",
    "ordering",
    "existence",
    "reachability",
    "documentation_values",
    "pod_scripts",
    "pod_security",
    "scheduling",
    "estimates",
    "cost_check",
    "budget_subscriptions",
    "job_backends",
    "retry_bounds",
    "queues",
    "data_safety",
    "fsx_zones",
    "addon_placement",
    "images",
    "resume",
    "submitted",
    "fleet",
)


@dataclass(frozen=True)
class Check:
    """A plan check and the rule ids (-> fix) its findings may carry."""

    run: Callable[[PlanContext], CheckResult]
    rules: Mapping[str, str]


def _check_modules() -> list[ModuleType]:
    """The modules of trainforge/plan/checks/ that are checks, in `ORDER`."""
    names = sorted(m.name for m in pkgutil.iter_modules(_package.__path__))
    names.sort(key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    modules = [importlib.import_module(f"{_package.__name__}.{n}") for n in names]
    return [m for m in modules if callable(getattr(m, "check", None)) and hasattr(m, "RULES")]


_MODULES = _check_modules()
CHECKS: list[Check] = [Check(m.check, m.RULES) for m in _MODULES]

# Diff checks, called with a review.DiffContext, in the order their sections print.
DIFF_CHECKS: list[Callable[[Any], CheckResult]] = [
    m.diff_check for m in _MODULES if callable(getattr(m, "diff_check", None))
]


def check_rule_ids(checks: list[Check] | None = None) -> dict[str, str]:
    """rule id -> fix of every check (the plan's one list of rule ids, which waivers name);
    each id belongs to one check."""
    out: dict[str, str] = {}
    for check in CHECKS if checks is None else checks:
        twice = sorted(set(out) & set(check.rules))
        if twice:
            raise ValueError(f"rule id(s) {', '.join(twice)} declared by two plan checks")
        out.update(check.rules)
    return out


# Checks that run after the others, each group in a forked child where one may help
# (`run_checks`): the readers of the stand-in run (the program again, which needs nothing the
# other checks make), and the checkpoint check (a job's state fingerprint: dev's imports torch).
# `fetches` judges an in-region bucket through the S3 endpoint policy with the stack's account
# and buckets (`stack_iam`, read from the stand-in run).
READS_STANDIN = ("rules", "iam_rehearsal", "controller_identity", "existence", "fleet", "fetches")
APART = (READS_STANDIN, ("resume",))


def run_checks(ctx: PlanContext, fork: bool = False) -> list[CheckResult]:
    """Every registered check's result, in registry order; the `APART` groups after the others
    (with `fork`, each in a forked child meanwhile, where a check's `ahead(ctx, start)` may
    start work that needs no stand-in run in a child of that child). A group's new `ctx.memo`
    entries come back."""
    names = [m.__name__.rpartition(".")[2] for m in _MODULES]
    groups = [[i for i, name in enumerate(names) if name in group] for group in APART]
    plan = os.getpid()

    def run_group(group: list[int]) -> Callable[[], tuple[dict[int, CheckResult], dict]]:
        def run() -> tuple[dict[int, CheckResult], dict[str, Any]]:
            with contextlib.ExitStack() as early:
                for ahead in (getattr(_MODULES[i], "ahead", None) for i in group):
                    if ahead and os.getpid() != plan:  # its state ends with this child
                        ahead(ctx, lambda work: early.enter_context(in_child(work, fork)))
                before = set(ctx.memo)
                done = {i: CHECKS[i].run(ctx) for i in group}
                return done, {k: v for k, v in ctx.memo.items() if k not in before}

        return run

    with contextlib.ExitStack() as children:
        later = [children.enter_context(in_child(run_group(g), fork)) for g in groups]
        apart = {i for group in groups for i in group}
        results = {i: check.run(ctx) for i, check in enumerate(CHECKS) if i not in apart}
        for group_results in later:
            done, memo = group_results()
            for key, value in memo.items():  # a memo this process made stays its own
                ctx.memo.setdefault(key, value)
            results.update(done)
    return [results[i] for i in range(len(CHECKS))]


FORK_ENV = "TRAINFORGE_PLAN_FORK"  # "0": every check in the plan's own process


def may_fork() -> bool:
    """Whether a child process may run checks: fork exists, a second CPU is ours, FORK_ENV is
    not "0" and coverage.py does not measure this process."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else ()
    return (
        hasattr(os, "fork")
        and len(cpus) > 1
        and os.environ.get(FORK_ENV) != "0"
        and not _coverage_measures()
    )


def _coverage_measures() -> bool:
    """Whether coverage.py measures this process (its `Coverage.current()`): a child ends with
    `os._exit`, which skips saving its coverage data, so what it ran would read as never run."""
    cov = sys.modules.get("coverage")
    current = getattr(getattr(cov, "Coverage", None), "current", None)
    return callable(current) and current() is not None


@contextlib.contextmanager
def in_child(run: Callable[[], T], fork: bool) -> Iterator[Callable[[], T]]:
    """`run` once, on first use; with `fork` (and `may_fork()`) started at once in a forked
    child, its value sent pickled through a pipe. Where the child fails or cannot be made,
    `run` runs here, so an error is raised as without a child. The child is killed and reaped
    when the block ends (it ignores SIGINT). A plan process may fork: it has no gRPC thread
    (runner._in_process_callbacks)."""
    if not (fork and may_fork()):
        yield functools.cache(run)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    read, write = os.pipe()
    # Frozen for the fork, so the child's collector never touches an inherited object: a child
    # forked beside Pulumi's executor threads segfaulted in "Garbage-collecting" now and then
    # (faulthandler, CI logs of 2026-11-29).
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:  # no process to spare (EAGAIN, ENOMEM): as without a child
        gc.unfreeze()
        os.close(read)
        os.close(write)
        yield functools.cache(run)
        return
    if pid == 0:  # the child: run, send, exit without the exit handlers
        os.close(read)
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _die_with(parent)
            import asyncio  # noqa: PLC0415 - imported by the program run already

            # a loop of its own: the parent's epoll set is shared through the fork
            asyncio.set_event_loop(asyncio.new_event_loop())
            data = pickle.dumps(run(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
            code = 0
        finally:
            os._exit(code)
    gc.unfreeze()
    os.close(write)
    pipe = os.fdopen(read, "rb")
    reaped = False

    def collect() -> T:
        nonlocal reaped
        data = pipe.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
        if os.waitstatus_to_exitcode(status) == 0:
            return pickle.loads(data)
        return run()  # the child failed: here, so that an error is raised as it is

    try:
        yield functools.cache(collect)
    finally:
        pipe.close()
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _die_with(parent: int) -> None:
    """In a child: SIGKILL when `parent` ends (Linux's PR_SET_PDEATHSIG), so a plan killed
    outright leaves no child running; elsewhere the child ends on finding its pipe closed."""
    import ctypes  # noqa: PLC0415 - in the child only

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the call
        os._exit(1)
