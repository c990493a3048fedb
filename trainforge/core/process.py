"""How a trainforge process ends: the exit code, without a last walk over the whole heap.

When a CPython process exits, the interpreter collects garbage over every object it still
tracks, once before and again while it clears the modules (`Py_FinalizeEx`). A process that
imported torch or ran a stack's Pulumi program holds millions of them, and those collections
took 0.5-2 s of CPU after the work was done and its last line printed (docs/performance.md,
"Test suite", fifth pass): `plan --stack dev` 2.0 s, `run-local --stack ...` 1.2-2.5 s in
its own process, each training rank ~0.9 s.

`exit_code` moves what is alive at the end into the collector's permanent generation
(`gc.freeze`), which those collections skip, and returns the code for `sys.exit`. Everything
else about the exit is unchanged: `atexit` handlers and `weakref.finalize(atexit=True)` run,
non-daemon threads are joined, stdout and stderr are flushed, objects are freed by their
reference counts. What is skipped is finding reference cycles among objects alive at exit,
which the operating system reclaims with the process anyway.

Only for a process's own entry point (`if __name__ == "__main__":`, the console script): a
`main()` called in-process (the tests, a notebook) must not freeze its caller's heap.
"""

from __future__ import annotations

import gc


def exit_code(code: int | None) -> int:
    """`code` (None: 0), after freezing the heap for a quick exit; pass to `sys.exit`."""
    gc.freeze()
    return int(code or 0)
