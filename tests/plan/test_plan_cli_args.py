"""`trainforge plan`'s output flags: a path that cannot be written is refused in one line that
names the flag, before a plan's seconds (it was a traceback after the whole plan)."""

from __future__ import annotations

import pytest

from trainforge.plan import cli, core


@pytest.fixture
def no_plan(monkeypatch):
    """The refusals come before the plan: planning would fail the test."""

    def plan_project(*a, **k):
        raise AssertionError("the plan ran before the flags were checked")

    monkeypatch.setattr(core, "plan_project", plan_project)


@pytest.mark.parametrize(
    ("flag", "target", "expected"),
    [
        ("--out", "a-file", "--out {}: not a folder; expected a folder for the manifests"),
        ("--json", "a-folder", "--json {}: a folder; expected a file to write"),
        ("--report", "a-folder", "--report {}: a folder; expected a file to write"),
        ("--json", "a-file/inv.json", "--json {}: {} is a file, not a folder"),
        ("--out", "a-file/plan", "--out {}: {} is a file, not a folder"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_first(
    tmp_path, capsys, no_plan, flag, target, expected
):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    path = tmp_path / target
    assert cli.main(["--stack", "dev", flag, str(path)]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert err == "trainforge plan: " + expected.format(path, tmp_path / "a-file")


def test_diff_md_is_refused_into_a_folder_and_without_diff(tmp_path, capsys, no_plan):
    assert cli.main(["--stack", "dev", "--diff-md", str(tmp_path / "c.md")]) == cli.EXIT_CONFIG
    assert capsys.readouterr().err.strip() == (
        f"trainforge plan: --diff-md {tmp_path / 'c.md'}: only with --diff BASE "
        "(the markdown is the diff's)"
    )
    args = ["--stack", "dev", "--diff", str(tmp_path), "--diff-md", str(tmp_path)]
    assert cli.main(args) == cli.EXIT_CONFIG
    assert f"--diff-md {tmp_path}: a folder" in capsys.readouterr().err


def test_no_checkov_wrappers_without_out_is_refused_not_ignored(tmp_path, capsys, no_plan):
    """Without --out no manifests are kept (with --diff they go to a temporary folder that
    is removed), so --no-checkov-wrappers was read by nothing: refused before the plan."""
    for extra in ([], ["--diff", "/dev/null"]):
        argv = ["--stack", "dev", "--no-checkov-wrappers", *extra]
        assert cli.main(argv) == cli.EXIT_CONFIG
        assert capsys.readouterr().err.strip() == (
            "trainforge plan: --no-checkov-wrappers: only with --out DIR "
            "(the wrappers are written there)"
        )


class _Planned(Exception):
    pass


def test_writable_output_paths_reach_the_plan(tmp_path, monkeypatch):
    """The check refuses only what cannot be written: new paths under new folders pass."""

    def plan_project(*a, **k):
        raise _Planned

    monkeypatch.setattr(core, "plan_project", plan_project)
    new = tmp_path / "new" / "deeper"
    args = ["--stack", "dev", "--out", str(new / "plan"), "--json", str(new / "inv.json")]
    with pytest.raises(_Planned):
        cli.main([*args, "--report", str(new / "r.txt")])


def test_no_checkov_wrappers_help_names_every_kind_that_is_wrapped():
    """Its help said PyTorchJob only; every custom-resource workload with a backend shape is
    wrapped (manifests.pod_template_jobs)."""
    from trainforge.core.pods import KUBERNETES
    from trainforge.jobs.backends import SHAPES

    action = next(
        a for a in cli.build_parser()._actions if "--no-checkov-wrappers" in a.option_strings
    )
    wrapped = [k for k in SHAPES if k not in KUBERNETES]
    assert {"PyTorchJob", "TrainJob", "JobSet"} <= set(wrapped)
    for kind in wrapped:
        named = kind in action.help or (
            kind.endswith("TrainingRuntime") and "runtimes" in action.help
        )
        assert named, f"--no-checkov-wrappers' help does not name {kind}"
