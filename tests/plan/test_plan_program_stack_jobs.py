"""`plan --program FILE` keeps the stack's config jobs, and says so when a program drops them.

Before, `plan --stack dev --program examples/python_jobs/program.py` planned fn-hello alone:
the stack's four `trainforge:jobs` were gone from the plan without a word (the program never
declared them, so `pulumi up` with it would not have created them either).
"""

from __future__ import annotations

import pathlib
import shutil

from trainforge.plan import core, verdict

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEV_JOBS = {"mnist-ddp", "gpt-small-fsdp", "mnist-user", "resumable"}


def jobs_of(result) -> set[str]:
    return {d.spec.name for d in result.inventory.declared.jobs}


def test_the_documented_program_keeps_the_stack_s_jobs():
    result = core.plan_project(
        ROOT, "dev", standins=False, program="examples/python_jobs/program.py",
        echo_warnings=False,
    )  # fmt: skip
    assert jobs_of(result) == DEV_JOBS | {"fn-hello"}
    assert not [s for s in result.sections if s.title == core.PROGRAM_WARNINGS
                and any("trainforge:jobs:" in ln for ln in s.lines)]  # fmt: skip


def test_a_program_that_drops_them_is_told_in_the_verdict(tmp_path):
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "only_mine.py").write_text(
        "from trainforge.platform.config import load_config\n"
        "from trainforge.platform.training_platform import TrainingPlatform\n"
        'TrainingPlatform("platform", load_config())\n'
    )
    result = core.plan_project(
        tmp_path, "dev", standins=False, program="only_mine.py", echo_warnings=False
    )
    assert jobs_of(result) == set()
    first = " ".join(" ".join(verdict.verdict_lines(result, stack="dev")).split())
    assert "trainforge:jobs: 4 job(s) of the stack are not declared by only_mine.py:" in first
    assert "research/mnist-ddp, research/gpt-small-fsdp, research/mnist-user," in first
    # its full report has a name of its own: the stack's plain plan's report is not replaced
    # (it was: build/plan/dev-report.txt held whichever of the two ran last)
    from trainforge.plan.cli import build_parser, write_report

    args = build_parser().parse_args(["--stack", "dev", "--program", "only_mine.py"])
    assert write_report(result, args, tmp_path, None) == (
        tmp_path / "build" / "plan" / "dev-only_mine-report.txt"
    )
    args = build_parser().parse_args(["--stack", "dev"])
    assert write_report(result, args, tmp_path, None).name == "dev-report.txt"
