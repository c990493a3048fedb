"""Why a training process ended: one reason, one exit code, one log line.

The exit code is what the job controller sees. The Kubeflow training operator's
``restartPolicy: ExitCode`` (release 1.9, ``pkg/util/train/train_util.go``:
``IsRetryableExitCode(code) = code >= 128``) re-creates the pod for codes 128-255 and fails
the job for 1-127. So every failure a restart can fix gets a code >= 128 and every failure it
cannot (the same flags would fail the same way) gets a code below 128:

=================  ====  =========  ==================================================
reason             code  retry      what happened
=================  ====  =========  ==================================================
user_error            1  no         an exception in the training code, a non-finite loss
config_error          2  no         bad flags, an unusable checkpoint, an impossible setup
                                    (cuda or nccl where torch is a CPU build or the pod has
                                    no GPU: `no_gpu`)
oom                   3  no         out of GPU (or host allocator) memory: the same batch
                                    would run out again; lower the batch size
no_progress           4  no         the job kept failing from the same checkpoint
ranks_disagree        5  no         the ranks ended with different parameters (a replica
                                    or a shard differs from its peers' copy)
interrupted         130  yes        SIGINT (Ctrl-C): you stopped the run; not a failure
                                    and not a preemption. In a pod its controller treats
                                    130 as any code >= 128; run-local re-creates nothing
                                    after a Ctrl-C (the line says which, `exit_line`)
node_lost           137  yes        SIGKILL (the OOM killer, a kill -9) or a vanished node:
                                    the kernel's code (128 + 9), no record of ours
preempted           143  yes        SIGTERM: stopped, not a failure; the record names the
                                    checkpoint the process saved (`preempted`), or says
                                    trainforge cannot tell whether one was saved
collective_error    200  yes        an NCCL/gloo error or a collective timeout
hang                201  yes        the watchdog saw no progress (see watchdog.py)
peer_lost           202  yes        another rank vanished (its process or its node died)
gpu_error           203  yes        a GPU hardware fault (ECC, fallen off the bus, Xid), or
                                    a GPU pod whose GPUs CUDA cannot see
checkpoint_failed   204  yes        a checkpoint could not be saved, even after retries (the
                                    platform's storage, or DCP: never the training code's)
user_retryable      205  yes        your code marked this failure retryable: it raised an
                                    exception its job lists in `entrypoint.retryOn`
                                    (usercode.py), or it exited 205 itself
=================  ====  =========  ==================================================

A rank torchrun stopped in its teardown because another rank failed is none of these either:
``stopped`` with the code its signal gave it, the failed rank and its reason (launch.py
rewrites its record; ``stopped``).

Your code's own ``sys.exit(n)`` under the wrapper (usercode.py) is none of these: ``user_exit``
with the status the process then has (`exit_status`: n & 0xff, what the kernel reports and the
operator reads; the record keeps the n your code asked for where it differs).

Codes 200-205 sit above the range of signal deaths (128 + signal, at most 128 + 64), so a
reason is never mistaken for a signal. A process killed outright (SIGKILL: the kernel's OOM
killer, a kill -9, a node that vanished) writes nothing; its code is the kernel's, 128 + 9 =
137 (``node_lost``), as its parent reads it: the launcher names such a rank the cause its
peers' collective errors and torchrun's SIGTERMs follow from (ROOT_CAUSE_ORDER), unless
torchrun itself killed it in its teardown after the first failure (launch.teardown_kill), and the
restart's ledger infers the same reason when some rank of the failed attempt left no exit
record (ledger.py).

Torch is imported lazily: the launcher and the tests read this table without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from trainforge.core import failures


@dataclasses.dataclass(frozen=True)
class Reason:
    name: str
    code: int
    what: str
    action: str
    # user_exit only: what your code passed to sys.exit where the status differs (repr)
    asked: str | None = None
    # preempted only: the newest checkpoint step this process saved (context.checkpoint)
    checkpoint: int | None = None
    # stopped only: the rank whose failure made torchrun stop this one, and its reason
    by: int | None = None
    cause: str | None = None

    @property
    def label(self) -> str:
        """The name, with the sys.exit your code asked where the status differs: the one
        wording of a reason in the launcher's, run-local's and status's exit lines."""
        return f"{self.name}: sys.exit({self.asked})" if self.asked else self.name

    @property
    def retryable(self) -> bool:
        """Whether the training operator's ExitCode re-creates a pod that exits with it
        (IsRetryableExitCode: trainforge.core.failures.operator_retries)."""
        return failures.operator_retries(self.code)


