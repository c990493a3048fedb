"""The reliability pieces on their own (fast): derived timeouts, the watchdog's bound and
firing, the flight recorder dump, exit classification and codes, the launcher's root cause,
the run ledger across restarts and the goodput arithmetic. End to end: test_reliability_e2e.py.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from trainforge.training import exits, faults, launch
from trainforge.training.checkpoint import CheckpointError
from trainforge.training.config import ConfigError, parse_args
from trainforge.training.goodput import Goodput
from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger
from trainforge.training.metrics import Gauges
from trainforge.training.timeouts import Timeouts, apply_env
from trainforge.training.watchdog import Watchdog, summarize

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------- timeouts


def test_every_timeout_derives_from_the_hang_timeout_in_a_fixed_order() -> None:
    t = Timeouts.from_hang_timeout(300)
    assert (t.hang_timeout, t.watchdog_startup, t.collective) == (300, 900, 960)
    # the watchdog (<= 900 s) always fires before a collective times out (960 s)
    assert t.nccl_heartbeat == t.collective
    assert t.rendezvous == 960 and t.torchrun_rdzv_conf(elastic=True) == "join_timeout=960"
    assert t.torchrun_rdzv_conf(elastic=False) == "timeout=960"
    small = Timeouts.from_hang_timeout(10)
    assert small.collective == 90 and small.rendezvous == 900  # pods need time to come back
    off = Timeouts.from_hang_timeout(0)
    assert not off.watchdog_enabled and off.collective == 600
    with pytest.raises(ValueError, match="--hang-timeout must be >= 0"):
        Timeouts.from_hang_timeout(-1)


def test_nccl_settings_never_override_what_the_job_set() -> None:
    env = {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "42"}
    applied = apply_env(Timeouts.from_hang_timeout(300), "/fsx/run/fr/nccl_trace_rank_", env)
    assert env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "42"
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" not in applied
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == "/fsx/run/fr/nccl_trace_rank_"


def test_hang_timeout_flag(capsys) -> None:
    assert parse_args(["--hang-timeout", "45"]).hang_timeout == 45.0
    assert parse_args([]).hang_timeout == 300.0
    with pytest.raises(SystemExit):
        parse_args(["--hang-timeout", "-3"])
    assert "--hang-timeout must be >= 0 and <= 86400, got -3" in capsys.readouterr().err


# --------------------------------------------------------------------------------- watchdog


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_step_bound_is_startup_then_a_multiple_of_recent_steps_with_a_floor() -> None:
    clock = FakeClock()
    wd = Watchdog(5.0, rank=0, world_size=1, clock=clock, log=lambda m: None)
    assert wd.bound()[0] == 15.0  # first steps after a start: 3 x floor
    for _ in range(3):
        wd.step_started()
        clock.t += 0.1
        wd.step_finished()
    bound, why = wd.bound()
    assert bound == 5.0 and "5s floor" in why  # 10 x 0.1 s < floor
    for _ in range(32):  # the window forgets the fast steps
        wd.step_started()
        clock.t += 2.0
        wd.step_finished()
    assert wd.bound()[0] == pytest.approx(20.0)  # 10 x 2 s mean


def test_watchdog_fires_once_a_step_exceeds_its_bound_and_exits_201() -> None:
    logs: list[str] = []
    codes: list[int] = []
    fired = threading.Event()
    seen = []

    def on_fire(f) -> None:
        seen.append(f)

    def exit_fn(code: int) -> None:
        codes.append(code)
        fired.set()

    clock = FakeClock()  # the watchdog's own clock: no assertion on wall time
    wd = Watchdog(0.4, rank=3, world_size=8, warmup_steps=0, log=logs.append, on_fire=on_fire,
                  exit_fn=exit_fn, poll_s=0.01, clock=clock)  # fmt: skip
    with wd:
        for step in range(1, 4):
            with wd.step(step):
                clock.t += 0.01
        wd.step_started(4)
        clock.t += 0.39  # within the bound: polls keep finding it in time
        assert not fired.wait(0.2), logs
        clock.t += 0.06
        assert fired.wait(30), logs
    assert codes == [exits.HANG.code]
    assert seen and seen[0].activity.step == 4
    assert seen[0].elapsed == pytest.approx(0.45)  # by the watchdog's clock
    assert any("rank 3: step 4 made no progress" in m for m in logs)
    assert any(m.startswith("trainforge exit: hang code=201 (rank 3, step 4)") for m in logs)


def test_a_slow_but_progressing_job_never_fires() -> None:
    codes: list[int] = []
    wd = Watchdog(0.3, warmup_steps=1, log=lambda m: None, exit_fn=codes.append, poll_s=0.02)
    with wd:
        for step in range(6):
            with wd.step(step):
                time.sleep(0.12)
            with wd.section("checkpoint"):
                time.sleep(0.2)  # sections have their own (startup) bound: 0.9 s
    assert codes == []


def test_sections_get_their_own_bound_and_do_not_count_against_a_step() -> None:
    clock = FakeClock()
    wd = Watchdog(1.0, rank=0, world_size=1, clock=clock, log=lambda m: None)
    wd.step_started(1)
    with wd.section("checkpoint"):
        assert wd._activity.bound == 3.0  # startup bound
        clock.t += 2.5
    # the step resumes with the section's time taken off
    clock.t += 0.1
    assert wd.step_finished() == pytest.approx(0.1)
    with wd.section("checkpoint"):
        assert wd._activity.bound == pytest.approx(25.0)  # 10 x the longest previous save


def test_summary_names_the_ranks_the_others_wait_for() -> None:
    statuses = {
        0: {"step": 7, "seq": 18},
        1: {"step": 7, "seq": 17},
        2: {"step": 7, "seq": 18},
    }
    line = summarize(statuses, world_size=4)
    assert "rank(s) [1] entered 17 collectives" in line
    assert "the others wait for [1]" in line
    assert "no report from rank(s) [3]" in line
    assert "lowest step 6 on rank(s) [1]" in summarize(
        {0: {"step": 7}, 1: {"step": 6}}, world_size=2
    )


def test_watchdog_dumps_the_flight_recorder_and_exits_201(tmp_path: Path) -> None:
    """A real process: a 1-rank gloo group with the flight recorder on (it must be enabled
    before the group exists, hence a fresh interpreter), a hang, the dump, exit code 201."""
    script = f"""
