"""run-local's exit lines say what the cluster would do (wave 21, localwords):

* a run without a stack has no pods and no Master: its verdict names rank 0's process;
* once a PyTorchJob's Master has exited 0 the job has succeeded, and a Worker's exit line and
  run-local's verdict say that no pod is re-created and what the job's cleanPodPolicy does
  (training-operator v1.9.4 ReconcileJobs / DeletePodsAndServices), where they said "the pod is
  re-created"; an indexed Job, which needs every pod, says no such thing;
* the bundled runtime is ended by the same success rule as your own code, and the run ledger's
  verdict agrees (it ended every run whose rank 0 finished as failed, whatever the backend);
* a worker's Ctrl-C line in a pod with torchrun restarts left no longer says torchrun restarts
  it where the SIGINT was torchrun's (torchrun then stops every worker).

Each runs the real command (run-local, torchrun) and reads what a user reads."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, sigint_default
from trainforge.training.ledger import LEDGER_DIR, RUN_FILE

FIXTURES = ROOT / "tests" / "fixtures" / "localtrue"
STACK = """\
config:
  trainforge:jobs:
  - name: extra-all
    team: research
    pool: training-workloads
    workers: 2
    runPolicy: {cleanPodPolicy: All}
    entrypoint:
      script: extra_coll.py
  - name: extra-ij
    team: research
    pool: training-workloads
    workers: 2
    backend: indexed-job
    runPolicy: {backoffLimit: 0}
    entrypoint:
      script: extra_coll.py
  - name: bundled
    team: research
    pool: training-workloads
    workers: 2
  - name: bundled-2proc
    team: research
    pool: training-workloads
    workers: 2
    procsPerWorker: 2
  - name: bundled-ij
    team: research
    pool: training-workloads
    workers: 2
    backend: indexed-job
