"""Test-only fault injection inside a training step (``TRAINFORGE_TEST_FAULT``).

``TRAINFORGE_TEST_FAULT=RANK:STEP:KIND`` makes rank RANK misbehave in optimizer step STEP
(1-based: the STEP-th step of the run), on the first attempt only (TORCHELASTIC_RESTART_COUNT
unset or 0), so a restart does not fail again:

=========== ===================================================================================
KIND        what rank RANK does
=========== ===================================================================================
HANG        blocks forever before its forward pass: the other ranks wait for it in the step's
            gradient all-reduce, the watchdog fires (exit 201), torchrun restarts the group
OOM         raises torch.OutOfMemoryError (exit 3, permanent)
COLLECTIVE  raises torch.distributed.DistBackendError (exit 200, retryable)
ERROR       raises ValueError, a bug in the training code (exit 1, permanent)
KILL, TERM  sends itself SIGKILL / SIGTERM right *after* step STEP, once an async save in
            flight has committed (checkpoint.py's hook)
CORRUPT     at the final agreement check (STEP is ignored), changes one value of its own copy
            of the parameters (its replica under DDP, its local shard under FSDP) after its
            peers gathered it: the check fails the run with ranks_disagree (exit 5)
STAGE       the async save of step STEP raises ``KeyError: <class 'type'>`` in its staging copy
            on rank RANK (what DCP's StateDictStager did on torch 2.11): every rank saves that
            step synchronously instead, says so once, and trains on (checkpoint.py)
=========== ===================================================================================

Documented in docs/checkpointing.md and docs/reliability.md. Never set it in a real job.
"""

from __future__ import annotations

import os
import time

FAULT_ENV = "TRAINFORGE_TEST_FAULT"
SIGNAL_KINDS = ("KILL", "TERM")  # handled after the step by checkpoint.Checkpointing
IN_STEP_KINDS = ("HANG", "OOM", "COLLECTIVE", "ERROR")
FINAL_KINDS = ("CORRUPT",)  # at the final agreement check (agreement.py)
SAVE_KINDS = ("STAGE",)  # in an async checkpoint save (checkpoint.py)


class FaultSpecError(ValueError):
    pass


def parse(spec: str) -> tuple[int, int, str] | None:
    """(rank, step, kind) of a TRAINFORGE_TEST_FAULT value; None when unset."""
    if not spec:
        return None
    try:
        rank, step, kind = spec.split(":")
        parsed = int(rank), int(step), kind.upper()
    except ValueError:
        parsed = None
    kinds = SIGNAL_KINDS + IN_STEP_KINDS + FINAL_KINDS + SAVE_KINDS
    if parsed is None or parsed[2] not in kinds:
        raise FaultSpecError(
            f"{FAULT_ENV}={spec!r}: expected RANK:STEP:KIND with KIND one of "
            f"{', '.join(kinds)} (a test hook)"
        )
    return parsed


def first_attempt(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("TORCHELASTIC_RESTART_COUNT", "0") in ("", "0")


class InStepFault:
    """The in-step part of the hook, armed on the first attempt only."""

    def __init__(self, rank: int, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        parsed = parse(env.get(FAULT_ENV, ""))
        self.step: int | None = None
        self.kind = ""
        if parsed and parsed[0] == rank and parsed[2] in IN_STEP_KINDS and first_attempt():
            self.step, self.kind = parsed[1], parsed[2]

    def __call__(self, step: int, log) -> None:
        if self.step != step:
            return
        log(f"test hook {FAULT_ENV}: {self.kind} in step {step}")
        if self.kind == "HANG":
            while True:  # a rank stuck outside any collective; only the watchdog ends it
                time.sleep(3600)
        import torch  # noqa: PLC0415

        if self.kind == "OOM":
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB (test hook, step {step})"
            )
        if self.kind == "COLLECTIVE":
            raise torch.distributed.DistBackendError(
                f"NCCL error in: ProcessGroupNCCL.cpp: unhandled system error (test hook, step {step})"
            )
        raise ValueError(f"a bug in the training code (test hook, step {step})")


def stage_fault_step(rank: int, environ: dict[str, str] | None = None) -> int | None:
    """The step whose async save's staging fails on this rank (STAGE), or None."""
    env = os.environ if environ is None else environ
    parsed = parse(env.get(FAULT_ENV, ""))
    if not parsed or parsed[0] != rank or parsed[2] not in SAVE_KINDS or not first_attempt(env):
        return None
    return parsed[1]


def corrupt_hook(rank: int, environ: dict[str, str] | None = None):
    """The CORRUPT hook for agreement.check's `before_local`, or None when not armed here."""
    env = os.environ if environ is None else environ
    parsed = parse(env.get(FAULT_ENV, ""))
    if not parsed or parsed[0] != rank or parsed[2] not in FINAL_KINDS or not first_attempt(env):
        return None

    def corrupt(own: dict) -> None:
        for t in own.values():
            if t.numel() and t.is_floating_point():
                t.view(-1)[0] += 1.0
                return

    return corrupt
