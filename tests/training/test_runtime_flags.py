"""Runtime flags that only fail when the process starts: a one-line error naming the flag,
exit 2, no traceback; and a resumed run already past --steps says so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

BASE = ["--model", "mlp", "--steps", "2", "--batch-size", "8", "--dataset-size", "64"]


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    return subprocess.run(
        [sys.executable, "-m", "trainforge.training", *BASE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_metrics_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run("--metrics-port", str(port), "--output-dir", str(tmp_path / "o"), cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert f"--metrics-port {port}: cannot serve metrics there" in p.stderr


def test_output_dir_that_is_a_file(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    p = run("--output-dir", str(f), cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"--output-dir {f}: cannot write there" in p.stderr


@pytest.mark.timeout(600)
def test_resumed_run_already_past_steps_says_so(tmp_path):
    ckpt = ["--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1"]
    first = run(*ckpt, "--output-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run(*ckpt, "--output-dir", str(tmp_path / "b"), cwd=tmp_path)
    assert again.returncode == 0
    assert "nothing left to train" in again.stdout + again.stderr
