"""Reference policies (upstream and AWS managed) and the AWS calls each controller makes.

Why vendored: the offline plan has no network and must not read /work/shared at run time, so
the documents we compare against ship with the package (trainforge/plan/data/iam_reference.json
and karpenter_controller_policy.json), each with where and when it was taken noted here. They are
copied as published (only the CloudFormation `${...}` substitutions are filled in); update
them with the pinned version in trainforge/core/versions.py.

A controller's calls cannot be recorded the way the runtime's are (we do not run Karpenter or
the CSI drivers), so each controller's list below is derived from its reference policy and its
source (which API calls it makes and with which tags), and is written as requests with the
context AWS would see. Each list also holds calls that must be DENIED: the guard rails the
reference policy exists for (Karpenter must never terminate a node it did not launch).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trainforge.plan.checks.iam_eval import Policy, Request


def _data(name: str) -> str:
    return resources.files("trainforge.plan").joinpath("data", name).read_text()


_DOCS: dict[str, dict] = json.loads(_data("iam_reference.json"))

# --------------------------------------------------------------------------------------------
# AWS managed policies (documents as shown in the AWS Managed Policy Reference Guide,
# docs.aws.amazon.com/aws-managed-policy/latest/reference/<Name>.html, checked 2026-11-23)

AMAZON_EKS_WORKER_NODE_POLICY = _DOCS["AmazonEKSWorkerNodePolicy"]

AMAZON_EKS_CNI_POLICY = _DOCS["AmazonEKS_CNI_Policy"]

# aws-ebs-csi-driver docs/example-iam-policy.json (github.com/kubernetes-sigs/
# aws-ebs-csi-driver; identical at tags v1.46.0 and v1.50.1, the pinned add-on's driver
# version, checked 2026-11-23). Its docs/install.md: "AWS maintains a
# managed policy version of the example policy ... arn:aws:iam::aws:policy/service-role/
# AmazonEBSCSIDriverPolicy".
AMAZON_EBS_CSI_DRIVER_POLICY = _DOCS["AmazonEBSCSIDriverPolicy"]
# The same driver's docs/install.md, "Encrypted EBS Volumes via KMS": a customer-key
# StorageClass needs these on the key (kms:CreateGrant so EC2 can use the key for the volume).
EBS_CSI_KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:CreateGrant")

EBS_CSI_DRIVER_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"

# AWS managed policies by ARN (the partition is normalised to "aws" before lookup). Policies we
# attach but never rehearse (ECR pull, SSM) are listed as None: known, not evaluated.
MANAGED_POLICIES: dict[str, dict | None] = {
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy": AMAZON_EKS_WORKER_NODE_POLICY,
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy": AMAZON_EKS_CNI_POLICY,
    EBS_CSI_DRIVER_POLICY_ARN: AMAZON_EBS_CSI_DRIVER_POLICY,
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly": None,
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore": None,
}


def managed_policy(arn: str) -> tuple[bool, Policy | None]:
    """(known, policy) for an AWS managed policy ARN in any partition."""
    parts = arn.split(":")
    if len(parts) > 1:
        parts[1] = "aws"
    key = ":".join(parts)
    if key not in MANAGED_POLICIES:
        return False, None
    doc = MANAGED_POLICIES[key]
    return True, (Policy(f"managed {arn.rsplit('/', 1)[-1]}", doc) if doc else None)


def default_key_policy(account: str, partition: str = "aws") -> Policy:
    """The key policy KMS gives a key created without one (KMS Developer Guide, "Default key
    policy"): the account may use the key as its IAM policies allow."""
    return Policy(
        "default key policy",
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Enable IAM User Permissions",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                }
            ],
        },
    )


# --------------------------------------------------------------------------------------------
# Karpenter's reference controller policy

# github.com/aws/karpenter-provider-aws, tag v1.14.1 (commit bde00654), website/content/en/
# docs/getting-started/getting-started-with-karpenter/cloudformation.yaml, the five
# KarpenterController*Policy documents (checked 2026-11-23). ${...} are filled in by
# `karpenter_reference`.
KARPENTER_REFERENCE_VERSION = "1.14.1"
_KARPENTER_CFN = _data("karpenter_controller_policy.json")


@dataclass(frozen=True)
class KarpenterFacts:
    """What Karpenter's policy and calls are parameterised by."""

    cluster: str
    region: str
    account: str
    queue_arn: str
    node_role_arn: str
    node_pools: tuple[str, ...] = ("default",)
    node_classes: tuple[str, ...] = ("default",)
    partition: str = "aws"

    def fill(self, text: str) -> str:
        for k, v in {
            "${P}": self.partition,
            "${R}": self.region,
            "${A}": self.account,
            "${C}": self.cluster,
            "${QUEUE}": self.queue_arn,
            "${NODE_ROLE}": self.node_role_arn,
        }.items():
            text = text.replace(k, v)
        return text


