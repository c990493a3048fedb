"""`plan --sdk` reads the file the SDK's pod writes as bash writes it, not the function's text.

The SDK (kubeflow 0.4.1, .sdk-venv) writes the function through an unquoted heredoc, so bash
expands `$...` and drops some backslashes first (trainforge/plan/checks/pod_files.py). Each
program here is sent with the real SDK; the file is then written by running the TrainJob's
own command with this machine's bash, as the pod runs it, and compared with the plan's.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from test_plan_sdk import _Sent, _sent_pod

from tests.conftest import ROOT
from trainforge.core import pods
from trainforge.plan.checks import fetches as PF
from trainforge.plan.checks import pod_files, pod_sandbox
from trainforge.plan.checks import submitted as SB

pytestmark = [
    pytest.mark.skipif(
        not (ROOT / ".sdk-venv" / "bin" / "python").exists(),
        reason="the Kubeflow SDK's venv .sdk-venv is absent: `make sdk-venv` creates it",
    ),
    pytest.mark.skipif(pod_sandbox.unavailable() is not None, reason="no pod sandbox here"),
]

# What bash changes in an unquoted heredoc, one line each (the function's line numbers in the
# file the pod writes: the function starts at line 1). Line 2's backslash-newline joins it with
# line 3, so from line 3 on the pod's file is one line shorter.
PROGRAM = r"""from kubeflow.trainer import CustomTrainer, TrainerClient


def train():
    total = 1 + \
        2
    print(f"cost: ${price}")
    print("a\\nb", "\x24HOME", r"x$", "$HOME", "$(echo sub)", "`echo tick`", "$((6 * 7))")
    from datasets import load_dataset

    load_dataset("imdb")


TrainerClient().train(trainer=CustomTrainer(func=train, num_nodes=1))
"""


@pytest.fixture(scope="module")
def sent(tmp_path_factory) -> tuple[dict, dict]:
    program = tmp_path_factory.mktemp("sdk") / "expands.py"
    program.write_text(PROGRAM)
    return _sent_pod(program)


def bash_writes(container: dict, tmp: pathlib.Path, file: str) -> str:
    """The file the container's command writes, run by this machine's bash as the pod runs it:
    in its working directory, with the container's literal env only, a `torchrun` that does
    nothing (the program must not run here)."""
    stub = tmp / "bin"
    stub.mkdir()
    (stub / "torchrun").write_text("#!/bin/sh\nexit 0\n")
    (stub / "torchrun").chmod(0o755)
    work = tmp / "workspace"
    work.mkdir()
    argv = pods.argv(container)
    assert argv[:2] == ["bash", "-c"]
    env = {"PATH": str(stub), **pods.literal_env(container)}
    subprocess.run(["/bin/bash", *argv[1:]], cwd=work, env=env, check=True, timeout=30)
    return (work / file).read_text()


def test_the_plan_writes_the_file_as_the_pods_bash_does(sent, tmp_path):
    """The plan's file (its sandbox run of the TrainJob's command) is bash's, byte for byte;
    and it is not the function's text."""
    doc, pod = sent
    spec = pod["spec"]
    (c,) = spec["containers"]
    assert c["command"] == doc["spec"]["trainer"]["command"]  # read from the object
    (w,) = pod_files.written(spec, c)
    assert w.file == "expands.py" and w.why == ""
    assert w.text == bash_writes(c, tmp_path, w.file)
    lines = w.text.splitlines()
    assert lines[1] == "    total = 1 +         2"
    assert lines[2] == '    print(f"cost: ")'
    assert lines[3] == ('    print("a\\nb", "\\x24HOME", r"x$", "/tmp", "sub", "tick", "42")')
    assert w.source.splitlines()[3] == '    print(f"cost: ${price}")'


