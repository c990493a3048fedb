"""`python -m trainforge.training [flags]`: one process of a DDP/FSDP2 training job.

The exit code says why the process ended (exits.py): below 128 the job stops (a bug, bad
flags, out of memory), 128 and above the job controller restarts it (a hang, a collective
error, a lost peer, preemption). The last line a failing rank prints says which, and what to
do about it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback

from trainforge.training import versions
from trainforge.training.config import TrainConfig, parse_args
from trainforge.training.layout import ctrl_c_detail_before_steps


def _without_torch() -> str:
    """Why the runtime cannot start without torch, and how to get it, in one sentence."""
    return (
        f"torch is not installed for {sys.executable}; the runtime needs torch "
        f"{versions.supported_range()}: run `make venv` and use .venv/bin/python (or pip "
        "install 'trainforge[train]'); in a pod, use an image with a supported torch "
        "(docs/images.md)"
    )


def _self_check(args: list[str]) -> bool:
    return any(a == "--self-check" or a.startswith("--self-check=") for a in args)


def _failed(code: int, own_process: bool) -> int:
    """A failing rank's exit code, or, at its process's entry point, its end: `leave` while
    the failure's traceback still holds the process groups that `loop.train` aborted, so no
    group is freed and none of its destructors waits for a collective its peers may never
    join (`distributed.abort`); the peers see the closed connections at once. What must
    outlive the rank is already done or done by `leave`: the exit line and record
    (exits.report), the metrics (closed by the loop), a checkpoint write in flight (its
    thread is joined, as at any exit), the output files (flushed)."""
    if own_process:
        from trainforge.core.process import exit_code, leave

        leave(exit_code(code))
    return code


def main(argv: list[str] | None = None, *, own_process: bool = False) -> int:
    """``own_process``: called by this module run as ``__main__`` (a failure ends the process
    by `_failed`); in-process callers get the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    from trainforge.training import selfcheck

    if _self_check(args):
        return selfcheck.main(args)
    cfg = parse_args(argv)  # bad flags: usage + message, exit 2, before anything starts
    from trainforge.training import exits

    try:
        return _run(cfg, own_process)
    except KeyboardInterrupt:
        # Ctrl-C before the run resumed its step (torch's import, the process group, the
        # model build): the line a Ctrl-C in the loop prints, read from the disk, not the bare
        # `KeyboardInterrupt` (or the import's traceback). Later ones: loop._train's.
        detail = ctrl_c_detail_before_steps(cfg.checkpoint.directory)
        return _failed(exits.report(exits.INTERRUPTED, detail), own_process)


def _run(cfg: TrainConfig, own_process: bool) -> int:
    """The run of `main`, from its start-up lines to its exit line."""
    from trainforge.training import selfcheck

    if os.environ.get("RANK", "0") in ("", "0"):
        # The first lines of the run: which of MLflow, the S3 mirror and EFA are on, and why
        # not where they are off (a feature that silently does nothing is worse than none).
        for line in selfcheck.startup_lines(cfg.checkpoint.s3_uri):
            print(line, flush=True)
    from trainforge.core.process import frozen_imports

    with frozen_imports(own_process=__name__ == "__main__"):  # torch: not walked again
        from trainforge.training import exits

        if importlib.util.find_spec("torch") is None:
            # by an interpreter without the venv (or an image without torch): one line, not
            # the ModuleNotFoundError traceback of the loop's first import
            return exits.report(exits.CONFIG_ERROR, _without_torch())
        from trainforge.training.loop import train

    try:
        code = train(cfg)
    except exits.RunFailure as e:
        return _failed(exits.report(e.reason, e.detail, action=e.action), own_process)
    except Exception as e:  # noqa: BLE001 - every failure leaves with its reason and code
        reason, detail = exits.diagnose(e)
        if reason is exits.CONFIG_ERROR:
            # Raised identically on every rank (they see the same flags and data); print once.
            if not exits.context.rank:
                print(f"error: {e}", file=sys.stderr, flush=True)
        else:
            traceback.print_exc()
        return _failed(exits.report(reason, detail), own_process)
    if code == exits.PREEMPTED.code:  # says the checkpoint the stop saved, if it saved one
        reason = exits.preempted(exits.context.checkpoint)
        return exits.report(reason, reason.what)
    reason = exits.BY_CODE.get(code, exits.USER_ERROR)
    detail = "training finished" if code == 0 else f"exit code {code}"
    return exits.report(reason, detail) if reason.code == code else code


if __name__ == "__main__":
    from trainforge.core.process import exit_code
    from trainforge.training.streams import whole_lines

    whole_lines()  # ranks share one stdout: each line leaves whole
    sys.exit(exit_code(main(own_process=True)))
