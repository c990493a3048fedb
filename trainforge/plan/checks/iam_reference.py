"""Reference policies (upstream and AWS managed) and the AWS calls each controller makes.

The documents are package data (plan/data/iam_reference.json, karpenter_controller_policy.json:
the offline plan has no network) or, for AWS managed policies (AmazonEBSCSIDriverPolicy too),
moto's bundled copy of AWS's (`aws_managed_document`), each one's source and date noted where
it is read. Why the
calls are derived, not recorded: docs/rehearsals.md, IAM rehearsal.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trainforge.core.labels import KARPENTER_NODEPOOL, REGION, cluster_tag
from trainforge.plan.checks.aws_calls import Caller
from trainforge.plan.checks.iam_eval import Policy, Request, as_list


def _data(name: str) -> str:
    return resources.files("trainforge.plan").joinpath("data", name).read_text()


_DOCS: dict[str, dict] = json.loads(_data("iam_reference.json"))

# The EBS CSI controller's policy is AWS's managed AmazonEBSCSIDriverPolicy (aws-ebs-csi-driver
# docs/install.md: "AWS maintains a managed policy version of the example policy ...
# arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"), and it is judged as AWS
# serves it: moto's bundled copy (`aws_managed_document`), the policy we attach, not the
# driver's docs/example-iam-policy.json (a hand copy of v1.50.1's, checked 2026-11-23, read
# here until 2026-12-01). They differ: the managed policy's default version (v15 in moto
# 5.2.5, updated 2026-05-13) also allows ec2:CopyVolumes, ec2:LockSnapshot and
# ec2:DescribeInstanceTypes, so judging the attachment by the example policy rehearsed a
# policy nobody attaches. `managed_version` says which version a finding compared.
EBS_CSI_DRIVER_POLICY = "AmazonEBSCSIDriverPolicy"
# The same driver's docs/install.md, "Encrypted EBS Volumes via KMS": a customer-key
# StorageClass needs these on the key (kms:CreateGrant so EC2 can use the key for the volume).
EBS_CSI_KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:CreateGrant")

EBS_CSI_DRIVER_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"


def aws_managed_document(name: str) -> dict:
    """An AWS managed policy's default-version document, from the copy moto (pinned,
    requirements.lock) bundles: moto/iam/aws_managed_policies.py, imported from AWS by its
    `make aws_managed_policies`. One source, never a hand copy: a copy drifts (ours of
    AmazonEKS_CNI_Policy missed ec2:DescribeTags and ec2:DescribeSecurityGroups). moto 5.2.5
    carries AmazonEKS_CNI_Policy v6 (UpdateDate 2026-03-04T19:12:14) and
    AmazonEKSWorkerNodePolicy v3 (2023-11-27), the default versions the AWS Managed Policy
    Reference Guide shows (docs.aws.amazon.com/aws-managed-policy/latest/reference/<Name>.html,
    checked 2026-12-01). Read without importing moto (which only the IAM rehearsal's child
    process needs), like plan/mocks.py's EC2 tables."""
    return _aws_managed()[name]["Document"]


def managed_version(name: str) -> str:
    """`v15 of 2026-05-13, moto 5.2.5's copy`: which AWS managed policy document a finding
    compared (its default version and update date as moto's copy records them, and the moto
    release bundling it, read from its installed metadata)."""
    entry = _aws_managed()[name]
    date = str(entry.get("UpdateDate", "?"))[:10]
    return f"{entry.get('DefaultVersionId', '?')} of {date}, moto {_moto_release()}'s copy"


def _moto_release() -> str:
    from importlib.metadata import version  # noqa: PLC0415 - only when a finding is written

    return version("moto")


@functools.cache
def _aws_managed() -> dict[str, dict]:
    from trainforge.plan.mocks import moto_file  # noqa: PLC0415 - the plan has it loaded

    text = moto_file(
        "iam", "aws_managed_policies.py"
    ).read_text()  # aws_managed_policies_data = """{...}"""
    return json.loads(text[text.index('"""') + 3 : text.rindex('"""')])


# AWS managed policies by ARN (the partition is normalised to "aws" before lookup): the name
# of the document to read (`aws_managed_document`), or None for those we attach but never
# rehearse (ECR pull, SSM): known, not evaluated.
MANAGED_POLICIES: dict[str, str | None] = {
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy": "AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy": "AmazonEKS_CNI_Policy",
    EBS_CSI_DRIVER_POLICY_ARN: EBS_CSI_DRIVER_POLICY,
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly": None,
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore": None,
}


