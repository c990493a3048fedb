"""A warning the Pulumi program logs at preview reaches the plan's verdict and its report.

Before, `pulumi.log.warn` went only to stderr above the verdict: the report file, the JSON
and the PR markdown a reviewer reads never had it, and the verdict's "Warnings" said
nothing (the dev stack's "no alert receivers" warning; a team quota bigger than the pools).
"""

from __future__ import annotations

import pathlib

from tests.conftest import full_report
from trainforge.plan import core, verdict

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECEIVERS = "trainforge:monitoring.receivers: none configured"


def test_program_warnings_are_in_the_verdict_and_the_report(capsys, tmp_path):
    result = core.plan_project(ROOT, "dev", standins=False, echo_warnings=False)
    assert RECEIVERS not in capsys.readouterr().err  # not echoed: the verdict shows it
    (section,) = [s for s in result.sections if s.title == core.PROGRAM_WARNINGS]
    assert any(line.startswith(f"warning: {RECEIVERS}") for line in section.lines)
    first = verdict.verdict_lines(result, stack="dev")
    at = first.index("Warnings (1):")
    assert first[at + 1].startswith(f"  Program warnings: {RECEIVERS}")
    assert f"warning: {RECEIVERS}" in full_report(result, tmp_path)


def test_plan_project_echoes_them_on_stderr_by_default(capsys):
    """With echo_warnings (the default, for a caller that shows no verdict) they are echoed;
    run-local does not ask for it (a laptop run: only its job's own, tests/jobs)."""
    core.plan_project(ROOT, "dev", standins=False)
    assert RECEIVERS in capsys.readouterr().err
