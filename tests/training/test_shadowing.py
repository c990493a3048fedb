"""A file of the user's code named like a module the pod's start-up imports (`random.py`,
`queue.py`, ...) stops the launcher and the wrapper in one line, exit 2 (config_error), not
with a traceback classified as the user's bug (trainforge/training/shadowing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainforge import report
from trainforge.training import exits, shadowing
from trainforge.training.ledger import LEDGER_DIR, RUN_FILE, RunLedger

ROOT = Path(__file__).resolve().parents[2]

# a script that needs nothing but the standard library: `tempfile` imports `random`
SCRIPT = "import tempfile\nimport utils\nprint('ran', utils.X, tempfile.gettempdir() != '')\n"


def test_the_pinned_names_are_what_the_start_up_imports():
    """Derived again in a child (`import torch` and the launcher, a finder recording every
    top-level name asked for): a new Python or torch that changes it fails here."""
    derived = shadowing.derive()
    assert derived == shadowing.STARTUP_MODULES, (
        "trainforge/training/shadowing.py STARTUP_MODULES is stale: "
        f"new {sorted(derived - shadowing.STARTUP_MODULES)}, "
        f"gone {sorted(shadowing.STARTUP_MODULES - derived)}; "
        "`python -m trainforge.training.shadowing` prints the set"
    )


def test_the_names_are_the_ones_that_break_a_run_and_not_a_users_own():
    for name in ("random", "queue", "typing", "logging", "copy", "inspect", "types", "numbers"):
        assert name in shadowing.STARTUP_MODULES, name
    assert "torch" in shadowing.STARTUP_MODULES
    assert "cuda" in shadowing.STARTUP_MODULES  # torch tries `cuda.bindings` when imported
    for name in ("utils", "model", "data", "train", "config", "dataset", "os", "sys", "io"):
        assert name not in shadowing.STARTUP_MODULES, name


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("random.py", "random"),
        ("queue/__init__.py", "queue"),
        ("pkg/random.py", None),  # inside a package: pkg.random, shadows nothing
        ("random/x.py", None),  # a folder without __init__.py: a namespace portion
        ("random.txt", None),
    ],
)
def test_module_of(path, module):
    assert shadowing.module_of(path) == module


def test_shadowing_keeps_the_order_given():
    assert shadowing.shadowing(["utils.py", "queue.py", "model.py", "random.py"]) == [
        ("queue.py", "queue"),
        ("random.py", "random"),
    ]


def _code(tmp_path: Path, *files: str) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(SCRIPT)
    (code / "utils.py").write_text("X = 1\n")
    for name in files:
        path = code / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def helper():\n    return 4\n")
    return code


def _run(code: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """As the pod runs it: the code is the working directory and first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env.update(PYTHONPATH=f"{code}{os.pathsep}{ROOT}", RANK="0", OMP_NUM_THREADS="1")
    env.update(extra)
    return subprocess.run(
        [sys.executable, *argv], cwd=code, env=env, capture_output=True, text=True, timeout=120
    )


# the pod's launcher in front of a program (`-m MODULE ...`), one process on one node
LAUNCHER = ("-m", "trainforge.training.launch", "--standalone", "--nnodes=1", "--nproc-per-node=1")


def _one_exit_line(
    proc: subprocess.CompletedProcess[str], shadow: str, module: str, rank: str = " (rank 0)"
) -> None:
    assert proc.returncode == exits.CONFIG_ERROR.code, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"trainforge exit: config_error code=2{rank}: "), lines[0]
    assert f"{shadow} shadows the module {module!r}" in lines[0]
    assert f"rename it, e.g. my_{module}.py" in lines[0]
    assert "permanent: the job stops" in lines[0]


def test_the_wrapper_refuses_a_shadowing_file_in_one_line(tmp_path):
    """Before: the script's `import tempfile` found code/random.py, the traceback ended in
    `cannot import name 'Random'`, and the exit was user_error (1)."""
    code = _code(tmp_path, "random.py")
    proc = _run(code, "-m", "trainforge.training.usercode", str(code / "train.py"))
    _one_exit_line(proc, str(code / "random.py"), "random")


