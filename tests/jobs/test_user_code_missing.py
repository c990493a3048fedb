"""A file or a package your code lacks: the exit line says what the process knows and the
traceback does not (review, wave 20, the reviewer's scripts in tests/fixtures/mle_mycode).

* `--data /fsx/datasets/nothere.bin` under run-local opens runs/JOB/fsx/datasets/nothere.bin:
  the line names the pod path it stands for and the `--volume CLAIM=DIR` that provides it
  (it said only "fix the error in the traceback");
* `import lightning_fancy_pkg`: the line names the module and where the pods get packages
  (docs/images.md, "Extend it with your own dependencies");
* the traceback starts at your script, as `python SCRIPT` shows it, without the wrapper's
  usercode.py and runpy frames.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MLE = ROOT / "tests" / "fixtures" / "mle_mycode"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("own_code_missing")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, root / name)
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    job = {"team": "research", "pool": "training-workloads"}
    stack["config"]["trainforge:jobs"] = [
        {"name": "my-nodata", **job, "entrypoint": {
            "script": "mycode/nodata.py", "args": ["--data", "/fsx/datasets/nothere.bin"]}},
        {"name": "my-missing", **job, "entrypoint": {"script": "mycode/missing_import.py"}},
        {"name": "my-literal", **job, "entrypoint": {"script": "literal/literal.py"}},
    ]  # fmt: skip
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    shutil.copytree(MLE, root / "mycode")
    (root / "literal").mkdir()
    (root / "literal" / "literal.py").write_text('open("/fsx/datasets/literal.bin").read()\n')
    return root


def _exit_line(stderr: str) -> str:
    (line,) = [x for x in stderr.splitlines() if x.startswith("trainforge exit:")]
    return line


def _traceback_starts_at(stderr: str, script: str) -> None:
    """The traceback's first frame is the script's own, as `python SCRIPT` prints it."""
    head = stderr.split("Traceback (most recent call last):\n", 1)[1].splitlines()[0]
    assert head.startswith("  File ") and f'{script}", line ' in head, head
    assert head.endswith(", in <module>"), head
    assert "usercode.py" not in stderr and "runpy" not in stderr, stderr[-3000:]


def test_a_missing_file_in_a_volume_stand_in_names_the_pod_path_and_the_volume_flag(
    project, trainforge_here
):
    proc = trainforge_here(project, "run-local", "--stack", "dev", "my-nodata")
    assert proc.returncode == 1, proc.stderr[-3000:]
    local = project / "runs" / "my-nodata" / "fsx" / "datasets" / "nothere.bin"
    line = _exit_line(proc.stderr)
    assert line.startswith("trainforge exit: user_error code=1 (rank 0): FileNotFoundError")
    assert (
        f"action: {local.resolve()} is run-local's local stand-in for the pod path "
        "/fsx/datasets/nothere.bin, and it is not there: put the file there; or give run-local "
        "the directory that holds it: --volume fsx-research=DIR]"
    ) in line, line
    _traceback_starts_at(proc.stderr, "nodata.py")


def test_a_missing_module_names_it_and_where_the_pods_get_packages(project, trainforge_here):
    proc = trainforge_here(project, "run-local", "--stack", "dev", "my-missing")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = _exit_line(proc.stderr)
    assert line.startswith("trainforge exit: user_error code=1 (rank 0): ModuleNotFoundError")
    assert "action: module 'lightning_fancy_pkg' is not installed where your code ran" in line
    assert 'docs/images.md, "Extend it with your own dependencies"' in line
    _traceback_starts_at(proc.stderr, "missing_import.py")
    heading = "## Extend it with your own dependencies"
    assert heading in (ROOT / "docs" / "images.md").read_text()  # the section the line names


def test_a_pod_path_written_in_the_code_names_its_stand_in_before_and_at_the_exit(
    project, trainforge_here
):
    """literal.py opens /fsx/datasets/literal.bin as written: run-local rewrites arguments
    and env values only, so the code met no stand-in and the exit line said only "fix the
    error in the traceback". Now the run says so before it starts, and the exit line names
    the volume and the stand-in (wave 21, importkeep)."""
    proc = trainforge_here(project, "run-local", "--stack", "dev", "my-literal")
    assert proc.returncode == 1, proc.stderr[-3000:]
    local = (project / "runs" / "my-literal" / "fsx").resolve() / "datasets" / "literal.bin"
    assert (
        "run-local: your code names pod paths that do not exist here: literal.py:1 uses "
        f"/fsx/datasets/literal.bin (its stand-in here: {local}); run-local gives a volume's "
        "stand-in to the command's arguments and env values only"
    ) in proc.stderr, proc.stderr[-3000:]
    assert (
        "action: /fsx/datasets/literal.bin is on the volume the pod mounts at /fsx; run-local "
        f"gives its stand-in ({local}) to the command's arguments and env values only, not to "
        "a path written in the code: pass the path as an argument or an env value]"
    ) in _exit_line(proc.stderr)
