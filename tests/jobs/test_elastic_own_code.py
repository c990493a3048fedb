"""An elastic job running the user's own code recovers on a torchrun restart (review at 1969f598).

The review imported a PyTorchJob with `elasticPolicy` (preset elastic, maxRestarts 10) whose
script calls `dist.init_process_group("gloo")` itself and raises once on attempt 0: run-local
promised "torchrun restarts in the pod 10", then the restarted workers never printed again
(or failed "Gloo connectFullMesh failed ... Connection refused" on every restart). Cause:
torch's c10d (after 2.3) rendezvous hands every restart the agent's one shared TCPStore, and plain
`env://` code reuses the dead attempt's keys (trainforge/training/torchrun_env.py). The launch
config sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 wherever torchrun runs: in the pods'
environment (jobs.entrypoint.contract_env) and in trainforge.training.launch (run-local).

The end-to-end run is a real `trainforge run-local --stack dev JOB` of a copy of the project
with the review's script; its torchrun gets one restart, so the job ends 0 only if attempt 1
regroups."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, script_job, target
from trainforge.core.contract import BACKENDS
from trainforge.core.errors import JobConfigError
from trainforge.jobs import entrypoint
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training.torchrun_env import TORCHRUN_ENV

# the review's rev/jobs/llama-ft/train.py, failing once on attempt 0 (its rl2 variant); one
# f-string per line, so the two ranks' lines do not interleave word by word
FLAKY = """\
import os, torch, torch.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo")
print(f"attempt {attempt} rank {dist.get_rank()} world {dist.get_world_size()}", flush=True)
t = torch.ones(1)
dist.all_reduce(t)
if attempt == 0 and dist.get_rank() == 1:
    raise RuntimeError("simulated transient failure on the first attempt")
dist.barrier()
print(f"done attempt {attempt} rank {dist.get_rank()} sum {t.item()}", flush=True)
dist.destroy_process_group()
"""
ELASTIC = {"preset": "elastic", "workers": 2}


def _elastic(name: str, restarts: int) -> dict:
    return script_job(
        name,
        "flaky.py",
        **ELASTIC,
        elastic={"minWorkers": 1, "maxWorkers": 2, "maxRestarts": restarts},
    )


@pytest.fixture(scope="module")
def project(dev_project) -> Path:
    return dev_project("elastic_own", [_elastic("llama-ft", 1)], {"flaky.py": FLAKY})


@pytest.mark.timeout(300)
def test_plain_init_process_group_code_regroups_after_a_torchrun_restart(project, run_local):
    """Watched fail with the launcher's `torchrun_env.apply` removed: attempt 1 failed
    "Gloo connectFullMesh failed ... Connection refused" (or waited on the dead attempt's
    keys), and with its one restart spent the job ended 202 instead of 0."""
    proc = run_local(project, "llama-ft")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "torchrun restarts the workers in the pod (restart 1 of 1)" in proc.stderr
    for rank in (0, 1):
        assert f"done attempt 1 rank {rank} sum 2.0" in proc.stdout, out[-4000:]
    assert "connectFullMesh" not in out
    assert "Unable to shutdown process" not in out  # nobody waited out the grace period


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_pod_that_runs_torchrun_gets_the_launch_config(backend):
    """The pods' environment (every backend's, from `entrypoint.contract_env`) carries the
    launch config wherever torchrun runs: plain `torchrun` in the user's image reads it there.
    Watched fail with the contract_env lines removed."""
    t = target(CPU_POOL, backends=BACKENDS)
    raw = (
        {**_elastic("e", 3), "backend": backend}
        if backend == "pytorchjob"
        else {**script_job("e", "x.py", workers=1, procsPerWorker=2), "backend": backend}
    )
    job = resolve_job(parse_job({**raw, "pool": CPU_POOL.name}, "t"), t, "t")
    assert job.uses_torchrun
    env = {e["name"]: e.get("value") for e in entrypoint.contract_env(job, t)}
    assert {k: env.get(k) for k in TORCHRUN_ENV} == TORCHRUN_ENV
    pod = entrypoint.pod_parts(job, t, CODE, None)
    assert {k: v for k, v in TORCHRUN_ENV.items()} == {
        e["name"]: e["value"] for e in pod.env if e["name"] in TORCHRUN_ENV
    }


def test_a_job_cannot_turn_the_shared_store_back_on():
    """A job's `env` that sets the launch config's variable is refused in one line naming it
    (it would bring the review's hang back). Watched fail with it left out of RESERVED_ENV."""
    raw = {**_elastic("e", 3), "env": {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}}
    with pytest.raises(JobConfigError) as err:
        parse_job(raw, "t")
    line = str(err.value)
    assert "\n" not in line.strip() and "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" in line


@pytest.mark.parametrize(
    ("command", "gets_it"),
    [
        (["torchrun", "--nproc-per-node", "2", "--max-restarts", "3", "train.py"], True),
        (["python", "-m", "torch.distributed.run", "--max-restarts=3", "train.py"], True),
        (["python", "train.py"], False),
    ],
)
def test_a_command_that_is_torchrun_gets_the_launch_config(command, gets_it):
    """A `command` job's own torchrun restarts in the pod too (its `--max-restarts`), so it
    gets the variable; a command that is not torchrun does not need it. Watched fail with
    `starts_torchrun` left out of contract_env."""
    t = target(CPU_POOL, backends=BACKENDS)
    raw = {
        **script_job("c", "x.py", workers=2),
        "pool": CPU_POOL.name,
        "image": "registry.example/team/train:1.0",
        "entrypoint": {"command": command},
    }
    job = resolve_job(parse_job(raw, "t"), t, "t")
    assert not job.uses_torchrun
    env = {e["name"]: e.get("value") for e in entrypoint.contract_env(job, t)}
    assert ({k: env.get(k) for k in TORCHRUN_ENV} == TORCHRUN_ENV) is gets_it
    # and the whole checkpoint grace period to save on SIGTERM, as our own torchrun gets it
    # (torchrun_env: one table; docs/jobs.md "wherever torchrun runs")
    grace = str(job.checkpoint.grace_period)
    assert (env.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT") == grace) is gets_it
