"""A TrainJob's and an indexed Job's restart line names the run ledger's stop beside the
Job's own bound, as run-local runs it (wave 21, restartwords).

Before: the line named only backoffLimit ("at most 6 (the child Job's backoffLimit 6)"),
though the wrapper's and the runtime's 5-in-a-row stop (no_progress, exit 4: the Job's pod
failure policy fails the Job on it) ends a single-pod job that keeps failing from one
checkpoint at its sixth attempt. One rule, `restarts.ledger_stop`, now says it on every
backend, where it can come first.
"""

from __future__ import annotations

import pytest

from tests.jobs.helpers import CPU_POOL, script_job, target
from trainforge.core.contract import BACKENDS
from trainforge.jobs.restarts import describe
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

STOP = "stops after 5 failed attempts in a row from one checkpoint"

# saves step_2.pt, then dies at step 3 every time (no exit record: os._exit, as the OOM
# killer ends it), resuming from its newest step_<N>.pt
CRASHING = """\
import json, os, re
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
        os._exit(137)
"""


def _job(backend: str, workers: int, **kw):
    raw = {"name": "j", "team": "research", "pool": CPU_POOL.name, "workers": workers,
           "backend": backend, **kw}  # fmt: skip
    return resolve_job(parse_job(raw, "t"), target(CPU_POOL, backends=BACKENDS), "t")


@pytest.mark.parametrize("backend", ["trainjob", "indexed-job"])
def test_the_line_names_the_ledgers_stop_where_it_comes_first(backend):
    """One pod, backoffLimit 6: seven runs, the ledger stops the sixth; the runtime's and your
    code's wrapper's words from the one rule. Broken on purpose (`_first_of` returning the
    bound alone): neither line named the stop."""
    runtime = describe(_job(backend, 1))
    assert f"; the runtime {STOP}, whichever comes first)" in runtime
    own = describe(_job(backend, 1, entrypoint={"script": "x.py"}))
    assert f"; your code's wrapper {STOP} (the newest step_<N> in the checkpoint " in own
    assert "its ledger on the team's FSx), whichever comes first)" in own


def test_a_stop_that_cannot_come_first_is_not_said():
    """A TrainJob of 2 pods: backoffLimit 6 counts both pods' failures, 3 re-creations each,
    4 attempts: the ledger's sixth never comes, and the line names only the Job's bound."""
    line = describe(_job("trainjob", 2))
    assert "(the child Job's backoffLimit 6 counts the failed pods of all 2 pods together " \
        "(3 each)); run-local" in line  # fmt: skip
    assert STOP not in line


@pytest.fixture(scope="module")
def project(dev_project):
    job = script_job("crashy", "crash.py", backend="trainjob", workers=1)
    return dev_project("restartlines", [job], {"crash.py": CRASHING})


@pytest.mark.timeout(300)
def test_run_local_ends_a_trainjob_at_the_ledgers_stop_as_its_line_says(project, run_local):
    """A real `run-local --stack dev` of the TrainJob: its line says the ledger's stop comes
    first, and it does: six runs (step_2.pt saved by the first, five failures from it),
    then exit 4, which fails the Job; run-local re-creates nothing more though its bound
    (6) had one left."""
    proc = run_local(project, "crashy")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-3000:]
    assert f"; your code's wrapper {STOP} (" in out
    assert "whichever comes first); run-local: the same, up to 6" in out
    assert proc.stdout.count("began from step") == 6, out[-3000:]
    assert "trainforge exit: no_progress code=4 (rank 0): 5 attempts in a row failed" in out
