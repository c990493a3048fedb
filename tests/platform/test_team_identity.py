"""A team's pods run as the team's own UID/GID, enforced: the ValidatingAdmissionPolicy per
team (platform/team_identity.py) denies any other, and the plan evaluates that policy's CEL on
every pod template the stack declares (plan/checks/admission_policies.py).

The security review's case: a Job in `vision` running as llm's UID/GID got no finding, and
Pod Security `baseline` lets it through."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.jobs.backends import pod_templates
from trainforge.jobs.trainjob import runtimes_in
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


_BACKEND_PLANS: dict[str, object] = {}


def _backend_plan(backend: str):
    """dev planned with `backend` as the platform's job backend, once per test run (read it,
    never change it)."""
    if backend not in _BACKEND_PLANS:
        _BACKEND_PLANS[backend] = plan_project(
            ROOT, "dev", standins=False, config_overrides={"trainforge:jobBackend": backend}
        )
    return _BACKEND_PLANS[backend]


@pytest.mark.parametrize("backend", ["trainjob", "indexed-job"])
def test_every_backends_pods_pass_their_teams_policy(backend):
    """The platform's own jobs on each backend (a TrainJob's pods built from the runtime, the
    operator-free Indexed Job and its headless rendezvous Service) run as their team, name no
    PriorityClass: nothing of the stack is denied."""
    result = _backend_plan(backend)
    ctx = PlanContext(inventory=result.inventory, objects=result.objects)
    out = ap.check(ctx)
    assert out.findings == []
    (section,) = out.sections
    assert section.data["pods"] > 0
    if backend == "indexed-job":
        assert section.data["services"] > 0


def _changed(result, namespace: str, kind: str, change) -> list:
    """The plan's objects with `change(spec)` applied to every pod spec (a dict holding
    `containers`: a Job's template, each PyTorchJob replica's, a TrainJob's runtime patch) of
    each `kind` object in `namespace` (copies; the shared plan is left as it is)."""

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                change(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    objects = []
    for o in result.objects:
        if o.kind == kind and o.namespace == namespace:
            o = copy.copy(o)
            o.doc = copy.deepcopy(o.doc)
            walk(o.doc)
        objects.append(o)
    return objects


@pytest.mark.parametrize(
    "stack, backend, kind, namespace, changed",
    [
        ("prod", None, "PyTorchJob", "vision", ("PyTorchJob", "vision")),
        # a TrainJob's runtimePatches cannot name one (Trainer v2.2.1 PodSpecPatch, c505fc7c,
        # has no priorityClassName): its pods get what their runtime says
        ("dev", "trainjob", "TrainJob", "research", ("ClusterTrainingRuntime", None)),
        ("dev", "indexed-job", "Job", "research", ("Job", "research")),
    ],
)
@pytest.mark.parametrize("priority_class", ["system-node-critical", "system-cluster-critical"])
def test_a_team_pod_naming_a_priority_class_is_denied(
    stack, backend, kind, namespace, changed, priority_class
):
    """The security review's case: a team Job naming `system-node-critical` was admitted and
    its pods would preempt other teams' on shared nodes. The pods of every pod-bearing kind in
    a team namespace (as `backends.pod_templates` builds them) are denied, naming the field
    and the value."""
    result = _backend_plan(backend) if backend else shipped_plan(stack)
    changed_kind, changed_namespace = changed
    name_it = lambda s: s.update(priorityClassName=priority_class)  # noqa: E731
    objects = _changed(result, changed_namespace, changed_kind, name_it)
    runtimes = runtimes_in(o.doc for o in objects)
    built = [
        t.spec
        for o in objects
        if o.kind == kind and o.namespace == namespace
        for t in pod_templates(o.doc, runtimes=runtimes)
    ]
    assert built and all(s.get("priorityClassName") == priority_class for s in built)
    denied = _denials(result, objects)
    want = (
        f"denied request: pods in namespace {namespace}: spec.priorityClassName "
        f"{priority_class} is not allowed: it must be unset"
    )
    assert len([m for m in denied if want in m]) == len(built), denied
    assert all(f"{namespace}/{kind}/" in m for m in denied), denied


def test_a_team_pod_with_the_empty_priority_class_is_admitted():
    """The Priority admission plugin leaves an unset class empty (no globalDefault): admitted."""
    result = shipped_plan("prod")
    objects = _changed(result, "vision", "PyTorchJob", lambda s: s.update(priorityClassName=""))
    assert _denials(result, objects) == []


@pytest.mark.parametrize(
    "change, words",
    [
        ({"type": "LoadBalancer"}, "spec.type LoadBalancer is not allowed: it must be ClusterIP"),
        ({"type": "NodePort"}, "spec.type NodePort is not allowed: it must be ClusterIP"),
        ({"type": "ExternalName", "externalName": "db.example.com"}, "spec.type ExternalName"),
        ({"externalIPs": ["10.0.0.10"]}, "spec.externalIPs must be unset (CVE-2020-8554)"),
    ],
)
def test_a_team_service_other_than_cluster_ip_is_denied(change, words):
    """The security review's case: a team member (createJobs) could create a LoadBalancer
    Service (an internet-facing load balancer on the elb-tagged public subnets), a NodePort
    or externalIPs. Only ClusterIP (the indexed Job's headless rendezvous) is admitted."""
    result = _backend_plan("indexed-job")
    objects = []
    for o in result.objects:
        if o.kind == "Service" and o.namespace == "research":
            o = copy.copy(o)
            o.doc = copy.deepcopy(o.doc)
            o.doc["spec"] |= change
        objects.append(o)
    services = [o for o in objects if o.kind == "Service" and o.namespace == "research"]
    denied = _denials(result, objects)
    assert services and len(denied) == len(services), denied
    assert all(
        "research/Service/" in m
        and "ValidatingAdmissionPolicy 'trainforge-team-services-research'" in m
        and f"services in namespace research: {words}" in m
        for m in denied
    ), denied


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


def test_the_checkov_uid_waiver_says_what_the_policy_admits():
    """policy/checkov.yaml waives CKV_K8S_40 (uid >= 10000) for team pods; it said the team's
    policy enforced a floor of 10000, while the policy admits the platform's shared 1000 too
    (the SDK's TrainJobs). The waiver names what the emitted policy admits: the team's uid (at
    least the stack model's floor) or the shared one."""
    import re

    from trainforge.stack.services import MIN_TEAM_ID

    result = shipped_plan("prod")
    for name, team in _teams(result).items():
        (policy,) = [
            o.doc
            for o in result.objects
            if o.kind == ap.POLICY and o.obj_name == team_identity.policy_name(name)
        ]
        admitted = re.search(r"runAsUser in \[([\d,]+)\]", str(policy)).group(1)
        assert sorted(int(u) for u in admitted.split(",")) == sorted(
            {team.run_as_user, team_identity.SHARED_ID}
        )
        assert team.run_as_user >= MIN_TEAM_ID
    waiver = (ROOT / "policy" / "checkov.yaml").read_text()
    waiver = " ".join(waiver.split("# CKV_K8S_40", 1)[1].split("- CKV_K8S_40", 1)[0].split())
    waiver = waiver.replace(" # ", " ")
    assert f"at least {MIN_TEAM_ID}: the stack model's MIN_TEAM_ID" in waiver, waiver
    assert f"admits that UID/GID or the platform's shared {team_identity.SHARED_ID}" in waiver
    assert "it is no uid floor" in waiver, waiver