def test_the_wrapper_refuses_a_package_beside_a_script_in_a_subfolder(tmp_path):
    """The script's folder is sys.path[0] when it runs, even when it is not on PYTHONPATH."""
    code = _code(tmp_path)
    sub = code / "jobs"
    sub.mkdir()
    (sub / "train.py").write_text(SCRIPT.replace("import utils\n", "").replace(" utils.X,", ""))
    (sub / "queue").mkdir()
    (sub / "queue" / "__init__.py").write_text("")
    proc = _run(code, "-m", "trainforge.training.usercode", str(sub / "train.py"))
    _one_exit_line(proc, str(sub / "queue" / "__init__.py"), "queue")


def test_the_launcher_refuses_it_before_torchrun(tmp_path):
    """Before: the launcher's own `import tempfile` failed on code/random.py (exit 1, a
    traceback in trainforge/training/launch.py)."""
    code = _code(tmp_path, "random.py")
    proc = _run(code, *LAUNCHER, "-m", "trainforge.training.usercode", str(code / "train.py"))
    _one_exit_line(proc, str(code / "random.py"), "random", rank="")  # RANK: the pod's index


def _report(tmp_path: Path, ckpt: Path, capsys: pytest.CaptureFixture[str]) -> str:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    capsys.readouterr()
    assert report.main([str(run_dir), "--checkpoint-dir", str(ckpt)]) == 0
    return capsys.readouterr().out


def test_the_wrappers_refusal_is_an_attempt_in_the_run_ledger(tmp_path, capsys):
    """Before: the refusal wrote no run.json, so `trainforge report` had nothing to report
    (exit 2) and a job's earlier attempts showed no trace of this one."""
    code = _code(tmp_path, "random.py")
    ckpt = tmp_path / "ckpt"
    proc = _run(
        code,
        "-m",
        "trainforge.training.usercode",
        str(code / "train.py"),
        TRAINFORGE_CHECKPOINT_DIR=str(ckpt),
    )
    _one_exit_line(proc, str(code / "random.py"), "random")  # still the only line
    detail = shadowing.refusal(str(code / "random.py"), "random")
    text = _report(tmp_path, ckpt, capsys)
    assert f"attempts: 1 (run ledger; the last ended with config_error (rank 0): {detail})" in text


def test_the_launchers_refusal_is_recorded_in_its_checkpoint_dir(tmp_path, capsys):
    """The runtime's --checkpoint-dir on the launcher's command line names the ledger; the
    launcher is no rank, so the cause names none."""
    code = _code(tmp_path, "random.py")
    ckpt = tmp_path / "ckpt"
    proc = _run(code, *LAUNCHER, "-m", "trainforge.training", "--checkpoint-dir", str(ckpt))
    _one_exit_line(proc, str(code / "random.py"), "random", rank="")
    detail = shadowing.refusal(str(code / "random.py"), "random")
    text = _report(tmp_path, ckpt, capsys)
    assert f"attempts: 1 (run ledger; the last ended with config_error: {detail})" in text
    # the report line docs/jobs.md quotes (its path a pod's, its end cut short) is this one
    docs = " ".join((ROOT / "docs" / "jobs.md").read_text(encoding="utf-8").split())
    head = "attempts: 1 (run ledger; the last ended with config_error: /workspace/random.py "
    assert f"`{head}shadows the module 'random', ...)`" in docs
    assert head.replace("/workspace", str(code)) + "shadows the module 'random', " in text


def test_only_rank_0_records_the_refusal(tmp_path):
    """Every rank refuses the same files; the others write nothing (no second attempt, no
    record in a folder of an attempt rank 0 has not registered yet)."""
    code = _code(tmp_path, "random.py")
    ckpt = tmp_path / "ckpt"
    proc = _run(
        code,
        "-m",
        "trainforge.training.usercode",
        str(code / "train.py"),
        TRAINFORGE_CHECKPOINT_DIR=str(ckpt),
        RANK="1",
    )
    _one_exit_line(proc, str(code / "random.py"), "random", rank=" (rank 1)")
    assert not ckpt.exists()


