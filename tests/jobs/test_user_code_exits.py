"""A bug in your own code stops the job; a lost peer, or an exception you mark retryable, does
not: your code's exit code carries the class (trainforge/training/usercode.py, the runtime's
classifier in exits.py) and every backend's restart policy acts on it, `run-local` too.

The run-local tests run the stack's real program (`__main__.py`, under the plan's mocks), as
`trainforge run-local --stack dev JOB` does: the restart policy they apply is the rendered
job's, not a default of run-local's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import kubernetes_validate
import pytest

from tests.conftest import sigint_default
from tests.jobs.helpers import CODE, CPU_POOL, K8S_VERSION, script_job, target
from tests.jobs.schemas import crd_errors
from trainforge.core.contract import BACKENDS
from trainforge.core.pods import job_spec_bound as job_bound
from trainforge.jobs import trainjob
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.checks import validate as V
from trainforge.training import exits, usercode

ROOT = Path(__file__).resolve().parents[2]

BUG = 'raise ValueError("a bug in my code")\n'

# Two ranks; on the first attempt rank 1 is killed outright (SIGKILL, as a lost node's
# process would be) while rank 0 waits for it in a gloo all-reduce.
PEER = """\
import os, pathlib, signal, time
import torch, torch.distributed as dist
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
first = not (out / "attempted").exists()
dist.init_process_group("gloo")
if int(os.environ["RANK"]) == 0:
    (out / "attempted").write_text("1")
dist.barrier()
if first and int(os.environ["RANK"]) == 1:
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(torch.ones(1))
if int(os.environ["RANK"]) == 0:
    (out / "done").write_text("1")
"""

# The newcomer's repro: on the first attempt rank 0 is killed outright (the OOM killer) while
# rank 1 sleeps, until torchrun's teardown SIGTERMs it; the next attempt finishes.
KILLED = """\
import os, pathlib, signal, time
import torch.distributed as dist
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
first = not (out / "attempted").exists()
dist.init_process_group("gloo")
rank = int(os.environ["RANK"])
if rank == 0:
    (out / "attempted").write_text("1")
dist.barrier()
if first:
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)
if rank == 0:
    (out / "done").write_text("1")
"""

# Own code that hard-codes nccl, run on a CPU pool (this machine's torch is a CPU build).
NCCL = """\
import torch.distributed as dist
dist.init_process_group("nccl")
"""

# An exception of the user's own package, raised on the first attempt only.
FLAKY = """\
import os, pathlib
from flakylib import TransientError
marker = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"]) / "attempted"
if not marker.exists():
    marker.write_text("1")
    raise TransientError("the feature store timed out")
