"""Controller identity: every add-on and chart that calls AWS has an identity; a missing one
(the first wave's aws-ebs-csi-driver) or an undeclared add-on fails the plan, by name."""

from __future__ import annotations

from tests.conftest import shipped_plan
from trainforge.core import versions
from trainforge.plan import core
from trainforge.plan.checks import controller_identity as CI
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
