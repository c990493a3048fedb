"""`plan --program FILE`: the program path's errors are configuration errors (exit 2) that
name the problem (runner.program_path)."""

from __future__ import annotations

import pytest

from trainforge.plan.runner import ProjectError, program_path


def test_the_program_path_refuses_what_is_not_a_file_of_the_project(tmp_path):
    with pytest.raises(ProjectError, match="no __main__.py"):
        program_path(tmp_path, None)
    with pytest.raises(ProjectError, match="--program: got '../x.py'"):
        program_path(tmp_path, "../x.py")
    with pytest.raises(ProjectError, match="no such file in the project"):
        program_path(tmp_path, "missing.py")
    (tmp_path / "jobs.py").write_text("")
    assert program_path(tmp_path, "jobs.py") == tmp_path / "jobs.py"
