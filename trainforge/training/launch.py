"""`python -m trainforge.training.launch [torchrun flags] -m trainforge.training ...`

torchrun, but its exit code is the failed workers' reason (exits.py) instead of torchrun's
own ``1``. Why: a pod that runs torchrun exits with torchrun's code, and the training
operator's ``restartPolicy: ExitCode`` reads that code (1-127: the job fails, 128-255: the pod
is re-created). Plain torchrun exits 1 whatever its workers did, so every failure would look
permanent. This wrapper runs torchrun in-process (``torch.distributed.run.main``) and, when
the worker group finally fails, exits with the code of the failure that explains the others
(``exits.root_cause``: a rank that hung, raised or was SIGKILLed makes its peers fail in
collectives, and torchrun then SIGTERMs the rest; a rank torchrun SIGKILLs in that teardown
follows the failure: ``teardown_kill``), or 128 + the signal torchrun itself received (143 for
a SIGTERM from the kubelet).

Exit codes alone can lie: a rank that raised writes its exit record, then tears down; its
peer notices the closed connection and exits first with "peer lost", and torchrun SIGTERMs the
rank that was still tearing down, so the bug's own exit code never reaches torchrun. The exit
records the ranks wrote for this failure therefore take part: a record explains a rank better
than the signal that ended it. The ranks write them into a folder this launcher gives them
(``LOCAL_EXITS_ENV``, for this pod's ranks, with or without a checkpoint directory) and into
the run ledger under the checkpoint directory (ledger.py; shared storage, so ranks of other
pods count too).
"""

from __future__ import annotations

if __name__ == "__main__":  # first: before any import a file of yours could shadow
    import sys

    from trainforge.training.shadowing import refuse_at_start

    refuse_at_start(argv=sys.argv[1:])  # its ledger: --checkpoint-dir, else the contract's

import json
import os
import signal
import sys
import tempfile
from pathlib import Path

from trainforge.core import failures
from trainforge.training import exits
from trainforge.training.ledger import EXITS_DIR, LEDGER_DIR, LOCAL_EXITS_ENV, checkpoint_dir

# A record older than this before the first failure torchrun saw belongs to an earlier attempt.
RECORD_WINDOW_S = 30.0


def _reason_for(exitcode: int) -> tuple[int, exits.Reason | None]:
    """(container exit code, reason) for one worker's exit code (negative = killed by signal)."""
    code = 128 - exitcode if exitcode < 0 else exitcode
    return code, exits.for_code(code)


# torchrun's teardown (torch 2.13.0, torch/distributed/elastic/multiprocessing/api.py,
# SubprocessContext._poll and _close, read 2026-11-30 in the v2.13.0 wheel): once a poll finds
# a failed worker it close()s the rest, `_close(death_sig=SIGTERM, timeout=30)`: SIGTERM, and
# SIGKILL to each still alive 30 s later (stuck in a C call); it then captures their ends. A
# failure's `timestamp` (errors/__init__.py, ProcessFailure._set_no_reply_file) is
# int(time.time()) when torchrun captured it: the first failures share the smallest, the
# torn-down ranks' come after it.
def teardown_kill(exitcode: int, when: int | None, first: int | None) -> bool:
    """Whether a worker's end is a SIGKILL torchrun captured after the first failure: a rank
    killed during torchrun's teardown of the group (its own SIGKILL 30 s after its SIGTERM),
    which follows the failure and never explains it."""
    return exitcode == -signal.SIGKILL and when is not None and first is not None and when > first


def worker_exit_code(
    failures: dict[int, int],
    records: dict[int, exits.Reason] | None = None,
    times: dict[int, int] | None = None,
) -> tuple[int, str]:
    """The exit code for the pod, and a one-line explanation, from {global rank: exitcode},
    the exit records {global rank: reason} the ranks wrote for this failure and the time
    torchrun captured each failure {global rank: whole seconds} (`teardown_kill`)."""
    records, times = records or {}, times or {}
    first = min(times.values(), default=None)
    parts = []
    candidates: list[tuple[int, int, exits.Reason | None]] = []
    followers: list[tuple[int, int]] = []
    for rank, exitcode in sorted(failures.items()):
        code, reason = _reason_for(exitcode)
        if exitcode < 0:
            label = f"killed by {_signal_name(-exitcode)}"
        else:
            label = reason.name if reason else "unknown"
        recorded = records.get(rank)
        if recorded is not None and exitcode >= 0 and recorded.code == code:
            label = recorded.label  # the record says who chose the code (user_exit: your code)
            reason = recorded
        elif recorded is not None and recorded != reason:
            label += f", recorded {recorded.name}"
            code, reason = recorded.code, recorded
        elif teardown_kill(exitcode, times.get(rank), first):
            late = times[rank] - first  # type: ignore[operator]
            label += f" {late} s after the first failure, in torchrun's teardown: a follower"
            followers.append((rank, code))
            parts.append(f"rank {rank} exit {exitcode} ({label})")
            continue
        parts.append(f"rank {rank} exit {exitcode} ({label})")
        candidates.append((rank, code, reason))
    for rank, recorded in sorted(records.items()):  # ranks of other pods, same failure
        if rank not in failures:
            parts.append(f"rank {rank} recorded {recorded.name}")
            candidates.append((rank, recorded.code, recorded))
    known = [c for c in candidates if c[2] is not None]
    if known:
        root = exits.root_cause([c[2] for c in known])  # type: ignore[misc]
        rank, code, _ = next(c for c in known if c[2] is root)
        why = f"{root.label}, {_then(code)}"
    else:  # only other signals' deaths, foreign codes or teardown kills: the first failure's
        rank, code = min(
            [(r, c) for r, c, _ in candidates] or followers,
            key=lambda rc: (times.get(rc[0], 0), rc[0]),
        )
        why = _then(code)
    return code, f"workers failed: {'; '.join(parts)}; exiting with {code} ({why}, rank {rank})"


