"""The restart budget (trainforge/jobs/restarts.py) and run-local's pod re-creation loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, target
from trainforge.core.contract import BACKENDS
from trainforge.core.pods import RetryInputs
from trainforge.jobs import trainjob
from trainforge.jobs.backends import emit, job_shape
from trainforge.jobs.local import launch
from trainforge.jobs.restarts import LOCAL_CAP, budget, describe
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training import exits
from trainforge.training.ledger import NO_PROGRESS_LIMIT

BASE = {"name": "j", "team": "research", "pool": "cpu"}


def job(**kw):
    return parse_job({**BASE, **kw}, "t")


def test_budget_per_backend_and_policy():
    b = budget(job(backend="pytorchjob"))
    cap = LOCAL_CAP  # the cluster counts none: run-local's own cap, above the ledger's stop
    assert (b.in_pod, b.recreations, b.on, b.local_recreations) == (0, None, "retryable", cap)
    assert b.capped and cap > NO_PROGRESS_LIMIT
    assert "does not count ExitCode re-creations" in b.bound
    assert budget(job(backend="indexed-job")).recreations == 6
    assert budget(job(backend="trainjob", runPolicy={"backoffLimit": 6})).recreations == 6
    assert budget(job(restartPolicy="Never")).local_recreations == 0
    assert budget(job(restartPolicy="OnFailure")).on == "any"
    elastic = job(preset="elastic", elastic={"minWorkers": 1, "maxWorkers": 3, "maxRestarts": 4})
    assert budget(elastic).in_pod == 4
    assert describe(elastic).startswith("torchrun restarts in the pod 4; pod re-created on exit")


def test_onfailure_budget_says_the_operator_counts_all_pods_together():
    """PastBackoffLimit (training operator release-1.9) sums the restarts of all the job's
    pods, so a 2-pod job's budget says so beside the plan's retry bound (4 runs each)."""
    two = budget(job(restartPolicy="OnFailure", workers=2))
    assert two.bound.endswith("counts the restarts of all 2 pods together (3 each)")
    # 3 restarts each, 4 runs: the plan's retry bound; run-local's one local pod the same
    assert two.recreations == two.local_recreations == 3
    line = describe(job(restartPolicy="OnFailure", workers=2))
    assert "pod restarted on any failure, at most 3 (" in line
    assert line.endswith("run-local: the same, up to 3")
    assert budget(job(restartPolicy="OnFailure", workers=3)).recreations == 2
    assert (
        budget(job(restartPolicy="OnFailure", workers=2, runPolicy={"backoffLimit": 0})).recreations
        == 1
    )
    one = budget(job(restartPolicy="OnFailure", workers=1))
    assert "together" not in one.bound


# (backend, backoffLimit): a TrainJob takes backoffLimit from the platform's runtime (6)
LIMITS = [(b, n) for b in BACKENDS for n in (0, 6) if b != "trainjob" or n == 6]


@pytest.mark.parametrize(("backend", "limit"), LIMITS)
@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure", "Never"])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_the_launch_lines_budget_is_the_plans_retry_bound(backend, policy, workers, limit):
    """The restart budget the launch line and run-local print (`budget`) and the plan's retry
    bound of the emitted object (`Shape.retry_bound`, pods that die with 137 every time) are
    one answer. They were two: a 4-pod ExitCode TrainJob's line said "at most 6" re-creations
    (the child Job's backoffLimit 6) where the Job controller fails it at 7 failed pods, i.e.
    after 2 attempts (1 re-creation each); a 1-pod OnFailure PyTorchJob with backoffLimit 0
    said "at most 0" where the operator fails it only after the first restart (2 runs)."""
    run_policy = {"activeDeadlineSeconds": 3600}
    if backend != "trainjob":
        run_policy["backoffLimit"] = limit
    raw = {**BASE, "backend": backend, "workers": workers, "restartPolicy": policy,
           "runPolicy": run_policy}  # fmt: skip
    tgt = target(CPU_POOL, backends=BACKENDS)
    resolved = resolve_job(parse_job(raw, "t"), tgt, "t")
    doc = emit(resolved, tgt, CODE).workload
    bound = job_shape(doc).retry_bound(doc, RetryInputs(137, trainjob.runtimes_in()))
    b = budget(resolved)
    if bound.attempts is None:
        assert b.recreations is None, (b, bound)
    else:
        assert b.recreations == bound.attempts - 1, (b, bound)
        assert f"at most {b.recreations} (" in describe(resolved), describe(resolved)


def test_a_command_jobs_line_says_run_local_does_not_run_it():
    """run-local refuses a `command` (a program of the job's image: jobs.local.user_code_run),
    so the restart line the plan prints for it says so, instead of "run-local: the same, up to
    3" for a job run-local never starts (the imported pytorch-simple of the training operator's
    examples/pytorch/simple.yaml)."""
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.local import user_code_run

    cmd = job(image="ghcr.io/acme/t:1", workers=2,
              entrypoint={"command": ["python3", "/opt/pytorch-mnist/mnist.py"]})  # fmt: skip
    line = describe(cmd)
    assert line.endswith("; run-local: not run (a command runs a program of your image)"), line
    assert "run-local: the same" not in line
    with pytest.raises(JobConfigError, match="a command runs a program of your image"):
        user_code_run(cmd, prepare=False)
    script = job(workers=2, entrypoint={"script": "examples/plain/train.py"})
    assert describe(script).endswith(
        f"run-local: the same, with a safety cap of its own at {LOCAL_CAP} re-creations, which "
        "the cluster does not have"
    )


def exits_in_order(tmp_path: Path, codes: list[int]) -> list[str]:
    """A command that exits with codes[n] on its n-th run."""
    counter = tmp_path / "runs"
    code = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) "
        "if p.exists() else 0; p.write_text(str(n + 1)); sys.exit(eval(sys.argv[2])[n])"
    )
    return [sys.executable, "-c", code, str(counter), repr(codes)]


@pytest.mark.parametrize(
    ("codes", "recreations", "on", "expected", "runs"),
    [
        ([202, 137, 0], 6, "retryable", 0, 3),  # lost peer, killed: re-created, then done
        ([202, 1, 0], 6, "retryable", 1, 2),  # a bug stops the job
        ([202, 202, 202], 2, "retryable", 202, 3),  # the budget is spent
        ([1, 0], 6, "any", 0, 2),  # OnFailure restarts any failure
        ([143, 0], 0, "retryable", 143, 1),  # no budget: no re-creation
    ],
)
def test_run_local_recreates_its_pod_like_the_cluster(
    tmp_path, codes, recreations, on, expected, runs
):
    cmd = exits_in_order(tmp_path, codes)
    assert launch(cmd, {"PATH": "/usr/bin:/bin"}, recreations=recreations, on=on) == expected
    assert int((tmp_path / "runs").read_text()) == runs


def test_run_local_says_why_it_re_creates_a_pod_or_not(tmp_path, capfd):
    """What the screen says is what happens: a bug's exit is permanent under ExitCode (no pod
    re-created), OnFailure re-creates it for any failure and says so (not "retryable")."""
    env = {"PATH": "/usr/bin:/bin"}
    for d in "abcde":
        (tmp_path / d).mkdir()
    assert launch(exits_in_order(tmp_path / "a", [1, 0]), env, recreations=6) == 1
    err = capfd.readouterr().err
    assert "run-local: exit 1 (user_error) is permanent (1-127): no pod is re-created" in err
    assert "re-creating" not in err
    assert launch(exits_in_order(tmp_path / "b", [1, 0]), env, recreations=6, on="any") == 0
    err = capfd.readouterr().err
    assert "exited 1 (OnFailure restarts any failure); re-creating it (1/6)" in err
    assert "(retryable)" not in err
    assert launch(exits_in_order(tmp_path / "c", [202, 0]), env, recreations=6) == 0
    assert "exited 202 (retryable); re-creating it (1/6)" in capfd.readouterr().err
    assert launch(exits_in_order(tmp_path / "d", [202]), env, recreations=0) == 202
    assert "allows no re-creation (--pod-restarts 0)" in capfd.readouterr().err
    assert launch(exits_in_order(tmp_path / "e", [1]), env, recreations=0, on="none") == 1
    assert "restartPolicy Never: the job stops" in capfd.readouterr().err


def test_run_locals_own_cap_is_said_as_its_own(tmp_path, capfd):
    """Where the cluster counts no re-creation (an ExitCode PyTorchJob), run-local's bound is
    its own safety cap, and its lines say so rather than a budget the cluster does not have."""
    env = {"PATH": "/usr/bin:/bin"}
    assert launch(exits_in_order(tmp_path, [137, 137, 137]), env, recreations=2, capped=True) == 137
    err = capfd.readouterr().err
    assert "re-creating it (1/2, run-local's safety cap), as the cluster would" in err
    assert "run-local's own safety cap (2 re-creations) is spent: the cluster counts none and " \
        "would re-create the pod again" in err  # fmt: skip
    assert "restart budget" not in err


def _fails_for_want_of(tmp_path: Path, detail: str, code: int) -> tuple[list[str], dict]:
    """A "pod" that records `detail` in the run ledger's exit records, as trainforge's
    wrapper does, then exits `code`; the number of runs is counted in tmp_path/runs."""
    ckpt = tmp_path / "ckpt"
    rec = ckpt / ".trainforge" / "exits" / "attempt_0000" / "rank_00000.json"
    code_ = (
        "import json, pathlib, sys, time; p = pathlib.Path(sys.argv[1]); n = pathlib.Path("
        "sys.argv[4]); n.write_text(str(int(n.read_text() or 0) + 1) if n.exists() else '1'); "
        "p.parent.mkdir(parents=True, exist_ok=True); p.write_text(json.dumps({'detail': "
        "sys.argv[2], 'time': time.time()})); sys.exit(int(sys.argv[3]))"
    )
    cmd = [sys.executable, "-c", code_, str(rec), detail, str(code), str(tmp_path / "runs")]
    return cmd, {"PATH": "/usr/bin:/bin", "TRAINFORGE_CHECKPOINT_DIR": str(ckpt)}


@pytest.mark.parametrize(
    ("detail", "code"),
    [
        ("AssertionError: Torch not compiled with CUDA enabled", 1),  # .to("cuda") on a CPU build
        ("RuntimeError: Distributed package doesn't have NCCL built in", 200),  # "nccl"
        ("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", 200),
    ],
)
def test_a_gpu_jobs_failure_for_want_of_a_gpu_is_run_locals_not_the_clusters(
    tmp_path, capfd, detail, code
):
    """run-local runs a GPU pool's pods on CPU. Code that hard-codes cuda or nccl failed
    there with "permanent (1-127): ... the job stops, as the cluster would stop it", or, for
    nccl (a collective_error, 200), was re-created 6 times "as the cluster would"; the pods have
    their GPUs and run it. Now run-local says the failure is its CPU stand-in's and re-creates
    nothing; a CPU pool's job (gpus 0), whose pods lack the GPU too, keeps the cluster's line."""
    cmd, env = _fails_for_want_of(tmp_path, detail, code)
    assert launch(cmd, env, recreations=6, gpus=1) == code
    err = capfd.readouterr().err
    assert f"your code needs a GPU ({detail}), and run-local runs the job's pods (1 GPU each) on " \
        "this machine's CPU; the pods have their GPUs, so this is not how the cluster" in err  # fmt: skip
    assert "as the cluster would" not in err and "re-creating" not in err
    assert int((tmp_path / "runs").read_text()) == 1
    (tmp_path / "runs").unlink()
    launch(cmd, env, recreations=6, gpus=0)
    err = capfd.readouterr().err
    assert "needs a GPU" not in err and "as the cluster would" in err
    # a record an earlier run left in the checkpoint directory is not this run's failure
    (tmp_path / "later").mkdir()
    assert launch(exits_in_order(tmp_path / "later", [1]), env, recreations=6, gpus=1) == 1
    err = capfd.readouterr().err
    assert "needs a GPU" not in err and "as the cluster would stop it" in err


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        ("RuntimeError: Distributed package doesn't have NCCL built in", exits.CPU_TORCH_FIX),
        ("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
         exits.NO_GPU_FIX),
    ],
)  # fmt: skip
def test_run_locals_stand_in_line_leaves_out_the_fix_for_a_pod_without_a_gpu(
    tmp_path, capfd, message, fix
):
    """The exit record of a failure for want of a GPU carries the fix for a CPU pool's pod
    ("this pod has no GPU ... or run the job on a GPU pool"); for a GPU job run-local's line
    says the pods have their GPUs, so it quotes torch's message alone, not that fix."""
    cmd, env = _fails_for_want_of(tmp_path, f"{message}; {fix}", exits.CONFIG_ERROR.code)
    assert launch(cmd, env, recreations=6, gpus=1) == 2
    err = capfd.readouterr().err
    assert f"run-local: exit 2 (config_error): your code needs a GPU ({message}), and" in err
    assert fix not in err


