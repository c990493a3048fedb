"""Where platform pods run and which namespaces may run privileged pods.

Why: training capacity is GPU nodes, often spot; a Prometheus, MLflow or Kueue pod that
lands there holds a GPU node up (Karpenter cannot consolidate it away) and dies with the
next spot interruption. Every platform Deployment/StatefulSet therefore selects the system
node group (on-demand, label `trainforge.io/system=true`, no taints, so no tolerations).

Privilege: the only pods that need host access are node agents: the DCGM exporter (the
kubelet's pod-resources socket, a hostPath) and node-exporter (host network, PID namespace
and root filesystem). They run in their own namespace, `node-agents`, the one platform
namespace that enforces Pod Security `privileged`; every other platform namespace enforces
`baseline` or `restricted`. The NVIDIA and EFA device plugins are not privileged
containers (they drop every capability); they only mount the kubelet's device-plugin
directory, and stay beside the other node components in `kube-system`, the cluster's own
system namespace (not one trainforge creates).
"""

from __future__ import annotations

from trainforge.core import platform_names
from trainforge.core.pod_security import AUDIT as PSA_AUDIT
from trainforge.core.pod_security import ENFORCE as PSA_ENFORCE
from trainforge.core.pod_security import ENFORCE_VERSION as PSA_ENFORCE_VERSION
from trainforge.core.pod_security import WARN as PSA_WARN
from trainforge.platform.cluster import SYSTEM_LABEL

SYSTEM_NODE_SELECTOR = {SYSTEM_LABEL: "true"}
NODE_AGENTS_NAMESPACE = platform_names.NODE_AGENTS_NAMESPACE
PRIVILEGED_NAMESPACE_REASON = (
    "node agents only: the DCGM exporter reads the kubelet's pod-resources socket (hostPath) "
    "and node-exporter needs the host network, PID namespace and root filesystem"
)


def psa_labels(enforce: str, reason: str | None = None) -> dict[str, str]:
    """Pod Security Admission labels: `enforce` as given, `restricted` warned and audited."""
    labels = {
        PSA_ENFORCE: enforce,
        PSA_ENFORCE_VERSION: "latest",
        PSA_WARN: "restricted",
        PSA_AUDIT: "restricted",
    }
    if enforce == "privileged":
        # A privileged namespace is a deliberate exception and must say why.
        assert reason, "a privileged namespace needs its reason"
    return labels
