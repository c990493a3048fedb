"""jobs/pynames.py: the names a file loads and never binds, proved against Python itself: each
case runs as `python FILE` (how torchrun's workers run the file the Kubeflow SDK writes), and
the first NameError it raises is the first name the reader flags, at the same line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trainforge.jobs import pynames as N

CASES = {
    "imports inside, a local annotation, a lambda and a comprehension": (
        "def train():\n    import os\n    x: NotEvaluated = 1\n"
        "    print(os.getpid() > 0, [i for i in range(x)], (lambda y: y + 1)(x))\n\ntrain()\n",
        [],
    ),
    "a module the function never imports": (
        "def train():\n    rank = int(os.environ.get('RANK', '0'))\n    print(rank)\n\ntrain()\n",
        [("os", 2)],
    ),
    "a global the function binds itself": (
        "def train():\n    global COUNT\n    COUNT = 1\n    print(COUNT)\n\ntrain()\n",
        [],
    ),
    "`import a.b` binds `a`, not `b`": (
        "def train():\n    import json.decoder\n    print(json.decoder)\n    print(decoder)\n\n"
        "train()\n",
        [("decoder", 4)],
    ),
    "a decorator runs where the function is defined": (
        "@functools.lru_cache\ndef train():\n    return 1\n\ntrain()\n",
        [("functools", 1)],
    ),
    "a parameter's default and a nested function's free name": (
        "def train(lr=0.1):\n    def step():\n        return lr * scale\n    return step()\n\n"
        "train(**{'lr': 0.5})\n",
        [("scale", 3)],
    ),
}


def _run(tmp_path, source: str) -> tuple[str, int] | None:
    """(name, line) of the NameError `python FILE` raises, None when it exits 0."""
    path = tmp_path / "train.py"
    path.write_text(source)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    name = re.search(r"NameError: name '(\w+)' is not defined", proc.stderr)
    line = re.findall(rf'File "{re.escape(str(path))}", line (\d+)', proc.stderr)
    assert name and line, proc.stderr
    return name[1], int(line[-1])


@pytest.mark.parametrize("case", list(CASES))
def test_the_reader_flags_what_python_raises_on(case, tmp_path):
    source, flagged = CASES[case]
    assert N.unbound(source, "train.py") == flagged
    assert _run(tmp_path, source) == (flagged[0] if flagged else None)


def test_script_globals_are_what_python_gives_a_script(tmp_path):
    path = tmp_path / "g.py"
    path.write_text("print(' '.join(sorted(globals())))\n")
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True)
    assert set(out.stdout.split()) == N.SCRIPT_GLOBALS


def test_what_binds_globals_at_run_time_is_not_judged():
    """exec and globals() can bind any name: no finding rather than a guess."""
    assert N.unbound("def f():\n    exec('x = 1')\n    print(x)\n\nf()\n", "f.py") == []
    assert N.unbound("def f():\n    globals()['x'] = 1\n    print(x)\n", "f.py") == []
    assert N.unbound("def f(:\n", "f.py") == []  # Python itself refuses it


def test_no_finding_on_the_shipped_examples():
    files = sorted((ROOT / "examples").rglob("*.py"))
    assert files
    for path in files:
        assert N.unbound(path.read_text(), path.name) == [], path
