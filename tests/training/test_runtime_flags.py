"""Runtime flags that only fail when the process starts: a one-line error naming the flag,
exit 2, no traceback; and a resumed run already past --steps says so."""

from __future__ import annotations

import json
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
def test_resumed_run_already_past_steps_says_so_and_keeps_the_summary(tmp_path):
    """The docs' command run twice (same --output-dir): the second trains nothing. Its
    summary (0.0 samples/s, no losses) replaced the first's summary.json, so `report` said
    the run did 0.0 samples/s (watched fail: written again by `_finish`)."""
    ckpt = ["--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1"]
    summary = tmp_path / "a" / "summary.json"
    first = run(*ckpt, "--output-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = summary.read_text()
    assert json.loads(before)["losses"] and json.loads(before)["final_loss"] is not None
    again = run(*ckpt, "--output-dir", str(tmp_path / "a"), cwd=tmp_path)
    assert again.returncode == 0
    out = again.stdout + again.stderr
    assert "nothing left to train" in out
    assert f"summary: no step trained in this run (it began at step 2); {summary} is kept" in out
    assert "samples/s" not in out.split("nothing left to train")[1]
    assert summary.read_text() == before
