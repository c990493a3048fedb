"""A hang ends in a restart, not a stall.

A rank stuck in a collective, a kernel, a dead NFS read or a deadlock holds every GPU of the
job until someone notices. The watchdog is a daemon thread that watches the current *activity*
(a training step, or a named section such as a checkpoint save) and fires when it has run
longer than its bound:

* a step: ``max(multiple x mean of the last `window` step times, floor)``; for the first
  ``warmup_steps`` steps after a (re)start, ``startup`` (torch.compile, NCCL/EFA setup and
  cold data reads make them slow);
* a section: its own timeout, default ``max(startup, multiple x its longest previous run)``.

When it fires it logs which rank is stuck and where (the stack of every thread, through
``faulthandler``), dumps the collective flight recorder (the last collectives of every
process group: the NCCL one on CUDA builds, the CPU/gloo one otherwise) to
``dump_dir/nccl_trace_rank_<rank>`` (the layout ``python -m
torch.distributed.flight_recorder.fr_trace DIR`` reads), exchanges a one-line status with the
other ranks through the process group's store (rank 0 names the ranks that are behind: the
ones that did not enter the collective the others wait in), and exits with code 201
(``exits.HANG``) so torchrun or the job controller restarts the group, which resumes from the
last complete checkpoint. Every step of that is bounded: if the diagnosis itself hangs, the
process still exits after ``fire_grace_s``.

The class works without trainforge's training loop; a user script that uses our library
pieces protects its own loop the same way::

    from trainforge.training import Watchdog

    with Watchdog.from_env() as wd:  # after init_process_group, on every rank
        for step, batch in enumerate(loader):
            with wd.step(step):
                loss = model(batch).sum()
                loss.backward()
                optimizer.step()
            with wd.section("checkpoint"):
                save(...)

``Watchdog.from_env()`` takes its floor from the job's ``hangTimeout`` (the contract's
TRAINFORGE_HANG_TIMEOUT; 300 s when unset; 0 turns it off: the object then watches nothing)
and dumps to ``TRAINFORGE_OUTPUT_DIR/flight-recorder/attempt_NNNN``; ``Watchdog(floor_s=...)``
sets everything explicitly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import os
import pickle
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trainforge.core.process import exit_now, flush_std_streams
from trainforge.training import exits
from trainforge.training.timeouts import HANG_MULTIPLE, STARTUP_MULTIPLE

LogFn = Callable[[str], None]
STORE_PREFIX = "trainforge/watchdog/"


@dataclasses.dataclass(frozen=True)
class Activity:
    label: str  # "step 7" or "checkpoint"
    step: int | None
    started: float
    bound: float
    why: str  # how the bound was derived, for the log line ("" for a step: derived on firing)
    section: str | None = None


@dataclasses.dataclass(frozen=True)
class Fired:
    """What the watchdog saw when it fired (passed to ``on_fire``)."""

    activity: Activity
    elapsed: float
    rank: int | None
    # collectives this rank entered on the default group (flight recorder); the stuck rank
    # of a hang entered fewer than the ranks waiting for it
    collectives: int | None = None

    @property
    def detail(self) -> str:
        a = self.activity
        return (
            f"{a.label} made no progress for {self.elapsed:.1f}s (bound {a.bound:.1f}s = {a.why})"
        )


class Watchdog:
    """Fires when a step (or a section) runs far longer than it should. Thread-safe API."""

    def __init__(
        self,
        floor_s: float,
        *,
        multiple: float = HANG_MULTIPLE,
        startup_s: float | None = None,
        warmup_steps: int = 3,
        window: int = 32,
        rank: int | None = None,
        world_size: int | None = None,
        log: LogFn | None = None,
        dump_dir: str | Path | None = None,
        on_fire: Callable[[Fired], None] | None = None,
        exit_code: int = exits.HANG.code,
        poll_s: float | None = None,
        exchange_wait_s: float = 10.0,
        fire_grace_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        exit_fn: Callable[[int], Any] = exit_now,
        enabled: bool = True,
    ) -> None:
        if enabled and floor_s <= 0:
            raise ValueError(f"Watchdog floor_s must be > 0 seconds, got {floor_s}")
        self.enabled = enabled
        self.floor_s = float(floor_s)
        self.multiple = float(multiple)
        self.startup_s = float(startup_s) if startup_s else STARTUP_MULTIPLE * self.floor_s
        self.warmup_steps = warmup_steps
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        self.log = log or self._default_log
        self.dump_dir = Path(dump_dir) if dump_dir else None
        self.on_fire = on_fire
        self.exit_code = exit_code
        self.poll_s = poll_s if poll_s is not None else max(0.05, min(1.0, self.floor_s / 20))
        self.exchange_wait_s = exchange_wait_s
        self.fire_grace_s = fire_grace_s
        self.clock = clock
        self.exit_fn = exit_fn
        self._durations: deque[float] = deque(maxlen=window)
        self._total = 0.0  # sum(self._durations), kept as they come and go (no sum per step)
        self._section_max: dict[str, float] = {}
        self._lock = threading.Lock()
        self._activity: Activity | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired: Fired | None = None

    def _default_log(self, msg: str) -> None:
        tag = f"[rank{self.rank}] " if self.rank is not None else ""
        print(f"{tag}{msg}", file=sys.stderr, flush=True)

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def from_env(cls, **overrides: Any) -> Watchdog:
        """The job contract's watchdog: floor = TRAINFORGE_HANG_TIMEOUT (the job's
        `hangTimeout`, 300 s when unset; 0 = a disabled watchdog that never fires), flight
        recorder dumps under TRAINFORGE_OUTPUT_DIR/flight-recorder/attempt_NNNN (the torchrun
        restart count). Keyword arguments override any constructor argument."""
        from trainforge.training.contract import job_env  # noqa: PLC0415

        env = job_env()
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or "0"
        attempt = int(attempt) if attempt.isdigit() else 0
        kwargs: dict[str, Any] = {
            "floor_s": env.hang_timeout,
            "enabled": env.hang_timeout > 0,
            "dump_dir": Path(env.output_dir) / "flight-recorder" / f"attempt_{attempt:04d}",
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    def start(self) -> Watchdog:
        if not self.enabled:
            return self
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="trainforge-watchdog", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None

    def __enter__(self) -> Watchdog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the training loop calls ------------------------------------------------------

    def bound(self) -> tuple[float, str]:
        """The current step bound in seconds, and how it was derived."""
        n = len(self._durations)
        if n == 0 or n < self.warmup_steps:
            return self.startup_s, (
                f"startup bound for the first {self.warmup_steps} steps after a start "
                f"({STARTUP_MULTIPLE:g} x {self.floor_s:g}s floor)"
            )
        mean = self._total / n
        b = max(self.multiple * mean, self.floor_s)
        return b, f"max({self.multiple:g} x {mean:.3f}s mean of the last {n} steps, " \
                  f"{self.floor_s:g}s floor)"  # fmt: skip

    def step_started(self, step: int | None = None) -> None:
        """Called every step: the bound only (its explanation is written if the watchdog
        fires, from the same durations: they change only when a step finishes)."""
        n = len(self._durations)
        if n == 0 or n < self.warmup_steps:
            b = self.startup_s
        else:
            b = max(self.multiple * self._total / n, self.floor_s)
        label = f"step {step}" if step is not None else "a step"
        with self._lock:
            self._activity = Activity(label, step, self.clock(), b, "")

    def step_finished(self) -> float:
        """Ends the current step; returns its duration in seconds (0 if none was running)."""
        with self._lock:
            act, self._activity = self._activity, None
        if act is None or act.section is not None:
            return 0.0
        d = self.clock() - act.started
        if len(self._durations) == self._durations.maxlen:
            self._total -= self._durations[0]  # the one append() evicts
        self._durations.append(d)
        self._total += d
        return d

    @contextlib.contextmanager
    def step(self, step: int | None = None) -> Iterator[None]:
        self.step_started(step)
        try:
            yield
        finally:
            self.step_finished()

    @contextlib.contextmanager
    def section(
        self, name: str, timeout_s: float | None = None, step: int | None = None
    ) -> Iterator[None]:
        """Watch a non-step phase (restore, checkpoint save) with its own bound."""
        if timeout_s is None:
            longest = self._section_max.get(name, 0.0)
            timeout_s = max(self.startup_s, self.multiple * longest)
            why = (
                f"max({STARTUP_MULTIPLE:g} x {self.floor_s:g}s floor, {self.multiple:g} x "
                f"longest previous {name} {longest:.1f}s)"
            )
        else:
            why = f"the {name} timeout"
        with self._lock:
            previous = self._activity
            self._activity = Activity(name, step, self.clock(), timeout_s, why, section=name)
        t0 = self.clock()
        try:
            yield
        finally:
            d = self.clock() - t0
            self._section_max[name] = max(self._section_max.get(name, 0.0), d)
            with self._lock:
                # an enclosing step or section resumes; the time spent here is not its own
                self._activity = (
                    dataclasses.replace(previous, started=previous.started + d)
                    if previous is not None
                    else None
                )

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            with self._lock:
                act = self._activity
            if act is None:
                continue
            elapsed = self.clock() - act.started
            if elapsed > act.bound:
                self._fire(act, elapsed)
                return

    def _fire(self, act: Activity, elapsed: float) -> None:
        if not act.why:  # a step's: the durations are those its bound was drawn from
            act = dataclasses.replace(act, why=self.bound()[1])
        hard = threading.Timer(self.fire_grace_s, self._exit_now)
        hard.daemon = True
        hard.start()
        fired = self.fired = Fired(act, elapsed, self.rank)
        try:
            who = f"rank {self.rank}" if self.rank is not None else "this process"
            self.log(f"watchdog: {who}: {fired.detail}; this rank is stuck. Stack of every thread:")
            self._stacks()
            records = _flight_records()
            fired = self.fired = dataclasses.replace(fired, collectives=_last_seq(records))
            self._dump(records)
            summary = self._exchange(act, records)
            if summary:
                self.log(summary)
            if self.on_fire is not None:
                _bounded(lambda: self.on_fire(fired), self.exchange_wait_s)
            self.log(
                exits.exit_line(exits.HANG, rank=self.rank, step=act.step, detail=fired.detail)
            )
        finally:
            self._exit_now()

    def _stacks(self) -> None:
        """faulthandler's stack of every thread, logged line by line (with the log's rank
        prefix: the ranks of a pod share stderr, and raw dumps of several ranks firing at once
        interleave byte by byte) and saved as dump_dir/stacks_rank_<rank>.txt."""
        try:
            with tempfile.TemporaryFile() as f:
                faulthandler.dump_traceback(file=f, all_threads=True)
                f.seek(0)
                text = f.read().decode("utf-8", "replace")
        except (OSError, ValueError):  # no temporary file: the raw dump, as faulthandler does
            flush_std_streams()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            flush_std_streams()
            return
        for line in text.splitlines():
            self.log(f"  {line}")
        if self.dump_dir is not None:
            path = self.dump_dir / f"stacks_rank_{self.rank if self.rank is not None else 0}.txt"
            with contextlib.suppress(OSError):
                self.dump_dir.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

    def _exit_now(self) -> None:
        flush_std_streams()
        self.exit_fn(self.exit_code)

    def _dump(self, records: tuple[str, bytes] | None) -> None:
        if self.dump_dir is None:
            return
        if records is None:
            self.log(
                "watchdog: no flight recorder in this torch build or process group "
                "(set TORCH_FR_BUFFER_SIZE before the process group is created)"
            )
            return
        kind, raw = records
        rank = self.rank if self.rank is not None else 0
        path = self.dump_dir / f"nccl_trace_rank_{rank}"
        try:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
        except OSError as e:
            self.log(f"watchdog: cannot write the flight recorder dump to {path} ({e})")
            return
        self.log(
            f"watchdog: {kind} flight recorder dumped to {path} "
            f"(all ranks: python -m torch.distributed.flight_recorder.fr_trace {self.dump_dir})"
        )

    def _exchange(self, act: Activity, records: tuple[str, bytes] | None) -> str | None:
        """Publish this rank's status in the store; rank 0 names the ranks that are behind."""
        store = _default_store()
        if store is None or self.rank is None or not self.world_size:
            return None
        status = {"step": act.step, "label": act.label, "seq": _last_seq(records)}
        out: dict[str, Any] = {}

        def work() -> None:
            store.set(f"{STORE_PREFIX}{self.rank}", json.dumps(status))
            if self.rank != 0:
                return
            keys = [f"{STORE_PREFIX}{r}" for r in range(self.world_size)]
            deadline = self.clock() + self.exchange_wait_s
            while self.clock() < deadline and not store.check(keys):
                time.sleep(0.2)
            found = {}
            for r, k in enumerate(keys):
                if store.check([k]):
                    found[r] = json.loads(store.get(k))
            out["found"] = found

        if not _bounded(work, self.exchange_wait_s + 5) or "found" not in out:
            return None
        return summarize(out["found"], self.world_size)