def test_the_first_difference_is_a_finding(sent, tmp_path):
    """At the program's FILE:LINE (line 5: the function starts at line 4), with the line of the
    file in the pod beside it (it said expands.py:2, the pod file's line, as the program's)."""
    _, pod = sent
    program = tmp_path / "expands.py"
    program.write_text(PROGRAM)
    assert PROGRAM.splitlines()[4] == "    total = 1 + \\"
    lines: list[str] = []
    (f,) = SB._expanded(_Sent, pod, lines, str(program))
    assert f.rule == SB.RULE_HEREDOC == "TRAINFORGE_SDK_SHELL_EXPANDS"
    at = "expands.py:5, line 2 of the file the SDK writes in the pod"
    assert (
        f"first at {at}: written `total = 1 + \\`, the pod runs `total = 1 +         2`"
        in f.message
    )
    assert "unquoted bash heredoc (`read -r -d '' SCRIPT << EOM`" in f.message
    assert "`\\x24` for `$`" in f.fix
    assert lines == [f"  REFUSED: {at}: the pod runs `total = 1 +         2`"]


def test_names_and_downloads_are_read_in_the_file_the_pod_writes(sent):
    """The function's text uses `price`, which it never defines (its f-string's `${price}`),
    but the pod's program does not (bash expanded `${price}` to nothing): no NameError; and
    the download is on line 7 of the pod's file, not 8 of the function's text."""
    _, pod = sent
    assert SB._unbound(_Sent, pod, []) == []

    class Ctx:
        objects: list = []

    found = PF.code_fetches(Ctx, "research", pod["spec"])
    assert [(f.where, f.fetcher) for f in found] == [
        ("expands.py:7", "datasets.load_dataset('imdb')")
    ], found


def test_a_download_is_named_at_the_programs_file_and_line(sent, tmp_path):
    """TRAINFORGE_INTERNET_FETCH's FILE:LINE is the program's, as the other --sdk findings'
    (`submitted.first_line`): it said expands.py:7, the pod file's line (line 7 of the
    program is a print). The function starts at line 4, and bash joined its lines 2 and 3 in
    the pod's file, so line 7 there is line 8 of the function: the program's line 11."""
    _, pod = sent
    program = tmp_path / "expands.py"
    program.write_text(PROGRAM)
    assert PROGRAM.splitlines()[10] == '    load_dataset("imdb")'

    class Ctx:
        objects: list = []

    found = PF.code_fetches(Ctx, "research", pod["spec"], str(program))
    at = "expands.py:11, line 7 of the file the SDK writes in the pod"
    assert [(f.where, f.fetcher) for f in found] == [(at, "datasets.load_dataset('imdb')")]
    # the name check reads the same lines: a name on a line after the join is at its own
    (w,) = pod_files.written(pod["spec"], pod["spec"]["containers"][0])
    assert SB.pod_line_at(w, 7, str(program)) == at
    assert SB.pod_line_at(w, 7, None) == "line 7 of the file the SDK writes in the pod (expands.py)"


def test_no_sandbox_runs_nothing_and_guesses_nothing(sent, monkeypatch):
    """Where the pod sandbox cannot run, the text with a `$(...)` is not read (said), and a
    text bash leaves alone is read as written."""
    _, pod = sent
    spec = pod["spec"]
    monkeypatch.setattr(pod_sandbox, "unavailable", lambda: "needs root (test)")
    pod_files._written.cache_clear()
    try:
        (w,) = pod_files.written(spec, spec["containers"][0])
        assert w.text is None and w.read is None and w.substitutes
        lines: list[str] = []
        assert SB._expanded(_Sent, pod, lines) == []
        assert lines == [
            "  NOT READ: expands.py, the file the SDK writes in the pod: its text holds command "
            "substitution (`$(...)` or a backtick) and the pod sandbox cannot run it here: "
            "needs root (test): names and downloads in it are not checked"
        ]
        plain = pod_files.Written("f.py", "def f():\n    return 1\n", None, "no sandbox")
        assert plain.read == plain.source
    finally:
        pod_files._written.cache_clear()


