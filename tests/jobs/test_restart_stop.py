"""The run ledger's stop stops inside the pod, and an attempt that got further says so
(wave 21, restartwords).

Before: with torchrun restarts left (`--max-restarts`, an elastic job's maxRestarts), the
wrapper's `no_progress` exit 4 was followed by one more attempt, which counted from 0 and ran
the code again: torch's elastic agent restarts a failed group whatever the code. And the
first attempt, which saved step_2.pt before it failed, said "failed attempt 1 of 5 in a row"
though the next attempt began from that checkpoint and the count started again.

A real `trainforge run-local SCRIPT --max-restarts 7` of code that saves step_<N>.pt every 2
steps and leaves with sys.exit(205) (retryable, with an exit line) at step 3 every time. No
torch in the script: seven attempts take seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """\
import json, os, re, sys
from pathlib import Path

ckpt = Path(os.environ["TRAINFORGE_CHECKPOINT_DIR"])
ckpt.mkdir(parents=True, exist_ok=True)
saved = [(int(m.group(1)), f) for f in ckpt.iterdir()
         if (m := re.match(r"^step_(\\d+)\\.pt$", f.name))]
start = json.loads(max(saved)[1].read_text())["step"] if saved else 0
print(f"began from step {start}", flush=True)
for step in range(start + 1, 41):
    if step % 2 == 0:
        (ckpt / f"step_{step}.pt").write_text(json.dumps({"step": step}))
    if step == 3:
        sys.exit(205)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    project = tmp_path_factory.mktemp("restartstop")
    (project / "myjob").mkdir()
    (project / "myjob" / "train.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "TORCHELASTIC"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "run-local", "myjob/train.py", "--max-restarts", "7"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return proc, project


def _exit_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [x for x in proc.stderr.splitlines() if x.startswith("trainforge exit:")]


@pytest.mark.timeout(300)
def test_the_no_progress_stop_restarts_nothing_with_torchrun_restarts_left(run):
    """Attempt 0 saves step_2.pt, attempts 1-5 fail from it, attempt 6 exits 4 before running
    the code, and torchrun restarts nothing though 1 of its 7 restarts is left: the code ran
    6 times, the ledger holds 7 attempts, the launcher says why. Broken on purpose
    (launch._launch without `stop_restarts_on_final`): attempt 7 ran the code again from a
    count of 0 ("began from step 2" a sixth time), and no launcher line said the stop."""
    proc, project = run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    assert proc.stdout.count("began from step") == 6, out[-3000:]
    assert (
        "trainforge launch: no_progress (code 4) ends the run: torchrun restarts nothing (1 of "
        "its 7 restart(s) left unused), every restart would meet the same stop\n"
    ) in proc.stderr
    assert "exiting with 4 (no_progress, permanent, rank 0)" in proc.stderr
    stop = _exit_lines(proc)[-1]
    assert stop.startswith("trainforge exit: no_progress code=4 (rank 0): 5 attempts in a row")
    assert "[permanent: the job stops;" in stop  # not "torchrun restarts the workers"
    ledger = project / "runs" / "myjob-train" / "checkpoints" / ".trainforge" / "run.json"
    attempts = json.loads(ledger.read_text())["attempts"]
    assert [a["checkpoint_at_start"] for a in attempts] == [0, 2, 2, 2, 2, 2, 2]


@pytest.mark.timeout(300)
def test_an_attempt_that_saved_a_newer_checkpoint_says_the_count_starts_again(run):
    """The first attempt began from step 0 and saved step_2.pt: its line says it got further,
    not "failed attempt 1 of 5"; the next five count 1 to 5 from step_2.pt, the fifth saying
    the next attempt stops. Broken on purpose (count_words without its `saved_since_start`
    branch): the first line said "failed attempt 1 of 5 in a row" and so did the second."""
    proc, _ = run
    lines = _exit_lines(proc)
    assert len(lines) == 7, proc.stderr[-3000:]
    assert (
        "; got further: it began from step 0 and saved step_2.pt, so the run ledger's count of "
        "failed attempts in a row starts again;"
    ) in lines[0]
    assert "failed attempt 1 of" not in lines[0]
    for n, line in enumerate(lines[1:6], start=1):
        assert f"; failed attempt {n} of 5 in a row in the run ledger" in line, line
    assert "(the next attempt stops: no_progress)" in lines[5]


def test_a_torch_without_remaining_restarts_is_said_not_silently_passed(monkeypatch, capsys):
    """`stop_restarts_on_final` sets a private attribute of torch 2.13.0's elastic agent. On a
    torch without it, the no_progress stop cannot stop torchrun's restarts: the launcher says
    so, with the restarts that follow, instead of passing in silence (a `getattr` default of
    0 hid it). Broken on purpose (the `left is None` branch removed): nothing was printed."""
    from types import SimpleNamespace

    from torch.distributed.elastic.agent.server.api import RunResult, WorkerState
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    from trainforge.training import exits, launch

    failure = SimpleNamespace(exitcode=4, timestamp=1)
    result = RunResult(state=WorkerState.FAILED, failures={0: failure})
    monkeypatch.setattr(LocalElasticAgent, "_monitor_workers", lambda agent, group: result)
    stop = exits.Reason(name="no_progress", code=4, what="", action="")
    monkeypatch.setattr(launch, "final_failure", lambda *a: stop)
    agent = SimpleNamespace()  # no _remaining_restarts
    group = SimpleNamespace(spec=SimpleNamespace(max_restarts=3))
    with launch.stop_restarts_on_final(None, "/nonexistent"):
        assert LocalElasticAgent._monitor_workers(agent, group) is result
    err = capsys.readouterr().err
    assert "no_progress (code 4) should end the run, but torch " in err, err
    assert "torchrun restarts the workers while any of its 3 restart(s) are left" in err
    agent = SimpleNamespace(_remaining_restarts=2)  # torch 2.13.0: the stop is in force
    with launch.stop_restarts_on_final(None, "/nonexistent"):
        LocalElasticAgent._monitor_workers(agent, group)
    assert agent._remaining_restarts == 0
    assert "ends the run: torchrun restarts nothing (2 of its 3" in capsys.readouterr().err