USER_ERROR = Reason("user_error", 1, "the training code raised", "fix the error in the traceback")
CONFIG_ERROR = Reason(
    "config_error",
    2,
    "the configuration cannot work",
    "fix the flag, checkpoint or setup named in this line",
)
OOM = Reason(
    "oom",
    3,
    "out of memory",
    "lower --batch-size (raise --grad-accum to keep the global batch), use "
    "--activation-checkpointing, bf16 or --strategy fsdp",
)
NO_PROGRESS = Reason(
    "no_progress",
    4,
    "the job kept failing from the same checkpoint",
    "read the earlier attempts' exit lines (`kubectl logs --previous`) and fix their cause",
)
RANKS_DISAGREE = Reason(
    "ranks_disagree",
    5,
    "the ranks ended with different parameters",
    "do not use this run's final weights; run the acceptance tests on its nodes (a sick GPU "
    "corrupts silently) and rerun from a checkpoint before the first disagreeing step",
)
# What a SIGTERM's record knows by itself: the signal came. Whether a checkpoint was saved is
# known only where trainforge's CheckpointManager saved one in the process (`preempted`).
PREEMPTED = Reason(
    "preempted",
    143,
    "SIGTERM: stopped; trainforge cannot tell whether a checkpoint was saved",
    "none: not a failure; the restart starts from the newest checkpoint the code loads, if "
    "any, else from the beginning",
)
# Ctrl-C: the status a process that dies of SIGINT reports (128 + 2), as Python's own does
INTERRUPTED = Reason(
    "interrupted",
    130,
    "SIGINT (Ctrl-C): you stopped the run; not a failure, not a preemption",
    "none: run it again to continue (from the newest checkpoint the code loads, if any)",
)
COLLECTIVE_ERROR = Reason(
    "collective_error",
    200,
    "a collective failed or timed out",
    "none if the restart succeeds; if it repeats, look for a sick node (acceptance tests)",
)
HANG = Reason(
    "hang",
    201,
    "no progress within the watchdog's bound",
    "none if the restart succeeds; the stacks and flight recorder dump show where",
)
PEER_LOST = Reason(
    "peer_lost",
    202,
    "another rank vanished",
    "none: the restart regroups; look for the first rank that failed",
)
GPU_ERROR = Reason(
    "gpu_error",
    203,
    "a GPU hardware fault",
    "none: node repair replaces a node whose GPU keeps failing",
)
CHECKPOINT_FAILED = Reason(
    "checkpoint_failed",
    204,
    "a checkpoint could not be saved, even after retries",
    "none if the restart succeeds (it resumes from the last complete checkpoint); if it "
    "repeats, check the checkpoint volume (free space, mount) named in the line above",
)
USER_RETRYABLE = Reason(
    "user_retryable",
    205,
    "your code marked this failure retryable (entrypoint.retryOn, or exit 205)",
    "none if the restart succeeds; if it repeats, read the traceback above",
)
SUCCESS = Reason("success", 0, "finished", "none")
# A rank killed outright: no code of ours, the kernel's for SIGKILL (failures.KILLED, 128 + 9),
# as torchrun sees it (exitcode -9: launch.py) and as the ledger infers it (no exit record).
NODE_LOST = Reason(
    "node_lost",
    failures.KILLED,
    "a rank was killed outright (SIGKILL: the OOM killer, a kill -9) or its node vanished",
    "none: node repair / Karpenter replace a lost node",
)

REASONS: dict[str, Reason] = {
    r.name: r
    for r in (
        SUCCESS,
        USER_ERROR,
        CONFIG_ERROR,
        OOM,
        NO_PROGRESS,
        RANKS_DISAGREE,
        PREEMPTED,
        INTERRUPTED,
        COLLECTIVE_ERROR,
        HANG,
        PEER_LOST,
        GPU_ERROR,
        CHECKPOINT_FAILED,
        USER_RETRYABLE,
        NODE_LOST,
    )
}
BY_CODE: dict[int, Reason] = {r.code: r for r in REASONS.values()}

# Your code's own `sys.exit(n)` (usercode.py): n is kept, as the controller reads it
# (operator_retries: 1-127 fail the job, 128-255 re-create the pod), but the runtime did not
# decide why, so no reason of the table above names it.
USER_EXIT = "user_exit"


# A C long (CPython's PyLong_AsLong, 64 bits on Linux): a larger int overflows to -1
_LONG = 1 << 63


