"""One launch model, two places: the plan and `run-local` start the same ranks.

A job of 2 workers on a 4-GPU pool (g5.12xlarge) with gpusPerWorker unset renders 2 pods x
4 processes (the emitters' default: one process per GPU of the node). `run-local --stack`
resolves the job through the stack's program as the plan does, starts 8 local ranks (world
8), applies the rendered job's restart policy, and prints the same launch line as the plan.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from trainforge.jobs.restarts import LOCAL_CAP, budget, launch_line, on_exit, outcome
from trainforge.training.contract import ON_EXIT

ROOT = Path(__file__).resolve().parents[2]

# every rank writes what torchrun told it; no torch import, so 8 ranks start quickly
RANKS_SCRIPT = """\
import os, pathlib
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
(out / f"rank_{os.environ['RANK']}").write_text(os.environ["WORLD_SIZE"])
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("launch_model")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, root / name)
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    config = stack["config"]
    config["trainforge:nodePools"].append(
        {
            "name": "g5-4gpu",
            "instanceTypes": ["g5.12xlarge"],
            "capacityTypes": ["on-demand"],
            "limits": {"cpu": "192", "memory": "768Gi", "gpus": 8},
        }
    )
    config["trainforge:teams"][0]["quota"].update(gpus="8", cpu="192", memory="768Gi")
    config["trainforge:jobs"] = [
        {
            "name": "ranks",
            "team": "research",
            "pool": "g5-4gpu",
            "workers": 2,
            "entrypoint": {"script": "code/ranks.py"},
        }
    ]
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    (root / "code").mkdir()
    (root / "code" / "ranks.py").write_text(RANKS_SCRIPT)
    return root


@pytest.fixture(scope="module")
def plan(project):
    from trainforge.plan import core

    return core.plan_project(project, "dev", standins=False)


def test_the_plan_renders_2_pods_x_4_processes(plan):
    from trainforge.plan.job_view import job_view

    views = [v for o in plan.objects if (v := job_view(o.doc)) is not None]
    (view,) = [v for v in views if v.name == "ranks"]
    assert (view.pods, view.procs_per_pod, view.world_size) == (2, 4, 8)


def test_run_local_runs_the_rendered_ranks_and_prints_the_plans_line(
    project, plan, trainforge_here
):
    section = next(s for s in plan.sections if s.title.startswith("Restart budget"))
    (line,) = [x for x in section.lines if x.startswith("research/ranks: ")]
    plan_line = line.removeprefix("research/ranks: ")
    assert plan_line.startswith("2 pods x 4 processes, restarts: ")
    (data,) = [d for d in section.data if d["job"] == "ranks"]

    proc = trainforge_here(project, "run-local", "--stack", "dev", "ranks")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the same line, computed by the same function from the same resolved job
    assert f"run-local: ranks: {plan_line}\n" in proc.stdout
    out = project / "runs" / "ranks"
    worlds = {p.name: p.read_text() for p in out.glob("rank_*")}
    assert worlds == {f"rank_{r}": "8" for r in range(8)}  # 8 ranks, world 8
    # the rendered job's restart policy (the plan's data), not run-local's own default
    # ExitCode: a bug in the user's code (exit 1) stops the job, a lost peer re-creates it
    assert data["recreated_on"] == "retryable" and "pod re-created on exit >= 128" in plan_line


def test_run_local_applies_the_rendered_restart_policy(project, monkeypatch):
    """The resolved job restarts as the rendered one (ExitCode here: the user code's wrapper
    counts attempts in its ledger on the team's FSx); run-local's local pod follows that
    budget."""
    from trainforge import local

    monkeypatch.chdir(project)
    seen: dict = {}

    def fake_launch(
        cmd, env, cwd=None, *, recreations=0, on="retryable", gpus=0, outcome=None, **kw
    ):
        seen.update(cmd=cmd, env=env, recreations=recreations, on=on, gpus=gpus, outcome=outcome)
        seen.update(kw)
        return 0

    monkeypatch.setattr("trainforge.jobs.local.launch", fake_launch)
    assert local.main(["--stack", "dev", "ranks"]) == 0
    from trainforge.jobs.local import find_job

    job = local.resolved_job(find_job("dev", "ranks", "."), "dev")
    assert job.restart_policy == "ExitCode"
    b = budget(job)
    assert (seen["on"], seen["recreations"]) == ("retryable", b.local_recreations)
    # the operator counts no ExitCode re-creation: run-local's own cap, said as such
    assert b.local_recreations == LOCAL_CAP and seen["capped"]
    # the local pod is re-created for what the backend's controller re-creates, and its
    # processes are told that, as the pods are (TRAINFORGE_ON_EXIT)
    for code in (1, 2, 137, 143, 202):
        assert seen["outcome"](code) == outcome(job, code), code
    assert seen["env"][ON_EXIT] == on_exit(job)
    i = seen["cmd"].index("--nproc-per-node")
    assert seen["cmd"][i + 1] == "8"
    assert launch_line(job).startswith("2 pods x 4 processes, restarts: ")


