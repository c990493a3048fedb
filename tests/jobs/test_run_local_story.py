"""run-local, the run ledger and `trainforge report` tell the cluster's story (wave-20 review,
/work/wt/rev20mle): the job's end by its backend's success rule (jobs/local.py SUCCESS_RULE),
run-local's own verdict recorded where the report reads it, checkpoints the report does not
count named, and a SIGINT to run-local's PID a stop like a terminal's Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainforge import report
from trainforge.jobs import local
from trainforge.training import exits
from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger, job_ended

FIXTURES = ROOT / "tests" / "fixtures" / "localtrue"
STACK = """\
config:
  trainforge:jobs:
  - name: my-extra
    team: research
    pool: training-workloads
    workers: 2
    entrypoint:
      script: extra_coll.py
  - name: my-ckpt
    team: research
    pool: training-workloads
    workers: 2
    entrypoint:
      script: ckpt_local.py
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run_and_report(project: Path, job: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    cmd = [sys.executable, "-m", "trainforge", "run-local", "--stack", "t", job]
    proc = subprocess.run(cmd, cwd=project, env=_env(), capture_output=True, text=True, timeout=600)
    rep = subprocess.run(
        [sys.executable, "-m", "trainforge", "report", f"runs/{job}"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc, rep


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    out = tmp_path_factory.mktemp("project")
    for name in ("extra_coll.py", "ckpt_local.py"):
        shutil.copy(FIXTURES / name, out)
    (out / "Pulumi.t.yaml").write_text(STACK)
    return out


@pytest.fixture(scope="module")
def extra_run(project):
    """One run of the review's `run-local --stack mle my-extra` (a PyTorchJob, the default
    backend) and its report: every test of it reads this one run (torch is slow)."""
    return _run_and_report(project, "my-extra")


def test_run_local_s_read_only_verdict_reaches_the_report(project):
    """`run-local --stack mle my-ckpt`: rc 1 and "the job stops (exit 1, user_error)", while
    `report runs/my-ckpt` said "finished, per the run ledger"."""
    proc, rep = _run_and_report(project, "my-ckpt")
    assert proc.returncode == 1 and "(exit 1, user_error)" in proc.stderr, proc.stderr[-3000:]
    assert "its last attempt ended with user_error, per the run ledger" in rep.stdout, rep.stdout
    assert "checkpoints/ckpt.pt (new)" in rep.stdout


def test_a_pytorchjob_whose_master_exited_0_ends_succeeded(extra_run):
    """Rank 0 (the Master pod) exits 0, rank 1 loses its peer (202, retryable): run-local
    re-created the pod 7 times (past the plan's 6 attempts) while the training operator v1.9.4
    marks the job Succeeded once its Master succeeds. Now: no re-creation, exit 0, said why."""
    proc, _ = extra_run
    assert "rank 0 done" in proc.stdout, proc.stderr[-3000:]
    assert "peer_lost code=202 (rank 1)" in proc.stderr, proc.stderr[-3000:]
    assert "re-creating it" not in proc.stderr
    assert "pod 0 (the Master) exited 0" in proc.stderr and "the job ends Succeeded" in proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_report_of_that_run_says_one_finished_attempt(extra_run):
    _, rep = extra_run
    assert rep.returncode == 0, rep.stderr
    assert "(finished, per the run ledger)" in rep.stdout
    assert "attempts: 1 (run ledger; the last finished)" in rep.stdout


def test_each_backend_s_success_rule():
    """SUCCESS_RULE, read at each backend's pinned tag: a PyTorchJob's Master pod's ranks
    alone end it Succeeded; an indexed Job's or TrainJob's every pod must."""
    from trainforge.jobs.spec import parse_job

    def job(**extra):
        raw = {
            "name": "j",
            "team": "t",
            "pool": "p",
            "workers": 2,
            "entrypoint": {"script": "x.py"},
        }
        return parse_job({**raw, **extra}, "jobs[0]")

    assert local.success_ranks(job(), 2) == 1
    assert local.success_ranks(job(backend="indexed-job"), 2) == 0
    assert local.success_ranks(job(backend="trainjob"), 2) == 0


def _rank0_finished_rank1_failed(ckpt: Path, attempt_started: float) -> None:
    """What an attempt of extra_coll.py leaves: rank 0 exited 0 (its attempt `finished`),
    rank 1's exit record says peer_lost."""
    led = RunLedger(ckpt, rank=0, world_size=2, log=lambda _m: None,
                    process_started_at=attempt_started)  # fmt: skip
    led.begin_attempt()
    led.record_exit(exits.SUCCESS, step=None, detail="")
    one = RunLedger(ckpt, rank=1, world_size=2, log=lambda _m: None)
    one.attempt_no = led.attempt_no
    one.record_exit(exits.PEER_LOST, step=None, detail="Connection closed by peer")


def test_an_attempt_is_finished_only_when_the_job_is(tmp_path):
    """Where the job goes on (an indexed Job re-creates its pods), rank 0's exit 0 marked the
    attempt finished and the next began a new run: the failed-attempts count never grew past 1
    and the job looped (7/20). Now run-local says the attempt did not end the job
    (job_ended), so the count builds up to the ledger's no_progress stop."""
    ckpt = tmp_path / "ckpt"
    for _ in range(NO_PROGRESS_LIMIT):
        since = time.time()
        _rank0_finished_rank1_failed(ckpt, since + 0.001)
        assert job_ended(ckpt, since=since, finished=False)
    led = RunLedger(ckpt, rank=0, world_size=2, log=lambda _m: None)
    led.begin_attempt()
    assert led.attempts_without_progress(None) == NO_PROGRESS_LIMIT
    assert [a.exit["reason"] for a in led.attempts[:-1]] == ["peer_lost"] * NO_PROGRESS_LIMIT
    assert [a.exit["rank"] for a in led.attempts[:-1]] == [1] * NO_PROGRESS_LIMIT


def test_run_local_s_read_only_verdict_is_the_report_s(tmp_path, capsys):
    """`run-local --stack mle my-ckpt` (writes in its working directory) said the job stops
    (exit 1, user_error), rc 1, while `report` said "finished, per the run ledger"."""
    run = tmp_path / "runs" / "my-ckpt"
    ckpt = run / "checkpoints"
    since = time.time()
    _rank0_finished_rank1_failed(ckpt, since + 0.001)
    (ckpt / ".trainforge" / "exits").rename(ckpt / ".trainforge" / "gone")  # both exited 0
    env = {"TRAINFORGE_CHECKPOINT_DIR": str(ckpt)}
    assert local.record_read_only(env, since, ["state.txt (new)"])
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "finished" not in (run / "report.txt").read_text().splitlines()[0], out
    assert "its last attempt ended with user_error" in out
    assert "state.txt (new)" in out and "Read-only file system" in out


def test_the_report_names_checkpoints_it_does_not_count(tmp_path, capsys):
    """After run-local's advice (save under $TRAINFORGE_CHECKPOINT_DIR) as ckpt_10.pt and
    ckpt_20.pt, the report said "checkpoints: 0" with 2 files there."""
    run = tmp_path / "runs" / "ckpt-fixed"
    ckpt = run / "checkpoints"
    ckpt.mkdir(parents=True)
    for step in (10, 20):
        (ckpt / f"ckpt_{step}.pt").write_bytes(b"x")
    (ckpt / "step_30.pt").write_bytes(b"x")
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "checkpoints: 1 (steps 30)" in out
    assert "not counted: 2 other entries there (ckpt_10.pt, ckpt_20.pt)" in out
    assert "a checkpoint is named step_<N>" in out


FAKE_LAUNCHER = """\
import signal, sys, time
seen = []
def on(signum, _frame):
    seen.append(signal.Signals(signum).name)
    with open(sys.argv[1], "a") as f:
        f.write(signal.Signals(signum).name + "\\n")
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, on)
open(sys.argv[2], "w").close()
deadline = time.time() + 120  # never outlives a failed test by long
while not seen and time.time() < deadline:
    time.sleep(0.01)
time.sleep(1.0)  # as torchrun stops its workers: a second signal now made it SIGTERM them
sys.exit(130)
"""


def _run_local_with_fake_launcher(tmp_path: Path, got: Path, ready: Path) -> subprocess.Popen:
    """`launch` in a process of its own, a session leader as a terminal's job, running
    FAKE_LAUNCHER; returned once the launcher is up."""
    fake = tmp_path / "launcher.py"
    fake.write_text(FAKE_LAUNCHER)
    code = textwrap.dedent(f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's foreground job
        from trainforge.jobs.local import launch
        sys.exit(launch([sys.executable, {str(fake)!r}, {str(got)!r}, {str(ready)!r}], {{}}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env(), start_new_session=True)
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    return proc


def test_a_sigint_to_run_local_reaches_the_launcher_once(tmp_path):
    """`timeout -s INT 100 run-local ...` signals run-local's PID and then its process group;
    a terminal's Ctrl-C, the group. The launcher got each SIGINT (the group's and every one
    run-local forwarded); a second one while torchrun stops its workers makes it stop them
    again with SIGTERM, recorded as `preempted` 143. Now it gets one SIGINT."""
    got, ready = tmp_path / "got", tmp_path / "ready"
    proc = _run_local_with_fake_launcher(tmp_path, got, ready)
    os.kill(proc.pid, signal.SIGINT)  # timeout: the command's PID, then its group
    time.sleep(0.3)  # two at once are one pending signal; apart, run-local handles each
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert got.read_text().split() == ["SIGINT"]


def test_a_closed_terminal_s_sighup_reaches_the_launcher(tmp_path):
    """The launcher runs in a process group of its own (above): a closed terminal's SIGHUP,
    sent to run-local's group, reaches it through run-local, which stops with it."""
    got, ready = tmp_path / "got", tmp_path / "ready"
    proc = _run_local_with_fake_launcher(tmp_path, got, ready)
    os.killpg(proc.pid, signal.SIGHUP)
    assert proc.wait(timeout=60) == 130  # the fake launcher's exit
    assert got.read_text().split() == ["SIGHUP"]


def test_the_headline_is_the_last_attempt_s_end(tmp_path, capsys):
    """A run that continued a finished one (more --steps) and then failed was headed
    "finished, per the run ledger": any finished attempt counted, not the last."""
    run = tmp_path / "runs" / "more"
    ckpt = run / "checkpoints" / ".trainforge"
    ckpt.mkdir(parents=True)
    failed = {"reason": "user_error", "code": 1, "rank": 0, "step": 30, "detail": "ValueError"}
    attempts = [
        {"attempt": 0, "started_at": 1.0, "finished": True, "exit": None, "last_step": 20},
        {"attempt": 1, "started_at": 9.0, "finished": False, "exit": failed, "continued_from": 20},
    ]
    doc = {"version": 1, "started_at": 0.0, "attempts": attempts, "productive_by_step": {}}
    (ckpt / "run.json").write_text(json.dumps(doc))
    assert report.main([str(run)]) == 0
    head = (run / "report.txt").read_text().splitlines()[0]
    assert head == "run more (its last attempt ended with user_error, per the run ledger)", head
