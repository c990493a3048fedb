"""Team access, evaluated: what a team member's identity may do in the prod stack.

The prod stack's access entries map each team's IAM principals to the Kubernetes group
`trainforge:team:<team>`; the RBAC objects it renders are evaluated with Kubernetes RBAC's
rules (rbac/v1: a RoleBinding grants its Role or ClusterRole in its own namespace, a
ClusterRoleBinding everywhere; a rule matches on verb, API group, resource or
resource/subresource, and resourceNames when given; `*` matches all). Kubernetes' bootstrap
roles for every authenticated user grant discovery only, no objects, and the charts' own roles
bind service accounts, so what the stack renders is what a team member gets.
"""

from __future__ import annotations

import copy

import pytest

from tests.conftest import OWN_ACCOUNT, prod_own_values, run_stack
from trainforge.platform import team_access
from trainforge.platform.services_config import parse_services_config

RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"


@pytest.fixture(scope="module")
def prod():
    return run_stack("prod", prod_own_values())


def rbac(run) -> list[dict]:
    out = []
    for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        for r in run.of_type(RBAC + kind):
            out.append({"kind": kind, **r.inputs})
    return out


def _match(values: list[str], value: str) -> bool:
    return "*" in values or value in values


def allowed(objects, groups, verb, group, resource, namespace=None, name=None) -> bool:
    """Kubernetes RBAC authorisation of one request by a user in `groups`."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    for b in objects:
        if b["kind"] == "RoleBinding":
            if namespace is None or b["metadata"]["namespace"] != namespace:
                continue
        elif b["kind"] != "ClusterRoleBinding":
            continue
        if not any(s["kind"] == "Group" and s["name"] in groups for s in b.get("subjects", [])):
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], ns, ref["name"]))
        for rule in (role or {}).get("rules", []):
            if not (_match(rule["verbs"], verb) and _match(rule["apiGroups"], group)):
                continue
            if not _match(rule["resources"], resource):
                continue
            names = rule.get("resourceNames") or []
            if names and name not in names:
                continue
            return True
    return False


def member(team: str) -> list[str]:
    return [team_access.group(team), "system:authenticated"]


def test_each_principal_gets_an_access_entry_in_its_team_group(prod):
    entries = {
        r.inputs["principalArn"]: r.inputs
        for r in prod.of_type("aws:eks/accessEntry:AccessEntry")
        if r.inputs.get("kubernetesGroups")
    }
    assert entries[f"arn:aws:iam::{OWN_ACCOUNT}:role/LlmEngineer"]["kubernetesGroups"] == [
        "trainforge:team:llm"
    ]
    assert entries[f"arn:aws:iam::{OWN_ACCOUNT}:role/VisionEngineer"]["kubernetesGroups"] == [
        "trainforge:team:vision"
    ]
    assert all(e["type"] == "STANDARD" for e in entries.values())


def test_a_member_reads_their_team_and_not_another(prod):
    objs = rbac(prod)
    llm = member("llm")
    for verb, grp, res in [
        ("get", "kubeflow.org", "pytorchjobs"),
        ("list", "trainer.kubeflow.org", "trainjobs"),
        ("list", "batch", "jobs"),
        ("list", "kueue.x-k8s.io", "workloads"),
        ("list", "", "pods"),
        ("get", "", "pods/log"),
        ("get", "", "pods/proxy"),
        ("list", "", "events"),
        ("list", "", "limitranges"),
        ("get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads"),
    ]:
        assert allowed(objs, llm, verb, grp, res, "llm"), (verb, grp, res)
        assert not allowed(objs, llm, verb, grp, res, "vision"), (verb, grp, res, "vision")
        assert not allowed(objs, llm, verb, grp, res, "kube-system"), (verb, grp, res)
    # never Secrets, RBAC, quotas or policies, not even in their own namespace
    for verb, grp, res in [
        ("get", "", "secrets"),
        ("list", "", "secrets"),
        ("create", "rbac.authorization.k8s.io", "rolebindings"),
        ("update", "", "resourcequotas"),
        ("update", "", "limitranges"),
        ("delete", "", "limitranges"),
        ("delete", "networking.k8s.io", "networkpolicies"),
        ("create", "", "pods/exec"),
        ("create", "", "serviceaccounts/token"),
    ]:
        assert not allowed(objs, llm, verb, grp, res, "llm"), (verb, grp, res)


def test_creating_jobs_follows_the_stack(prod):
    objs = rbac(prod)
    # llm: createJobs: true; vision: read only
    assert allowed(objs, member("llm"), "create", "kubeflow.org", "pytorchjobs", "llm")
    assert allowed(objs, member("llm"), "delete", "batch", "jobs", "llm")
    assert not allowed(objs, member("llm"), "create", "kubeflow.org", "pytorchjobs", "vision")
    assert not allowed(objs, member("vision"), "create", "kubeflow.org", "pytorchjobs", "vision")
    assert allowed(objs, member("vision"), "get", "kubeflow.org", "pytorchjobs", "vision")


def test_only_their_own_cluster_queue(prod):
    objs = rbac(prod)
    kq = ("get", "kueue.x-k8s.io", "clusterqueues")
    assert allowed(objs, member("llm"), *kq, name="llm")
    assert not allowed(objs, member("llm"), *kq, name="vision")
    assert not allowed(objs, member("llm"), "list", "kueue.x-k8s.io", "clusterqueues")


def test_the_evaluation_catches_a_binding_that_leaks(prod):
    """A ClusterRoleBinding of the team Role's rules would let llm read vision: caught."""
    objs = copy.deepcopy(rbac(prod))
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] == "llm")
    objs.append({"kind": "ClusterRole", "metadata": {"name": "leak"}, "rules": role["rules"]})
    objs.append(
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "leak"},
            "roleRef": {"kind": "ClusterRole", "name": "leak"},
            "subjects": [{"kind": "Group", "name": "trainforge:team:llm"}],
        }
    )
    assert allowed(objs, member("llm"), "list", "", "pods", "vision")


