"""The diff of two plans: added, changed and removed objects with dotted field paths."""

from __future__ import annotations

import pathlib

from trainforge.plan import cli
from trainforge.plan.diff import diff_maps, field_diff, render_markdown


def test_field_diff_paths_and_named_lists():
    old = {"spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:1"}], "gone": 1}}
    new = {"spec": {"replicas": 4, "containers": [{"name": "a", "image": "x:2"}], "new": True}}
    assert field_diff(old, new) == [
        ("spec.replicas", 2, 4),
        ("spec.containers.a.image", "x:1", "x:2"),
        ("spec.gone", 1, None),
        ("spec.new", None, True),
    ]
    assert field_diff([1, 2], [1, 3, 4]) == [("[1]", 2, 3), ("[2]", None, 4)]


def test_diff_maps_and_markdown_is_compact():
    old = {"a": {"x": 1}, "b": {"x": 1}}
    new = {"b": {"x": 2}, "c": {"x": 1}}
    d = diff_maps(old, new)
    assert (d.added, d.removed, [c.key for c in d.changed]) == (["c"], ["a"], ["b"])
    md = render_markdown(d, diff_maps({}, {}))
    assert "1 added, 1 changed, 1 removed" in md
    assert "- `+ c`" in md and "- `- a`" in md and "  - `x`: `1` → `2`" in md
    many = diff_maps({}, {f"o{i}": {} for i in range(100)})
    assert "… and 60 more (+)" in render_markdown(many, many)


def test_plan_diff_between_two_projects(make_project, tmp_path, capsys):
    base = make_project(name="base")
    head_body = """
        import sys
        sys.path.insert(0, {here!r})
        import plan_programs
        plan_programs.program(set(), jobs=["llm-pretrain", "llm-finetune"])()
    """
    old = tmp_path / "old"
    assert (
        cli.main(["--stack", "test", "--project-dir", str(base), "--out", str(old), "--summary"])
        == 0
    )
    here = str(pathlib.Path(__file__).resolve().parent)
    head = make_project(
        name="head", body=head_body.format(here=here), config={"trainforge:cluster": "tf2"}
    )
    md_file = tmp_path / "diff.md"
    capsys.readouterr()
    rc = cli.main(
        [
            "--stack",
            "test",
            "--project-dir",
            str(head),
            "--diff",
            str(old),
            "--diff-md",
            str(md_file),
            "--summary",
        ]
    )
    assert rc == 0
    md = md_file.read_text()
    assert "### Kubernetes objects: 1 added, 1 changed, 0 removed" in md
    assert "`+ team-a/PyTorchJob/llm-finetune`" in md
    # the cluster name feeds the Karpenter discovery tags of the node class
    assert 'spec.subnetSelectorTerms[0].tags.karpenter.sh/discovery`: `"tf"` → `"tf2"`' in md
    assert "`~ _cluster/EC2NodeClass/gpu`" in md and "llm-pretrain" not in md
    assert "`~ aws:eks/cluster:Cluster::cluster`" in md
    assert '`name`: `"tf"` → `"tf2"`' in md
    assert md in capsys.readouterr().out


def test_a_missing_diff_base_is_refused_before_the_plan_runs(tmp_path, monkeypatch, capsys):
    """A mistyped --diff path is a one-line error (exit 2) before the program runs or --out
    is written, not after seconds of planning."""
    from trainforge.plan import core

    def no_plan(*a, **kw):
        raise AssertionError("the plan ran before --diff was checked")

    monkeypatch.setattr(core, "plan_project", no_plan)
    out = tmp_path / "out"
    code = cli.main(["--stack", "dev", "--diff", str(tmp_path / "nope"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--diff {tmp_path / 'nope'}: no such folder or file; expected a plan folder" in err
    assert not out.exists()


def test_a_money_change_reads_the_same_in_the_diff_and_the_verdict():
    """One vocabulary for a change in money (diff.delta): the PR comment's cost table says
    `no change` where the verdict does (it said `±$0.00`), and `unknown` without a figure."""
    from trainforge.plan.diff import cost_markdown, delta

    job = {"team": "t", "name": "a", "runCost": 5.0, "onDemandPerHour": 1.0, "nodes": 1}
    old = {"jobs": [job], "teams": [], "fixedPerMonthKnown": 10.0}
    new = {"jobs": [{**job, "nodes": 2}], "teams": [], "fixedPerMonthKnown": 10.0}
    (row,) = [line for line in cost_markdown(old, new) if line.startswith("| `a` (t)")]
    assert "| no change |" in row, row
    assert [delta(1.0, 2.5), delta(2.0, 1.0), delta(1.0, 1.001), delta(None, 1.0)] == [
        "+$1.50",
        "-$1.00",
        "no change",
        "unknown",
    ]


def test_cost_figures_that_leave_unpriced_items_out_say_so_and_a_change_names_them():
    """Turning FSx off (priced only in part) removes an unpriced item: the PR comment and the
    verdict name it instead of a bare `(-$21.90)`; with no base the fixed cost still says
    `+ unknown (...)`, in the verdict's words."""
    from types import SimpleNamespace

    from trainforge.plan.check_types import Section
    from trainforge.plan.checks.cost_check import SECTION_TITLE
    from trainforge.plan.diff import cost_markdown
    from trainforge.plan.verdict import cost_lines

    fsx, vpce = "FSx for Lustre PERSISTENT_2", "VPC interface endpoints"
    old = {"jobs": [], "teams": [], "fixedPerMonthKnown": 100.0, "fixedPerHourKnown": 0.1,
           "fixedUnknown": [fsx, vpce]}  # fmt: skip
    new = {**old, "fixedPerMonthKnown": 78.1, "fixedUnknown": [vpce]}
    (line,) = [x for x in cost_markdown(old, new) if x.startswith("Platform fixed cost")]
    assert line == (
        f"Platform fixed cost (always on): $100.00/month + unknown ({fsx}, {vpce}) → "
        f"$78.10/month + unknown ({vpce}) (-$21.90; unknown removed: {fsx})"
    )
    (line,) = [x for x in cost_markdown(None, new) if x.startswith("Platform fixed cost")]
    assert line == f"Platform fixed cost (always on): $78.10/month + unknown ({vpce})"

    result = SimpleNamespace(sections=[Section(SECTION_TITLE, [], new)])
    (verdict,) = cost_lines(result, {SECTION_TITLE: old})
    assert verdict.endswith(f"$78.10/month (-$21.90; unknown removed: {fsx}) + unknown ({vpce})")
    result = SimpleNamespace(sections=[Section(SECTION_TITLE, [], {**old, "fixedUnknown": []})])
    (verdict,) = cost_lines(result, {SECTION_TITLE: new})
    assert verdict.endswith(f"(+$21.90; unknown removed: {vpce})")
