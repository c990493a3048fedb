"""DCP's checkpoint process and the two ways a run ends under it: a Ctrl-C while the process
is still starting, and its trainer killed (kill -9). Neither may print a traceback from it.

A real trainer (a gloo group of one) starts the process the way every run does
(`checkpoint._WriterStart`); the script is also the process's `__mp_main__` (multiprocessing's
spawn imports the parent's main script first), which is where the test holds the process's
start: it writes its pid and waits for a file -- the seconds a real start spends importing
torch, made as long as the test needs instead of hoped for."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.conftest import sigint_default

ROOT = Path(__file__).resolve().parents[2]

TRAINER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    HOLD = Path(os.environ["HOLD_DIR"])
    if __name__ == "__mp_main__":  # DCP's checkpoint process, still starting
        (HOLD / "child.pid").write_text(str(os.getpid()))
        while not (HOLD / "go").exists():
            time.sleep(0.01)

    def main():
        import torch.distributed as dist
        from trainforge.training import checkpoint

        dist.init_process_group("gloo", rank=0, world_size=1)
        start = checkpoint._WriterStart.begin()
        if sys.argv[1] == "ctrl-c":
            try:  # the terminal's Ctrl-C comes while the process is held in its start
                for _ in range(6000):
                    time.sleep(0.01)
                print("trainer: no KeyboardInterrupt", flush=True)
            except KeyboardInterrupt:
                print("trainer: KeyboardInterrupt", flush=True)
        else:
            while not (HOLD / "child.pid").exists():
                time.sleep(0.01)
        (HOLD / "go").touch()
        start.wait()
        pid = checkpoint._checkpoint_process_pid()
        print(f"start error: {start.error!r}", flush=True)
        os.kill(pid, 0)  # raises if it is gone
        print(f"checkpoint process {pid} alive after its first save", flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    if __name__ == "__main__":
        import signal
        main()
    """
)


def _run(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HOLD_DIR=str(tmp_path))
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return subprocess.Popen(
        [sys.executable, str(script), mode],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job is
        preexec_fn=sigint_default,  # a background run (CI) starts with SIGINT ignored
    )


def test_ctrl_c_while_the_checkpoint_process_starts_leaves_it_running(tmp_path: Path) -> None:
    """SIGINT to the whole group while DCP's process is still starting (before its first save,
    where it began ignoring SIGINT): it died of it with a `Process SpawnProcess-1: ...
    KeyboardInterrupt` traceback and the writer's start failed (watched fail: without
    `_spawning_without_sigint` around `_WriterStart`'s async_save). Now it starts with SIGINT
    blocked and keeps running; the trainer still gets its KeyboardInterrupt."""
    proc = _run(tmp_path, "ctrl-c")
    held = tmp_path / "child.pid"
    try:
        while not held.exists() or not held.read_text():
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "trainer: KeyboardInterrupt" in out, out
    assert "start error: None" in out, out
    assert f"checkpoint process {held.read_text()} alive after its first save" in out, out
    assert "Traceback" not in out and "SpawnProcess" not in out, out
    assert proc.returncode == 0, out


def test_a_killed_trainers_checkpoint_process_leaves_quietly(tmp_path: Path) -> None:
    """kill -9 of the trainer (the `resumable` example's KILL rehearsal): its checkpoint
    process, idle in its serving loop, printed a `Process SpawnProcess-1: ... EOFError`
    traceback into the job's output when its pipe closed (watched fail: without
    `_leave_quietly_when_the_trainer_is_gone`). Now it exits without a word; the output ends
    when both are gone (the orphan holds the same stdout)."""
    proc = _run(tmp_path, "kill")
    try:
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, out
    pid = int((tmp_path / "child.pid").read_text())
    assert f"checkpoint process {pid} alive after its first save" in out, out
    assert "Traceback" not in out and "Error" not in out, out
    # DCP's INFO lines (five a save) end at the first save, written by the product's writer
    # (watched fail: without dcp_writer's root-logger level)
    assert "Completed checkpoint save request" not in out, out
