"""Small IAM helpers: trust policies and managed-policy ARNs (JSON written here, no invokes)."""

from __future__ import annotations

import json

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


def pod_identity_trust() -> str:
    """Trust policy for EKS Pod Identity (the agent assumes the role for a ServiceAccount)."""
    return assume_role_policy("pods.eks.amazonaws.com", tag_session=True)
