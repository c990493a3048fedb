"""Run as the bundled runtime with one set-up phase held, so that a test can Ctrl-C it there.

    python tests/training/ctrl_c_probe.py PHASE RUNTIME_FLAGS...

PHASE ``build`` (the model build: before any Checkpointing exists) or ``restore`` (inside
`Checkpointing.restore`, before it read anything) prints ``probe: in PHASE`` and waits; the
rest is `python -m trainforge.training` itself (its ``__main__``, exit lines and exit codes).
A test's hold, not the product's: nothing of the runtime is changed but the phase's wait.
"""

from __future__ import annotations

import runpy
import sys
import time
from typing import Any

from trainforge.training import checkpoint, loop

PHASE = sys.argv.pop(1)


def held(real: Any) -> Any:
    def wait_then_run(*args: Any, **kwargs: Any) -> Any:
        print(f"probe: in {PHASE}", flush=True)
        # the test's Ctrl-C comes here, in short sleeps: a SIGINT whose C handler runs after
        # the eval loop's last check but before one long sleep's syscall (a loaded machine
        # preempts the thread there) leaves that sleep running; Python runs the handler at
        # the next bytecode, so a slice bounds the wait (a CI run hung 120 s on one 600 s sleep)
        for _ in range(12_000):
            time.sleep(0.05)
        return real(*args, **kwargs)

    return wait_then_run


if PHASE == "build":
    loop.build_model = held(loop.build_model)
elif PHASE == "restore":
    checkpoint.Checkpointing.restore = held(checkpoint.Checkpointing.restore)
else:
    raise SystemExit(f"ctrl_c_probe.py: PHASE {PHASE!r}: expected build or restore")
runpy.run_module("trainforge.training", run_name="__main__", alter_sys=True)
