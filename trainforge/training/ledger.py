"""The run ledger: what survives a restart besides the checkpoint.

A restarted job is a new process with no memory, yet goodput needs the wall time since the
*first* attempt, the productive time already banked in the checkpoint it resumes from, and
why the previous attempt ended. That lives next to the checkpoints, on storage every rank
shares, in a directory the checkpoint scanner ignores (``<checkpoint-dir>/.trainforge/``)::

    run.json                         rank 0: attempts, productive seconds per checkpoint step
    exits/attempt_0003/rank_00001.json   each rank that failed: its reason (exits.py)

Rank 0 writes ``run.json`` (tmp file + rename, so it is whole or absent) when an attempt
starts, at every log step, when a checkpoint of a step starts (the productive seconds up to
that step, so resuming from it knows what it banked) and when the attempt ends. Every rank
writes its own exit record when it fails; the next attempt's rank 0 reads them and names the
root cause (``exits.root_cause``). A rank of the failed attempt with no record was killed
outright or lost its node: ``node_lost``.

Without ``--checkpoint-dir`` nothing survives a restart, and the ledger keeps this process's
view only (restarts from ``TORCHELASTIC_RESTART_COUNT``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainforge.training import exits, layout, resume_note
from trainforge.training.exits import LOCAL_EXITS_ENV

LEDGER_DIR = ".trainforge"
RUN_FILE = "run.json"
EXITS_DIR = "exits"
LEDGER_VERSION = 1
KEEP_PRODUCTIVE = 64  # productive-seconds entries kept (checkpoint steps)
# A job that fails this many attempts in a row from the same checkpoint stops (no_progress):
# the training operator's ExitCode policy re-creates pods for retryable codes without limit.
NO_PROGRESS_LIMIT = 5

LogFn = Callable[[str], None]


def checkpoint_dir(argv: list[str]) -> str | None:
    """Where a run keeps its ledger: the runtime's --checkpoint-dir in `argv` (the launcher's
    command line), else the job contract's TRAINFORGE_CHECKPOINT_DIR (user code)."""
    from trainforge.training.contract import CHECKPOINT_DIR  # noqa: PLC0415

    for i, arg in enumerate(argv):
        if arg == "--checkpoint-dir" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--checkpoint-dir="):
            return arg.split("=", 1)[1]
    return os.environ.get(CHECKPOINT_DIR) or None


def record_refusal(
    checkpoint_dir: str | None,
    reason: exits.Reason,
    detail: str,
    *,
    rank: int | None,
    log: LogFn = print,
) -> None:
    """An attempt refused before anything of it ran (shadowing.refuse_at_start: a file of
    yours in a start-up module's place): registered and closed with its cause in one go, so
    `trainforge report` lists it like any attempt that failed. The refusal is the same on
    every rank and every pod (the same files), so only the process of rank 0 (the wrapper's
    RANK, or pod 0's launcher: RANK unset or 0) writes it, and it sets the attempt's end in
    run.json itself: the next attempt does not infer it from the exit records of ranks that
    never started (`rank`: the rank the exit names, None for the launcher). Never raises:
    bookkeeping does not change the exit."""
    if not checkpoint_dir or os.environ.get("RANK", "0") not in ("", "0"):
        return
    try:
        world = os.environ.get("WORLD_SIZE", "")
        size = max(int(world), 1) if world.isdigit() else 1
        ledger = RunLedger(checkpoint_dir, rank=0, world_size=size, log=log)
        ledger.begin_attempt()
        ledger.current.exit = {"reason": reason.name, "code": reason.code, "rank": rank,
                               "step": None, "detail": detail}  # fmt: skip
        ledger.record_exit(reason, step=None, detail=detail)
    except Exception as e:  # noqa: BLE001
        log(f"ledger: cannot record this refusal ({type(e).__name__}: {e})")


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def master_ranks() -> int | None:
    """The ranks of the Master's pod: this pod's PET_NPROC_PER_NODE, which the training
    operator (and run-local's `pod_wrapper`) gives every pod of a PyTorchJob; None where the
    process is told none (no pod, or an elastic job's)."""
    procs = os.environ.get("PET_NPROC_PER_NODE", "")
    return int(procs) if procs.isdigit() and int(procs) > 0 else None


