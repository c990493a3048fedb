"""The Kubernetes provider a component applies its objects with.

The training operator's and Trainer's CRDs are too large for client-side apply (their
last-applied annotation would exceed 256 KiB), so they need server-side apply. The platform's
own provider has it on; a component used on its own may be given a kubeconfig instead, and
then makes a provider with server-side apply from it.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


def server_side_apply_provider(
    name: str,
    provider: k8s.Provider,
    kubeconfig: pulumi.Input[str] | None,
    parent: pulumi.Resource,
) -> k8s.Provider:
    """`provider`, or when a kubeconfig is given, a server-side-apply provider made from it."""
    if kubeconfig is None:
        return provider
    return k8s.Provider(
        f"{name}-ssa",
        kubeconfig=kubeconfig,
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(parent=parent),
    )
