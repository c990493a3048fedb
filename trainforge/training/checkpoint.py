"""Sharded, atomic, resumable checkpoints with torch.distributed.checkpoint (DCP).

Layout of ``--checkpoint-dir``::

    step_000100/                 one directory per checkpoint, named by the step it resumes at
        __0_0.distcp ...         DCP shards (model + optimizer), one file per rank
        trainforge_rank00000.pt  per-rank extras: step, LR scheduler, data position, RNG states
        .metadata                DCP metadata: written LAST (tmp file + rename) by rank 0

A checkpoint counts only once ``.metadata`` exists and parses. Every rank writes its extras file
*before* it enters the DCP save, and DCP's coordinator writes ``.metadata`` only after gathering
every rank's write results, so a readable ``.metadata`` implies all shards and all extras are on
disk. Anything else in the directory (a save killed half way, a stray file, a corrupt metadata
file) is skipped with a log line, never loaded.

Why per-rank extras files instead of DCP entries: RNG state is rank-local and a restart may
change the world size; a plain file per rank lets rank ``r`` restore its own stream when it
exists and fall back to its seed otherwise, without DCP resharding rules getting in the way.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

# DCP (and the DTensor machinery it pulls in) is imported at the first save or load, not here:
# it costs seconds, and a run's first step should not wait for it. (With async saves written by
# DCP's checkpoint process, it is imported at set-up, where that process is started:
# `_WriterStart.begin`.)
from trainforge.training import data_order, exits
from trainforge.training.config import CheckpointConfig, periodic_saves_possible
from trainforge.training.distributed import group_timeout
from trainforge.training.faults import FAULT_ENV
from trainforge.training.hostmem import process_memory, storage_tensor

# The layout names and the error type live in a torch-free module (the S3 mirror and the
# plan's IAM rehearsal use them); re-exported here, where the rest of the runtime finds them.
from trainforge.training.layout import (
    EXTRAS_FMT,
    CheckpointError,
    CheckpointSaveError,
    ctrl_c_detail,
    ctrl_c_detail_before_steps,
    inspect_checkpoint,
    latest_complete,
    scan_checkpoints,
    step_dir_name,
)

EXTRAS_VERSION = 1

# Test-only fault injection (see docs/checkpointing.md, "Rehearsing failures"): when set to a
# step number, the coordinator SIGKILLs itself after every shard of that step's checkpoint is
# written but before `.metadata` is -- the worst moment for a crash. First attempt only
# (TORCHELASTIC_RESTART_COUNT unset or 0).
CRASH_DURING_SAVE_ENV = "TRAINFORGE_TEST_CRASH_DURING_SAVE"

# Test-only fault injection for end-to-end tests and local rehearsals: "RANK:STEP:SIGNAL"
# (SIGNAL = KILL or TERM). Rank RANK sends itself the signal right after optimizer step STEP,
# on the first attempt only (TORCHELASTIC_RESTART_COUNT unset or 0), so a torchrun restart
# does not fail again. It fires in `CheckpointManager.should_save`, so user code that uses the
# manager rehearses exactly as the runtime does. Never set it in a real job. Faults inside a
# step (HANG, OOM, COLLECTIVE, ERROR) use the same variable: see faults.py (FAULT_ENV).


def _fault_from_env() -> tuple[int, int, int] | None:
    from trainforge.training import faults  # noqa: PLC0415

    try:
        parsed = faults.parse(os.environ.get(FAULT_ENV, ""))
    except faults.FaultSpecError as e:
        raise CheckpointError(str(e)) from None
    # in-step kinds (HANG, OOM, ...) belong to faults.InStepFault, run by the loop
    if parsed is None or parsed[2] not in faults.SIGNAL_KINDS or not faults.first_attempt():
        return None
    rank, step, kind = parsed
    return rank, step, {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM}[kind]


LogFn = Callable[[str], None]


# ------------------------------------------------------------------------------- rank extras


def capture_rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch_cpu": torch.get_rng_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch_cpu"])
    random.setstate(_as_tuple(state["python"]))
    if "torch_cuda" in state and torch.cuda.is_available():
        cuda_states = state["torch_cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


def _as_tuple(x: Any) -> Any:
    return tuple(_as_tuple(v) for v in x) if isinstance(x, list | tuple) else x


def _fsync_write(path: Path, obj: Any) -> None:
    """torch.save to a tmp file, fsync, rename: an extras file is either whole or absent."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    """Make the directory's entries (a rename into it) durable, not only the files' bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------- manager


@dataclasses.dataclass
class SaveRecord:
    """Timings of one checkpoint, for logs, metrics and the benchmark."""

    step: int
    path: Path
    blocked_s: float  # how long training waited
    # of blocked_s, how long for the previous async save to finish writing: saves closer
    # together than a write takes stall training whatever the staging costs
    waited_s: float = 0.0
    total_s: float | None = None  # until `.metadata` was written (async: set on completion)
    reason: str = "periodic"
    # the first save written by DCP's checkpoint process only: seconds from set-up until that
    # process (started in the background at set-up, `_WriterStart`) was ready, and how long
    # this save waited for it (part of blocked_s; 0 when it was ready in time)
    writer_ready_s: float | None = None
    writer_waited_s: float = 0.0