def managed_policy(arn: str) -> tuple[bool, Policy | None]:
    """(known, policy) for an AWS managed policy ARN in any partition."""
    key = re.sub(r"^arn:[^:]*:", "arn:aws:", arn)
    if key not in MANAGED_POLICIES:
        return False, None
    name = MANAGED_POLICIES[key]
    if name is None:
        return True, None
    return True, Policy(f"managed {arn.rsplit('/', 1)[-1]}", aws_managed_document(name))


def default_key_policy(account: str, partition: str = "aws") -> Policy:
    """The key policy KMS gives a key created without one (KMS Developer Guide, "Default key
    policy"): the account may use the key as its IAM policies allow."""
    root = {"AWS": f"arn:{partition}:iam::{account}:root"}
    st = {"Sid": "Enable IAM User Permissions", "Effect": "Allow", "Principal": root}
    doc = {"Version": "2012-10-17", "Statement": [{**st, "Action": "kms:*", "Resource": "*"}]}
    return Policy("default key policy", doc)


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
    node_pool: str = "default"  # the NodePool and EC2NodeClass its calls are made for
    node_class: str = "default"
    partition: str = "aws"

    def fill(self, text: str) -> str:
        for k, v in (("P", self.partition), ("R", self.region), ("A", self.account),
                     ("C", self.cluster), ("QUEUE", self.queue_arn),
                     ("NODE_ROLE", self.node_role_arn)):  # fmt: skip
            text = text.replace(f"${{{k}}}", v)
        return text


def karpenter_reference(f: KarpenterFacts) -> Policy:
    statements = json.loads(f.fill(_KARPENTER_CFN))
    name = f"Karpenter v{KARPENTER_REFERENCE_VERSION} reference policy"
    return Policy(name, {"Version": "2012-10-17", "Statement": statements})


@dataclass(frozen=True)
class ExpectedCall:
    """A call a controller makes (must be allowed) or must never be able to make (denied)."""

    request: Request
    allowed: bool
    why: str


class _Calls(list[ExpectedCall]):
    """One caller's expected calls, in order: `ok` must be allowed, `never` denied."""

    def __init__(self, caller: Caller) -> None:
        super().__init__()
        self.caller = caller

    def ok(self, action: str, resource: str, why: str, allowed: bool = True, **ctx: Any) -> None:
        self.append(ExpectedCall(self.caller.request(action, resource, **ctx), allowed, why))

    def never(self, action: str, resource: str, why: str, **context: Any) -> None:
        self.ok(action, resource, why, False, **context)


def tag_keys(prefix: str, tags: dict[str, str]) -> dict[str, Any]:
    """Tags as context keys: `<prefix>/<tag>` (aws:RequestTag, aws:ResourceTag, ...)."""
    return {f"{prefix}/{k}": v for k, v in tags.items()}


def request_tags(tags: dict[str, str]) -> dict[str, Any]:
    """The context keys of a request that sets these tags (aws:RequestTag/*, aws:TagKeys)."""
    return {**tag_keys("aws:RequestTag", tags), "aws:TagKeys": list(tags)}