def summarize(statuses: dict[int, dict[str, Any]], world_size: int) -> str:
    """Rank 0's line: which ranks are behind (entered fewer collectives, or earlier steps)."""
    missing = [r for r in range(world_size) if r not in statuses]
    parts = []
    seqs = {r: s.get("seq") for r, s in statuses.items() if s.get("seq") is not None}
    if seqs:
        low = min(seqs.values())
        behind = sorted(r for r, v in seqs.items() if v == low)
        ahead = sorted(r for r, v in seqs.items() if v != low)
        if ahead:
            parts.append(
                f"rank(s) {_ranks(behind)} entered {low} collectives on the default group, "
                f"rank(s) {_ranks(ahead)} more: the others wait for {_ranks(behind)} "
                "(look at their stacks)"
            )
        else:
            parts.append(f"every reporting rank entered {low} collectives on the default group")
    steps = {r: s.get("step") for r, s in statuses.items() if s.get("step") is not None}
    if steps and (not seqs or len(set(steps.values())) > 1):
        low = min(steps.values())
        at_low = sorted(r for r, v in steps.items() if v == low)
        parts.append(f"lowest step {low} on rank(s) {_ranks(at_low)}")
    if missing:
        parts.append(f"no report from rank(s) {_ranks(missing)} within the wait")
    return "watchdog: across ranks: " + "; ".join(parts) if parts else "watchdog: no statuses"


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:16]))
    return f"[{shown}{', ...' if len(ranks) > 16 else ''}]"


