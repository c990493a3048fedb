"""Jobs declared in Python: `plan --program` lists them, `run-local --stack` runs them.

examples/python_jobs/program.py declares `fn-hello` with `TrainingJob.function` (no stack
config entry), and the stack's config jobs. As a project's `__main__.py` (the stack's program) run-local finds it by running
the program under the plan's mocks; `plan --program FILE` renders it; the path rule of
`--program` is the one of `script`/`codeDir` (relative to the project, inside it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainforge.core.errors import JobConfigError
from trainforge.jobs.local import find_job
from trainforge.local import program_jobs

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = "examples/python_jobs/program.py"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's project whose stack program declares its jobs in Python only."""
    root = tmp_path_factory.mktemp("pyjobs")
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "examples", root / "examples")  # the config jobs' own scripts
    shutil.copy(ROOT / PROGRAM, root / "__main__.py")
    return root


def test_plan_lists_a_job_declared_only_in_python():
    from trainforge.plan import core

    result = core.plan_project(ROOT, "dev", standins=False, program=PROGRAM)
    kinds = {(o.doc["kind"], o.doc["metadata"]["name"]) for o in result.objects}
    assert ("PyTorchJob", "fn-hello") in kinds
    # the program declares the stack's config jobs too (it replaces __main__.py, which did)
    assert ("PyTorchJob", "mnist-ddp") in kinds
    budget = next(s for s in result.sections if s.title.startswith("Restart budget"))
    assert any(
        line.startswith("research/fn-hello: 2 pods x 1 process, restarts: torchrun restarts")
        for line in budget.lines
    ), budget.lines


def test_run_local_runs_it_from_the_stacks_program(project, trainforge_here):
    proc = trainforge_here(project, "run-local", "--stack", "dev", "fn-hello")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = project / "runs" / "fn-hello" / "hello.txt"
    assert out.read_text() == "world=2 steps=2 total=2\n"


def test_unknown_job_lists_config_and_program_jobs(project):
    with pytest.raises(JobConfigError, match=r"declares: .*mnist-ddp.*fn-hello \(__main__.py\)"):
        find_job("dev", "nope", project, declared=program_jobs)


@pytest.mark.parametrize("bad", ["/abs/program.py", "../outside.py", "examples/../../x.py"])
def test_program_paths_follow_the_one_rule(project, bad):
    with pytest.raises(JobConfigError, match=r"--program: got .*relative to the project directory"):
        find_job("dev", "fn-hello", project, program=bad, declared=program_jobs)


def test_bad_stack_config_is_one_error_not_a_traceback(tmp_path, trainforge_here):
    """run-local resolves a job through the stack's program; a config problem the program
    finds (a job naming a pool that does not exist) is the plan's one-line error, exit 2."""
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    bad = text.replace(
        "pool: gpu-workloads\n      preset: fsdp", "pool: p5-nowhere\n      preset: fsdp"
    )
    assert bad != text
    (tmp_path / "Pulumi.dev.yaml").write_text(bad)
    with pytest.raises(
        JobConfigError, match=r"trainforge:jobs\[1\] \(gpt-small-fsdp\)\.pool: got 'p5-nowhere'"
    ):
        program_jobs("dev", tmp_path)
    proc = trainforge_here(tmp_path, "run-local", "--stack", "dev", "gpt-small-fsdp")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "trainforge run-local: error:" in out
    assert (
        "trainforge:jobs[1] (gpt-small-fsdp).pool: got 'p5-nowhere'; expected one of the node pools"
        in out
    )


def test_run_local_shows_the_jobs_own_warnings_not_the_platforms(monkeypatch, capsys):
    """The dev stack's program warns that alerts reach nobody (monitoring has no receivers):
    true of the platform, meaningless for a run on this machine. run-local keeps quiet about
    it and prints the chosen job's own warnings, once."""
    from trainforge import local

    monkeypatch.chdir(ROOT)
    assert local.main(["--stack", "dev", "mnist-ddp", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "reach nobody" not in err and "trainforge:monitoring" not in err, err

    # a job's own warning (what its TrainingJob logged, DeclaredJob.warnings) is shown; the
    # platform's and another job's are not
    import dataclasses

    from trainforge.plan import runner

    real = runner.run_project
    own = {
        "mnist-ddp": "TrainingJob job-research-mnist-ddp: est. 15.0 GiB of 16.0 GiB per GPU",
        "gpt-small-fsdp": "TrainingJob job-research-gpt-small-fsdp.hangTimeout: 600 watches",
    }

    def with_warnings(*a, **kw):
        inv = real(*a, **kw)
        inv.warnings[:0] = [
            "trainforge:monitoring.receivers: none configured, so alerts reach nobody",
            *own.values(),
        ]
        jobs = inv.declared.jobs
        for i, dj in enumerate(jobs):
            if dj.spec.name in own:
                jobs[i] = dataclasses.replace(dj, warnings=(own[dj.spec.name],))
        return inv

    monkeypatch.setattr(runner, "run_project", with_warnings)
    specs = program_jobs("dev", ROOT)
    job = next(s for s in specs if s.name == "mnist-ddp")
    local.resolved_job(job, "dev")
    local.resolved_job(job, "dev")  # once
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "TrainingJob job-research-mnist-ddp: est. 15.0 GiB of 16.0 GiB per GPU"
    ], err
