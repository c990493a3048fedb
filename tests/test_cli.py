"""The `trainforge` command: dispatch, unknown commands, and what `make demo` runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trainforge import cli, demo


def test_unknown_command_is_a_usage_error(capsys):
    assert cli.main(["deploy"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'deploy'" in err and "run-local" in err and "plan" in err


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in cli.COMMANDS)


def test_a_reader_that_closed_stdout_ends_the_command_without_a_traceback():
    """`trainforge report RUN | head -3` ended in a BrokenPipeError traceback once head had
    its lines. Here the reader is gone before the command writes (a pipe whose read end is
    closed): the command exits as a SIGPIPE'd process would, and says nothing."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "trainforge", "--help"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write)
    assert proc.stderr == ""
    assert proc.returncode == cli.SIGPIPE_EXIT == 128 + signal.SIGPIPE


def test_plan_of_a_missing_stack_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "plan", "--stack", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Pulumi.nope.yaml" in proc.stdout + proc.stderr


def test_python_m_trainforge_in_a_folder_with_a_shadowing_file_is_one_line(tmp_path):
    """`python -m` puts the working directory first on sys.path: a `random.py` there broke
    the CLI's own `import tempfile` with a traceback (exit 1). One line, exit 2; a folder
    with only `utils.py` runs the command."""
    import os

    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "utils.py").write_text("X = 1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "trainforge", "run-local", "train.py", "--dry-run"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "random.py").write_text("def helper():\n    return 4\n")
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"trainforge: error: {tmp_path.resolve() / 'random.py'} shadows the module 'random', "
        "which trainforge imports (`python -m` puts the working directory first on sys.path, "
        "and your job's pods put its code directory first); rename it, e.g. my_random.py, and "
        "your imports of it"
    ]


def test_a_plan_prints_each_program_warning_once(shipped_cli_run):
    """The plan runs the program twice (the preview, then the stand-in run for the IAM
    check); the dev stack's one warning (no alert receivers) is shown once, not twice.
    `trainforge plan --stack dev` in its own process, in a copy of the project: the README's
    command, run once per test run (tests/test_docs_run.py checks it exits 0)."""
    proc = shipped_cli_run(["plan", "--stack", "dev"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (proc.stdout + proc.stderr).count("monitoring.receivers: none configured") == 1


def test_the_plans_stdout_is_the_verdict_and_its_report_has_the_tree(shipped_cli_run):
    """docs/pr-review.md said the plan "prints a tree of resources" and --summary's help
    "print counts instead of the tree": stdout is the verdict (no tree, --summary or not);
    the tree is in the full report, which --summary turns into counts."""
    import pathlib
    import re

    proc = shipped_cli_run(["plan", "--stack", "dev"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "+ pulumi:pulumi:Stack" not in proc.stdout
    report = pathlib.Path(re.search(r"^Full report: (.+)$", proc.stdout, re.M)[1])
    assert report.read_text().startswith("Resources (stack dev, project ")
    assert "+ pulumi:pulumi:Stack  trainforge-dev" in report.read_text()
    doc = " ".join((ROOT / "docs" / "pr-review.md").read_text().split())
    assert "**Inventory**: the full report lists a tree of resources" in doc


def test_demo_jobs_exist_in_the_dev_stack_and_their_overrides_are_valid(monkeypatch, capsys):
    """`make demo` runs dev-stack jobs with overrides; a renamed job or flag would break it.
    In this process, through the same dispatch as `python -m trainforge` (a fresh interpreter
    for each was ~5 CPU s; run-local's own process runs in test_docs_run.py and tests/jobs)."""
    monkeypatch.chdir(ROOT)
    for _, job, overrides in demo.RUNS:
        code = cli.main(["run-local", "--stack", "dev", job, *overrides, "--dry-run"])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        assert "trainforge.training" in out


def test_demo_prints_the_whole_command_it_runs(monkeypatch, capsys):
    """It printed `trainforge run-local --stack dev mnist-ddp` and ran it with a hidden
    `--steps 300 ...`: each printed command is the argv it runs, word for word."""
    import shlex

    from trainforge import local
    from trainforge.plan import cli as plan_cli

    ran: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(local, "main", lambda argv: ran.append(("run-local", argv)) or 0)
    monkeypatch.setattr(plan_cli, "main", lambda argv: ran.append(("plan", argv)) or 0)
    monkeypatch.setattr(demo, "_plots", lambda outs: {})
    assert demo.main([]) == 0
    printed = [ln[2:] for ln in capsys.readouterr().out.splitlines() if ln.startswith("$ ")]
    assert printed == [f"python -m trainforge {sub} {shlex.join(argv)}" for sub, argv in ran]
    assert len(ran) == len(demo.RUNS) + 1
    assert "--steps 300" in printed[0]


def test_demo_runs_the_jobs_then_the_plan_then_the_plots_and_skip_plan_still_plots(
    monkeypatch, capsys
):
    """The order README.md's `make demo` line and `demo --help` state; `--skip-plan` leaves out
    the plan only (its help said "only run the two jobs" while the runs were still plotted)."""
    from trainforge import local
    from trainforge.plan import cli as plan_cli

    ran: list[str] = []
    monkeypatch.setattr(local, "main", lambda argv: ran.append("run-local") or 0)
    monkeypatch.setattr(plan_cli, "main", lambda argv: ran.append("plan") or 0)
    monkeypatch.setattr(demo, "_plots", lambda outs: ran.append("plots") or {})
    assert demo.main([]) == 0
    assert ran == ["run-local"] * len(demo.RUNS) + ["plan", "plots"]
    readme = (ROOT / "README.md").read_text()
    assert "jobs locally, then the offline plan, then plots the runs" in readme
    ran.clear()
    assert demo.main(["--skip-plan"]) == 0
    assert ran == ["run-local"] * len(demo.RUNS) + ["plots"]
    help_text = demo_help(capsys)
    assert "run and plot the two jobs, without the plan" in " ".join(help_text.split())


def demo_help(capsys) -> str:
    with pytest.raises(SystemExit):
        demo.main(["--help"])
    return capsys.readouterr().out


def test_a_missing_dependency_is_one_line_naming_the_extra(monkeypatch, capsys):
    """`python -m trainforge plan` by an interpreter without the venv was a ModuleNotFoundError
    traceback; a user program's own missing import keeps its traceback."""
    from trainforge.plan import cli as plan_cli

    def needs(module: str):
        def main(argv):
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)

        return main

    monkeypatch.setattr(plan_cli, "main", needs("pulumi_aws.iam"))
    assert cli.main(["plan", "--stack", "dev"]) == 2
    assert capsys.readouterr().err == (
        f"trainforge plan: pulumi_aws is not installed for {sys.executable}: run `make venv` "
        "and use .venv/bin/python (or pip install 'trainforge[platform]')\n"
    )
    monkeypatch.setattr(plan_cli, "main", needs("nope_module"))
    with pytest.raises(ModuleNotFoundError):
        cli.main(["plan", "--stack", "dev"])


def test_each_module_the_dispatcher_names_is_installed_by_its_extra():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {"": project["dependencies"], **project["optional-dependencies"]}
    dist = {"yaml": "pyyaml"}
    for module, extra in cli.EXTRA_OF_MODULE.items():
        name = dist.get(module, module.replace("_", "-"))
        pins = [p.split("==")[0].split("[")[0].lower() for p in extras[extra]]
        assert name in pins, f"{module}: not in extra {extra!r} ({pins})"


def test_the_readme_says_what_a_bare_python_prints():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "a bare `python` without it stops in one line that names the package it lacks" in readme
    assert "ModuleNotFoundError" not in readme
