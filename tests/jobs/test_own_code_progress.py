"""Own code that makes progress between failures is not stopped as `no_progress`; ad-hoc
runs of different scripts do not share a run folder (wave-21 newcomer review).

Before: a script that saved `step_<N>.pt` every 2 steps, resumed from its newest one and was
killed (exit 137) 6 steps into every attempt printed `resumed from step 6 ... 12 ... 18 ...
24`, then `trainforge exit: no_progress code=4 ... 5 attempts in a row failed (limit 5)`: the
wrapper counted every failure of code without trainforge's CheckpointManager as one "in a row".
Now it reads where each attempt starts from, the newest step_<N> checkpoint (the naming
`trainforge report` counts, training/layout.saved_checkpoints), and the count begins again after
an attempt that began from a newer one. And `run-local examples/plain/train.py`, then
`run-local myjob3/train.py`, shared `runs/train`: the second loaded the first's checkpoint.

The script (data/ownprogress/progress.py) imports no torch: a checkpoint is a JSON file, so a
run of seven attempts takes seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "data" / "ownprogress" / "progress.py"


def _run(project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "trainforge", "run-local", *argv],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "myjob").mkdir()
    shutil.copy(SCRIPT, tmp_path / "myjob" / "train.py")
    return tmp_path


def _attempts(project: Path, name: str = "myjob-train") -> list[dict]:
    ledger = project / "runs" / name / "checkpoints" / ".trainforge" / "run.json"
    return json.loads(ledger.read_text())["attempts"]


def test_own_code_that_gets_further_each_attempt_is_not_stopped(project):
    """Six attempts killed (137) 6 steps after each resume, each from a newer step_<N>.pt:
    the seventh finishes. Broken on purpose (usercode.run calling the old check,
    `no_progress(ledger)`, which counted every failure): the sixth attempt exits 4."""
    proc = _run(
        project, "myjob/train.py", "--pod-restarts", "7", "--",
        "--steps", "40", "--save-every", "2", "--crash-after", "6",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "no_progress" not in out
    assert [f"resumed from step {s}" in out for s in (6, 12, 18, 24, 30, 36)] == [True] * 6
    assert "done at step 40" in out
    # where each attempt began, as the ledger keeps it for the count and `report`
    assert [a["checkpoint_at_start"] for a in _attempts(project)] == [0, 6, 12, 18, 24, 30, 36]


def test_own_code_that_keeps_failing_from_one_checkpoint_still_stops(project):
    """Killed at step 3 every time: the first attempt saved step_2.pt, the next 5 fail from
    it, and the seventh exits 4 before running the code, naming the checkpoint.
    Broken on purpose (start_check never stopping): all 8 attempts ran and rc was 137."""
    proc = _run(
        project, "myjob/train.py", "--pod-restarts", "7", "--",
        "--steps", "40", "--save-every", "2", "--crash-at", "3",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    ckpt = project / "runs" / "myjob-train" / "checkpoints"
    assert (
        "trainforge exit: no_progress code=4 (rank 0): 5 attempts in a row failed and the "
        f"newest checkpoint stayed step_2.pt in {ckpt} (limit 5)"
    ) in out
    assert out.count("dying at step 3") == 6
    assert [a["checkpoint_at_start"] for a in _attempts(project)] == [0, 2, 2, 2, 2, 2, 2]


def test_a_checkpoint_under_another_name_is_named_where_the_job_stops(project):
    """`last.pt` is not a step_<N> checkpoint: the wrapper cannot see the progress, and its
    stop says which file and how to name it (as `trainforge report` does). Broken on purpose
    (no `other_entries` clause): the stop did not name last.pt."""
    proc = _run(
        project, "myjob/train.py", "--pod-restarts", "7", "--",
        "--steps", "40", "--save-every", "2", "--crash-after", "6", "--name", "last.pt",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    assert "no step_<N> checkpoint appeared" in out
    assert (
        "not read as progress: last.pt (a checkpoint is named step_<N>, e.g. step_<N>.pt: "
        "name yours so)"
    ) in out
    # and `trainforge report` says the same of the folder, by the same rule
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    rep = subprocess.run(
        [sys.executable, "-m", "trainforge", "report", "runs/myjob-train"],
        cwd=project,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        "checkpoints: 0 in runs/myjob-train/checkpoints; not counted: 1 other entry there (last.pt)"
        in rep.stdout
    ), rep.stdout
    assert "as the wrapper your code runs under reads its progress from them" in rep.stdout


def test_two_scripts_named_train_py_get_their_own_run_folders(project):
    """The review's `run-local examples/plain/train.py`, then `run-local myjob3/train.py`:
    one `runs/train`, where the second resumed from the first's checkpoint. Now each script's
    folder is its path in the project, the first line names it, and running one again resumes
    it. Broken on purpose (`name = path.stem` in adhoc_job): both were `runs/train`, and the
    second was refused (without that refusal it resumed from the first's step 4)."""
    (project / "other").mkdir()
    shutil.copy(SCRIPT, project / "other" / "train.py")
    first = _run(project, "myjob/train.py", "--", "--steps", "4")
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(project, "other/train.py", "--", "--steps", "2")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" not in second.stdout
    assert second.stdout.startswith(
        f"run-local: other/train.py: 1 process(es) (world 1) running the shipped copy in "
        f"{project.resolve()}/runs/other-train/code\n"
    )
    again = _run(project, "myjob/train.py", "--", "--steps", "6")
    assert "resumed from step 4" in again.stdout and "done at step 6" in again.stdout


def test_a_folder_that_holds_another_scripts_run_is_refused(project):
    """my_job/train.py and my-job/train.py make the same folder name: the second is refused
    in one line, before anything is written. Broken on purpose (check_run_dir returning at
    once): it ran in the first's folder and resumed from its checkpoint."""
    (project / "my_job").mkdir()
    (project / "my-job").mkdir()
    shutil.copy(SCRIPT, project / "my_job" / "train.py")
    shutil.copy(SCRIPT, project / "my-job" / "train.py")
    assert _run(project, "my_job/train.py", "--", "--steps", "2").returncode == 0
    proc = _run(project, "my-job/train.py", "--", "--steps", "2")
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.strip() == (
        "trainforge run-local: error: SCRIPT: got 'my-job/train.py'; its run folder "
        f"{project.resolve()}/runs/my-job-train holds the run of my_job/train.py (its "
        "checkpoints and run ledger); run it from another directory, or move or delete that "
        "folder"
    )


def test_torchruns_restarts_count_as_attempts_as_the_lines_say(project):
    """`--max-restarts 7` (torchrun restarts its processes in the pod, as an elastic job's
    maxRestarts does): each process torchrun starts begins an attempt, so 5 failed ones from
    one checkpoint stop the job as pod re-creations do, which the run-local line and the
    plan's restart line (restarts.ledger_stop) say. Broken on purpose (ledger_stop without
    its torchrun clause): the line did not say it."""
    proc = _run(
        project, "myjob/train.py", "--max-restarts", "7", "--",
        "--steps", "40", "--save-every", "2", "--crash-at", "3",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    assert "at most 7 times (--max-restarts)" in out
    assert "from one checkpoint (the newest step_<N> in the checkpoint directory when each " in out
    assert "began), torchrun's restarts counted as attempts\n" in out
    assert "trainforge exit: no_progress code=4 (rank 0): 5 attempts in a row failed" in out

    from trainforge.jobs.restarts import describe
    from trainforge.jobs.spec import parse_job

    elastic = parse_job(
        {"name": "j", "team": "research", "pool": "cpu", "preset": "elastic",
         "elastic": {"minWorkers": 1, "maxWorkers": 3, "maxRestarts": 4},
         "entrypoint": {"script": "myjob/train.py"}},
        "t",
    )  # fmt: skip
    assert "(the operator does not count ExitCode re-creations against backoffLimit; your " \
        "code's wrapper stops after 5 failed attempts in a row from one checkpoint (the newest " \
        "step_<N> in the checkpoint directory when each began; its ledger on the team's FSx), " \
        "torchrun's restarts counted as attempts)" in describe(elastic)  # fmt: skip