def _recording_launch_line(monkeypatch, name: str = "launch_line") -> list[str]:
    """trainforge.jobs.restarts.launch_line (or `name`), recording every line it returns."""
    from trainforge.jobs import restarts

    made: list[str] = []
    real = getattr(restarts, name)

    def recorded(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(restarts, name, recorded)
    return made


def _fake_launch(monkeypatch) -> dict:
    seen: dict = {}

    def fake_launch(
        cmd, env, cwd=None, *, recreations=0, on="retryable", gpus=0, outcome=None, **kw
    ):
        seen.update(cmd=cmd, env=env, recreations=recreations, on=on, gpus=gpus, outcome=outcome)
        seen.update(kw)
        return 0

    monkeypatch.setattr("trainforge.jobs.local.launch", fake_launch)
    return seen


def _max_restarts(cmd: list[str]) -> int:
    return int(cmd[cmd.index("--max-restarts") + 1])


def test_the_ad_hoc_and_stack_paths_print_the_restart_line_they_run_with(
    project, monkeypatch, capsys
):
    """`run-local --stack STACK JOB` prints the plan's launch line (restarts.launch_line) of
    the job it mirrors; `run-local SCRIPT` (no stack: no job the cluster would run, no pods)
    the one local torchrun it runs (restarts.adhoc_line: it said "2 pods x 1 process,
    torchrun restarts in the pod 1"). Both with the numbers run-local then runs with (its
    --max-restarts and --pod-restarts included), not a line written by hand."""
    from trainforge import local

    monkeypatch.chdir(project)
    made = _recording_launch_line(monkeypatch)
    made_adhoc = _recording_launch_line(monkeypatch, "adhoc_line")
    seen = _fake_launch(monkeypatch)

    argv = ["code/ranks.py", "--workers", "2", "--max-restarts", "1", "--pod-restarts", "3"]
    assert local.main(argv) == 0
    out = capsys.readouterr().out
    assert made == []
    (adhoc,) = made_adhoc
    assert f"run-local: code/ranks.py: {adhoc}\n" in out
    assert adhoc == (
        "1 local torchrun x 2 processes (no stack, so no pods), restarts: torchrun restarts its "
        "processes at most 1 time (--max-restarts); the torchrun is re-run on exit >= 128, at "
        "most 3 times (--pod-restarts); your code's wrapper stops after 5 failed attempts in a "
        "row from one checkpoint (the newest step_<N> in the checkpoint directory when each "
        "began), torchrun's restarts counted as attempts"
    )
    # what the line says is what runs: one torchrun of 2 processes, its restarts, re-runs
    assert seen["cmd"].count("trainforge.training.launch") == 1
    assert seen["cmd"][seen["cmd"].index("--nproc-per-node") + 1] == "2"
    assert (_max_restarts(seen["cmd"]), seen["recreations"], seen["on"]) == (1, 3, "retryable")
    # no stack, no controller: the operator's rule re-runs it, and its processes are told nothing
    assert seen["outcome"] is None and ON_EXIT not in seen["env"]

    made.clear()
    assert (
        local.main(["--stack", "dev", "ranks", "--max-restarts", "2", "--pod-restarts", "1"]) == 0
    )
    out = capsys.readouterr().out
    (stacked,) = made
    assert f"run-local: ranks: {stacked}\n" in out
    assert stacked.startswith("2 pods x 4 processes, restarts: torchrun restarts in the pod 2; ")
    assert stacked.endswith("run-local: the same, up to 1 (--pod-restarts)")
    assert (_max_restarts(seen["cmd"]), seen["recreations"], seen["on"]) == (2, 1, "retryable")


def test_the_ad_hoc_line_counts_what_it_runs():
    from trainforge.jobs.restarts import adhoc_budget, adhoc_line

    assert adhoc_line(1, adhoc_budget(0, 1)) == (
        "1 local torchrun x 1 process (no stack, so no pods), restarts: torchrun restarts its "
        "process at most 0 times (--max-restarts); the torchrun is re-run on exit >= 128, at "
        "most 1 time (--pod-restarts); your code's wrapper stops after 5 failed attempts in a "
        "row from one checkpoint (the newest step_<N> in the checkpoint directory when each "
        "began)"
    )


def test_the_bundled_runtime_s_stack_line_says_the_flags_it_runs_with(monkeypatch, capsys):
    """`run-local --stack STACK JOB` of a job of the bundled runtime: the line comes after the
    flags, so one the user adds (--pod-restarts 4) is the number it prints and runs."""
    from trainforge import local
    from trainforge.jobs.spec import parse_job

    job = parse_job(
        {"name": "mlp-job", "team": "t", "pool": "p", "workers": 1, "gpusPerWorker": 0,
         "procsPerWorker": 2, "restartPolicy": "ExitCode", "backend": "indexed-job",
         "model": "mlp"},
        "test",
    )  # fmt: skip
    monkeypatch.setattr("trainforge.jobs.local.find_job", lambda *a, **k: job)
    made = _recording_launch_line(monkeypatch)
    seen = _fake_launch(monkeypatch)
    assert local.main(["--stack", "dev", "mlp-job", "--steps", "1", "--pod-restarts", "4"]) == 0
    (line,) = made
    assert f"run-local: mlp-job: {line}\n" in capsys.readouterr().out
    assert line == (
        "1 pod x 2 processes, restarts: torchrun restarts in the pod 0; pod re-created on exit "
        ">= 128, at most 6 (backoffLimitPerIndex 6, counted for each index alone; the runtime "
        "stops after 5 failed attempts in a row from one checkpoint, whichever comes first); "
        "run-local: the same, up to 4 (--pod-restarts)"
    )
    assert (seen["recreations"], seen["on"]) == (4, "retryable")
    # its processes are told what the indexed Job's controller does, and run-local does that
    assert seen["env"][ON_EXIT] == on_exit(job)
    assert [seen["outcome"](c) for c in (1, 137)] == [outcome(job, c) for c in (1, 137)]
