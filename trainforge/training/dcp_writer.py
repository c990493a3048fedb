"""The DCP storage writer every checkpoint uses: DCP's `FileSystemWriter`, made safe to run in
DCP's checkpoint process.

Why a module of its own: with ``--async-checkpoint`` the writer is pickled into the background
process DCP spawns (``AsyncCheckpointerType.PROCESS``), which imports it by name; the module
needs only DCP, so the runtime imports it at the first save, not at start-up.

Three jobs beyond writing:

* The background process must not outlive its trainer. DCP's process ends when its pipe
  closes, but not while it waits in a collective for a peer whose trainer died (kill -9, a
  torchrun restart): it would hold the staging memory and the job's stdout for the group's
  timeout. A daemon thread in the writing process polls its parent and exits when it is gone.
* A Ctrl-C is not the background process's to act on: the terminal sends SIGINT to the whole
  process group, DCP's process included, which died of it with a KeyboardInterrupt traceback
  in its serving loop (``parent_conn.recv()``) or, worse, mid-write. It ignores SIGINT from
  its first save on (the tiny one at set-up, `checkpoint._WriterStart`), so a write in
  flight commits while its trainer says how it stopped, and it ends with its trainer (the
  parent watch below, or multiprocessing's exit handler terminating daemon processes). A
  Ctrl-C in the seconds the process is still starting (importing torch) still ends it there.
* The background process runs at a lower CPU priority (``nice`` +10): where the host's cores
  are busy (a CPU run, data loading), the training loop gets them first and the write, which
  nobody waits for, takes the rest.
* The test hook ``TRAINFORGE_TEST_CRASH_DURING_SAVE`` (``crash_step``): after every shard of
  that step is written and before ``.metadata`` is, SIGKILL the trainer (and, when the write
  runs in DCP's process, that process too) -- the worst moment for a crash.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from torch.distributed.checkpoint import FileSystemWriter

BACKGROUND_NICENESS = 10

_watch_started = False
_watch_lock = threading.Lock()


def _exit_when_orphaned(parent: int, poll_s: float = 1.0) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    os._exit(1)  # the trainer is gone: nobody will read this checkpoint's result


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
