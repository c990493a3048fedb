"""A stack file that is not valid YAML is one line: the file, the line and the column, what is
wrong there in plain words and what YAML expected.

PyYAML's own message spans five lines, quotes the source with a caret and calls the file
"<unicode string>"; `trainforge plan` printed it as it was. Then it was one line, but still the
parser's words (`expected <block end>, but found '<block mapping start>'`)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from trainforge.stack.file import StackFileError, read_stack


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  trainforge:cluster:\n    name: [oops\n",
            "Pulumi.bad.yaml:4:1: not valid YAML: the list `[` opened at line 3, column 11 is not "
            "closed; expected `]` after its last item (items separated by `, `)",
        ),
        (
            "config:\n\ttrainforge:x: 1\n",
            "Pulumi.bad.yaml:2:1: not valid YAML: a tab character; expected spaces (YAML indents "
            "with spaces only): replace it",
        ),
        (
            "config:\n  trainforge:jobs:\n    - name: a\n      team: b\n     pool: c\n",
            "Pulumi.bad.yaml:5:6: not valid YAML: this line's indentation does not match the "
            "block that starts at line 3, column 5; expected it lined up with the keys (or the "
            "`-` items) it belongs with",
        ),
        (
            "config:\n  trainforge:cluster:x\n  trainforge:jobs: []\n",
            "Pulumi.bad.yaml:3:18: not valid YAML: a `key:` where only a value can be; expected "
            "a space after each `key:` on the line above or here (`key: value`), or quotes "
            "around a value that holds ': '",
        ),
        (
            'config:\n  trainforge:x: "abc\n  trainforge:y: 1\n',
            "Pulumi.bad.yaml:4:1: not valid YAML: the quote opened at line 2, column 17 is never "
            "closed; expected a closing quote",
        ),
        (
            "config:\n  trainforge:x: @team\n",
            "Pulumi.bad.yaml:2:17: not valid YAML: a value cannot start with '@'; expected a "
            "plain value or a quoted one: put the value in quotes",
        ),
    ],
)
def test_a_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path, text, expected):
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    with pytest.raises(StackFileError) as err:
        read_stack(tmp_path, "bad")
    assert str(err.value) == expected


def test_plan_prints_it_as_one_line(tmp_path, trainforge_here):
    """`trainforge plan` in the test process (the message is the subject, not a process's
    start: one fewer interpreter importing trainforge)."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  a: 1\n b: 2\n")
    proc = trainforge_here(ROOT, "plan", "--stack", "bad", "--project-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "trainforge plan: configuration error: Pulumi.bad.yaml:3:2: not valid YAML: this "
        "line's indentation does not match the block that starts at line 1, column 1; expected "
        "it lined up with the keys (or the `-` items) it belongs with"
    ], proc.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  trainforge:cluster:\n    name: a\n  aws:region: us-east-1\n"
            "  trainforge:cluster:\n    name: b\n",
            "Pulumi.bad.yaml:5:3: key `trainforge:cluster` appears twice in one mapping (first "
            "at line 2); YAML would keep only the last: expected each key once (merge the two "
            "entries)",
        ),
        (
            "config:\n  trainforge:jobs:\n    - name: a\n      workers: 2\n      workers: 4\n",
            "Pulumi.bad.yaml:5:7: key `workers` appears twice in one mapping (first at line 4); "
            "YAML would keep only the last: expected each key once (merge the two entries)",
        ),
    ],
)
def test_a_key_written_twice_is_refused_not_silently_dropped(tmp_path, text, expected):
    """PyYAML keeps the last of two equal keys without a word (the first job setting was
    lost); Kubernetes' strict YAML reader refuses the file, and so does ours."""
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    with pytest.raises(StackFileError) as err:
        read_stack(tmp_path, "bad")
    assert str(err.value) == expected


def test_a_merge_key_still_overrides_on_purpose(tmp_path):
    (tmp_path / "Pulumi.ok.yaml").write_text(
        "config:\n  base: &b {workers: 2, gpus: 1}\n  trainforge:x:\n    <<: *b\n    workers: 4\n"
    )
    assert read_stack(tmp_path, "ok").config["trainforge:x"] == {"workers": 4, "gpus": 1}


def test_a_stack_file_that_is_not_utf8_or_is_a_folder_is_one_line(tmp_path):
    """A UnicodeDecodeError traceback from plan, run-local and import before; a folder named
    like a stack file was "no Pulumi.x.yaml (stacks here: x)"."""
    (tmp_path / "Pulumi.bad.yaml").write_bytes(b"config:\n  trainforge:cluster: caf\xe9\n")
    with pytest.raises(StackFileError) as e:
        read_stack(tmp_path, "bad", "trainforge")
    assert str(e.value) == ("Pulumi.bad.yaml:2: not UTF-8 text (byte 0xe9); save the file as UTF-8")
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    with pytest.raises(StackFileError) as e:
        read_stack(tmp_path, "dir", "trainforge")
    assert str(e.value) == f"stack 'dir': Pulumi.dir.yaml in {tmp_path} is a folder, not a file"


@pytest.mark.parametrize("name", ["", "../etc/passwd", "org/dev", "dev yaml"])
def test_a_name_that_is_no_stack_name_says_what_is_valid(tmp_path, name):
    """`--stack ../etc/passwd` said "no passwd.yaml"; `--stack ''` "no Pulumi..yaml"."""
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(StackFileError) as e:
        read_stack(tmp_path, name, "trainforge")
    assert str(e.value) == (
        f"stack {name!r}: not a stack name; expected letters, digits, hyphens, underscores or "
        "periods, as Pulumi allows (stacks here: dev)"
    )
