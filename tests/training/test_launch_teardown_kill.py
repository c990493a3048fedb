"""A rank torchrun SIGKILLs in its own teardown never outranks the failure that began it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from trainforge.training import exits, launch


def test_a_teardown_sigkill_is_a_follower_not_the_cause() -> None:
    """Rank 0 failed in a collective (200); rank 1 was stuck in a C call, ignored torchrun's
    SIGTERM and got its SIGKILL 30 s later. The launcher said "exiting with 137 (node_lost,
    rank 1)": torchrun's own kill outranked the real cause (watched fail)."""
    code, line = launch.worker_exit_code({0: 200, 1: -9}, times={0: 1000, 1: 1031})
    assert code == 200, line
    assert line.endswith("exiting with 200 (collective_error, retryable, rank 0)"), line
    assert "rank 1 exit -9 (killed by SIGKILL 31 s after the first failure, in torchrun's " \
        "teardown: a follower)" in line  # fmt: skip
    follower = line.split("; ")[1]
    docs = Path(__file__).parents[2] / "docs" / "reliability.md"
    assert follower in " ".join(docs.read_text(encoding="utf-8").split())  # as documented
    # the recorded cause wins the same way
    got, _ = launch.worker_exit_code({0: -15, 1: -9}, {0: exits.COLLECTIVE_ERROR}, {0: 5, 1: 40})
    assert got == 200


def test_a_sigkill_among_the_first_failures_still_explains_its_peers() -> None:
    """The OOM killer's SIGKILL is the first failure torchrun saw: it stays the cause."""
    code, line = launch.worker_exit_code({0: -9, 1: 200}, times={0: 1000, 1: 1000})
    assert code == 137 and "node_lost, retryable, rank 0" in line
    # only foreign ends and a teardown kill: the first failure's code, not the kill's
    code, line = launch.worker_exit_code({0: -9, 1: -11}, times={0: 1040, 1: 1000})
    assert code == 139 and line.endswith("(retryable, rank 1)"), line


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun's process teardown is POSIX")
def test_torchruns_own_teardown_timestamps_a_stuck_ranks_kill_after_the_first(
    tmp_path, monkeypatch
) -> None:
    """torch's own SubprocessContext (torchrun's, torch 2.13.0): rank 0 exits 200, rank 1
    ignores SIGTERM; its teardown SIGKILLs rank 1 (the 30 s grace cut to 2 here) and stamps it
    later than rank 0. The launcher's verdict from that real result is rank 0's cause."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes
    from torch.distributed.elastic.multiprocessing.api import PContext

    monkeypatch.setattr(PContext.close, "__defaults__", (None, 2))  # the grace, 30 s upstream
    failing = "import time; time.sleep(1.2); raise SystemExit(200)"
    stuck = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(__import__('sys').argv[1], 'w').close(); time.sleep(120)"
    )
    ready = tmp_path / "ready"
    ctx = start_processes(
        name="teardown",
        entrypoint=sys.executable,
        args={0: ("-c", failing), 1: ("-c", stuck, str(ready))},
        envs={0: {}, 1: {}},
        logs_specs=DefaultLogsSpecs(log_dir=str(tmp_path / "logs")),
    )
    try:
        result = ctx.wait(timeout=60, period=0.1)
    finally:
        ctx.close()
    assert result is not None and ready.exists()
    got = {r: (f.exitcode, f.timestamp) for r, f in result.failures.items()}
    assert got[0][0] == 200 and got[1][0] == -signal.SIGKILL, got
    assert got[1][1] > got[0][1], got  # the kill is stamped after the first failure
    failures = {r: f.exitcode for r, f in result.failures.items()}
    times = {r: f.timestamp for r, f in result.failures.items()}
    code, line = launch.worker_exit_code(failures, times=times)
    assert code == 200, line
