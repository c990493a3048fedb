"""The reference facts the IAM rehearsal judges against, read directly (no plan): which AWS
managed policies are known, in every partition, and under what name they are reported."""

from __future__ import annotations

import pytest

from trainforge.plan.checks.iam_reference import (
    EBS_CSI_DRIVER_POLICY_ARN,
    MANAGED_POLICIES,
    managed_policy,
)


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_a_managed_policy_is_known_in_every_partition_under_its_own_name(partition) -> None:
    known, policy = managed_policy(f"arn:{partition}:iam::aws:policy/AmazonEKS_CNI_Policy")
    assert known and policy is not None
    assert policy.name == "managed AmazonEKS_CNI_Policy"
    assert policy.document == MANAGED_POLICIES["arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"]
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