def karpenter_calls(f: KarpenterFacts, principal: str) -> list[ExpectedCall]:
    """The calls Karpenter v1.14 makes for a NodePool/EC2NodeClass, with the tags it sets
    (karpenter-provider-aws pkg/providers/{instance,launchtemplate,instanceprofile}: every
    launch carries kubernetes.io/cluster/<name>=owned, eks:eks-cluster-name,
    karpenter.sh/nodepool, karpenter.sh/nodeclaim and karpenter.k8s.aws/ec2nodeclass), and the
    calls the reference policy exists to refuse."""
    p, r, a, c = f.partition, f.region, f.account, f.cluster
    ec2 = f"arn:{p}:ec2:{r}:{a}"
    pool, claim = f.node_pool, f"{f.node_pool}-abcde"
    owned_key = cluster_tag(c)
    ours = {owned_key: "owned", "eks:eks-cluster-name": c}
    node_class = {"karpenter.k8s.aws/ec2nodeclass": f.node_class}
    claimed = {KARPENTER_NODEPOOL: pool, "karpenter.sh/nodeclaim": claim}
    launch = request_tags({**ours, **claimed, **node_class, "Name": claim})
    owned = tag_keys("aws:ResourceTag", {owned_key: "owned", KARPENTER_NODEPOOL: pool})
    profile_tags = {**ours, REGION: r, **node_class}
    own_profile = tag_keys("aws:ResourceTag", profile_tags)
    new_profile = request_tags(profile_tags)
    profile = f"arn:{p}:iam::{a}:instance-profile/{c}_123"
    cluster = f"arn:{p}:eks:{r}:{a}:cluster/{c}"
    instance, lt = f"{ec2}:instance/i-0123", f"{ec2}:launch-template/lt-0123"
    calls = _Calls(Caller(principal, a, r, p))
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        for res in (f"arn:{p}:ec2:{r}::image/ami-0123", f"{ec2}:subnet/subnet-0123",
                    f"{ec2}:security-group/sg-0123", f"{ec2}:placement-group/{c}-efa",
                    f"{ec2}:capacity-reservation/cr-0123"):  # fmt: skip
            calls.ok(action, res, "launch into our subnets/SGs/AMI/placement group")
        calls.ok(action, lt, "launch from its own launch template", **owned)
        for kind in ("fleet", "instance", "volume", "network-interface", "spot-instances-request"):
            why = f"create the {kind} with Karpenter's tags"
            calls.ok(action, f"{ec2}:{kind}/x-0123", why, **launch)
    on_create = {**launch, "ec2:CreateAction": "CreateFleet"}
    named = {**owned, **request_tags({"Name": "node-a", "karpenter.sh/nodeclaim": claim})}
    # the reads, instance-profile and queue calls are the actions of the reference statements
    # that exist for them
    reference = {st["Sid"]: as_list(st["Action"]) for st in karpenter_reference(f).statements()}
    describe = reference["AllowRegionalReadActions"]
    profile_actions = reference["AllowScopedInstanceProfileActions"]
    sqs = reference["AllowInterruptionQueueActions"]
    to_ec2 = {"iam:PassedToService": "ec2.amazonaws.com"}
    for action, resource, why, ctx in (
        ("ec2:CreateLaunchTemplate", lt, "create a launch template per NodeClass", launch),
        *(
            ("ec2:CreateTags", f"{ec2}:{kind}/x-0123", "tag on create", on_create)
            for kind in ("fleet", "instance", "volume", "network-interface", "launch-template")
        ),
        ("ec2:CreateTags", instance, "name and claim its own instance after launch", named),
        ("ec2:TerminateInstances", instance, "scale down", owned),
        ("ec2:DeleteLaunchTemplate", lt, "garbage-collect launch templates", owned),
        *((action, "*", "discover capacity in the cluster's region", {}) for action in describe),
        ("ssm:GetParameter", f"arn:{p}:ssm:{r}::parameter/aws/service/eks/optimized-ami/x",
         "resolve the AMI alias", {}),
        ("pricing:GetProducts", "*", "on-demand prices", {}),
        *((action, f.queue_arn, "interruption events", {}) for action in sqs),
        ("iam:PassRole", f.node_role_arn, "launch nodes with the node role", to_ec2),
        ("iam:CreateInstanceProfile", profile, "instance profile per NodeClass", new_profile),
        ("iam:TagInstanceProfile", profile, "tag its instance profile",
         {**own_profile, **new_profile}),
        *((action, profile, "manage its instance profile", own_profile)
          for action in profile_actions),
        ("iam:GetInstanceProfile", profile, "read its instance profile", {}),
        ("iam:ListInstanceProfiles", "*", "garbage-collect instance profiles", {}),
        ("eks:DescribeCluster", cluster, "API endpoint discovery", {}),
        ("arc-zonal-shift:GetManagedResource", "*", "zonal shift status",
         {"arc-zonal-shift:ResourceIdentifier": cluster}),
    ):  # fmt: skip
        calls.ok(action, resource, why, **ctx)

    # guard rails: what the reference policy's conditions exist to refuse
    system = {owned_key: "owned", "eks:nodegroup-name": f"{c}-system"}
    for action, resource, why, ctx in (
        ("ec2:TerminateInstances", f"{ec2}:instance/i-system",
         "a managed-node-group (system or reserved) instance carries only the cluster tag",
         tag_keys("aws:ResourceTag", system)),
        ("ec2:CreateTags", instance,
         "re-tagging an instance into another NodePool (aws:TagKeys limit)",
         {**owned, **request_tags({KARPENTER_NODEPOOL: "other"})}),
        ("ec2:CreateFleet", f"{ec2}:instance/x-0123",
         "launching an instance without the cluster and nodepool tags",
         request_tags({"Name": "x"})),
        ("iam:AddRoleToInstanceProfile", f"arn:{p}:iam::{a}:instance-profile/admin",
         "an instance profile Karpenter did not create", {}),
        ("iam:PassRole", f"arn:{p}:iam::{a}:role/cluster-admin",
         "passing any role but the node role", to_ec2),
        ("ec2:DescribeInstances", "*", "reading another region",
         {"aws:RequestedRegion": "eu-north-1"}),
    ):  # fmt: skip
        calls.never(action, resource, why, **ctx)
    return calls