def pod_reason(code: int, records: dict[int, exits.Reason]) -> exits.Reason | None:
    """The reason behind the pod's exit `code`: the root cause among the records with that
    code (user_exit where your code chose it), else the runtime's reason for the code."""
    same = [r for r in records.values() if r.code == code]
    return exits.root_cause(same) if same else exits.for_code(code)


def stopped_reason(code: int, records: dict[int, exits.Reason]) -> exits.Reason | None:
    """The pod's reason when a signal stopped the launcher (exit `code`): for a SIGTERM,
    preempted, with the checkpoint its ranks' records say they saved (the oldest of theirs,
    where every rank that recorded a preemption names one: exits.preempted), else without
    one; for a SIGINT, interrupted (you stopped it); None (the message cleared) for another
    signal."""
    if code == exits.INTERRUPTED.code:
        return exits.INTERRUPTED
    if code != exits.PREEMPTED.code:
        return None
    saved = [r.checkpoint for r in records.values() if exits.is_preempted(r)]
    known = [s for s in saved if s is not None]
    return exits.preempted(min(known) if known and len(known) == len(saved) else None)


def _then(code: int) -> str:
    """What the job's controller does after exit `code`, where the pod was told
    (exits.next_step); else the code's class (the operator's: retryable 128-255, permanent
    1-127)."""
    then = exits.next_step(code)
    return then or ("retryable" if failures.operator_retries(code) else "permanent")


def failure_records(
    ckpt: str | None, first_failure: float, local: str | None = None
) -> dict[int, exits.Reason]:
    """{rank: reason} from the newest attempt's exit records written for this failure: the
    run ledger's (all pods) and this pod's own folder `local` (which wins for its ranks)."""
    out: dict[int, exits.Reason] = {}
    if ckpt:
        out.update(_records_in(Path(ckpt) / LEDGER_DIR / EXITS_DIR, first_failure))
    if local:
        out.update(_records_in(Path(local), first_failure))
    return out


def _records_in(folder: Path, first_failure: float) -> dict[int, exits.Reason]:
    attempts = sorted(folder.glob("attempt_*")) if folder.is_dir() else []
    out: dict[int, exits.Reason] = {}
    for path in sorted(attempts[-1].glob("rank_*.json")) if attempts else []:
        try:
            rec = json.loads(path.read_text())
            reason = exits.from_record(rec)
            if reason is not None and float(rec["time"]) >= first_failure - RECORD_WINDOW_S:
                out[int(rec["rank"])] = reason
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a half-written record says nothing
    return out


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def main(argv: list[str] | None = None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="trainforge-exits-") as local:
        os.environ[LOCAL_EXITS_ENV] = local  # torchrun's workers inherit it
        try:
            return _launch(argv, local)
        finally:
            os.environ.pop(LOCAL_EXITS_ENV, None)


def _launch(argv: list[str], local: str) -> int:
    from trainforge.core.process import frozen_imports

    with frozen_imports(own_process=__name__ == "__main__"):  # torch: not walked again
        from torch.distributed.elastic.multiprocessing import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(argv)
    except ChildFailedError as e:
        failures = {int(rank): int(f.exitcode) for rank, f in e.failures.items()}
        times = {int(rank): int(f.timestamp) for rank, f in e.failures.items()}
        first = min(times.values(), default=0)
        records = failure_records(checkpoint_dir(argv), float(first), local)
        code, line = worker_exit_code(failures, records, times)
        print(f"trainforge launch: {line}", file=sys.stderr, flush=True)
        exits.write_termination(pod_reason(code, records))  # the pod's, over its workers'
        return code
    except SignalException as e:
        code = 128 + int(e.sigval)
        # the pod's end, over what its workers wrote as they were stopped (status/why read it)
        exits.write_termination(stopped_reason(code, failure_records(None, 0.0, local)))
        print(
            f"trainforge launch: received {_signal_name(int(e.sigval))}; workers stopped; "
            f"exiting with {code} ({_then(code)})",
            file=sys.stderr,
            flush=True,
        )
        return code
    return 0


if __name__ == "__main__":
    from trainforge.core.process import exit_code

    sys.exit(exit_code(main()))