"""


@pytest.fixture(scope="module")
def project(dev_project) -> Path:
    retry_on = {"script": "code/flaky.py", "retryOn": ["flakylib.TransientError"]}
    jobs = [
        script_job("bug-job", "bug.py"),
        script_job("peer-job", "peer.py", procsPerWorker=2),
        script_job("nccl-job", "nccl.py"),
        script_job("killed-job", "killed.py", procsPerWorker=2),
        script_job("flaky-job", "flaky.py", entrypoint=retry_on),
    ]
    code = {"bug.py": BUG, "peer.py": PEER, "flaky.py": FLAKY, "nccl.py": NCCL,
            "killed.py": KILLED, "flakylib.py": "class TransientError(Exception):\n    pass\n"}  # fmt: skip
    return dev_project("own_code_exits", jobs, code)


def test_a_bug_stops_the_job_and_a_lost_peer_is_retried_under_run_local(project, run_local):
    bug = run_local(project, "bug-job")
    assert bug.returncode == 1, bug.stdout[-2000:] + bug.stderr[-3000:]
    assert "trainforge exit: user_error code=1 (rank 0): ValueError: a bug in my code" in bug.stderr
    # what the screen says is what happens: permanent, and no pod is re-created
    assert "re-creating" not in bug.stderr
    assert "run-local: exit 1 (user_error) is permanent (1-127): no pod is re-created" in bug.stderr
    assert "OnFailure" not in bug.stdout
    assert "pod re-created on exit >= 128" in bug.stdout  # the plan's line: ExitCode

    peer = run_local(project, "peer-job")
    out = project / "runs" / "peer-job"
    assert peer.returncode == 0, peer.stdout[-2000:] + peer.stderr[-4000:]
    assert "re-creating it (1/20, run-local's safety cap), as the cluster would" in peer.stderr
    assert "(retryable)" in peer.stderr and (out / "done").is_file()


def test_a_sigkilled_rank_is_the_cause_not_the_peer_torchrun_stopped(project, run_local):
    """Rank 0 SIGKILLed, rank 1 SIGTERMed by torchrun's teardown: the launcher said "exiting
    with 143 (preempted, ..., rank 1)" while the ledger recorded node_lost (rank 0) and counted
    it. The launcher's line, its exit code and the ledger's record now agree (watched fail)."""
    import json

    proc = run_local(project, "killed-job")
    out = project / "runs" / "killed-job"
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "rank 0 exit -9 (killed by SIGKILL); rank 1 exit -15 (killed by SIGTERM" in (proc.stderr)
    launched = next(x for x in proc.stderr.splitlines() if "trainforge launch: workers" in x)
    assert launched.endswith(
        "exiting with 137 (node_lost, the pod is re-created, not counted against backoffLimit, rank 0)"
    ), launched
    assert (
        "the job's pod exited 137 (retryable); re-creating it (1/20, run-local's safety cap)"
        in proc.stderr
    )
    assert (out / "done").is_file()
    (run,) = (project / "runs").glob("killed-job/**/.trainforge/run.json")
    first = json.loads(run.read_text())["attempts"][0]["exit"]
    assert (first["reason"], first["rank"]) == ("node_lost", 0), first


def test_nccl_without_a_gpu_is_the_jobs_configuration_everywhere_it_is_read(
    project, run_local, capfd
):
    """Own code that hard-codes `init_process_group("nccl")` on a CPU pool: torch's error
    named NCCL, so it was a collective_error (200, "look for a sick node"), re-created until
    the 5-in-a-row stop. It is the job's configuration: permanent, with the fix, and run-local,
    the exit line, the run ledger's record and `trainforge report` say the same."""
    from trainforge import report

    proc = run_local(project, "nccl-job")
    assert proc.returncode == exits.CONFIG_ERROR.code == 2, proc.stderr[-3000:]
    fix = exits.CPU_TORCH_FIX
    line = (
        "trainforge exit: config_error code=2 (rank 0): RuntimeError: Distributed package "
        f"doesn't have NCCL built in; {fix} [the job fails"
    )  # the pod's words (TRAINFORGE_ON_EXIT), as run-local's process is told them
    assert line in proc.stderr
    assert "run-local: exit 2 (config_error) is permanent (1-127): no pod is re-created" in (
        proc.stderr
    )
    assert "re-creating" not in proc.stderr and "collective_error" not in proc.stderr
    assert report.main([str(project / "runs" / "nccl-job")]) == 0
    out = capfd.readouterr().out
    assert f"the last ended with config_error (rank 0): RuntimeError: Distributed package " \
        f"doesn't have NCCL built in; {fix})" in out  # fmt: skip


@pytest.mark.parametrize(("devices", "code", "fix"), [
    ((), 2, exits.NO_GPU_FIX),  # a CPU pool's pod: the job's
    (("nvidia0", "nvidiactl"), 203, exits.LOST_GPU_FIX.format(n=1)),  # a GPU pod: the node's
])  # fmt: skip
def test_a_cuda_torch_that_finds_no_gpu_is_the_jobs_on_a_cpu_pod_and_the_nodes_on_a_gpu_pod(
    tmp_path, devices, code, fix
):
    """A CUDA build of torch raises ValueError "ProcessGroupNCCL is only supported with GPUs"
    where it sees no GPU. In a pod given none (no /dev/nvidiaN) that is the job's
    configuration (permanent); in a pod given GPUs the node failed it (gpu_error, retryable)."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in devices:
        (dev / name).write_text("")
    script = f"""\
        from trainforge.training import exits
        exits.DEV_DIR = {str(dev)!r}  # this pod's /dev
        raise ValueError("ProcessGroupNCCL is only supported with GPUs, no GPUs found!")
    """
    proc = wrapper(tmp_path, script)
    assert proc.returncode == code, proc.stderr[-1500:]
    reason = exits.BY_CODE[code].name
    assert f"trainforge exit: {reason} code={code}: ValueError: ProcessGroupNCCL is only " \
        f"supported with GPUs, no GPUs found!; {fix} [" in proc.stderr  # fmt: skip


def test_an_exception_the_job_lists_in_retry_on_is_retried(project, run_local):
    flaky = run_local(project, "flaky-job")
    assert flaky.returncode == 0, flaky.stdout[-2000:] + flaky.stderr[-3000:]
    assert "trainforge exit: user_retryable code=205 (rank 0): TransientError:" in flaky.stderr
    assert (
        "the job's pod exited 205 (retryable); re-creating it (1/20, run-local's safety cap)"
        in flaky.stderr
    )


# --- the emitted objects: every backend carries the rule -----------------------------------


def user_job(backend: str, **kw):
    raw = {
        "name": "own",
        "team": "research",
        "pool": CPU_POOL.name,
        "backend": backend,
        "workers": 2,
        "image": "registry.example/team/train:1.0",
        "entrypoint": {"module": "team.train", "retryOn": ["ConnectionError", "mypkg.Flaky"]},
        **kw,
    }
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    return job, emit(job, t, CODE)


def runtime(wl: dict) -> dict:
    """The platform's ClusterTrainingRuntime a TrainJob names (one per restart policy)."""
    name = wl["spec"]["runtimeRef"]["name"]
    found = [r for r in trainjob.runtime_manifests() if r["metadata"]["name"] == name]
    assert len(found) == 1, name
    assert crd_errors(found[0]) == []
    return found[0]


