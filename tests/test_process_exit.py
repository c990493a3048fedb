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

from tests.conftest import ROOT, cli_env

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


# torchrun with /bin/true as its one worker: the launcher's own exit
LAUNCH_TRUE = (
    "trainforge.training.launch",
    "--standalone",
    "--nnodes",
    "1",
    "--nproc-per-node",
    "1",
    "--no-python",
    "true",
)


@pytest.mark.parametrize(
    "argv",
    [
        ("trainforge", "--help"),
        ("trainforge", "no-such-command"),  # an error's exit code goes through it too
        ("trainforge.training", "--self-check"),
        ("trainforge.training.usercode", "-m", "platform"),  # a user's code, run as a rank
        LAUNCH_TRUE,
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


# Runs MODULE as `python -m MODULE ARGS` would and prints, at exit, how many full collections
# (generation 2) started while torch was imported and nothing was frozen: each walked torch's
# whole heap. The entry point imports torch with the collector off and freezes what the
# imports made (core/process.py, frozen_imports; for your code's rank, its first `import
# torch`: freeze_first_import), so there are none; before, 2 in a rank that stopped at a
# config error, 2 in the launcher and 2 in a user's script that imports torch.
WALKS = """
import atexit, gc, runpy, sys
walks = []
def count(phase, info):
    if phase == "start" and info["generation"] == 2 and "torch" in sys.modules:
        walks.append(gc.get_freeze_count())
gc.callbacks.append(count)
atexit.register(lambda: print("unfrozen:", walks.count(0), "frozen:", len(walks), flush=True))
mod, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
if mod.endswith(".py"):  # a script: as `python SCRIPT` runs it
    sys.path[0] = mod.rpartition("/")[0]
    runpy.run_path(mod, run_name="__main__")
else:
    runpy.run_module(mod, run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        # a rank: torch and the runtime imported, then a config error (exit 2) before a model
        (("trainforge.training", "--model", "mlp", "--dataset-size", "4", "--batch-size", "8"), 2),
        (LAUNCH_TRUE, 0),
        # a rank of your own code: the script's own `import torch`
        (("trainforge.training.usercode", "uses_torch.py"), 0),
        # bench/throughput.py's worker measures the runtime's loop: imported as a rank does
        (
            (
                str(ROOT / "bench" / "throughput.py"),
                "--worker",
                "--device",
                "cpu",
                "--workers",
                "1",
                "--model",
                "mlp",
                "--batch-size",
                "8",
                "--dataset-size",
                "64",
                "--steps",
                "2",
                "--rounds",
                "1",
            ),
            0,
        ),  # fmt: skip
    ],
    ids=["training", "launch", "usercode", "bench-worker"],
)
def test_torch_s_import_is_not_walked_by_the_collector(argv, code, tmp_path):
    (tmp_path / "uses_torch.py").write_text("import torch\nprint(torch.ones(2).sum())\n")
    proc = subprocess.run(
        [sys.executable, "-c", WALKS, *argv],
        env=cli_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("unfrozen:")]
    assert lines and proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert lines[-1][1] == "0", lines[-1]


def test_frozen_imports_changes_nothing_outside_its_own_process():
    """In another program's process (own_process False) the collector stays as it was; in its
    own, it is off inside the block and on again after, with the block's objects frozen."""
    code = """
import gc
from trainforge.core.process import frozen_imports
with frozen_imports(own_process=False):
    assert gc.isenabled()
assert gc.get_freeze_count() == 0
with frozen_imports(own_process=True):
    assert not gc.isenabled()
    kept = [[] for _ in range(1000)]
assert gc.isenabled() and gc.get_freeze_count() >= 1000
gc.disable()
with frozen_imports(own_process=True):  # the caller turned it off: it stays off, unfrozen
    pass
gc.unfreeze()
assert not gc.isenabled() and gc.get_freeze_count() == 0
gc.enable()
print("ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_a_first_import_through_the_hook_is_the_module_as_always():
    """freeze_first_import: the module is found by the same search and carries its own loader
    and spec; a name that is not installed fails as it always does, and the search for the
    next name is unchanged."""
    code = """
import gc, sys
from trainforge.core.process import freeze_first_import
freeze_first_import("no_such_module_here")
try:
    import no_such_module_here
except ModuleNotFoundError as e:
    assert e.name == "no_such_module_here"
else:
    raise AssertionError("imported a missing module")
freeze_first_import("json")
import json
assert "_FrozenLoader" not in repr(json.__loader__), json.__loader__
assert json.__spec__.loader is json.__loader__ and json.__file__.endswith("json/__init__.py")
assert json.loads("[1]") == [1] and gc.get_freeze_count() > 0 and gc.isenabled()
import csv  # the next import: the ordinary search
print("ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr
