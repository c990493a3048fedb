"""The plan's findings, pinned: the same findings on the same stacks before and after a change.

Every finding the plan makes (failing or waived) and every warning the verdict counts, on the
shipped dev and prod stacks and on a few of the tests' own programs that make findings of each
producer (Kubernetes validation, the resource and stack rules, the stand-in re-judging, the
registered checks, a waiver), is compared with tests/plan/golden/findings.json.

The rule: a change that alters a finding updates the golden file in the same commit, and its
commit message says which finding changed and why. Regenerate with

    TRAINFORGE_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/plan/test_findings_golden.py -q

and read `git diff tests/plan/golden/findings.json` before committing: every changed line is a
change users see.

dev and prod are the session's shipped plans (tests.conftest.shipped_plan), so this test plans
no shipped stack a second time; the programs below are small (a second or two each).
"""

from __future__ import annotations

import json
import os
import pathlib

import plan_programs
import pulumi
import pulumi_kubernetes as k8s
import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.plan.core import plan_program, plan_project
from trainforge.plan.verdict import warnings

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "findings.json"
REGEN = os.environ.get("TRAINFORGE_REGEN_GOLDEN") == "1"

# Every seeded flaw of plan_programs at once: Kubernetes validation (schema, the PyTorchJob
# webhook, Karpenter's CRDs), the resource rules (Checkov ids), data safety; one waived.
SEEDED = [
    "eks-public", "eks-logs", "eks-secrets", "imdsv1", "hop-limit", "s3-aes", "s3-public",
    "s3-no-versioning", "sqs-plain", "fsx-key", "kms-rotation", "iam-admin", "latest", "root",
    "escalation", "default-sa", "gpu-mismatch", "privileged", "schema", "two-masters",
    "container-name", "job-name", "clean-policy", "nodepool-op", "nodepool-limit", "ami-latest",
    "unprotected",
]  # fmt: skip
HOP_WAIVER = {"resource": "gpu-lt", "rule": "CKV_AWS_341", "reason": "legacy AMI needs 2 hops"}


def _seeded():
    return plan_program(
        plan_programs.program(set(SEEDED)),
        config={"trainforge:cluster": "tf", "trainforge-policy:waivers": [HOP_WAIVER]},
        standins=True,
    )


def _standin_iam():
    """A policy built from an ARN the cloud assigns: judged only by the stand-in pass."""
    return plan_program(plan_programs.standin_iam, standins=True)


def _references():
    """Pods that read a Secret nobody creates, one they do not wait for, a missing key, an
    unknown ServiceAccount and claim (the existence check), with bare containers (the pod rules
    and the scripts' and sandbox checks)."""

    def prog():
        ns = k8s.core.v1.Namespace("team-ns", metadata={"name": "team-a"})

        def job(name, pod, after=()):
            k8s.batch.v1.Job(
                name,
                metadata={"name": name, "namespace": ns.metadata.name},
                spec={"template": {"spec": {"restartPolicy": "Never", **pod}}},
                opts=pulumi.ResourceOptions(depends_on=[ns, *after]),
            )

        def reads(secret, key="token"):
            ref = {"name": secret, "key": key}
            env = [{"name": "T", "valueFrom": {"secretKeyRef": ref}}]
            return {"containers": [{"name": "c", "image": "i", "env": env}]}

        secret = k8s.core.v1.Secret(
            "tok",
            metadata={"name": "api-token", "namespace": ns.metadata.name},
            string_data={"token": "x"},
        )
        job("needs", reads("other-token"))
        job("races", reads("api-token"))
        job("typo", reads("api-token", "tokn"), after=(secret,))
        job(
            "sa",
            {
                "serviceAccountName": "runner",
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        )

    return plan_program(prog)


def _ordering_and_charts():
    """A PodMonitor that does not wait for its CRD's release (ordering), Kueue's old chart
    form and a floating chart version (the chart resolution check)."""

    def prog():
        mon = k8s.core.v1.Namespace("mon-ns", metadata={"name": "monitoring"})
        k8s.helm.v3.Release(
            "prom",
            chart="kube-prometheus-stack",
            version="88.5.3",
            repository_opts={"repo": "https://prometheus-community.github.io/helm-charts"},
            namespace=mon.metadata.name,
        )
        team = k8s.core.v1.Namespace("team-ns", metadata={"name": "team-a"})
        k8s.apiextensions.CustomResource(
            "alone",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata={"name": "alone", "namespace": team.metadata.name},
            spec={
                "selector": {"matchLabels": {"app": "a"}},
                "podMetricsEndpoints": [{"port": "m"}],
            },
        )
        k8s.helm.v3.Release(
            "kueue-old",
            namespace="x",
            chart="kueue",
            version="0.19.5",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                repo="oci://registry.k8s.io/kueue/charts"
            ),
        )
        k8s.helm.v3.Release(
            "floating", namespace="x", chart="oci://registry.k8s.io/kueue/charts/kueue"
        )

    return plan_program(prog)


