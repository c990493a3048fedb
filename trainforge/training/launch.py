"""`python -m trainforge.training.launch [torchrun flags] -m trainforge.training ...`

torchrun, but its exit code is the failed workers' reason (exits.py) instead of torchrun's
own ``1``. Why: a pod that runs torchrun exits with torchrun's code, and the training
operator's ``restartPolicy: ExitCode`` reads that code (1-127: the job fails, 128-255: the pod
is re-created). Plain torchrun exits 1 whatever its workers did, so every failure would look
permanent. This wrapper runs torchrun in-process (``torch.distributed.run.main``) and, when
the worker group finally fails, exits with the code of the failure that explains the others
(``exits.root_cause``: a rank that hung or raised makes its peers fail in collectives), or
128 + the signal torchrun itself received (143 for a SIGTERM from the kubelet).
"""

from __future__ import annotations

import signal
import sys

from trainforge.training import exits


def _reason_for(exitcode: int) -> tuple[int, exits.Reason | None]:
    """(container exit code, reason) for one worker's exit code (negative = killed by signal)."""
    code = 128 - exitcode if exitcode < 0 else exitcode
    return code, exits.for_code(code)


def worker_exit_code(failures: dict[int, int]) -> tuple[int, str]:
    """The exit code for the pod, and a one-line explanation, from {global rank: exitcode}."""
    parts = []
    candidates: list[tuple[int, int, exits.Reason | None]] = []
    for rank, exitcode in sorted(failures.items()):
        code, reason = _reason_for(exitcode)
        if exitcode < 0:
            label = f"killed by {_signal_name(-exitcode)}"
        else:
            label = reason.name if reason else "unknown"
        parts.append(f"rank {rank} exit {exitcode} ({label})")
        candidates.append((rank, code, reason))
    known = [c for c in candidates if c[2] is not None]
    if known:
        root = exits.root_cause([c[2] for c in known])  # type: ignore[misc]
        rank, code, _ = next(c for c in known if c[2] is root)
        why = f"{root.name}, {'retryable' if root.retryable else 'permanent'}"
    else:  # only signal deaths or foreign codes: keep the first one (SIGKILL: 137, retryable)
        rank, code, _ = candidates[0]
        why = "retryable" if code >= 128 else "permanent"
    return code, f"workers failed: {'; '.join(parts)}; exiting with {code} ({why}, rank {rank})"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(argv if argv is not None else sys.argv[1:])
    except ChildFailedError as e:
        failures = {int(rank): int(f.exitcode) for rank, f in e.failures.items()}
        code, line = worker_exit_code(failures)
        print(f"trainforge launch: {line}", file=sys.stderr, flush=True)
        return code
    except SignalException as e:
        code = 128 + int(e.sigval)
        print(
            f"trainforge launch: received {_signal_name(int(e.sigval))}; workers stopped; "
            f"exiting with {code} (retryable)",
            file=sys.stderr,
            flush=True,
        )
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