def _rank_and_world(rank: int | None, world: int | None) -> tuple[int | None, int | None]:
    if rank is not None:
        return rank, world
    dist = _dist()
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    env_rank = os.environ.get("RANK")
    env_world = os.environ.get("WORLD_SIZE")
    return (
        int(env_rank) if env_rank and env_rank.isdigit() else None,
        int(env_world) if env_world and env_world.isdigit() else world,
    )


def _dist() -> Any:
    torch = sys.modules.get("torch")
    return getattr(torch, "distributed", None) if torch is not None else None


def _default_store() -> Any:
    dist = _dist()
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - no store, no exchange
        return None


def _flight_records() -> tuple[str, bytes] | None:
    """The flight recorder's pickle: NCCL's on CUDA builds (``_dump_nccl_trace``), else the
    CPU recorder gloo groups use (``_dump_fr_trace``, torch 2.13). None when unavailable."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        c10d = torch._C._distributed_c10d
    except AttributeError:
        return None
    for kind, name in (("NCCL", "_dump_nccl_trace"), ("CPU (gloo)", "_dump_fr_trace")):
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        try:
            raw = fn(True, True, False)
        except Exception:  # noqa: BLE001 - a recorder that cannot dump is reported as absent
            continue
        if raw and _entries(raw):
            return kind, raw
    return None


def _entries(raw: bytes) -> list[dict[str, Any]]:
    try:
        data = pickle.loads(raw)  # noqa: S301 - torch's own dump of this process
    except Exception:  # noqa: BLE001
        return []
    return list(data.get("entries") or []) if isinstance(data, dict) else []


def _last_seq(records: tuple[str, bytes] | None) -> int | None:
    """Collectives this rank entered on the default process group (pg 0)."""
    if records is None:
        return None
    seqs = [
        int(e.get("collective_seq_id") or 0)
        for e in _entries(records[1])
        if str((e.get("process_group") or ("",))[0]) == "0" and not e.get("is_p2p")
    ]
    return max(seqs) if seqs else None


def _bounded(fn: Callable[[], Any], seconds: float) -> bool:
    """Run fn on a helper thread; give up after `seconds`. True when it finished."""
    t = threading.Thread(target=_swallow(fn), daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive()


def _swallow(fn: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(Exception):
            fn()

    return run
