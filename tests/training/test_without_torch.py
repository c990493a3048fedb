"""`python -m trainforge.training` by an interpreter without torch (a bare `python`, not the
venv's) stops in one line naming torch and `make venv`, as README.md says every documented
command does; it was the loop's `import torch` ModuleNotFoundError traceback (exit 1)."""

from __future__ import annotations

import subprocess
import sys

from runtime_helpers import ROOT, env

# the runtime as `python -m trainforge.training` starts it, in an interpreter where torch
# cannot be imported (a None entry in sys.modules makes `import torch` and find_spec fail)
WITHOUT_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; "
    "runpy.run_module('trainforge.training', run_name='__main__', alter_sys=True)"
)


def test_without_torch_the_runtime_stops_in_one_line_naming_it():
    from trainforge.training import exits, versions

    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, "--steps", "2"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == exits.CONFIG_ERROR.code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("trainforge exit: config_error code=2: torch is not installed for ")
    assert f"the runtime needs torch {versions.supported_range()}" in line
    assert "run `make venv` and use .venv/bin/python (or pip install 'trainforge[train]')" in line


def test_the_extra_the_line_names_installs_torch():
    """The runtime cannot import trainforge.cli (it is shipped into pods alone): its line names
    the extra the dispatcher names for torch, and that extra pins torch."""
    import tomllib

    from trainforge.cli import EXTRA_OF_MODULE

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert EXTRA_OF_MODULE["torch"] == "train"
    assert any(p.split("==")[0] == "torch" for p in extras["train"])
