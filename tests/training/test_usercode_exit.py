"""A rank of your own code leaves without the interpreter's finalization once its exit code is
known (trainforge/core/process.leave), so gloo's teardown cannot abort it there ("terminate
called without an active exception", exit 134 on a finished run: retryable, so restarted)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.training.runtime_helpers import ROOT, env, run_ranks_raw

PROBE = str(ROOT / "tests" / "training" / "pending_collective_probe.py")
WRAPPER = ("-m", "trainforge.training.usercode", PROBE)
# stdout buffered as in a pod's container (empty: unset; the tests' own environment may set it)
BUFFERED = {"PYTHONUNBUFFERED": ""}
LOST_PEER = 202  # exits.PEER_LOST: rank 1 finds rank 0 (and its store) gone


@pytest.mark.parametrize(
    ("end", "code"), [((), 0), (("raise",), 1), (("exit", "3"), 3)], ids=["ok", "raise", "exit"]
)
def test_your_code_that_ends_with_gloo_work_in_flight_exits_with_its_own_code(end, code, tmp_path):
    """Before, rank 0 aborted (-6) in every run of its probe (the wrapper ran finalization)."""
    results = run_ranks_raw(
        2, list(end), timeout=120, entry=WRAPPER, TRAINFORGE_OUTPUT_DIR=str(tmp_path), **BUFFERED
    )
    (got, log), (peer, peer_log) = results
    assert "terminate called" not in log and got == code, f"rank 0 exited {got}:\n{log[-3000:]}"
    assert "rank 0: ended with an all-reduce in flight" in log  # its buffered print, flushed
    assert (tmp_path / "unclosed.txt").read_text() == "left open\n"  # written, never closed
    assert peer == LOST_PEER, f"rank 1 exited {peer}:\n{peer_log[-3000:]}"  # rank 0 left first
    if end == ("raise",):
        assert "RuntimeError: the script's own bug" in log
        assert "trainforge exit: user_error code=1 (rank 0)" in log


# What Python's exit does before its finalization, `leave` does too: the threading module's
# shutdown (a non-daemon thread finishes), atexit handlers (in reverse order, one that raises
# printed and the code kept), the files left open, the standard streams and C's stdio flushed.
EXITING = textwrap.dedent(
    """
    import atexit, ctypes, sys, threading, time
    from trainforge.core.process import exit_code, leave

    left_open = open(sys.argv[1], "w")
    left_open.write("unclosed\\n")
    atexit.register(print, "atexit: first registered, last run")
    atexit.register(lambda: 1 / 0)
    atexit.register(print, "atexit: last registered, first run")
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread: finished"))).start()
    print("main: buffered")
    ctypes.CDLL(None).printf(b"C: buffered\\n")  # a library's own output, in C's stdio
    leave(exit_code(int(sys.argv[2])))
    """
)


@pytest.mark.parametrize("code", [0, 3, 134])
def test_leave_does_what_an_exit_does_before_finalization(code, tmp_path):
    path = tmp_path / "left-open.txt"
    proc = subprocess.run(
        [sys.executable, "-c", EXITING, str(path), str(code)],
        env=env(**BUFFERED),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.splitlines()
    assert "C: buffered" in lines  # C's buffer and Python's reach the pipe in either order
    assert [line for line in lines if line != "C: buffered"] == [
        "main: buffered",
        "thread: finished",
        "atexit: last registered, first run",
        "atexit: first registered, last run",
    ]
    assert "ZeroDivisionError" in proc.stderr
    assert path.read_text() == "unclosed\n"