def fails_the_job(out, code: int) -> bool:
    """Whether a pod of the emitted job that exits `code` fails the job at once, under its
    controller's semantics (training operator v1.9 ExitCode: `IsRetryableExitCode(code) =
    code >= 128`, pkg/util/train/train_util.go at v1.9.4; batch/v1 Job: the pod failure
    policy, rehearsed by the plan's retry bounds)."""
    wl = out.workload
    if out.backend == "pytorchjob":
        policies = {r["restartPolicy"] for r in wl["spec"]["pytorchReplicaSpecs"].values()}
        assert policies == {"ExitCode"}
        return code < 128
    if out.backend == "trainjob":
        spec = runtime(wl)["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    else:
        spec = wl["spec"]
    return job_bound(spec, code).attempts == 1


def pod_env(out) -> dict[str, str]:
    wl = out.workload
    if out.backend == "pytorchjob":
        pod = wl["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    elif out.backend == "trainjob":
        pod = trainjob.built_pod(wl)
    else:
        pod = wl["spec"]["template"]
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_fails_on_a_bug_and_retries_a_lost_peer(backend):
    job, out = user_job(backend)
    assert job.restart_policy == "ExitCode"
    assert fails_the_job(out, exits.USER_ERROR.code)  # a ValueError: the job stops
    for retryable in (exits.PEER_LOST, exits.COLLECTIVE_ERROR, exits.GPU_ERROR, exits.PREEMPTED,
                      exits.USER_RETRYABLE):  # fmt: skip
        assert not fails_the_job(out, retryable.code), retryable.name
    assert not fails_the_job(out, 137)  # SIGKILL: a lost node, the OOM killer
    # the job's retryOn reaches the wrapper, which runs the module
    assert pod_env(out)["TRAINFORGE_RETRY_ON"] == "ConnectionError,mypkg.Flaky"
    wl = out.workload
    if backend == "pytorchjob":
        assert crd_errors(wl) == []
    elif backend == "trainjob":
        assert crd_errors(wl) == []
        assert V.trainjob_findings(wl, K8S_VERSION) == []
    else:
        kubernetes_validate.validate(wl, K8S_VERSION, strict=True)
        assert V.job_spec_findings(wl["spec"]) == []


def test_retry_on_is_refused_for_a_command_with_what_to_do():
    from trainforge.stack.jobs import JobsError

    with pytest.raises(JobsError) as e:
        parse_job(
            {
                "name": "c",
                "team": "research",
                "pool": CPU_POOL.name,
                "image": "repo/img:1",
                "entrypoint": {"command": ["python", "t.py"], "retryOn": ["ConnectionError"]},
            },
            "trainforge:jobs[0]",
        )
    assert "retryOn" in str(e.value) and "205" in str(e.value)
    with pytest.raises(JobsError) as e:
        parse_job(
            {
                "name": "c",
                "team": "research",
                "pool": CPU_POOL.name,
                "entrypoint": {"module": "t", "retryOn": ["not a name"]},
            },
            "trainforge:jobs[0]",
        )
    assert "retryOn" in str(e.value) and "'not a name'" in str(e.value)


# --- the wrapper itself ----------------------------------------------------------------------


def wrapper(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    full.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "trainforge.training.usercode", str(path)],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=sigint_default,
    )


def test_the_wrapper_names_user_marked_exceptions_by_name(tmp_path):
    script = """\
        class Flaky(ConnectionError):
            pass
        raise Flaky("try again")
    """
    assert wrapper(tmp_path, script).returncode == 1  # a plain exception of yours: a bug
    for names in ("ConnectionError", "Flaky", "__main__.Flaky", "KeyError, OSError"):
        proc = wrapper(tmp_path, script, TRAINFORGE_RETRY_ON=names)
        assert proc.returncode == 205, (names, proc.stderr[-1500:])
        assert "trainforge exit: user_retryable code=205" in proc.stderr
    assert wrapper(tmp_path, script, TRAINFORGE_RETRY_ON="ValueError").returncode == 1
    assert wrapper(tmp_path, "import sys; sys.exit(205)\n").returncode == 205


def test_an_oom_in_your_code_is_not_told_to_change_the_runtime_s_flags(tmp_path):
    """Your script runs out of memory (torch's own error, as a GPU raises it): the wrapper's
    exit line said "action: lower --batch-size (raise --grad-accum ...), use
    --activation-checkpointing, bf16 or --strategy fsdp", flags of the bundled runtime that
    your script does not have; now it names what to change in your code."""
    script = """\
        import torch
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    """
    proc = wrapper(tmp_path, script)
    assert proc.returncode == exits.OOM.code == 3
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("trainforge exit:")]
    assert line.startswith("trainforge exit: oom code=3: OutOfMemoryError: CUDA out of memory.")
    assert line.endswith(f"[permanent: the job stops; action: {usercode.OWN_CODE_OOM_ACTION}]")
    assert "--" not in usercode.OWN_CODE_OOM_ACTION  # no flag of the runtime's