"""
SUCCEEDED_ALL = "no pod is re-created, and by cleanPodPolicy All the operator deletes every pod"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "PET_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run_local(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trainforge", "run-local", *args]
    return subprocess.run(cmd, cwd=project, env=_env(), capture_output=True, text=True, timeout=600)


def _lines(text: str, start: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith(start)]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    out = tmp_path_factory.mktemp("words")
    shutil.copy(FIXTURES / "extra_coll.py", out)
    (out / "Pulumi.t.yaml").write_text(STACK)
    return out


def test_a_run_without_a_stack_names_rank_0s_process_not_a_master(project):
    """`run-local extra_coll.py --workers 2` (rank 0 exits 0, rank 1 loses its peer) said
    "pod 0 (the Master) exited 0 ... the job ends Succeeded": no stack, no pods, no Master."""
    proc = _run_local(project, "extra_coll.py", "--workers", "2")
    verdict = _lines(proc.stderr, "run-local: exit 202")
    assert len(verdict) == 1, proc.stderr[-3000:]
    assert "of a rank other than 0; rank 0's process exited 0" in verdict[0], verdict[0]
    assert "the run ends with exit 0 and is not re-run" in verdict[0], verdict[0]
    assert "pod 0" not in verdict[0] and "the Master)" not in verdict[0], verdict[0]
    # no controller: the worker is told nothing of one
    worker = _lines(proc.stderr, "trainforge exit: peer_lost")
    assert worker and "the job has succeeded" not in worker[0], worker
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Before its line, the survivor's traceback: your code's exception, printed as `python
    # SCRIPT` prints it (the wrapper folds only the library's own diagnosed failures), and
    # here it is the answer: the extra all_reduce of rank 1 that its peer never joined.
    before = proc.stderr.split(worker[0])[0]
    assert "Traceback (most recent call last)" in before, proc.stderr[-3000:]
    assert 'extra_coll.py", line 11, in <module>' in before.rsplit("Traceback", 1)[1], before


def test_a_workers_exit_after_the_masters_says_the_job_has_succeeded(project):
    """A PyTorchJob (cleanPodPolicy All): rank 1's line said "[the pod is re-created, ...]" while
    the Master's exit 0 had ended the job; now it and the launcher say what follows once it has,
    and run-local's verdict says what the job's cleanPodPolicy does."""
    proc = _run_local(project, "--stack", "t", "extra-all")
    worker = _lines(proc.stderr, "trainforge exit: peer_lost code=202 (rank 1)")
    assert len(worker) == 1, proc.stderr[-3000:]
    assert f"but once the Master has exited 0 the job has succeeded: {SUCCEEDED_ALL}" in worker[0]
    launcher = _lines(proc.stderr, "trainforge launch: workers failed")
    assert launcher and f"the job has succeeded: {SUCCEEDED_ALL}" in launcher[0], launcher
    verdict = _lines(proc.stderr, "run-local: exit 202")
    assert len(verdict) == 1, proc.stderr[-3000:]
    assert "pod 0 (the Master) exited 0" in verdict[0], verdict[0]
    assert f"the job ends Succeeded, {SUCCEEDED_ALL}, as the cluster would" in verdict[0]
    assert proc.returncode == 0


def test_an_indexed_jobs_worker_is_told_no_success_before_every_pod(project):
    """An indexed Job succeeds only when every pod has: rank 1's failure fails it (backoffLimit
    0), and nothing says the job has succeeded."""
    proc = _run_local(project, "--stack", "t", "extra-ij")
    assert "the job has succeeded" not in proc.stderr and "Succeeded" not in proc.stderr
    assert proc.returncode == 202, proc.stderr[-3000:]


BUNDLED_STAND_IN = """\
# What the bundled runtime's ranks leave where rank 0 finished and rank 1 lost its peer:
# rank 0 closed its attempt finished in the run ledger, rank 1 wrote its exit record; the
# launcher exits 202. Written by the ledger's own writer, in the --checkpoint-dir given.
import sys, time
from trainforge.training import exits
from trainforge.training.ledger import RunLedger
ckpt = sys.argv[sys.argv.index("--checkpoint-dir") + 1]
zero = RunLedger(ckpt, rank=0, world_size=2, log=lambda m: None, process_started_at=time.time())
zero.begin_attempt()
zero.record_exit(exits.SUCCESS, step=2, detail="")
one = RunLedger(ckpt, rank=1, world_size=2, log=lambda m: None)
one.attempt_no = zero.attempt_no
one.record_exit(exits.PEER_LOST, step=2, detail="Connection reset by peer")
sys.exit(202)
"""


# bundled-2proc: rank 1 is the Master pod's second process, so the Master failed (its exit
# record, under the runtime's --checkpoint-dir, which run-local did not read there)
@pytest.mark.parametrize(
    ("job", "rc", "finished"),
    [("bundled", 0, True), ("bundled-2proc", 202, False), ("bundled-ij", 202, False)],
)
def test_the_bundled_runtime_ends_by_its_backends_rule_and_the_ledger_agrees(
    project, monkeypatch, capsys, job, rc, finished
):
    """`run-local --stack t bundled` (the bundled runtime, a PyTorchJob) whose rank 0 finished
    and rank 1 failed: run-local ended it failed (every rank's rule, where the Master's applies)
    and re-created it; an indexed Job's (every pod's rule) still fails. The run ledger's
    verdict is the job's either way. The ranks are stood in for (the runtime cannot end one
    rank before another); the launcher, the ledger and run-local's verdict are real."""
    from trainforge import local

    stand_in = project / f"stand_in_{job}.py"
    stand_in.write_text(BUNDLED_STAND_IN)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setattr(
        local, "torchrun_command", lambda w, r, args: [sys.executable, str(stand_in), *args]
    )
    assert local.main(["--stack", "t", job, "--pod-restarts", "0"]) == rc
    err = capsys.readouterr().err
    assert ("pod 0 (the Master) exited 0" in err) is finished, err[-3000:]
    run = json.loads((project / "runs" / job / "checkpoints" / LEDGER_DIR / RUN_FILE).read_text())
    assert run["attempts"][-1]["finished"] is finished, run


INTERRUPTED_WORKER = """\
import signal, sys, time
from trainforge.training import exits
print("up", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:
    print(exits.exit_line(exits.INTERRUPTED, rank=0, step=None, detail="KeyboardInterrupt"),
          flush=True)
    sys.exit(130)
"""


def test_a_pods_ctrl_c_line_does_not_promise_a_torchrun_restart(tmp_path):
    """In a pod with torchrun restarts left, a worker's 130 said "[torchrun restarts the
    workers in the pod (restart 1 of 1)" where the SIGINT was torchrun's: torchrun stops every
    worker then, restarting none. Real torchrun, SIGINT to it, as `kill -INT` in the pod."""
    from trainforge.jobs.restarts import on_exit
    from trainforge.jobs.spec import parse_job

    script = tmp_path / "worker.py"
    script.write_text(INTERRUPTED_WORKER)
    env = {k: v for k, v in _env().items() if not k.startswith("TORCHELASTIC")}
    job = parse_job({"name": "j", "team": "research", "pool": "cpu"}, "t")
    env.update(TRAINFORGE_ON_EXIT=on_exit(job), OMP_NUM_THREADS="1", PET_NODE_RANK="0")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "1", "--max-restarts", "1", str(script)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "up"
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "up" not in out.splitlines(), out + err[-2000:]  # torchrun restarted nothing
    lines = _lines(out, "trainforge exit: interrupted")
    assert len(lines) == 1, out + err[-2000:]
    assert (
        "torchrun restarts the workers in the pod (restart 1 of 1) if the SIGINT reached this "
        "process alone; one sent to torchrun stops every worker instead and the pod exits 130: "
        "the pod is re-created" in lines[0]
    ), lines[0]


