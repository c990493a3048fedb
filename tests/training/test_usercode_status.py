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


# Your code, stopped by the kubelet's SIGTERM while it waits (never checkpointing), or after
# saving step 3 through trainforge's CheckpointManager (sync, no process group needed).
NEVER_SAVES = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"
SAVES_STEP_3 = """\
import os, time
import torch
from trainforge.training.checkpoint import CheckpointManager
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
CheckpointManager.from_env(log=lambda msg: None, async_save=False).save(3, model, opt)
print('ready', flush=True)
time.sleep(120)
"""
PREEMPTION_HANDLER = """\
import os, signal, sys
from trainforge.training.preemption import PreemptionHandler
handler = PreemptionHandler(30.0, log=lambda msg: None)
os.kill(os.getpid(), signal.SIGTERM)  # the kubelet's
while not handler.should_stop():
    pass
sys.exit(handler.shutdown())  # no save function: nothing is saved
"""


def sigtermed(tmp_path: Path, script: str) -> tuple[int, str, Path, Path]:
    """Run `script` under the wrapper; SIGTERM it once it says `ready` (at once where it never
    says it): (exit code, stderr, termination file, checkpoint dir)."""
    path = tmp_path / "script.py"
    path.write_text(script)
    log, ckpt = tmp_path / "termination-log", tmp_path / "ckpt"
    log.write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(log), str(path)],
        env=env(TRAINFORGE_CHECKPOINT_DIR=str(ckpt)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if "ready" in script:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, log, ckpt


@pytest.mark.parametrize(
    ("script", "saved"),
    [(NEVER_SAVES, None), (PREEMPTION_HANDLER, None), (SAVES_STEP_3, 3)],
    ids=["never_saves", "preemption_handler_without_save", "checkpoint_manager_step_3"],
)
def test_a_preemption_record_claims_no_checkpoint_it_does_not_know(script, saved, tmp_path):
    """`preempted` said "SIGTERM: checkpointed and stopped" for any SIGTERM the wrapper
    recorded, and `trainforge why` printed it for code that never checkpointed. Now the record
    (ledger and termination message) says the step trainforge's CheckpointManager saved in the
    process, or that trainforge cannot tell; status and why say the same."""
    code, err, log, ckpt = sigtermed(tmp_path, script)
    assert code in (143, -signal.SIGTERM), err[-2000:]  # dies of it: 143 to the kubelet
    rec, term = record_of(ckpt), json.loads(log.read_text())
    assert (rec["reason"], term["reason"]) == ("preempted", "preempted"), (rec, term)
    assert rec.get("checkpoint") == term.get("checkpoint") == saved, (rec, term)
    reason = exits.from_termination(log.read_text(), 143)
    assert reason is not None and reason.checkpoint == saved
    if saved is None:
        assert "trainforge cannot tell whether a checkpoint was saved" in rec["detail"]
        assert "checkpoint" not in reason.what.replace("cannot tell whether a checkpoint", "")
    else:
        assert f"the newest checkpoint it saved is step {saved}" in rec["detail"]
        assert (ckpt / "step_000003").is_dir()
    assert "checkpointed" not in rec["detail"] + reason.what + reason.action
    terminated = {"exitCode": 143, "reason": "Error", "message": log.read_text()}
    assert explain.exit_text(terminated) == "143 (preempted)"
    assert explain.exit_reason(terminated).what == reason.what


def test_the_runtimes_pod_leaves_its_record_as_the_termination_message(tmp_path):
    """The runtime (`python -m trainforge.training`, no wrapper) wrote its exit record to the
    ledger only: its pods had no termination message, and status/why fell back to the code
    table. Now `exits.report` leaves it through the wrapper's writer (exits.leave_record):
    an OOM (the test hook's torch.OutOfMemoryError at step 2) and a preemption whose save on
    SIGTERM reached step 4, with that checkpoint."""
    log = tmp_path / "termination-log"
    runtime = DRIVER.replace("trainforge.training.usercode", "trainforge.training")
    base = ["--model", "mlp", "--dataset-size", "256", "--steps", "8", "--warmup-steps", "2"]
    for fault, want, extra in (
        ("0:2:OOM", 3, []),
        ("0:3:TERM", 143, ["--checkpoint-dir", str(tmp_path / "ckpt")]),
    ):
        log.write_text("")
        proc = subprocess.run(
            [sys.executable, "-c", runtime, str(log), *base, *extra],
            env=env(TRAINFORGE_TEST_FAULT=fault), capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert proc.returncode == want, proc.stderr[-2000:]
        reason = exits.from_termination(log.read_text(), want)
        if want == 3:
            assert reason is exits.OOM, log.read_text()
            continue
        assert reason is not None and reason.checkpoint == 4, log.read_text()
        assert (tmp_path / "ckpt" / "step_000004").is_dir()
        (rec,) = (tmp_path / "ckpt" / ".trainforge" / "exits").glob("attempt_*/rank_*.json")
        assert json.loads(rec.read_text())["checkpoint"] == 4
        assert (
            "preempted code=143 (rank 0, step 4): SIGTERM: stopped; the newest checkpoint it "
            "saved is step 4" in proc.stderr
        )


def test_the_launcher_stopped_by_a_sigterm_names_the_checkpoint_its_runtime_saved(tmp_path):
    """The kubelet's SIGTERM to a runtime pod's launcher: torchrun stops the worker, whose
    PreemptionHandler saves a checkpoint and records it; the launcher's termination message
    said `preempted` without it. Now it names the step its ranks' records say they saved
    (launch.stopped_reason), and says it cannot tell where a rank's record names none."""
    log, ckpt = tmp_path / "termination-log", tmp_path / "ckpt"
    log.write_text("")
    driver = DRIVER.replace("trainforge.training.usercode", "trainforge.training.launch")
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, str(log), "--standalone", "--nnodes=1",
         "--nproc-per-node=1", "-m", "trainforge.training", "--model", "mlp", "--dataset-size",
         "100000", "--steps", "100000", "--warmup-steps", "2", "--checkpoint-dir", str(ckpt)],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    for line in proc.stdout:
        if "checkpoint: no checkpoint to resume from" in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, out[-2000:]
    assert "trainforge launch: received SIGTERM; workers stopped; exiting with 143" in out
    (rec,) = (ckpt / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
    saved = json.loads(rec.read_text())["checkpoint"]
    assert (ckpt / f"step_{saved:06d}").is_dir(), out[-2000:]
    reason = exits.from_termination(log.read_text(), 143)
    assert reason is not None and reason.checkpoint == saved, log.read_text()
    assert f"the newest checkpoint it saved is step {saved}" in reason.what

    four, unknown = exits.preempted(4), exits.PREEMPTED
    assert launch.stopped_reason(143, {0: four, 1: exits.preempted(5)}) == four
    assert launch.stopped_reason(143, {0: four, 1: unknown}) is unknown
    assert launch.stopped_reason(143, {0: four, 1: exits.user_exit(7)}) == four
    assert launch.stopped_reason(143, {}) is unknown
    assert launch.stopped_reason(137, {0: four}) is None