def test_a_ledger_that_cannot_be_written_leaves_the_refusal_as_it_was(tmp_path):
    """Bookkeeping never changes the exit: the same line and code, and one line that says
    the ledger was not written."""
    code = _code(tmp_path, "random.py")
    ckpt = tmp_path / "not-a-folder"
    ckpt.write_text("")
    proc = _run(
        code,
        "-m",
        "trainforge.training.usercode",
        str(code / "train.py"),
        TRAINFORGE_CHECKPOINT_DIR=str(ckpt),
    )
    assert proc.returncode == exits.CONFIG_ERROR.code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == shadowing.exit_line(str(code / "random.py"), "random", rank=0)
    assert len(lines) == 2 and lines[1].startswith("trainforge: ledger: cannot write"), lines


def test_the_next_attempt_keeps_the_refusals_cause(tmp_path, monkeypatch):
    """The refused attempt's end is written into run.json with it: an attempt after it (the
    file renamed, the job run again) reads it there, as the refusal's own line said it."""
    from trainforge.training import ledger as ledger_mod

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    detail = shadowing.refusal("/workspace/random.py", "random")
    ledger_mod.record_refusal(str(tmp_path), exits.CONFIG_ERROR, detail, rank=0, log=print)
    after = RunLedger(tmp_path, rank=0, world_size=4, log=print)
    assert after.begin_attempt() == 1
    assert after.attempts[0].exit == {
        "reason": "config_error",
        "code": exits.CONFIG_ERROR.code,
        "rank": 0,
        "step": None,
        "detail": detail,
    }
    assert (tmp_path / LEDGER_DIR / RUN_FILE).is_file()


def test_the_line_jobs_md_quotes_is_the_launchers(monkeypatch):
    """The line as a pod prints it: a PyTorchJob's under ExitCode, the default, whose emitter
    tells the pod what its controller does (TRAINFORGE_ON_EXIT)."""
    from trainforge.core import failures  # noqa: PLC0415
    from trainforge.training.contract import ON_EXIT  # noqa: PLC0415

    told = [failures.pytorchjob_outcome("ExitCode", code) for code in (2, failures.KILLED)]
    monkeypatch.setenv(ON_EXIT, failures.on_exit_value(*told))
    text = (ROOT / "docs" / "jobs.md").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    quoted = [line for line in lines if line.startswith("trainforge exit: config_")]
    assert shadowing.exit_line("/workspace/random.py", "random") in quoted


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("import statistics\nprint(statistics.mean([1, 2]))\n", "AttributeError"),
        ("from statistics import mean\n", "ImportError"),
    ],
)
def test_a_standard_module_shadowed_after_the_start_up_is_a_config_error(tmp_path, line, error):
    """statistics.py shadows nothing the start-up imports, so it runs; when the code then
    meets the file in the real module's place, the wrapper says so in one line, exit 2.
    Before: a traceback and user_error (1), naming neither the file nor the fix."""
    code = _code(tmp_path, "statistics.py")
    (code / "train.py").write_text(line)
    proc = _run(code, "-m", "trainforge.training.usercode", str(code / "train.py"))
    assert proc.returncode == exits.CONFIG_ERROR.code, proc.stderr
    assert "Traceback" not in proc.stderr and error not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        exits.exit_line(
            exits.CONFIG_ERROR,
            rank=0,
            step=None,
            detail=f"{code / 'statistics.py'} shadows the module 'statistics', which your code "
            "or a library it uses expected (your code's directory is first on sys.path, so its "
            "import found your file instead); rename it, e.g. my_statistics.py, and your "
            "imports of it",
        )
    ]


def test_an_unrelated_error_beside_a_shadowing_file_stays_the_codes(tmp_path):
    """The diagnosis needs the error to be about the shadowed module itself."""
    code = _code(tmp_path, "statistics.py")
    (code / "train.py").write_text("import statistics\nraise AttributeError('mine')\n")
    proc = _run(code, "-m", "trainforge.training.usercode", str(code / "train.py"))
    assert proc.returncode == exits.USER_ERROR.code, proc.stderr
    assert "trainforge exit: user_error code=1 (rank 0): AttributeError: mine" in proc.stderr


def test_files_that_shadow_nothing_run(tmp_path):
    code = _code(tmp_path, "model.py", "data.py", "pkg/random.py")
    proc = _run(code, "-m", "trainforge.training.usercode", str(code / "train.py"))
    assert proc.returncode == 0, proc.stderr
    assert "ran 1 True" in proc.stdout