def test_only_a_workers_lost_peer_carries_the_masters_success(monkeypatch):
    """A Worker pod's hang or bug is its own: the Master's exit 0 does not cause it, so its
    line says the controller's words alone; its lost peer may be that exit, and says both.
    The Master's pod (PET_NODE_RANK 0) never does: its failure is the Master's."""
    from trainforge.jobs.restarts import on_exit
    from trainforge.jobs.spec import parse_job
    from trainforge.training import exits

    for name in ("TRAINFORGE_RUN_LOCAL", "TORCHELASTIC_RESTART_COUNT", "RANK"):
        monkeypatch.delenv(name, raising=False)
    job = parse_job({"name": "j", "team": "research", "pool": "cpu", "workers": 2}, "t")
    monkeypatch.setenv("TRAINFORGE_ON_EXIT", on_exit(job))
    said = "once the Master has exited 0 the job has succeeded"
    for pod, reason, told in (("1", exits.PEER_LOST, True), ("1", exits.HANG, False),
                              ("0", exits.PEER_LOST, False)):  # fmt: skip
        monkeypatch.setenv("PET_NODE_RANK", pod)
        line = exits.exit_line(reason, rank=int(pod), step=None, detail="x")
        assert (said in line) is told, (pod, line)


SLOW = """\
import time
import torch.distributed as dist
dist.init_process_group("gloo")
print("up", dist.get_rank(), flush=True)
time.sleep(120)
"""


def test_run_locals_ctrl_c_restarts_nothing_and_says_no_torchrun_restart(tmp_path):
    """`run-local slow.py --workers 2 --max-restarts 1`, then a Ctrl-C (SIGINT to run-local):
    torchrun, which has a restart left, restarts no worker (it got the signal too), run-local
    re-creates nothing, and no line says torchrun restarts."""
    (tmp_path / "slow.py").write_text(SLOW)
    cmd = [sys.executable, "-m", "trainforge", "run-local", "slow.py", "--workers", "2",
           "--max-restarts", "1"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_default,  # a background run (CI) starts with SIGINT ignored
    )  # fmt: skip
    assert proc.stdout is not None
    ups = 0
    for line in proc.stdout:
        ups += line.startswith("up ")
        if ups == 2:
            break
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert not [x for x in out.splitlines() if x.startswith("up ")], out  # no restart
    lines = _lines(err, "trainforge exit: interrupted")
    assert len(lines) == 2, err[-3000:]
    for line in lines:
        assert "[a stop you asked for: run-local re-creates nothing after a Ctrl-C;" in line
    assert "torchrun restarts" not in err and "re-creating it" not in err, err[-3000:]