def exit_status(value: object) -> int:
    """The status a process that ends with `sys.exit(value)` reports, as its parent (the
    kubelet, torchrun) reads it. CPython 3.11 Python/pythonrun.c `_Py_HandleSystemExit`: None
    is 0, an int is `(int)PyLong_AsLong(value)` (-1 where it overflows a C long), anything
    else is printed and is 1; `exit()` hands that int to the kernel, which keeps `& 0xff`
    (POSIX `_exit`, WEXITSTATUS). The training operator reads that status, never the value
    asked (v1.9.4 pkg/util/train/train_util.go at 07a4a896, read 2026-11-30:
    `IsRetryableExitCode(exitCode int32)` is `exitCode >= 128`), so sys.exit(300) is a
    permanent 44. Proved against `python SCRIPT` itself (tests/training/test_usercode_status.py)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return (value if -_LONG <= value < _LONG else -1) & 0xFF
    return 1


def asked(value: object) -> str | None:
    """What your code passed to `sys.exit`, where the process's status is not that value
    (300 exits 44, "stop" exits 1); None where it is (an int 0-255, None)."""
    if value is None or (isinstance(value, int) and value == exit_status(value)):
        return None
    return repr(value)[:200]


def user_exit(code: int, asked: str | None = None) -> Reason:
    """The reason of a code your code chose itself (`sys.exit`): `code` is the status the
    process has (`exit_status`), `asked` what your code passed where that differs. A 143 of
    yours is one: the wrapper reads it as `preempted` only after a SIGTERM (usercode.own_exit)."""
    what = f"your code exited with {code}"
    if asked is not None:
        if not re.fullmatch(r"-?\d+", asked):
            why = "not an int: Python prints it and exits 1"
        elif -_LONG <= int(asked) < _LONG:
            why = f"the kernel keeps the low 8 bits, {asked} & 0xff"
        else:
            why = "an int beyond a C long: Python exits -1, which the kernel reports as 255"
        what = f"your code asked sys.exit({asked}); the process exits {code} ({why})"
    elif code == PREEMPTED.code:
        what += " (no SIGTERM reached trainforge's handlers: not a preemption)"
    return Reason(
        USER_EXIT,
        code,
        what,
        "read your code's output above: it chose this exit code, not trainforge",
        asked,
    )


def preempted(checkpoint: int | None) -> Reason:
    """The reason of a SIGTERM's stop, with what is known of a checkpoint: the newest step
    trainforge's CheckpointManager saved in this process (`context.checkpoint`: the runtime's
    save on SIGTERM, or your code's through the manager), else PREEMPTED, which says trainforge
    cannot tell (your code may have saved one its own way, or none)."""
    if checkpoint is None:
        return PREEMPTED
    return dataclasses.replace(
        PREEMPTED,
        what=f"SIGTERM: stopped; the newest checkpoint it saved is step {checkpoint}",
        action="none: not a failure; the restart resumes from the newest complete checkpoint "
        "(the runtime's restore, or your code's CheckpointManager.restore, loads it)",
        checkpoint=checkpoint,
    )


# A rank torchrun stopped in its teardown because another rank failed (launch.py writes its
# record): a follower, neither a preemption nor a failure of its own. Like user_exit, no
# code of its own: the one its signal gave it (143 SIGTERM, 137 the teardown's SIGKILL).
STOPPED = "stopped"


def stopped(code: int, by: int | None, cause: str | None) -> Reason:
    """The reason of a rank torchrun stopped (exit `code`) because rank `by` failed with
    `cause` (a reason's name): what its record says instead of `preempted`."""
    how = "its SIGKILL" if code == failures.KILLED else "its SIGTERM"
    who = f"rank {by} failed" if by is not None else "another rank failed"
    why = f" ({cause})" if cause else ""
    return Reason(
        STOPPED,
        code,
        f"stopped by torchrun ({how}) because {who}{why}: not a preemption",
        f"none: rank {by}'s exit line names the cause" if by is not None else "none",
        by=by,
        cause=cause,
    )


def is_preempted(reason: Reason | None) -> bool:
    """Whether `reason` is a preemption (PREEMPTED, or `preempted` with its checkpoint)."""
    return reason is not None and reason.name == PREEMPTED.name


def is_stop(reason: Reason | None) -> bool:
    """Whether `reason` is a stop asked from outside, not a failure of the job: a preemption
    (SIGTERM) or you stopping the run (SIGINT): the ledger's failed attempts in a row
    (no_progress) do not count it."""
    return is_preempted(reason) or (reason is not None and reason.name == INTERRUPTED.name)


def from_record(rec: dict) -> Reason | None:
    """The reason an exit record names (`reason`, with its `code` and `asked` for
    user_exit, its `checkpoint` for preempted); None for a name this table does not know."""
    name = rec.get("reason")
    if name == PREEMPTED.name:
        step = rec.get("checkpoint")
        ok = isinstance(step, int) and not isinstance(step, bool)
        return preempted(step if ok else None)
    if name == USER_EXIT:
        code, said = rec.get("code"), rec.get("asked")
        said = said if isinstance(said, str) else None
        ok = isinstance(code, int) and not isinstance(code, bool)
        return user_exit(code, said) if ok else None
    if name == STOPPED:
        code, by, cause = rec.get("code"), rec.get("by"), rec.get("cause")
        ok = isinstance(code, int) and not isinstance(code, bool)
        by = by if isinstance(by, int) and not isinstance(by, bool) else None
        return stopped(code, by, cause if isinstance(cause, str) else None) if ok else None
    return REASONS.get(name) if isinstance(name, str) else None


# Which reason is the cause when several ranks failed at once: a rank that failed on its own
# (a bug, OOM, a hang) makes its peers fail in collectives, so those rank lower.
ROOT_CAUSE_ORDER = (
    "config_error",
    "user_error",
    USER_EXIT,
    "oom",
    "no_progress",
    "ranks_disagree",
    "gpu_error",
    "checkpoint_failed",
    "user_retryable",
    "hang",
    "node_lost",
    "interrupted",
    "collective_error",
    "peer_lost",
    STOPPED,
    "preempted",
    "success",
)

_OOM_TEXT = re.compile(
    r"out of memory|can't allocate memory|CUDA error: out of memory|std::bad_alloc", re.I
)
_GPU_TEXT = re.compile(
    r"uncorrectable ECC|ECC error|fallen off the bus|GPU is lost|unspecified launch failure|"
    r"\bXid\b|CUDA error: unknown error",
    re.I,
)
# The process has no GPU, no CUDA or no NCCL: what code that hard-codes `cuda` or `nccl` raises
# where it has none. Torch's own messages (torch 2.13: torch/cuda/__init__.py's lazy init raises
# AssertionError "Torch not compiled with CUDA enabled" in a CPU build; distributed_c10d.py
# raises RuntimeError "Distributed package doesn't have NCCL built in"; a CUDA build that sees
# no GPU raises RuntimeError "Found no NVIDIA driver on your system" / "No CUDA GPUs are
# available" (c10/cuda) from its lazy init, and ProcessGroupNCCL's constructor raises
# ValueError "ProcessGroupNCCL is only supported with GPUs, no GPUs found!", a
# TORCH_CHECK_WITH(ValueError, at::cuda::getNumGPUs() != 0, ...) read in pytorch/pytorch
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp at cf1380df, 2026-11-29).
# A CPU build of torch cannot use a GPU on any node: the image's torch, so the job's.
CPU_TORCH_TEXT = re.compile(
    r"Torch not compiled with CUDA enabled|doesn't have NCCL built in|has no attribute '_cuda_"
)
# A CUDA build that finds no GPU: the job's where the pod was given none (a CPU pool), the
# node's where it was (its driver or GPUs failed: `gpu_devices`).
NO_GPU_SEEN_TEXT = re.compile(
    r"Found no NVIDIA driver|No CUDA GPUs are available|"
    r"ProcessGroupNCCL is only supported with GPUs"
)
# Either: `trainforge run-local` runs GPU pods on CPU, so there such a failure is its
# stand-in's, not the cluster's (trainforge.jobs.local.no_gpu_failure).
NO_GPU_TEXT = re.compile(f"{CPU_TORCH_TEXT.pattern}|{NO_GPU_SEEN_TEXT.pattern}")
# What the exit line adds to torch's message (the detail: `diagnose`), one per case.
# backend=None: torch 2.13's distributed_c10d.BackendConfig takes the backend of the
# accelerator the process has (gloo without one); "cpu:gloo,cuda:nccl" creates ProcessGroupNCCL
# eagerly (_new_process_group_helper) and fails the same way, so it is not offered.
_ON_CPU = (
    'use the gloo backend and cpu tensors on CPU (init_process_group("gloo"), or backend=None, '
    "which takes gloo where there is no GPU)"
)
# Said of this process's torch, the one it knows: a pod's is its image's, run-local's is the
# machine's (run-local says what the pods say where their image differs: jobs.local).
CPU_TORCH_FIX = (
    f"this process's torch is a CPU build (torch.version.cuda is None: no CUDA, no NCCL): "
    f"{_ON_CPU}; GPUs need a CUDA build of torch (a pod's is its image's)"
)
NO_GPU_FIX = (
    f"this pod has no GPU (its pool gives none): {_ON_CPU}, choosing the device from "
    "torch.cuda.is_available(); or run the job on a GPU pool"
)
LOST_GPU_FIX = (
    "this pod was given {n} GPU device(s) but CUDA sees none: the node's driver or GPUs "
    "failed it, not your code"
)
DEV_DIR = "/dev"


