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

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainforge.core import failures
from trainforge.training import exits, torchrun_env
from trainforge.training.ledger import (
    EXITS_DIR,
    LEDGER_DIR,
    LOCAL_EXITS_ENV,
    checkpoint_dir,
    master_finished,
    master_ranks,
)

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
    code, _, _, line = verdict(failures, records, times)
    return code, line


def verdict(
    failures: dict[int, int],
    records: dict[int, exits.Reason] | None = None,
    times: dict[int, int] | None = None,
    master_done: bool = False,
) -> tuple[int, int, exits.Reason | None, str]:
    """`worker_exit_code`'s (code, the root cause's rank, its reason or None, line).
    `master_done`: the run ledger says the Master's pod has ended the run with exit 0
    (ledger.master_finished): a Worker's failure, whatever its cause, then says what follows
    the job's success, as its rank's own exit line does (exits.exit_line)."""
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
    root: exits.Reason | None = None
    if known:
        root = exits.root_cause([c[2] for c in known])  # type: ignore[misc]
        rank, code, _ = next(c for c in known if c[2] is root)
        told = rank if root is exits.PEER_LOST or master_done else 0
        why = f"{root.label}, {_then(code, told)}"
    else:  # only other signals' deaths, foreign codes or teardown kills: the first failure's
        rank, code = min(
            [(r, c) for r, c, _ in candidates] or followers,
            key=lambda rc: (times.get(rc[0], 0), rc[0]),
        )
        why = _then(code)
    line = f"workers failed: {'; '.join(parts)}; exiting with {code} ({why}, rank {rank})"
    return code, rank, root, line


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


def stopped_line(signum: int) -> str:
    """The launcher's line when signal `signum` stopped it: what follows its exit where it
    runs (run-local after a Ctrl-C: exits.run_local_stop; else the pod's controller)."""
    code = 128 + signum
    then = exits.run_local_stop(code) or _then(code)
    return (
        f"trainforge launch: received {_signal_name(signum)}; workers stopped; "
        f"exiting with {code} ({then})"
    )


def _then(code: int, rank: int | None = None) -> str:
    """What the job's controller does after exit `code`, where the pod was told
    (exits.next_step); else the code's class (the operator's: retryable 128-255, permanent
    1-127). `rank`: the rank of a lost peer (peer_lost) the pod exits with, whose Master's
    exit 0 may have ended the job (exits.after_success; the pod's PET_NODE_RANK where set,
    else this rank, tells a Worker's from the Master's: run-local's one launcher runs all)."""
    then = exits.next_step(code)
    if then is not None and rank and (succeeded := exits.after_success(rank)) is not None:
        then = f"{then}; but {succeeded}"  # a Worker pod's, after its Master's exit 0
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


def _newest_attempt(folder: Path) -> Path | None:
    attempts = sorted(folder.glob("attempt_*")) if folder.is_dir() else []
    return attempts[-1] if attempts else None


def _records_in(folder: Path, first_failure: float) -> dict[int, exits.Reason]:
    newest = _newest_attempt(folder)
    out: dict[int, exits.Reason] = {}
    for path in sorted(newest.glob("rank_*.json")) if newest else []:
        try:
            rec = json.loads(path.read_text())
            reason = exits.from_record(rec)
            if reason is not None and float(rec["time"]) >= first_failure - RECORD_WINDOW_S:
                out[int(rec["rank"])] = reason
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a half-written record says nothing
    return out


def followers(
    failures: dict[int, int],
    records: dict[int, exits.Reason],
    times: dict[int, int],
    root_rank: int,
) -> dict[int, int]:
    """{rank: exit code} of this pod's ranks that torchrun stopped because another failed,
    where no signal reached the pod (torchrun raised ChildFailedError): each that died of its
    SIGTERM or was SIGKILLed in its teardown (`teardown_kill`), or whose record says only
    `preempted` (the SIGTERM it got was torchrun's). Never the root cause's rank; a record
    with a cause of its own (a bug the rank raised, then SIGTERMed) stands."""
    first = min(times.values(), default=None)
    out: dict[int, int] = {}
    for rank, exitcode in failures.items():
        code, _ = _reason_for(exitcode)
        recorded = records.get(rank)
        if rank == root_rank or (recorded is not None and not exits.is_preempted(recorded)):
            continue
        killed = teardown_kill(exitcode, times.get(rank), first)
        if killed or exitcode == -signal.SIGTERM or exits.is_preempted(recorded):
            out[rank] = code
    return out


