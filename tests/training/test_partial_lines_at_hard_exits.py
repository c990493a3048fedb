"""A rank's partial line (no newline yet) is written before the runtime's hard exits.

Each rank line-buffers stdout and stderr (training/streams.py), so text without a newline
waits in the text layer; torchrun's ``python -u`` wrote it at once. An ``os._exit`` does not
flush, so the preemption grace timer's hard exit lost it: a ``print(x, end="")`` on stderr while
the timer's own line went to stdout (watched fail: stderr empty, with preemption.py's
``os._exit``; a ``\\r`` is flushed by line buffering, as a newline is). Every hard exit of ours goes through `core.process.exit_now`, which flushes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.training.runtime_helpers import ROOT, env

PROBE = textwrap.dedent(
    """
    import sys, time
    from trainforge.training.streams import whole_lines
    whole_lines()  # as the runtime's __main__ and your code's wrapper
    from trainforge.training.preemption import PREEMPTED_EXIT_CODE, PreemptionHandler
    handler = PreemptionHandler(0.2)  # its log: print, to stdout, as the runtime's
    print("on stdout", end="")
    print("progress 37%", end="", file=sys.stderr)
    handler.begin_shutdown()  # the save never ends: the grace timer's exit comes
    time.sleep(60)
    print("not reached", file=sys.stderr)
    """
)


def test_the_grace_timers_exit_writes_a_ranks_partial_lines(tmp_path) -> None:
    from trainforge.training.preemption import PREEMPTED_EXIT_CODE

    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == PREEMPTED_EXIT_CODE, proc.stdout + proc.stderr
    assert "grace period exhausted" in proc.stdout, proc.stdout
    assert proc.stdout.startswith("on stdout"), proc.stdout
    assert proc.stderr.endswith("progress 37%"), repr(proc.stderr)
