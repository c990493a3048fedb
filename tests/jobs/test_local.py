"""`run-local --stack STACK JOB`: stack config -> run-local arguments, without Pulumi."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from trainforge.core.errors import JobConfigError
from trainforge.jobs.local import local_argv_for_job
from trainforge.jobs.restarts import LOCAL_CAP

STACK = textwrap.dedent(
    """
    config:
      aws:region: us-west-2
      trainforge:jobs:
        - name: gpt-fsdp
          team: research
          pool: gpu-workloads
          preset: fsdp
          workers: 2
          gpusPerWorker: 4
          model: gpt
          layers: 2
          dModel: 64
          heads: 4
          steps: 50
          batchSize: 8
          compile: true
          dataset: tokens
          dataPath: datasets/tiny.bin
          checkpoint: {every: 10, keepLast: 2, gracePeriod: 60}
          hangTimeout: 120
        - name: mnist-elastic
          team: research
          pool: training-workloads
          preset: elastic
          elastic: {minWorkers: 1, maxWorkers: 3, maxRestarts: 4}
          model: mlp
    """
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(STACK)
    return tmp_path


def test_fsdp_job_becomes_local_processes(project):
    argv = local_argv_for_job("dev", "gpt-fsdp", project)
    assert argv[:2] == ["--workers", "8"]  # 2 pods x 4 GPUs
    joined = " ".join(argv)
    assert "--strategy fsdp --model gpt --layers 2 --d-model 64 --heads 4" in joined
    # dataPath is on the team's FSx in the pods (/fsx/datasets/tiny.bin): its stand-in here
    assert "--dataset tokens --data-path ./runs/gpt-fsdp/fsx/datasets/tiny.bin" in joined
    assert (
        "--checkpoint-dir ./runs/gpt-fsdp/checkpoints" in joined
        and "--output-dir ./runs/gpt-fsdp" in joined
    )
    assert "--checkpoint-every 10 --keep-last 2" in joined and "--grace-period 60" in joined
    assert "--metrics-port 0" in joined
    assert "--hang-timeout 120" in joined  # run-local runs the pods' watchdog too
    assert "--compile" not in argv and "--checkpoint-s3" not in argv
    assert not [a for a in argv if a.startswith("/fsx")]  # no pod path left


@pytest.mark.parametrize(
    ("data_path", "local"),
    [
        ("/fsx/shared/owt.bin", "./runs/gpt/fsx/shared/owt.bin"),  # the team's FSx, absolute
        ("/data/owt.bin", "./runs/gpt/volumes/research-datasets/owt.bin"),  # a claim's mount
        ("/opt/data/owt.bin", "/opt/data/owt.bin"),  # on no volume: the image's, as written
    ],
)
def test_a_runtime_jobs_data_path_reads_the_volumes_stand_in(tmp_path, data_path, local):
    """run-local reads the bundled runtime's dataPath where own code reads the same pod path
    (jobs.local.stand_ins): it failed 'no such file' relative to the working directory."""
    (tmp_path / "Pulumi.dev.yaml").write_text(
        textwrap.dedent(
            f"""
            config:
              trainforge:jobs:
                - name: gpt
                  team: research
                  pool: gpu-workloads
                  model: gpt
                  dataset: tokens
                  dataPath: {data_path}
                  volumes: [{{claim: research-datasets, mountPath: /data, readOnly: true}}]
            """
        )
    )
    argv = local_argv_for_job("dev", "gpt", tmp_path)
    assert argv[argv.index("--data-path") + 1] == local


def test_elastic_job_passes_max_restarts(project):
    argv = local_argv_for_job("dev", "mnist-elastic", project)
    # torchrun's restarts as in the pod, and the pod re-creations the cluster would do
    # (PyTorchJob ExitCode has no count limit: run-local's own cap, above the ledger's stop)
    cap = str(LOCAL_CAP)
    assert argv[:6] == ["--workers", "3", "--max-restarts", "4", "--pod-restarts", cap]
    assert "--strategy" in argv and argv[argv.index("--strategy") + 1] == "ddp"


def test_unknown_job_and_stack(project):
    with pytest.raises(
        JobConfigError,
        match="JOB: got 'nope'; stack 'dev' declares: gpt-fsdp, mnist-elastic \\(an entry "
        "`trainforge import` printed runs once it is pasted under trainforge:jobs in "
        "Pulumi.dev.yaml\\)",
    ):
        local_argv_for_job("dev", "nope", project)
    # a typo gets the nearest name, not the import's hint (a review's `my-mpl`)
    with pytest.raises(JobConfigError, match=r"mnist-elastic \(did you mean 'gpt-fsdp'\?\)$"):
        local_argv_for_job("dev", "gpt-fsd", project)
    with pytest.raises(JobConfigError, match=r"no Pulumi.prod.yaml in .* \(stacks here: dev\)"):
        local_argv_for_job("prod", "gpt-fsdp", project)


def test_bad_declaration_names_the_field(project):
    (project / "Pulumi.bad.yaml").write_text(
        "config:\n  trainforge:jobs:\n    - {name: x, team: t, pool: p, workers: 0}\n"
    )
    with pytest.raises(JobConfigError, match=r"trainforge:jobs\[0\]\.workers: got 0"):
        local_argv_for_job("bad", "x", project)


def test_does_not_import_pulumi(project):
    code = (
        "import sys; from trainforge.jobs.local import local_argv_for_job;"
        f"local_argv_for_job('dev', 'gpt-fsdp', {str(project)!r});"
        "assert not any(m == 'pulumi' or m.startswith('pulumi.') for m in sys.modules), 'pulumi imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_run_local_without_a_stack_imports_no_job_model_platform_or_plan(tmp_path):
    """`trainforge run-local [--dry-run]` (the bundled runtime, no stack) starts torchrun
    without importing the job model (pydantic), Pulumi, the platform or the plan."""
    code = (
        "import sys; from trainforge.local import main; assert main(['--dry-run']) == 0;"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pulumi')"
        " or m.startswith(('trainforge.jobs.spec', 'trainforge.platform', 'trainforge.plan'))];"
        "assert not heavy, heavy"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert "-m trainforge.training.launch --standalone" in out


def test_expand_stack_argv(project):
    from trainforge.jobs.local import expand_stack_argv

    base = local_argv_for_job("dev", "mnist-elastic", project)
    assert expand_stack_argv(["--stack", "dev", "mnist-elastic", "--steps", "5"], project) == [
        *base,
        "--steps",
        "5",
    ]
    assert expand_stack_argv(["--stack=dev", "mnist-elastic"], project) == base
    assert expand_stack_argv(["--workers", "2", "--steps", "5"], project) == [
        "--workers",
        "2",
        "--steps",
        "5",
    ]
    with pytest.raises(JobConfigError, match="usage: run-local --stack STACK JOB"):
        expand_stack_argv(["--stack", "dev"], project)
    with pytest.raises(JobConfigError, match="usage: run-local --stack STACK JOB"):
        expand_stack_argv(["--stack", "dev", "--steps", "5"], project)


def test_the_runtime_accepts_the_local_flags(project):
    from trainforge.training.config import parse_args

    argv = local_argv_for_job("dev", "mnist-elastic", project)
    cfg = parse_args(argv[6:])  # after --workers, --max-restarts, --pod-restarts (run-local's)
    assert (cfg.model, cfg.metrics_port, cfg.checkpoint.directory) == (
        "mlp",
        0,
        "./runs/mnist-elastic/checkpoints",
    )


# --- jobs with their own code ------------------------------------------------------------------

USER_STACK = textwrap.dedent(
    """
    config:
      trainforge:jobs:
        - name: byo
          team: research
          pool: training-workloads
          workers: 2
          procsPerWorker: 2
          volumes:
            - {claim: research-datasets, mountPath: /data, readOnly: true}
          checkpoint: {every: 50, gracePeriod: 45}
          env: {DATA: "$(TRAINFORGE_OUTPUT_DIR)/data", SETS: /data/sets}
          entrypoint:
            script: code/train.py
            args: ["--data", "/data/mnist", "--out=$(TRAINFORGE_OUTPUT_DIR)/m.pt", "--cost=$$5"]
        - name: from-image
          team: research
          pool: training-workloads
          image: registry.example/team/train:1.0
          entrypoint: {module: team.train}
        - name: in-image-dir
          team: research
          pool: training-workloads
          image: registry.example/team/train:1.0
          entrypoint: {module: team.train, workingDir: /opt/team-app-not-here}
        - name: cmd
          team: research
          pool: training-workloads
          image: registry.example/team/train:1.0
          entrypoint: {command: [torchrun, train.py]}
    """
)


@pytest.fixture
def user_project(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(USER_STACK)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    (tmp_path / "code" / ".env").write_text("TOKEN=secret\n")
    return tmp_path


def test_user_code_runs_the_shipped_copy_with_the_contract(user_project):
    from trainforge.jobs.local import find_job, user_code_run

    job = find_job("dev", "byo", user_project)
    run = user_code_run(job, user_project, extra_args=["--epochs", "1"])
    runs = user_project / "runs" / "byo"
    code = runs / "code"
    assert run.cwd == code and sorted(p.name for p in code.iterdir()) == ["train.py"]  # no .env
    assert run.workers == 4  # 2 pods x 2 processes
    assert run.command[1:3] == ["-m", "trainforge.training.launch"]  # torchrun, reason codes
    assert run.command[run.command.index("--nproc-per-node") + 1] == "4"
    data = runs / "volumes" / "research-datasets"
    # what a worker runs: the command's arguments through torchrun (string.Template, as
    # torch's macros.substitute) and the pod wrapper (Kubernetes' expansion, per pod)
    from string import Template

    from trainforge.jobs.local_pod import pod_env

    at = run.command.index("trainforge.jobs.local_pod")
    worker = [Template(a).safe_substitute(local_rank="0") for a in run.command[at + 1 :]]
    pod, argv = pod_env(worker, {**run.env, "RANK": "0"})
    assert argv[-7:] == [
        str(code / "train.py"),
        "--data",
        f"{data}/mnist",  # the claim's pod path -> its local stand-in
        f"--out={runs}/m.pt",  # $(VAR) expanded as the kubelet does
        "--cost=$5",
        "--epochs",
        "1",
    ]
    env = run.env
    assert env["TRAINFORGE_CHECKPOINT_DIR"] == str(runs / "checkpoints")
    assert env["TRAINFORGE_OUTPUT_DIR"] == str(runs)
    assert env["TRAINFORGE_CHECKPOINT_EVERY"] == "50" and env["TRAINFORGE_GRACE_PERIOD"] == "45"
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "45" and env["TRAINFORGE_METRICS_PORT"] == "0"
    assert "TRAINFORGE_CHECKPOINT_S3" not in env
    # the job's env, expanded per pod by the wrapper as the kubelet does in that pod
    assert (pod["DATA"], pod["SETS"]) == (f"{runs}/data", f"{data}/sets")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(code)


def test_a_local_directory_can_stand_for_a_claim(user_project, tmp_path_factory):
    from trainforge.jobs.local import find_job, user_code_run

    mine = tmp_path_factory.mktemp("datasets")
    job = find_job("dev", "byo", user_project)
    run = user_code_run(job, user_project, volumes={"research-datasets": str(mine)})
    assert f"{mine}/mnist" in run.command
    with pytest.raises(
        JobConfigError,
        match=r"--volume: got 'other'; not a claim of this job \(its claims: research-datasets; "
        r"the team's FSx: fsx-research, mounted at /fsx\)",
    ):
        user_code_run(job, user_project, volumes={"other": str(mine)})


def test_a_local_directory_can_stand_for_the_teams_fsx(user_project, tmp_path_factory):
    """The team's FSx claim is mounted at /fsx in every pod: --volume fsx-<team>=DIR maps it."""
    from trainforge.jobs.local import find_job, user_code_run

    mine = tmp_path_factory.mktemp("fsx")
    job = find_job("dev", "byo", user_project)
    runs = (user_project / "runs" / "byo").resolve()
    run = user_code_run(job, user_project, extra_args=["--cache", "/fsx/cache"])
    assert run.command[-1] == f"{runs}/fsx/cache"  # the default stand-in
    run = user_code_run(
        job, user_project, volumes={"fsx-research": str(mine)}, extra_args=["/fsx/cache"]
    )
    assert run.command[-1] == f"{mine.resolve()}/cache" and mine.is_dir()


