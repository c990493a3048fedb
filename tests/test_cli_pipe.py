"""A reader that leaves early (`trainforge report RUN | head -3`) ends the command quietly:
`trainforge report` printed a BrokenPipeError traceback at its last line, and any command
whose output was still buffered printed Python's "Exception ignored ... BrokenPipeError" at
exit (status 120). As a Unix tool killed by SIGPIPE does: nothing on stderr, exit 141
(128 + SIGPIPE, `cli.SIGPIPE_EXIT`, what a shell shows for `yes | head -1`'s writer)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cli_env
from trainforge import cli


def _with_reader_gone(argv: list[str], cwd) -> subprocess.CompletedProcess:
    """Run `python -m trainforge ARGV` with its stdout a pipe whose reader has already left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainforge", *argv],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # before the command writes anything: its first write meets EPIPE
    err = proc.stderr.read()
    proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), "", err)


@pytest.mark.parametrize("what", ["help", "report"])
def test_a_reader_that_left_ends_the_command_quietly(tmp_path, what):
    if what == "help":
        argv = ["--help"]
    else:
        shutil.copytree(ROOT / "tests" / "fixtures" / "recorded-run", tmp_path / "run")
        argv = ["report", str(tmp_path / "run")]
    done = _with_reader_gone(argv, tmp_path)
    assert done.stderr == "" and done.returncode == cli.SIGPIPE_EXIT, (done.returncode, done.stderr)