def restate_followers(
    folders: list[Path],
    stopped: dict[int, int],
    root_rank: int,
    root: exits.Reason | None,
    first_failure: float,
) -> None:
    """Write the record of each rank torchrun stopped (`followers`: {rank: code}) into the
    newest attempt of each exit-record folder (the run ledger's, this pod's): `stopped`,
    because `root_rank` failed with `root`, over the `preempted` its SIGTERM handler wrote (or
    none: a rank stuck in a C call, which the next attempt's ledger would read as node_lost).
    Its step is kept. Only an attempt that holds a record of this failure (`_records_in`) is
    written: an older attempt's folder is not this one's. Never raises."""
    for folder in folders:
        attempt = _newest_attempt(folder)
        if attempt is None or not _records_in(folder, first_failure):
            continue  # no rank recorded this failure here: nothing to correct
        for rank, code in stopped.items():
            path = attempt / f"rank_{rank:05d}.json"
            try:
                old = json.loads(path.read_text()) if path.is_file() else {}
            except (OSError, ValueError):
                old = {}
            old = old if isinstance(old, dict) else {}
            reason = exits.stopped(code, root_rank, root.label if root else None)
            rec = {**exits.record_fields(reason), "reason": reason.name, "code": code,
                   "rank": rank, "step": old.get("step"), "detail": reason.what,
                   "time": old.get("time", time.time())}  # fmt: skip
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(rec, sort_keys=True), encoding="utf-8")
                os.replace(tmp, path)
            except OSError:
                continue


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# How long after torchrun's SIGTERM a worker that is still running gets a line of its own.
NOTICE_AFTER_S = 5.0
# torchrun's loggers (torch 2.13): "Sending process %s closing signal %s" and "Received %s
# death signal, shutting down workers"
TORCHRUN_PROCESS_LOGGER = "torch.distributed.elastic.multiprocessing.api"
TORCHRUN_AGENT_LOGGER = "torch.distributed.elastic.agent.server.api"
# torchrun's wait before SIGKILL when it stops a failed or restarting worker group: fixed
# (PContext.close's and LocalElasticAgent._shutdown's default `timeout: int = 30`, which
# `_stop_workers` and a failed group's teardown use); only the agent's own signal waits
# TORCH_ELASTIC_SHUTDOWN_TIMEOUT (agent/server/api.py `run`: `self._shutdown_timeout`).
TORCHRUN_TEARDOWN_S = 30


class ShutdownNotice(logging.Filter):
    """Says why torchrun is quiet while it stops a worker that does not leave.

    Why: torchrun logs "Sending process N closing signal SIGTERM", then waits before its
    "Unable to shutdown process ... via 15" and SIGKILL: a worker blocked in a native call
    (a collective, a store wait) runs no Python SIGTERM handler until that call returns, and
    the review at 1969f598 waited 90 s (its grace period) in silence. A worker still running
    NOTICE_AFTER_S after the SIGTERM gets one line saying how long torchrun waits and why;
    one that leaves at once (the usual case) gets none. A filter on torchrun's own loggers,
    so the line follows what torchrun really does, and every record goes through."""

    def __init__(self, grace_s: int, after_s: float = NOTICE_AFTER_S) -> None:
        super().__init__()
        self.grace_s = grace_s
        self.after_s = after_s
        self.signalled = False  # the launcher itself got SIGTERM/SIGINT: torchrun waits grace_s
        self._timed: set[str] = set()  # torchrun may log one SIGTERM twice (two closes)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        if msg.startswith("Received") and "death signal" in msg:
            self.signalled = True
        elif (
            msg.startswith("Sending process")
            and len(args) == 2
            and getattr(args[1], "name", str(args[1])) == "SIGTERM"
        ):
            wait = self.grace_s if self.signalled else TORCHRUN_TEARDOWN_S
            key = f"{args[0]}:{self.signalled}"
            if wait > self.after_s and key not in self._timed:
                self._timed.add(key)
                timer = threading.Timer(self.after_s, self._still_running, (args[0], wait))
                timer.daemon = True
                timer.start()
        return True

    def _still_running(self, pid: object, wait: int) -> None:
        if not _alive(int(str(pid))):
            return
        why = (
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT = checkpoint.gracePeriod, the time a save gets"
            if self.signalled
            else "torchrun's fixed wait when it stops a failed or restarting worker group"
        )
        print(
            f"trainforge launch: worker process {pid} is still running {self.after_s:g} s after "
            f"SIGTERM; torchrun SIGKILLs it {wait} s after the SIGTERM ({why}): code blocked in "
            "a native call (a collective, a store wait) runs no SIGTERM handler until the call "
            "returns",
            file=sys.stderr,
            flush=True,
        )