import time, torch, torch.distributed as dist
from trainforge.training.watchdog import Watchdog
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
wd = Watchdog(0.5, warmup_steps=0, dump_dir={str(tmp_path)!r}, poll_s=0.05).start()
wd.step_started(9)
time.sleep(30)
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCH_FR_BUFFER_SIZE="100")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 201, proc.stderr[-3000:]
    assert "step 9 made no progress" in proc.stderr
    assert "Current thread" in proc.stderr  # faulthandler: the stack of every thread
    assert "Current thread" in (tmp_path / "stacks_rank_0.txt").read_text()
    dump = pickle.loads((tmp_path / "nccl_trace_rank_0").read_bytes())
    assert [e["profiling_name"] for e in dump["entries"]][-3:] == ["gloo:all_reduce"] * 3
    assert "across ranks: every reporting rank entered 3 collectives" in proc.stderr


def test_watchdog_floor_must_be_positive() -> None:
    with pytest.raises(ValueError, match="floor_s must be > 0"):
        Watchdog(0)


def test_watchdog_from_the_job_contract(monkeypatch, tmp_path: Path) -> None:
    """User code: `Watchdog.from_env()` takes the job's hangTimeout and output directory."""
    from trainforge.training import Watchdog as Exported
    from trainforge.training.contract import ContractError, job_env

    assert Exported is Watchdog
    monkeypatch.setenv("TRAINFORGE_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    monkeypatch.setenv("TRAINFORGE_HANG_TIMEOUT", "45")
    wd = Watchdog.from_env(multiple=4)
    assert (wd.enabled, wd.floor_s, wd.startup_s, wd.multiple) == (True, 45.0, 135.0, 4.0)
    assert wd.dump_dir == tmp_path / "flight-recorder" / "attempt_0002"

    monkeypatch.setenv("TRAINFORGE_HANG_TIMEOUT", "0")  # hangTimeout: 0 = off
    off = Watchdog.from_env(exit_fn=lambda code: pytest.fail("a disabled watchdog fired"))
    with off:
        assert off._thread is None
        with off.step(1):
            pass
    monkeypatch.delenv("TRAINFORGE_HANG_TIMEOUT")
    assert job_env().hang_timeout == 300.0
    monkeypatch.setenv("TRAINFORGE_HANG_TIMEOUT", "-1")
    with pytest.raises(ContractError, match="TRAINFORGE_HANG_TIMEOUT"):
        job_env()


def test_init_distributed_derives_its_timeouts_from_the_contract(tmp_path: Path) -> None:
    """User code calling init_distributed() gets the same waits as the runtime: collective
    timeout 3 x hangTimeout + 60 s, NCCL heartbeat the same (a fresh interpreter: the NCCL
    variables are set in its environment)."""
    script = """
import os
from trainforge.training import init_distributed
from trainforge.training.distributed import group_timeout
init_distributed()
print(group_timeout().total_seconds(), os.environ["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"],
      os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"])
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "RANK", "WORLD"))}
    env.update(PYTHONPATH=str(ROOT), TRAINFORGE_HANG_TIMEOUT="20")
    env.pop("MASTER_ADDR", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["120.0", "120", "3"]


# ------------------------------------------------------------------------ exit reasons


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), exits.OOM),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 80 GB"), exits.OOM),
        (dist.DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"),
         exits.COLLECTIVE_ERROR),
        (RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for "
                      "recv operation to complete"), exits.COLLECTIVE_ERROR),
        (RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                      "[127.0.0.1]:17822. This is typically caused by a remote worker crashing."),
         exits.PEER_LOST),
        (dist.DistBackendError("NCCL error: remote process exited or there was a network error"),
         exits.PEER_LOST),
        (dist.DistNetworkError("Broken pipe"), exits.PEER_LOST),
        (RuntimeError("CUDA error: uncorrectable ECC error encountered"), exits.GPU_ERROR),
        (ConfigError("--batch-size must be > 0"), exits.CONFIG_ERROR),
        (CheckpointError("could not load checkpoint /x"), exits.CONFIG_ERROR),
        (ValueError("shapes (3,) and (4,) not aligned"), exits.USER_ERROR),
        (KeyError("tok"), exits.USER_ERROR),
    ],
)  # fmt: skip
def test_classify(exc: BaseException, reason: exits.Reason) -> None:
    assert exits.classify(exc) is reason


def test_a_wrapped_oom_is_still_an_oom() -> None:
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory")
        except RuntimeError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as outer:
        assert exits.classify(outer) is exits.OOM


def test_codes_below_128_stop_the_job_and_the_others_restart_it() -> None:
    """The Kubeflow training operator 1.9's ExitCode policy: retryable iff code >= 128."""
    permanent = {r.name for r in exits.REASONS.values() if 0 < r.code < 128}
    assert permanent == {"user_error", "config_error", "oom", "no_progress", "ranks_disagree"}
    retry = {r.name for r in exits.REASONS.values() if r.code >= 128}
    assert {"preempted", "collective_error", "hang", "peer_lost", "gpu_error"} <= retry
    assert len(exits.BY_CODE) == len(exits.REASONS)  # distinct codes, node_lost's 137 too
    assert all(r.code > 128 + 64 for r in (exits.COLLECTIVE_ERROR, exits.HANG, exits.PEER_LOST))


@pytest.mark.parametrize(
    ("failures", "code", "why"),
    [
        ({0: -15, 1: 201}, 201, "hang"),  # torchrun SIGTERMed rank 0 after rank 1 hung
        ({0: 202, 1: 1}, 1, "user_error, permanent"),  # a bug, not its lost peer
        ({0: 202, 1: 3}, 3, "oom"),
        ({0: 143, 1: 143}, 143, "preempted"),
        ({0: 202, 1: 5}, 5, "ranks_disagree, permanent"),  # not the peer it lost
        ({0: -9}, 137, "node_lost, retryable, rank 0"),  # killed outright: the kernel's code
        ({0: 202, 1: -9}, 137, "node_lost, retryable, rank 1"),  # not the peer that lost it
        ({0: -15, 1: -15}, 143, "preempted, retryable"),  # the kubelet: no rank SIGKILLed
    ],
)
def test_launcher_exits_with_the_root_cause(failures: dict, code: int, why: str) -> None:
    got, line = launch.worker_exit_code(failures)
    assert got == code
    assert why in line


@pytest.mark.parametrize("mine", sorted(exits.REASONS), ids=str)
def test_a_ranks_exit_line_never_contradicts_the_launcher(mine: str) -> None:
    """Each rank's line is printed before the launcher decides. A retryable rank must not
    promise a restart (rank 1's peer_lost next to rank 0's bug: the launcher says
    permanent); a permanent rank's "the job stops" must hold whatever its peers report."""
    reason = exits.REASONS[mine]
    if reason is exits.SUCCESS:
        return
    line = exits.exit_line(reason, rank=1, step=3, detail="x")
    for other in exits.REASONS.values():
        if other is exits.SUCCESS:
            continue
        code, decision = launch.worker_exit_code({0: other.code, 1: reason.code})
        permanent = "permanent" in decision.split("exiting with", 1)[1]
        if reason.retryable:
            assert "the job restarts;" not in line and "the launcher decides" in line
        else:
            assert "permanent: the job stops" in line and permanent, (mine, other.name)


def test_a_sigkilled_rank_explains_its_peers_torchrun_sigtermed() -> None:
    """Rank 0 was SIGKILLed (the OOM killer); torchrun then SIGTERMed rank 1, whose wrapper
    recorded `preempted`. The launcher said "exiting with 143 (preempted, ..., rank 1)": 137
    had no reason (BY_CODE left node_lost out), so the peer's SIGTERM won, and the ledger's
    node_lost record of the same attempt contradicted it. Now the kill is the cause: 137,
    node_lost, rank 0, and the termination message says so too (watched fail)."""
    records = {1: exits.PREEMPTED}
    code, line = launch.worker_exit_code({0: -9, 1: -15}, records)
    assert code == 137 == exits.NODE_LOST.code, line
    assert line.endswith("exiting with 137 (node_lost, retryable, rank 0)"), line
    assert "rank 0 exit -9 (killed by SIGKILL)" in line
    assert launch.pod_reason(code, records) is exits.NODE_LOST
    assert exits.for_code(128 + signal.SIGKILL) is exits.NODE_LOST
    # the ledger's count treats it as the failure it is, not as a preemption
    assert exits.NODE_LOST.retryable and not exits.is_preempted(exits.NODE_LOST)


def test_a_recorded_bug_wins_over_the_signal_that_ended_its_rank() -> None:
    """Rank 1 raised and recorded user_error, but torchrun SIGTERMed it during teardown
    after its peer exited first with peer_lost: the pod must still exit 1 (permanent)."""
    got, line = launch.worker_exit_code({0: 202, 1: -15}, {1: exits.USER_ERROR})
    assert got == 1 and "recorded user_error" in line and "user_error, permanent" in line
    assert launch.worker_exit_code({0: 202, 1: -15})[0] == 202  # without the record: retryable


def test_the_launcher_reads_this_failures_exit_records(tmp_path) -> None:
    ledger = tmp_path / ".trainforge" / "exits"
    old, new = ledger / "attempt_0000", ledger / "attempt_0001"
    old.mkdir(parents=True)
    new.mkdir()
    (old / "rank_00000.json").write_text(json.dumps({"reason": "oom", "rank": 0, "time": 100}))
    (new / "rank_00001.json").write_text(
        json.dumps({"reason": "user_error", "rank": 1, "time": 1000.0})
    )
    (new / "rank_00002.json").write_text(json.dumps({"reason": "hang", "rank": 2, "time": 10.0}))
    (new / "rank_00003.json").write_text("{half-written")
    assert launch.failure_records(str(tmp_path), 1005.0) == {1: exits.USER_ERROR}
    assert launch.checkpoint_dir(["-m", "trainforge.training", "--checkpoint-dir", "/c"]) == "/c"
    assert launch.checkpoint_dir(["--checkpoint-dir=/d"]) == "/d"


def test_without_a_checkpoint_dir_the_launcher_still_learns_why_a_local_rank_failed(
    tmp_path: Path, monkeypatch
) -> None:
    """`run-local --workers 2` keeps no checkpoint directory (no run ledger): a rank that
    raised and was then SIGTERMed by torchrun must still make the launcher exit 1, not its
    peer's 202. The ranks write their records into the folder the launcher gives them."""
    from trainforge.training.ledger import LOCAL_EXITS_ENV

    local = tmp_path / "launcher"
    monkeypatch.setenv(LOCAL_EXITS_ENV, str(local))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    RunLedger(None, rank=1, world_size=2, clock=lambda: 1000.0).record_exit(
        exits.USER_ERROR, step=3, detail="ValueError: a bug"
    )
    assert (local / "attempt_0001" / "rank_00001.json").is_file()
    records = launch.failure_records(None, 1001.0, str(local))
    assert records == {1: exits.USER_ERROR}
    assert launch.worker_exit_code({0: 202, 1: -15}, records)[0] == 1


def test_fault_hook_spec_is_checked() -> None:
    assert faults.parse("1:7:hang") == (1, 7, "HANG")
    assert faults.parse("") is None
    with pytest.raises(faults.FaultSpecError, match="RANK:STEP:KIND"):
        faults.parse("1:7:SLOW")


# ----------------------------------------------------------------------------- ledger


def test_a_process_after_a_finished_attempt_starts_a_new_run_not_a_restart(tmp_path: Path) -> None:
    """run-local twice in one run directory (or a finished job created again): the ledger
    kept the finished attempt, so the second run counted 'restarts: 1' (metrics, goodput,
    `trainforge report`: 'attempt 0 ended with cause not recorded') for a run that never failed.
    A failed attempt is still one the next process restarts; attempt numbers go on."""
    first = RunLedger(tmp_path, rank=0, world_size=1, log=lambda m: None)
    assert first.begin_attempt() == 0
    first.record_exit(exits.SUCCESS, step=None, detail="")
    again = RunLedger(tmp_path, rank=0, world_size=1, log=lambda m: None)
    assert again.begin_attempt() == 1
    again.resumed(0)  # at step 0: a new run (more steps from its checkpoint continue it)
    assert again.restarts == 0 and again.previous_exit() is None
    assert [a.attempt for a in again.attempts] == [1]
    again.record_exit(exits.USER_ERROR, step=3, detail="ValueError: x")
    third = RunLedger(tmp_path, rank=0, world_size=1, log=lambda m: None)
    assert third.begin_attempt() == 2
    assert third.restarts == 1 and third.previous_exit()["reason"] == "user_error"


def test_ledger_names_the_previous_attempts_exit_and_infers_a_lost_node(tmp_path: Path) -> None:
    first = RunLedger(tmp_path, rank=0, world_size=3, log=lambda m: None)
    assert first.begin_attempt() == 0
    for rank, reason in ((0, exits.PEER_LOST), (2, exits.PEER_LOST)):  # rank 1: no record
        RunLedger(tmp_path, rank=rank, world_size=3).record_exit(
            reason, step=12, detail="Connection closed by peer", attempt=0
        )
    second = RunLedger(tmp_path, rank=0, world_size=3, log=lambda m: None)
    assert second.begin_attempt() == 1
    prev = second.previous_exit()
    assert prev["reason"] == "node_lost" and prev["rank"] == 1
    assert "rank(s) 1 left no exit record" in prev["detail"] and "peer_lost" in prev["detail"]
    assert second.restarts == 1
    saved = json.loads((tmp_path / ".trainforge" / "run.json").read_text())
    assert [a["attempt"] for a in saved["attempts"]] == [0, 1]


def test_the_stuck_rank_of_a_hang_is_the_one_with_fewer_collectives(tmp_path: Path) -> None:
    RunLedger(tmp_path, rank=0, world_size=2).begin_attempt()
    for rank, seq in ((0, 18), (1, 17)):
        RunLedger(tmp_path, rank=rank, world_size=2).record_exit(
            exits.HANG, step=7, detail="no progress", attempt=0, extra={"collectives": seq}
        )
    ledger = RunLedger(tmp_path, rank=0, world_size=2)
    ledger.begin_attempt()
    assert ledger.previous_exit()["rank"] == 1


def test_a_bug_outranks_the_collective_errors_it_causes(tmp_path: Path) -> None:
    RunLedger(tmp_path, rank=0, world_size=2).begin_attempt()
    RunLedger(tmp_path, rank=0, world_size=2).record_exit(
        exits.PEER_LOST, step=3, detail="closed", attempt=0
    )
    RunLedger(tmp_path, rank=1, world_size=2).record_exit(
        exits.USER_ERROR, step=3, detail="ValueError: x", attempt=0
    )
    ledger = RunLedger(tmp_path, rank=0, world_size=2)
    ledger.begin_attempt()
    assert ledger.previous_exit()["reason"] == "user_error"


def test_attempts_without_progress_are_counted(tmp_path: Path) -> None:
    for _ in range(NO_PROGRESS_LIMIT + 1):
        ledger = RunLedger(tmp_path, rank=0, world_size=1)
        ledger.begin_attempt()
        Goodput(ledger).begin(40)
        ledger.record_exit(exits.HANG, step=41, detail="stuck")
    assert ledger.attempts_without_progress(40) == NO_PROGRESS_LIMIT
    assert ledger.attempts_without_progress(50) == 0


def test_attempts_killed_before_resuming_are_counted_too(tmp_path: Path) -> None:
    """An OOM kill (137) while loading leaves no exit record and no resumed step: every such
    attempt is one without progress, so the early check stops the loop."""
    for _ in range(NO_PROGRESS_LIMIT + 1):
        ledger = RunLedger(tmp_path, rank=0, world_size=1)
        ledger.begin_attempt()  # ... and the process dies here, SIGKILLed
    assert ledger.attempts_without_progress(None) == NO_PROGRESS_LIMIT
    assert ledger.attempts_without_progress(40) == NO_PROGRESS_LIMIT
    Goodput(ledger).begin(40)  # this one resumes at 40 and dies there too
    ledger = RunLedger(tmp_path, rank=0, world_size=1)
    ledger.begin_attempt()
    assert ledger.attempts_without_progress(40) == NO_PROGRESS_LIMIT + 1
    assert ledger.attempts_without_progress(None) == 0  # the last one did resume


def test_without_a_checkpoint_dir_the_ledger_is_this_process_only(monkeypatch) -> None:
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    ledger = RunLedger(None, rank=0, world_size=2)
    assert ledger.begin_attempt() == 2
    assert not ledger.persistent and ledger.restarts == 2


# ----------------------------------------------------------------------------- goodput


def test_goodput_counts_kept_steps_only(tmp_path: Path) -> None:
    clock = FakeClock()
    start = clock.t
    a0 = RunLedger(tmp_path, rank=0, world_size=1, clock=clock, process_started_at=start)
    a0.begin_attempt()
    g0 = Goodput(a0)
    clock.t += 10  # startup
    g0.begin(0)
    for step in range(1, 9):  # 8 steps of 1 s; a checkpoint after step 5 (blocks 2 s)
        clock.t += 1
        g0.step(step, 1.0)
        if step == 5:
            g0.checkpoint_started(5)
            clock.t += 2
            g0.checkpoint_blocked(2.0)
    g0.flush()  # then the attempt dies; 20 s pass before the restart starts
    clock.t += 20
    a1 = RunLedger(tmp_path, rank=0, world_size=1, clock=clock, process_started_at=clock.t)
    a1.begin_attempt()
    g1 = Goodput(a1)
    clock.t += 10
    g1.begin(5)
    for step in range(6, 11):
        clock.t += 1
        g1.step(step, 1.0)
    s = g1.snapshot()
    assert s["wall_seconds"] == pytest.approx(clock.t - start) == pytest.approx(55)
    assert s["productive_seconds"] == pytest.approx(10)  # steps 1-10, once each
    assert s["lost_seconds"] == pytest.approx(3)  # steps 6-8 of attempt 0
    assert s["startup_seconds"] == pytest.approx(20)
    assert s["checkpoint_seconds"] == pytest.approx(2)
    assert s["other_seconds"] == pytest.approx(20)  # the restart gap
    assert s["goodput"] == pytest.approx(10 / 55)
    assert s["restarts"] == 1
    assert g1.gauges()["goodput"] == pytest.approx(10 / 55)


def test_labelled_gauges_render_as_prometheus_text() -> None:
    g = Gauges()
    g.update({"goodput": 0.5, 'attempt_exits{reason="hang"}': 2, 'attempt_exits{reason="oom"}': 0})
    text = g.render({"run": "r1"})
    assert text.count("# TYPE trainforge_attempt_exits gauge") == 1
    assert 'trainforge_attempt_exits{run="r1",reason="hang"} 2.0' in text
    assert 'trainforge_goodput{run="r1"} 0.5' in text


def test_a_step_bound_is_the_mean_of_the_window_kept_as_a_running_sum() -> None:
    """The per-step bound no longer sums the window or formats its explanation each step
    (about 3x cheaper per step, measured on this CPU): it must still be max(multiple x the
    mean of the last `window` steps, floor) after the window slides, and the fired line must
    still explain it."""
    clock = FakeClock()
    logs: list[str] = []
    wd = Watchdog(0.1, rank=0, world_size=1, clock=clock, log=logs.append, window=4,
                  warmup_steps=2, multiple=10, exit_fn=lambda code: None)  # fmt: skip
    durations = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 0.25]
    for step, d in enumerate(durations):
        wd.step_started(step)
        clock.t += d
        wd.step_finished()
    last4 = durations[-4:]
    wd.step_started(99)
    assert wd._activity.bound == pytest.approx(10 * sum(last4) / 4)
    assert wd._activity.why == ""  # written on firing only
    assert wd.bound()[0] == pytest.approx(wd._activity.bound)
    wd._fire(wd._activity, 1000.0)
    mean = sum(last4) / 4
    assert any(f"(bound {10 * mean:.1f}s = max(10 x {mean:.3f}s mean of the last 4 steps"
               in m for m in logs), logs  # fmt: skip


