"""Two plans of one program are byte-identical, whatever order its resources register in.

The mocked engine registers resources concurrently, so the order varies between runs; every
listing the plan prints or writes is in `runner.tree_order` instead. Here the order is forced
to differ: the program declares the same components (a bucket and a ConfigMap in each) in
the opposite order on the second run.
"""

from __future__ import annotations

import pathlib
import re

from trainforge.plan import cli, runner
from trainforge.plan.runner import Recorded, tree_order

BODY = """
import sys
sys.path.insert(0, {here!r})
import plan_programs
import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

plan_programs.program(set())()
for n in {order!r}:
    box = pulumi.ComponentResource("test:index:Box", f"box-{{n}}")
    inside = pulumi.ResourceOptions(parent=box)
    aws.s3.Bucket(f"bucket-{{n}}", opts=inside)
    k8s.core.v1.ConfigMap(
        f"cm-{{n}}", metadata={{"name": f"cm-{{n}}", "namespace": "team-a"}}, data={{"k": n}},
        opts=inside,
    )
"""

EXTRAS = ("box-", "bucket-", "cm-")
# The pod script rehearsal's section data says how long it took: the one line that differs.
TIMING = re.compile(r'^(\s*"seconds": )[0-9.]+(,?)$', re.MULTILINE)


def _rec(urn: str, type_: str, name: str, parent: str | None = None) -> Recorded:
    return Recorded(urn=urn, type=type_, name=name, parent=parent, custom=True, inputs={})


def test_tree_order_lists_children_after_their_parent_siblings_by_type_then_name():
    box = _rec("u:box", "test:index:Box", "box")
    cm, bucket = _rec("u:cm", "k:ConfigMap", "cm", "u:box"), _rec("u:b", "aws:Bucket", "b", "u:box")
    top = _rec("u:top", "aws:Bucket", "top", "u:stack")  # parent not recorded: a root
    for registered in ([cm, box, top, bucket], [top, bucket, cm, box]):
        assert [r.name for r in tree_order(registered)] == ["top", "box", "b", "cm"]


def test_two_plans_are_identical_when_registration_order_differs(
    make_project, tmp_path, capsys, monkeypatch
):
    here = str(pathlib.Path(__file__).resolve().parent)
    base = tmp_path / "base"
    assert (
        cli.main(["--stack", "test", "--project-dir", str(make_project()), "--out", str(base)]) == 0
    )
    capsys.readouterr()
    root = make_project(name="head", body=BODY.format(here=here, order=["a", "b", "c"]))
    registered: list[list[str]] = []

    def spy(resources: list[Recorded]) -> list[Recorded]:
        registered.append([r.name for r in resources if r.name.startswith(EXTRAS)])
        return tree_order(resources)

    monkeypatch.setattr(runner, "tree_order", spy)
    out, inv, rep, md = (tmp_path / f for f in ("out", "inv.json", "report.txt", "diff.md"))
    args = ["--stack", "test", "--project-dir", str(root), "--out", str(out), "--json", str(inv)]
    args += ["--report", str(rep), "--diff", str(base), "--diff-md", str(md), "--full"]

    def plan() -> tuple[list[str], int, dict[str, str]]:
        registered.clear()
        rc = cli.main([*args, "--no-standins"])
        written = {"stdout": capsys.readouterr().out, "inv.json": inv.read_text()}
        written |= {"report": rep.read_text(), "diff.md": md.read_text()}
        written |= {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
        for name, text in written.items():
            written[name], n = TIMING.subn(r"\1<seconds>\2", text)
            assert n <= 1, f"{name}: {n} timing lines"
        return registered[0], rc, written  # the preview's order (a stand-in run may follow)

    order1, rc1, first = plan()
    (root / "__main__.py").write_text(BODY.format(here=here, order=["c", "b", "a"]))
    order2, rc2, second = plan()
    assert order1 != order2 and sorted(order1) == sorted(order2), (order1, order2)
    assert rc1 == rc2 and first.keys() == second.keys()
    for name, text in first.items():
        assert text == second[name], f"{name} differs between the two plans"
    assert "inventory.json" in first and "cm-a" in first["diff.md"]