def test_access_config_errors_name_the_key():
    errors: list[str] = []
    parse_services_config(
        {
            "teams": [
                {"name": "a", "access": {"principals": ["arn:aws:iam::1:role/x"], "createJobs": 3}},
                {"name": "b", "access": {"principals": ["arn:aws:iam::111122223333:role/Same"]}},
                {"name": "c", "access": {"principals": ["arn:aws:iam::111122223333:role/Same"]}},
            ]
        },
        errors,
    )
    text = "\n".join(errors)
    assert "trainforge:teams[0].access.principals[0]: got 'arn:aws:iam::1:role/x'" in text
    assert "trainforge:teams[0].access.createJobs: got 3; expected true or false" in text
    assert (
        "trainforge:teams[2].access.principals[0]: got 'arn:aws:iam::111122223333:role/Same'; "
        "expected a principal of one team only (team 'b' has it" in text
    )


def test_a_principal_cannot_be_both_admin_and_team_member():
    import json

    from tests.conftest import ROOT
    from trainforge.platform.config import ConfigError, parse_config
    from trainforge.stack.file import read_stack_file

    data = {**read_stack_file(ROOT / "Pulumi.prod.yaml").engine(), **prod_own_values()}
    raw = {k.split(":", 1)[1]: json.loads(v) if v[:1] in "[{" else v for k, v in data.items()}
    raw = {k: v for k, v in raw.items() if ":" not in k}
    raw["admins"] = [*raw["admins"], f"arn:aws:iam::{OWN_ACCOUNT}:role/LlmEngineer"]
    with pytest.raises(
        ConfigError,
        match=r"trainforge:teams\[0\]\.access\.principals: got '[^']*LlmEngineer'; expected a "
        r"principal not also in trainforge:admins \(team 'llm'",
    ):
        parse_config(raw, lookups=False, region="us-east-1")