def karpenter_reference_statements(f: KarpenterFacts) -> list[dict]:
    return json.loads(f.fill(_KARPENTER_CFN))


def karpenter_reference(f: KarpenterFacts) -> Policy:
    return Policy(
        f"Karpenter v{KARPENTER_REFERENCE_VERSION} reference policy",
        {"Version": "2012-10-17", "Statement": karpenter_reference_statements(f)},
    )


@dataclass(frozen=True)
class ExpectedCall:
    """A call a controller makes (must be allowed) or must never be able to make (denied)."""

    request: Request
    allowed: bool
    why: str


def _caller(principal: str, account: str, region: str) -> Callable[..., Request]:
    """A builder of the principal's requests in the region (aws:PrincipalArn and
    aws:RequestedRegion set, more context keys as keyword arguments)."""

    def req(action: str, resource: str, **ctx: Any) -> Request:
        base = {"aws:PrincipalArn": principal, "aws:RequestedRegion": region}
        return Request(principal, action, resource, {**base, **ctx}, account=account)

    return req


def karpenter_calls(f: KarpenterFacts, principal: str) -> list[ExpectedCall]:
    """The calls Karpenter v1.14 makes for a NodePool/EC2NodeClass, with the tags it sets
    (karpenter-provider-aws pkg/providers/{instance,launchtemplate,instanceprofile}: every
    launch carries kubernetes.io/cluster/<name>=owned, eks:eks-cluster-name,
    karpenter.sh/nodepool, karpenter.sh/nodeclaim and karpenter.k8s.aws/ec2nodeclass), and the
    calls the reference policy exists to refuse."""
    p, r, a, c = f.partition, f.region, f.account, f.cluster
    ec2 = f"arn:{p}:ec2:{r}:{a}"
    pool, nodeclass = f.node_pools[0], f.node_classes[0]
    launch_tags = {
        f"kubernetes.io/cluster/{c}": "owned",
        "eks:eks-cluster-name": c,
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/nodeclaim": f"{pool}-abcde",
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "Name": f"{pool}-abcde",
    }
    owned = {f"kubernetes.io/cluster/{c}": "owned", "karpenter.sh/nodepool": pool}
    mng_only = {f"kubernetes.io/cluster/{c}": "owned", "eks:nodegroup-name": f"{c}-system"}
    profile_tags = {
        f"kubernetes.io/cluster/{c}": "owned",
        "eks:eks-cluster-name": c,
        "topology.kubernetes.io/region": r,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
    }
    profile = f"arn:{p}:iam::{a}:instance-profile/{c}_123"
    req = _caller(principal, a, r)

    def request_tags(tags: dict[str, str]) -> dict:
        out = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
        out["aws:TagKeys"] = list(tags)
        return out

    def resource_tags(tags: dict[str, str]) -> dict:
        return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}

    calls: list[ExpectedCall] = []
    ok = lambda rq, why: calls.append(ExpectedCall(rq, True, why))  # noqa: E731
    never = lambda rq, why: calls.append(ExpectedCall(rq, False, why))  # noqa: E731
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        for res in (
            f"arn:{p}:ec2:{r}::image/ami-0123",
            f"{ec2}:subnet/subnet-0123",
            f"{ec2}:security-group/sg-0123",
            f"{ec2}:placement-group/{c}-efa",
            f"{ec2}:capacity-reservation/cr-0123",
        ):
            ok(req(action, res), "launch into our subnets/SGs/AMI/placement group")
        ok(
            req(action, f"{ec2}:launch-template/lt-0123", **resource_tags(owned)),
            "launch from its own launch template",
        )
        for kind in ("fleet", "instance", "volume", "network-interface", "spot-instances-request"):
            ok(
                req(action, f"{ec2}:{kind}/x-0123", **request_tags(launch_tags)),
                f"create the {kind} with Karpenter's tags",
            )
    ok(
        req(
            "ec2:CreateLaunchTemplate",
            f"{ec2}:launch-template/lt-0123",
            **request_tags(launch_tags),
        ),
        "create a launch template per NodeClass",
    )
    for kind in ("fleet", "instance", "volume", "network-interface", "launch-template"):
        ok(
            req(
                "ec2:CreateTags",
                f"{ec2}:{kind}/x-0123",
                **request_tags(launch_tags),
                **{"ec2:CreateAction": "CreateFleet"},
            ),
            "tag on create",
        )
    ok(
        req(
            "ec2:CreateTags",
            f"{ec2}:instance/i-0123",
            **resource_tags(owned),
            **request_tags({"Name": "node-a", "karpenter.sh/nodeclaim": f"{pool}-abcde"}),
        ),
        "name and claim its own instance after launch",
    )
    ok(
        req("ec2:TerminateInstances", f"{ec2}:instance/i-0123", **resource_tags(owned)),
        "scale down",
    )
    ok(
        req("ec2:DeleteLaunchTemplate", f"{ec2}:launch-template/lt-0123", **resource_tags(owned)),
        "garbage-collect launch templates",
    )
    for action in (
        "ec2:DescribeImages",
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeLaunchTemplates",
        "ec2:DescribeSpotPriceHistory",
        "ec2:DescribeCapacityReservations",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeInstanceStatus",
    ):
        ok(req(action, "*"), "discover capacity in the cluster's region")
    ok(
        req("ssm:GetParameter", f"arn:{p}:ssm:{r}::parameter/aws/service/eks/optimized-ami/x"),
        "resolve the AMI alias",
    )
    ok(req("pricing:GetProducts", "*"), "on-demand prices")
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl"):
        ok(req(action, f.queue_arn), "interruption events")
    ok(
        req("iam:PassRole", f.node_role_arn, **{"iam:PassedToService": "ec2.amazonaws.com"}),
        "launch nodes with the node role",
    )
    ok(
        req("iam:CreateInstanceProfile", profile, **request_tags(profile_tags)),
        "instance profile per NodeClass",
    )
    ok(
        req(
            "iam:TagInstanceProfile",
            profile,
            **resource_tags(profile_tags),
            **request_tags(profile_tags),
        ),
        "tag its instance profile",
    )
    for action in (
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
    ):
        ok(req(action, profile, **resource_tags(profile_tags)), "manage its instance profile")
    ok(req("iam:GetInstanceProfile", profile), "read its instance profile")
    ok(req("iam:ListInstanceProfiles", "*"), "garbage-collect instance profiles")
    ok(req("eks:DescribeCluster", f"arn:{p}:eks:{r}:{a}:cluster/{c}"), "API endpoint discovery")
    ok(
        req(
            "arc-zonal-shift:GetManagedResource",
            "*",
            **{"arc-zonal-shift:ResourceIdentifier": f"arn:{p}:eks:{r}:{a}:cluster/{c}"},
        ),
        "zonal shift status",
    )

    # guard rails: what the reference policy's conditions exist to refuse
    never(
        req("ec2:TerminateInstances", f"{ec2}:instance/i-system", **resource_tags(mng_only)),
        "a managed-node-group (system or reserved) instance carries only the cluster tag",
    )
    never(
        req(
            "ec2:CreateTags",
            f"{ec2}:instance/i-0123",
            **resource_tags(owned),
            **request_tags({"karpenter.sh/nodepool": "other"}),
        ),
        "re-tagging an instance into another NodePool (aws:TagKeys limit)",
    )
    never(
        req("ec2:CreateFleet", f"{ec2}:instance/x-0123", **request_tags({"Name": "x"})),
        "launching an instance without the cluster and nodepool tags",
    )
    never(
        req("iam:AddRoleToInstanceProfile", f"arn:{p}:iam::{a}:instance-profile/admin"),
        "an instance profile Karpenter did not create",
    )
    never(
        req(
            "iam:PassRole",
            f"arn:{p}:iam::{a}:role/cluster-admin",
            **{"iam:PassedToService": "ec2.amazonaws.com"},
        ),
        "passing any role but the node role",
    )
    never(
        req("ec2:DescribeInstances", "*", **{"aws:RequestedRegion": "eu-north-1"}),
        "reading another region",
    )
    return calls