def ebs_csi_calls(caller: Caller, kms_keys: list[str]) -> list[ExpectedCall]:
    """What the EBS CSI controller does for a dynamically provisioned gp3 volume (its
    pkg/cloud: CreateVolume with CSIVolumeName and ebs.csi.aws.com/cluster tags, then attach,
    detach, delete) and, for a customer-key StorageClass, the KMS calls EC2 makes for it."""
    vol, instance = caller.arn("ec2", "volume/vol-0123"), caller.arn("ec2", "instance/i-0123")
    tags = {"CSIVolumeName": "pvc-1", "ebs.csi.aws.com/cluster": "true"}
    calls = _Calls(caller)
    calls.ok("ec2:CreateVolume", vol, "provision a PVC", **request_tags(tags))
    on_create = {**tag_keys("aws:RequestTag", tags), "ec2:CreateAction": "CreateVolume"}
    calls.ok("ec2:CreateTags", vol, "tag on create", **on_create)
    for action, why in (("ec2:AttachVolume", "attach to the node"), ("ec2:DetachVolume", "detach")):
        calls.ok(action, vol, why)
        calls.ok(action, instance, why)
    calls.ok("ec2:DeleteVolume", vol, "delete a released PV", **tag_keys("ec2:ResourceTag", tags))
    calls.ok("ec2:DescribeVolumes", "*", "wait for the volume")
    calls.ok("ec2:DescribeInstances", "*", "find the node")
    calls.ok("ec2:DescribeAvailabilityZones", "*", "topology")
    foreign = caller.arn("ec2", "volume/vol-foreign")
    calls.never("ec2:DeleteVolume", foreign, "a volume the driver did not create (no CSI tags)")
    via_ec2 = {
        "kms:ViaService": f"ec2.{caller.region}.amazonaws.com",
        "kms:CallerAccount": caller.account,
    }
    for key in kms_keys:
        for action in EBS_CSI_KMS_ACTIONS:
            calls.ok(action, key, "customer-key StorageClass", **via_ec2)
    return calls


# aws-fsx-csi-driver v1.5.0 docs/install.md (tag v1.5.0, checked 2026-11-23): the policy for
# the instance-profile method (the IRSA method attaches the broader AmazonFSxFullAccess).
FSX_CSI_REFERENCE = _DOCS["FsxCsiReference"]


def fsx_csi_calls(caller: Caller, file_systems: list[str]) -> list[ExpectedCall]:
    """Static provisioning (aws-fsx-csi-driver v1.5.0 pkg/driver/controller.go):
    ValidateVolumeCapabilities and ControllerExpandVolume call DescribeFileSystems, expansion
    UpdateFileSystem; CreateVolume/DeleteVolume (dynamic provisioning) are not used."""
    calls = _Calls(caller)
    calls.ok("fsx:DescribeFileSystems", "*", "validate a static volume")
    for fs in file_systems:
        calls.ok("fsx:UpdateFileSystem", fs, "expand the file system")
    other = caller.arn("fsx", "file-system/fs-0123")
    calls.never("fsx:DeleteFileSystem", other, "static provisioning never deletes a file system")
    return calls


def node_role_calls(
    caller: Caller, *, vpc_cni: bool, pod_identity_agent: bool
) -> list[ExpectedCall]:
    """A node role's calls: the EKS Pod Identity agent's token exchange (EKS User Guide, "EKS
    Pod Identity agent": eks-auth:AssumeRoleForPodIdentity, in AmazonEKSWorkerNodePolicy), then
    what the VPC CNI's ipamd does on the node (AmazonEKS_CNI_Policy's actions)."""
    calls = _Calls(caller)
    if pod_identity_agent:
        why = "credentials for pods with a Pod Identity association"
        calls.ok("eks-auth:AssumeRoleForPodIdentity", "*", why)
    if vpc_cni:
        for action, resource in cni_actions():
            if resource == "*":
                calls.ok(action, "*", "pod IPs")
            else:  # the ENI-tagging statement: arn:aws:ec2:*:*:network-interface/*
                eni = resource.rsplit(":", 1)[-1].replace("*", "eni-0123")
                calls.ok(action, caller.arn("ec2", eni), "tag ENIs")
    return calls


def cni_actions() -> list[tuple[str, str]]:
    """(action, resource) for each action AmazonEKS_CNI_Policy allows, read from the policy
    itself: ipamd's calls are exactly what AWS grants it for (the EKS User Guide, "AWS managed
    policy: AmazonEKS_CNI_Policy"), so a list of our own would only drift from it."""
    out = []
    for st in as_list(aws_managed_document("AmazonEKS_CNI_Policy")["Statement"]):
        if st.get("Effect") == "Allow":
            for resource in as_list(st["Resource"]):
                out += [(action, resource) for action in as_list(st["Action"])]
    return out
