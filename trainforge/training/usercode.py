"""`python -m trainforge.training.usercode SCRIPT [args]` (or `-m MODULE [args]`): your code,
with the runtime's exit classification and run ledger.

Why: code that does not use the library ends in an uncaught exception when a peer is lost
(gloo's "Connection reset by peer", NCCL's remote error, a collective timeout): Python exits
1, which `restartPolicy: ExitCode` treats as permanent, so one lost node would end the job.
This wrapper runs the script or module exactly as `python SCRIPT` / `python -m MODULE` would
(runpy: `__main__`, sys.argv, sys.path[0]) and, when it raises, prints the traceback, names
the reason with the runtime's classifier (exits.py: a lost peer 202 and a collective error 200
are retryable, a bug 1 is not) and exits with that reason's code. `sys.exit(n)` keeps n, and
its exit line and record say `user_exit`: your code's, not a reason of the runtime's (own_exit).
An exception the job lists in `entrypoint.retryOn` (TRAINFORGE_RETRY_ON, contract.py) is
yours to call retryable: it exits 205 (user_retryable), as `sys.exit(205)` does.

The restart policies act on that code on every backend (trainforge/jobs/restarts.py): a
PyTorchJob's `restartPolicy: ExitCode` fails the job on 1-127 and re-creates the pod on
128-255; the Jobs of a TrainJob and of the indexed-job backend fail on 1-127 through a pod
failure policy. ExitCode re-creations are not counted by the training operator, so where the
ledger is on shared storage this wrapper bounds them as the runtime does: an attempt that
follows NO_PROGRESS_LIMIT failed attempts in a row from the same checkpoint (the newest
step_<N> one in the checkpoint directory when each began: `start_check`) exits 4
(no_progress, permanent).

It also keeps the run ledger every job has (ledger.py, under TRAINFORGE_CHECKPOINT_DIR):
rank 0 registers the attempt when it starts, and every rank records why it ended, so
`trainforge report` shows attempts, restarts and their causes for any code. The pods and
`trainforge run-local` both run user code through it (trainforge/jobs/entrypoint.py).

Its process leaves without the interpreter's finalization once the code's exit code is known
(trainforge/core/process.leave), keeping what the code left (its globals, its exception):
gloo work of a group the code left that completed there aborted the rank (exit 134).
"""

from __future__ import annotations

