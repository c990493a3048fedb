"""Issue 15's done-when, end to end through `trainforge run-local` (torchrun, 2 gloo workers,
--max-restarts): one rank hangs inside a step (test hook TRAINFORGE_TEST_FAULT=1:7:HANG), the
watchdog fires within its bound on every rank, names the stuck rank, dumps stacks and the
flight recorder, exits 201; torchrun restarts the group, which resumes from the last complete
checkpoint and finishes bit-identical to an uninterrupted run. Also: the exit code of a
failed job is its root cause's (launch.py), and a bug is not retried as if it were a hang.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runtime_helpers import BASE, assert_same, final_params, run_ranks_raw

ROOT = Path(__file__).resolve().parents[2]
STEPS = 20
EVERY = 5
HANG_TIMEOUT = 4.0  # the watchdog floor: steps here take ~20 ms, so the floor is the bound


def run_local(
    workdir: Path, *extra: str, env: dict[str, str] | None = None, restarts: int = 2
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "trainforge", "run-local", "--workers", "2",
        "--max-restarts", str(restarts), "--strategy", "ddp", "--model", "mlp",
        "--steps", str(STEPS), "--batch-size", "8", "--dataset-size", "512", "--seed", "3",
        "--log-every", "5", "--checkpoint-dir", str(workdir / "ckpt"),
        "--checkpoint-every", str(EVERY), "--output-dir", str(workdir / "out"),
        "--hang-timeout", str(HANG_TIMEOUT), "--grace-period", "10", *extra,
    ]  # fmt: skip
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    full_env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=400)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("ref")
    proc = run_local(work, restarts=0)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return final_params(work / "ckpt" / f"step_{STEPS:06d}")


def test_hung_rank_is_detected_restarted_and_the_job_matches_uninterrupted(
    tmp_path: Path, reference
) -> None:
    proc = run_local(tmp_path, env={"TRAINFORGE_TEST_FAULT": "1:7:HANG"})
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-5000:]
    assert "test hook TRAINFORGE_TEST_FAULT: HANG in step 7" in logs

    # the watchdog fired on both ranks, past its bound (the floor: steps are ~20 ms); how
    # long past it depends on the machine's load, so no upper limit is asserted
    fired = re.findall(
        r"\[rank(\d)\] watchdog: rank \d: step 7 made no progress for ([\d.]+)s "
        r"\(bound ([\d.]+)s = max\(10 x [\d.]+s mean of the last 6 steps, 4s floor\)\)",
        logs,
    )
    assert sorted(r for r, _, _ in fired) == ["0", "1"], logs[-5000:]
    for _, elapsed, bound in fired:
        assert float(bound) == HANG_TIMEOUT
        assert float(elapsed) >= float(bound)  # printed to 0.1 s: 4.04 s reads '4.0'
    # every thread's stack, including where rank 1 is stuck (the hook's sleep)
    assert "Stack of every thread" in logs
    # line by line with the rank's prefix: two ranks firing at once do not interleave
    assert re.search(r'\[rank1\]\s+File ".*faults\.py", line \d+ in __call__', logs), logs[-5000:]
    # rank 0 names the rank the others wait for, from the flight recorder's sequence numbers
    assert re.search(r"across ranks: rank\(s\) \[1\] entered \d+ collectives", logs)
    dump = tmp_path / "out" / "flight-recorder" / "attempt_0000" / "nccl_trace_rank_1"
    entries = pickle.loads(dump.read_bytes())["entries"]
    assert any(e["profiling_name"] == "gloo:all_reduce" for e in entries)
    assert "trainforge exit: hang code=201 (rank 1, step 7)" in logs

    # torchrun restarted the group; the restart names the cause and resumes from step 5
    assert "restart: attempt 1; attempt 0 ended with hang (rank 1, step 7)" in logs
    assert "resumed from" in logs and "step_000005 at step 5" in logs
    assert_same(reference, final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["restarts"] == 1
    assert summary["attempts"][0]["exit"]["reason"] == "hang"
    assert summary["attempts"][0]["exit"]["rank"] == 1
    assert summary["attempts"][1]["resumed_step"] == EVERY
    gp = summary["goodput"]
    assert 0 < gp["goodput"] < 1
    assert gp["productive_seconds"] < gp["wall_seconds"]
    assert gp["lost_seconds"] > 0  # step 6 ran on attempt 0 and again on attempt 1


def test_a_bug_fails_the_job_with_its_own_code_not_its_peers(tmp_path: Path) -> None:
    """Rank 1 raises; rank 0 then sees its peer vanish (202, retryable). The job's exit code
    must be the bug's (1, permanent), or ExitCode would restart a bug forever."""
    proc = run_local(tmp_path, env={"TRAINFORGE_TEST_FAULT": "1:3:ERROR"}, restarts=0)
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 1, logs[-4000:]
    assert "trainforge exit: user_error code=1 (rank 1, step 3)" in logs
    assert re.search(
        r"trainforge launch: workers failed: .*exiting with 1 \(user_error, permanent", logs
    )


@pytest.mark.parametrize(
    ("kind", "code", "reason"),
    [("OOM", 3, "oom"), ("COLLECTIVE", 200, "collective_error")],
)
def test_failure_reasons_reach_the_exit_code_and_the_log(
    tmp_path: Path, kind: str, code: int, reason: str
) -> None:
    args = [*BASE, "--steps", "6", "--batch-size", "8", "--checkpoint-dir", str(tmp_path / "c"),
            "--output-dir", str(tmp_path / "o")]  # fmt: skip
    results = run_ranks_raw(2, args, TRAINFORGE_TEST_FAULT=f"1:4:{kind}")
    (code0, out0), (code1, out1) = results
    assert code1 == code, out1[-3000:]
    assert f"trainforge exit: {reason} code={code} (rank 1, step 4)" in out1
    # the peer of a failed rank fails in the next collective: a lost peer, retryable
    assert code0 >= 128, out0[-3000:]
    record = json.loads(
        (tmp_path / "c" / ".trainforge" / "exits" / "attempt_0000" / "rank_00001.json").read_text()
    )
    assert record["reason"] == reason and record["code"] == code
