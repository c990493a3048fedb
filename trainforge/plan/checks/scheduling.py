"""Plan check: the scheduling rehearsal of every declared job (trainforge.jobs.capacity): how
close each job is, and a finding for a program that bypassed `resolve_job` (which refuses at
preview, one error at a time). The arithmetic: docs/rehearsals.md, "Scheduling rehearsal".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from trainforge.core.contract import GPU_RESOURCE, PoolFacts
from trainforge.core.quantity import figure, parse_quantity
from trainforge.jobs import capacity, packing, quota
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

RULE = "TRAINFORGE_JOB_CANNOT_SCHEDULE"
UNREHEARSED = "TRAINFORGE_JOB_UNREHEARSED"
RULES = {
    RULE: "ask for less CPU/memory per pod, fewer workers, or use a pool (or quota) that holds "
    "the job; the numbers are in the 'Scheduling rehearsal' section (docs/rehearsals.md)",
    UNREHEARSED: "give the pool instance types trainforge knows "
    "(trainforge/platform/instance_types.py) or vcpus/memory per node in its contract, so its "
    "jobs can be rehearsed",
}


def _limits(pool: PoolFacts) -> str:
    if pool.kind == "node-group":
        return f"maxSize {pool.max_nodes}"
    lim = pool.limits
    pairs = (("cpu", lim.cpu), ("memory", lim.memory), (GPU_RESOURCE, lim.gpus))
    return "limits " + (", ".join(f"{k} {v}" for k, v in pairs if v is not None) or "none")


def _pool_lines(pool: PoolFacts) -> tuple[list[str], dict[str, Any]]:
    rooms, ds = capacity.rooms(pool), pool.daemonsets
    lines = [
        f"pool {pool.name} ({pool.kind}; {_limits(pool)}): {len(ds)} DaemonSet pods per node "
        f"request {sum(d.cpu_m for d in ds)}m CPU, {sum(d.memory_mib for d in ds)}Mi"
    ]
    data: dict[str, Any] = {"kind": pool.kind, "daemonsets": [d.name for d in ds], "nodes": []}
    if (held := quota.capacity_words(pool)) is not None:
        # what the teams' guarantees in the pool add up to at most (docs/teams.md, "Quotas")
        lines.append(f"  holds for quota: {held}")
        data["quotaCapacity"] = held
    for r in rooms:
        n = r.node
        extra = "".join(f", {k} {v}" for k, v in (("GPUs", n.gpus), ("EFA", n.efa)) if v)
        lines.append(
            f"  {n.instance_type}: allocatable {n.allocatable_cpu_m}m / "
            f"{n.allocatable_memory_mib}Mi / {n.max_pods} pods -> left for jobs "
            f"{r.cpu_m}m / {r.memory_mib}Mi / {r.pods} pods{extra}"
        )
        allocatable = {
            "cpuMillis": n.allocatable_cpu_m, "memoryMiB": n.allocatable_memory_mib,
            "pods": n.max_pods,
        }  # fmt: skip
        free = {"cpuMillis": r.cpu_m, "memoryMiB": r.memory_mib, "pods": r.pods}
        data["nodes"].append(
            {"instanceType": n.instance_type, "allocatable": allocatable, "free": free,
             "gpus": n.gpus, "efa": n.efa}
        )  # fmt: skip
    if not rooms:
        lines.append("  node sizes unknown: nothing to rehearse against")
    return lines, data


def _of(resource: str, need: Fraction, limit: str | None) -> str:
    """`need` against a quota `limit`, both in one plain unit: "cpu 94.8 of 411.92 cores"."""
    unit = " cores" if resource == "cpu" else ""
    if limit is None:
        return f"{resource} {figure(resource, need)}{unit} (no limit)"
    cap = parse_quantity(limit)
    return f"{resource} {figure(resource, need)} of {figure(resource, cap)}{unit}"


def _usage(r: capacity.JobCapacity) -> str:
    """The pool-limit figures ("cpu 192 of unlimited, ..."), as Karpenter counts NodeClaims."""
    parts = ", ".join(f"{k} {need} of {limit}" for k, need, limit in r.pool_usage)
    if r.claims and parts:
        return f"{parts} (each NodeClaim counted at its largest type, as Karpenter does)"
    return parts


def pods_per_node(r: capacity.JobCapacity) -> str:
    """How many of a job's pods each instance type of its pool holds ("g5.xlarge 1, ..."),
    for this section and the SDK section (submitted)."""
    return ", ".join(f"{f.room.node.instance_type} {f.per_node}" for f in r.fits)


def unrehearsed(who: str, pool: PoolFacts, pods: int, size: str) -> str:
    """Why a job on a pool of unknown node sizes was not rehearsed (a finding, not a pass)."""
    return (
        f"{who} on pool {pool.name!r}: the pool's node sizes are unknown (instance types "
        f"{', '.join(pool.instance_types) or 'none'}), so whether {pods} pod(s) of {size} fit "
        "was not rehearsed"
    )


def check(ctx: PlanContext) -> CheckResult:
    declared = ctx.declared
    if declared is None or (not declared.contracts and not declared.jobs):
        return CheckResult()
    findings: list[Finding] = []
    lines: list[str] = []
    data: dict[str, Any] = {"pools": {}, "jobs": [], "teams": {}}
    pools = [p for c in declared.contracts for p in c.pools.values()]
    for pool in pools + [j.target.pool for j in declared.jobs]:
        if pool.name not in data["pools"]:  # each pool once, where it is first named
            pool_lines, data["pools"][pool.name] = _pool_lines(pool)
            lines += pool_lines

    # team -> quota resource -> (what all its jobs request, the team's quota)
    team_totals: dict[str, dict[str, tuple[Fraction, str | None]]] = {}
    for j in declared.jobs:
        spec, target, pool = j.spec, j.target, j.target.pool
        gpus = spec.gpus_per_worker or 0
        req = capacity.job_request(spec, pool)  # what the emitter writes, EFA devices too
        pods = spec.min_workers
        r = capacity.rehearse(req, pods, pool)
        quota = capacity.quota_usage(req, pods, target.quota)
        ident = f"{target.namespace}/{spec.name}"
        names = frozenset({spec.name, j.resource_name, ident})
        size = f"cpu {spec.cpu}, memory {spec.memory}" + (f", {gpus} GPU" if gpus else "")
        lines.append(f"{ident} on {pool.name}: {pods} pod(s) x ({size})")
        # Karpenter: its NodeClaims, the model the cost table prices
        at_once = packing.claims_words(r.claims) if r.claims else f"{r.nodes_needed} node(s)"
        if r.fits:
            lines.append(
                f"  pods per node: {pods_per_node(r)}; all at once: {at_once}; {_usage(r)}"
            )
        q = ", ".join(_of(k, need, limit) for k, need, limit in quota)
        lines.append(f"  team {target.team.name} quota: {q}")
        totals = team_totals.setdefault(target.team.name, {})
        for k, need, limit in quota:
            totals[k] = (totals.get(k, (Fraction(0), None))[0] + need, limit)
        if not r.fits:
            # not rehearsed is not passed: a job on nodes of unknown size is a finding
            message = unrehearsed(f"job {ident}", pool, pods, size)
            lines.append(f"  NOT REHEARSED: {message}")
            findings.append(
                Finding(f"job {ident}", UNREHEARSED, message, RULES[UNREHEARSED], names=names)
            )
        problems = [p.message for p in r.problems]
        problems += [
            f"{pods} pod(s) need {k} {figure(k, need)} but the team quota is {limit}"
            for k, need, limit in quota
            if limit is not None and need > parse_quantity(limit)
        ]
        for message in problems:
            lines.append(f"  CANNOT RUN: {message}")
            message = f"job {ident} on pool {pool.name!r}: {message}"
            findings.append(Finding(f"job {ident}", RULE, message, RULES[RULE], names=names))
        data["jobs"].append(
            {"job": ident, "pool": pool.name, "pods": pods,
             "request": {"cpu": spec.cpu, "memory": spec.memory, "gpus": gpus},
             "podsPerNode": {f.room.node.instance_type: f.per_node for f in r.fits},
             "nodesNeeded": r.nodes_needed, "poolUsage": [list(u) for u in r.pool_usage],
             "nodeClaims": [{"pods": n, "types": list(t)} for n, t in r.claims],
             "problems": problems}
        )  # fmt: skip
    for team, totals in team_totals.items():
        parts = ", ".join(_of(k, v, limit) for k, (v, limit) in totals.items())
        # Several jobs over the quota together is queueing, not an error: each fits alone.
        lines.append(f"team {team}, all its jobs at once (informational): {parts}")
        data["teams"][team] = {k: figure(k, v) for k, (v, _) in totals.items()}
    return CheckResult(findings=findings, sections=[Section("Scheduling rehearsal", lines, data)])