class CheckpointManager:
    """Save/restore for one training run; every method is collective (call on all ranks)."""

    def __init__(
        self,
        config: CheckpointConfig,
        *,
        log: LogFn = print,
        mirror: Any | None = None,
        global_batch: int | None = None,
        data: dict[str, Any] | None = None,
        last_step: int | None = None,
    ) -> None:
        config.validate()
        self.config = config
        # samples per optimizer step (the bundled runtime's; None for own code): saved in the
        # extras so a resume can say what another world size does to the data order
        self.global_batch = global_batch
        # the runtime's data_order.DATA_FIELDS values (seed, dataset): kept in the extras so a
        # resume with others says the data order changed
        self.data = data
        self.log = log
        self.root = Path(config.directory) if config.directory else None
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        # DCP's collectives run on their own gloo group: gloo works for CPU-staged async saves
        # (DCP docs), and a separate group keeps the checkpoint thread's collectives from
        # interleaving with the training loop's on the default group.
        self.group = (
            dist.new_group(backend="gloo", timeout=group_timeout()) if self.distributed else None
        )
        if self.root is not None:
            self._check_root(self.root)
        self.mirror = mirror
        if mirror is None and config.s3_uri:
            from trainforge.training.s3_mirror import S3Mirror

            self.mirror = S3Mirror(config.s3_uri, log=log)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: concurrent.futures.Future | None = None
        self._stager: Any | None = None
        self._pending_record: SaveRecord | None = None
        # why async saves stopped (the first failure's cause); None while they work
        self.async_failure: str | None = None
        # DCP's checkpoint process after the newest async save it wrote: its pid and memory
        # (`hostmem.process_memory`), for summary.json (the plan's memory model counts it:
        # jobs/estimate/facts.py CHECKPOINT_PROCESS_BYTES)
        self.writer_memory: dict[str, int] | None = None
        self._said_thread = False
        self._shm_short: tuple[int, int] | tuple[()] | None = None  # (need, free) when short
        # first attempt only, so a torchrun restart does not crash at the same save again
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") in ("", "0")
        crash = os.environ.get(CRASH_DURING_SAVE_ENV, "") if first_attempt else ""
        self._crash_step = int(crash) if crash.strip().isdigit() else -1
        self._fault = _fault_from_env()
        from trainforge.training import faults  # noqa: PLC0415

        self._stage_fault = faults.stage_fault_step(self.rank)  # test hook STAGE
        self.records: list[SaveRecord] = []
        self.last_saved_step: int | None = None  # complete (or restored from)
        self.last_started_step: int | None = None  # complete or in flight
        # DCP spawns its checkpoint process at the first async save, whose write then waits
        # for a fresh interpreter to import torch and join its group (about 5.6 s on an H200
        # host in the 2026-11-29 gpu_check logs), and the next save waits for that write.
        # Start it now, in the background (or take the start `start_writer` began earlier in
        # set-up), so that the start overlaps the restore and the first steps.
        global _early_start
        self._writer_start: _WriterStart | None = None
        # Not for a run that can reach no periodic save (`last_step`: the runtime's --steps).
        wanted = config.async_save and periodic_saves_possible(config, last_step)
        if self.root is not None and wanted and self._writer_process():
            self._writer_start, _early_start = _early_start or _WriterStart.begin(), None

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _check_root(root: Path) -> None:
        """A --checkpoint-dir we cannot write fails now, not at the first save an hour in."""
        if root.exists() and not root.is_dir():
            raise CheckpointError(f"--checkpoint-dir {root} exists and is not a directory")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointError(
                f"--checkpoint-dir {root}: cannot create it ({e.strerror})"
            ) from e
        if not os.access(root, os.W_OK | os.X_OK):
            raise CheckpointError(f"--checkpoint-dir {root} is not writable by this user")

    def _barrier(self) -> None:
        if self.distributed:
            dist.barrier(group=self.group)

    def _all_true(self, flag: bool) -> bool:
        return _all_ranks(flag, self.group) if self.distributed else flag

    def _broadcast(self, obj: Any) -> Any:
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    @classmethod
    def from_env(cls, *, log: LogFn = print, **overrides: Any) -> CheckpointManager:
        """A manager configured by the job contract (``TRAINFORGE_CHECKPOINT_DIR``, ``_EVERY``,
        ``_KEEP_LAST``, ``_RESUME``, ``_ASYNC_CHECKPOINT``, ``_CHECKPOINT_S3``,
        ``_GRACE_PERIOD``); keyword arguments override fields of `CheckpointConfig`.

        Without the variables (a plain ``python train.py``) it does nothing: no directory, no
        checkpoints, ``restore`` returns 0. Create it after ``init_process_group``."""
        from trainforge.training.contract import job_env

        env = job_env()
        config = CheckpointConfig(
            directory=env.checkpoint_dir,
            every=env.checkpoint_every,
            keep_last=env.keep_last,
            resume=env.resume,
            async_save=env.async_checkpoint and env.checkpoint_dir is not None,
            s3_uri=env.checkpoint_s3 if env.checkpoint_dir is not None else None,
            grace_period=env.grace_period,
        )
        return cls(dataclasses.replace(config, **overrides), log=log)

    def inject_fault(self, step: int) -> None:
        """The rehearsal hook ``TRAINFORGE_TEST_FAULT=RANK:STEP:KILL|TERM`` (first attempt only):
        rank RANK sends itself the signal after step STEP. Called at every step boundary (by
        ``should_save``), so user code that uses this manager rehearses as the runtime does.
        An async save still in flight commits first, so where the restart resumes does not
        depend on how busy the machine was (a kill mid-write: TRAINFORGE_TEST_CRASH_DURING_SAVE)."""
        if self._fault is not None and self._fault[:2] == (self.rank, step):
            sig = self._fault[2]
            self._fault = None
            self.wait()
            self.log(
                f"test hook {FAULT_ENV}: rank {self.rank} sends itself "
                f"{signal.Signals(sig).name} after step {step}"
            )
            os.kill(os.getpid(), sig)

    def should_save(self, step: int) -> bool:
        """Periodic schedule (``every``): ``step`` counts completed optimizer steps. Call it once
        per step boundary on every rank."""
        self.inject_fault(step)
        return bool(self.root and self.config.every and step > 0 and step % self.config.every == 0)

    # -- restore --------------------------------------------------------------------------

    def resolve_resume(self) -> Path | None:
        """Which checkpoint to resume from, decided on rank 0 and broadcast to all ranks."""
        choice: str | None = None
        error: str | None = None
        if self.rank == 0:
            try:
                found = self._choose_resume()
                choice = str(found) if found else None
            except CheckpointError as e:
                error = str(e)
        choice, error = self._broadcast((choice, error))
        if error:
            raise CheckpointError(error)
        return Path(choice) if choice else None

    def _choose_resume(self) -> Path | None:
        mode = self.config.resume
        if mode == "never":
            if self.root and latest_complete(self.root):
                self.log(
                    f"checkpoint: --resume never: starting fresh although {self.root} holds "
                    "checkpoints; same-numbered ones will be replaced"
                )
            return None
        if mode != "auto":
            path = Path(mode)
            status = inspect_checkpoint(path)
            if not status.complete:
                raise CheckpointError(
                    f"--resume {mode}: not a complete checkpoint ({status.reason}); pass a "
                    "step_NNNNNN directory containing .metadata, or --resume auto|never"
                )
            return path
        if self.root is None:
            return None
        found = latest_complete(self.root, self.log)
        if found is None and self.mirror is not None:
            found = self.mirror.download_latest(self.root)
        return found

    def restore(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any | None = None
    ) -> int:
        """Load the checkpoint ``--resume`` selects; returns the step to continue from (0 = fresh)."""
        from trainforge.training.resume_note import note_resumed  # noqa: PLC0415

        path = self.resolve_resume()
        if path is None:
            if self.root is not None:
                self.log(
                    f"checkpoint: no checkpoint to resume from in {self.root}; starting at step 0"
                )
            note_resumed(0)
            return 0
        t0 = time.perf_counter()
        import torch.distributed.checkpoint as dcp  # noqa: PLC0415 - seconds; see the imports
        from torch.distributed.checkpoint.api import CheckpointException  # noqa: PLC0415
        from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
            get_state_dict,
            set_state_dict,
        )

        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        try:
            dcp.load(state, checkpoint_id=str(path), process_group=self.group)
        except (Exception, CheckpointException) as e:  # noqa: BLE001 - made clear, actionable
            raise CheckpointError(_load_failed(path, e, state["model"])) from e
        set_state_dict(
            model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        extras = self._load_extras(path)
        if scheduler is not None and extras.get("scheduler") is not None:
            scheduler.load_state_dict(extras["scheduler"])
        step = int(extras["step"])
        self.last_saved_step = self.last_started_step = step
        self._barrier()
        note = None
        if self.global_batch is not None:
            note = data_order.resume_note(
                extras.get("world_size"),
                self.world_size,
                extras.get("global_batch"),
                self.global_batch,
                extras.get("data"),
                self.data,
            )
        self.log(
            f"checkpoint: resumed from {path} at step {step} "
            f"(data position {extras.get('data_position', step)}) in {time.perf_counter() - t0:.2f}s"
            + (f"; {note}" if note else "")
        )
        note_resumed(step)  # the run ledger knows the step, for `trainforge report`
        return step

    def _load_extras(self, path: Path) -> dict[str, Any]:
        own = path / EXTRAS_FMT.format(rank=self.rank)
        source = own if own.is_file() else path / EXTRAS_FMT.format(rank=0)
        try:
            extras = torch.load(source, weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(
                f"checkpoint {path}: cannot read {source.name} ({type(e).__name__}: "
                f"{_first_line(e)}); delete {path} to fall back to the previous checkpoint"
            ) from e
        if not isinstance(extras, dict) or extras.get("version") != EXTRAS_VERSION:
            raise CheckpointError(
                f"checkpoint {path}: {source.name} is not a trainforge extras file"
            )
        if source == own:
            restore_rng_state(extras["rng"])
        else:
            self.log(
                f"checkpoint: rank {self.rank} has no RNG state in {path} (saved with world size "
                f"{extras.get('world_size')}, now {self.world_size}); keeping seeded RNG"
            )
        return extras

    # -- save -----------------------------------------------------------------------------

    def save(
        self,
        step: int,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any | None = None,
        *,
        reason: str = "periodic",
        force_sync: bool = False,
    ) -> SaveRecord | None:
        """Checkpoint the state after ``step`` optimizer steps (resume continues at ``step``).

        A failed async save never ends the run: a failure while starting it (staging, the
        launch) saves this step synchronously instead; a failure while writing in the
        background (seen at the next save or at the end) skips that checkpoint. Either is
        said once, loudly, with its cause, and every later save is synchronous. A failed
        synchronous save is retried (``SYNC_SAVE_ATTEMPTS``), then raised as
        `CheckpointSaveError`: exit ``checkpoint_failed`` (204), restartable (exits.py)."""
        if self.root is None:
            return None
        t0 = time.perf_counter()
        self.wait()  # one save in flight at a time (a failed one is reported, not raised)
        waited = time.perf_counter() - t0
        path = self.root / step_dir_name(step)
        self._prepare(path, step, scheduler)
        from torch.distributed.checkpoint.state_dict import get_state_dict  # noqa: PLC0415

        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": _unwrapped(model_sd), "optim": optim_sd}
        record = SaveRecord(step=step, path=path, blocked_s=0.0, reason=reason, waited_s=waited)
        self.last_started_step = step
        use_async = self.config.async_save and not force_sync and self.async_failure is None
        if use_async and self._staging_fits(state):
            try:
                self._save_async(state, record, t0)
            except _save_errors() as e:  # a checkpoint never ends the run
                self._async_failed(record, e, started=False)
                self._prepare(path, step, scheduler)  # the failed try may have left files
            else:
                self.records.append(record)
                return record
        self._save_sync(state, record, scheduler, t0)
        self.records.append(record)
        return record

    def _prepare(self, path: Path, step: int, scheduler: Any | None) -> None:
        """An empty step directory holding this rank's extras file (collective)."""
        if self.rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            if path.exists():
                self.log(
                    f"checkpoint: replacing existing {path} ({inspect_checkpoint(path).reason or 'complete'})"
                )
                shutil.rmtree(path)
            path.mkdir()
        self._barrier()
        extras = {
            "version": EXTRAS_VERSION,
            "step": step,
            "data_position": step,
            "world_size": self.world_size,
            "global_batch": self.global_batch,
            "data": self.data,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": capture_rng_state(),
        }
        _fsync_write(path / EXTRAS_FMT.format(rank=self.rank), extras)

    def _save_async(self, state: dict[str, Any], record: SaveRecord, t0: float) -> None:
        import torch.distributed.checkpoint as dcp  # noqa: PLC0415 - seconds; see the imports
        from torch.distributed.checkpoint.state_dict_saver import (  # noqa: PLC0415
            AsyncCheckpointerType,
        )

        from trainforge.training.dcp_writer import TrainforgeWriter  # noqa: PLC0415

        in_process = self._writer_process()
        if in_process and self._writer_start is not None:
            self._await_writer_start(record)
        writer = TrainforgeWriter(str(record.path), crash_step=self._crash_step, step=record.step)
        # Training waits only for the copy into the staging buffers (allocated at the first
        # save, reused after); DCP's checkpoint process writes them while training goes on.
        # DCP's thread where its process cannot work (see _writer_process). The stager is
        # wrapped so that every rank agrees the copy worked before any write starts: a rank
        # whose copy failed must not leave its peers waiting in the write's collectives.
        with _spawning_without_sigint(in_process and _checkpoint_process_pid() is None):
            fut = dcp.async_save(
                state,
                storage_writer=writer,
                process_group=self.group,
                async_checkpointer_type=AsyncCheckpointerType.PROCESS
                if in_process
                else AsyncCheckpointerType.THREAD,
                async_stager=_AgreedStager(
                    self._get_stager(), self._all_true, fail=self._stage_fault == record.step
                ),
            )
        upload = getattr(fut, "upload_completion", fut)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="trainforge-ckpt"
            )
        self._pending = self._executor.submit(self._complete, record, upload, t0)
        self._pending_record = record
        record.blocked_s = time.perf_counter() - t0

    def _await_writer_start(self, record: SaveRecord) -> None:
        """Before the first write in DCP's checkpoint process: wait for the start begun at
        set-up (usually long done) and agree with every rank that it worked; if it did not,
        raise before this save's collectives (`save` then saves synchronously, as for any
        async save that fails before writing)."""
        start, self._writer_start = self._writer_start, None
        assert start is not None
        record.writer_waited_s = start.wait() or 0.0
        if not self._all_true(start.error is None):
            if start.error is None or isinstance(start.error, _PeerStagingFailed):
                raise _PeerStagingFailed("another rank's checkpoint process did not start")
            raise WriterStartError(
                f"DCP's checkpoint process did not start ({_describe(start.error)})"
            ) from start.error
        record.writer_ready_s = start.ready_s

    def _save_sync(
        self, state: dict[str, Any], record: SaveRecord, scheduler: Any | None, t0: float
    ) -> None:
        """DCP's blocking save, retried: DCP raises a save's failure on every rank (it gathers
        the ranks' results), so the ranks retry together."""
        import torch.distributed.checkpoint as dcp  # noqa: PLC0415 - seconds; see the imports

        from trainforge.training.dcp_writer import TrainforgeWriter  # noqa: PLC0415

        for attempt in range(1, SYNC_SAVE_ATTEMPTS + 1):
            try:
                if attempt > 1:
                    self._prepare(record.path, record.step, scheduler)
                writer = TrainforgeWriter(
                    str(record.path), crash_step=self._crash_step, step=record.step
                )
                dcp.save(state, storage_writer=writer, process_group=self.group)
                record.blocked_s = time.perf_counter() - t0
                self._complete(record, None, t0)
                record.blocked_s = time.perf_counter() - t0
                return
            except _save_errors() as e:  # retried, then the platform's failure
                cause = _describe(e)
                if attempt == SYNC_SAVE_ATTEMPTS:
                    raise CheckpointSaveError(
                        f"checkpoint of step {record.step} to {record.path} failed "
                        f"{SYNC_SAVE_ATTEMPTS} times; the last: {cause}"
                    ) from e
                delay = RETRY_DELAY_S * attempt
                self.log(
                    f"checkpoint: saving step {record.step} failed (attempt {attempt} of "
                    f"{SYNC_SAVE_ATTEMPTS}: {cause}); retrying in {delay:g}s"
                )
                time.sleep(delay)

    def _async_failed(self, record: SaveRecord, e: BaseException, *, started: bool) -> None:
        """Say once, loudly, that async saves failed and why; every later save is synchronous."""
        peer = isinstance(e, _PeerStagingFailed)
        self.async_failure = _describe(e)
        self.last_started_step = self.last_saved_step if started else record.step
        if peer and self.rank != 0:
            return  # the rank that failed says why
        what = (
            f"step {record.step} is NOT saved (the previous checkpoint, step "
            f"{self.last_saved_step}, stays the newest)"
            if started
            else f"saving step {record.step} synchronously instead"
        )
        self.log(
            f"checkpoint: WARNING: the async save of step {record.step} failed "
            f"{'while writing' if started else 'before writing'} ({self.async_failure}); "
            f"{what}; every later save of this run is synchronous; training goes on"
        )

    def _writer_process(self) -> bool:
        """May the write run in DCP's checkpoint process? It needs a process group to join, and
        it is started with multiprocessing's ``spawn``, which re-runs the main script in the
        new process unless the script is a package's ``__main__`` (``python -m
        trainforge.training``) or there is none (``python -c``). A user's training script run
        by path is read (`spawn_safe_script`): one whose work is under ``if __name__ ==
        "__main__":`` uses the process; an unguarded one would train again in there, so its
        write runs in a DCP thread (same staging buffers), said once in the log, unless the
        script sets ``trainforge.training.checkpoint.WRITER_PROCESS``."""
        if not self.distributed:
            return False
        safe = _writer_process_allowed()
        if not safe and WRITER_PROCESS is None and not self._said_thread:
            self._said_thread = True
            main = sys.modules.get("__main__")
            name = getattr(getattr(main, "__spec__", None), "name", None)
            self.log(
                "checkpoint: async writes run in a thread, not DCP's checkpoint process: it "
                f"would re-run {getattr(main, '__file__', name)} (multiprocessing spawn), "
                'which runs code outside `if __name__ == "__main__":`. Move that code under '
                "the guard to use the process, or set "
                "trainforge.training.checkpoint.WRITER_PROCESS = True if it is safe to re-run"
            )
        return safe

    def _staging_fits(self, state: dict[str, Any]) -> bool:
        """Before the staging buffers exist: do this node's processes' buffers fit in /dev/shm?
        They live there (shared with DCP's checkpoint process); a tmpfs that runs out kills the
        process with SIGBUS mid-copy. If they do not fit, say so on every save and save
        synchronously: slower, never lost."""
        if self._stager is not None:
            return True  # allocated: later saves reuse them
        if self._shm_short is None:
            need = _state_bytes(state) * int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
            try:
                st = os.statvfs(SHM_DIR)
            except OSError:
                free = None  # no /dev/shm here (not Linux): torch picks its own mechanism
            else:
                free = st.f_bavail * st.f_frsize
            short = free is not None and need > free
            # every rank must take the same path (their saves' collectives meet): all or none
            # async, decided before any rank allocates its buffers
            fits_everywhere = self._all_true(not short)
            self._shm_short = () if fits_everywhere else (need, free if short else -1)
        if not self._shm_short:
            return True
        need, free = self._shm_short
        where = f"{free / 2**30:.2f} GiB are free" if free >= 0 else "another node has less"
        self.log(
            f"checkpoint: --async-checkpoint needs {need / 2**30:.2f} GiB of {SHM_DIR} for this "
            f"node's staging buffers but {where}: saving synchronously. "
            "Raise the job's shmSize (or memory), or turn async checkpoints off"
        )
        return False

    def _get_stager(self) -> Any:
        """The async saves' staging buffers, created once and reused by every save (see
        `_RunStager`): in shared memory, so the checkpoint process reads them without another
        copy; pinned when the state is on a GPU, so the device-to-host copy runs at full speed
        (non-blocking, then synchronized)."""
        if self._stager is None:
            self._stager = _RunStager(cuda=torch.cuda.is_available())
        return self._stager

    def _complete(
        self, record: SaveRecord, fut: concurrent.futures.Future | None, t0: float
    ) -> None:
        """After DCP finished: log, mirror to S3, prune old checkpoints (rank 0 after barrier)."""
        if fut is not None:
            fut.result()
            pid = _checkpoint_process_pid()
            if pid is not None and (mem := process_memory(pid)) is not None:
                self.writer_memory = {"pid": pid, **mem}
        if self.rank == 0:
            # DCP fsyncs `.metadata` before renaming it into place but not the directory: make
            # the rename durable before the checkpoint is reported, published or relied on.
            _fsync_dir(record.path)
            _fsync_dir(record.path.parent)
        record.total_s = time.perf_counter() - t0
        self.last_saved_step = record.step
        uploaded = True
        if self.mirror is not None:
            uploaded = self.mirror.upload_own_files(record.path, self.rank)
        uploaded = self._all_true(uploaded)  # also the barrier before pruning
        if self.rank == 0:
            if not inspect_checkpoint(record.path).complete:
                raise CheckpointError(f"checkpoint {record.path} did not complete")
            waits = []
            if record.waited_s >= 0.1:  # below that: noise, not the previous write
                advice = (
                    ": checkpoint less often to stall less"
                    if record.waited_s >= record.blocked_s / 2
                    else ""
                )
                waits.append(
                    f"{record.waited_s:.2f}s of it waiting for the previous save to finish "
                    f"writing{advice}"
                )
            if record.writer_waited_s >= 0.1:
                waits.append(
                    f"{record.writer_waited_s:.2f}s of it waiting for DCP's checkpoint process "
                    "to start"
                )
            waited = f" ({'; '.join(waits)})" if waits else ""
            started = (
                f"; DCP's checkpoint process was started at set-up and ready "
                f"{record.writer_ready_s:.2f}s later"
                if record.writer_ready_s is not None
                else ""
            )
            self.log(
                f"checkpoint: saved {record.path} ({record.reason}) in {record.total_s:.2f}s, "
                f"training blocked {record.blocked_s:.2f}s{waited}{started}"
            )
            if self.mirror is not None:
                if uploaded:
                    self.mirror.publish(record.path, keep_last=self.config.keep_last)
                else:
                    self.log(
                        f"s3 mirror: {record.path.name} not published (an upload failed); the "
                        "latest marker stays on the previous checkpoint"
                    )
            self._prune()
        exits.context.checkpoint = record.step  # what a preemption's record says it saved

    def _prune(self) -> None:
        """Keep the newest ``keep_last`` complete checkpoints; drop partial ones older than them."""
        if self.root is None or self.config.keep_last == 0:
            return
        statuses = scan_checkpoints(self.root)
        complete = [s for s in statuses if s.complete]
        if not complete:
            return
        keep = {s.path for s in complete[-self.config.keep_last :]}
        oldest_kept = min(s.step for s in complete if s.path in keep)
        for s in statuses:
            if s.path in keep or s.step > oldest_kept:
                continue  # newer partial dirs may be a save in flight: leave them
            shutil.rmtree(s.path, ignore_errors=True)
            self.log(f"checkpoint: removed {s.path} (keep-last {self.config.keep_last})")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the in-flight async checkpoint (if any) is complete, at most `timeout`
        seconds (then it stays in flight and this returns False). A failure is said
        (`_async_failed`) and not raised: that checkpoint is skipped, training goes on."""
        pending = self._pending
        if pending is None:
            return True
        try:
            pending.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            return False
        except _save_errors() as e:  # a checkpoint never ends the run
            assert self._pending_record is not None
            self._async_failed(self._pending_record, e, started=True)
        self._pending = None
        return True

    def close(self) -> None:
        """Finish pending work; call before the process exits."""
        try:
            self.wait()
        finally:
            if self._writer_start is not None:  # never used: no collective left in flight
                if self._writer_start.wait(timeout=WRITER_START_CLOSE_S) is None:
                    self.log(
                        "checkpoint: DCP's checkpoint process (started at set-up, never used) "
                        f"was still starting after {WRITER_START_CLOSE_S:g}s more at the end "
                        "of the run; not waiting for it"
                    )
                self._writer_start = None
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            if self._stager is not None:
                self._stager.close()
                self._stager = None


# Where async writes run: None = decide (`CheckpointManager._writer_process`); True = DCP's
# checkpoint process (the main script must be safe to re-import); False = a DCP thread.
WRITER_PROCESS: bool | None = None


def _writer_process_allowed() -> bool:
    """`WRITER_PROCESS`, or when unset: is the main module safe for multiprocessing's spawn
    (a package's ``__main__``, or none: ``python -c``)? See `CheckpointManager._writer_process`."""
    if WRITER_PROCESS is not None:
        return WRITER_PROCESS
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    safe = name == "__main__" or (name or "").endswith(".__main__")
    if safe or name is not None:
        return safe
    path = getattr(main, "__file__", None)
    return path is None or spawn_safe_script(path)


# Top-level statements that run nothing of the user's when spawn re-imports the script as
# ``__mp_main__``: imports, definitions, a docstring. An assignment runs its value, so it
# counts only when the value calls nothing (a constant, a name, a tuple of them).
_INERT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def spawn_safe_script(path: str) -> bool:
    """Does re-running the script at `path` as ``__mp_main__`` (multiprocessing's spawn) run
    none of its training? True when its work is under ``if __name__ == "__main__":`` and
    every other top-level statement is inert (`_INERT`, a docstring, an assignment that calls
    nothing). Read from its source, not guessed from how it was started: the bundled
    `resumable` example is such a script and must not be told to follow advice it already
    follows. An unreadable or unparsable script is not safe."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return False
    guarded = False
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
            guarded = True
        elif not _inert(stmt):
            return False
    return guarded


def _inert(stmt: ast.stmt) -> bool:
    """Runs none of the script's work when executed at import (see `_INERT`)."""
    if isinstance(stmt, _INERT):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    return isinstance(stmt, ast.Assign | ast.AnnAssign) and not any(
        isinstance(n, ast.Call | ast.Await | ast.Yield) for n in ast.walk(stmt)
    )


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
    return sides == {"__name__", "'__main__'"}


def _checkpoint_process_pid() -> int | None:
    """The pid of this process's DCP checkpoint process, None when there is none (saves in a
    thread, or none started). DCP keeps it in a module global, ``_CHECKPOINT_PROCESS``, whose
    ``_save_process`` is the ``multiprocessing`` process (torch/distributed/checkpoint/
    _async_process_executor.py: the same in the torch 2.13.0 wheel and in 2.11.0, whose run on
    an H200 logged that module's lines; private, so read defensively)."""
    ape = sys.modules.get("torch.distributed.checkpoint._async_process_executor")
    proc = getattr(getattr(ape, "_CHECKPOINT_PROCESS", None), "_save_process", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None


@contextlib.contextmanager
def _spawning_without_sigint(spawns: bool = True) -> Any:
    """Around a ``dcp.async_save`` that may spawn DCP's checkpoint process: SIGINT blocked in
    the calling thread, so that the process starts with it blocked.

    Why here: a Ctrl-C reaches the whole process group, and a checkpoint process still
    starting (a fresh interpreter importing torch, seconds) died of it with a
    KeyboardInterrupt traceback; it ignores SIGINT only from its first save on (dcp_writer.py).
    DCP spawns the process (``multiprocessing`` spawn: fork + exec) from the worker thread of a
    ``ThreadPoolExecutor`` that the calling thread creates inside ``async_save``
    (``_ProcessBasedAsyncCheckpointExecutor`` in torch/distributed/checkpoint/
    _async_process_executor.py, torch 2.13.0 wheel, read 2026-12-01). A thread inherits its
    creator's signal mask and a process keeps its forking thread's mask across exec (POSIX
    pthread_create, fork, execve); Python's start-up leaves the mask alone. So the process
    starts with SIGINT pending-but-blocked, and its first save's SIG_IGN discards it. The
    resource tracker is started first: a spawn starts it if it is not running, and that
    *unblocks* SIGINT in the spawning thread (``ResourceTracker.ensure_running`` blocks SIGINT
    and SIGTERM around the tracker's own spawn and then unblocks them instead of restoring the
    mask: Lib/multiprocessing/resource_tracker.py, CPython 3.11.7, read 2026-12-01), which let
    the Ctrl-C through again.

    The trainer's own Ctrl-C is unchanged: the mask is per thread and restored on leaving, and
    the kernel hands a process-wide SIGINT to a thread that does not block it (Python runs the
    handler in the main thread either way). ``spawns`` False (the process already runs) is a
    no-op, so a later save's staging copy in the main thread never holds a Ctrl-C back."""
    if spawns:  # the process it starts prints no INFO lines (dcp_writer.py)
        from trainforge.training.dcp_writer import quiet_checkpoint_process  # noqa: PLC0415

        quiet_checkpoint_process()
    if not spawns or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker  # noqa: PLC0415 - only where a spawn comes

    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _all_ranks(flag: bool, group: Any) -> bool:
    """Is ``flag`` true on every rank of ``group``? (Collective.)"""
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    return bool(t.item())


# The start `start_writer` began, until a `CheckpointManager` takes it.
_early_start: _WriterStart | None = None


@contextlib.contextmanager
def writer_start_of_this_run() -> Iterator[None]:
    """A start `start_writer` begins in the block is the block's run's: one no manager took
    (the run failed between the start and its CheckpointManager: the model's build, the
    restore's checks) is dropped on leaving, and none left from before is taken in it. Why:
    `loop.train` in-process (a notebook, a test) after a run that failed there took that run's
    start, whose group died with it; its first async save said "DCP's checkpoint process did
    not start (... Default process group has not been initialized ...)" and every save of the
    run was synchronous."""
    global _early_start
    _early_start = None
    try:
        yield
    finally:
        _early_start = None


def start_writer(config: CheckpointConfig, last_step: int | None = None) -> bool:
    """Begin starting DCP's checkpoint process now, for the `CheckpointManager` this process
    creates next with ``config``: the runtime calls it as soon as its process group exists, so
    that the start (a fresh interpreter importing torch, seconds) also overlaps the model's
    build. Collective (every rank, same place). Nothing unless async saves are configured, can
    come in a run that ends at ``last_step`` (`periodic_saves_possible`) and will be written in
    DCP's process (`CheckpointManager._writer_process`). True if it began."""
    global _early_start
    distributed = dist.is_available() and dist.is_initialized()
    wanted = config.directory and config.async_save and distributed
    wanted = wanted and periodic_saves_possible(config, last_step)
    if _early_start is None and wanted and _writer_process_allowed():
        _early_start = _WriterStart.begin()
        return True
    return False


# A synchronous save is tried this many times, RETRY_DELAY_S x attempt apart, before the run
# exits checkpoint_failed (restartable): a storage hiccup should not cost a restart.
SYNC_SAVE_ATTEMPTS = 3
RETRY_DELAY_S = 5.0


def _save_errors() -> tuple[type[BaseException], ...]:
    """What a failed save raises: any Exception, and DCP's `CheckpointException`, which
    derives from BaseException (torch.distributed.checkpoint.api); not KeyboardInterrupt or
    SystemExit (an `except` clause evaluates this when an exception arrives)."""
    from torch.distributed.checkpoint.api import CheckpointException  # noqa: PLC0415

    return (Exception, CheckpointException)


class _RunStager:
    """DCP's `AsyncStager` protocol over DCP's own `StateDictStager`, kept for the whole run: one
    CPU buffer per tensor storage, allocated at the first save and copied into at every later one.

    Why not DCP's `DefaultStager`: in torch 2.11.0 its `_stage` closes its `StateDictStager`
    after every copy ("release reference cycle to prevent memory leaks in async_save",
    torch/distributed/checkpoint/staging.py in the 2.11.0 wheel, read 2026-11-27), which empties
    the stager's buffer cache and its copy dispatch table. A reused `DefaultStager` then fails
    its second copy with `KeyError: <class 'type'>` -- seen on an H200 with torch 2.11 on
    2026-11-27: every async save after the first fell back to a synchronous one -- and a fresh
    one per save pins new buffers every time. torch 2.13's `_stage` no longer closes it. The
    `StateDictStager` API used here (`stage(state_dict, non_blocking)`, `close()`) is the same in
    2.9, 2.11 and 2.13; this class closes it once, when the run's checkpoints are done."""

    should_synchronize_after_execute = False  # the copy is the blocking part, by design

    def __init__(self, *, cuda: bool) -> None:
        from torch.distributed.checkpoint._state_dict_stager import (  # noqa: PLC0415
            StateDictStager,
        )

        self.cuda = cuda
        self._state_dict_stager = StateDictStager(pin_memory=cuda, share_memory=True)

    def stage(self, state_dict: Any) -> Any:
        staged = self._state_dict_stager.stage(state_dict, non_blocking=self.cuda)
        if self.cuda:
            torch.cuda.synchronize()  # the non-blocking copies have landed before DCP writes
        return staged

    def synchronize_staging(self) -> None:
        pass

    def close(self) -> None:
        self._state_dict_stager.close()


class _PeerStagingFailed(RuntimeError):
    """This rank's part of an async save worked (its staging, or the start of its checkpoint
    process), another rank's did not: nobody starts the write."""


class WriterStartError(RuntimeError):
    """DCP's checkpoint process, started at set-up, did not start: async saves are synchronous."""


# How long `close` waits for a checkpoint process start that no save used (a run shorter than
# its first save): its collective must not be in flight when the process groups go away.
WRITER_START_CLOSE_S = 60.0


class _WriterStart:
    """DCP's checkpoint process, started in a background thread at set-up instead of by the
    first async save.

    With DCP's public API only: an ``async_save`` (``AsyncCheckpointerType.PROCESS``) of a
    one-element tensor into a temporary directory. DCP spawns its checkpoint process at the
    first such save of a Python process and keeps it in a module global for every later one
    (``_ProcessBasedAsyncCheckpointExecutor.execute_save`` and ``_CHECKPOINT_PROCESS`` in
    torch/distributed/checkpoint/_async_process_executor.py: the same code in the torch 2.13.0
    wheel and in pytorch/pytorch at 05382727, whose log lines are the ones the H200 run with
    torch 2.11.0 printed; read 2026-11-29). The run's first real save then finds it running
    instead of paying a fresh interpreter's ``import torch`` inside its write. The tiny write
    also starts the writer's parent watch and ``nice`` (dcp_writer.py) before training needs it.

    The start has two collectives: every rank agrees that its own part (the temporary
    directory, the writer) is ready, so that one rank's failure there stops the start on every
    rank instead of leaving them in the next; then rank 0 picks the port of the process's gloo
    group and broadcasts it (DCP). They run on a group of their own, so they never interleave
    with the main thread's collectives."""

    @classmethod
    def begin(cls) -> _WriterStart:
        """Start it (collective: every rank creates the start's group)."""
        # Everything the thread needs is imported here, in the calling thread: DCP pulls in
        # ~700 modules (FSDP, DTensor, sympy, ...) that the model's build imports too, and
        # two threads importing one module graph from different ends can deadlock (CPython
        # then raises its _DeadlockError, a RuntimeError, in one of them). It is the import the
        # first save would otherwise pay (0.6-0.7 s of CPU on the 2-core CI machine).
        import multiprocessing.connection  # noqa: F401, PLC0415 - DCP's pipe to its process

        import torch.distributed.checkpoint.state_dict  # noqa: F401, PLC0415
        import torch.distributed.checkpoint.state_dict_saver  # noqa: F401, PLC0415

        import trainforge.training.dcp_writer  # noqa: F401, PLC0415

        with contextlib.suppress(ImportError):  # what starts a spawned process (POSIX)
            import multiprocessing.popen_spawn_posix  # noqa: F401, PLC0415
        # its own group: the start's collectives run in the background thread, and must
        # not interleave with the main thread's (the manager's group: restore, saves)
        return cls(dist.new_group(backend="gloo", timeout=group_timeout()))

    def __init__(self, group: Any) -> None:
        self.began = time.perf_counter()
        self.ready_s: float | None = None  # from set-up until the process was ready (or failed)
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(group,), name="trainforge-ckpt-start", daemon=True
        )
        self._thread.start()

    def _run(self, group: Any) -> None:
        path = None
        try:
            import torch.distributed.checkpoint as dcp  # noqa: PLC0415 - imported: see begin
            from torch.distributed.checkpoint.state_dict_saver import (  # noqa: PLC0415
                AsyncCheckpointerType,
            )

            from trainforge.training.dcp_writer import TrainforgeWriter  # noqa: PLC0415

            writer = None
            try:  # this rank's own part: a temporary directory (a full /tmp fails it), the writer
                path = tempfile.mkdtemp(prefix="trainforge-dcp-start-")
                writer = TrainforgeWriter(path)
            except Exception as e:  # noqa: BLE001 - said by the first save that needs it
                self.error = e
            # Agreed before DCP's first collective (rank 0 broadcasts its process's port): a
            # rank that failed above would otherwise leave the others waiting in it for the
            # group's timeout, and their first save with them. Then no rank spawns a process.
            if not _all_ranks(writer is not None, group):
                if self.error is None:
                    self.error = _PeerStagingFailed(
                        "another rank's checkpoint process did not start"
                    )
                return
            with _spawning_without_sigint():
                fut = dcp.async_save(
                    {"start": torch.zeros(1)},
                    storage_writer=writer,
                    process_group=group,
                    async_checkpointer_type=AsyncCheckpointerType.PROCESS,
                )
            getattr(fut, "upload_completion", fut).result()
        except BaseException as e:  # noqa: BLE001 - said by the first save that needs it
            self.error = e
        finally:
            self.ready_s = time.perf_counter() - self.began
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)

    def wait(self, timeout: float | None = None) -> float | None:
        """Seconds waited for the start to finish (worked or failed); None on a timeout."""
        t0 = time.perf_counter()
        self._thread.join(timeout)
        return None if self._thread.is_alive() else time.perf_counter() - t0


class _AgreedStager:
    """DCP's `AsyncStager` protocol around the real stager: after the copy, every rank says
    whether its copy worked (one all-reduce on the checkpoint group, free: no write is in
    flight then) and all of them raise if any failed -- before DCP starts the write's
    collectives, so no rank waits in them for a peer that fell back to a synchronous save."""

    def __init__(self, inner: Any, all_true: Callable[[bool], bool], *, fail: bool = False) -> None:
        self.inner = inner
        self.all_true = all_true
        self.fail = fail  # the test hook TRAINFORGE_TEST_FAULT=RANK:STEP:STAGE (faults.py)

    @property
    def should_synchronize_after_execute(self) -> bool:
        return bool(getattr(self.inner, "should_synchronize_after_execute", False))

    def stage(self, state_dict: Any) -> Any:
        try:
            if self.fail:
                raise KeyError(type)  # what DCP's StateDictStager raised on torch 2.11
            staged = self.inner.stage(state_dict)
        except BaseException:
            self.all_true(False)
            raise
        if not self.all_true(True):
            raise _PeerStagingFailed("another rank could not stage its state")
        return staged

    def synchronize_staging(self) -> None:
        self.inner.synchronize_staging()

    def close(self) -> None:  # the manager owns the real stager and closes it
        pass


# Where the async staging buffers live: torch's shared CPU storages are files in this tmpfs.
SHM_DIR = "/dev/shm"


def _unwrapped(model_sd: dict[str, Any]) -> dict[str, Any]:
    """The model state with each wrapper-subclass tensor replaced by the tensor it wraps (no
    copy). Why: FP8 runs' FSDP2 weights are torchao's ``WeightWithDynamicFloat8CastTensor``
    (fp8.py); the async stager's copy of one restored as NaN (seen on CPU, torch 2.13.0 and
    torchao 0.18.0: tests/training/test_fp8.py), while the plain tensor inside saves and
    restores exactly. A checkpoint then holds plain tensors whatever the precision."""
    out: dict[str, Any] = {}
    for k, v in model_sd.items():
        local = getattr(v, "_local_tensor", None)
        if local is not None:  # a DTensor (FSDP2): its local shard may be the wrapper
            if storage_tensor(local) is not local:
                from torch.distributed.tensor import DTensor  # noqa: PLC0415

                v = DTensor.from_local(storage_tensor(local), v.device_mesh, v.placements,
                                       run_check=False, shape=v.shape, stride=v.stride())  # fmt: skip
        elif isinstance(v, torch.Tensor):
            v = storage_tensor(v)
        out[k] = v
    return out


def _state_bytes(obj: Any) -> int:
    """Bytes of this process's tensors in a (nested) state dict, each storage counted once:
    what the stager allocates (a DTensor stages its local shard)."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            local = storage_tensor(getattr(x, "_local_tensor", x))
            storage = local.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list | tuple):
            for v in x:
                walk(v)

    walk(obj)
    return sum(seen.values())


def _load_failed(path: Path, e: BaseException, model_sd: dict[str, Any]) -> str:
    """The restore error: a checkpoint of another model (its saved shapes differ from this
    run's: a flag that shapes the state changed) or one whose shards are unreadable.

    Why they differ: deleting a checkpoint of another model does not help (the ones before it
    were saved with the same flags; the next restore fails the same way) and loses it, so that
    case names the flags (config.checkpointed, the table's) and the ways to start fresh that
    plan --diff gives (config.FRESH_BY_*); a corrupt checkpoint's fix is to fall back to the
    one before it."""
    from trainforge.training.config import (  # noqa: PLC0415
        FRESH_BY_DIR,
        FRESH_BY_RENAME,
        FRESH_BY_RESUME,
        checkpointed,
    )

    differs = saved_shapes_differ(path, model_sd)
    if not differs:
        return (
            f"could not load checkpoint {path}: {_describe(e)}. It has a .metadata file and "
            "this model's shapes, but its shards are unreadable or do not match this "
            f"optimizer. Delete {path} to fall back to the previous checkpoint, or pass "
            "--resume never (job key checkpoint.resume: never)."
        )
    shown = "; ".join(differs[:3]) + (f"; {len(differs) - 3} more" if len(differs) > 3 else "")
    flags = ", ".join(s.flag for s in checkpointed("shape"))
    return (
        f"could not load checkpoint {path}: it holds another model ({shown}): a flag that "
        f"shapes the checkpoint ({flags}) differs from the run that saved it. Do not delete "
        "it: the checkpoints before it were saved with the same flags. To resume, pass the "
        "flags it was saved with; to train with these, start fresh: a new --checkpoint-dir or "
        f"--resume never (in a job: {FRESH_BY_RENAME}, {FRESH_BY_DIR}, or {FRESH_BY_RESUME})."
    )


def saved_shapes_differ(path: Path, model_sd: dict[str, Any]) -> list[str]:
    """The model tensors whose shape in checkpoint `path` (its DCP metadata) is not their
    shape in this run (`model_sd`: get_state_dict's, global shapes under FSDP), or that only
    one of them has: 'model.pos.weight: saved [128, 64], this run [512, 64]'. Empty when
    they agree or the metadata is unreadable (then nothing is known about shapes)."""
    from torch.distributed.checkpoint import FileSystemReader  # noqa: PLC0415

    try:
        saved = FileSystemReader(str(path)).read_metadata().state_dict_metadata
    except Exception:  # noqa: BLE001 - unreadable metadata: the caller's other case
        return []
    ours = {f"model.{k}": list(v.shape) for k, v in model_sd.items() if hasattr(v, "shape")}
    theirs = {
        k: list(getattr(v, "size", ()))
        for k, v in saved.items()
        if k.startswith("model.") and hasattr(v, "size")
    }
    out = [
        f"{k}: saved {theirs[k]}, this run {ours[k]}"
        for k in ours
        if k in theirs and theirs[k] != ours[k]
    ]
    out += [f"{k}: in this run, not saved" for k in ours if k not in theirs]
    out += [f"{k}: saved, not in this run" for k in theirs if k not in ours]
    return out


def _describe(e: BaseException) -> str:
    """One line about what failed; DCP wraps per-rank errors in a CheckpointException."""
    failures = getattr(e, "failures", None)
    if type(e).__name__ == "CheckpointException" and failures:
        rank, failure = sorted(failures.items())[0]
        inner = getattr(failure, "exc", failure)
        if isinstance(inner, tuple):
            inner = inner[0]
        if isinstance(inner, BaseException):
            return f"rank {rank}: {_name_and_text(inner)}"
    return _name_and_text(e)


def _name_and_text(e: BaseException) -> str:
    text = _first_line(e)
    return (
        f"{type(e).__name__}: {text}"
        if text
        else f"{type(e).__name__} (truncated or not a DCP shard)"
        if isinstance(e, EOFError)
        else type(e).__name__
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""


# ------------------------------------------------------------------- the training loop's hooks


class Checkpointing:
    """Everything the training loop calls; a no-op without --checkpoint-dir (except --resume PATH).

    Loop contract (all calls on every rank, in the same order)::

        ckpt = Checkpointing(config, log=log)          # after init_process_group + model/optim
        start = ckpt.restore(model, optimizer, scheduler)
        for step in range(start, total):
            ...one optimizer step...
            if ckpt.after_step(step + 1, model, optimizer, scheduler):
                return PREEMPTED_EXIT_CODE              # SIGTERM: checkpoint saved, exit
        ckpt.finish(total, model, optimizer, scheduler)
    """

    def __init__(
        self,
        config: CheckpointConfig,
        *,
        log: LogFn = print,
        global_batch: int | None = None,
        data: dict[str, Any] | None = None,
        last_step: int | None = None,
    ) -> None:
        from trainforge.training.preemption import PreemptionHandler

        self.config = config
        self.log = log
        self.manager = CheckpointManager(
            config, log=log, global_batch=global_batch, data=data, last_step=last_step
        )
        # SIGTERM handling needs somewhere to save; without a directory the default
        # (immediate termination) is the honest behaviour.
        self.preemption = (
            PreemptionHandler(config.grace_period, log=log) if config.enabled else None
        )

    def restore(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any | None = None
    ) -> int:
        if not self.config.enabled and self.config.resume in ("auto", "never"):
            return 0
        return self.manager.restore(model, optimizer, scheduler)

    @property
    def may_block(self) -> bool:
        """Whether ``after_step`` can take time: a preemption agreement (it waits for a
        collective) or periodic saves. Without either it only runs the test hook, so the loop
        need not time it or watch it with the hang watchdog every step."""
        return self.preemption is not None or bool(self.manager.root and self.config.every)

    def after_step(
        self,
        step: int,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any | None = None,
    ) -> bool:
        """Call after each optimizer step with the number of steps done. True = stop now."""
        # before the stop agreement, so a TERM injected here is seen at this very step
        self.manager.inject_fault(step)
        if self.preemption is not None and self.preemption.should_stop():
            self.preemption.begin_shutdown()
            if self.manager.last_started_step != step:
                self.manager.save(
                    step, model, optimizer, scheduler, reason="preemption", force_sync=True
                )
            self.manager.close()
            self.preemption.finish_shutdown()
            self.preemption.close()
            return True
        if self.manager.should_save(step):
            self.manager.save(step, model, optimizer, scheduler)
        return False

    def finish(
        self,
        step: int,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any | None = None,
    ) -> None:
        """End of training: a final checkpoint (unless this step is saved) and drain async work."""
        if self.config.enabled and self.manager.last_started_step != step:
            self.manager.save(step, model, optimizer, scheduler, reason="final", force_sync=True)
        self.manager.close()
        if self.preemption is not None:
            self.preemption.close()

    def interrupted(self, step: int | None) -> str:
        """After a Ctrl-C (KeyboardInterrupt) at `step`: the exit line's detail; `step` None:
        before `restore` returned (`ctrl_c_detail_before_steps`: what is on disk).

        A Ctrl-C saves nothing new, as PyTorch Lightning's Trainer (``_call_and_handle_interrupt``
        runs the ``on_exception`` callbacks; saving is the opt-in ``OnExceptionCheckpoint``)
        and HF Trainer (its JIT checkpoint is on SIGTERM) do: you asked to stop now, and a
        save of a large state can take minutes. SIGTERM is the stop that saves (`PreemptionHandler`).
        An async save already being written commits first (at most ``--grace-period``; a
        second Ctrl-C meanwhile is ignored), never abandoned half-written; one that does not
        commit in time has no ``.metadata`` and the next restore skips it (`latest_complete`).
        The detail names the checkpoint the next run resumes from and the steps since it."""
        if step is None:
            return ctrl_c_detail_before_steps(self.manager.root)
        m = self.manager
        if m._pending is not None:
            previous = signal.getsignal(signal.SIGINT)
            main = threading.current_thread() is threading.main_thread()
            if main:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                m.wait(timeout=self.config.grace_period)
            finally:
                if main:
                    signal.signal(signal.SIGINT, previous)
        return ctrl_c_detail(m.root, m.last_saved_step, step)

    def process_memory(self) -> dict[str, int] | None:
        """DCP's checkpoint process after the newest async save it wrote (pid, VmRSS, VmHWM,
        RssAnon in bytes), None without one: summary.json's ``checkpoint_process_memory``."""
        return self.manager.writer_memory

    def metrics(self) -> dict[str, float]:
        """Last checkpoint's timings, for the metrics endpoint / summary."""
        if not self.manager.records:
            return {}
        r = self.manager.records[-1]
        out = {"checkpoint_step": float(r.step), "checkpoint_blocked_seconds": r.blocked_s}
        if self.manager.async_failure is not None:
            out["checkpoint_async_failed"] = 1.0
        if r.total_s is not None:
            out["checkpoint_seconds"] = r.total_s
        return out
