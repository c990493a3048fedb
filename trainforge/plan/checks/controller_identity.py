"""Plan check: every add-on and controller that calls AWS has an identity with what it needs.

Why: an add-on installs fine without IAM and then fails at run time (the EBS CSI driver with
no role leaves every gp3 claim Pending). What counts as an identity, and why an add-on missing
from ADDONS/CHARTS is itself a finding: docs/rehearsals.md, Controller identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.iam_eval import Policy, action_matches, as_list
from trainforge.plan.checks.iam_stack import RoleFacts, StackIam, stack_iam
from trainforge.plan.checks.ordering import chart_name
from trainforge.plan.checks.rules import EKS_TYPES
from trainforge.plan.resource_types import CHART_V4, EKS_ADDON, HELM_RELEASE

MISSING = "TRAINFORGE_CONTROLLER_IDENTITY"
UNKNOWN_CONTROLLER = "TRAINFORGE_CONTROLLER_UNKNOWN"
RULES = {
    MISSING: "give the add-on/controller an identity for its ServiceAccount (an "
    "aws.eks.PodIdentityAssociation to a role with the policy its docs require), as "
    "cluster.py does for aws-ebs-csi-driver",
    UNKNOWN_CONTROLLER: "add the add-on or chart to trainforge/plan/checks/controller_identity.py "
    "(ADDONS or CHARTS): its ServiceAccount and the AWS actions its docs require, or None if "
    "it makes no AWS calls",
}


@dataclass(frozen=True)
class Needs:
    """What one add-on or controller needs from AWS IAM."""

    service_account: str  # "namespace/name"; namespace "*" = the release's namespace
    actions: tuple[str, ...]  # a representative set its docs require
    docs: str
    node_role_ok: bool = False  # its docs allow the node role instead of a pod identity

    def where(self, release_namespace: str, values: dict | None = None) -> tuple[str, str]:
        """(namespace, ServiceAccount); a chart's `serviceAccount.name` value renames it."""
        ns, _, sa = self.service_account.partition("/")
        sa = str(((values or {}).get("serviceAccount") or {}).get("name") or sa)
        return (release_namespace if ns == "*" else ns), sa


_CNI = Needs(
    "kube-system/aws-node",
    ("ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:AttachNetworkInterface"),
    "EKS User Guide, 'Configure Amazon VPC CNI plugin to use IRSA': AmazonEKS_CNI_Policy on "
    "an IRSA/Pod Identity role, or on the node role",
    node_role_ok=True,
)
_NO_AWS_ADDONS = ("coredns", "kube-proxy", "eks-node-monitoring-agent", "snapshot-controller",
    "metrics-server")  # fmt: skip
# EKS add-ons by name; None = makes no AWS calls of its own.
ADDONS: dict[str, Needs | None] = {
    "vpc-cni": _CNI,
    # eks-node-monitoring-agent: no AWS API calls: it reads node logs and IMDS metadata (the
    # instance id, no IAM) and uploads NodeDiagnostic logs to a presigned URL the requester
    # provides. source: github.com/aws/eks-node-monitoring-agent v1.7.0 (aws-sdk-go-v2 outside
    # e2e/ only in pkg/log_collector: feature/ec2/imds; pkg/controllers/nodediagnostic.go: HTTP
    # PUT to the given URL), checked 2026-11-23
    **dict.fromkeys(_NO_AWS_ADDONS),
    "eks-pod-identity-agent": Needs(
        "kube-system/eks-pod-identity-agent",
        ("eks-auth:AssumeRoleForPodIdentity",),
        "EKS User Guide, 'Set up the Amazon EKS Pod Identity Agent': the node role needs "
        "eks-auth:AssumeRoleForPodIdentity (in AmazonEKSWorkerNodePolicy)",
        node_role_ok=True,
    ),
    "aws-ebs-csi-driver": Needs(
        "kube-system/ebs-csi-controller-sa",
        ("ec2:CreateVolume", "ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume"),
        "aws-ebs-csi-driver docs/install.md: AmazonEBSCSIDriverPolicy",
    ),
    "aws-fsx-csi-driver": Needs(
        "kube-system/fsx-csi-controller-sa",
        ("fsx:DescribeFileSystems",),
        "aws-fsx-csi-driver docs/install.md (static provisioning: DescribeFileSystems, "
        "UpdateFileSystem to expand)",
    ),
    "aws-efs-csi-driver": Needs(
        "kube-system/efs-csi-controller-sa",
        ("elasticfilesystem:DescribeAccessPoints", "elasticfilesystem:CreateAccessPoint"),
        "aws-efs-csi-driver docs: AmazonEFSCSIDriverPolicy",
    ),
    "aws-mountpoint-s3-csi-driver": Needs(
        "kube-system/s3-csi-driver-sa",
        ("s3:ListBucket", "s3:GetObject"),
        "mountpoint-s3-csi-driver docs: a policy for the mounted buckets",
    ),
    "amazon-cloudwatch-observability": Needs(
        "amazon-cloudwatch/cloudwatch-agent",
        ("logs:PutLogEvents", "cloudwatch:PutMetricData"),
        "EKS User Guide: CloudWatchAgentServerPolicy",
    ),
}

_NO_AWS_CHARTS = ("karpenter-crd", "nvidia-device-plugin", "aws-efa-k8s-device-plugin",
    "kube-prometheus-stack", "dcgm-exporter", "mlflow", "kubeflow-trainer", "jobset", "kueue",
    "opencost")  # fmt: skip
_KARPENTER_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances", "ec2:TerminateInstances",
    "iam:PassRole", "sqs:ReceiveMessage", "ssm:GetParameter", "pricing:GetProducts",
    "eks:DescribeCluster")  # fmt: skip