# --------------------------------------------------------------------------------------------
# CSI drivers


def ebs_csi_calls(
    principal: str,
    account: str,
    region: str,
    kms_keys: list[str],
    partition: str = "aws",
) -> list[ExpectedCall]:
    """What the EBS CSI controller does for a dynamically provisioned gp3 volume (its
    pkg/cloud: CreateVolume with CSIVolumeName and ebs.csi.aws.com/cluster tags, then attach,
    detach, delete) and, for a customer-key StorageClass, the KMS calls EC2 makes for it."""
    ec2 = f"arn:{partition}:ec2:{region}:{account}"
    vol = f"{ec2}:volume/vol-0123"
    tags = {"CSIVolumeName": "pvc-1", "ebs.csi.aws.com/cluster": "true"}
    req = _caller(principal, account, region)

    rt = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    res = {f"ec2:ResourceTag/{k}": v for k, v in tags.items()}
    calls = [
        ExpectedCall(
            req("ec2:CreateVolume", vol, **rt, **{"aws:TagKeys": list(tags)}),
            True,
            "provision a PVC",
        ),
        ExpectedCall(
            req("ec2:CreateTags", vol, **rt, **{"ec2:CreateAction": "CreateVolume"}),
            True,
            "tag on create",
        ),
        ExpectedCall(req("ec2:AttachVolume", vol), True, "attach to the node"),
        ExpectedCall(req("ec2:AttachVolume", f"{ec2}:instance/i-0123"), True, "attach to the node"),
        ExpectedCall(req("ec2:DetachVolume", vol), True, "detach"),
        ExpectedCall(req("ec2:DetachVolume", f"{ec2}:instance/i-0123"), True, "detach"),
        ExpectedCall(req("ec2:DeleteVolume", vol, **res), True, "delete a released PV"),
        ExpectedCall(req("ec2:DescribeVolumes", "*"), True, "wait for the volume"),
        ExpectedCall(req("ec2:DescribeInstances", "*"), True, "find the node"),
        ExpectedCall(req("ec2:DescribeAvailabilityZones", "*"), True, "topology"),
        ExpectedCall(
            req("ec2:DeleteVolume", f"{ec2}:volume/vol-foreign"),
            False,
            "a volume the driver did not create (no CSI tags)",
        ),
    ]
    for key in kms_keys:
        for action in EBS_CSI_KMS_ACTIONS:
            ctx = {"kms:ViaService": f"ec2.{region}.amazonaws.com", "kms:CallerAccount": account}
            calls.append(ExpectedCall(req(action, key, **ctx), True, "customer-key StorageClass"))
    return calls