def test_the_plan_refuses_what_bash_changes(tmp_path, capsys):
    """`trainforge plan --sdk`: before, CLEAN apart from the download, and `price` reported as a
    NameError the pod never raises."""
    from test_plan_sdk import plan_sdk, with_trainjob

    program = tmp_path / "expands.py"
    program.write_text(
        PROGRAM.replace('    from datasets import load_dataset\n\n    load_dataset("imdb")\n', "")
    )
    rc, out, printed = plan_sdk(tmp_path, capsys, program, with_trainjob)
    assert rc == 1 and "CLEAN" not in out.splitlines()[0]
    (line,) = [x for x in printed.splitlines() if x.startswith(f"  [{SB.RULE_HEREDOC}]")]
    assert "research/TrainJob/" in line
    assert (
        "REFUSED: expands.py:5, line 2 of the file the SDK writes in the pod: the pod runs "
        in printed
    )
    assert SB.RULE_NAMES not in out and "TRAINFORGE_POD_SCRIPT_FAILS" not in out


def test_a_link_the_script_makes_is_not_followed_out_of_its_volume(sent, tmp_path):
    """A command substitution that makes the file a link to this machine's files: the plan
    reads nothing through it (the sandbox's `/` is not this machine's)."""
    _, pod = sent
    spec = pod["spec"]
    (c,) = spec["containers"]
    secret = tmp_path / "secret"
    secret.write_text("not the pod's\n")
    script = c["command"][2].replace("EOM\nprintf", f"EOM\nln -s {secret} expands.py\nprintf")
    c = {**c, "command": ["bash", "-c", script]}
    (w,) = pod_files.written(spec, c)
    assert w.text is None and "wrote none of expands.py" in w.why, w


# A `${...}` bash cannot parse (rv/sdk2.py of the review): not an expansion but bash's error.
STOPS = r"""from kubeflow.trainer import CustomTrainer, TrainerClient


def train():
    import os
    print("hello", os.environ["RANK"], f"cost ${os.environ['RANK']}")


TrainerClient().train(trainer=CustomTrainer(func=train, num_nodes=1))
"""


def test_bash_stopping_the_heredoc_is_said_as_an_error_not_an_expansion(tmp_path_factory):
    """The plan's file is bash's (empty: bash stops the heredoc with `bad substitution` and
    goes on), and the finding says so: an empty file, the next command run, a job that exits 0
    without training. Before, it said `written 'def train():', the pod runs ''`, blamed on bash
    expanding `${...}`."""
    program = tmp_path_factory.mktemp("sdk") / "stops.py"
    program.write_text(STOPS)
    _, pod = _sent_pod(program)
    spec = pod["spec"]
    (c,) = spec["containers"]
    (w,) = pod_files.written(spec, c)
    tmp = tmp_path_factory.mktemp("bash")
    assert w.text == bash_writes(c, tmp, w.file) == ""
    assert (w.error, w.rc, w.stopped) == ("bad substitution", 0, True)
    assert w.then == "torchrun parsed stops.py"  # the next command ran, on the empty file
    lines: list[str] = []
    (f,) = SB._expanded(_Sent, pod, lines, str(program))
    assert f.rule == SB.RULE_HEREDOC
    assert lines == [
        "  REFUSED: bash stops the SDK's heredoc with `bad substitution`: the pod writes "
        "stops.py empty (0 bytes) and runs it; the script exits 0"
    ]
    assert "with its error `bad substitution`: an error, not an expansion" in f.message
    assert "the TrainJob reports success having trained nothing" in f.message
    assert "the pod runs ``" not in f.message and "bash expands" not in f.message


def test_bash_error_reads_the_diagnostic_bash_prints():
    """bash quotes a heredoc's whole text before its error (GNU bash 5.2.15); a one-line word
    too; a script's own stderr is no error of bash's."""
    said = "/bin/bash: line 2: \ndef f():\n    x = 1\n\n: bad substitution\ntorchrun: x\n"
    assert pod_files.bash_error(said) == "bad substitution"
    assert pod_files.bash_error("bash: line 3: x: unbound variable\n") == "unbound variable"
    assert pod_files.bash_error("Traceback: boom\n") == ""