def test_the_wrapper_stops_a_job_that_keeps_dying(tmp_path):
    """The training operator re-creates an ExitCode pod that exits >= 128 without counting it;
    the wrapper's ledger on shared storage is the count: attempt NO_PROGRESS_LIMIT + 1 exits 4
    (no_progress, permanent) instead of running the code again."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    ckpt = tmp_path / "ckpt"
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n"  # the OOM killer
    for _ in range(NO_PROGRESS_LIMIT):
        proc = wrapper(tmp_path, killed, TRAINFORGE_CHECKPOINT_DIR=str(ckpt))
        assert proc.returncode == -9
    proc = wrapper(tmp_path, killed, TRAINFORGE_CHECKPOINT_DIR=str(ckpt))
    assert proc.returncode == exits.NO_PROGRESS.code == 4
    assert f"trainforge exit: no_progress code=4 (rank 0): {NO_PROGRESS_LIMIT} attempts" in (
        proc.stderr
    )
    # the last attempt's end as people read it (it printed the ledger's dict: {'reason': ...})
    assert (
        f"(limit {NO_PROGRESS_LIMIT}); the last one: node_lost (rank 0): rank(s) 0 left no exit "
        "record: killed (SIGKILL/OOM killer) or node lost [permanent" in proc.stderr
    )


def test_the_wrapper_stops_a_job_that_keeps_dying_after_resuming_from_one_step(tmp_path):
    """Your CheckpointManager's restore notes the step it resumed from (resume_note); an
    attempt that follows NO_PROGRESS_LIMIT failed ones from that same step stops there, as
    the runtime's does after its restore. Attempts that resumed from later steps made
    progress: they never count."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    ckpt = tmp_path / "ckpt"
    resumed_then_killed = """\
        import os, signal
        from trainforge.training.resume_note import note_resumed
        note_resumed(int(os.environ["STEP"]))  # what CheckpointManager.restore does
        os.kill(os.getpid(), signal.SIGKILL)  # then the OOM killer, every time
    """
    for step in range(1, 4):  # progress: a later step each time
        proc = wrapper(
            tmp_path, resumed_then_killed, TRAINFORGE_CHECKPOINT_DIR=str(ckpt), STEP=str(step)
        )
        assert proc.returncode == -9
    for _ in range(NO_PROGRESS_LIMIT - 1):  # step 3 again and again (the 3rd above counts)
        proc = wrapper(tmp_path, resumed_then_killed, TRAINFORGE_CHECKPOINT_DIR=str(ckpt), STEP="3")
        assert proc.returncode == -9, proc.stderr[-1500:]
    proc = wrapper(tmp_path, resumed_then_killed, TRAINFORGE_CHECKPOINT_DIR=str(ckpt), STEP="3")
    assert proc.returncode == exits.NO_PROGRESS.code, proc.stderr[-1500:]
    assert "trainforge exit: no_progress code=4" in proc.stderr
    assert f"{NO_PROGRESS_LIMIT} attempts in a row failed after resuming from step 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_job_a_bug_stopped_starts_afresh(tmp_path):
    """An attempt that ended with a permanent reason ended the job: running it again (a fixed
    script resubmitted, run-local run again while debugging) is a new start, never stopped
    as one more attempt without progress."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    ckpt = {"TRAINFORGE_CHECKPOINT_DIR": str(tmp_path / "ckpt")}
    for _ in range(NO_PROGRESS_LIMIT + 1):
        assert wrapper(tmp_path, BUG, **ckpt).returncode == 1
    proc = wrapper(tmp_path, "raise KeyboardInterrupt\n", **ckpt)  # Ctrl-C: stopped, not failed
    assert proc.returncode == 130
    proc = wrapper(tmp_path, "print('fixed')\n", **ckpt)
    assert proc.returncode == 0 and "fixed" in proc.stdout, proc.stderr[-1500:]


def test_retry_on_without_the_wrapper_in_the_pod_is_refused_at_preview():
    """codeSource: image runs your code on its image alone: nothing would read retryOn."""
    from trainforge.core.errors import JobConfigError

    with pytest.raises(JobConfigError) as e:
        user_job("pytorchjob", codeSource="image")
    msg = str(e.value)
    assert "entrypoint.retryOn" in msg and "codeSource: configmap" in msg and "205" in msg


def test_spot_interruptions_of_a_plain_script_are_not_failures(tmp_path):
    """A script that never handles SIGTERM, interrupted more than NO_PROGRESS_LIMIT times in a
    row (spot reclaims): each attempt dies of the signal as before (status -15 here, 143 in a
    container), but the wrapper records it as `preempted`, so the next attempt runs instead of
    being stopped as no_progress (it was, before the wrapper recorded the signal)."""
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    ckpt = {"TRAINFORGE_CHECKPOINT_DIR": str(tmp_path / "ckpt")}
    interrupted = "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n"
    for _ in range(NO_PROGRESS_LIMIT + 1):
        proc = wrapper(tmp_path, interrupted, **ckpt)
        assert proc.returncode == -15, proc.stderr[-1500:]
    proc = wrapper(tmp_path, "print('ran')\n", **ckpt)
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr[-1500:]


def test_a_sigterm_after_the_process_recorded_its_end_is_not_a_preemption(tmp_path):
    """Rank 1 raises; torchrun (a pod's several processes, run-local's one torchrun) then
    SIGTERMs rank 0, which has just failed on its lost peer and recorded peer_lost. The
    wrapper's handler recorded `preempted` ("spot interruption or drain") over that and died
    of the signal: `trainforge report` said "(other ranks: preempted)", the launcher "exit -15"
    for a rank that had its own reason. A SIGTERM after the end is recorded now leaves the
    record and the exit code alone."""
    import json

    ckpt = tmp_path / "ckpt"
    script = """\
        import atexit, os, signal
        atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))  # torchrun stops it
        raise ValueError("a bug in my code")
    """
    proc = wrapper(tmp_path, script, TRAINFORGE_CHECKPOINT_DIR=str(ckpt))
    assert proc.returncode == 1, proc.stderr[-1500:]
    (rec,) = (ckpt / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
    assert json.loads(rec.read_text())["reason"] == "user_error"
    # a SIGTERM before any end is recorded is still the preemption it was
    proc = wrapper(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
                   TRAINFORGE_CHECKPOINT_DIR=str(tmp_path / "other"))  # fmt: skip
    assert proc.returncode == -15
    (rec,) = (tmp_path / "other" / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
    assert json.loads(rec.read_text())["reason"] == "preempted"


def test_a_script_s_own_sigterm_handler_is_left_alone(tmp_path):
    script = """\
        import os, signal, sys
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))
        os.kill(os.getpid(), signal.SIGTERM)
    """
    assert wrapper(tmp_path, script).returncode == 7


def test_your_own_exit_code_is_kept_and_named_yours(tmp_path):
    """`sys.exit(n)` keeps n (the pod's exit code, what the controller's restart policy reads:
    1-127 fail the job, 128-255 re-create the pod), but n is your code's, not a reason the
    runtime decided: `sys.exit(3)` was recorded and printed as `oom` ("lower --batch-size"),
    2 as config_error, 4 as no_progress, 200 as collective_error. The record and the line say
    user_exit, with n; 205 (you mark it retryable) keeps its meaning."""
    import json

    for n, then in ((3, "permanent: the job stops"), (4, "permanent"), (150, "retryable")):
        ckpt = tmp_path / f"c{n}"
        proc = wrapper(
            tmp_path, f"import sys\nsys.exit({n})\n", TRAINFORGE_CHECKPOINT_DIR=str(ckpt)
        )
        assert proc.returncode == n, proc.stderr[-1500:]
        (line,) = [x for x in proc.stderr.splitlines() if x.startswith("trainforge exit:")]
        assert line.startswith(f"trainforge exit: user_exit code={n}: your code exited with {n} [")
        assert then in line and "batch-size" not in line
        (rec,) = (ckpt / ".trainforge" / "exits").glob("attempt_*/rank_00000.json")
        got = json.loads(rec.read_text())
        assert (got["reason"], got["code"]) == ("user_exit", n)
    proc = wrapper(tmp_path, "import sys; sys.exit(205)\n")
    assert proc.returncode == 205 and "trainforge exit: user_retryable code=205" in proc.stderr


def test_your_own_exit_code_reads_as_yours_in_run_local_and_the_report(tmp_path):
    """The review's `import sys; sys.exit(3)`: run-local printed "rank 0 exit 3 (oom); exiting
    with 3 (oom, permanent, rank 0)" and "run-local: exit 3 (oom) is permanent", the report
    "the last ended with oom (rank 0): the code exited with 3". Each reads the run's one exit
    record now."""
    (tmp_path / "exit3.py").write_text("import sys; sys.exit(3)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "trainforge"]
    proc = subprocess.run([*cmd, "run-local", "exit3.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "rank 0 exit 3 (user_exit); exiting with 3 (user_exit, permanent, rank 0)" in proc.stderr
    assert "run-local: exit 3 (user_exit) is permanent (1-127)" in proc.stderr
    assert "oom" not in proc.stderr
    rep = subprocess.run([*cmd, "report", "runs/exit3"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "the last ended with user_exit (rank 0): your code exited with 3" in rep.stdout, (
        rep.stdout + rep.stderr
    )
    assert "oom" not in rep.stdout


def test_the_exit_record_is_the_containers_termination_message(tmp_path, monkeypatch):
    """`trainforge status`/`why` cannot read the ledger's storage: the wrapper leaves the same
    record in the file the kubelet mounts at terminationMessagePath, which the pod's status
    carries as `terminated.message`; never a file of its own where there is none."""
    log = tmp_path / "termination-log"
    monkeypatch.setattr(exits, "TERMINATION_LOG", str(log))
    monkeypatch.setattr(usercode, "_ENDED", [])
    exits.write_termination(exits.user_exit(3))
    assert not log.exists()  # no kubelet's file: nothing created
    log.write_text("")
    usercode._record(None, exits.user_exit(3), "your code exited with 3")
    assert exits.from_termination(log.read_text(), 3) == exits.user_exit(3)
    assert exits.from_termination(log.read_text(), 1) is None  # a record of another exit
    exits.write_termination(None)
    assert log.read_text() == ""


def test_a_ctrl_c_is_you_stopping_the_run_not_a_preemption(tmp_path):
    """Ctrl-C (SIGINT) was recorded as `preempted` (code 143) while the process exited 130:
    `trainforge report` and the ledger said a spot interruption for a stop you asked for. Now
    the line and the record say `interrupted` 130, and the ledger does not count it as a
    failed attempt (NO_PROGRESS_LIMIT of them in a row still let the next attempt run)."""
    import json

    from trainforge.training.layout import ctrl_c_detail
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    ckpt = tmp_path / "ckpt"
    script = "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"
    for _ in range(NO_PROGRESS_LIMIT + 1):
        # as run-local starts it (contract.RUN_LOCAL): the line says what run-local does
        proc = wrapper(
            tmp_path, script, TRAINFORGE_CHECKPOINT_DIR=str(ckpt), TRAINFORGE_RUN_LOCAL="1"
        )
        assert proc.returncode == 130 == exits.INTERRUPTED.code, proc.stderr[-1500:]
    assert f"trainforge exit: interrupted code=130: {ctrl_c_detail(str(ckpt))} [" in proc.stderr
    assert (
        "[a stop you asked for: run-local re-creates nothing after a Ctrl-C; action:" in proc.stderr
    )
    recs = [json.loads(p.read_text()) for p in (ckpt / ".trainforge" / "exits").glob("*/*.json")]
    assert {r["reason"] for r in recs} == {"interrupted"} and {r["code"] for r in recs} == {130}
    proc = wrapper(tmp_path, "print('ran')\n", TRAINFORGE_CHECKPOINT_DIR=str(ckpt))
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr[-1500:]


def test_not_counted_says_which_count_and_the_ledger_says_its_own(tmp_path):
    """A PyTorchJob's ExitCode re-creation is "not counted" by the operator, but the run
    ledger counts it: 5 lines in a row said "the pod is re-created, not counted against backoffLimit" and the 6th
    attempt stopped as no_progress. Each line now names both counts, the one wording
    (core.failures.Outcome.words, RunLedger.count_words) the stop then agrees with."""
    from trainforge.core import failures
    from trainforge.training.contract import ON_EXIT
    from trainforge.training.ledger import NO_PROGRESS_LIMIT

    told = failures.told(lambda code: failures.pytorchjob_outcome("ExitCode", code))
    env = {"TRAINFORGE_CHECKPOINT_DIR": str(tmp_path / "ckpt"), ON_EXIT: told}
    script = "raise ConnectionResetError('Connection reset by peer')\n"  # peer_lost, retryable
    for n in range(1, NO_PROGRESS_LIMIT + 1):
        proc = wrapper(tmp_path, script, **env)
        assert proc.returncode == exits.PEER_LOST.code, proc.stderr[-1500:]
        said = (
            "[the pod is re-created, not counted against backoffLimit, unless another rank's "
            f"cause stops the job first; failed attempt {n} of {NO_PROGRESS_LIMIT} in a row in "
            "the run ledger"
        )
        assert said in proc.stderr, proc.stderr[-1500:]
        if n == 3:  # docs/reliability.md quotes this one
            doc = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text()
            assert said in " ".join(doc.split())
        assert ("the next attempt stops: no_progress" in proc.stderr) == (n == NO_PROGRESS_LIMIT)
    proc = wrapper(tmp_path, script, **env)
    assert proc.returncode == exits.NO_PROGRESS.code, proc.stderr[-1500:]
    assert f"{NO_PROGRESS_LIMIT} attempts in a row failed" in proc.stderr


@pytest.mark.parametrize(
    ("saves", "said"),
    [
        ("last.pt", "your code's checkpoints in {ckpt} (last.pt) are not step_<N>: the next run "
         "resumes from them only if your code restores them"),
        ("step_3.pt step_12.pt", "the newest checkpoint your code saved is {ckpt}/step_12.pt: "
         "the next run resumes from it only if your code restores it"),
        ("", "your code saved none in {ckpt}: the next run starts from the beginning"),
        (None, "no TRAINFORGE_CHECKPOINT_DIR: no checkpoint of your code is seen"),
    ],
)  # fmt: skip
def test_own_codes_ctrl_c_line_names_what_it_saved(tmp_path, saves, said):
    """Your code's Ctrl-C under the wrapper: its exit line said `KeyboardInterrupt` alone.
    Now it names the newest step_<N> your code saved (by step, not by name: step_12 after
    step_3), its checkpoints under other names, or that it saved none / that no checkpoint
    directory is set (layout.ctrl_c_detail, the runtime's Ctrl-C wording)."""
    ckpt = tmp_path / "ckpt"
    script = (
        "import os, pathlib, signal\n"
        f"d = pathlib.Path({str(ckpt)!r})\n"
        "d.mkdir(parents=True, exist_ok=True)\n"
        f"for name in {(saves or '').split()!r}:\n"
        "    (d / name).write_bytes(b'x')\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
    )
    env = {} if saves is None else {"TRAINFORGE_CHECKPOINT_DIR": str(ckpt)}
    proc = wrapper(tmp_path, script, **env)
    assert proc.returncode == 130, proc.stderr[-1500:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("trainforge exit:"))
    assert line.startswith("trainforge exit: interrupted code=130: Ctrl-C: trainforge saved "), line
    assert f"; {said.format(ckpt=ckpt)} [" in line, line
