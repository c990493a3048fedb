"""Version pairs: the Kueue, Trainer, JobSet and Kubeflow SDK versions a stack deploys are ones
upstream builds and tests together (trainforge.core.versions' table, read from Kueue's go.mod,
the Trainer's Chart.yaml and the SDK's wheel METADATA); any other set is refused at plan."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from trainforge.core import versions
from trainforge.plan.checks.version_pairs import RULE
from trainforge.plan.core import plan_program
from trainforge.platform import trainer


def _stack(kueue: str, trainer_version: str, values: dict | None = None, jobset: str | None = None):
    """A program with Kueue's release and the Trainer's chart (and JobSet's) at these versions."""

    def prog():
        import pulumi_kubernetes as k8s

        k8s.helm.v3.Release("kueue", chart=versions.KUEUE_CHART, version=kueue, namespace="k")
        k8s.helm.v4.Chart(
            "trainer",
            chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
            version=trainer_version,
            namespace="kubeflow-system",
            values=values if values is not None else {},
        )
        if jobset:
            k8s.helm.v4.Chart("jobset", chart=versions.JOBSET_CHART, version=jobset, namespace="j")

    return plan_program(prog)


def _messages(result) -> list[str]:
    return [v.message for v in result.failing if v.rule == RULE]


def test_kueue_0_19_with_trainer_2_3_is_refused_naming_both_and_the_supported_ones():
    # the set pinned until 2026-11-29: Kueue 0.19.5, Trainer 2.3.0 with its bundled JobSet
    msgs = _messages(_stack("0.19.5", "2.3.0", jobset="0.12.0"))
    assert msgs == [
        "Kueue 0.19.5 with Trainer 2.3.0: Kueue 0.19.x is built and tested with Trainer 2.2.1 "
        "(its go.mod); Trainer 2.3.0 goes with Kueue 0.20.x",
        # the SDK the platform documents speaks Trainer 2.2's API
        "kubeflow_trainer_api 2.2.1 with Trainer 2.3.0: the SDK's trainer API is generated "
        "from Trainer 2.2.1; use kubeflow_trainer_api 2.3.x",
    ]


def test_the_pinned_set_plans_clean():
    result = _stack(
        versions.KUEUE_CHART_VERSION,
        versions.TRAINER_VERSION,
        trainer.chart_values(),
        jobset=versions.JOBSET_VERSION,
    )
    assert _messages(result) == []
    (section,) = [s for s in result.sections if s.title.startswith("Version pairs")]
    assert section.data["problems"] == [] and section.data["jobset"] == versions.JOBSET_VERSION


def test_the_trainer_charts_bundled_jobset_is_judged_when_it_is_on():
    # Trainer 2.2.1's chart bundles JobSet 0.11.0 (its Chart.yaml): Kueue 0.19 is built with 0.12.0
    assert _messages(_stack("0.19.5", "2.2.1")) == [
        "Kueue 0.19.5 with JobSet 0.11.0: Kueue 0.19.x is built and tested with JobSet 0.12.0 "
        "(its go.mod)"
    ]
    assert _messages(_stack("0.19.5", "2.2.1", {"jobset": {"install": False}}, "0.12.0")) == []


def test_a_version_nobody_read_is_refused_too():
    assert _messages(_stack("0.21.0", "2.2.1", jobset="0.12.0")) == [
        "Kueue 0.21.0: no record of the Trainer it is built with (known Kueue lines: 0.19.x "
        "with Trainer 2.2.1, 0.20.x with Trainer 2.3.0)"
    ]


def test_the_sdk_must_speak_the_trainers_api():
    p = versions.version_pair_problems
    assert p(None, "2.2.1", None, "0.5.0", "2.3.0") == [
        "kubeflow_trainer_api 2.3.0 with Trainer 2.2.1: the SDK's trainer API is generated "
        "from Trainer 2.3.0; use kubeflow_trainer_api 2.2.x"
    ]
    assert p(None, "2.2.1", None, "0.5.0", "2.2.1") == [
        "Kubeflow SDK 0.5.0 with kubeflow_trainer_api 2.2.1: the SDK requires "
        "kubeflow_trainer_api>=2.3.0,<2.4"
    ]
    assert p(None, "2.3.0", None, "0.5.0", "2.3.0") == []


def test_the_sdk_lock_is_the_pinned_sdk():
    lock = (ROOT / "tools" / "kubeflow-sdk" / "requirements.lock").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", lock, re.M))
    assert pins["kubeflow"] == versions.KUBEFLOW_SDK_VERSION
    assert pins["kubeflow_trainer_api"] == versions.KUBEFLOW_TRAINER_API_VERSION


def test_our_runtimes_fit_trainer_2_4s_replicated_job_name_cap():
    """Trainer 2.4 caps ReplicatedJob names at 20 characters (docs/upgrading.md, as issue #41
    quotes its release notes): the platform's runtimes already fit, so that move needs none."""
    from trainforge.jobs import trainjob

    names = {
        rj["name"]
        for doc in trainjob.runtime_manifests()
        for rj in doc["spec"]["template"]["spec"]["replicatedJobs"]
    }
    assert names and all(len(n) <= 20 for n in names), names