def test_a_module_from_the_image_runs_from_this_environment(user_project):
    from trainforge.jobs.local import find_job, user_code_run

    run = user_code_run(find_job("dev", "from-image", user_project), user_project)
    assert run.cwd == user_project.resolve() and run.code_dir is None
    assert run.command[-2:] == ["-m", "team.train"]


def test_a_module_of_the_image_runs_from_its_working_dir_as_in_the_pods(user_project, tmp_path):
    """entrypoint.workingDir is the pods' working directory (`python -m` imports from it):
    run-local runs there when this machine has the directory, else refuses in one line."""
    from trainforge.jobs.local import find_job, user_code_run

    job = find_job("dev", "in-image-dir", user_project)
    with pytest.raises(JobConfigError) as e:
        user_code_run(job, user_project)
    assert str(e.value).startswith(
        "in-image-dir.entrypoint.workingDir: got '/opt/team-app-not-here'; no such directory on "
        "this machine: it exists only in the job's image"
    )
    assert not (user_project / "runs").exists()  # refused before anything is written
    here = tmp_path / "app"
    here.mkdir()
    entry = job.entrypoint.model_copy(update={"working_dir": str(here)})
    run = user_code_run(job.model_copy(update={"entrypoint": entry}), user_project)
    assert run.cwd == here and run.command[-2:] == ["-m", "team.train"]