# aws-fsx-csi-driver v1.5.0 docs/install.md (tag v1.5.0, checked 2026-11-23): the policy for
# the instance-profile method (the IRSA method attaches the broader AmazonFSxFullAccess).
FSX_CSI_REFERENCE = _DOCS["FsxCsiReference"]


def fsx_csi_calls(
    principal: str, account: str, region: str, file_systems: list[str]
) -> list[ExpectedCall]:
    """Static provisioning (aws-fsx-csi-driver v1.5.0 pkg/driver/controller.go):
    ValidateVolumeCapabilities and ControllerExpandVolume call DescribeFileSystems, expansion
    UpdateFileSystem; CreateVolume/DeleteVolume (dynamic provisioning) are not used."""
    req = _caller(principal, account, region)
    calls = [ExpectedCall(req("fsx:DescribeFileSystems", "*"), True, "validate a static volume")]
    for fs in file_systems:
        calls.append(ExpectedCall(req("fsx:UpdateFileSystem", fs), True, "expand the file system"))
    calls.append(
        ExpectedCall(
            req("fsx:DeleteFileSystem", f"arn:aws:fsx:{region}:{account}:file-system/fs-0123"),
            False,
            "static provisioning never deletes a file system",
        )
    )
    return calls


def vpc_cni_calls(principal: str, account: str, region: str) -> list[ExpectedCall]:
    """What the VPC CNI's ipamd does on a node (AmazonEKS_CNI_Policy's actions)."""
    req = _caller(principal, account, region)
    actions = [
        "ec2:AssignPrivateIpAddresses",
        "ec2:AttachNetworkInterface",
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeInstances",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeSubnets",
        "ec2:DetachNetworkInterface",
        "ec2:ModifyNetworkInterfaceAttribute",
        "ec2:UnassignPrivateIpAddresses",
    ]
    calls = [ExpectedCall(req(a, "*"), True, "pod IPs") for a in actions]
    eni = f"arn:aws:ec2:{region}:{account}:network-interface/eni-0123"
    return [*calls, ExpectedCall(req("ec2:CreateTags", eni), True, "tag ENIs")]


def pod_identity_agent_calls(principal: str, account: str, region: str) -> list[ExpectedCall]:
    """The EKS Pod Identity agent exchanges tokens with the node's role (EKS User Guide,
    "EKS Pod Identity agent": the node role needs eks-auth:AssumeRoleForPodIdentity, which
    AmazonEKSWorkerNodePolicy includes)."""
    rq = _caller(principal, account, region)("eks-auth:AssumeRoleForPodIdentity", "*")
    return [ExpectedCall(rq, True, "credentials for pods with a Pod Identity association")]