def gpu_devices(dev: str | None = None) -> int:
    """How many GPUs this container was given: the /dev/nvidiaN nodes that the NVIDIA
    container toolkit mounts for each GPU the device plugin allocated to it (an
    `nvidia.com/gpu` limit). A pod without that limit, or on a node without GPUs, has none,
    whatever its image's NVIDIA_VISIBLE_DEVICES says; a GPU pod has them even when the
    node's driver or GPUs fail, which is how the two are told apart. GPUs hidden on purpose
    count none: CUDA_VISIBLE_DEVICES empty, or whose first entry is an index CUDA rejects (CUDA
    shows only the devices before the first invalid one; `-1` is the usual spelling)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.split(",")[0].strip() in ("", "-1"):
        return 0
    try:
        names = os.listdir(dev or DEV_DIR)
    except OSError:
        return 0
    return sum(1 for n in names if re.fullmatch(r"nvidia\d+", n))


def without_gpu(cpu_build: bool, given: int) -> tuple[Reason, str]:
    """The reason and the fix for a process that has no GPU to use, from what it knows: the
    job's configuration (permanent) where torch is a CPU build (`cpu_build`) or the pod was
    given no GPU, a GPU fault (retryable, node repair) where the pod was given `given` GPUs
    (`gpu_devices`) that CUDA cannot see. The one answer for torch's own errors (`no_gpu`)
    and for the runtime's refusal to train on CPU in a GPU pod
    (`distributed._refuse_cpu_in_a_gpu_pod`)."""
    if cpu_build:
        return CONFIG_ERROR, CPU_TORCH_FIX
    return (GPU_ERROR, LOST_GPU_FIX.format(n=given)) if given else (CONFIG_ERROR, NO_GPU_FIX)


def cpu_build(text: str = "") -> bool:
    """Whether this process's torch is a CPU build: `torch.version.cuda` where torch is loaded
    (what the process knows), else torch's words in `text` (an image whose torch the library
    cannot import)."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "version", None)
    if version is not None and hasattr(version, "cuda"):
        return version.cuda is None
    return bool(CPU_TORCH_TEXT.search(text))


