"""Run as every rank of a job: the runtime (`python -m trainforge.training`), with a collective
in flight on rank 1 when it fails.

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. TRAINFORGE_TEST_FAULT=1:STEP:ERROR \
        python tests/training/inflight_probe.py OUT_DIR [TRAINING FLAG ...]

Every rank creates one more gloo group right after the runtime's own (the runtime's collective
timeout: `distributed.group_timeout`). In the fault's step, rank 1 starts an all-reduce on it
that rank 0 never joins (rank 0 is in the step's gradient all-reduce, waiting for rank 1),
then the ERROR test hook raises: a failing rank with work of its own in flight, as a rank of
user code with a side group, or any async collective, has. The runtime then runs as
`python -m trainforge.training` does (its module as ``__main__``).

What ends rank 1: it writes its pid to OUT_DIR/pid.1 and, when it starts the all-reduce, the
wall time to OUT_DIR/posted.1; rank 0, at its own exit (an atexit handler), waits for rank 1's
process to end, at most the collective timeout and a minute, and writes OUT_DIR/peer.json:
{"rank1_ended": bool, "ended_at": wall time}. A rank 1 that waits for its all-reduce never
ends while rank 0 lives: only the group's timeout ends that wait.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from trainforge.training import distributed, faults, loop

side: list = []  # the extra group, kept to the process's end as a user's module would


def _ended(pid: int) -> bool:
    try:  # a child the test has not reaped yet is a zombie: ended
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_for_rank1(out: Path, bound_s: float) -> None:
    pid, t0 = int((out / "pid.1").read_text()), time.monotonic()
    while not (ended := _ended(pid)) and time.monotonic() - t0 < bound_s:
        time.sleep(0.05)
    (out / "peer.json").write_text(json.dumps({"rank1_ended": ended, "ended_at": time.time()}))


def _init_distributed(*args, **kwargs):
    env = distributed.init_distributed(*args, **kwargs)
    timeout = distributed.group_timeout()
    side.append(dist.new_group(backend="gloo", timeout=timeout))
    if env.rank == 1:
        (OUT / "pid.1").write_text(str(os.getpid()))
    else:
        atexit.register(_wait_for_rank1, OUT, timeout.total_seconds() + 60)
    return env


_raise = faults.InStepFault.__call__


def _in_flight_then_raise(self, step: int, log) -> None:
    if self.step == step:
        side.append(dist.all_reduce(torch.ones(1), group=side[0], async_op=True))
        (OUT / "posted.1").write_text(str(time.time()))
        log("inflight_probe: an all-reduce that no peer joins is in flight")
    _raise(self, step, log)


OUT = Path(sys.argv.pop(1))
loop.init_distributed = _init_distributed
faults.InStepFault.__call__ = _in_flight_then_raise
runpy.run_module("trainforge.training", run_name="__main__", alter_sys=True)
