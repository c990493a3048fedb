"""The loop's own verdicts, exactly: the no-progress stop and the summary's rates.

Why: a mutation run over `training/loop.py` (docs/rehearsals.md) found the no-progress
message and the summary's derived rates (setup time, steps/s, MFU, the per-GPU peak) unread
by any test: an operator flipped there changed what `summary.json`, `trainforge calibrate`
and the user read, and every test still passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from trainforge.training import exits, loop
from trainforge.training.config import parse_args
from trainforge.training.distributed import DistEnv
from trainforge.training.goodput import Goodput
from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger

ONE = DistEnv(0, 1, 0, 1, torch.device("cpu"), "gloo")
ROOT = Path(__file__).resolve().parents[2]


def _hung_attempts(root: Path, n: int, resumed: int | None) -> RunLedger:
    """n attempts that hung after resuming from `resumed` (or died before resuming), then
    the current one."""
    for _ in range(n):
        ledger = RunLedger(root, rank=0, world_size=1)
        ledger.begin_attempt()
        if resumed is not None:
            Goodput(ledger).begin(resumed)
            ledger.record_exit(exits.HANG, step=resumed + 1, detail="stuck")
    ledger = RunLedger(root, rank=0, world_size=1)
    ledger.begin_attempt()
    return ledger


def test_the_no_progress_stop_names_its_count_step_limit_and_last_exit(
    one_rank_group, tmp_path
) -> None:
    ledger = _hung_attempts(tmp_path, NO_PROGRESS_LIMIT, 40)
    last = ledger.previous_exit()
    assert last is not None and last["reason"] == "hang"
    with pytest.raises(exits.RunFailure) as e:
        loop._check_progress(ledger, ONE, 40, None)
    assert e.value.reason is exits.NO_PROGRESS
    # the last exit as people read it, not the ledger record's dict repr ({'reason': ...})
    assert str(e.value) == (
        f"{NO_PROGRESS_LIMIT} attempts in a row failed after resuming from step 40 "
        f"(limit {NO_PROGRESS_LIMIT}); the last one: hang (rank 0, step 41): stuck"
    )


def test_attempts_that_never_resumed_stop_the_run_before_resuming(one_rank_group, tmp_path) -> None:
    ledger = _hung_attempts(tmp_path, NO_PROGRESS_LIMIT, None)
    last = ledger.previous_exit()  # no exit record: the ledger names the likely killer
    assert last is not None and last["reason"] == "node_lost"
    with pytest.raises(exits.RunFailure) as e:
        loop._check_progress(ledger, ONE, None, None)
    assert str(e.value) == (
        f"{NO_PROGRESS_LIMIT} attempts in a row failed before resuming "
        f"(limit {NO_PROGRESS_LIMIT}); the last one: node_lost (rank 0): {last['detail']}"
    )
    assert last["detail"].startswith("rank(s) 0 left no exit record")


def test_more_attempts_than_the_limit_stop_it_too(one_rank_group, tmp_path) -> None:
    ledger = _hung_attempts(tmp_path, NO_PROGRESS_LIMIT + 2, 40)
    with pytest.raises(exits.RunFailure, match=f"^{NO_PROGRESS_LIMIT + 2} attempts in a row"):
        loop._check_progress(ledger, ONE, 40, None)


def test_one_attempt_short_of_the_limit_goes_on(one_rank_group, tmp_path) -> None:
    ledger = _hung_attempts(tmp_path, NO_PROGRESS_LIMIT - 1, 40)
    loop._check_progress(ledger, ONE, 40, None)  # no raise
    # ... and a different resume step is progress: nothing counts
    ledger = _hung_attempts(tmp_path / "b", NO_PROGRESS_LIMIT, 40)
    loop._check_progress(ledger, ONE, 50, None)


PEAK = 2.5e12  # FLOP/s per device, stood in for a GPU's (CPU has none)


def test_the_summary_s_rates_derive_from_its_counts_and_the_peak(
    tmp_path, monkeypatch, capsys
) -> None:
    """One process, in this one; the device's peak replaced so that MFU is computed on CPU
    too. The second run resumes at step 4, so its rates count only its own 2 steps."""
    monkeypatch.setattr(loop, "peak_flops", lambda device: PEAK)
    # a tiny GPT: more than one token per sample, so tokens/s is not samples/s
    gpt = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2"]
    gpt += ["--seq-len", "16", "--vocab-size", "64", "--dataset-size", "256"]
    common = [*gpt, "--batch-size", "8", "--checkpoint-every", "2", "--warmup-steps", "1"]
    common += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--output-dir", str(tmp_path / "o")]
    assert loop.train(parse_args([*common, "--steps", "4"])) == 0
    # the resumed run on a clock 1000 x slow: its loop is well under a second of that clock,
    # so a guard that hid a short loop's rates (`elapsed > 1`) would show here as 0 steps/s
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() / 1000)
    started = time.perf_counter()
    assert loop.train(parse_args([*common, "--steps", "6"])) == 0
    wall = time.perf_counter() - started
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    steps, elapsed = s["steps_this_run"], s["elapsed_seconds"]
    assert (s["steps"], steps, s["global_batch"]) == (6, 2, 8)
    assert 0 < elapsed < wall < 1  # the loop's own time, within the call's (slow clock)
    sps = steps * 8 / elapsed
    assert s["samples_per_second"] == pytest.approx(sps, rel=1e-9)
    assert s["steps_per_second"] == pytest.approx(steps / elapsed, rel=1e-9)
    assert s["tokens_per_second"] == pytest.approx(sps * 16, rel=1e-9)  # --seq-len tokens
    assert s["peak_flops_per_gpu"] == PEAK  # the world's peak over its ranks
    assert s["mfu"] == pytest.approx(sps * s["flops_per_sample"] / PEAK, rel=1e-9)
    assert 0 < s["mfu"] < 1
    # set-up is the time before the loop: within the call, never a sum of two clocks
    assert 0 < s["setup_seconds"] < wall - elapsed
    # ranks agree, so no error is logged (the error line is for a disagreement only)
    assert s["ranks_agree"] is True and "error:" not in capsys.readouterr().out


def test_a_non_finite_loss_stops_the_run_as_the_user_s_error(tmp_path, capsys) -> None:
    """A learning rate of 1e20 makes the MLP's loss NaN at its second logged step: the run
    stops there as a user error (permanent: a retry would diverge again), and says why."""
    args = ["--model", "mlp", "--dataset-size", "256", "--batch-size", "8", "--lr", "1e20"]
    args += ["--warmup-steps", "1", "--steps", "8", "--log-every", "1"]
    with pytest.raises(exits.RunFailure) as e:
        loop.train(parse_args([*args, "--output-dir", str(tmp_path / "o")]))
    assert e.value.reason is exits.USER_ERROR
    assert str(e.value) == "loss is nan at step 2; lower --lr"
    assert "error: loss is nan at step 2; lower --lr" in capsys.readouterr().out


def test_a_non_finite_loss_s_exit_line_points_at_the_loss_not_a_traceback(tmp_path) -> None:
    """The runtime stops on a non-finite loss without a traceback (a RunFailure); its exit
    line said "action: fix the error in the traceback", user_error's, which pointed at
    nothing. Run as the pod runs it (`python -m trainforge.training`, one process)."""
    args = ["--model", "mlp", "--dataset-size", "256", "--batch-size", "8", "--lr", "1e20"]
    args += ["--warmup-steps", "1", "--steps", "8", "--log-every", "1"]
    args += ["--output-dir", str(tmp_path / "o"), "--checkpoint-dir", str(tmp_path / "c")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge.training", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == exits.USER_ERROR.code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("trainforge exit:")]
    assert line == (
        "trainforge exit: user_error code=1 (rank 0, step 2): loss is nan at step 2; lower --lr "
        f"[permanent: the job stops; action: {loop.NON_FINITE_LOSS_ACTION}]"
    )
    assert "there is no traceback" in loop.NON_FINITE_LOSS_ACTION
