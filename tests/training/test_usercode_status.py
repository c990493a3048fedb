"""Your code's `sys.exit(value)` under the wrapper ends with the status the kernel reports for
`python SCRIPT` (exits.exit_status), and every record of it says that status: the exit line,
the run ledger's record, the container's termination message, the launcher's and status's
words. The oracle is the interpreter itself: each value runs as a plain `python SCRIPT` too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.training.runtime_helpers import env
from trainforge.live import explain
from trainforge.training import exits, launch

# The wrapper as the pod runs it, with the kubelet's termination file at a path of the test's
# (exits.write_termination writes only where that file exists)
DRIVER = (
    "import runpy, sys; from trainforge.training import exits; "
    "exits.TERMINATION_LOG = sys.argv.pop(1); "
    "runpy.run_module('trainforge.training.usercode', run_name='__main__', alter_sys=True)"
)


def wrapped(tmp_path: Path, script: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """Run `script` under the wrapper: (process, termination file, checkpoint dir)."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    log, ckpt = tmp_path / "termination-log", tmp_path / "ckpt"
    log.write_text("")
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(log), str(path)],
        env=env(TRAINFORGE_CHECKPOINT_DIR=str(ckpt)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, log, ckpt


def record_of(ckpt: Path) -> dict | None:
    found = list((ckpt / ".trainforge" / "exits").glob("attempt_*/rank_00000.json"))
    return json.loads(found[0].read_text()) if found else None


def exit_line(stderr: str) -> str:
    (line,) = [x for x in stderr.splitlines() if x.startswith("trainforge exit:")]
    return line


@pytest.mark.parametrize(
    "value", ["300", "-1", "256", "2**70", "2**32 + 3", "'stop'", "3.0", "None", "True", "150"]
)
def test_your_sys_exit_is_recorded_with_the_status_the_process_has(value, tmp_path):
    """Before, `sys.exit(300)` was recorded and printed as user_exit code=300, "retryable",
    while the pod exited 44, which the operator reads as permanent; 2**70 and 2**32 + 3 made
    the wrapper itself fail (OverflowError, exit 1) where Python exits 255 and 3."""
    plain = tmp_path / "plain.py"
    plain.write_text(f"import sys\nsys.exit({value})\n")
    want = subprocess.run([sys.executable, str(plain)], capture_output=True, timeout=60).returncode
    proc, log, ckpt = wrapped(tmp_path, f"import sys\nsys.exit({value})\n")
    assert proc.returncode == want, proc.stderr[-2000:]
    assert want == exits.exit_status(eval(value))  # noqa: S307 - the test's own literals
    asked = exits.asked(eval(value))  # noqa: S307
    rec = record_of(ckpt)
    if want == 0:  # success: no failure record; a line only where the code asked otherwise
        assert rec is None
        assert ("trainforge exit: success code=0" in proc.stderr) == (asked is not None)
        return
    line = exit_line(proc.stderr)
    assert line.startswith(f"trainforge exit: user_exit code={want}: "), line
    retry = "retryable" if want >= 128 else "permanent"  # IsRetryableExitCode, of the status
    assert f"[{retry}" in line, line
    assert (rec["reason"], rec["code"], rec.get("asked")) == ("user_exit", want, asked)
    reason = exits.from_termination(log.read_text(), want)
    assert reason is not None and reason.asked == asked
    if asked is not None:
        assert f"your code asked sys.exit({asked}); the process exits {want}" in line
        assert reason.label == f"user_exit: sys.exit({asked})"
        assert (
            explain.exit_text({"exitCode": want, "reason": "Error", "message": log.read_text()})
            == f"{want} (user_exit: sys.exit({asked}))"
        )


def test_a_string_is_printed_and_exits_1_as_python_does(tmp_path):
    proc, _, ckpt = wrapped(tmp_path, "import sys\nsys.exit('stop: bad input')\n")
    assert proc.returncode == 1
    assert "stop: bad input" in proc.stderr.splitlines()
    assert "not an int: Python prints it and exits 1" in exit_line(proc.stderr)
    assert record_of(ckpt)["asked"] == "'stop: bad input'"


def test_your_own_143_is_not_a_preemption_unless_a_sigterm_came(tmp_path):
    """`sys.exit(143)` was recorded `preempted` ("SIGTERM: checkpointed and stopped"), which
    the ledger does not count as a failure: a script that exits 143 on its own error was
    re-created forever. Without a SIGTERM it is user_exit 143 (retryable, as the operator
    reads 143); after one that PreemptionHandler handled, preempted."""
    proc, log, ckpt = wrapped(tmp_path, "import sys\nsys.exit(143)\n")
    assert proc.returncode == 143
    line = exit_line(proc.stderr)
    assert line.startswith("trainforge exit: user_exit code=143: your code exited with 143 (no ")
    assert "not a preemption" in line and "[retryable" in line
    assert (record_of(ckpt)["reason"], json.loads(log.read_text())["reason"]) == (
        "user_exit",
        "user_exit",
    )
    launched = launch.worker_exit_code({0: 143}, {0: exits.from_record(record_of(ckpt))})
    assert launched[0] == 143 and "exiting with 143 (user_exit, retryable, rank 0)" in launched[1]

    proc, log, ckpt = wrapped(
        tmp_path,
        """\
        import os, signal, sys
        from trainforge.training.preemption import PreemptionHandler
        handler = PreemptionHandler(30.0, log=lambda msg: None)
        os.kill(os.getpid(), signal.SIGTERM)  # the kubelet's
        while not handler.should_stop():
            pass
        sys.exit(handler.shutdown())
        """,
    )
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert exit_line(proc.stderr).startswith("trainforge exit: preempted code=143")
    assert (record_of(ckpt)["reason"], json.loads(log.read_text())["reason"]) == (
        "preempted",
        "preempted",
    )


def test_the_launcher_says_what_your_code_asked():
    code, line = launch.worker_exit_code({0: 44, 1: 202}, {0: exits.user_exit(44, "300")})
    assert code == 44
    assert "rank 0 exit 44 (user_exit: sys.exit(300))" in line
    assert "exiting with 44 (user_exit: sys.exit(300), permanent, rank 0)" in line


# A rank that raises and tears down slowly (its `finally`), while its peer, blocked in a
# collective, notices the closed connection first and exits 202: torchrun then SIGTERMs the
# rank still leaving with its bug.
SLOW_BUG = """\
import os, time
import torch, torch.distributed as dist

dist.init_process_group("gloo")
if os.environ.get("WITH_HANDLER"):  # SIGTERM only sets its flag
    from trainforge.training.preemption import PreemptionHandler
    handler = PreemptionHandler(30.0, log=lambda msg: None)
t = torch.ones(1)
dist.all_reduce(t)
try:
    if dist.get_rank() == 1:
        raise ValueError("a bug on rank 1")
    time.sleep(1)
    dist.all_reduce(t)  # rank 1 is gone: "Connection closed by peer"
finally:
    if dist.get_rank() == 1:
        dist.destroy_process_group()
        time.sleep(float(os.environ["TEARDOWN_S"]))
"""


@pytest.mark.parametrize("handler", [False, True], ids=["wrapper_handler", "preemption_handler"])
def test_a_failing_rank_stopped_by_torchrun_is_recorded_with_its_bug(handler, tmp_path):
    """Real torchrun (gloo, 2 ranks) through the launcher. Before, the wrapper's own SIGTERM
    handler recorded the failing rank `preempted` (it had not recorded its bug yet), and the
    launcher's root cause was rank 0's peer_lost: exit 202, retryable, so the pods of a bug
    were re-created. A PreemptionHandler's SIGTERM only sets its flag: the bug is recorded
    when the exception reaches the wrapper (checked too)."""
    script = tmp_path / "slow_bug.py"
    script.write_text(SLOW_BUG)
    ckpt = tmp_path / "ckpt"
    extra = {"WITH_HANDLER": "1", "TEARDOWN_S": "3"} if handler else {"TEARDOWN_S": "60"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge.training.launch", "--standalone", "--nnodes=1",
         "--nproc-per-node=2", "-m", "trainforge.training.usercode", str(script)],
        env=env(TRAINFORGE_CHECKPOINT_DIR=str(ckpt), **extra),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    records = {
        json.loads(p.read_text())["rank"]: json.loads(p.read_text())["reason"]
        for p in (ckpt / ".trainforge" / "exits").glob("attempt_*/rank_*.json")
    }
    assert records == {0: "peer_lost", 1: "user_error"}, proc.stderr[-3000:]
    rank1 = (
        "rank 1 exit 1 (user_error)"
        if handler
        else "rank 1 exit -15 (killed by SIGTERM, recorded user_error)"
    )
    assert rank1 in proc.stderr
    assert "exiting with 1 (user_error, permanent, rank 1)" in proc.stderr
    assert "ValueError: a bug on rank 1" in proc.stderr  # its traceback, printed before it died


def test_run_local_says_the_status_and_what_your_code_asked(tmp_path):
    """run-local printed "exit 44 (user_exit)" beside a record of 300; now its launcher and
    its stop line name both, and the operator's reading of 44 (permanent)."""
    (tmp_path / "exit300.py").write_text("import sys; sys.exit(300)\n")
    full = {k: v for k, v in env().items() if not k.startswith("TRAINFORGE_")}
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "run-local", "exit300.py"],
        cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 44, proc.stderr[-2000:]
    assert "exiting with 44 (user_exit: sys.exit(300), permanent, rank 0)" in proc.stderr
    assert "run-local: exit 44 (user_exit: sys.exit(300)) is permanent (1-127)" in proc.stderr


def test_the_launcher_stopped_by_a_sigterm_leaves_preempted_as_the_pods_record(tmp_path):
    """The kubelet's SIGTERM reaches the launcher (the container's process): it exits 143 and
    its termination message says preempted, whatever its workers wrote as torchrun stopped
    them (here a handler of your own that exits 7: no record of 143 before)."""
    script = tmp_path / "own_handler.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    log = tmp_path / "termination-log"
    log.write_text("")
    driver = DRIVER.replace("trainforge.training.usercode", "trainforge.training.launch")
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, str(log), "--standalone", "--nnodes=1",
         "--nproc-per-node=1", "-m", "trainforge.training.usercode", str(script)],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert exits.from_termination(log.read_text(), 143) is exits.PREEMPTED, log.read_text()
