"""`trainforge run-local SCRIPT | -m MODULE | pkg.mod:func` with no stack file.

The same launcher (torchrun through trainforge.training.launch), the contract variables, the
shipped code copy, the run ledger and `trainforge report` as a job's own code, without
Pulumi.<stack>.yaml: `trainforge run-local user_code/train.py --workers 2` runs a plain DDP
script (examples/plain/train.py, no trainforge import) on 2 ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainforge.local import split_adhoc_argv

ROOT = Path(__file__).resolve().parents[2]

RANKS = """\
def train():
    import os
    import pathlib

    out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
    (out / f"rank_{os.environ['RANK']}").write_text(os.environ["WORLD_SIZE"])


if __name__ == "__main__":
    train()
"""


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "user_code").mkdir()
    shutil.copy(ROOT / "examples" / "plain" / "train.py", tmp_path / "user_code" / "train.py")
    (tmp_path / "ranks.py").write_text(RANKS)
    return tmp_path


def _run(project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "trainforge", "run-local", *argv],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The plain example's 2-rank run (`-- --steps 4`) in a project of its own, run once for
    the tests that read it (the run, and a second run in a copy of the folder it left)."""
    root = tmp_path_factory.mktemp("plain")
    (root / "user_code").mkdir()
    shutil.copy(ROOT / "examples" / "plain" / "train.py", root / "user_code" / "train.py")
    assert not list(root.glob("Pulumi*.yaml"))
    proc = _run(root, "user_code/train.py", "--workers", "2", "--", "--steps", "4")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, proc


