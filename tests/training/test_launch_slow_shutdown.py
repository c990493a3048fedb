"""A worker that does not leave on torchrun's SIGTERM is named, with how long torchrun waits.

The review at 1969f598 saw "Sending process N closing signal SIGTERM", then 90 s of silence,
then "Unable to shutdown process N via 15": the worker was blocked in a native call, where a
Python SIGTERM handler does not run. trainforge.training.launch.ShutdownNotice says so 5 s in,
with torchrun's real wait: TORCH_ELASTIC_SHUTDOWN_TIMEOUT after the launcher's own signal,
torch 2.13's fixed 30 s when torchrun stops a failed or restarting group."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainforge.training import launch

ROOT = Path(__file__).resolve().parents[2]

# a worker with a Python SIGTERM handler (as trainforge.training.usercode installs) blocked in
# a store wait, a native call
BLOCKED = """\
import datetime, signal, sys, torch.distributed as dist
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
dist.init_process_group("gloo")
store = dist.distributed_c10d._get_default_store()
print("blocking", flush=True)
store.wait(["never"], datetime.timedelta(seconds=300))
"""


@pytest.mark.timeout(180)
def test_a_worker_blocked_at_sigterm_is_named_with_the_grace_torchrun_waits(tmp_path):
    """Watched fail with `notice_slow_shutdowns` not called in `_launch`: only torchrun's
    "Sending process" line, then nothing until its SIGKILL."""
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "12"}
    env.pop("TRAINFORGE_CHECKPOINT_DIR", None)
    cmd = [sys.executable, "-m", "trainforge.training.launch", "--standalone", "--nnodes", "1"]
    cmd += ["--nproc-per-node", "1", str(script)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "blocking"
    time.sleep(1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    assert proc.returncode == 143, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("trainforge launch: worker process")]
    assert len(lines) == 1, err[-3000:]
    assert "still running 5 s after SIGTERM; torchrun SIGKILLs it 12 s after" in lines[0]
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT = checkpoint.gracePeriod" in lines[0]
    # the line comes before torchrun's SIGKILL, which comes when the line says
    assert err.index(lines[0]) < err.index("Unable to shutdown process"), err[-3000:]
    assert 12 <= took < 60, took


def _record(logger: str, msg: str, args: tuple) -> logging.LogRecord:
    return logging.LogRecord(logger, logging.WARNING, __file__, 1, msg, args, None)


def test_a_failed_groups_teardown_names_torchruns_fixed_wait(capsys):
    """Without the launcher's own signal torchrun waits its fixed 30 s (PContext.close), not
    the grace period; a worker that has left by then gets no line."""
    notice = launch.ShutdownNotice(grace_s=90, after_s=0.2)
    send = "Sending process %s closing signal %s"
    notice.filter(_record(launch.TORCHRUN_PROCESS_LOGGER, send, (os.getpid(), signal.SIGTERM)))
    notice.filter(_record(launch.TORCHRUN_PROCESS_LOGGER, send, (os.getpid(), signal.SIGTERM)))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    notice.filter(_record(launch.TORCHRUN_PROCESS_LOGGER, send, (gone.pid, signal.SIGTERM)))
    time.sleep(1.0)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err  # once per worker, none for the one that left
    assert f"worker process {os.getpid()} is still running 0.2 s after SIGTERM" in err[0]
    assert "SIGKILLs it 30 s after the SIGTERM (torchrun's fixed wait" in err[0]


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [
        (["--standalone", "x.py", "--shutdown-timeout", "5"], "90", 90),  # the program's own
        (["--shutdown-timeout=45", "x.py"], "90", 45),
        (["--shutdown_timeout", "7", "x.py"], None, 7),
        (["--nnodes", "1", "--shutdown-timeout", "9", "x.py"], "90", 9),
        (["--standalone", "x.py"], None, 30),
    ],
)
def test_the_grace_is_the_one_torchrun_reads(monkeypatch, argv, env, want):
    """torchrun's own parser decides (a flag after the program is the program's)."""
    if env is None:
        monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", env)
    assert launch.shutdown_grace(argv) == want
