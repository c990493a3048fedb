"""One reader of `sh -c SCRIPT` for the pod script rehearsal and the fetch finder (wave 19,
imagefix item 3). Each case below is one where plan/checks/pod_scripts.shell_script and
jobs/fetches.command_fetches disagreed, or where both were wrong against the shells' own rule
(POSIX sh(1) "-c": options first, then the command string, then $0 and the arguments)."""

from __future__ import annotations

import pytest

from trainforge.jobs import fetches
from trainforge.jobs.shell_argv import shell_script
from trainforge.plan.checks import pod_scripts

FETCH = "curl -fsSL https://example.com/data.tar"

CASES = [
    # (command, args, the script the shell runs)
    (["sh", "-c", FETCH], [], FETCH),
    (["bash", "-lc"], [FETCH], FETCH),  # split between command and args
    (["/bin/sh", "-ec", FETCH], [], FETCH),
    (["bash", "-o", "pipefail", "-c", FETCH], [], FETCH),
    (["bash", "-eo", "pipefail", "-c", FETCH], [], FETCH),  # -o inside a cluster
    (["bash", "--login", "-c", FETCH], [], FETCH),
    (["sh", "-c", FETCH, "name", "arg1", "-c", "x"], [], FETCH),  # $0 and args after it
    (["sh", "-c", "-e", FETCH], [], FETCH),  # options may follow -c: the script is the operand
    (["sh", "-c", "--", FETCH], [], FETCH),
    (["ash", "-c", FETCH], [], FETCH),  # fetches did not know ash
    (["zsh", "-c", FETCH], [], FETCH),  # pod_scripts did not know zsh
    (["env", "HOME=/tmp", "sh", "-c", FETCH], [], FETCH),  # pod_scripts missed the wrapper
    (["sh", "/setup.sh", "-c", FETCH], [], None),  # a file; "-c" is its argument
    (["sh", "-c"], [], None),  # no script
    (["python", "-c", "print(1)"], [], None),
    (["sh", "-x", FETCH], [], None),  # no -c: FETCH would be a file
]


@pytest.mark.parametrize(("command", "args", "script"), CASES)
def test_both_readers_find_the_same_script(command, args, script):
    container = {"command": command, "args": args}
    assert shell_script([*command, *args]) == script
    assert pod_scripts.shell_script(container) == script
    found = fetches.command_fetches([*command, *args], "c")
    assert [f.reaches for f in found] == (["example.com"] if script == FETCH else [])
