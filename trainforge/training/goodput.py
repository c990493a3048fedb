"""Goodput: the fraction of wall time spent in training steps whose results were kept.

    goodput = productive seconds / wall seconds since the job's first attempt started

Productive seconds are the time in optimizer steps (forward, backward, optimizer, the loss
all-reduce of a log step) that the current lineage of checkpoints still contains: the steps
of a failed attempt after its last complete checkpoint are *lost* (they are run again) and
count once, when they are re-run. Everything else is overhead, reported in the breakdown:

* ``startup``: process start to the first step (imports, process group, model build,
  restore) of every attempt;
* ``checkpoint``: time training was blocked by checkpoint saves;
* ``lost``: steps run by failed attempts after their last checkpoint;
* ``other``: the rest (time between attempts: failure detection, pod re-creation, restart
  rendezvous; and anything outside steps).

Which steps a checkpoint banks is recorded when its save starts (``checkpoint_started``), so
resuming from it knows its productive seconds (ledger.py keeps them across restarts).
Wall time starts when the first attempt's process starts; the time a pod waited for a node
before that is not seen by the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainforge.training.ledger import RunLedger

# The ledger is rewritten (tmp file, fsync, rename on shared storage) at most this often from
# the log steps; checkpoints and exits always write it.
FLUSH_EVERY_S = 30.0


class Goodput:
    def __init__(self, ledger: RunLedger, *, clock: Callable[[], float] | None = None) -> None:
        self.ledger = ledger
        self.clock = clock or ledger.clock
        self._base: float | None = 0.0  # productive seconds banked in the resumed checkpoint
        self._steps = 0  # steps run in this attempt
        self._flushed = float("-inf")

    def begin(self, resumed_step: int) -> None:
        """After restore, right before the first step."""
        cur = self.ledger.current
        cur.resumed_step = resumed_step
        cur.last_step = resumed_step
        cur.loop_started_at = self.clock()
        self.ledger.resumed(resumed_step)
        if resumed_step == 0:
            self._base = 0.0
        else:
            self._base = self.ledger.productive_by_step.get(resumed_step)
            if self._base is None and self.ledger.rank == 0:
                self.ledger.log(
                    f"goodput: the ledger has no record of step {resumed_step} (ledger lost, or "
                    "a checkpoint from elsewhere); counting those steps at this attempt's mean "
                    "step time"
                )
        self.ledger.save()

    def step(self, step: int, seconds: float) -> None:
        cur = self.ledger.current
        cur.step_seconds += seconds
        cur.last_step = step
        self._steps += 1

    def checkpoint_started(self, step: int) -> None:
        """A save of ``step`` began: it banks every productive second up to now."""
        self.ledger.productive_by_step[step] = self.productive_seconds()
        self.ledger.save()

    def checkpoint_blocked(self, seconds: float) -> None:
        self.ledger.current.checkpoint_seconds += seconds

    def flush(self, force: bool = False) -> None:
        """Record progress in the ledger (rate-limited to FLUSH_EVERY_S unless forced)."""
        now = self.clock()
        self.ledger.current.updated_at = now
        if force or now - self._flushed >= FLUSH_EVERY_S:
            self._flushed = now
            self.ledger.save()

    # -- numbers --------------------------------------------------------------------------

    def _mean_step(self) -> float:
        cur = self.ledger.current
        return cur.step_seconds / self._steps if self._steps else 0.0

    def _banked(self, step: int | None) -> float:
        if not step:
            return 0.0
        known = self.ledger.productive_by_step.get(step)
        return known if known is not None else step * self._mean_step()

    def productive_seconds(self) -> float:
        cur = self.ledger.current
        base = self._base if self._base is not None else self._banked(cur.resumed_step)
        return base + cur.step_seconds

    def snapshot(self) -> dict[str, Any]:
        """The goodput and its breakdown (seconds), for gauges and summary.json."""
        now = self.clock()
        wall = max(now - self.ledger.started_at, 1e-9)
        attempts = self.ledger.attempts
        startup = sum(
            max(a.loop_started_at - a.started_at, 0.0)
            for a in attempts
            if a.loop_started_at is not None
        )
        checkpoint = sum(a.checkpoint_seconds for a in attempts)
        lost = 0.0
        for prev, nxt in zip(attempts, attempts[1:], strict=False):
            kept = self._banked(nxt.resumed_step) - self._banked(prev.resumed_step)
            lost += max(prev.step_seconds - max(kept, 0.0), 0.0)
        productive = self.productive_seconds()
        other = max(wall - productive - startup - checkpoint - lost, 0.0)
        return {
            "goodput": min(productive / wall, 1.0),
            "wall_seconds": wall,
            "productive_seconds": productive,
            "startup_seconds": startup,
            "checkpoint_seconds": checkpoint,
            "lost_seconds": lost,
            "other_seconds": other,
            "restarts": self.ledger.restarts,
        }

    def gauges(self) -> dict[str, float]:
        s = self.snapshot()
        return {
            "goodput": s["goodput"],
            "restarts": float(s["restarts"]),
            "productive_seconds": s["productive_seconds"],
            "wall_seconds": s["wall_seconds"],
            "lost_seconds": s["lost_seconds"],
        }
