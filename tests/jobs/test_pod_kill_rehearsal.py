"""kill -9 of one pod, rehearsed with the pods' own command: the job resumes from its checkpoint.

For the three kinds of code a job runs (the bundled runtime, a script using trainforge's
library: examples/resumable, and a plain script with its own checkpoints: examples/plain),
the PyTorchJob is emitted as the platform emits it; its container command and env, with the
operator's variables and local folders for the volumes (tests/jobs/podsim.py), run as two
local "pods" (Master, Worker) under the operator's `restartPolicy: ExitCode` semantics
(`podsim.run_exitcode_policy`: >= 128 re-creates the pod, 1-127 fails the job). The Worker is
killed with SIGKILL after a checkpoint; the Master, whose peer vanished, must exit with a
*retryable* code by itself (for the plain script: the wrapper's classification of its gloo
error, not Python's 1), both are re-created, and the job finishes from its last checkpoint.
The runtime and the library user are killed by their own test hook (`TRAINFORGE_TEST_FAULT=
1:17:KILL`: SIGKILL after step 17, on the pod's first process only): their steps are too fast
to aim a kill from outside; the plain script (which has no hook) is killed from outside.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.jobs import podsim
from tests.jobs.helpers import CPU_POOL, target
from trainforge.jobs import codeship, entrypoint
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training import exits

ROOT = Path(__file__).resolve().parents[2]
KILL_AFTER_17 = {"worker-0": {"TRAINFORGE_TEST_FAULT": "1:17:KILL"}}


def emitted(raw: dict) -> tuple[dict, list[dict]]:
    """The job's PyTorchJob and ConfigMaps, as the platform's program emits them."""
    t = target(CPU_POOL, mlflow_tracking_uri=None)
    job = resolve_job(parse_job({"team": "research", "pool": CPU_POOL.name, **raw}, "t"), t, "t")
    out = emit(job, t, codeship.collect(), entrypoint.user_code(job, ROOT, "t"))
    return out.pytorchjob, [cm for cm in (out.configmap, out.user_configmap) if cm]


def ckpt_dir(root: Path, name: str) -> Path:
    return root / "fsx" / "checkpoints" / "team-research" / name


def assert_recovered(history: dict, resumed: str) -> str:
    """Worker killed, Master retryable by itself, both re-created, the job finished; returns
    the Master's last output (which resumed from a checkpoint: `resumed` matches in it)."""
    killed = history["worker-0"][0][0]
    assert killed == -9, history["worker-0"][0][1][-3000:]
    first_master, out = history["master-0"][0]
    code = 128 - first_master if first_master < 0 else first_master
    assert code >= 128, f"the surviving pod exited {code} (permanent):\n{out[-3000:]}"
    for pod, runs in history.items():
        assert len(runs) >= 2 and runs[-1][0] == 0, f"{pod}: {runs[-1][1][-3000:]}"
    last = history["master-0"][-1][1]
    assert re.search(resumed, last), last[-3000:]
    return last


def ledger(root: Path, name: str) -> dict:
    return json.loads((ckpt_dir(root, name) / ".trainforge" / "run.json").read_text())


def test_the_bundled_runtime_recovers(tmp_path):
    job, cms = emitted(
        dict(
            name="rt", workers=2, model="mlp", steps=30, batchSize=8, datasetSize=512,
            seed=3, logEvery=10, metricsPort=0, checkpoint={"every": 10, "async": False},
        )
    )  # fmt: skip
    history = podsim.run_exitcode_policy(job, cms, tmp_path, first_env=KILL_AFTER_17)
    assert_recovered(history, r"checkpoint: resumed from \S+step_000010 at step 10")
    attempts = ledger(tmp_path, "rt")["attempts"]
    assert attempts[0]["exit"]["reason"] in ("node_lost", "peer_lost") and attempts[-1]["finished"]


def test_a_library_user_recovers(tmp_path):
    job, cms = emitted(
        dict(
            name="resumable", workers=2,
            entrypoint={"script": "examples/resumable/train.py",
                        "args": ["--epochs", "2", "--samples", "1024", "--log-every", "8"]},
            checkpoint={"every": 10, "keepLast": 2, "async": False},
        )
    )  # fmt: skip
    history = podsim.run_exitcode_policy(job, cms, tmp_path, first_env=KILL_AFTER_17)
    assert_recovered(history, r"checkpoint: resumed from \S+step_000010 at step 10")
    assert "saved" in history["master-0"][-1][1]
    attempts = ledger(tmp_path, "resumable")["attempts"]
    assert len(attempts) >= 2 and attempts[-1]["finished"]
    assert attempts[0]["exit"]["reason"] == "node_lost"  # rank 1 left no record: SIGKILL


def test_a_plain_script_with_its_own_checkpoints_recovers(tmp_path):
    job, cms = emitted(
        dict(
            name="plain", workers=2,
            entrypoint={"script": "examples/plain/train.py",
                        "args": ["--steps", "40", "--save-every", "10", "--step-seconds", "0.1"]},
        )
    )  # fmt: skip
    ckpts = ckpt_dir(tmp_path, "plain")
    history = podsim.run_exitcode_policy(
        job, cms, tmp_path, kill=("worker-0", lambda: (ckpts / "step_10.pt").is_file())
    )
    last = assert_recovered(history, r"resumed from step_(10|20|30)\.pt at step (10|20|30)")
    assert "done: 40 steps" in last
    # the survivor's gloo error was classified, not Python's exit 1
    first = history["master-0"][0]
    assert first[0] in (exits.PEER_LOST.code, exits.COLLECTIVE_ERROR.code), first[1][-3000:]
    assert "trainforge exit: " in first[1]
    attempts = ledger(tmp_path, "plain")["attempts"]
    assert len(attempts) >= 2 and attempts[-1]["finished"]
    assert attempts[0]["exit"]["reason"] == "node_lost"
    run_dir = tmp_path / "fsx" / "runs" / "team-research" / "plain"
    metrics = (run_dir / "metrics.jsonl").read_text()
    assert json.loads(metrics.splitlines()[-1])["step"] == 40
    # `trainforge report` on the pod layout: the checkpoints next to the outputs, the ledger
    from trainforge import report

    text = report.summary_text(report.load_run(run_dir))
    assert f"checkpoints: 4 (steps 10, 20, 30, 40) in {ckpts}" in text, text
    assert "attempt 0 ended with node_lost (rank 1)" in text, text
    assert "loss: " in text and "not shown: throughput panel" in text, text


def wrapped(tmp_path: Path, code: str) -> int:
    """Exit code of `python -m trainforge.training.usercode SCRIPT` for a script of `code`."""
    script = tmp_path / "script.py"
    script.write_text(code)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "trainforge.training.usercode", str(script)]
    return subprocess.run(cmd, env=env, capture_output=True, timeout=60).returncode


def test_a_bug_stops_the_job_and_a_lost_peer_restarts_it(tmp_path):
    assert wrapped(tmp_path, "raise ValueError('a bug')\n") == exits.USER_ERROR.code
    gloo = "RuntimeError('[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:1234')"
    assert wrapped(tmp_path, f"raise {gloo}\n") == exits.PEER_LOST.code
    assert wrapped(tmp_path, "import sys; sys.exit(3)\n") == 3
    assert wrapped(tmp_path, "import sys; sys.exit(0)\n") == 0