def _alive(pid: int) -> bool:
    """The worker has not exited (a zombie has: torchrun has not reaped it yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state != "Z"


def shutdown_grace(argv: list[str]) -> int:
    """The seconds torchrun waits after relaying its own SIGTERM, read as torchrun reads them:
    its parser's `--shutdown-timeout`, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30
    (torch/distributed/launcher/api.py LaunchConfig, 2.13)."""
    from torch.distributed.run import parse_args  # noqa: PLC0415

    try:
        flag = parse_args(argv).shutdown_timeout
    except SystemExit:  # torchrun itself says what is wrong with its flags
        flag = None
    raw = str(flag) if flag is not None else os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30")
    return int(raw) if raw.strip().isdigit() else TORCHRUN_TEARDOWN_S


def notice_slow_shutdowns(grace_s: int) -> ShutdownNotice:
    """Attach a ShutdownNotice to torchrun's loggers (what `_launch` does)."""
    notice = ShutdownNotice(grace_s)
    for name in (TORCHRUN_PROCESS_LOGGER, TORCHRUN_AGENT_LOGGER):
        logging.getLogger(name).addFilter(notice)
    return notice


def final_failure(
    failures: dict[int, int],
    records: dict[int, exits.Reason],
    times: dict[int, int],
) -> exits.Reason | None:
    """The failed group's root cause (`verdict`) where it is one no restart can get past
    (exits.restarts_nothing: the run ledger's no_progress stop, met again by every attempt
    that starts from the same checkpoint); None where torchrun may restart the group."""
    _, _, root, _ = verdict(failures, records, times)
    return root if root is not None and exits.restarts_nothing(root) else None


