"""A team's pods run as the team's own UID/GID, enforced: the ValidatingAdmissionPolicy per
team (platform/team_identity.py) denies any other, and the plan evaluates that policy's CEL on
every pod template the stack declares (plan/checks/admission_policies.py).

The security review's case: a Job in `vision` running as llm's UID/GID got no finding, and
Pod Security `baseline` lets it through."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import admission_policies as ap
from trainforge.plan.core import plan_project
from trainforge.platform import team_identity


def _teams(result) -> dict:
    ((contract),) = result.inventory.declared.contracts
    return contract.teams


def _with_pod(result, namespace: str, change) -> list:
    """The plan's objects with `change(pod_spec)` applied to every pod template of the
    namespace's PyTorchJob (a copy; the shared plan is left as it is)."""
    objects = []
    for o in result.objects:
        if o.kind == "PyTorchJob" and o.namespace == namespace:
            o = copy.copy(o)
            o.doc = copy.deepcopy(o.doc)
            for spec in o.doc["spec"]["pytorchReplicaSpecs"].values():
                change(spec["template"]["spec"])
        objects.append(o)
    return objects


def _denials(result, objects) -> list[str]:
    ctx = PlanContext(inventory=result.inventory, objects=objects)
    return [f.message for f in ap.check(ctx).findings if f.rule == ap.RULE]


def test_each_team_has_a_policy_with_its_own_ids_bound_to_its_namespace():
    result = shipped_plan("prod")
    teams = _teams(result)
    assert len(teams) >= 2
    for name, team in teams.items():
        (policy,) = [
            o.doc
            for o in result.objects
            if o.kind == ap.POLICY and o.obj_name == team_identity.policy_name(name)
        ]
        allowed = sorted({team.run_as_user, team_identity.SHARED_ID})
        assert f"runAsUser in {allowed}".replace(", ", ",") in str(policy)
        assert policy["spec"]["failurePolicy"] == "Fail"
        (binding,) = [
            o.doc
            for o in result.objects
            if o.kind == ap.BINDING and o.obj_name == team_identity.policy_name(name)
        ]
        assert binding["spec"]["validationActions"] == ["Deny"]
        selector = binding["spec"]["matchResources"]["namespaceSelector"]
        assert selector == {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}}


@pytest.mark.parametrize(
    "field, value",
    [
        ("runAsUser", "uid"),
        ("runAsGroup", "gid"),
        ("fsGroup", "gid"),
        ("supplementalGroups", "gid"),
        ("container.runAsUser", "uid"),
    ],
)
def test_a_vision_job_running_as_llm_is_denied(field, value):
    """prod's vision PyTorchJob given llm's id in one field: the plan names the job and the
    policy's message, as the API server would deny its pods."""
    result = shipped_plan("prod")
    llm = _teams(result)["llm"]
    other = llm.run_as_user if value == "uid" else llm.run_as_group

    def change(spec):
        if field == "supplementalGroups":
            spec["securityContext"][field] = [other]
        elif field.startswith("container."):
            spec["containers"][0]["securityContext"][field.split(".")[1]] = other
        else:
            spec["securityContext"][field] = other

    assert _denials(result, result.objects) == []
    denied = _denials(result, _with_pod(result, "vision", change))
    assert denied and all(
        "vision/PyTorchJob/gpt-350m-fsdp" in m
        and "ValidatingAdmissionPolicy 'trainforge-team-identity-vision'" in m
        for m in denied
    ), denied
    key = field.split(".")[-1]
    assert any(key in m for m in denied), denied


def test_a_pod_without_the_teams_ids_is_denied():
    """No pod-level runAsUser (the image's USER would apply): denied, not passed."""
    result = shipped_plan("prod")
    denied = _denials(result, _with_pod(result, "vision", lambda s: s.pop("securityContext")))
    assert any("spec.securityContext.runAsUser must be" in m for m in denied), denied


@pytest.mark.parametrize("backend", ["trainjob", "indexed-job"])
def test_every_backends_pods_pass_their_teams_policy(backend):
    """The platform's own jobs on each backend (a TrainJob's pods built from the runtime, the
    operator-free Indexed Job) run as their team: nothing of the stack is denied."""
    result = plan_project(
        ROOT, "dev", standins=False, config_overrides={"trainforge:jobBackend": backend}
    )
    ctx = PlanContext(inventory=result.inventory, objects=result.objects)
    out = ap.check(ctx)
    assert out.findings == []
    (section,) = out.sections
    assert section.data["judged"] > 0


def test_the_platforms_shared_identity_is_admitted():
    """The SDK's TrainJobs run the one cluster-wide runtime as the platform's default ids,
    which own no team's files: admitted (test_plan_sdk.py plans such a program CLEAN)."""
    result = shipped_plan("prod")
    shared = team_identity.SHARED_ID

    def change(spec):
        spec["securityContext"] |= {"runAsUser": shared, "runAsGroup": shared, "fsGroup": shared}
        for c in spec["containers"]:
            c["securityContext"] |= {"runAsUser": shared, "runAsGroup": shared}

    assert _denials(result, _with_pod(result, "vision", change)) == []