def no_gpu(text: str) -> tuple[Reason, str] | None:
    """The reason and the fix for a failure for want of a GPU, CUDA or NCCL (None for any
    other), read from torch's message; which of them from `cpu_build` (`without_gpu`)."""
    if NO_GPU_TEXT.search(text):
        return without_gpu(cpu_build(text), gpu_devices())
    return None


def without_fix(detail: str) -> str:
    """An exit record's detail without the fix `diagnose` added (torch's message alone)."""
    lost = re.escape(LOST_GPU_FIX).replace(re.escape("{n}"), r"\d+")
    return re.sub(rf"; (?:{re.escape(CPU_TORCH_FIX)}|{re.escape(NO_GPU_FIX)}|{lost})$", "", detail)


_PEER_TEXT = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|remote process exited|"
    r"ncclRemoteError|Connection refused|remote worker crash|peer .* (closed|died)",
    re.I,
)
_COLLECTIVE_TEXT = re.compile(
    r"\bNCCL\b|\bgloo\b|Timed out waiting|collective operation timeout|ProcessGroup|"
    r"\bc10d\b|Watchdog caught",
    re.I,
)


def classify(exc: BaseException) -> Reason:
    """The reason an exception ends the run (the root of its cause chain counts too)."""
    from trainforge.training.config import ConfigError  # noqa: PLC0415
    from trainforge.training.layout import CheckpointError, CheckpointSaveError  # noqa: PLC0415

    chain = _chain(exc)
    # A save that failed is the platform's, whatever DCP raised inside it (first: its cause
    # chain may hold a CheckpointError or an OSError that would read as the user's).
    for e in chain:
        if isinstance(e, CheckpointSaveError):
            return CHECKPOINT_FAILED
    for e in chain:
        if isinstance(e, ConfigError | CheckpointError):
            return CONFIG_ERROR
    for e in chain:
        if _is_oom(e):
            return OOM
    text = _chain_text(chain)
    if (want := no_gpu(text)) is not None:
        return want[0]
    if _GPU_TEXT.search(text):
        return GPU_ERROR
    dist_types = _dist_types()
    for e in chain:
        if dist_types and isinstance(e, dist_types["network"]):
            return PEER_LOST
    if _PEER_TEXT.search(text):
        return PEER_LOST
    for e in chain:
        if dist_types and isinstance(e, dist_types["backend"]):
            return COLLECTIVE_ERROR
    if _COLLECTIVE_TEXT.search(text):
        return COLLECTIVE_ERROR
    return USER_ERROR


def diagnose(exc: BaseException) -> tuple[Reason, str]:
    """The reason an exception ends the run (`classify`) and the detail its exit line and
    record carry: the exception's first line, and for a failure for want of a GPU what to
    change (`no_gpu`), so `trainforge why`, the report and run-local say the same."""
    reason = classify(exc)
    detail = first_line(exc)
    want = no_gpu(_chain_text(_chain(exc)))
    if want is not None and want[0] is reason:
        detail = f"{detail}; {want[1]}"
    return reason, detail


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes (explicit or implicit), each once."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        chain.append(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return chain


def _chain_text(chain: list[BaseException]) -> str:
    return " | ".join(f"{type(x).__name__}: {x}" for x in chain)