@contextlib.contextmanager
def stop_restarts_on_final(ckpt: str | None, local: str) -> Iterator[None]:
    """While torchrun runs in this process: a worker group that failed with a final cause
    (`final_failure`) is not restarted, whatever `--max-restarts` has left; torchrun stops it
    as it does once its restarts are spent, and the launcher exits with that cause's code.

    Why: torch 2.13.0's elastic agent restarts a FAILED group while it has restarts left,
    whatever the code (agent/server/api.py SimpleElasticAgent._invoke_run, read 2026-12-01
    in the v2.13.0 wheel). The run ledger's no_progress stop (exit 4, permanent) of the
    runtime's rank 0 (loop.py) and of your code's wrapper (usercode.start_check) was then
    followed by one more attempt, which counted from 0 (a permanent end begins a new count:
    ledger.attempts_without_progress), so the stop took effect only once torchrun's restarts
    were used up. The one decision is the launcher's verdict on the group, made where the
    agent reads its workers' ends (`_monitor_workers`, which `_invoke_run` consults before it
    restarts): a final cause sets the agent's remaining restarts to 0."""
    from torch.distributed.elastic.agent.server.api import WorkerState  # noqa: PLC0415
    from torch.distributed.elastic.agent.server.local_elastic_agent import (  # noqa: PLC0415
        LocalElasticAgent,
    )

    original = LocalElasticAgent._monitor_workers

    def monitor(agent: Any, worker_group: Any) -> Any:
        result = original(agent, worker_group)
        left = getattr(agent, "_remaining_restarts", None)  # None: a torch without it
        if result.state not in (WorkerState.FAILED, WorkerState.UNHEALTHY) or (
            left is not None and left <= 0
        ):
            return result
        fails = {int(r): int(f.exitcode) for r, f in (result.failures or {}).items()}
        times = {int(r): int(f.timestamp) for r, f in (result.failures or {}).items()}
        records = failure_records(ckpt, float(min(times.values(), default=0)), local)
        final = final_failure(fails, records, times)
        if final is None:
            return result
        most = worker_group.spec.max_restarts
        if left is None:  # said, not assumed: the stop is not in force under this torch
            print(unenforced_line(final, most), file=sys.stderr, flush=True)
            return result
        agent._remaining_restarts = 0
        print(
            f"trainforge launch: {final.name} (code {final.code}) ends the run: torchrun "
            f"restarts nothing ({left} of its {most} restart(s) left unused), every "
            "restart would meet the same stop",
            file=sys.stderr,
            flush=True,
        )
        return result

    LocalElasticAgent._monitor_workers = monitor  # type: ignore[method-assign]
    try:
        yield
    finally:
        LocalElasticAgent._monitor_workers = original  # type: ignore[method-assign]


def unenforced_line(final: exits.Reason, most: int) -> str:
    """The launcher's line where a final cause cannot stop torchrun's restarts: the running
    torch's elastic agent has no `_remaining_restarts` (a private attribute of torch 2.13.0's
    SimpleElasticAgent, which `stop_restarts_on_final` sets), so the group is restarted while
    restarts are left and each attempt meets the same stop."""
    import torch  # noqa: PLC0415 - torchrun runs in this process: already imported

    return (
        f"trainforge launch: {final.name} (code {final.code}) should end the run, but torch "
        f"{torch.__version__}'s elastic agent has no _remaining_restarts (trainforge sets it "
        f"under torch 2.13.0): torchrun restarts the workers while any of its {most} "
        "restart(s) are left, and each restart meets the same stop"
    )


def main(argv: list[str] | None = None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    # before torchrun reads it: every restart of the worker group gets a store of its own
    torchrun_env.apply(os.environ)
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

    notice_slow_shutdowns(shutdown_grace(argv))
    started = time.time()  # a finished attempt before it is an earlier run's
    try:
        with stop_restarts_on_final(checkpoint_dir(argv), local):
            torchrun_main(argv)
    except ChildFailedError as e:
        failures = {int(rank): int(f.exitcode) for rank, f in e.failures.items()}
        times = {int(rank): int(f.timestamp) for rank, f in e.failures.items()}
        first = min(times.values(), default=0)
        ckpt = checkpoint_dir(argv)
        records = failure_records(ckpt, float(first), local)
        # a pod's launcher (run-local's one launcher runs every pod: its verdict says it)
        done = (ranks := master_ranks()) is not None and master_finished(
            ckpt, ranks, ended_after=started
        )
        code, root_rank, root, line = verdict(failures, records, times, done)
        print(f"trainforge launch: {line}", file=sys.stderr, flush=True)
        folders = [Path(local)] + ([Path(ckpt) / LEDGER_DIR / EXITS_DIR] if ckpt else [])
        stopped = followers(failures, records, times, root_rank)
        restate_followers(folders, stopped, root_rank, root, float(first))
        exits.write_termination(pod_reason(code, records))  # the pod's, over its workers'
        return code
    except SignalException as e:
        code = 128 + int(e.sigval)
        # the pod's end, over what its workers wrote as they were stopped (status/why read it)
        exits.write_termination(stopped_reason(code, failure_records(None, 0.0, local)))
        print(stopped_line(int(e.sigval)), file=sys.stderr, flush=True)
        return code
    return 0


if __name__ == "__main__":
    from trainforge.core.process import exit_code

    sys.exit(exit_code(main()))