def master_finished(
    checkpoint: str | Path | None,
    ranks: int,
    since: float | None = None,
    ended_after: float | None = None,
) -> bool:
    """Whether the job's first `ranks` ranks (a PyTorchJob's Master pod: its
    PET_NPROC_PER_NODE ranks from 0) ended the run: rank 0 marked the run ledger's last
    attempt finished (its exit 0: `RunLedger.record_exit` of SUCCESS), that attempt began at
    or after `since`, and none of them left a failure's exit record at or after `since` (None:
    that attempt's start); `ended_after`: rank 0 closed it at or after then (a process's
    start: an earlier run's finished attempt in the same directory is not this run's). The
    one test of "the Master has exited 0" that run-local's verdict
    (jobs/local.py `_succeeded`) and a Worker's exit line (exits.exit_line, through
    `RunLedger.master_finished`) read: once it holds, a PyTorchJob has succeeded
    (jobs/success.py)."""
    if not ranks or not checkpoint:
        return False
    root = Path(checkpoint) / LEDGER_DIR
    data = _read_json(root / RUN_FILE)
    try:
        last = data["attempts"][-1]  # type: ignore[index]
        started = float(last.get("started_at") or 0)
    except (TypeError, KeyError, IndexError, ValueError, AttributeError):
        return False
    if not last.get("finished") or (since is not None and started < since):
        return False
    if ended_after is not None and float(last.get("updated_at") or 0) < ended_after:
        return False
    since = started if since is None else since
    for path in sorted((root / EXITS_DIR).glob("attempt_*/rank_*.json")):
        rec = _read_json(path)
        try:
            if float(rec.get("time") or 0) >= since and int(rec.get("rank", -1)) < ranks:
                return False
        except (TypeError, ValueError, AttributeError):
            continue
    return True