def _dev_over_budget():
    """dev with jobs that need 40 GPUs of a 32-GPU pool and monthly caps they exceed: the
    queue, cost and budget checks (tests/plan/test_cost_queue_budgets.py)."""
    pool = {
        "name": "gpu-workloads",
        "instanceTypes": ["g5.12xlarge"],
        "capacityTypes": ["on-demand"],
        "limits": {"cpu": "384", "memory": "1536Gi", "gpus": 32},
    }
    team = {"name": "vision", "quota": {"gpus": "32", "cpu": "384", "memory": "1536Gi"}}

    def job(name: str, workers: int) -> dict:
        return {"name": name, "team": "vision", "pool": "gpu-workloads", "workers": workers,
                "gpusPerWorker": 4, "cpu": "40", "memory": "160Gi", "model": "mlp",
                "steps": 3600, "expectedStepSeconds": 1.0}  # fmt: skip

    overrides = {
        "trainforge:nodePools": [pool],
        "trainforge:teams": [team],
        "trainforge:jobs": [job("first", 6), job("second", 4)],
        "trainforge-policy:costCaps": {
            "clusterPerMonth": 10,
            "teams": {"vision": {"teamPerMonth": 10}},
        },
    }
    return plan_project(
        ROOT, "dev", standins=False, config_overrides=overrides, echo_warnings=False
    )


CASES = {
    "dev": lambda: shipped_plan("dev"),
    "prod": lambda: shipped_plan("prod"),
    "seeded": _seeded,
    "standin-iam": _standin_iam,
    "references": _references,
    "ordering-and-charts": _ordering_and_charts,
    "dev-over-budget": _dev_over_budget,
}


def findings_of(result) -> list[list[str]]:
    """Sorted [severity, rule, subject, message, fix] of every violation (fail or waived) and
    every warning the verdict counts ([warning, "", section title, line, ""])."""
    rows = [
        ["waived" if v.waived is not None else "fail", v.rule, v.resource, v.message, v.fix]
        for v in result.violations
    ]
    rows += [["warning", "", title, text, ""] for title, text in warnings(result)]
    return sorted(rows)


def _stored() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("case", list(CASES))
def test_findings_are_the_golden_ones(case):
    got = findings_of(CASES[case]())
    if REGEN:
        stored = _stored()
        stored[case] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
        return
    stored = _stored()
    assert case in stored, f"no golden findings for {case!r}: regenerate (see the docstring)"
    want = stored[case]
    missing = [r for r in want if r not in got]
    extra = [r for r in got if r not in want]
    assert got == want, f"{case}: findings changed\n  gone: {missing}\n  new: {extra}"


def test_every_case_makes_findings_or_is_a_shipped_stack():
    """A case that makes no finding pins nothing: each program above exists for its findings."""
    if REGEN:
        pytest.skip("regenerating")
    stored = _stored()
    assert set(stored) == set(CASES)
    for case, rows in stored.items():
        assert rows or case in ("dev", "prod"), case