def test_your_own_exit_code_is_labelled_yours_by_the_launcher(tmp_path: Path) -> None:
    """`sys.exit(3)` in your code: the launcher said "rank 0 exit 3 (oom); exiting with 3 (oom,
    permanent, rank 0)". The rank's record (user_exit, code 3) says who chose the code; the
    pod keeps 3, and its termination message carries the same record."""
    folder = tmp_path / "attempt_0001"
    folder.mkdir()
    rec = {"reason": "user_exit", "code": 3, "rank": 0, "time": 1000.0}
    (folder / "rank_00000.json").write_text(json.dumps(rec))
    records = launch.failure_records(None, 1001.0, str(tmp_path))
    assert records == {0: exits.user_exit(3)}
    code, line = launch.worker_exit_code({0: 3}, records)
    assert code == 3 and "oom" not in line
    assert line.endswith("rank 0 exit 3 (user_exit); exiting with 3 (user_exit, permanent, rank 0)")
    assert launch.pod_reason(3, records) == exits.user_exit(3)
    assert launch.pod_reason(3, {}) is exits.OOM  # the runtime's own code: its reason
    # a bug on another rank is still the root cause; your code's 200 is retryable, not NCCL's
    assert launch.worker_exit_code({0: 3, 1: 1}, records)[0] == 1
    code, line = launch.worker_exit_code({0: 200}, {0: exits.user_exit(200)})
    assert code == 200 and "collective_error" not in line and "(user_exit, retryable" in line
