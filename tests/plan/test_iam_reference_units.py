"""The reference facts the IAM rehearsal judges against, read directly (no plan): which AWS
managed policies are known, in every partition, and under what name they are reported."""

from __future__ import annotations

import json

import pytest

from trainforge.plan.checks.aws_calls import Caller
from trainforge.plan.checks.iam_reference import (
    EBS_CSI_DRIVER_POLICY_ARN,
    aws_managed_document,
    managed_policy,
    managed_version,
    node_role_calls,
)


def _moto_managed(name: str) -> dict:
    """The policy as moto itself loads it (its module, imported): the source we must match."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    return json.loads(aws_managed_policies_data)[name]


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_a_managed_policy_is_known_in_every_partition_under_its_own_name(partition) -> None:
    known, policy = managed_policy(f"arn:{partition}:iam::aws:policy/AmazonEKS_CNI_Policy")
    assert known and policy is not None
    assert policy.name == "managed AmazonEKS_CNI_Policy"
    assert policy.document == _moto_managed("AmazonEKS_CNI_Policy")["Document"]
    # a path in the ARN: the name is its last part
    known, policy = managed_policy(EBS_CSI_DRIVER_POLICY_ARN.replace(":aws:", f":{partition}:", 1))
    assert known and policy is not None and policy.name == "managed AmazonEBSCSIDriverPolicy"


def test_known_but_not_rehearsed_and_unknown_managed_policies() -> None:
    # attached by the platform, documents not carried: known, nothing to evaluate
    assert managed_policy("arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore") == (True, None)
    assert managed_policy("arn:aws:iam::aws:policy/AdministratorAccess") == (False, None)
    # not an ARN at all (no partition to normalise): unknown, never an error
    assert managed_policy("AmazonEKS_CNI_Policy") == (False, None)
    assert managed_policy("arn") == (False, None)


@pytest.mark.parametrize(
    "name", ["AmazonEKS_CNI_Policy", "AmazonEKSWorkerNodePolicy", "AmazonEBSCSIDriverPolicy"]
)
def test_aws_managed_policies_are_moto_s_copy_of_aws_s(name) -> None:
    assert aws_managed_document(name) == _moto_managed(name)["Document"]
    path = _moto_managed(name)["Path"]  # /service-role/ for AmazonEBSCSIDriverPolicy
    known, policy = managed_policy(f"arn:aws:iam::aws:policy{path}{name}")
    assert known and policy is not None and policy.document == _moto_managed(name)["Document"]


def test_the_ebs_csi_policy_named_in_findings_is_the_version_moto_carries() -> None:
    """The EBS CSI controller's findings name what they compared: the managed policy's default
    version in moto's copy (v15, 3 actions beyond the driver's v1.50.1 example policy)."""
    source = _moto_managed("AmazonEBSCSIDriverPolicy")
    assert (source["DefaultVersionId"], source["UpdateDate"][:10]) == ("v15", "2026-05-13")
    assert managed_version("AmazonEBSCSIDriverPolicy") == "v15 of 2026-05-13, moto 5.2.5's copy"


def test_the_vpc_cni_s_node_role_calls_are_every_action_of_amazoneks_cni_policy() -> None:
    """Not a list of our own: the hand copy this replaced missed ec2:DescribeTags and
    ec2:DescribeSecurityGroups (policy v6, 2026-03-04): 12 calls where AWS grants ipamd 14
    (a node role's line in the plan: 13 calls, now 15 with the Pod Identity agent's)."""
    source = _moto_managed("AmazonEKS_CNI_Policy")
    # the version iam_reference.aws_managed_document's docstring names (checked against the AWS
    # Managed Policy Reference Guide): a moto bump that changes it must re-check that page
    assert (source["DefaultVersionId"], source["UpdateDate"]) == ("v6", "2026-03-04T19:12:14+00:00")
    want = {
        (action, resource)
        for st in source["Document"]["Statement"]
        for action in st["Action"]
        for resource in ([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"])
    }
    caller = Caller("arn:aws:iam::123456789012:role/node", "123456789012", "us-west-2")
    calls = node_role_calls(caller, vpc_cni=True, pod_identity_agent=False)
    got = {(c.request.action, "*" if c.request.resource == "*" else "eni") for c in calls}
    want_shape = {(a, "*" if r == "*" else "eni") for a, r in want}
    assert got == want_shape and len(calls) == len(want) == 14
    assert {"ec2:DescribeTags", "ec2:DescribeSecurityGroups"} <= {a for a, _ in got}
    eni = [c.request.resource for c in calls if c.request.action == "ec2:CreateTags"]
    assert eni == ["arn:aws:ec2:us-west-2:123456789012:network-interface/eni-0123"]
    assert all(c.allowed for c in calls)
    # and the Pod Identity agent's exchange on top, only with the agent
    with_agent = node_role_calls(caller, vpc_cni=False, pod_identity_agent=True)
    assert [c.request.action for c in with_agent] == ["eks-auth:AssumeRoleForPodIdentity"]
