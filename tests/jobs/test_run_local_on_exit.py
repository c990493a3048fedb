"""run-local's processes are told what the job's controller does after their exit, as the
pods are (TRAINFORGE_ON_EXIT, the same `failures.told` of the backend's outcome the emitter
writes), and run-local's own re-creation loop acts on that same outcome: the exit line a
process prints and what run-local then does agree (trainforge/core/failures.py,
trainforge/jobs/restarts.py `outcome`, trainforge/jobs/local.py `launch`).

Real `trainforge run-local --stack dev JOB` runs of the stack's program (in this process, as
conftest's trainforge_here runs it; the launcher and the ranks are processes), as
tests/jobs/test_user_code_exits.py does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, script_job, target
from trainforge.core.contract import BACKENDS
from trainforge.jobs import trainjob
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

ROOT = Path(__file__).resolve().parents[2]

# Each writes the TRAINFORGE_ON_EXIT it was given where the test reads it back.
TOLD = """\
import os, pathlib
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
(out / "on_exit").write_text(os.environ.get("TRAINFORGE_ON_EXIT", "(unset)"))
"""
BUG = TOLD + 'raise ValueError("a bug in my code")\n'
# killed outright on its first attempt (the OOM killer, a kill -9), done on the next
KILLED = (
    TOLD
    + """\
import signal
if not (out / "attempted").exists():
    (out / "attempted").write_text("1")
    os.kill(os.getpid(), signal.SIGKILL)
(out / "done").write_text("1")
"""
)

RUN_BACKENDS = ("pytorchjob", "indexed-job")


@pytest.fixture(scope="module")
def project(dev_project) -> Path:
    jobs = []
    for b in RUN_BACKENDS:
        jobs += [
            script_job(f"bug-{b}", "bug.py", backend=b),
            script_job(f"killed-{b}", "killed.py", backend=b),
        ]
    # an indexed Job with backoffLimitPerIndex 0: its controller fails the job at the first
    # failure, a retryable exit (137) too
    jobs.append(
        script_job("no-retry", "killed.py", backend="indexed-job", runPolicy={"backoffLimit": 0})
    )
    return dev_project("run_local_on_exit", jobs, {"bug.py": BUG, "killed.py": KILLED})


def pod_on_exit(raw: dict) -> str:
    """The TRAINFORGE_ON_EXIT the emitted job's pod gets (its training container's env); its
    code from its image (what the controller does does not depend on where the code is)."""
    raw = {**raw, "pool": CPU_POOL.name, "image": "registry.example/team/train:1.0"}
    raw["entrypoint"] = {"module": "team.train"}
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    wl = emit(job, t, CODE).workload
    if job.backend == "pytorchjob":
        pod = wl["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    elif job.backend == "trainjob":
        pod = trainjob.built_pod(wl)
    else:
        pod = wl["spec"]["template"]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    return env["TRAINFORGE_ON_EXIT"]


@pytest.mark.parametrize("backend", RUN_BACKENDS)
def test_run_locals_processes_are_told_what_the_pods_are_and_it_does_that(
    project, backend, run_local
):
    """A bug (exit 1): the exit line says the pod's words ("the job fails"), not the no-pod
    "permanent: the job stops", and run-local stops. Killed (137): the launcher's line says the
    pod is re-created, and run-local re-creates it. Before, run-local's processes had no
    TRAINFORGE_ON_EXIT and printed the no-pod wording (watched fail)."""
    bug = run_local(project, f"bug-{backend}")
    out = project / "runs" / f"bug-{backend}"
    assert bug.returncode == 1, bug.stdout[-2000:] + bug.stderr[-3000:]
    told = (out / "on_exit").read_text()
    assert told == pod_on_exit(script_job(f"bug-{backend}", "bug.py", backend=backend))
    assert "trainforge exit: user_error code=1 (rank 0): ValueError: a bug in my code " \
        "[the job fails; action: fix the error in the traceback]" in bug.stderr  # fmt: skip
    assert "permanent: the job stops" not in bug.stderr
    assert "re-creating" not in bug.stderr and "no pod is re-created" in bug.stderr

    killed = run_local(project, f"killed-{backend}")
    out = project / "runs" / f"killed-{backend}"
    assert killed.returncode == 0, killed.stdout[-2000:] + killed.stderr[-3000:]
    told = (out / "on_exit").read_text()
    assert told == pod_on_exit(script_job(f"killed-{backend}", "killed.py", backend=backend))
    words = dict(p.split("=", 1) for p in told.split(";"))["retryable"]
    assert words.startswith("the pod is re-created"), words
    assert f"exiting with 137 (node_lost, {words}, rank 0)" in killed.stderr
    assert "the job's pod exited 137 (retryable); re-creating it (1/" in killed.stderr
    assert (out / "done").is_file()


def test_run_local_re_creates_only_what_the_backends_controller_would(project, run_local):
    """An indexed Job with backoffLimit 0 fails at its first failed pod, a killed one (137)
    too: the `>= 128` copy in run-local's loop re-created it when --pod-restarts allowed one
    (watched fail: 2 attempts), and without the flag it blamed "--pod-restarts 0", which
    nobody gave. Now the loop reads the backend's outcome, and says its words."""
    for extra in (("--pod-restarts", "1"), ()):
        shutil.rmtree(project / "runs" / "no-retry", ignore_errors=True)
        proc = run_local(project, "no-retry", *extra)
        assert "re-creating" not in proc.stderr and "--pod-restarts 0" not in proc.stderr
        assert proc.returncode == 137, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert not (project / "runs" / "no-retry" / "done").is_file()
        assert "run-local: exit 137 (node_lost): the job fails, as the cluster's controller " \
            "would do: no pod is re-created, the job stops" in proc.stderr  # fmt: skip
        # and the process was told so: the launcher's line says the same
        assert "exiting with 137 (node_lost, the job fails, rank 0)" in proc.stderr
