"""trainforge's processes end without the interpreter's last collections over their heap.

Why: a process that ran a stack's program or imported torch spent 0.5-3 CPU s after its last
line in CPython's final garbage collections (trainforge/core/process.py). Each entry point
(`python -m trainforge`, the `trainforge` console script, a training rank, a rank of your own
code, their launcher) freezes what is alive before it exits, so those collections skip it; a
`main()` called in another program's process (these tests, a notebook) leaves that process's
collector alone.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import cli_env

# Runs MODULE as `python -m MODULE ARGS` would, and prints, from an atexit handler (after the
# entry point returned its code, before the interpreter's final collections), how many objects
# the collector's permanent generation holds: 0 unless something froze the heap.
PROBE = """
import atexit, gc, runpy, sys
atexit.register(lambda: print("frozen:", gc.get_freeze_count(), flush=True))
mod, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
runpy.run_module(mod, run_name="__main__", alter_sys=True)
"""


def _frozen_at_exit(*argv: str, code: str = PROBE) -> tuple[int, int]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("frozen:")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.returncode, int(lines[-1].split()[1])


@pytest.mark.parametrize(
    "argv",
    [
        ("trainforge", "--help"),
        ("trainforge", "no-such-command"),  # an error's exit code goes through it too
        ("trainforge.training", "--self-check"),
        ("trainforge.training.usercode", "-m", "platform"),  # a user's code, run as a rank
        # torchrun with /bin/true as its one worker: the launcher's own exit
        (
            "trainforge.training.launch",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "1",
            "--no-python",
            "true",
        ),  # fmt: skip
    ],
    ids=["trainforge", "trainforge-error", "training", "usercode", "launch"],
)
def test_each_entry_point_freezes_its_heap_and_keeps_its_exit_code(argv):
    code, frozen = _frozen_at_exit(*argv)
    assert frozen > 0
    assert code == (2 if "no-such-command" in argv else 0)


def test_the_console_script_is_the_freezing_entry():
    """pyproject's `trainforge` script calls what `python -m trainforge` calls."""
    import tomllib

    from tests.conftest import ROOT

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["trainforge"].partition(":")
    code = f"""
import atexit, gc, importlib, sys
atexit.register(lambda: print("frozen:", gc.get_freeze_count(), flush=True))
sys.exit(getattr(importlib.import_module({module!r}), {func!r})())
"""
    code_, frozen = _frozen_at_exit("--help", code=code)
    assert code_ == 0 and frozen > 0


def test_main_called_in_process_leaves_the_callers_collector_alone():
    """The library's `main(argv)` (what the tests and other programs call) freezes nothing."""
    code = """
import atexit, gc, sys
atexit.register(lambda: print("frozen:", gc.get_freeze_count(), flush=True))
from trainforge.cli import main
from trainforge.training.__main__ import main as training_main
assert main(["--help"]) == 0 and training_main(["--self-check"]) == 0
"""
    assert _frozen_at_exit(code=code) == (0, 0)
