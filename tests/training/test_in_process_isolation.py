"""A training run in-process (`trainforge.training.__main__.main`, `loop.train`: a notebook, a
test) leaves the process as it found it: a second run in the same process starts from the
caller's state, not from the first run's (stop 61's CI failure was one such leak, the exit
context; tests/conftest.py gives each test a fresh one)."""

from __future__ import annotations

import json
import os

import pytest

from trainforge.training import checkpoint as ckpt_mod
from trainforge.training import loop, resume_note
from trainforge.training.__main__ import main
from trainforge.training.ledger import RUN_FILE
from trainforge.training.timeouts import Timeouts

ARGS = ["--model", "mlp", "--dataset-size", "64", "--batch-size", "8", "--warmup-steps", "1"]
ARGS += ["--steps", "2", "--checkpoint-every", "2", "--log-every", "2", "--keep-last", "0"]
PREFIX = "TORCH_FR_DUMP_TEMP_FILE"


@pytest.fixture(autouse=True)
def _thread_writer(monkeypatch):
    # DCP's checkpoint process would re-import pytest's __main__
    monkeypatch.setattr(ckpt_mod, "WRITER_PROCESS", False)


def _run(folder) -> int:
    return main([*ARGS, "--checkpoint-dir", str(folder / "ckpt"), "--output-dir",
                 str(folder / "out")])  # fmt: skip


def test_a_second_run_in_the_process_dumps_its_flight_record_in_its_own_folder(
    tmp_path, monkeypatch
) -> None:
    """NCCL reads its variables when the process group is made: each run's group sees its own
    output folder and heartbeat, and after the runs the process has none of them."""
    ours = set(Timeouts.from_hang_timeout(300).nccl_env()) | {PREFIX}
    for key in ours:
        monkeypatch.delenv(key, raising=False)
    seen: list[str | None] = []
    real = loop.init_distributed

    def at_the_group(*args, **kwargs):
        seen.append(os.environ.get(PREFIX))
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "init_distributed", at_the_group)
    assert _run(tmp_path / "first") == 0
    assert _run(tmp_path / "second") == 0
    assert seen == [
        str(tmp_path / run / "out" / "flight-recorder" / "nccl_trace_rank_")
        for run in ("first", "second")
    ]
    assert sorted(k for k in ours if k in os.environ) == []


def test_an_explicit_setting_outlives_the_run(tmp_path, monkeypatch) -> None:
    """A value the caller set is the caller's: the run neither replaces nor removes it."""
    monkeypatch.setenv("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "77")
    assert _run(tmp_path) == 0
    assert os.environ["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "77"


def test_a_restore_after_the_run_leaves_the_finished_run_s_ledger_alone(tmp_path) -> None:
    """CheckpointManager.restore notes its step in the ledger of the run in progress
    (resume_note); after `train` returned there is none, and the finished run's file stays
    as the run wrote it."""
    assert _run(tmp_path) == 0
    (run_file,) = (tmp_path / "ckpt").rglob(RUN_FILE)  # the ledger's own folder in it
    written = json.loads(run_file.read_text())
    resume_note.note_resumed(7)  # what CheckpointManager.restore does
    assert json.loads(run_file.read_text()) == written


# Two runs in one interpreter (`python -c`: DCP's checkpoint process may be spawned): the
# first fails in its model's build, after `start_writer` began its start; the second saves.
_TWO_RUNS = """
import sys
from trainforge.training import loop
from trainforge.training.__main__ import main

args = sys.argv[2:]
real = loop.build_model
def fails(*a, **k):
    raise RuntimeError("the model's build failed")
loop.build_model = fails
print("FIRST", main([*args, "--checkpoint-dir", sys.argv[1] + "/c1",
                     "--output-dir", sys.argv[1] + "/o1"]), flush=True)
loop.build_model = real
print("SECOND", main([*args, "--checkpoint-dir", sys.argv[1] + "/c2",
                      "--output-dir", sys.argv[1] + "/o2"]), flush=True)
"""


def test_a_run_after_one_that_failed_in_its_build_saves_asynchronously(tmp_path) -> None:
    """The failed run's start of DCP's checkpoint process (its group died with the run) is
    not the next run's: that one starts its own, and its saves are asynchronous."""
    import subprocess
    import sys

    from tests.conftest import ROOT, cli_env

    args = [*ARGS, "--steps", "4", "--async-checkpoint"]
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_RUNS, str(tmp_path), *args],
        env=cli_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert "FIRST 1" in out and "SECOND 0" in out, out[-3000:]
    second = out[out.index("FIRST 1") :]
    assert "WARNING" not in second, second
    assert "DCP's checkpoint process was started at set-up" in second, second


def test_after_a_failed_run_a_sigterm_ends_the_process_again(tmp_path) -> None:
    """A run that failed (here: a non-finite loss) never closed its PreemptionHandler, whose
    SIGTERM handler only sets a flag: the caller's handler is back once `train` returned."""
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert main([*ARGS, "--lr", "1e30", "--checkpoint-dir", str(tmp_path / "ckpt"),
                 "--output-dir", str(tmp_path / "out")]) == 1  # fmt: skip
    assert signal.getsignal(signal.SIGTERM) is before


def test_each_init_distributed_derives_its_own_group_s_nccl_heartbeat(monkeypatch) -> None:
    """Your code's `init_distributed()` sets NCCL's variables from the job's hang timeout;
    `cleanup` removes them, so the next group in the process (another hang timeout) gets its
    own heartbeat, not the first group's."""
    from trainforge.training import distributed
    from trainforge.training.contract import HANG_TIMEOUT

    heartbeat = "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"
    for key in [*Timeouts.from_hang_timeout(300).nccl_env(), "MASTER_ADDR", "WORLD_SIZE", "RANK"]:
        monkeypatch.delenv(key, raising=False)
    seen = []
    for hang in (100, 1000):
        monkeypatch.setenv(HANG_TIMEOUT, str(hang))
        distributed.init_distributed()
        seen.append(os.environ.get(heartbeat))
        distributed.cleanup()
    assert seen == [Timeouts.from_hang_timeout(h).nccl_env()[heartbeat] for h in (100, 1000)]
    assert seen[0] != seen[1]
    assert heartbeat not in os.environ
