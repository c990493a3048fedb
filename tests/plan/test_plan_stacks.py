"""The offline plan of the project's own example stacks (dev and prod)."""

from __future__ import annotations

import pathlib
import shutil

import pytest
import yaml

from trainforge.plan import cli
from trainforge.plan.diff import load_objects

ROOT = pathlib.Path(__file__).resolve().parents[2]


def project_copy(tmp_path: pathlib.Path, stack: str, change=None) -> pathlib.Path:
    """The repository's program, Pulumi.yaml and the code its jobs ship (examples/), with a
    (possibly edited) stack file."""
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    shutil.copytree(ROOT / "examples", root / "examples", dirs_exist_ok=True)
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    if change:
        change(data["config"])
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(data))
    return root


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_example_stack_plan_is_clean(stack, tmp_path, capsys):
    out = tmp_path / "out"
    report = tmp_path / "report.txt"
    rc = cli.main(
        ["--stack", stack, "--project-dir", str(ROOT), "--out", str(out), "--report", str(report)]
    )
    text = capsys.readouterr().out
    assert rc == 0, text
    # verdict first: the first screen holds the verdict, the cost total and the report's path
    first = text.splitlines()[:40]
    assert first[0] == f"trainforge plan --stack {stack}: CLEAN"
    assert "Policy and validation: clean" in first
    assert any(
        line.startswith("Jobs not admitted (all declared jobs submitted at once): ")
        for line in first
    )
    assert any(line.startswith("Cost: platform $") and "/month" in line for line in first)
    assert any(" run at once, $" in line and "run costs $" in line for line in first)
    assert f"Full report: {report}" in first
    full = report.read_text()
    assert "Policy and validation: clean" in full and "Checkpoint state" in full
    objects = load_objects(out)
    kinds = {key.split("/")[1] for key in objects}
    assert {"NodePool", "EC2NodeClass"} <= kinds
    for key, doc in objects.items():
        if doc["kind"] == "EC2NodeClass":
            assert not doc["spec"]["amiSelectorTerms"][0]["alias"].endswith("@latest"), key
            assert doc["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 1, key


def test_platform_config_error_exits_2_with_its_message(tmp_path, capsys):
    def bad(config):
        config["trainforge:cluster"] = "9-not-a-name"

    root = project_copy(tmp_path, "dev", bad)
    assert cli.main(["--stack", "dev", "--project-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "cluster" in err and "9-not-a-name" in err


def test_diff_of_two_stack_plans(tmp_path, capsys):
    old = tmp_path / "old"
    assert (
        cli.main(["--stack", "dev", "--project-dir", str(ROOT), "--out", str(old), "--summary"])
        == 0
    )

    def bigger(config):
        config["trainforge:nodePools"][0]["limits"]["gpus"] = 8

    root = project_copy(tmp_path, "dev", bigger)
    md = tmp_path / "diff.md"
    capsys.readouterr()
    assert (
        cli.main(
            [
                "--stack",
                "dev",
                "--project-dir",
                str(root),
                "--diff",
                str(old),
                "--diff-md",
                str(md),
                "--summary",
            ]
        )
        == 0
    )
    text = md.read_text()
    # the pool's new GPUs are nobody's guarantee: the cohort's to lend, so the team's
    # backstop grows with them
    assert "### Kubernetes objects: 0 added, 3 changed, 0 removed" in text
    assert "`~ _cluster/Cohort/trainforge`" in text
    assert "`~ _cluster/NodePool/gpu-workloads`" in text
    assert "`spec.limits.nvidia.com/gpu`: `4` → `8`" in text


def test_insecure_stack_config_is_refused_before_any_resource(tmp_path, capsys):
    def open_endpoint(config):
        config["trainforge:endpoint"] = {"publicAccessCidrs": ["0.0.0.0/0"]}

    root = project_copy(tmp_path, "prod", open_endpoint)
    assert cli.main(["--stack", "prod", "--project-dir", str(root)]) == 2
    captured = capsys.readouterr()
    assert "endpoint.publicAccessCidrs[0]" in captured.err and "0.0.0.0/0" in captured.err
    assert "resources to create" not in captured.out
