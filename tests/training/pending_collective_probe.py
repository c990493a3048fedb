"""Both ranks of a user's own gloo script, run by the wrapper in
tests/training/test_usercode_exit.py: rank 0's code ends while gloo still has work of its in
flight, and that work completes while the interpreter is finalizing.

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. \
        python -m trainforge.training.usercode tests/training/pending_collective_probe.py \
        [raise | exit CODE]

Rank 0 starts an all-reduce whose future has a Python callback (run on gloo's worker thread,
which takes the GIL for it) and keeps an object to the end whose `__del__` (module clearing,
in finalization) tells rank 1 to join the all-reduce and sleeps 3 s: when the all-reduce
completes, the worker takes the GIL of a finalizing Python 3.11 and is ended with
`pthread_exit` through C++ code: "terminate called without an active exception", SIGABRT,
in every run before `leave` (its random version: a group left alive, wave 14's CI flake).
Its code then ends as `raise` or `exit CODE` say (else it returns), after writing, without
closing it, `unclosed.txt` in TRAINFORGE_OUTPUT_DIR and printing into a buffered stdout.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import types

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
dist.all_reduce(torch.ones(1))  # connected
store = dist.distributed_c10d._get_default_store()
if dist.get_rank() == 0:
    pending = dist.all_reduce(torch.ones(1), async_op=True).get_future()
    pending.then(lambda fut: fut.value())  # a Python callback, on gloo's thread

    class FreedInFinalization:
        """Kept to the end; freed when finalization clears the modules."""

        def __init__(self) -> None:
            self.store, self.sleep = store, time.sleep

        def __del__(self) -> None:
            self.store.set("rank0_finalizing", "1")  # rank 1 completes the all-reduce
            self.sleep(3)  # while this rank is still finalizing

    kept = types.ModuleType("_kept_to_the_end")
    kept.pending, kept.last = pending, FreedInFinalization()
    sys.modules[kept.__name__] = kept
    out = os.environ["TRAINFORGE_OUTPUT_DIR"]
    left_open = open(os.path.join(out, "unclosed.txt"), "w")  # noqa: SIM115 - left open
    left_open.write("left open\n")
    print("rank 0: ended with an all-reduce in flight", flush=False)
    end = sys.argv[1:]
    if end[:1] == ["raise"]:
        raise RuntimeError("the script's own bug, after its collectives")
    if end[:1] == ["exit"]:
        sys.exit(int(end[1]))
else:
    # rank 0 finalizing: complete its all-reduce; rank 0 gone without finalizing: the wait
    # fails (rank 0 held the store), a lost peer
    store.wait(["rank0_finalizing"])
    dist.all_reduce(torch.ones(1))
