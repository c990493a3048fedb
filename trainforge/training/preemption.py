"""SIGTERM -> agree at a step boundary -> checkpoint -> exit, within ``--grace-period``.

Kubernetes (pod deletion, spot interruption, Karpenter drain) and torchrun send SIGTERM, wait
the grace period, then SIGKILL. The handler only sets a flag (nothing else is safe inside a
signal handler). Ranks may get the signal at different times or not at all (one pod deleted),
so at every step boundary the ranks all-reduce (MAX) their flags and stop together.

The agreement costs no host sync on the training stream: it runs on its own gloo group with
``async_op=True``; the result of the all-reduce launched at step ``k`` is read at step ``k+1``
(long finished by then), so every rank reads the same value at the same step.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from trainforge.core.process import exit_now
from trainforge.training import exits
from trainforge.training.distributed import group_timeout

# Exit code after a checkpoint-on-SIGTERM: 128 + SIGTERM, the code a process killed by SIGTERM
# reports. torchrun treats it as a failure (so --max-restarts resumes the job) and the Kubeflow
# training operator's ExitCode restart policy treats 128-255 as retryable.
PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM

LogFn = Callable[[str], None]


@contextlib.contextmanager
def handlers_restored(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """The process's handlers of `signals` as they were before the block, again after it.
    Why: a run's PreemptionHandler restores the previous SIGTERM handler in `close`, which a
    run that failed (an exception, a non-finite loss, a failed restore) never reaches: after
    such an in-process `loop.train` (a notebook, a test) the process kept the dead run's handler,
    which only sets a flag, so a SIGTERM no longer ended it. A pod's process leaves instead.
    Only the main thread may set handlers; elsewhere none were set."""
    main = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in signals} if main else {}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


class PreemptionHandler:
    """Flag on SIGTERM; ``should_stop()`` at each step boundary returns the same answer on all ranks."""

    def __init__(
        self,
        grace_period: float,
        *,
        log: LogFn = print,
        signals: tuple[int, ...] = (signal.SIGTERM,),
    ) -> None:
        self.grace_period = grace_period
        self.log = log
        self.received_at: float | None = None
        self.signal_name = ""
        self._local = threading.Event()
        self._distributed = dist.is_available() and dist.is_initialized()
        self._group = (
            dist.new_group(backend="gloo", timeout=group_timeout()) if self._distributed else None
        )
        self._work: Any = None
        self._flag = torch.zeros(1, dtype=torch.int32)
        self._previous: dict[int, Any] = {}
        self._watchdog: threading.Timer | None = None
        if threading.current_thread() is threading.main_thread():
            for sig in signals:
                self._previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        exits.context.sigterm |= signum == signal.SIGTERM  # usercode.own_exit reads it
        if self.received_at is None:
            self.received_at = time.monotonic()
            self.signal_name = signal.Signals(signum).name
        self._local.set()

    @classmethod
    def from_env(cls, *, log: LogFn = print) -> PreemptionHandler:
        """A handler with the job's grace period (``TRAINFORGE_GRACE_PERIOD``, default 90 s).
        Create it after ``init_process_group`` (it all-reduces the stop flag on its own group)."""
        from trainforge.training.contract import job_env

        return cls(job_env().grace_period, log=log)

    def shutdown(self, save: Callable[[], Any] | None = None) -> int:
        """After ``should_stop()`` returned True: log, run ``save()`` (your checkpoint) under a
        watchdog that exits hard when the grace period runs out, restore the signal handlers,
        and return the exit code to leave with (``sys.exit(handler.shutdown(save))``): 143, which
        torchrun and the operator's ExitCode restart policy treat as retryable."""
        self.begin_shutdown()
        if save is not None:
            save()
        self.finish_shutdown()
        self.close()
        return PREEMPTED_EXIT_CODE

    def deadline_left(self) -> float:
        if self.received_at is None:
            return self.grace_period
        return self.grace_period - (time.monotonic() - self.received_at)

    def should_stop(self) -> bool:
        """Collective: call once per step boundary on every rank, in the same order."""
        if not self._distributed:
            return self._local.is_set()
        stop = False
        if self._work is not None:
            self._work.wait()
            stop = bool(self._flag.item())
        if not stop:
            self._flag.fill_(1 if self._local.is_set() else 0)
            self._work = dist.all_reduce(
                self._flag, op=dist.ReduceOp.MAX, group=self._group, async_op=True
            )
        else:
            self._work = None
        return stop

    def begin_shutdown(self) -> None:
        """Log and arm a watchdog that exits hard if the grace period runs out mid-save."""
        who = f"{self.signal_name} on this rank" if self._local.is_set() else "another rank"
        left = self.deadline_left()
        self.log(
            f"preemption: stop requested ({who}); saving a checkpoint, {left:.1f}s of the "
            f"{self.grace_period:.0f}s grace period left"
        )
        self._watchdog = threading.Timer(max(left, 0.0), self._expired)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expired(self) -> None:
        self.log(
            "preemption: grace period exhausted before the checkpoint completed; exiting. "
            "The partial checkpoint will be ignored on resume. Raise --grace-period."
        )
        exit_now(PREEMPTED_EXIT_CODE)  # the log line above and a rank's partial line too

    def finish_shutdown(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        used = self.grace_period - self.deadline_left()
        self.log(
            f"preemption: checkpoint complete {used:.1f}s after the signal; exiting with code "
            f"{PREEMPTED_EXIT_CODE} so the job is restarted and resumes from it"
        )

    def close(self) -> None:
        """Drain the outstanding all-reduce and restore the previous signal handlers."""
        if self._work is not None:
            self._work.wait()
            self._work = None
        if threading.current_thread() is threading.main_thread():
            for sig, prev in self._previous.items():
                signal.signal(sig, prev)
        self._previous.clear()
