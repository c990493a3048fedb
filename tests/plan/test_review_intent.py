"""The review names intent: an lr-only change to a prod job is a decision, by flag name.

The runtime restores the optimizer's param groups and the LR scheduler's base_lrs from the
checkpoint (training/checkpoint.py), so a replaced job that resumes keeps the old lr: the
plan says so as a decision finding (TF_CKPT_CHANGE_NOT_APPLIED, exit 1) naming `--lr`, and
both the job's change and the raw field diff name `--lr`, not `command[29]`.
"""

from __future__ import annotations

import pathlib

import pytest

from trainforge.plan import cli
from trainforge.plan.diff import argv_diff, field_diff

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB = "vision/PyTorchJob/gpt-350m-fsdp"


def lower_lr(config: dict) -> None:
    config["trainforge:jobs"][0]["lr"] = 1e-4


@pytest.fixture(scope="module")
def base(shipped_plan_out) -> pathlib.Path:
    """The base branch's plan: prod as committed (conftest.py, made once per test run)."""
    return shipped_plan_out("prod")


def test_an_lr_only_change_is_a_decision_naming_lr(base, tmp_path, capsys, project_copy):
    head = project_copy(tmp_path, "head", lower_lr)
    capsys.readouterr()
    md = tmp_path / "pr.md"
    rc = cli.main(
        [
            "--stack",
            "prod",
            "--no-standins",
            "--project-dir",
            str(head),
            "--diff",
            str(base),
            "--diff-md",
            str(md),
            "--report",
            str(tmp_path / "r.txt"),
        ]  # fmt: skip
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    first = out.splitlines()[:40]
    assert first[0].endswith("1 finding(s) need a fix or a decision"), first
    assert f"  [TF_CKPT_CHANGE_NOT_APPLIED] {JOB}" in first
    text = md.read_text()
    assert "[TF_CKPT_CHANGE_NOT_APPLIED]" in text and "--lr 0.001 -> 0.0001 is NOT applied" in text
    assert "checkpoint.resume: never" in text  # its fixes
    assert "flags: `--lr 0.0001` added" in text  # the job's change, by flag
    # the raw field diff names the flag, never a position of the command
    assert 'pytorch.command --lr`: `∅` → `"0.0001"`' in text
    assert "command[" not in text

    # the decision, made: a waiver with its reason makes the plan pass
    def waived(config):
        lower_lr(config)
        config.setdefault("trainforge-policy:waivers", []).append(  # beside the stack's own
            {
                "resource": JOB,
                "rule": "TF_CKPT_CHANGE_NOT_APPLIED",
                "reason": "the lower lr is for the next fresh run; this one keeps 1e-3",
            }
        )

    decided = project_copy(tmp_path, "decided", waived)
    rc = cli.main(
        [
            "--stack",
            "prod",
            "--no-standins",
            "--project-dir",
            str(decided),
            "--diff",
            str(base),
            "--report",
            str(tmp_path / "w.txt"),
        ]  # fmt: skip
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "Waived (2): " in out and "[TF_CKPT_CHANGE_NOT_APPLIED] " in out  # and the stack's own


def test_argv_diff_names_flags_not_positions():
    old = [
        "torchrun",
        "--nnodes=2",
        "-m",
        "trainforge.training",
        "--precision",
        "bf16",
        "--compile",
    ]
    new = [*old[:4], "--lr", "1e-4", *old[4:]]
    assert argv_diff(old, new, "c.command") == [("c.command --lr", None, "1e-4")]
    assert field_diff({"command": old}, {"command": [*old[:-1]]}) == [
        ("command --compile", "(set)", None)
    ]
    # a value that looks like a flag's is still its value (negative numbers)
    assert argv_diff(["--x", "-1"], ["--x", "-2"], "args") == [("args --x", "-1", "-2")]