def test_run_local_cli_refuses_a_working_dir_only_the_image_has(user_project, monkeypatch, capsys):
    from trainforge import local

    monkeypatch.chdir(user_project)
    assert local.main(["--stack", "dev", "in-image-dir", "--dry-run"]) == 2
    (error,) = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert error.startswith(
        "trainforge run-local: error: dev: in-image-dir.entrypoint.workingDir: got "
        "'/opt/team-app-not-here'; no such directory on this machine"
    )


def test_a_command_job_is_refused_with_what_to_do(user_project):
    from trainforge.jobs.local import find_job, user_code_run

    with pytest.raises(
        JobConfigError, match="runs a program of your image, which run-local cannot"
    ):
        user_code_run(find_job("dev", "cmd", user_project), user_project)


def test_run_local_cli_dry_run_of_a_user_job(user_project, monkeypatch, capsys):
    from trainforge import local

    monkeypatch.chdir(user_project)
    assert local.main(["--stack", "dev", "byo", "--workers", "2", "--dry-run", "--lr", "1"]) == 0
    out = capsys.readouterr().out
    assert "--nproc-per-node 2" in out and out.rstrip().endswith("--lr 1)")
    assert not (user_project / "runs").exists()  # a dry run writes nothing
    assert local.main(["--stack", "dev", "cmd"]) == 2
    assert "trainforge run-local: error: dev: cmd.entrypoint.command" in capsys.readouterr().err


