"""The DCP storage writer every checkpoint uses: DCP's `FileSystemWriter`, made safe to run in
DCP's checkpoint process.

Why a module of its own: with ``--async-checkpoint`` the writer is pickled into the background
process DCP spawns (``AsyncCheckpointerType.PROCESS``), which imports it by name; the module
needs only DCP, so the runtime imports it at the first save, not at start-up.

Beyond writing:

* The background process must not outlive its trainer, nor say anything when it does. DCP's
  process ended when its pipe closed with an ``EOFError`` traceback from its serving loop
  (``parent_conn.recv()``; a ``BrokenPipeError`` one when a write finished after its trainer
  died), printed into the job's log of a rehearsed kill -9 as if it were a second fault; and
  it does not end while it waits in a collective for a peer whose trainer died (kill -9, a
  torchrun restart): it would hold the staging memory and the job's stdout for the group's
  timeout. So its pipe's end (the trainer gone: only its exit closes it, and nobody waits
  for a result) ends it at once and quietly (`_leave_quietly_when_the_trainer_is_gone`), and
  a daemon thread polls its parent for the collective case. A live trainer's save is never
  cut: the pipe is read only between saves, and the poll acts only once the parent is gone.
* A Ctrl-C is not the background process's to act on: the terminal sends SIGINT to the whole
  process group, DCP's process included, which died of it with a KeyboardInterrupt traceback
  in its serving loop (``parent_conn.recv()``) or, worse, mid-write. It starts with SIGINT
  blocked (`checkpoint._spawning_without_sigint`: the seconds it imports torch) and ignores
  it from its first save on (the tiny one at set-up, `checkpoint._WriterStart`), so a write
  in flight commits while its trainer says how it stopped, and it ends with its trainer (its
  pipe's end, the parent watch, or multiprocessing's exit handler terminating daemon
  processes).
* DCP's process logs at INFO, to the job's output, five lines per save and rank ("Received
  async checkpoint request", "Completed checkpoint save request for checkpoint_id=
  _CheckpointRequestIdentifier(...)", "Waiting for checkpoint save request...": its
  ``_init_logger`` sets the root logger to INFO with a handler of its own; torch/distributed/
  checkpoint/logger.py and _async_process_executor.py, torch 2.13.0 wheel, read 2026-12-01),
  beside the trainer's own ``checkpoint: saved ...`` line that says the same with its
  timings (60 of the KILL rehearsal's lines), and four more at its start ("Initializing
  dist.ProcessGroup in checkpoint background process on port N", "Checkpoint background
  process is running...", "Waiting for checkpoint save request...", "Received async
  checkpoint request with id=None": the set-up's tiny save), logged before any writer of ours
  runs there. So its target is ours (`quiet_checkpoint_process`): INFO off in that process
  from its first line (``logging.disable``), its warnings and errors still printed.
* The background process runs at a lower CPU priority (``nice`` +10): where the host's cores
  are busy (a CPU run, data loading), the training loop gets them first and the write, which
  nobody waits for, takes the rest.
* The test hook ``TRAINFORGE_TEST_CRASH_DURING_SAVE`` (``crash_step``): after every shard of
  that step is written and before ``.metadata`` is, SIGKILL the trainer (and, when the write
  runs in DCP's process, that process too) -- the worst moment for a crash.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from torch.distributed.checkpoint import FileSystemWriter

from trainforge.core.process import exit_now

BACKGROUND_NICENESS = 10

_watch_started = False
_watch_lock = threading.Lock()


def _exit_when_orphaned(parent: int, poll_s: float = 1.0) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    exit_now(1)  # the trainer is gone: nobody will read this checkpoint's result


def _leave_quietly_when_the_trainer_is_gone() -> None:
    """In DCP's checkpoint process: its pipe to the trainer at its end exits the process at
    once, without the traceback multiprocessing prints for an exception out of its target.

    The pipe is ``multiprocessing.connection.Connection``, the only one in this process (DCP's
    ``_checkpointing_subprocess`` reads requests with ``recv`` and answers with ``send``;
    torch/distributed/checkpoint/_async_process_executor.py, torch 2.13.0 wheel, read
    2026-12-01), so the class's two methods are wrapped here, in this process only. An end of
    file on ``recv`` (read between saves) or a broken pipe on ``send`` (a write's answer) means
    the trainer closed its end, which only its exit does: nothing is waiting for an answer.
    Why not ``PR_SET_PDEATHSIG``: Linux sends it when the *thread* that forked the process
    exits, and DCP forks it from a thread-pool worker that ends after the first save."""
    from multiprocessing.connection import Connection  # noqa: PLC0415 - this process only

    recv, send = Connection.recv, Connection.send

    def recv_or_leave(self: Connection) -> Any:
        try:
            return recv(self)
        except EOFError:
            exit_now(1)

    def send_or_leave(self: Connection, obj: Any) -> None:
        try:
            send(self, obj)
        except (BrokenPipeError, ConnectionResetError):
            exit_now(1)

    Connection.recv = recv_or_leave  # type: ignore[method-assign]
    Connection.send = send_or_leave  # type: ignore[method-assign]


_dcp_target: Any = None  # DCP's own target of its checkpoint process, once replaced


def quiet_checkpoint_process() -> None:
    """In the trainer, before DCP spawns its checkpoint process: that process's target becomes
    `_quiet_checkpointing_subprocess` (DCP's, with INFO off first). Idempotent.

    Why the target: it is the first code the spawned process runs after unpickling it
    (``multiprocessing`` spawn pickles the target by its module and name), and DCP's own
    first statement is ``_init_logger``, which sets the root logger to INFO with a handler of
    its own (torch/distributed/checkpoint/logger.py; ``_AsyncCheckpointProcess.__init__``
    passes ``target=self._checkpointing_subprocess``, a staticmethod, to ``ctx.Process``:
    _async_process_executor.py, torch 2.13.0 wheel, read 2026-12-01), so a level set later
    comes after its start's lines and one set earlier is overwritten. ``logging.disable``
    is above every logger's level. Where torch has no such class (another version), nothing
    changes: DCP's lines come back, and tests/training/test_checkpoint_process_quiet.py says so."""
    global _dcp_target
    try:
        from torch.distributed.checkpoint import _async_process_executor as ape  # noqa: PLC0415
    except ImportError:
        return
    cls = getattr(ape, "_AsyncCheckpointProcess", None)
    found = getattr(cls, "__dict__", {}).get("_checkpointing_subprocess")
    if not isinstance(found, staticmethod) or found.__func__ is _quiet_checkpointing_subprocess:
        return
    _dcp_target = found.__func__
    cls._checkpointing_subprocess = staticmethod(_quiet_checkpointing_subprocess)


def _quiet_checkpointing_subprocess(*args: Any, **kwargs: Any) -> Any:
    """DCP's checkpoint process's target (`quiet_checkpoint_process`): INFO off, then DCP's."""
    logging.disable(logging.INFO)  # INFO and below, in this process only; warnings still go
    target = _dcp_target  # None here, in the spawned process: its class was never changed
    if target is None:
        from torch.distributed.checkpoint import _async_process_executor as ape  # noqa: PLC0415

        target = ape._AsyncCheckpointProcess._checkpointing_subprocess
    return target(*args, **kwargs)


class TrainforgeWriter(FileSystemWriter):
    """`FileSystemWriter` (fsync'd shards, ``.metadata`` written last via tmp + rename)."""

    def __init__(self, path: str, *, crash_step: int = -1, step: int = -1) -> None:
        super().__init__(path)
        self._crash = crash_step >= 0 and crash_step == step
        self._trainer_pid = os.getpid()

    def set_up_storage_writer(self, *args: Any, **kwargs: Any) -> None:
        global _watch_started
        if os.getpid() != self._trainer_pid:  # in DCP's checkpoint process
            with _watch_lock:
                if not _watch_started:
                    _watch_started = True
                    os.nice(BACKGROUND_NICENESS)
                    _leave_quietly_when_the_trainer_is_gone()
                    if threading.current_thread() is threading.main_thread():
                        signal.signal(signal.SIGINT, signal.SIG_IGN)
                    threading.Thread(
                        target=_exit_when_orphaned,
                        args=(self._trainer_pid,),
                        name="trainforge-parent-watch",
                        daemon=True,
                    ).start()
        super().set_up_storage_writer(*args, **kwargs)

    def finish(self, metadata: Any, results: Any) -> None:
        if self._crash:
            if os.getpid() != self._trainer_pid:
                os.kill(self._trainer_pid, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        super().finish(metadata, results)
