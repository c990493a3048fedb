"""The taints a node of a group or pool registers with, built here once, and the refusal of
a configured taint the platform already sets.

Why: the API server refuses a Node with two taints of the same key and effect
(k8s.io/kubernetes pkg/apis/core/validation validation.go `validateNodeTaints`: "taints must be
unique by key and effect pair"), and neither path to a node merges a configured taint into the
platform's: Karpenter hands the kubelet `nodeClaim.Spec.Taints` then `StartupTaints`
flattened, without removing repeats (karpenter-provider-aws v1.14.1, commit bde0065 of
2026-08-20, pkg/providers/amifamily/resolver.go; the NodePool CRD's taint lists are atomic,
with no uniqueness rule), and a managed node group passes its taints to the kubelet as listed.
A pool with `nvidia.com/gpu:NoSchedule` among its own taints is accepted by the API server as a
NodePool, and then none of its nodes ever registers; so the stack refuses it at parse.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainforge.stack.base import NS, problem
from trainforge.stack.platform import NodeGroupConfig, NodePoolConfig

GPU_TAINT_KEY = "nvidia.com/gpu"
# CPU Karpenter pools are for jobs only (jobs tolerate their pool's taints, published in
# PoolFacts): CoreDNS, the CSI controllers and other add-ons stay on the system node group
# instead of holding a spot node up that `WhenEmpty` consolidation would never remove.
JOBS_TAINT_KEY = "trainforge.io/jobs-only"
# The FSx CSI driver's startup taint: its node plugin removes it once it is ready to mount
# (aws-fsx-csi-driver v1.5.0 pkg/driver/constants.go AgentNotReadyNodeTaintKey, docs/install.md
# "Configure node startup taint": NoExecute recommended), so pods wait for it.
FSX_AGENT_NOT_READY_TAINT = "fsx.csi.aws.com/agent-not-ready"


def _own(taints: Iterable[Any]) -> list[dict]:
    """Configured taints as Kubernetes writes them (no `value` key when unset)."""
    out = []
    for t in taints:
        taint = {"key": t.key, "effect": t.effect}
        if t.value is not None:
            taint["value"] = t.value
        out.append(taint)
    return out


def platform_taint(gpu: bool) -> dict:
    """What the platform taints every node of a GPU (or CPU) group or pool with."""
    key = GPU_TAINT_KEY if gpu else JOBS_TAINT_KEY
    return {"key": key, "value": "true", "effect": "NoSchedule"}


def pool_taints(pool: NodePoolConfig, gpu: bool) -> list[dict]:
    """A pool's taints: GPU pools the GPU taint, CPU pools the jobs-only taint (jobs
    tolerate what their pool publishes), then the configured ones."""
    return [platform_taint(gpu), *_own(pool.taints)]


def startup_taints(fsx: bool) -> list[dict]:
    """Taints a new node starts with and something on the node removes: the FSx CSI node
    plugin's, when the stack has FSx (nothing else would remove it)."""
    return [{"key": FSX_AGENT_NOT_READY_TAINT, "effect": "NoExecute"}] if fsx else []


def group_taints(group: NodeGroupConfig, fsx: bool) -> list[dict]:
    """A managed GPU node group's taints (Kubernetes' effect names): the GPU taint, the
    configured ones, and the FSx startup taint when the stack has FSx."""
    return [platform_taint(True), *_own(group.taints), *startup_taints(fsx)]


# EKS's most taints on a managed node group: "Maximum of 50 taints per node group" (the
# pulumi_aws provider's NodeGroup `taints` doc, from the EKS API; botocore 1.44.5's `taintsList`
# states no bound; read 2026-11-30). The platform's own count (group_taints).
EKS_GROUP_TAINTS_MAX = 50


def _too_many(where: str, group: NodeGroupConfig, fsx: bool) -> list[str]:
    """A line when a group's configured taints with the platform's exceed EKS's bound."""
    total = len(group_taints(group, fsx))
    if total <= EKS_GROUP_TAINTS_MAX:
        return []
    room = EKS_GROUP_TAINTS_MAX - (total - len(group.taints))
    return [
        problem(
            f"{where}.taints",
            f"{len(group.taints)} taints",
            f"at most {room} (EKS holds {EKS_GROUP_TAINTS_MAX} taints per node group, the "
            "platform's among them)",
        )
    ]


def _repeats(where: str, configured: Iterable[Any], platform: list[dict]) -> list[str]:
    """A line per configured taint whose key and effect one of `platform` has."""
    lines = []
    for i, t in enumerate(configured):
        same = next((p for p in platform if (p["key"], p["effect"]) == (t.key, t.effect)), None)
        if same is not None:
            value = f"={same['value']}" if "value" in same else ""
            lines.append(
                problem(
                    f"{where}.taints[{i}]",
                    f"{t.key}:{t.effect}",
                    "a key and effect the platform does not set itself: it sets "
                    f"{same['key']}{value}:{same['effect']} on these nodes, and the API server "
                    "refuses a node with two taints of one key and effect (drop this one)",
                )
            )
    return lines


def taint_problems(
    groups: Iterable[NodeGroupConfig | None],
    pools: Iterable[NodePoolConfig | None],
    fsx: bool,
    gpu_of: dict[str, bool],
) -> list[str]:
    """Configured taints that repeat a taint the platform sets on the same nodes. `gpu_of`:
    whether a pool is a GPU pool, from its types' facts where looked up (else its `gpu` key;
    unknown before the lookups, only the startup taint is judged)."""
    out: list[str] = []
    for i, g in enumerate(groups):
        if g is not None:
            platform = [platform_taint(True), *startup_taints(fsx)]
            out += _repeats(f"{NS}:nodeGroups[{i}]", g.taints, platform)
            out += _too_many(f"{NS}:nodeGroups[{i}]", g, fsx)
    for i, p in enumerate(pools):
        if p is not None:
            gpu = gpu_of.get(p.name, p.gpu)
            platform = ([] if gpu is None else [platform_taint(gpu)]) + startup_taints(fsx)
            out += _repeats(f"{NS}:nodePools[{i}]", p.taints, platform)
    return out
