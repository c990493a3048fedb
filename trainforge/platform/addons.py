"""Which build of an EKS add-on to install.

A build pinned with a source for the cluster's Kubernetes minor is installed as pinned. For an
add-on whose build for that minor no public record confirmed (versions.EKS_ADDONS_ASKED_AT_PREVIEW),
the program asks EKS at preview for its default build for the minor: EKS rejects a build it
does not offer for the cluster's version, so an unconfirmed pin could fail a real `pulumi up`
that every schema accepted. The answer is a fact from AWS, recorded in Pulumi's state like a
pin; it changes when the Kubernetes minor changes (which is the upgrade path) or when AWS moves
the minor's default build, which shows in `pulumi preview` as an in-place add-on update.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from trainforge.core import versions


def pin(name: str) -> str:
    """The build versions.py pins for add-on `name` (KeyError for an add-on it does not pin)."""
    others = {
        "aws-fsx-csi-driver": versions.FSX_CSI_ADDON_VERSION,
        "eks-node-monitoring-agent": versions.EKS_NODE_MONITORING_AGENT_VERSION,
    }
    return (
        versions.EKS_ADDON_VERSIONS[name] if name in versions.EKS_ADDON_VERSIONS else others[name]
    )


def addon_version(name: str) -> pulumi.Input[str]:
    """The build of add-on `name` for versions.KUBERNETES_VERSION."""
    if name not in versions.EKS_ADDONS_ASKED_AT_PREVIEW:
        return pin(name)
    return aws.eks.get_addon_version_output(
        addon_name=name,
        kubernetes_version=versions.KUBERNETES_VERSION,
        most_recent=False,
    ).version