if __name__ == "__main__":  # first: before any import a file of yours could shadow
    import sys

    from trainforge.training.shadowing import refuse_at_start

    refuse_at_start(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-m" else None, rank=True)

import json
import os
import runpy
import signal
import sys
import threading
import traceback
from pathlib import Path

from trainforge.training import exits, shadowing
from trainforge.training.contract import CHECKPOINT_DIR, LOCAL_STAND_INS, retry_on

USAGE = "usage: python -m trainforge.training.usercode (SCRIPT | -m MODULE) [args ...]"
# who expected the real module, for a shadowing file met after the start-up (shadowing.behind)
_LATE = "which your code or a library it uses expected"


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else default


def _ledger():
    """This rank's run ledger (None where it cannot be kept: bookkeeping never stops a job)."""
    from trainforge.training.ledger import RunLedger  # noqa: PLC0415

    try:
        ledger = RunLedger(
            os.environ.get(CHECKPOINT_DIR) or None,
            rank=_int_env("RANK", 0),
            world_size=_int_env("WORLD_SIZE", 1),
            log=lambda msg: print(f"trainforge: {msg}", file=sys.stderr, flush=True),
        )
        if ledger.rank == 0:
            ledger.begin_attempt()
        return ledger
    except Exception:  # noqa: BLE001
        return None


def _current_attempt(ledger) -> int | None:
    """The attempt rank 0 registered (other ranks read it when they end)."""
    if ledger is None or ledger.rank == 0 or ledger.root is None:
        return None
    from trainforge.training.ledger import RUN_FILE, _read_json  # noqa: PLC0415

    data = _read_json(ledger.root / RUN_FILE)
    attempts = data.get("attempts") if isinstance(data, dict) else None
    if attempts and isinstance(attempts[-1], dict):
        return int(attempts[-1].get("attempt", 0))
    return None


# The action of an OOM in your code: exits.OOM's names the bundled runtime's flags
# (--batch-size, --grad-accum, --activation-checkpointing, --strategy), which your script does
# not have.
OWN_CODE_OOM_ACTION = (
    "use less memory per process: a smaller batch (gradient accumulation keeps the global "
    "batch), activation checkpointing, bf16 or FSDP, or a pool whose nodes have more"
)


# docs/images.md's section on adding packages to the image the pods run
EXTEND_IMAGE = 'docs/images.md, "Extend it with your own dependencies"'


def _stand_in(path: str) -> tuple[str, str] | None:
    """(the pod path run-local's local `path` stands for, the claim that provides it) where
    `path` lies in one of run-local's stand-in directories (LOCAL_STAND_INS), else None."""
    try:
        mapping = json.loads(os.environ.get(LOCAL_STAND_INS) or "[]")
    except ValueError:
        return None
    for pod, local, claim in sorted(mapping, key=lambda m: -len(m[1])):  # innermost first
        if path == local or path.startswith(local.rstrip("/") + "/"):
            return pod + path[len(local.rstrip("/")) :], claim
    return None


def _pod_path(path: str) -> tuple[str, str] | None:
    """(run-local's stand-in for `path`, the pod path it is under) where `path` is itself a
    pod path of one of run-local's stand-ins (LOCAL_STAND_INS): written in the code, it was
    opened as written (run-local rewrites arguments and env values only), so it is missing
    here though the pod has it. None otherwise."""
    try:
        mapping = json.loads(os.environ.get(LOCAL_STAND_INS) or "[]")
    except ValueError:
        return None
    for pod, local, _claim in sorted(mapping, key=lambda m: -len(m[0])):  # innermost first
        if path == pod or path.startswith(pod.rstrip("/") + "/"):
            return local.rstrip("/") + path[len(pod.rstrip("/")) :], pod
    return None


def _missing_action(exc: BaseException) -> str | None:
    """The fix of a missing file or module, where the process knows more than the traceback:
    a file in run-local's stand-in for a volume (the pod path and the `--volume` that gives
    it), a module that is not installed (where the pods get their packages)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (
            f"module {exc.name!r} is not installed where your code ran: a package the pods need "
            f"must be in the job's image ({EXTEND_IMAGE}); under run-local, install it in "
            "this Python; a module of your own must be in the shipped folder (codeDir)"
        )
    if isinstance(exc, FileNotFoundError) and isinstance(exc.filename, str):
        known = _stand_in(exc.filename)
        if known is not None:
            pod, claim = known
            give = (
                f"; or give run-local the directory that holds it: --volume {claim}=DIR"
                if claim
                else ""
            )
            return (
                f"{exc.filename} is run-local's local stand-in for the pod path {pod}, and it "
                f"is not there: put the file there{give}"
            )
        if (here := _pod_path(exc.filename)) is not None:
            local, pod = here
            return (
                f"{exc.filename} is on the volume the pod mounts at {pod}; run-local gives "
                f"its stand-in ({local}) to the command's arguments and env values only, not "
                "to a path written in the code: pass the path as an argument or an env value"
            )
    return None


def _action(reason: exits.Reason, exc: BaseException) -> str | None:
    """The exit line's action where the reason's own would not fit your code (None: the
    reason's): a library failure's own (RunFailure.action), an OOM's without runtime flags,
    a missing file's or module's (`_missing_action`)."""
    if isinstance(exc, exits.RunFailure):
        return exc.action
    if reason is exits.OOM:
        return OWN_CODE_OOM_ACTION
    return _missing_action(exc) if reason is exits.USER_ERROR else None


# The frames of this wrapper and of runpy above your code's first one: `python SCRIPT`
# shows none of them, and the traceback is yours (docs/jobs.md: it runs "exactly as python
# SCRIPT would").
_WRAPPER_FILES = frozenset(
    {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
)


def _wrapper_frame(filename: str) -> bool:
    """A frame of this wrapper or of runpy (a frozen module's `<frozen runpy>` too)."""
    return filename in _WRAPPER_FILES or os.path.abspath(filename) in _WRAPPER_FILES


def print_traceback(exc: BaseException) -> None:
    """Print `exc`'s traceback as `python SCRIPT` would: without the wrapper's frames on top
    (all of them kept where nothing of yours is left: a failure of the wrapper itself)."""
    tb = exc.__traceback__
    while tb is not None and _wrapper_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def _diagnose(exc: BaseException) -> tuple[exits.Reason, str]:
    """The reason the code ended with and the detail of its exit line and record."""
    if isinstance(exc, exits.RunFailure):  # diagnosed already (the library's own failures)
        return exc.reason, exc.detail
    if exits.marked_retryable(exc, retry_on()):  # the job's entrypoint.retryOn
        return exits.USER_RETRYABLE, exits.first_line(exc)
    try:
        return exits.diagnose(exc)
    except ImportError:  # an image whose torch the library cannot import: judge by the text
        text = f"{type(exc).__name__}: {exc}"
        detail = exits.first_line(exc)
        if (want := exits.no_gpu(text)) is not None:
            return want[0], f"{detail}; {want[1]}"
        if exits._PEER_TEXT.search(text):
            return exits.PEER_LOST, detail
        if exits._COLLECTIVE_TEXT.search(text):
            return exits.COLLECTIVE_ERROR, detail
        return exits.OOM if isinstance(exc, MemoryError) else exits.USER_ERROR, detail


def no_progress(ledger, step: int | None = None) -> str | None:
    """Why this attempt must not run (rank 0, the ledger on storage that outlives the pod):
    NO_PROGRESS_LIMIT attempts in a row failed right before it (before resuming, or, with
    `step`, after resuming from that step: a CheckpointManager's restore notes it, see
    `_stop_without_progress`). The training operator re-creates an ExitCode pod that exits
    >= 128 without counting it; this is the count (the plan rehearses it:
    trainforge.plan.checks.retry_bounds.ledger_bound)."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT  # noqa: PLC0415

    if ledger is None or ledger.rank != 0 or not ledger.persistent:
        return None
    try:
        failed = ledger.attempts_without_progress(step)
    except Exception:  # noqa: BLE001 - bookkeeping never stops a job on its own
        return None
    if failed < NO_PROGRESS_LIMIT:
        return None
    after = f" after resuming from step {step}" if step is not None else ""
    return (
        f"{failed} attempts in a row failed{after} (limit {NO_PROGRESS_LIMIT}); the last one: "
        f"{exits.describe_exit(ledger.previous_exit())}"
    )


def start_check(ledger) -> str | None:
    """Rank 0, before your code runs: note where this attempt starts from, the newest
    step_<N> checkpoint in the checkpoint directory (layout.newest_saved, the naming
    docs/jobs.md asks of your code and `trainforge report` counts; 0: none), and say why it
    must not run: NO_PROGRESS_LIMIT attempts in a row failed before it that started from
    that same checkpoint (None: it runs).

    Why the checkpoint and not a count of failures alone: code that saves and resumes makes
    progress between failures (a node lost every few hours of a multi-day run), and five such
    failures in a row ended a healthy job as no_progress. An attempt that began with a newer
    checkpoint than the one before it got further, and the count begins again. A checkpoint
    under another name (`last.pt`) is not seen: the stop says so."""
    from trainforge.training import layout  # noqa: PLC0415
    from trainforge.training.ledger import NO_PROGRESS_LIMIT  # noqa: PLC0415

    if ledger is None or ledger.rank != 0 or not ledger.persistent:
        return None
    folder = ledger.root.parent
    try:
        newest = layout.newest_saved(folder)
        step = newest.step if newest is not None else 0
        ledger.current.checkpoint_at_start = step
        ledger.save()
        failed = ledger.attempts_without_progress(step)
    except Exception:  # noqa: BLE001 - bookkeeping never stops a job on its own
        return None
    if failed < NO_PROGRESS_LIMIT:
        return None
    seen = (
        f"the newest checkpoint stayed {newest.name}"
        if newest is not None
        else "no step_<N> checkpoint appeared"
    )
    why = (
        f"{failed} attempts in a row failed and {seen} in {folder} (limit {NO_PROGRESS_LIMIT}); "
        f"the last one: {exits.describe_exit(ledger.previous_exit())}"
    )
    other = layout.other_entries(folder)
    if other:
        shown = ", ".join(other[:3]) + (" ..." if len(other) > 3 else "")
        why += (
            f"; not read as progress: {shown} (a checkpoint is named step_<N>, e.g. "
            "step_<N>.pt: name yours so)"
        )
    return why


def _stop_without_progress(ledger, step: int) -> None:
    """After your code's CheckpointManager resumed from `step` (resume_note): stop an attempt
    that follows NO_PROGRESS_LIMIT failed ones from that same step."""
    why = no_progress(ledger, step)
    if why is not None:
        raise exits.RunFailure(exits.NO_PROGRESS, why)


# Set once this process has recorded how it ends: a SIGTERM after that (torchrun stopping
# the other workers of a pod whose rank failed, run-local's one torchrun stopping every rank)
# is not a preemption of a process that was leaving with its own reason.
_ENDED: list[exits.Reason] = []


def _record(ledger, reason: exits.Reason, detail: str) -> None:
    _ENDED.append(reason)
    # the runtime's own writer: the termination message status/why read, the ledger's record
    exits.leave_record(reason, detail, ledger=ledger, attempt=_current_attempt(ledger))


def _record_termination(ledger, script: str | None = None) -> None:
    """An unhandled SIGTERM (a spot interruption, a node drain, a preempting job) is recorded
    as `preempted` before the process dies of it as it always did (status 143, the same
    restart under every backend's retry rules).

    Why: the kubelet's SIGTERM killed the code before it left a record, so the next attempt
    counted it as one more failure in a row, and 5 spot interruptions stopped a healthy job
    as `no_progress`. Code that handles SIGTERM itself (`PreemptionHandler`, its own
    `signal.signal`) replaces this handler and keeps its own behaviour. Best effort: Python
    runs the handler between bytecodes, so code blocked in one long native call until the
    kubelet's SIGKILL still leaves no record (counted as before).

    A SIGTERM that comes while your code is leaving with an exception (in a `finally`, an
    `__exit__`, an `except` block: sys.exc_info) or a non-zero sys.exit is torchrun stopping
    a rank that failed more slowly than the peer that noticed it: recorded as that exception's
    reason (or that exit), not `preempted`, so the launcher's root cause is the bug and not
    the peer's `peer_lost` (recorded `preempted` before: a bug re-created the pods as a lost
    peer). An exception your code was about to swallow when a real preemption came is then
    recorded as its reason: the restart is the same (the process dies of the SIGTERM)."""
    if ledger is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # somebody handles it already

    def on_term(signum: int, frame: object) -> None:
        exits.context.sigterm = True
        if _ENDED:  # leaving already, with the reason it recorded (and its exit code)
            return
        leaving = sys.exc_info()[1]
        after = (
            "; a SIGTERM came while it was leaving (torchrun stopping the workers once a rank "
            "failed, or a preemption)"
        )
        if isinstance(leaving, SystemExit) and exits.exit_status(leaving.code) != 0:
            _exited(ledger, leaving.code, after)
        elif leaving is not None and not isinstance(leaving, SystemExit | KeyboardInterrupt):
            _failed(ledger, leaving, script, after)
        else:  # what is known of a checkpoint: your code's CheckpointManager's, if it saved
            reason = exits.preempted(exits.context.checkpoint)
            _record(ledger, reason, f"{reason.what} (a spot interruption, a drain or a deletion)")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)


def _exit_code(value: object) -> int:
    """The status `sys.exit(value)` gives the process (exits.exit_status), printing a value
    that is not an int, as Python does."""
    if value is not None and not isinstance(value, int):
        print(value, file=sys.stderr)  # sys.exit("message"), as Python does
    return exits.exit_status(value)


def run(argv: list[str], keep: list[object] | None = None) -> int:
    """Run your code and return the exit code its end promises. `keep` (the process's own
    entry point): gets what the code left, its globals or its exception, so nothing of it
    (a live process group) is destroyed before the process leaves (core/process.leave)."""
    keep = [] if keep is None else keep
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return exits.CONFIG_ERROR.code
    script: str | None = None
    if argv[0] == "-m":
        module, args = argv[1], argv[2:]
        sys.argv = [module, *args]
        target = lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        script, args = argv[0], argv[1:]
        sys.argv = [script, *args]
        sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` sets it
        target = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731
    ledger = _ledger()
    stop = start_check(ledger)
    if stop is not None:
        print(exits.exit_line(exits.NO_PROGRESS, rank=0, step=None, detail=stop),
              file=sys.stderr, flush=True)  # fmt: skip
        _record(ledger, exits.NO_PROGRESS, stop)
        return exits.NO_PROGRESS.code
    from trainforge.training.resume_note import check_on_resume  # noqa: PLC0415

    check_on_resume(_stop_without_progress)
    _record_termination(ledger, script)
    try:
        keep.append(target())
    except SystemExit as e:
        keep.append(e)
        return _exited(ledger, e.code)
    except KeyboardInterrupt as e:
        keep.append(e)
        print_traceback(e)
        from trainforge.training.layout import ctrl_c_detail  # noqa: PLC0415

        # what is saved and what the next run resumes from, in the runtime's words (one function)
        reason, detail = exits.INTERRUPTED, ctrl_c_detail(os.environ.get(CHECKPOINT_DIR) or None)
        print(exits.exit_line(reason, rank=_rank(), step=None, detail=detail),
              file=sys.stderr, flush=True)  # fmt: skip
        _record(ledger, reason, detail)
        return reason.code
    except BaseException as e:  # noqa: BLE001 - every failure leaves with its reason's code
        keep.append(e)
        return _failed(ledger, e, script)
    return _exited(ledger, None)


def _rank() -> int | None:
    rank = os.environ.get("RANK")
    return int(rank) if rank and rank.isdigit() else None


def _failed(ledger, e: BaseException, script: str | None, after: str = "") -> int:
    """Print and record the reason your code's exception `e` ends the process with (`after`:
    what the detail adds); its exit code."""
    shadow = shadowing.behind(e, script)
    if shadow is not None:  # a file of yours in a standard module's place: its line says it
        reason, detail = exits.CONFIG_ERROR, f"{shadow[0]} {shadowing.why(shadow[1], _LATE)}"
        action = None
    else:
        if not isinstance(e, exits.RunFailure):  # diagnosed already: its line says it all
            print_traceback(e)
        reason, detail = _diagnose(e)
        action = _action(reason, e)
    detail += after
    counted = exits.ledger_count(ledger, reason)
    line = exits.exit_line(
        reason, rank=_rank(), step=None, detail=detail, action=action, counted=counted
    )
    print(line, file=sys.stderr, flush=True)
    _record(ledger, reason, detail)
    return reason.code


def _exited(ledger, value: object, after: str = "") -> int:
    """Print and record how your code's `sys.exit(value)` (None: its return) ends the
    process (`after`: what the detail adds); the status it has."""
    code, said = _exit_code(value), exits.asked(value)
    reason = own_exit(code, said)
    detail = reason.what + after
    if reason is exits.SUCCESS:
        if said is None:
            _record(ledger, reason, "finished")
            return code
        detail = f"your code asked sys.exit({said}); the process exits 0 ({said} & 0xff)"
    counted = exits.ledger_count(ledger, reason)
    line = exits.exit_line(reason, rank=_rank(), step=None, detail=detail, counted=counted)
    print(line, file=sys.stderr, flush=True)
    _record(ledger, reason, detail)
    return code


def own_exit(code: int, said: str | None = None) -> exits.Reason:
    """The reason of the status `code` your code's `sys.exit` gave the process (`said`: what
    it passed, where that differs: exits.asked): the code is kept, the controller reads it,
    but the reason is yours (exits.user_exit), never a runtime reason the runtime did not
    decide. Two codes passed as such keep the meaning the contract gives them: 205 (you mark
    the failure retryable, docs/jobs.md) and 143 after a SIGTERM reached this process
    (PreemptionHandler.shutdown's, which your code passes to sys.exit), saying the checkpoint
    your code saved through trainforge's CheckpointManager, if any (exits.preempted: a save
    function of its own is not seen); a 143 without one is your code's own (user_exit), as
    the operator reads it: retryable, the pod is re-created."""
    if code == 0:
        return exits.SUCCESS
    if said is None and code == exits.USER_RETRYABLE.code:
        return exits.USER_RETRYABLE
    if said is None and code == exits.PREEMPTED.code and exits.context.sigterm:
        return exits.preempted(exits.context.checkpoint)
    return exits.user_exit(code, said)


def main(keep: list[object] | None = None) -> int:
    return run(sys.argv[1:], keep)


if __name__ == "__main__":
    from trainforge.core.process import exit_code, freeze_first_import, leave
    from trainforge.training.streams import whole_lines

    whole_lines()  # ranks share one stdout: your prints leave in whole lines

    freeze_first_import("torch")  # your code's import of it: not walked again by the collector
    # Your code has ended and its exit code is known: the process leaves without the
    # interpreter's finalization, where gloo work of a group your code left could abort the
    # rank (exit 134, core/process.py); what it left is kept to the end.
    _left: list[object] = []
    leave(exit_code(main(_left)))