def test_every_workers_exit_after_the_masters_exit_0_says_the_job_has_succeeded(
    monkeypatch, tmp_path
):
    """Once the run ledger says the Master's pod ended the run with exit 0 (rank 0 closed the
    attempt finished, no rank of its pod failed: ledger.master_finished, the test run-local's
    verdict reads), a Worker's hang or bug said the controller's words alone ("the pod is
    re-created"); now every exit line of a Worker's says what follows the job's success, and
    so does its pod's launcher. Before the Master finished, only a lost peer says it. Real
    RunLedgers in one checkpoint directory; the Master's pod's rank 1 failing stops it."""
    from trainforge.jobs.restarts import on_exit
    from trainforge.jobs.spec import parse_job
    from trainforge.training import exits, launch
    from trainforge.training.ledger import RunLedger

    for name in ("TRAINFORGE_RUN_LOCAL", "TORCHELASTIC_RESTART_COUNT", "RANK"):
        monkeypatch.delenv(name, raising=False)
    job = parse_job({"name": "j", "team": "research", "pool": "cpu", "workers": 2,
                     "procsPerWorker": 2}, "t")  # fmt: skip
    monkeypatch.setenv("TRAINFORGE_ON_EXIT", on_exit(job))
    monkeypatch.setenv("PET_NODE_RANK", "1")
    monkeypatch.setenv("PET_NPROC_PER_NODE", "2")
    said = "but once the Master has exited 0 the job has succeeded"
    ckpt = tmp_path / "ckpt"
    # an earlier run in the same directory finished before this one's processes started
    before = RunLedger(ckpt, rank=0, world_size=4, log=lambda m: None, clock=lambda: 100.0)
    before.begin_attempt()
    before.record_exit(exits.SUCCESS, step=5, detail="")
    zero = RunLedger(ckpt, rank=0, world_size=4, log=lambda m: None)
    worker = RunLedger(ckpt, rank=2, world_size=4, log=lambda m: None)
    monkeypatch.setattr(exits.context, "ledger", worker)
    assert not worker.master_finished()  # that run's success is not this one's
    zero.begin_attempt()

    def lines() -> list[str]:
        out = [exits.exit_line(r, rank=2, step=None, detail="x")
               for r in (exits.HANG, exits.USER_ERROR, exits.PEER_LOST)]  # fmt: skip
        launcher = launch.verdict({2: exits.USER_ERROR.code}, {2: exits.USER_ERROR}, None,
                                  worker.master_finished())[3]  # fmt: skip
        return [*out, launcher]

    assert [said in x for x in lines()] == [False, False, True, False], lines()
    zero.record_exit(exits.SUCCESS, step=5, detail="")  # the Master's rank 0 exits 0
    assert all(said in x for x in lines()), lines()
    # the Master's pod's second rank failed: the Master did not exit 0, nothing succeeded
    one = RunLedger(ckpt, rank=1, world_size=4, log=lambda m: None)
    one.record_exit(exits.USER_ERROR, step=5, detail="x")
    assert [said in x for x in lines()] == [False, False, True, False], lines()


CHATTY = """\
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
for i in range(4000):
    print("line", rank, i, "end")
"""


def test_two_ranks_lines_leave_whole_on_the_one_stdout(tmp_path):
    """Every process of a run-local job (and of a pod with procsPerWorker > 1) writes to one
    stdout, and torchrun starts each with `python -u`, under which print() writes each piece
    with its own write(): two ranks printing at once made lines like "upup 1  0" (the Ctrl-C
    test above then waited for two lines beginning "up " to the end of the run). The ranks'
    streams are line-buffered (training/streams.py): each line arrives whole. Broken on purpose
    (`whole_lines` not called by usercode.py): lines arrived split and mixed."""
    (tmp_path / "chatty.py").write_text(CHATTY)
    proc = _run_local(tmp_path, "chatty.py", "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = [x for x in proc.stdout.splitlines() if not x.startswith("run-local")]
    bad = [x for x in ours if not re.fullmatch(r"line [01] \d+ end", x)]
    assert not bad, bad[:5]
    assert len(ours) == 8000, len(ours)


SAVER = """\
import os, pathlib, time
d = pathlib.Path(os.environ["TRAINFORGE_CHECKPOINT_DIR"])
d.mkdir(parents=True, exist_ok=True)
(d / "step_5.pt").write_bytes(b"x")
print("up", flush=True)
time.sleep(120)
"""


def test_own_codes_ctrl_c_line_names_the_checkpoint_it_saved(tmp_path):
    """`run-local saver.py` (your code saves step_5.pt, then trains), then a Ctrl-C (SIGINT to
    run-local): the exit line's detail was only `KeyboardInterrupt`, naming no checkpoint.
    Now it says what the runtime's Ctrl-C line says, from the same function
    (layout.ctrl_c_detail): nothing saved by trainforge, SIGTERM is the stop your code can save
    on, and the newest step_<N> your code saved, resumed from only if your code restores it;
    the run ledger records the same detail (status/why read it)."""
    (tmp_path / "saver.py").write_text(SAVER)
    cmd = [sys.executable, "-m", "trainforge", "run-local", "saver.py"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_default,  # a background run (CI) starts with SIGINT ignored
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("up"):
            break
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    lines = _lines(err, "trainforge exit: interrupted")
    assert len(lines) == 1, err[-3000:]
    saved = tmp_path / "runs" / "saver" / "checkpoints" / "step_5.pt"
    detail = (
        "Ctrl-C: trainforge saved nothing (a Ctrl-C saves none; SIGTERM is the stop your code "
        'can save on: docs/jobs.md, "The contract for your code"); the newest checkpoint your '
        "code saved "
        f"is {saved}: the next run resumes from it only if your code restores it"
    )
    assert detail in lines[0], lines[0]
    record = saved.parent / LEDGER_DIR / "exits" / "attempt_0000" / "rank_00000.json"
    assert json.loads(record.read_text())["detail"] == detail