@dataclasses.dataclass
class Attempt:
    attempt: int
    started_at: float  # wall clock (time.time) when this attempt's process started
    loop_started_at: float | None = None
    resumed_step: int | None = None
    last_step: int | None = None
    updated_at: float | None = None
    step_seconds: float = 0.0  # time in training steps in this attempt
    checkpoint_seconds: float = 0.0  # time training was blocked by checkpoints
    finished: bool = False
    exit: dict[str, Any] | None = None  # {"reason", "code", "rank", "step", "detail"}
    continued_from: int | None = None  # the finished run's last step this attempt continued
    # your code's wrapper (usercode.py): the newest step_<N> checkpoint in the directory when
    # the attempt began (0: none), what code that resumes from its newest checkpoint starts
    # from; the runtime's attempts leave it None and note `resumed_step` instead
    checkpoint_at_start: int | None = None

    @property
    def start(self) -> int | None:
        """The step this attempt started from: the step its restore resumed from, else the
        newest checkpoint the wrapper saw (None: it died before either was known)."""
        return self.resumed_step if self.resumed_step is not None else self.checkpoint_at_start

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Attempt:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class RunLedger:
    """Rank 0 owns ``run.json``; every rank may record its own exit. Never raises on I/O:
    bookkeeping must not stop training (problems are logged once)."""

    def __init__(
        self,
        checkpoint_dir: str | Path | None,
        *,
        rank: int,
        world_size: int,
        log: LogFn = print,
        process_started_at: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(checkpoint_dir) / LEDGER_DIR if checkpoint_dir else None
        self.rank = rank
        self.world_size = world_size
        self.log = log
        self.clock = clock
        self.process_started_at = process_started_at or clock()
        self.started_at = self.process_started_at  # of the first attempt, once loaded
        self.attempts: list[Attempt] = []
        self.productive_by_step: dict[int, float] = {}
        self.attempt_no = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
        self._warned = False
        # the finished run this process's attempt followed (attempts, productive, started_at),
        # until `resumed` knows whether it continues it
        self._finished: tuple[list[Attempt], dict[int, float], float] | None = None

    # -- files ----------------------------------------------------------------------------

    @property
    def persistent(self) -> bool:
        return self.root is not None

    def _run_path(self) -> Path:
        assert self.root is not None
        return self.root / RUN_FILE

    def _exit_path(self, attempt: int, rank: int) -> Path:
        assert self.root is not None
        return self.root / EXITS_DIR / f"attempt_{attempt:04d}" / f"rank_{rank:05d}.json"

    def _warn(self, what: str, e: BaseException) -> None:
        if not self._warned:
            self._warned = True
            self.log(f"ledger: cannot {what} ({type(e).__name__}: {e}); goodput may be off")

    # -- attempt lifecycle (rank 0) -------------------------------------------------------

    def begin_attempt(self) -> int:
        """Rank 0: load the ledger, name the previous attempt's exit, register this one.
        Returns the attempt number (broadcast it to the other ranks)."""
        if self.root is not None:
            data = _read_json(self._run_path())
            if isinstance(data, dict) and data.get("version") == LEDGER_VERSION:
                self.started_at = float(data.get("started_at", self.process_started_at))
                self.attempts = [Attempt.from_json(a) for a in data.get("attempts", [])]
                self.productive_by_step = {
                    int(k): float(v) for k, v in (data.get("productive_by_step") or {}).items()
                }
        if self.attempts:
            prev = self.attempts[-1]
            if not prev.finished and prev.exit is None:
                prev.exit = self.collect_exits(prev.attempt)
            self.attempt_no = prev.attempt + 1
            if prev.finished:
                # The run it belonged to ended: this process starts a new one (run-local again
                # in the same directory, a finished job created again), not a restart of it,
                # unless it resumes from that run's checkpoint (`resumed`: more --steps). Its
                # numbers go on, so exit records of the old run's attempts are never read as
                # this one's.
                self._finished = (self.attempts, self.productive_by_step, self.started_at)
                self.attempts, self.productive_by_step = [], {}
                self.started_at = self.process_started_at
        current = Attempt(attempt=self.attempt_no, started_at=self.process_started_at)
        self.attempts.append(current)
        self.save()
        resume_note.register(self)  # CheckpointManager.restore notes the resumed step here
        return self.attempt_no

    def resumed(self, step: int) -> None:
        """After restore, for an attempt right after a finished one: resuming from that run's
        checkpoint (step > 0) continues it (its attempts, productive seconds and time come
        back; the time between the runs is not its wall time); at step 0 it stays a new run."""
        if self._finished is None or step <= 0 or len(self.attempts) != 1:
            return
        (attempts, productive, started_at), self._finished = self._finished, None
        prev, cur = attempts[-1], self.attempts[0]
        cur.continued_from = prev.last_step
        self.attempts = [*attempts, cur]
        self.productive_by_step = {**productive, **self.productive_by_step}
        gap = max(cur.started_at - (prev.updated_at or cur.started_at), 0.0)
        self.started_at = started_at + gap
        self.save()

    def collect_exits(self, attempt: int) -> dict[str, Any]:
        """The root cause of a failed attempt, from its ranks' exit records."""
        records: list[dict[str, Any]] = []
        if self.root is not None:
            folder = self.root / EXITS_DIR / f"attempt_{attempt:04d}"
            if folder.is_dir():
                for p in sorted(folder.glob("rank_*.json")):
                    rec = _read_json(p)
                    if isinstance(rec, dict) and exits.from_record(rec) is not None:
                        records.append(rec)
        seen = {int(r.get("rank", -1)) for r in records}
        missing = [r for r in range(self.world_size) if r not in seen]
        reasons = [r for r in map(exits.from_record, records) if r is not None]
        if missing:
            reasons.append(exits.NODE_LOST)
        cause = exits.root_cause(reasons)
        if cause is exits.NODE_LOST:
            shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            peers = sorted({r["reason"] for r in records})
            detail = (
                f"rank(s) {shown} left no exit record: killed (SIGKILL/OOM killer) or node lost"
            )
            if peers:
                detail += f"; the others: {', '.join(peers)}"
            return {"reason": cause.name, "code": None, "rank": missing[0], "step": None,
                    "detail": detail}  # fmt: skip
        # among ranks with the same reason, the one that entered the fewest collectives is the
        # one the others waited for (a hang's stuck rank); then the lowest rank
        rec = min(
            (r for r in records if r["reason"] == cause.name),
            key=lambda r: (
                r["collectives"] if isinstance(r.get("collectives"), int) else float("inf"),
                int(r.get("rank", 0)),
            ),
        )
        others = sorted({r["reason"] for r in records if r is not rec})
        detail = str(rec.get("detail", ""))
        if others:
            detail += f" (other ranks: {', '.join(others)})"
        return {"reason": cause.name, "code": rec.get("code"), "rank": rec.get("rank"),
                "step": rec.get("step"), "detail": detail}  # fmt: skip

    def previous_exit(self) -> dict[str, Any] | None:
        return self.attempts[-2].exit if len(self.attempts) > 1 else None

    def attempts_without_progress(self, resumed_step: int | None) -> int:
        """Failed attempts in a row, right before this one, that started from this step
        (`Attempt.start`: the step the runtime's restore resumed from, or for your own code
        the newest step_<N> checkpoint its wrapper saw when it began) or died before that was
        known (an OOM kill while loading: no progress either). With None (before this attempt
        has resumed), only those that never resumed count. An attempt that started from
        another step made progress (or went back: a checkpoint deleted), and the count ends
        there. torchrun's restarts inside a pod are attempts too (each worker process begins
        one): a rank that keeps failing from one checkpoint is the same failure whoever
        restarts it.

        An attempt that ended with a permanent reason (a bug, bad flags, no_progress: codes
        1-127) ended the job under ExitCode: the one after it is a new start (the job
        resubmitted, run-local run again), not a re-creation, so the count begins again."""
        n = 0
        for a in reversed(self.attempts[:-1]):
            if a.start not in (None, resumed_step) or a.finished:
                break
            reason = exits.from_record(a.exit or {})
            if exits.is_stop(reason):
                break  # a preemption or your Ctrl-C is not a failure of the job
            if reason is not None and not reason.retryable:
                break  # it stopped the job
            n += 1
        return n

    def count_words(self, reason: exits.Reason) -> str | None:
        """Where this attempt ends with `reason`: the run ledger's own count, in words, beside
        the controller's ("not counted against backoffLimit": core.failures.Outcome.words).
        A retryable failure is failed attempt n of NO_PROGRESS_LIMIT in a row from one
        checkpoint (`attempts_without_progress`, as the next attempt counts it), unless it
        saved a newer checkpoint than it began from (`saved_since_start`): the next attempt
        begins from that one, and its count starts again, which the words say instead of
        "failed attempt n". None where this ledger counts nothing (not rank 0's, no shared
        storage, a stop, a permanent end)."""
        if self.rank != 0 or not self.persistent or not self.attempts:
            return None
        if reason is exits.SUCCESS or exits.is_stop(reason) or not reason.retryable:
            return None
        further = self.saved_since_start()
        if further is not None:
            return (
                f"got further: it began from step {self.current.start} and saved "
                f"{further.name}, so the run ledger's count of failed attempts in a row "
                "starts again"
            )
        n = self.attempts_without_progress(self.current.start) + 1
        stops = " (the next attempt stops: no_progress)" if n >= NO_PROGRESS_LIMIT else ""
        return f"failed attempt {n} of {NO_PROGRESS_LIMIT} in a row in the run ledger{stops}"

    def saved_since_start(self) -> layout.SavedCheckpoint | None:
        """The newest complete checkpoint in the checkpoint directory (layout.newest_saved,
        the one model of any code's checkpoint names) where it is newer than the step this
        attempt started from: the step the next attempt starts from, so that
        `attempts_without_progress` ends its count at this attempt. None where this attempt
        saved nothing newer, or its start is not known (it died before either was noted:
        the next attempt counts it as no progress)."""
        start = self.current.start
        if self.root is None or start is None:
            return None
        newest = layout.newest_saved(self.root.parent)
        return newest if newest is not None and newest.step > start else None

    @property
    def current(self) -> Attempt:
        if not self.attempts:
            self.attempts.append(Attempt(self.attempt_no, self.process_started_at))
        return self.attempts[-1]

    @property
    def restarts(self) -> int:
        """Restarts of this run so far: torchrun restarts and pod re-creations alike (an
        attempt that continued a finished run is none)."""
        if self.persistent and self.attempts:
            return sum(1 for a in self.attempts[1:] if a.continued_from is None)
        return self.attempt_no

    def save(self) -> None:
        if self.root is None or self.rank != 0:
            return
        recent = sorted(self.productive_by_step)[-KEEP_PRODUCTIVE:]
        data = {
            "version": LEDGER_VERSION,
            "started_at": self.started_at,
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
            "productive_by_step": {str(k): self.productive_by_step[k] for k in recent},
        }
        try:
            _write_json(self._run_path(), data)
        except OSError as e:
            self._warn("write the run ledger", e)

    # -- exits (any rank) -----------------------------------------------------------------

    def master_finished(self) -> bool:
        """Whether the Master's pod (PET_NPROC_PER_NODE ranks from 0, one where the pod is not
        told) has ended this run with exit 0 (`master_finished`), as this rank fails: its
        job has succeeded then (a PyTorchJob's rule), whatever this rank's exit."""
        ranks = master_ranks() or 1
        return self.root is not None and master_finished(
            self.root.parent, ranks, ended_after=self.process_started_at
        )

    def record_exit(
        self,
        reason: exits.Reason,
        *,
        step: int | None,
        detail: str,
        attempt: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """This rank's exit record (a failure); rank 0 also closes its attempt in run.json."""
        rec = {
            **(extra or {}),
            "reason": reason.name,
            "code": reason.code,
            "rank": self.rank,
            "step": step,
            "detail": detail,
            "time": self.clock(),
        }
        if reason is not exits.SUCCESS:
            n = self.attempt_no if attempt is None else attempt
            local = os.environ.get(LOCAL_EXITS_ENV)
            paths = [self._exit_path(n, self.rank)] if self.root is not None else []
            if local:
                paths.append(Path(local) / f"attempt_{n:04d}" / f"rank_{self.rank:05d}.json")
            for path in paths:
                try:
                    _write_json(path, rec)
                except OSError as e:
                    self._warn("write this rank's exit record", e)
        if self.rank == 0 and self.attempts:
            cur = self.current
            cur.updated_at = self.clock()
            if reason is exits.SUCCESS:
                cur.finished = True
            self.save()


def job_ended(
    checkpoint_dir: str | Path | None,
    *,
    since: float,
    finished: bool,
    cause: exits.Reason | None = None,
    detail: str = "",
) -> bool:
    """The job's end of its attempt begun at or after `since`, as its controller decides it
    (run-local plays the controller): rank 0's exit 0 marks an attempt finished, but the job
    is finished only by its backend's rule (a PyTorchJob's Master, every pod of an indexed Job
    or TrainJob), so run-local sets `finished` here, and `cause` where it ends the job for a
    reason of its own (a write the pods' read-only mount refuses). Not finished without a
    `cause`: the root cause of the ranks that failed (`collect_exits`; with none, the next
    attempt names it). One record, read by the next attempt's count and by `report`.
    Returns whether it wrote (False: no ledger, or no attempt begun since)."""
    if not checkpoint_dir:
        return False
    ledger = RunLedger(checkpoint_dir, rank=0, world_size=0, log=lambda _m: None)
    data = _read_json(ledger._run_path())
    attempts = data.get("attempts") if isinstance(data, dict) else None
    if not attempts or not isinstance(attempts[-1], dict):
        return False
    last = attempts[-1]
    if float(last.get("started_at") or 0) < since:
        return False
    if cause is None and not finished and not last.get("finished"):
        return False  # nothing to correct: the next attempt names the cause (begin_attempt)
    last["finished"] = finished
    folder = ledger._exit_path(int(last.get("attempt") or 0), 0).parent
    if cause is not None:
        last["exit"] = {"reason": cause.name, "code": cause.code, "rank": None, "step": None,
                        "detail": detail}  # fmt: skip
    elif not finished and last.get("exit") is None and any(folder.glob("rank_*.json")):
        last["exit"] = ledger.collect_exits(int(last.get("attempt") or 0))  # rank 0 not lost
    try:
        _write_json(ledger._run_path(), data)
    except OSError:
        return False
    return True