def test_user_code_run_does_not_import_pulumi(user_project):
    code = (
        "import sys; from trainforge.jobs.local import find_job, user_code_run;"
        f"user_code_run(find_job('dev', 'byo', {str(user_project)!r}), {str(user_project)!r});"
        "assert not any(m == 'pulumi' or m.startswith('pulumi.') for m in sys.modules), 'pulumi'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("backend", ["pytorchjob", "trainjob", "indexed-job"])
def test_run_local_is_the_same_on_every_backend(project, backend):
    """The backend picks the controller in the cluster; the job run locally does not change,
    but for how often its local pod is re-created: as often as that backend's controller
    re-creates the job's pods (`--pod-restarts`, the plan's retry bound: a 2-pod ExitCode
    TrainJob's child Job counts the failed pods of both, 3 re-creations of backoffLimit 6)."""
    plain = local_argv_for_job("dev", "gpt-fsdp", project)
    stack = re.sub(r"( +)preset: fsdp\n", rf"\g<0>\1backend: {backend}\n", STACK, count=1)
    assert f"backend: {backend}" in stack
    (project / "Pulumi.dev.yaml").write_text(stack)
    argv = local_argv_for_job("dev", "gpt-fsdp", project)
    at = plain.index("--pod-restarts") + 1
    assert argv[:at] + argv[at + 1 :] == plain[:at] + plain[at + 1 :]
    # a PyTorchJob's ExitCode re-creations are uncounted: run-local's own cap (LOCAL_CAP,
    # above the runtime ledger's stop); an indexed Job counts each index alone (6); a
    # TrainJob's 2 pods fail together, and its child Job fails at 7 failed pods: 4 attempts,
    # 3 re-creations
    cap = str(LOCAL_CAP)
    assert argv[at] == {"pytorchjob": cap, "trainjob": "3", "indexed-job": "6"}[backend]


@pytest.mark.parametrize(
    ("policy", "on"), [("ExitCode", "retryable"), ("OnFailure", "any"), ("Never", "none")]
)
def test_pod_restarts_help_says_which_exits_re_create_the_local_pod(policy, on):
    """Its help said "after a retryable exit (>= 128)" for every job; a --stack job's local
    pod follows its restartPolicy (jobs/restarts.local_budget), as the help now says."""
    from trainforge.jobs.restarts import local_budget
    from trainforge.jobs.spec import parse_job
    from trainforge.local import build_parser

    job = parse_job({"name": "j", "team": "t", "pool": "p", "restartPolicy": policy,
                     "entrypoint": {"script": "x.py"}})  # fmt: skip
    assert local_budget(job, pod_restarts=2).on == on
    action = next(a for a in build_parser()._actions if "--pod-restarts" in a.option_strings)
    said = {"retryable": "retryable exit (>= 128", "any": "OnFailure any failure",
            "none": "Never none"}  # fmt: skip
    assert said[on] in action.help


def test_without_torch_run_local_says_so_in_one_line(monkeypatch, capsys):
    """A bare interpreter without the venv ran the launcher into a ModuleNotFoundError
    traceback, then printed "exit 1 (user_error) is permanent" as if the job's code failed."""
    import importlib.util

    from trainforge.jobs import local

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    started = []
    monkeypatch.setattr(local.subprocess, "Popen", lambda *a, **k: started.append(a))
    assert local.launch([sys.executable, "-c", "pass"], dict(os.environ)) == 2
    assert started == []
    err = capsys.readouterr().err
    assert err == (
        f"trainforge run-local: error: torch is not installed for {sys.executable}: run `make "
        "venv` and use .venv/bin/python (or pip install 'trainforge[train]')\n"
    )


def test_workers_help_states_its_default_and_the_gpu_cap():
    """run-local's description said "one worker per GPU" while --workers defaults to 1
    whatever the GPUs; what holds is each worker on its own GPU, at most one per GPU (the
    runtime refuses a LOCAL_RANK without a GPU: training/distributed.py)."""
    from pathlib import Path

    from trainforge.local import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if "--workers" in a.option_strings)
    assert f"(default {action.default}; on GPUs at most one per GPU)" in action.help
    assert "each worker on its own GPU" in parser.description
    import trainforge.training.distributed as dist

    assert "run one process per GPU" in Path(dist.__file__).read_text()


