"""The built wheel works where it is installed: `pip wheel .`, install the wheel into a scratch
venv (no source tree on the path), run `trainforge calibrate` from there.

Why: a data file missing from the wheel, or a command that writes into the installed package
(read-only for many users, replaced by the next upgrade), passes every in-tree test. This test
builds with the shared venv's setuptools (no build isolation: no download) and installs with
`--no-deps --no-index`; the calibrate command needs the standard library and pydantic (the
job model it parses a job with), which the scratch venv borrows from the shared one by a .pth
line (a path entry, so the shared venv's editable trainforge is not activated: only the wheel's
trainforge can be imported).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "jobs" / "data" / "summary-cpu-gpt.json"
SHIPPED = "trainforge/jobs/estimate/calibration.json"


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    assert done.returncode == 0, f"{cmd}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_ships_calibration_and_calibrate_writes_a_user_path(tmp_path):
    # built from a copy: an in-tree build/ left by an earlier build could hide a missing file
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "trainforge", source / "trainforge", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", ".", "-w", str(wheels), "--no-deps"]
        + ["--no-build-isolation", "--quiet"],
        cwd=source,
    )
    (wheel,) = wheels.glob("trainforge-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert SHIPPED in z.namelist(), "the wheel lacks the shipped calibration file"
        # every data file of the package (not code) is shipped: price facts, calibration, ...
        data = {
            f.relative_to(ROOT).as_posix()
            for f in (ROOT / "trainforge").rglob("*")
            if f.is_file() and f.suffix not in (".py", ".pyc")
        }
        assert data - set(z.namelist()) == set(), "data files missing from the wheel"

    # no PYTHONPATH: with the source tree on it, pip would find trainforge "already installed"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        + ["--no-deps", "--no-index", str(wheel)],
        env=env,
    )
    import pydantic  # noqa: PLC0415 - where the shared venv keeps the base dependency

    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "_shared_deps.pth").write_text(str(pathlib.Path(pydantic.__file__).parents[1]) + "\n")

    # a GPU run (the recorded CPU summary relabelled, as tests/jobs/test_calibrate.py does)
    run = tmp_path / "run"
    run.mkdir()
    summary = json.loads(RECORDED.read_text())
    summary.update(device="cuda", device_name="NVIDIA A10G", precision="bfloat16")
    (run / "summary.json").write_text(json.dumps(summary))

    config = tmp_path / "config"
    env["XDG_CONFIG_HOME"] = str(config)
    outside = tmp_path / "elsewhere"  # not the source tree: only the wheel can be imported
    outside.mkdir()
    done = _run([str(venv / "bin" / "trainforge"), "calibrate", str(run)], cwd=outside, env=env)
    written = config / "trainforge" / "calibration.json"
    assert f"wrote {written}" in done.stdout
    assert json.loads(written.read_text())["gpus"]["A10G"]["run"] == "cpu-gpt-small"

    # the installed package is untouched, and the planner there reads shipped + user entries
    probe = (
        "import json; from trainforge.jobs.estimate import facts\n"
        "print(json.dumps({'shipped': str(facts.CALIBRATION_FILE),"
        " 'content': facts.CALIBRATION_FILE.read_text(),"
        " 'mfu': facts.mfu_for('A10G').basis}))"
    )
    seen = json.loads(_run([str(python), "-c", probe], cwd=outside, env=env).stdout)
    assert str(venv) in seen["shipped"], "imported from somewhere other than the wheel"
    assert json.loads(seen["content"]) == json.loads((ROOT / SHIPPED).read_text())
    assert seen["mfu"] == "calibrated"
