"""Controller identity: every add-on and chart that calls AWS has an identity; a missing one
(the first wave's aws-ebs-csi-driver) or an undeclared add-on fails the plan, by name."""

from __future__ import annotations

import json

from tests.conftest import shipped_plan
from trainforge.core import versions
from trainforge.plan import core
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import controller_identity as CI
from trainforge.plan.resource_types import EKS_ADDON, EKS_CLUSTER, HELM_RELEASE, IAM_ROLE
from trainforge.plan.runner import Inventory, Recorded
from trainforge.platform.cluster import Cluster


def section(result):
    (s,) = [s for s in result.sections if s.title == "Controller identity"]
    return {c["name"]: c for c in s.data["controllers"]}


def test_dev_every_aws_caller_has_an_identity():
    result = shipped_plan("dev")
    assert not [v for v in result.failing if v.rule.startswith("TRAINFORGE_CONTROLLER")]
    got = section(result)
    assert got["aws-ebs-csi-driver"]["identity"] == "EKS Pod Identity"
    assert got["aws-fsx-csi-driver"]["identity"] == "EKS Pod Identity"
    assert got["karpenter"]["identity"] == "EKS Pod Identity"
    assert got["vpc-cni"]["identity"] == "node role"  # AmazonEKS_CNI_Policy on the node roles
    assert got["eks-pod-identity-agent"]["identity"] == "node role"
    assert got["coredns"]["identity"] is None  # makes no AWS calls


def test_ebs_csi_driver_without_an_identity_fails_the_plan(repo_root, monkeypatch):
    """Issue 10 item 3: the add-on installs, its claims stay Pending."""
    monkeypatch.setattr(Cluster, "_ebs_csi_identity", lambda self, *a: [])
    result = core.plan_project(repo_root, "dev", standins=False)
    (v,) = [v for v in result.failing if v.rule == CI.MISSING]
    assert v.resource == "add-on aws-ebs-csi-driver"
    assert "kube-system/ebs-csi-controller-sa" in v.message and "no identity" in v.message
    assert "ec2:CreateVolume" in v.message


def test_an_add_on_nobody_declared_fails_the_plan(repo_root, monkeypatch):
    monkeypatch.setitem(versions.EKS_ADDON_VERSIONS, "aws-guardduty-agent", "v1.10.0-eksbuild.1")
    result = core.plan_project(repo_root, "dev", standins=False)
    (v,) = [v for v in result.failing if v.rule == CI.UNKNOWN_CONTROLLER]
    assert v.resource == "add-on aws-guardduty-agent"


def _rec(type_: str, name: str, inputs: dict, deps: dict | None = None) -> Recorded:
    urn = f"urn:pulumi:t::p::{type_}::{name}"
    return Recorded(urn, type_, name, None, True, inputs, dependencies=deps or {})


def _role(name: str, trust: dict, actions: list[str]) -> Recorded:
    allow = {"Effect": "Allow", "Action": actions, "Resource": "*"}
    inline = [{"name": "p", "policy": json.dumps({"Statement": [allow]})}]
    inputs = {"name": name, "assumeRolePolicy": json.dumps(trust), "inlinePolicies": inline}
    return _rec(IAM_ROLE, name, inputs)


def test_irsa_identities_are_found_and_judged_by_what_they_grant():
    """An add-on's serviceAccountRoleArn and a role trusting the ServiceAccount's OIDC subject
    are identities (IRSA); one that lacks an action the add-on needs fails, naming it."""
    oidc = "oidc.eks.us-east-1.amazonaws.com/id/X"
    sub = {"StringEquals": {f"{oidc}:sub": "system:serviceaccount:kube-system:karpenter"}}
    irsa_trust = {"Statement": [{"Effect": "Allow", "Principal": {"Federated": oidc},
                                 "Action": "sts:AssumeRoleWithWebIdentity", "Condition": sub}]}  # fmt: skip
    ec2_trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}]}
    ebs = _role("ebs", ec2_trust, ["ec2:CreateVolume", "ec2:AttachVolume"])
    karpenter = _role("karpenter", irsa_trust, ["*"])
    addon = _rec(
        EKS_ADDON,
        "ebs-addon",
        {"addonName": "aws-ebs-csi-driver", "serviceAccountRoleArn": "unknown"},
        {"serviceAccountRoleArn": [ebs.urn]},
    )
    release = _rec(HELM_RELEASE, "kp", {"chart": "oci://x/karpenter", "namespace": "kube-system"})
    cluster = _rec(EKS_CLUSTER, "c", {})
    inv = Inventory("p", "t", [cluster, ebs, karpenter, addon, release])
    result = CI.check(PlanContext(inventory=inv, objects=[]))
    (v,) = result.findings
    assert (v.rule, v.resource) == (CI.MISSING, "add-on aws-ebs-csi-driver")
    assert "its identity (IRSA (add-on serviceAccountRoleArn), role ebs) does not grant " in (
        v.message
    )
    assert "ec2:DetachVolume, ec2:DeleteVolume (" in v.message
    got = section(result)
    assert got["karpenter"]["identity"] == "IRSA" and got["karpenter"]["roles"] == "role karpenter"