@pytest.mark.parametrize("policy", ["OnFailure", "ExitCode"])
def test_indexed_job_budget_names_and_counts_what_the_emitted_job_sets(policy):
    """The indexed Job sets backoffLimitPerIndex and restartPolicy Never on its pods (which
    backoffLimitPerIndex requires), and the Job controller counts each index's failures alone:
    the budget line said "OnFailure: containers restart in place, backoffLimit 3" for it. Now
    it names the field the Job sets, and its count is the plan's retry bound for that Job
    (pods.job_spec_bound: backoffLimitPerIndex N, N + 1 pods of each index)."""
    from tests.jobs.helpers import CPU_POOL, target
    from trainforge.core.pods import job_spec_bound
    from trainforge.jobs import codeship
    from trainforge.jobs.backends import emit
    from trainforge.jobs.wiring import resolve_job

    raw = {**BASE, "pool": CPU_POOL.name, "backend": "indexed-job", "restartPolicy": policy,
           "workers": 2, "runPolicy": {"backoffLimit": 3}}  # fmt: skip
    t = target(CPU_POOL, mlflow_tracking_uri=None)
    j = resolve_job(parse_job(raw, "t"), t, "t")
    spec = emit(j, t, codeship.collect()).workload["spec"]
    assert spec["backoffLimitPerIndex"] == 3 and "backoffLimit" not in spec
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    b = budget(j)
    assert "backoffLimitPerIndex 3, counted for each index alone" in b.bound
    assert "backoffLimit " not in b.bound and "in place" not in b.bound
    # per index: two pods failing together do not halve anyone's retries
    assert b.recreations == b.local_recreations == 3
    assert job_spec_bound(spec, pods=2).attempts == b.recreations + 1
    line = describe(j)
    if policy == "OnFailure":
        assert b.on == "any" and "pod re-created on any failure, at most 3 (" in line
    else:
        assert b.on == "retryable" and "pod re-created on exit >= 128, at most 3 (" in line


def test_the_docs_state_run_locals_own_cap():
    """docs/jobs.md's figure for run-local's own cap is LOCAL_CAP's."""
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "jobs.md").read_text().split())
    assert f"run-local's own safety cap of {LOCAL_CAP}, said as such" in text
    assert f"above the {NO_PROGRESS_LIMIT + 1}th attempt at which the job's ledger stops it" in text