# Helm charts by chart name (the last path element of `chart`); None = no AWS calls:
# Kubeflow Trainer v2 and JobSet (backend trainjob) use the Kubernetes API only; so does Kueue
# (its Helm values create no AWS identity; no cloud provider integration is configured).
# OpenCost (trainforge.platform.opencost), as configured here: the AWS provider downloads
# the public Price List over HTTPS (pricing.us-east-1.amazonaws.com, no signature, no
# identity); its AWS integrations that need one (spot data feed in S3, Athena/CUR cloud
# costs) are not configured. For a spot node it may also try EC2's spot price history
# (pkg/cloud/aws/spotpricehistory.go): with no identity (no role, IMDS hop limit 1) that
# call fails and the node keeps its on-demand price (provider.go createNode). Deliberately
# granted nothing. source: opencost/opencost pkg/cloud/aws/provider.go, checked 2026-11-27
CHARTS: dict[str, Needs | None] = {
    "karpenter": Needs(
        "*/karpenter",
        _KARPENTER_ACTIONS,
        "Karpenter docs, 'Reference: CloudFormation' (KarpenterController*Policy)",
    ),
    **dict.fromkeys(_NO_AWS_CHARTS),
}


def _grants(policies: list[Policy], action: str) -> bool:
    return any(
        st.get("Effect") == "Allow" and action_matches(st.get("Action"), action)
        for p in policies
        for st in p.statements()
    )


def _irsa_roles(stack: StackIam, namespace: str, sa: str) -> list[RoleFacts]:
    """Roles whose trust lets the ServiceAccount's OIDC token assume them (a `...:sub` key)."""
    subject = f"system:serviceaccount:{namespace}:{sa}"
    return [
        role
        for role in stack.roles.values()
        for st, _ in role.trusted("Federated")
        for keys in (st.get("Condition") or {}).values()
        for key, values in keys.items()
        if key.endswith(":sub") and subject in as_list(values)
    ]


def find_identity(
    stack: StackIam, inv: Any, namespace: str, sa: str, addon: str | None, needs: Needs
) -> tuple[str, list[RoleFacts]] | None:
    """(how, roles) of the ServiceAccount's identity, in the order AWS's SDKs look for one."""
    roles = stack.roles_for(namespace, sa)
    if roles:
        return "EKS Pod Identity", roles
    for rec in inv.resources if addon is not None else []:
        if rec.type == EKS_ADDON and rec.inputs.get("addonName") == addon:
            urns = rec.dependencies.get("serviceAccountRoleArn") or [None]
            role = stack.role(urns[0]) or stack.role(rec.inputs.get("serviceAccountRoleArn"))
            if role is not None:
                return "IRSA (add-on serviceAccountRoleArn)", [role]
    irsa = _irsa_roles(stack, namespace, sa)
    if irsa:
        return "IRSA", irsa
    if needs.node_role_ok and stack.node_roles():
        return "node role", stack.node_roles()
    return None


def _finding(label: str, rule: str, message: str, urn: str, *names: str) -> Finding:
    return Finding(label, rule, message, RULES[rule], urn=urn, names=frozenset(names))


def check(ctx: PlanContext) -> CheckResult:
    if not any(r.type in EKS_TYPES for r in ctx.inventory.resources):
        # Charts installed into a cluster this stack does not declare: their identities live
        # wherever that cluster is managed, so there is nothing here to check them against.
        note = "no EKS cluster in this stack: add-on and controller identities not checked"
        return CheckResult([], [Section("Controller identity", [note], {"controllers": []})])
    inv, stack = stack_iam(ctx)
    findings: list[Finding] = []
    lines, data = [], []
    for rec in inv.resources:
        if rec.type == EKS_ADDON:
            kind, name, ns, values = "add-on", str(rec.inputs.get("addonName")), "kube-system", {}
        elif rec.type in (HELM_RELEASE, CHART_V4):
            kind, name = "chart", chart_name(rec)
            ns = str(rec.inputs.get("namespace") or "default")
            values = rec.inputs.get("values") or {}
        else:
            continue
        table, label = ADDONS if kind == "add-on" else CHARTS, f"{kind} {name}"
        if name not in table:
            msg = (
                f"{label} is installed but trainforge does not know whether it calls AWS, "
                "so nobody checked that it has an identity"
            )
            findings.append(_finding(label, UNKNOWN_CONTROLLER, msg, rec.urn, name))
            continue
        needs, row = table[name], {"name": name, "kind": kind, "identity": None}
        data.append(row)
        if needs is None:
            lines.append(f"{label}: makes no AWS calls")
            continue
        namespace, sa = needs.where(ns, values)
        ident = find_identity(stack, inv, namespace, sa, name if kind == "add-on" else None, needs)
        if ident is None:
            msg = (
                f"{label} calls AWS as {namespace}/{sa} but has no identity: no Pod Identity "
                f"association, no IRSA role{', no node role' if needs.node_role_ok else ''}"
                f" (needs {', '.join(needs.actions)}; {needs.docs})"
            )
            findings.append(_finding(label, MISSING, msg, rec.urn, name))
            row["identity"] = "missing"
            continue
        how, roles = ident
        for role in roles:
            if missing := [a for a in needs.actions if not _grants(role.policies, a)]:
                msg = (
                    f"{label}: its identity ({how}, {role.label}) does not grant "
                    f"{', '.join(missing)} ({needs.docs})"
                )
                findings.append(_finding(label, MISSING, msg, rec.urn, name, role.name))
        labels = ", ".join(r.label for r in roles)
        lines.append(f"{label}: {namespace}/{sa} via {how} ({labels})")
        row.update(identity=how, roles=labels)
    return CheckResult(findings, [Section("Controller identity", lines, {"controllers": data})])
