"""The step this attempt resumed from, noted in the process's run ledger.

Why its own module: the checkpoint manager knows the step it restored, the run ledger
(ledger.py) keeps attempts; ledger imports exits, which imports the checkpoint module, so the
checkpoint module cannot import the ledger. Both import this one (standard library only): the
ledger registers itself when rank 0 begins an attempt, CheckpointManager.restore notes the step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_ACTIVE: Any = None  # this process's rank-0 RunLedger, once it began an attempt
_CHECK: Any = None  # called with (ledger, step) once noted: may stop the attempt (usercode)


def register(ledger: Any) -> None:
    """The ledger whose current attempt `note_resumed` updates (rank 0's)."""
    global _ACTIVE
    _ACTIVE = ledger


def check_on_resume(check: Any) -> None:
    """`check(ledger, step)`, called after each note; it may raise to stop the attempt. The
    wrapper your code runs under (usercode.py) stops one that keeps failing after resuming
    from the same step, as the runtime does after its restore (loop._check_progress)."""
    global _CHECK
    _CHECK = check


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """The ledger and check registered in the block are the block's: on leaving it the ones
    before it are back. Why: `loop.train` registers its run's ledger; after it returned, a
    later CheckpointManager.restore in the same process (a notebook's evaluation, the next
    test) noted its step in that finished run's ledger and rewrote its file."""
    global _ACTIVE, _CHECK
    saved = _ACTIVE, _CHECK
    try:
        yield
    finally:
        _ACTIVE, _CHECK = saved


def note_resumed(step: int) -> None:
    """Record in this process's ledger (rank 0's, when one began an attempt) the step this
    attempt resumed from, so your own code's attempts (run through
    trainforge.training.usercode) know it as the runtime's do (Goodput.begin), and `trainforge
    report` draws the restart at that step, not at the first step logged after it. Never
    raises, except where a `check_on_resume` check stops an attempt that makes no progress:
    bookkeeping must not stop training."""
    ledger = _ACTIVE
    if ledger is None or getattr(ledger, "rank", None) != 0 or not ledger.attempts:
        return
    with contextlib.suppress(Exception):
        cur = ledger.current
        cur.resumed_step = int(step)
        ledger.resumed(int(step))
        if cur.last_step is None or cur.last_step < step:
            cur.last_step = int(step)
        ledger.save()
    if _CHECK is not None:
        _CHECK(ledger, int(step))
