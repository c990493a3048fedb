"""Every timeout a job's ranks wait on, derived from one number: ``--hang-timeout``.

Why one source: at scale, a restart fails when different waits fire at different times on
different workers (one rank's NCCL timeout fires while another still sits in rendezvous, and
the group tears itself down again). Every rank gets the same flags, so deriving every number
from the same flag makes every rank give up at the same time, in a fixed order:

1. the watchdog (``watchdog.py``): ``max(HANG_MULTIPLE x mean recent step, hang_timeout)``;
   ``STARTUP_MULTIPLE x hang_timeout`` for the first steps after a (re)start and for
   restore/checkpoint sections. It fires first and says which rank is stuck, with stacks.
2. the collective timeout (every process group, gloo and NCCL): ``STARTUP_MULTIPLE x
   hang_timeout + COLLECTIVE_MARGIN_S``, above every watchdog bound so the watchdog's diagnosis
   comes first; it is the backstop where the watchdog is off.
3. the NCCL heartbeat monitor (``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``): the collective timeout,
   so it never cuts a legitimate collective wait short.
4. rendezvous / process-group init (torchrun ``join_timeout``/static ``timeout``, the
   ``env://`` store): ``max(collective timeout, MIN_RENDEZVOUS_S)``, long enough for a
   re-created pod to be rescheduled, possibly on a new node, and to pull its image.

This module imports neither torch nor pulumi: the job emitters (which render the pods'
torchrun flags) and the runtime both use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, MutableMapping

DEFAULT_HANG_TIMEOUT_S = 300.0
HANG_MULTIPLE = 10.0  # x the mean of the recent step times
STARTUP_MULTIPLE = 3.0  # x hang_timeout: first steps after a (re)start, restore, checkpoints
COLLECTIVE_MARGIN_S = 60.0
# The least hangTimeout a job may declare (0 = off aside). The watchdog gives the first steps
# after a (re)start, restores and checkpoint saves STARTUP_MULTIPLE x hang_timeout, with no
# step-time term: NCCL communicator setup, torch.compile and cold data reads take minutes on a
# GPU node, so a floor of a few seconds fires on every restart and the job restarts forever.
# 60 s gives them 3 minutes (and a collective timeout of 4 minutes).
MIN_HANG_TIMEOUT_S = 60
# The highest watchdog floor, a day: the job model's hangTimeout and the runtime's
# --hang-timeout / TRAINFORGE_HANG_TIMEOUT refuse more (a huge one overflowed the process
# group's timedelta: a traceback, not a message).
MAX_HANG_TIMEOUT_S = 86400
# torch's own NCCL default collective timeout; used when the watchdog is off (--hang-timeout 0)
TORCH_DEFAULT_COLLECTIVE_S = 600.0
# Pod re-creation after a failure: rescheduling, a new node from Karpenter (~1-3 min for a GPU
# instance to join), pulling a multi-GB CUDA image (~1-5 min). 15 minutes covers it.
MIN_RENDEZVOUS_S = 900.0
# Ring-buffer entries of the collective flight recorder (TORCH_FR_BUFFER_SIZE); an entry is a
# few hundred bytes plus its stack; 2000 covers the last tens of steps of an FSDP job.
FLIGHT_RECORDER_ENTRIES = 2000


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """The seconds each wait gives up after (see the module docstring for the order)."""

    hang_timeout: float  # watchdog floor; 0 = watchdog off
    watchdog_startup: float
    collective: float
    nccl_heartbeat: float
    rendezvous: float

    @classmethod
    def from_hang_timeout(cls, hang_timeout: float = DEFAULT_HANG_TIMEOUT_S) -> Timeouts:
        if hang_timeout < 0:
            raise ValueError(f"--hang-timeout must be >= 0 seconds (0 = off), got {hang_timeout}")
        if hang_timeout == 0:
            collective = TORCH_DEFAULT_COLLECTIVE_S
            startup = 0.0
        else:
            startup = STARTUP_MULTIPLE * hang_timeout
            collective = startup + COLLECTIVE_MARGIN_S
        return cls(
            hang_timeout=float(hang_timeout),
            watchdog_startup=startup,
            collective=collective,
            nccl_heartbeat=collective,
            rendezvous=max(collective, MIN_RENDEZVOUS_S),
        )

    @property
    def watchdog_enabled(self) -> bool:
        return self.hang_timeout > 0

    def nccl_env(self) -> dict[str, str]:
        """PyTorch NCCL / flight-recorder settings (read when a process group is created)."""
        return {
            # 3 = tear the process down on an NCCL error or timeout without calling
            # ncclCommAbort (which can itself hang); torch's default, made explicit.
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
            # Kill the process if NCCL's own watchdog thread is stuck (e.g. in a CUDA call).
            "TORCH_NCCL_ENABLE_MONITORING": "1",
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": str(int(self.nccl_heartbeat)),
            # The collective flight recorder: the last collectives of every group, dumped by
            # our watchdog and by torch itself when a collective times out.
            "TORCH_FR_BUFFER_SIZE": str(FLIGHT_RECORDER_ENTRIES),
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        }

    def torchrun_rdzv_conf(self, elastic: bool) -> str:
        """torchrun ``--rdzv-conf`` value: c10d (elastic) ``join_timeout``, static ``timeout``."""
        seconds = int(self.rendezvous)
        return f"join_timeout={seconds}" if elastic else f"timeout={seconds}"


def apply_env(
    timeouts: Timeouts,
    flight_recorder_prefix: str | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> dict[str, str]:
    """Set the NCCL/flight-recorder variables this process has not set itself (an explicit
    setting wins); returns what was set. Call before the first process group is created."""
    env = os.environ if environ is None else environ
    wanted = timeouts.nccl_env()
    if flight_recorder_prefix:
        wanted["TORCH_FR_DUMP_TEMP_FILE"] = flight_recorder_prefix
    applied = {}
    for key, value in wanted.items():
        if key not in env:
            env[key] = value
            applied[key] = value
    return applied


@contextlib.contextmanager
def applied_env(
    timeouts: Timeouts,
    flight_recorder_prefix: str | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> Iterator[dict[str, str]]:
    """`apply_env` for the block, undone on leaving it: each variable it set is removed again
    (unless something in the block changed it since). Why: `apply_env` keeps a value already
    set, as the user's own, so a second in-process run (a notebook calling `train` twice, a
    test after another) kept the first run's flight-recorder folder and NCCL heartbeat; its
    dumps landed in the first run's output directory. A pod's process runs once and leaves."""
    env = os.environ if environ is None else environ
    applied = apply_env(timeouts, flight_recorder_prefix, env)
    try:
        yield applied
    finally:
        for key, value in applied.items():
            if env.get(key) == value:
                del env[key]


def format_eta(seconds: float) -> str:
    """A short human duration: 45s, 12m05s, 3h07m, 2d04h."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
