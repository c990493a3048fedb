"""A rank torchrun stops because another failed: its own record says so, not `preempted`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from trainforge.training import exits, launch
from trainforge.training.ledger import EXITS_DIR, LEDGER_DIR, RunLedger

ROOT = Path(__file__).resolve().parents[2]


def _record(root: Path, rank: int, reason: exits.Reason, step: int | None = 7) -> None:
    RunLedger(root, rank=rank, world_size=2, clock=lambda: 1000.0).record_exit(
        reason, step=step, detail=reason.what, extra=exits.record_fields(reason) or None
    )


def test_the_rank_torchrun_stopped_is_recorded_stopped_by_the_failed_rank(tmp_path) -> None:
    """Rank 0 failed in a collective; torchrun SIGTERMed rank 1, whose handler recorded
    `preempted` ("a spot interruption, a drain or a deletion"): `trainforge report` and the
    next attempt said so for a rank nobody preempted (watched fail: still preempted)."""
    _record(tmp_path, 0, exits.COLLECTIVE_ERROR)
    _record(tmp_path, 1, exits.PREEMPTED, step=9)
    folder = tmp_path / LEDGER_DIR / EXITS_DIR
    records = launch.failure_records(str(tmp_path), 1001.0)
    failures, times = {0: 200, 1: -15}, {0: 1001, 1: 1001}
    code, root_rank, root, _ = launch.verdict(failures, records, times)
    assert (code, root_rank, root) == (200, 0, exits.COLLECTIVE_ERROR)
    stopped = launch.followers(failures, records, times, root_rank)
    assert stopped == {1: 143}
    launch.restate_followers([folder], stopped, root_rank, root, 1001.0)
    rec = json.loads((folder / "attempt_0000" / "rank_00001.json").read_text())
    assert rec["reason"] == "stopped" and rec["code"] == 143 and rec["step"] == 9, rec
    said = exits.from_record(rec)
    assert said is not None and not exits.is_preempted(said)
    assert said.what == (
        "stopped by torchrun (its SIGTERM) because rank 0 failed (collective_error): "
        "not a preemption"
    )
    doc = " ".join((ROOT / "docs" / "reliability.md").read_text(encoding="utf-8").split())
    assert f'"{said.what}"' in doc  # as documented
    # the next attempt names the cause and the follower as such
    ledger = RunLedger(tmp_path, rank=0, world_size=2)
    out = ledger.collect_exits(0)
    assert out["reason"] == "collective_error" and out["detail"].endswith("(other ranks: stopped)")


def test_a_stuck_rank_killed_in_the_teardown_is_no_lost_node_for_the_next_attempt(
    tmp_path,
) -> None:
    """Rank 1, stuck in a C call, left no record; torchrun SIGKILLed it 30 s after its
    SIGTERM. The next attempt's ledger read the missing record as node_lost and named it the
    cause over rank 0's recorded collective_error. The launcher now writes its record."""
    _record(tmp_path, 0, exits.COLLECTIVE_ERROR)
    folder = tmp_path / LEDGER_DIR / EXITS_DIR
    failures, times = {0: 200, 1: -9}, {0: 1001, 1: 1032}
    records = launch.failure_records(str(tmp_path), 1001.0)
    _, root_rank, root, _ = launch.verdict(failures, records, times)
    stopped = launch.followers(failures, records, times, root_rank)
    assert stopped == {1: 137}
    launch.restate_followers([folder], stopped, root_rank, root, 1001.0)
    out = RunLedger(tmp_path, rank=0, world_size=2).collect_exits(0)
    assert out["reason"] == "collective_error", out
    said = exits.from_record(json.loads((folder / "attempt_0000" / "rank_00001.json").read_text()))
    assert said is not None and said.code == 137 and "its SIGKILL" in said.what


def test_a_recorded_cause_and_a_first_sigkill_are_not_followers(tmp_path) -> None:
    records = {1: exits.USER_ERROR}  # raised, then SIGTERMed: its own cause stands
    assert 1 not in launch.followers({0: 202, 1: -15}, records, {0: 5, 1: 5}, 0)
    # the OOM killer's SIGKILL among the first failures is the cause, never restated
    assert launch.followers({0: -9, 1: -15}, {}, {0: 5, 1: 5}, 0) == {1: 143}
    # an attempt folder without a record of this failure (an older attempt's) is left alone
    _record(tmp_path, 0, exits.OOM)  # time 1000: long before this failure
    folder = tmp_path / LEDGER_DIR / EXITS_DIR
    launch.restate_followers([folder], {1: 143}, 0, exits.NODE_LOST, 5000.0)
    assert not (folder / "attempt_0000" / "rank_00001.json").exists()


def test_torchrun_itself_stops_rank_1_and_its_record_says_why(tmp_path) -> None:
    """The real launcher (torchrun in-process) over your code under the wrapper: rank 0
    raises a collective error, rank 1 waits; torchrun SIGTERMs rank 1. Its record in the run
    ledger names rank 0's failure, not a preemption."""
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """\
            import os, time
            if os.environ["RANK"] == "0":
                time.sleep(2)
                raise RuntimeError("NCCL error: unhandled system error")
            time.sleep(120)
            """
        )
    )
    ckpt = tmp_path / "ckpt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "TORCHELASTIC"))}
    env.update(PYTHONPATH=str(ROOT), TRAINFORGE_CHECKPOINT_DIR=str(ckpt), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainforge.training.launch", "--nproc-per-node", "2",
           "--master-port", "0", "--monitor-interval", "0.2",
           "-m", "trainforge.training.usercode", str(script)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 200, proc.stderr[-3000:]
    folder = ckpt / LEDGER_DIR / EXITS_DIR
    (attempt,) = folder.glob("attempt_*")
    rec = json.loads((attempt / "rank_00001.json").read_text())
    assert rec["reason"] == "stopped" and rec["by"] == 0, rec
    assert rec["cause"] == "collective_error" and rec["code"] == 143, rec


def test_a_launcher_stopped_by_sigint_leaves_interrupted_not_a_cleared_message() -> None:
    """Ctrl-C reaches the launcher (torchrun's SignalException, exit 130): the pod's
    termination message was cleared (None); now it says `interrupted`, your stop."""
    assert launch.stopped_reason(130, {}) is exits.INTERRUPTED
    assert launch.stopped_reason(143, {}) is exits.PREEMPTED
