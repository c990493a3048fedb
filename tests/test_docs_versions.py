"""The versions README.md and docs/services.md state as what the platform runs are the pins in
trainforge/core/versions.py (nothing else pinned these lines: a bumped pin left the docs
naming the old release)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from trainforge.core import versions as v

README = (ROOT / "README.md").read_text(encoding="utf-8")
SERVICES = (ROOT / "docs" / "services.md").read_text(encoding="utf-8")
NUMBER = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_kueue_minor = v.KUEUE_CHART_VERSION.rsplit(".", 1)[0]


@pytest.mark.parametrize(
    ("doc", "claim"),
    [
        (README, f"Kubernetes\n{v.KUBERNETES_VERSION}, add-on builds"),
        (README, f"EKS {v.KUBERNETES_VERSION} (private endpoint"),
        (
            README,
            f"(Kueue {v.KUEUE_CHART_VERSION}, Trainer {v.TRAINER_VERSION}, JobSet "
            f"{v.JOBSET_VERSION}, SDK {v.KUBEFLOW_SDK_VERSION}; any other set is a plan finding)",
        ),
        (README, f"a Kueue {_kueue_minor} queue per team"),
        (
            README,
            f"{NUMBER[len(v.EKS_ADDONS_ASKED_AT_PREVIEW)]} add-on builds for "
            f"{v.KUBERNETES_VERSION} had no public record",
        ),
        (README, f"the chart is pinned at {v.OPENCOST_CHART_VERSION}, the newest"),
        (SERVICES, f"Kubeflow training operator {v.TRAINING_OPERATOR_VERSION} (PyTorchJob)"),
        (SERVICES, f"Kubeflow Trainer v{v.TRAINER_VERSION} and JobSet {v.JOBSET_VERSION}"),
        (SERVICES, f"Kueue {v.KUEUE_CHART_VERSION} (Helm chart, namespace `kueue-system`)"),
    ],
)
def test_the_docs_state_the_pinned_version(doc, claim):
    assert claim in doc


def test_the_readme_names_the_newest_opencost_chart_versions_py_saw():
    """versions.py's latest re-check of the OpenCost pin names the newest chart it saw; the
    README's "(X exists)" is that chart."""
    source = (ROOT / "trainforge" / "core" / "versions.py").read_text(encoding="utf-8")
    seen = re.findall(r"re-checked \d{4}-\d\d-\d\d: chart (\d+\.\d+\.\d+) exists", source)
    assert seen, "versions.py no longer records the newest OpenCost chart it saw"
    assert f"readable here ({seen[-1]} exists)" in README
