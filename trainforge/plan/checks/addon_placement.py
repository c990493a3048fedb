"""Plan check: no EKS add-on controller (CoreDNS, the CSI controllers) can land on a job pool's
nodes (platform.addon_controllers: their pinned tolerations against each pool's taints)."""

from __future__ import annotations

from trainforge.core.labels import ARCH, OS
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

RULE = "TRAINFORGE_ADDON_ON_JOB_POOL"
FIX = (
    "taint the pool (CPU pools get trainforge.io/jobs-only, GPU pools nvidia.com/gpu; jobs "
    "tolerate their pool's taints) or pin the add-on to the system node group"
)
RULES = {RULE: FIX}


def check(ctx: PlanContext) -> CheckResult:
    from trainforge.platform.addon_controllers import admitted  # noqa: PLC0415

    declared = ctx.declared
    if declared is None or not declared.contracts:
        return CheckResult()
    findings, lines = [], []
    for pool in (p for contract in declared.contracts for p in contract.pools.values()):
        names = admitted(tuple(pool.taints), {OS: "linux", ARCH: pool.architecture})
        taints = ", ".join(f"{t.key}:{t.effect}" for t in pool.taints) or "none"
        admits = f"admits {', '.join(names)}" if names else "no add-on controller"
        lines.append(f"{pool.name} (taints {taints}): {admits}")
        msg = (
            f"{', '.join(names)} may be scheduled on pool {pool.name}'s nodes: they keep a "
            "node up that consolidation would remove, and die with a spot interruption"
        )
        if names:
            findings.append(
                Finding(f"pool {pool.name}", RULE, msg, FIX, names=frozenset({pool.name}))
            )
    return CheckResult(findings, [Section("Add-on controllers on job pools", lines)])