def marked_retryable(exc: BaseException, names: tuple[str, ...]) -> bool:
    """Whether `exc` is an instance of a class its job names in `entrypoint.retryOn`.

    By name, as `except` would match, without importing anything: a dotted name is a class's
    module and qualified name (`mypkg.errors.TransientError`, `builtins.ConnectionError`), a
    bare one a class of that name in any module (`ConnectionError`, `TransientError`); a
    subclass matches its base's name (`ConnectionResetError` is a `ConnectionError`)."""
    wanted = {n.strip() for n in names if n.strip()}
    if not wanted:
        return False
    return any(
        cls.__name__ in wanted or f"{cls.__module__}.{cls.__qualname__}" in wanted
        for cls in type(exc).__mro__
    )


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(e, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(e, RuntimeError) and bool(_OOM_TEXT.search(str(e)))


def _dist_types() -> dict[str, tuple[type, ...]]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    dist = torch.distributed
    network = tuple(
        t
        for t in (getattr(dist, "DistNetworkError", None), getattr(dist, "DistStoreError", None))
        if t is not None
    )
    backend = tuple(t for t in (getattr(dist, "DistBackendError", None),) if t is not None)
    return {"network": network, "backend": backend}


def root_cause(reasons: list[Reason]) -> Reason:
    """The reason that best explains a set of simultaneous failures (ROOT_CAUSE_ORDER)."""
    if not reasons:
        return NODE_LOST
    return min(reasons, key=lambda r: ROOT_CAUSE_ORDER.index(r.name))


def for_code(code: int) -> Reason | None:
    """The reason behind an exit code of ours, or a SIGKILL's (137: node_lost); None
    otherwise (another signal's death, a code of your own)."""
    return BY_CODE.get(code)


def first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0][:limit] if text else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


# Set by the launcher (launch.py) for its workers: a folder of this pod's own exit records, so
# that it learns why a local rank failed even when the run keeps no checkpoint directory; its
# presence also tells a worker that trainforge's launcher, not plain torchrun, runs it.
LOCAL_EXITS_ENV = "TRAINFORGE_LOCAL_EXIT_RECORDS"


def restarts_nothing(reason: Reason) -> bool:
    """Whether no restart can get past `reason`: the run ledger's no_progress stop, which
    every attempt from the same checkpoint meets again. trainforge's launcher restarts no
    worker group that failed with it, whatever torchrun's restarts left (launch.py
    stop_restarts_on_final); other codes, a bug's included, torchrun restarts as it always
    does (an elastic job's maxRestarts is for exceptions of your code too)."""
    return reason is NO_PROGRESS


def _torchrun_restart(reason: Reason | None = None) -> str | None:
    """What torchrun does first when this worker fails, where it has restarts left (the
    worker's TORCHELASTIC_RESTART_COUNT < TORCHELASTIC_MAX_RESTARTS): it restarts the
    workers in the pod, whatever the code (core.failures.torchrun_restarts), but for a
    `reason` no restart gets past (`restarts_nothing`) under trainforge's launcher, which
    its workers know by its LOCAL_EXITS_ENV; None otherwise."""
    count = os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
    most = os.environ.get("TORCHELASTIC_MAX_RESTARTS", "")
    if not (count.isdigit() and most.isdigit()):
        return None
    if reason is not None and restarts_nothing(reason) and os.environ.get(LOCAL_EXITS_ENV):
        return None
    if not failures.torchrun_restarts(int(count), int(most)):
        return None
    return f"torchrun restarts the workers in the pod (restart {int(count) + 1} of {most})"


def next_step(code: int) -> str | None:
    """What the job's controller does after this pod exits `code`, as its emitter told the pod
    (TRAINFORGE_ON_EXIT, trainforge.core.failures.on_exit_words); None where it is not told
    (the library outside a platform pod)."""
    from trainforge.training.contract import ON_EXIT  # noqa: PLC0415 - contract imports config

    value = os.environ.get(ON_EXIT)
    return failures.on_exit_words(value, code) if value else None


def after_success(rank: int | None = None) -> str | None:
    """What follows a failure instead of `next_step` if its job has succeeded already: told
    in TRAINFORGE_ON_EXIT's `succeeded` part (a PyTorchJob, which succeeds once its Master
    has, whatever its Workers do: jobs.success.after_success), for a failure outside the Master's
    pod: the pod's PET_NODE_RANK (the operator's) where set, else the failed `rank` (this
    process's RANK by default) is not 0. None where not told (the job succeeds only when
    every pod has), or for the Master's own failure. Said beside every failure of a Worker's
    once the run ledger says the Master's pod has exited 0 (`master_finished`), and beside a
    lost peer (peer_lost), the failure a Master's exit 0 causes in its Workers, where a rank
    cannot know whether that exit came first, so the line says both."""
    from trainforge.training.contract import ON_EXIT  # noqa: PLC0415 - contract imports config

    value = os.environ.get(ON_EXIT)
    pod = os.environ.get("PET_NODE_RANK")
    who = pod if pod is not None else str(rank) if rank is not None else os.environ.get("RANK")
    if not value or who in ("0", None):
        return None
    return failures.on_exit_succeeded(value)


def run_local_stop(code: int) -> str | None:
    """What follows a Ctrl-C (exit `code` 130) of a process `trainforge run-local` started
    (contract.RUN_LOCAL, which it alone sets; never a pod): the SIGINT reaches run-local too,
    which then re-creates nothing (jobs/local.py `launch`). None elsewhere, and for other
    codes: in a pod, 130 is what its controller makes of any code >= 128 (`next_step`)."""
    from trainforge.training.contract import RUN_LOCAL  # noqa: PLC0415 - contract imports config

    if code != INTERRUPTED.code or not os.environ.get(RUN_LOCAL):
        return None
    return "a stop you asked for: run-local re-creates nothing after a Ctrl-C"


