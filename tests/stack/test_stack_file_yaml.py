"""A stack file that is not valid YAML is one line: the file, the line and the column.

PyYAML's own message spans five lines, quotes the source with a caret and calls the file
"<unicode string>"; `trainforge plan` printed it as it was."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trainforge.stack.file import StackFileError, read_stack


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  trainforge:cluster:\n    name: [oops\n",
            "Pulumi.bad.yaml:4:1: not valid YAML: expected ',' or ']', but got '<stream end>' "
            "(while parsing a flow sequence at line 3, column 11)",
        ),
        (
            "config:\n\ttrainforge:x: 1\n",
            "Pulumi.bad.yaml:2:1: not valid YAML: found character '\\t' that cannot start any "
            "token (while scanning for the next token)",
        ),
    ],
)
def test_a_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path, text, expected):
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    with pytest.raises(StackFileError) as err:
        read_stack(tmp_path, "bad")
    assert str(err.value) == expected


def test_plan_prints_it_as_one_line(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  a: 1\n b: 2\n")
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "plan", "--stack", "bad", "--project-dir", tmp_path],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "trainforge plan: configuration error: Pulumi.bad.yaml:3:2: not valid YAML: expected "
        "<block end>, but found '<block mapping start>' (while parsing a block mapping at line "
        "1, column 1)"
    ], proc.stderr
