"""How a trainforge process ends: the exit code, without a last walk over the whole heap.

When a CPython process exits, the interpreter collects garbage over every object it still
tracks, once before and again while it clears the modules (`Py_FinalizeEx`). A process that
imported torch or ran a stack's Pulumi program holds hundreds of thousands (the launcher
170,000 at its exit), and those collections took 0.5-3 s of CPU after the work was done and
its last line printed (docs/performance.md, "Test suite", fifth pass): `run-local --stack dev
mnist-ddp --steps 3` took 13.4-14.3 -> 10.6-10.9 CPU s for itself, its launcher and 2 ranks.

`exit_code` moves what is alive at the end into the collector's permanent generation
(`gc.freeze`), which those collections skip, and returns the code for `sys.exit`. Everything
else about the exit is unchanged: `atexit` handlers and `weakref.finalize(atexit=True)` run,
non-daemon threads are joined, stdout and stderr are flushed, objects are freed by their
reference counts. What is skipped is finding reference cycles among objects alive at exit,
which the operating system reclaims with the process anyway. The price: a `__del__` of an
object in such a cycle does not run at exit (Python never promised it would: the data model's
`object.__del__`); nothing of ours relies on one: the runtime's writers flush every line
(training/metrics.py) and close their files, checkpoints are committed before the run ends.

The runtime's ranks that finish free their process group before this (a failing one aborts
its groups and ends by `leave` without freeing them: training/__main__.py):
`training.distributed.cleanup` releases what kept it past `destroy_process_group`
(torch.distributed.nn.functional's default arguments, DTensor's caches of FSDP2's mesh,
FSDP2's reference cycles), so gloo's threads end
inside `train` (tests/training/test_teardown.py). Before, the interpreter's final collections
destroyed the group while it was finalizing, when Python 3.11 ends any thread that takes the
GIL with `pthread_exit`; through a C++ noexcept frame that aborted the rank ("terminate called
without an active exception", after a successful run). The freeze is here for the CPU it
saves; it does not keep such a group out of finalization: gloo work of a group a user's own
code left (a collective in flight; torch._dynamo's import of torch.distributed.nn.functional
after `init_process_group` holds the group even past `destroy_process_group`) that completes
while the interpreter finalizes aborts the rank (tests/training/test_usercode_exit.py; a CI
run once). `leave` ends a rank of your code without finalization (below).

`leave` ends a process once its exit status is known: what Python's exit does first (the
threading module's shutdown: its atexit hooks and joining non-daemon threads; `atexit`
handlers; flushing the files `open()` made that are still open, the standard streams last,
then C's stdio buffers), then `os._exit`. So the interpreter's finalization, where gloo's threads met `pthread_exit`
(CPython 3.11 `take_gil`; 3.14 hangs such threads instead: python/cpython#105805), never
runs, and nothing still alive is destroyed at the end (a group's destructor waits for its
work and joins gloo's threads; wave 14's try at freeing the group by a collection at exit
could deadlock). torch 2.13 has no exit hook of its own: pytorch/pytorch#179291 (an atexit
`destroy_process_group`, closed unmerged 2026-04-16) names this abort; #190489 is open.

Only for a process's own entry point (`if __name__ == "__main__":`, the console script): a
`main()` called in-process (the tests, a notebook) must not freeze its caller's heap.

`frozen_imports` does the same for the start of a process: torch's import (and the runtime's,
and torchrun's in the launcher) creates a few hundred thousand objects that live as long as the
process, and the collector's default thresholds walked all of them again in each full
collection while the imports ran and afterwards (torch._dynamo, FSDP and sympy are imported
later, at the model's set-up). The imports run with the collector off, and what they created is
then moved into the permanent generation, so later collections, young and full, walk only what
the run itself creates: a rank's imports 2.5 -> 2.1 CPU s (docs/performance.md, "Test suite",
sixth pass). A reference cycle made by an import stays in memory (module-level state lives to
the end anyway); everything the run creates afterwards (the process group, the model, FSDP2's
cycles that `training.distributed.cleanup` collects) is collected as before.

`freeze_first_import` is the same for code that is not ours (a rank of your own script, whose
`import torch` the wrapper cannot move): the first import of the named module runs inside
`frozen_imports`, found by the same search as always; nothing else about it changes.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib.abc
import importlib.machinery
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn


def exit_code(code: int | None) -> int:
    """`code` (None: 0), after freezing the heap for a quick exit; pass to `sys.exit`."""
    gc.freeze()
    return int(code or 0)


# Py_FinalizeEx's status when flushing stdout or stderr fails (CPython 3.11 Py_Exit: 120)
FLUSH_FAILED = 120


def leave(code: int) -> NoReturn:
    """End this process with `code` as Python's exit would, without its finalization (see
    the module's docstring). Only for a process's own entry point, after `exit_code`."""
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()  # a handler's error is printed, as at exit; the code stays
    _flush_open_files()
    if not flush_std_streams():  # Python exits 120 then; a failure keeps its code
        code = code or FLUSH_FAILED
    with contextlib.suppress(Exception):  # C's stdio (a library's printf): exit() flushes it
        ctypes.CDLL(None).fflush(None)
    os._exit(code)


def flush_std_streams() -> bool:
    """Flush stdout and stderr; False where a flush failed (a closed pipe). Never raises.

    Why: the runtime's ranks line-buffer both (training/streams.py `whole_lines`), so a
    partial line (a ``print(x, end="")``, a progress bar's ``\r``) waits in the text layer
    for its newline; torchrun's ``python -u`` wrote it at once. An ``os._exit`` skips the
    flush Python's exit does, and lost it: every ``os._exit`` of ours goes through
    `exit_now` (or `leave`), which flush first."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - reported by the result, never raised at an exit
            ok = False
    return ok


def exit_now(code: int) -> NoReturn:
    """``os._exit(code)`` at once (no atexit, no thread joins: a timer's or a watchdog's hard
    stop), with what the standard streams still hold written first (`flush_std_streams`).
    Not for a process forked without exec: its buffers are copies of its parent's."""
    flush_std_streams()
    os._exit(code)


def _flush_open_files() -> None:
    """Flush the files `open()` made that are still open (text layers first): what their
    finalizers did at exit, for a file a program left open. Not closed, and other file-like
    objects (a GzipFile's trailer) are left as they are: a file you did not close is yours."""
    gc.disable()  # nothing collects from here to the end
    gc.unfreeze()  # gc.get_objects skips the permanent generation
    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    found = [o for o in gc.get_objects() if type(o) in kinds]
    found.sort(key=lambda o: type(o) is not io.TextIOWrapper)
    for f in found:
        with contextlib.suppress(Exception):  # closed or detached: nothing to do
            if not f.closed and f.writable():
                f.flush()


@contextlib.contextmanager
def frozen_imports(own_process: bool) -> Iterator[None]:
    """The block's imports without the cyclic collector, then what is alive frozen (see the
    module's docstring). ``own_process``: the caller is its process's entry point (its module
    runs as ``__main__``); otherwise, and when the collector is already off, nothing changes."""
    if not own_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


class _FrozenFirstImport(importlib.abc.MetaPathFinder):
    """Finds `name` as the default path search does, once, and loads it by `_FrozenLoader`."""

    def __init__(self, name: str) -> None:
        self.name, self.used = name, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.used:
            return None  # the rest of the search goes on as without this finder
        self.used = True
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _FrozenLoader(spec.loader)
        return spec


class _FrozenLoader(importlib.abc.Loader):
    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # the module carries its own loader, as if imported without this one
        module.__loader__ = module.__spec__.loader = self.loader
        with frozen_imports(own_process=True):
            self.loader.exec_module(module)


def freeze_first_import(name: str) -> None:
    """Call at a process's own entry point, before running code that may import `name` (a
    top-level module): that import, with everything it imports, runs in `frozen_imports`."""
    if name not in sys.modules:
        sys.meta_path.insert(0, _FrozenFirstImport(name))