def test_a_plain_ddp_script_runs_on_2_ranks_with_no_stack(plain_run):
    project, proc = plain_run
    assert "run-local: user_code/train.py: 2 process(es) (world 2)" in proc.stdout
    assert "done: 4 steps" in proc.stdout
    run = project / "runs" / "user-code-train"
    # the contract: checkpoints and metrics where TRAINFORGE_* said, the code a read-only copy
    assert (run / "checkpoints" / "step_4.pt").is_file()
    assert (run / "code" / "train.py").is_file()
    assert not (run / "code" / "train.py").stat().st_mode & 0o222  # read-only, as in the pod
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    # the run ledger (written by the user-code runner) and the report read from it
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=str(ROOT))
    rep = subprocess.run(
        [sys.executable, "-m", "trainforge", "report", str(run)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr
    assert "logged up to step 4 (finished, per the run ledger)" in rep.stdout
    assert "attempts: 1" in rep.stdout


def test_the_plain_example_run_again_resumes_at_its_last_step_and_ends_cleanly(plain_run, tmp_path):
    # a second run in the same folder (as a user re-runs the docs' command) finds step_4.pt and
    # has nothing left to train: it said so with an UnboundLocalError traceback for `loss`.
    # The folder the first run left, copied (the other test reads the first run's own)
    project = tmp_path / "project"
    shutil.copytree(plain_run[0], project, symlinks=True)
    again = _run(project, "user_code/train.py", "--workers", "2", "--", "--steps", "4")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resumed from step_4.pt at step 4" in again.stdout
    assert "done: 4 steps, nothing left to train" in again.stdout
    assert "Traceback" not in again.stdout + again.stderr


@pytest.mark.parametrize("target", [["ranks.py"], ["-m", "ranks"], ["ranks:train"]])
def test_script_module_and_function_get_the_world_they_ask_for(project, target):
    proc = _run(project, *target, "--workers", "3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = next(p for p in (project / "runs").iterdir() if p.is_dir())
    assert {p.name: p.read_text() for p in out.glob("rank_*")} == {
        f"rank_{r}": "3" for r in range(3)
    }


def test_a_write_in_the_working_directory_fails_as_in_the_pods(project):
    """The working directory is the shipped code, in the pods a read-only ConfigMap mount at
    /workspace: `torch.save(state, "ckpt.pt")` there fails and the job stops (exit 1). Locally
    the copy is only chmod read-only, which root (this dev VM, most CI containers) writes
    through: run-local exited 0 and said nothing. Now it names the write and exits 1; as
    another user the write itself fails here, as in the pods."""
    (project / "user_code" / "save_here.py").write_text(
        "import pathlib\npathlib.Path('ckpt.pt').write_bytes(b'state')\n"
    )
    r = _run(project, "user_code/save_here.py")
    assert r.returncode == 1, r.stdout + r.stderr
    if os.geteuid() == 0:
        assert "run-local: your code wrote in its working directory, the shipped copy (ckpt.pt " \
            "(new)); in the pods that is /workspace, a read-only ConfigMap mount" in r.stderr, r.stderr  # fmt: skip
        assert "it exited 0 here only because this machine let it write" in r.stderr
    else:
        assert "PermissionError" in r.stderr, r.stderr
    # writing where the contract says is fine, and nothing is said
    r = _run(project, "ranks.py")
    assert r.returncode == 0 and "working directory" not in r.stderr, r.stderr


def test_code_writes_names_new_changed_and_removed_files(tmp_path):
    from trainforge.jobs.local import code_snapshot, code_writes

    (tmp_path / "a.py").write_text("a")
    (tmp_path / "b.py").write_text("b")
    before = code_snapshot(tmp_path)
    (tmp_path / "a.py").write_text("A")
    (tmp_path / "b.py").unlink()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.pt").write_bytes(b"x")
    (tmp_path / "__pycache__").mkdir()  # Python's bytecode cache: its writes fail silently
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    assert code_writes(tmp_path, before) == [
        "out/model.pt (new)",
        "a.py (changed)",
        "b.py (removed)",
    ]
    assert code_writes(tmp_path, code_snapshot(tmp_path)) == []


def test_a_module_this_environment_has_is_named_as_the_images_to_carry(project):
    """A newcomer's script imports a package this machine's venv has (here PyYAML, which
    trainforge itself needs) and the job's image may not: run-local passed it without a word,
    and the pod stops with ModuleNotFoundError. run-local now names the modules it took from
    this environment (not the standard library, the shipped files, torch or trainforge)."""
    from trainforge.jobs.local import imported_from_here

    (project / "user_code" / "uses_yaml.py").write_text(
        "import os, json\nimport yaml\nfrom yaml import safe_load\nimport torch\n"
        "from trainforge.training import job_env\nimport helper\nfrom . import sibling\n"
        "import no_such_module_anywhere\nimport __main__\n"
    )
    (project / "user_code" / "helper.py").write_text("X = 1\n")
    files = tuple((p.name, p.read_text()) for p in sorted((project / "user_code").glob("*.py")))
    # no_such_module...: fails here too
    assert imported_from_here(files) == (("yaml", ("uses_yaml.py",)),)
    # a script that imports only sys, shipped beside one that imports yaml (the review's
    # mine/exit300.py and mine/prog.py): the note named no file, as if the script imported it
    sibling = (("exit300.py", "import sys\nsys.exit(300)\n"), ("prog.py", "import yaml\n"))
    assert imported_from_here(sibling) == (("yaml", ("prog.py",)),)
    (project / "user_code" / "uses_yaml.py").write_text("import yaml\n")
    r = _run(project, "user_code/uses_yaml.py")
    assert r.returncode == 0, r.stderr
    assert "run-local: your code imports yaml (imported by uses_yaml.py) from this machine's " \
        "Python environment; in the pods they come from the job's image, which must carry " \
        "them" in r.stderr  # fmt: skip
    (project / "user_code" / "uses_yaml.py").unlink()  # ranks.py ships the whole project
    r = _run(project, "ranks.py")  # the standard library only: nothing to say
    assert "from this machine's Python environment" not in r.stderr


def test_bad_target_is_one_line_naming_it(project):
    proc = _run(project, "nope.py", "--workers", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "trainforge run-local: error: SCRIPT: got 'nope.py'; no such file; expected a Python "
        "file, -m MODULE, or pkg.module:function"
    )
    proc = _run(project, "ranks.py", "--workers", "0")
    assert proc.returncode == 2 and "--workers: got 0" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_file_that_shadows_a_start_up_module_is_one_line_before_anything_runs(project):
    """Before: run-local started torchrun, whose launcher's `import tempfile` found
    user_code/random.py: a traceback, then "exit 1 (user_error)"."""
    (project / "user_code" / "random.py").write_text("def helper():\n    return 4\n")
    proc = _run(project, "user_code/train.py", "--workers", "2")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "trainforge run-local: error: run-local.entrypoint.script: got 'user_code/random.py'; "
        "this file shadows the module 'random', which Python, torch or the launcher import "
        "before your code runs (your code's directory is first on sys.path, so they would "
        "import your file instead); rename it, e.g. my_random.py, and your imports of it"
    )
    assert proc.stdout == "" and not (project / "runs" / "user-code-train" / "code").exists()


def test_argv_split():
    assert split_adhoc_argv(["t.py", "--workers", "2", "--", "--lr", "1"]) == (
        "t.py",
        False,
        ["--workers", "2"],
        ["--lr", "1"],
    )
    assert split_adhoc_argv(["--workers=2", "-m", "pkg.train", "--steps", "3"]) == (
        "pkg.train",
        True,
        ["--workers=2"],
        ["--steps", "3"],
    )
    # the bundled runtime's flags and --stack are not a script
    assert split_adhoc_argv(["--workers", "2", "--model", "mlp"]) is None
    assert split_adhoc_argv(["--stack", "dev", "job"]) is None


DOWNLOADS = """\
from transformers import AutoModel

MODEL = "gpt2"


def main():
    return AutoModel.from_pretrained(MODEL)
"""


def test_a_download_is_said_before_a_script_runs_with_no_stack(project, monkeypatch, capsys):
    """`run-local SCRIPT` (no stack) reads the script with the plan's reader (jobs/fetches.py)
    and says each download fails in a team namespace, whose platform policies
    (platform/teams.py) deny internet egress; before, it said nothing. Code without one: no
    note (every file shipped with the script is read, as the plan reads the pod's)."""
    from trainforge import local

    (project / "ft").mkdir()
    (project / "ft" / "ft.py").write_text(DOWNLOADS)
    monkeypatch.chdir(project)
    assert local.main(["ft/ft.py", "--dry-run"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "run-local: ft/ft.py: note: ft/ft.py:7: "
        "transformers.AutoModel.from_pretrained('gpt2') downloads from the Hugging Face Hub "
        "(huggingface.co); it may work here, but on the cluster a team namespace's "
        "NetworkPolicies block it (no stack key opens internet egress), so the call fails "
        "there (TRAINFORGE_INTERNET_FETCH; docs/teams.md, Network)"
    ]
    assert local.main(["user_code/train.py", "--dry-run"]) == 0
    assert " note: " not in capsys.readouterr().err


def test_the_python_api_says_the_same_download(project, monkeypatch, capsys):
    """`trainforge.jobs.local.run_local(job)` says it too, from the same reader, before it
    launches (the launch itself is not this test's: replaced by one that records)."""
    from trainforge.jobs import local as jl

    (project / "ft").mkdir()
    (project / "ft" / "ft.py").write_text(DOWNLOADS)
    job, root = jl.adhoc_job(str(project / "ft" / "ft.py"), project_dir=project)
    launched = []
    monkeypatch.setattr(jl, "launch", lambda cmd, *a, **kw: launched.append(cmd) or 0)
    assert jl.run_local(job, root) == 0 and launched
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith("run-local: ft-ft: note: ft/ft.py:7: transformers.AutoModel")
    assert "a team namespace's NetworkPolicies block it" in note