def exit_line(
    reason: Reason,
    *,
    rank: int | None,
    step: int | None,
    detail: str,
    action: str | None = None,
    counted: str | None = None,
) -> str:
    """The one line a log reader needs: reason, code, whether it restarts, what to do (the
    reason's action, or `action` where the failure's own diagnosis knows better: the
    reason's generic one may name what this failure does not have, e.g. a traceback).
    `counted`: the run ledger's count of this end (`ledger_count`), beside the controller's."""
    where = []
    if rank is not None:
        where.append(f"rank {rank}")
    if step is not None:
        where.append(f"step {step}")
    place = f" ({', '.join(where)})" if where else ""
    # One rank cannot know the outcome of a retryable failure: the launcher decides from every
    # rank's cause (a permanent one, ranked first in ROOT_CAUSE_ORDER, wins) and the restart
    # budget. A permanent cause is certain: whatever the peers report, it is the root cause.
    # What the controller then does is the pod's TRAINFORGE_ON_EXIT (`next_step`): without
    # it, what restartPolicy ExitCode does.
    then = next_step(reason.code)
    in_pod = _torchrun_restart(reason)
    if reason is SUCCESS:
        retry = "done"
    elif reason is INTERRUPTED and (stop := run_local_stop(reason.code)) is not None:
        retry = stop  # in a pod, 130 takes the branches below like any code >= 128
        then = None  # run-local's own stop: nothing of the controller's follows
    elif in_pod is not None and reason is INTERRUPTED:
        # torchrun restarts a group whose worker died of a SIGINT sent to it alone; one sent
        # to torchrun itself (kill -INT, a terminal's Ctrl-C) makes it stop every worker with
        # that signal and exit, restarting none (torch 2.13.0 torch/distributed/elastic/
        # agent/server/api.py run(): SignalException -> _shutdown(e.sigval)); the worker
        # cannot tell which, so the line says both
        after = then or ("retryable" if reason.retryable else "permanent")
        retry = (
            f"{in_pod} if the SIGINT reached this process alone; one sent to torchrun stops "
            f"every worker instead and the pod exits 130: {after}"
        )
    elif in_pod is not None:
        retry = in_pod
    elif then is None:
        retry = (
            "retryable: the launcher decides whether the job restarts (another rank's cause "
            "or a spent restart budget may stop it)"
            if reason.retryable
            else "permanent: the job stops"
        )
    elif reason.retryable:
        retry = f"{then}, unless another rank's cause stops the job first"
    else:
        retry = then
    # once the Master's exit 0 has ended the job (the run ledger says so), every exit of a
    # Worker's says what follows it; a lost peer may have been lost to that exit, and says it
    # too (a rank cannot know whether the exit came first)
    succeeded = after_success() if then is not None and in_pod is None else None
    if succeeded is not None and (reason is PEER_LOST or master_finished(context.ledger)):
        retry = f"{retry}; but {succeeded}"
    if counted:
        retry = f"{retry}; {counted}"
    return (
        f"trainforge exit: {reason.name} code={reason.code}{place}: {detail} "
        f"[{retry}; action: {action or reason.action}]"
    )


def master_finished(ledger: object | None) -> bool:
    """Whether the run ledger (a RunLedger, or None) says the Master's pod has ended the run
    with exit 0 as this rank fails (ledger.RunLedger.master_finished). Never raises:
    bookkeeping does not change an exit."""
    check = getattr(ledger, "master_finished", None)
    try:
        return bool(check()) if check is not None else False
    except Exception:  # noqa: BLE001
        return False


def ledger_count(ledger: object | None, reason: Reason) -> str | None:
    """The run ledger's count of an attempt that ends with `reason`, in words
    (ledger.RunLedger.count_words), or None (no ledger, or it counts nothing). Never raises:
    bookkeeping does not change an exit."""
    count = getattr(ledger, "count_words", None)
    try:
        return count(reason) if count is not None else None
    except Exception:  # noqa: BLE001
        return None


def describe_exit(record: dict | None) -> str:
    """An exit record of the run ledger (`reason`, `rank`, `step`, `detail`) as people read
    it: "node_lost (rank 0): rank(s) 0 left no exit record: ...". The one wording of a past
    attempt's end, for the restart line, the no_progress stop and `trainforge report`."""
    if not record:
        return "cause not recorded"
    where = ", ".join(f"{k} {record[k]}" for k in ("rank", "step") if record.get(k) is not None)
    detail = str(record.get("detail") or "").strip()
    return (
        f"{record.get('reason', 'unknown')}"
        + (f" ({where})" if where else "")
        + (f": {detail}" if detail else "")
    )


# Where a container's last words go: the kubelet mounts a file at the container's
# terminationMessagePath (default /dev/termination-log, k8s.io/api core/v1 Container) and puts
# what the process wrote there in the pod's status, `state.terminated.message` (at most 4096
# bytes), which `trainforge status`/`why` read without the ledger's storage.
TERMINATION_LOG = "/dev/termination-log"


