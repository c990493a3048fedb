"""Small IAM helpers: trust policies and managed-policy ARNs (JSON written here, no invokes)."""

from __future__ import annotations

import json

import pulumi

NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    # SSM: shell access to nodes without SSH keys or open ports.
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def assume_role_policy(service: str, *, tag_session: bool = False) -> str:
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}
            ],
        }
    )


def pod_identity_trust(
    account: str | None, cluster: str, namespace: str, service_account: str
) -> str:
    """Trust policy for a role that exactly one ServiceAccount gets through EKS Pod Identity.

    Pod Identity assumes the role with sts:AssumeRole and passes session tags
    (sts:TagSession) naming the cluster, namespace and ServiceAccount of the pod; conditioning
    on those tags means that only an association for that ServiceAccount can use the role,
    even if someone creates another association pointing at it (EKS User Guide, "Create IAM
    role with trust policy required by EKS Pod Identity"). aws:SourceAccount guards against
    the confused deputy across accounts. The plan's IAM rehearsal assumes each role as its
    own association and as another one (docs/rehearsals.md).
    """
    equals: dict[str, str] = {
        "aws:RequestTag/eks-cluster-name": cluster,
        "aws:RequestTag/kubernetes-namespace": namespace,
        "aws:RequestTag/kubernetes-service-account": service_account,
    }
    if account:
        equals["aws:SourceAccount"] = account
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {"StringEquals": equals},
                }
            ],
        }
    )


def pod_identity_trust_output(
    account: str | None,
    cluster: pulumi.Input[str],
    namespace: pulumi.Input[str],
    service_account: str,
) -> pulumi.Output[str]:
    """`pod_identity_trust` for inputs that may be Outputs (a cluster or namespace name)."""
    return pulumi.Output.all(cluster, namespace).apply(
        lambda a: pod_identity_trust(account, str(a[0]), str(a[1]), service_account)
    )
