"""A team cannot take a name the platform itself creates (core.platform_names), and the plan
flags any two objects of one kind, namespace and name (plan/checks/duplicates.py).

The security review's case: a team `trainforge-acceptance` (the acceptance tests' namespace
and ClusterQueue) planned CLEAN, with two Namespaces and two ClusterQueues of that name and
the team's Role beside the acceptance CronJobs.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, prod_own_values, shipped_plan
from trainforge.core import platform_names
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import duplicates
from trainforge.plan.core import plan_project
from trainforge.plan.manifests import K8sObject
from trainforge.platform.services_config import parse_services_config

INTRUDER = {
    "name": platform_names.ACCEPTANCE_NAMESPACE,
    "access": {"principals": ["arn:aws:iam::314159265358:role/Intruder"], "createJobs": True},
    "quota": {"gpus": "0", "cpu": "1", "memory": "1Gi", "pods": "5"},
}


def _team_names(result) -> set[str]:
    ((contract),) = result.inventory.declared.contracts
    return set(contract.teams)


@pytest.mark.parametrize("kind", ["Namespace", "ClusterQueue"])
def test_every_platform_namespace_and_cluster_queue_is_reserved(kind):
    """What the shipped prod plan creates (acceptance tests, MLflow, Kueue, FSx, ...) that is
    not a team's is on the list team names are refused against: a component that adds a
    namespace or ClusterQueue without naming it in core.platform_names fails here."""
    result = shipped_plan("prod")
    made = {o.obj_name for o in result.objects if o.kind == kind} - _team_names(result)
    assert made, kind  # the plan has platform ones to compare
    assert made <= platform_names.RESERVED_TEAM_NAMES, made - platform_names.RESERVED_TEAM_NAMES


@pytest.mark.parametrize(
    "name",
    [
        platform_names.ACCEPTANCE_NAMESPACE,
        platform_names.MLFLOW_NAMESPACE,
        platform_names.FSX_ADMIN_NAMESPACE,
        "kube-anything",
    ],
)
def test_a_team_named_like_the_platform_gets_one_line(name):
    errors: list[str] = []
    parse_services_config({"teams": [{"name": name}]}, errors)
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert errors[0].startswith(f"trainforge:teams[0].name: got '{name}'; expected a name other"), (
        errors
    )
    assert "trainforge-acceptance" in errors[0] and "kube-*" in errors[0]


def test_a_team_named_like_the_configured_karpenter_namespace_is_refused():
    errors: list[str] = []
    parse_services_config(
        {"karpenter": {"namespace": "karpenter"}, "teams": [{"name": "karpenter"}]}, errors
    )
    assert len(errors) == 1 and "teams[0].name" in errors[0] and "karpenter" in errors[0]


def _obj(name: str, kind: str, api: str, namespace: str | None, pulumi_name: str) -> K8sObject:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    doc = {"apiVersion": api, "kind": kind, "metadata": meta}
    return K8sObject(f"urn:{pulumi_name}", pulumi_name, f"kubernetes:x:{kind}", doc)


def test_duplicates_key_is_group_kind_namespace_name():
    objs = [
        _obj("a", "Job", "batch/v1", "llm", "one"),
        _obj("a", "Job", "batch/v1beta1", "llm", "two"),  # another version: the same object
        _obj("a", "Job", "batch/v1", "vision", "three"),  # another namespace
        _obj("a", "ConfigMap", "v1", "llm", "four"),  # another kind
        _obj("<unknown>", "Job", "batch/v1", "llm", "five"),  # not known at preview
        _obj("<unknown>", "Job", "batch/v1", "llm", "six"),
    ]
    ctx = PlanContext(inventory=None, objects=objs)  # type: ignore[arg-type]
    (finding,) = duplicates.check(ctx).findings
    assert finding.rule == duplicates.RULE and finding.resource == "llm/Job/a"
    assert "one, two" in finding.message and {"one", "two"} <= finding.names


def test_the_plan_flags_a_platform_name_taken_when_the_list_misses_it(monkeypatch):
    """The review's stack with the reserved list broken as it was (no acceptance names): the
    config passes, and the plan is no longer CLEAN but names both duplicated objects."""
    reserved = platform_names.RESERVED_TEAM_NAMES - {
        platform_names.ACCEPTANCE_NAMESPACE,
        platform_names.ACCEPTANCE_CLUSTER_QUEUE,
    }
    monkeypatch.setattr(platform_names, "RESERVED_TEAM_NAMES", reserved)
    overrides = prod_own_values()
    overrides["trainforge:teams"] = json.dumps(
        [INTRUDER, *json.loads(overrides["trainforge:teams"])]
    )
    result = plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    dupes = {f.resource for f in result.failing if f.rule == duplicates.RULE}
    assert dupes == {
        "_cluster/Namespace/trainforge-acceptance",
        "_cluster/ClusterQueue/trainforge-acceptance",
    }
