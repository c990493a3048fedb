"""Every pin in versions.py says where and when it was checked; the pins agree with each other.

The convention is documented at the top of trainforge/core/versions.py; this test is what
keeps pins added later (by anyone) honest.
"""

from __future__ import annotations

import ast
import datetime
import pathlib
import re

from trainforge.core import versions

SOURCE = pathlib.Path(versions.__file__)
FACT = re.compile(r"source: .+checked \d{4}-\d{2}-\d{2}", re.S)
DERIVED = (ast.JoinedStr, ast.Name, ast.Attribute, ast.Subscript, ast.BinOp)


def _comment_for(lines: list[str], first: int, last: int) -> str:
    """Comments on lines first..last (1-based) and in the paragraph above (up to a blank line):
    pins that belong together (a chart's repository and version) share one comment block."""
    text = [ln.partition("#")[2] for ln in lines[first - 1 : last] if "#" in ln]
    i = first - 2
    above = []
    while i >= 0 and lines[i].strip():
        if lines[i].lstrip().startswith("#"):
            above.append(lines[i].lstrip()[1:])
        i -= 1
    return " ".join(reversed(above)) + " " + " ".join(text)


def _unsourced() -> list[str]:
    lines = SOURCE.read_text().splitlines()
    missing = []
    for node in ast.parse(SOURCE.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or not names[0].isupper() or isinstance(value, DERIVED):
            continue
        own = _comment_for(lines, node.lineno, node.end_lineno or node.lineno)
        if isinstance(value, ast.Dict | ast.Tuple) and value.lineno != (
            value.end_lineno or value.lineno
        ):
            elements = value.values if isinstance(value, ast.Dict) else value.elts
            for el in elements:
                start = el.lineno if not isinstance(value, ast.Dict) else el.lineno
                note = _comment_for(lines, start, el.end_lineno or start)
                if not FACT.search(note) and el.lineno != node.lineno:
                    missing.append(f"{names[0]} entry on line {el.lineno}")
        elif not FACT.search(own):
            missing.append(f"{names[0]} (line {node.lineno})")
    return missing


def test_every_pin_says_where_and_when_it_was_checked():
    assert _unsourced() == []


def test_the_check_detects_a_pin_without_a_source(tmp_path, monkeypatch):
    bad = tmp_path / "versions.py"
    bad.write_text(SOURCE.read_text() + '\nNEW_CHART_VERSION = "1.2.3"\n')
    monkeypatch.setattr(f"{__name__}.SOURCE", bad)
    assert _unsourced() == [f"NEW_CHART_VERSION (line {len(bad.read_text().splitlines())})"]


def _checked_on(name: str) -> datetime.date:
    """The latest date the comment of pin `name` says it was checked on."""
    lines = SOURCE.read_text().splitlines()
    for node in ast.parse(SOURCE.read_text()).body:
        targets = [getattr(t, "id", None) for t in getattr(node, "targets", [])]
        target = getattr(node, "target", None)
        if name in targets or getattr(target, "id", None) == name:
            comment = _comment_for(lines, node.lineno, node.end_lineno or node.lineno)
            dates = re.findall(r"checked (\d{4}-\d{2}-\d{2})", comment)
            return max(datetime.date.fromisoformat(d) for d in dates)
    raise AssertionError(f"no pin {name} in {SOURCE}")


def test_kubernetes_minor_was_in_standard_support_when_its_pin_was_checked():
    """A fact about the pin, true whatever day the tests run (no today() here): the plan's
    cost report says at run time when the minor has moved to extended support."""
    ends = versions.EKS_STANDARD_SUPPORT_ENDS[versions.KUBERNETES_VERSION]
    checked = _checked_on("KUBERNETES_VERSION")
    assert datetime.date.fromisoformat(ends) > checked


def test_addon_builds_name_the_kubernetes_minor_where_they_carry_it():
    assert versions.EKS_ADDON_VERSIONS["kube-proxy"].startswith(f"v{versions.KUBERNETES_VERSION}.")


def test_nothing_floats():
    for name in dir(versions):
        value = getattr(versions, name)
        if name.isupper() and isinstance(value, str):
            assert "latest" not in value, name
    assert versions.KARPENTER_AMI_ALIAS.startswith("al2023@v")
    # The alias must postdate the Kubernetes minor's EKS release (older ones were never
    # published for it): 1.35 went GA on 2026-01-28.
    assert versions.KARPENTER_AMI_ALIAS.removeprefix("al2023@v") > "20260128"


def test_training_operator_uses_the_canonical_repository_at_its_release_tag():
    url = versions.TRAINING_OPERATOR_KUSTOMIZE_URL
    assert url.startswith("https://github.com/kubeflow/trainer//")
    assert url.endswith(f"?ref={versions.TRAINING_OPERATOR_VERSION}")
    assert versions.TRAINING_OPERATOR_VERSION.startswith("v1.9.")


def test_every_ami_we_run_has_a_known_driver():
    assert versions.GPU_AMI_TYPE in versions.AMI_NVIDIA_DRIVER
    assert versions.KARPENTER_AMI_ALIAS in versions.AMI_NVIDIA_DRIVER


def test_mlflow_server_major_matches_the_pinned_client():
    root = SOURCE.parents[2]
    client = re.search(r'"mlflow==(\d+)\.', (root / "pyproject.toml").read_text()).group(1)
    server = re.search(r":v(\d+)\.", versions.MLFLOW_IMAGE).group(1)
    assert server == client


def test_unconfirmed_addon_builds_are_asked_of_eks_and_confirmed_ones_are_pinned(repo_root):
    """EKS rejects a build it does not offer for the cluster's minor: a build no record
    confirmed is EKS's own default for KUBERNETES_VERSION, looked up at preview."""
    from trainforge.plan.mocks import TrainforgeMocks, run_mocked
    from trainforge.platform.config import load_config
    from trainforge.platform.training_platform import TrainingPlatform
    from trainforge.stack.file import read_stack_file

    mocks = TrainforgeMocks(preview=True)
    run = run_mocked(
        lambda: TrainingPlatform("platform", load_config()),
        read_stack_file(repo_root / "Pulumi.prod.yaml").engine(),
        mocks=mocks,
        preview=True,
    )
    asked = {
        c.args["addonName"]: c.args
        for c in mocks.calls
        if c.token == "aws:eks/getAddonVersion:getAddonVersion"
    }
    assert set(asked) == set(versions.EKS_ADDONS_ASKED_AT_PREVIEW)
    assert all(
        a["kubernetesVersion"] == versions.KUBERNETES_VERSION and not a.get("mostRecent")
        for a in asked.values()
    )
    installed = {
        r.inputs["addonName"]: r.inputs["addonVersion"] for r in run.of_type("aws:eks/addon:Addon")
    }
    from trainforge.platform.addons import pin

    # the offline answer is the recorded build
    assert installed == {name: pin(name) for name in installed}
    assert set(installed) >= versions.EKS_ADDONS_ASKED_AT_PREVIEW
