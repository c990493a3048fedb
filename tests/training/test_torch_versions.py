"""The runtime states the torch versions it supports and refuses any other before a step.

Why: a team's image with an older torch failed hours into a run (the first async checkpoint)
with an error that read as the user's. The floor is the newest torch API the runtime calls
(versions.py names each and where its release was read).
"""

from __future__ import annotations

import pytest
import torch

from trainforge.training import loop, selfcheck, versions
from trainforge.training.__main__ import main

ARGS = ["--model", "mlp", "--dataset-size", "64", "--batch-size", "8", "--steps", "2"]


@pytest.mark.parametrize(
    "version, ok",
    [("2.4.1", False), ("2.8.0+cu128", False), ("2.9.0", True), ("2.11.0+cu130", True),
     ("2.13.0", True), ("2.14.0", True), ("2.14.1+cu130", True), ("2.10.0a0+git1234", True),
     ("3.0.0", False), ("banana", False),
     (None, False)],
)  # fmt: skip
def test_the_supported_range_is_the_floor_up_to_the_next_major(version, ok) -> None:
    assert (versions.problem(version) is None) is ok
    assert versions.supported_range() == ">= 2.9, < 3.0"


def test_the_pinned_torch_is_supported_and_is_the_tested_one() -> None:
    assert versions.problem(torch.__version__) is None
    assert torch.__version__.split("+")[0] == versions.TESTED


def test_torch_2_4_1_is_refused_before_the_first_step_with_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(torch, "__version__", "2.4.1")

    def no_group(*args, **kwargs):  # the refusal comes before anything is set up
        raise AssertionError("a process group was created")

    monkeypatch.setattr(loop, "init_distributed", no_group)
    code = main([*ARGS, "--output-dir", str(tmp_path / "o")])
    out = capsys.readouterr()
    assert code == 2  # config_error: permanent, the same image fails the same way
    lines = out.err.strip().splitlines()
    assert lines == [
        "trainforge exit: config_error code=2: torch 2.4.1 is not supported: the runtime needs "
        "torch >= 2.9, < 3.0 (tested with 2.13.0); use an image with a supported torch "
        "(docs/images.md) [permanent: the job stops; action: fix the flag, checkpoint or setup "
        "named in this line]"
    ]
    assert "step 1" not in out.out and not (tmp_path / "o").exists()
    # the start-up header says the same version
    assert "torch 2.4.1" in out.out


def test_self_check_reports_the_version_and_the_range(monkeypatch, capsys) -> None:
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    assert selfcheck.main(["--self-check"]) in (0, 1)  # other features decide the rest
    out = capsys.readouterr().out
    assert "torch: 2.11.0+cu130 supported (>= 2.9, < 3.0, tested with 2.13.0)" in out
    monkeypatch.setattr(torch, "__version__", "2.4.1")
    assert selfcheck.main(["--self-check"]) == 1
    out = capsys.readouterr()
    assert "torch: torch 2.4.1 is not supported: the runtime needs torch >= 2.9, < 3.0" in out.out
    assert "self-check: FAILED: torch 2.4.1 is not supported" in out.err


def test_a_torch_2_14_runs_and_its_header_names_it(tmp_path, monkeypatch, capsys) -> None:
    """torch 2.14 (2.14.0 released 2026-09-02) is inside the range: the version gate lets it
    through and the run finishes. The APIs it calls are the 2.13.0 ones here; the 2.14.1
    wheel's differences are in docs/performance.md ("torch 2.14")."""
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    assert main([*ARGS, "--output-dir", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "torch 2.14.1+cu130" in out and (tmp_path / "o" / "summary.json").exists()
