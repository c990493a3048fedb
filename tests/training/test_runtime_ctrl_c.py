"""Ctrl-C stops the bundled runtime as your stop: `interrupted` 130, with its record."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import sigint_default

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_is_recorded_interrupted_not_left_for_node_lost(tmp_path: Path) -> None:
    """The runtime let KeyboardInterrupt through: a traceback, no exit line, no record, so the
    next attempt's ledger read the rank as killed or lost (`node_lost`) and counted it as a
    failed attempt (watched fail: no record)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "trainforge.training", "--model", "mlp", "--steps", "100000",
           "--dataset-size", "256", "--batch-size", "8", "--log-every", "10",
           "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "1000",
           "--output-dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_default,  # a background run (CI) starts with SIGINT ignored
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("step "):  # training: the loop is running
            break
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out[-2000:]
    assert "trainforge exit: interrupted code=130 (rank 0, step " in out, out[-2000:]
    (rec,) = (tmp_path / "ckpt" / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
    said = json.loads(rec.read_text())
    assert said["reason"] == "interrupted" and said["code"] == 130, said


def test_ctrl_c_to_the_process_group_names_the_newest_checkpoint_without_tracebacks(
    tmp_path: Path,
) -> None:
    """A terminal's Ctrl-C reaches the whole process group, DCP's checkpoint process too: it
    died of it with a `Process SpawnProcess-1: ... KeyboardInterrupt` traceback (watched fail:
    without dcp_writer's SIG_IGN), and the exit line said only `KeyboardInterrupt` while
    docs/checkpointing.md promised a checkpoint. Now: no traceback, and the line says nothing
    was saved, that SIGTERM saves, and which complete checkpoint the next run resumes from."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    ckpt = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "trainforge.training", "--model", "mlp", "--steps", "100000",
           "--dataset-size", "256", "--batch-size", "8", "--log-every", "10",
           "--checkpoint-dir", str(ckpt), "--checkpoint-every", "20", "--async-checkpoint",
           "--output-dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_default,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if "checkpoint: saved" in line and "periodic" in line:  # DCP's process is serving
            break
    for line in proc.stdout:  # a few steps on: Ctrl-C between saves
        seen.append(line)
        if line.startswith("step "):
            break
    os.killpg(proc.pid, signal.SIGINT)
    out = "".join(seen) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("trainforge exit: interrupted"))
    assert "a Ctrl-C saves none; SIGTERM does" in line, line
    newest = line.split("the next run resumes from ")[1].split(":")[0]
    assert Path(newest).parent == ckpt and (Path(newest) / ".metadata").is_file(), line
    # the Ctrl-C lands a few steps after a save, or (a loaded machine reads the log late) just
    # after the next one: both are this line's truth (ctrl_c_detail's figures: its own tests)
    assert re.search(r"(the \d+ step\(s\)|no step) trained since it (are|is) lost", line), line


def test_ctrl_c_words_without_a_directory_or_a_save(tmp_path: Path) -> None:
    """`Checkpointing.interrupted` claims no resume point a next run would not find."""
    from trainforge.training.checkpoint import Checkpointing
    from trainforge.training.config import CheckpointConfig

    none = Checkpointing(CheckpointConfig())
    assert none.interrupted(7).endswith("; no --checkpoint-dir: nothing of this run is saved")
    fresh = Checkpointing(CheckpointConfig(directory=str(tmp_path / "ck")))
    try:
        said = fresh.interrupted(7)
    finally:
        if fresh.preemption is not None:
            fresh.preemption.close()
    assert said.endswith(f"none saved yet in {tmp_path / 'ck'}: the next run starts at step 0")
    assert said.startswith("Ctrl-C: nothing saved (a Ctrl-C saves none; SIGTERM does")


def _held_run(tmp_path: Path, phase: str, ckpt: Path) -> tuple[int, str]:
    """The runtime held in `phase` (tests/training/ctrl_c_probe.py), Ctrl-C'd there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    probe = ROOT / "tests" / "training" / "ctrl_c_probe.py"
    cmd = [sys.executable, str(probe), phase, "--model", "mlp", "--steps", "100000",
           "--dataset-size", "256", "--batch-size", "8", "--log-every", "10",
           "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1000",
           "--output-dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_default,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(f"probe: in {phase}"):
            break
    proc.send_signal(signal.SIGINT)
    out = "".join(seen) + proc.communicate(timeout=120)[0]
    return proc.returncode, out


def test_ctrl_c_outside_the_step_loop_ends_with_the_same_line(tmp_path: Path) -> None:
    """A Ctrl-C in the model build (before any Checkpointing) or in the restore ended with
    `trainforge exit: interrupted ...: KeyboardInterrupt` (watched fail: the line's detail was
    that word), where one in the step loop names the checkpoint the next run resumes from.
    Now every Ctrl-C of the runtime ends with `layout.ctrl_c_detail`'s line, read from the
    disk before the run resumed: the saved step_000002 and nothing trained since it lost."""
    from trainforge.training.layout import ctrl_c_detail

    ckpt = tmp_path / "ckpt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    first = subprocess.run(
        [sys.executable, "-m", "trainforge.training", "--model", "mlp", "--steps", "2",
         "--dataset-size", "256", "--batch-size", "8", "--checkpoint-dir", str(ckpt),
         "--checkpoint-every", "2", "--output-dir", str(tmp_path / "first")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    want = ctrl_c_detail(ckpt, 2, 2)
    assert want.endswith(f"resumes from {ckpt / 'step_000002'}: no step trained since it is lost")
    for phase in ("build", "restore"):
        code, out = _held_run(tmp_path, phase, ckpt)
        assert code == 130, (phase, out[-3000:])
        assert "Traceback" not in out, (phase, out[-3000:])
        line = next(x for x in out.splitlines() if x.startswith("trainforge exit: interrupted"))
        assert f": {want} [" in line or line.endswith(f": {want}"), (phase, line)
    code, out = _held_run(tmp_path, "build", tmp_path / "empty")
    assert code == 130, out[-3000:]
    assert f"none saved yet in {tmp_path / 'empty'}: the next run starts at step 0" in out, out