def record_fields(reason: Reason) -> dict[str, object]:
    """What an exit record keeps of `reason` beyond its name and code: the sys.exit your code
    asked (user_exit), the checkpoint step saved (preempted), the rank whose failure stopped
    it and its reason (stopped); `from_record` reads them back."""
    out: dict[str, object] = {}
    if reason.asked is not None:
        out["asked"] = reason.asked
    if reason.checkpoint is not None:
        out["checkpoint"] = reason.checkpoint
    if reason.name == STOPPED:
        out.update(by=reason.by, cause=reason.cause)
    return out


def write_termination(reason: Reason | None, path: str | None = None) -> None:
    """Leave the exit record's reason and code as the container's termination message, where
    the kubelet gave the container that file (never created elsewhere: a laptop's /dev);
    None clears an earlier writer's (a worker's, where the launcher knows better)."""
    target = path or TERMINATION_LOG
    if not os.path.isfile(target):
        return
    text = (
        json.dumps({"reason": reason.name, "code": reason.code, **record_fields(reason)})
        if reason is not None
        else ""
    )
    with contextlib.suppress(OSError):  # bookkeeping never changes the exit code
        Path(target).write_text(text, encoding="utf-8")


def leave_record(
    reason: Reason,
    detail: str,
    *,
    ledger: object | None,
    step: int | None = None,
    attempt: int | None = None,
) -> None:
    """The one writer of a process's exit record, for the runtime (`record`, `report`) and
    the wrapper (usercode._record) alike: the container's termination message, which
    `trainforge status`/`why` read (`write_termination`), and the run ledger's record, which
    the launcher and `trainforge report` read (`ledger`: a RunLedger, or None)."""
    write_termination(reason)
    if ledger is None:
        return
    extra = record_fields(reason) or None
    with contextlib.suppress(Exception):  # bookkeeping never changes the exit code
        ledger.record_exit(  # type: ignore[attr-defined]
            reason, step=step, detail=detail, attempt=attempt, extra=extra
        )


def from_termination(message: object, code: object) -> Reason | None:
    """The reason a container's termination message (`write_termination`) gives for exit
    `code`; None where it gives none, or one for another code."""
    if not isinstance(message, str) or not message.strip().startswith("{"):
        return None
    try:
        rec = json.loads(message)
    except ValueError:
        return None
    reason = from_record(rec) if isinstance(rec, dict) else None
    return reason if reason is not None and reason.code == code else None


# --------------------------------------------------------------------- reporting an exit


class RunFailure(Exception):
    """Raised by the runtime for a failure it has already diagnosed (no traceback needed).
    `action`, where given, replaces the reason's in the exit line: no traceback is printed
    for it, so "fix the error in the traceback" (user_error's) would point at nothing."""

    def __init__(self, reason: Reason, detail: str, action: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.action = action


@dataclasses.dataclass
class Context:
    """Where the process is, for the exit line and the ledger (set by the training loop)."""

    rank: int | None = None
    step: int | None = None
    ledger: object | None = None  # trainforge.training.ledger.RunLedger
    # A SIGTERM reached this process (the wrapper's handler or PreemptionHandler's): what
    # tells a preemption's 143 from your code's own sys.exit(143) (usercode.own_exit).
    sigterm: bool = False
    # The newest step trainforge's CheckpointManager saved completely in this process (the
    # runtime's, or your code's through the manager): what a preemption's record says of a
    # checkpoint (`preempted`); None: it saved none, or the code saves its own way.
    checkpoint: int | None = None


context = Context()


def record(reason: Reason, detail: str) -> None:
    """Write this rank's exit record now, without a line: called before the process group is
    torn down, because its peers notice the closed connection at once and may exit first;
    the launcher (launch.py) then still finds why this rank failed. `report` writes the same
    record again with the line."""
    if reason is not SUCCESS:
        leave_record(reason, detail, ledger=context.ledger, step=context.step)


def report(
    reason: Reason, detail: str, *, step: int | None = None, action: str | None = None
) -> int:
    """Print the exit line (`action`: see `exit_line`), leave its record (the termination
    message and the run ledger's: `leave_record`, as the wrapper does); returns the exit
    code."""
    rank = context.rank
    if rank is None:
        env_rank = os.environ.get("RANK", "")
        rank = int(env_rank) if env_rank.isdigit() else None
    step = context.step if step is None else step
    counted = ledger_count(context.ledger, reason)
    line = exit_line(reason, rank=rank, step=step, detail=detail, action=action, counted=counted)
    if reason is SUCCESS:
        if not rank:
            print(line, flush=True)
    elif reason is CONFIG_ERROR:
        if not rank:  # identical on every rank: said once
            print(line, file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)
    leave_record(reason, detail, ledger=context.ledger, step=step)
    return reason.code