def test_the_shipped_runtime_downloads_nothing():
    """run-local --stack reads a job's own code before it runs the stack's program for the
    plan's egress reading (trainforge.local.internet_notes); the runtime every pod also mounts
    (codeship.collect) is not read there, which holds only while it downloads nothing."""
    from trainforge.jobs.codeship import collect
    from trainforge.jobs.fetches import python_fetches

    files = [(p, t) for p, t in collect().files if p.endswith(".py")]
    assert len(files) > 20
    assert [f for p, t in files for f in python_fetches(t, p)] == []


def test_a_function_jobs_constant_model_id_is_read_in_its_generated_file(tmp_path, monkeypatch):
    """A function job ships its module-level constants by value (jobs/pyfunction.py), so
    `MODEL = "gpt2"` used by the function is a name bound once in the generated file: its
    download is read (jobs.local.job_fetches), as the plan reads the ConfigMap's copy."""
    from trainforge.jobs.local import job_fetches
    from trainforge.jobs.spec import function_job

    (tmp_path / "ftmod.py").write_text(
        'MODEL = "gpt2"\n\n\ndef train():\n    from transformers import AutoModel\n\n'
        "    AutoModel.from_pretrained(MODEL)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import ftmod

    job = function_job("ft", ftmod.train, "research", "cpu")
    ((path, text),) = job.entrypoint.files
    (found,) = job_fetches(job, tmp_path)
    line = int(found.where.rsplit(":", 1)[1])
    assert (
        found.where.startswith(f"{path}:")
        and "from_pretrained(MODEL)" in text.splitlines()[line - 1]
    )
    assert found.fetcher == "transformers.AutoModel.from_pretrained('gpt2')"
