"""Plan check (a section, no finding): which zones each node group and pool runs in, against the
FSx file system's one zone; pods elsewhere read FSx across zones (latency, inter-AZ transfer).
Zones come from the subnets the plan records as each input's dependencies; a Karpenter
EC2NodeClass selecting subnets by tag may use every subnet carrying it. docs/services.md, FSx.
"""

from __future__ import annotations

from typing import Any

from trainforge.plan.check_types import CheckResult, PlanContext, Section
from trainforge.plan.checks.reachability import SUBNET
from trainforge.plan.checks.rules import EC2_NODE_CLASS
from trainforge.plan.resource_types import FSX_LUSTRE, NODE_GROUP
from trainforge.platform.config import POOL_LABEL

RULES: dict[str, str] = {}


def _zones(by_urn: dict[str, Any], urns: list[str]) -> list[str]:
    out = []
    for u in urns:
        res = by_urn.get(u)
        if res is not None and res.type == SUBNET:
            zone = res.inputs.get("availabilityZone")
            if isinstance(zone, str) and zone not in out:
                out.append(zone)
    return sorted(out)


def _tagged(subnets: list[Any], tags: dict[str, Any]) -> list[str]:
    zones = {
        s.inputs.get("availabilityZone")
        for s in subnets
        if all((s.inputs.get("tags") or {}).get(k) == v for k, v in tags.items())
    }
    return sorted(z for z in zones if isinstance(z, str))


def placements(ctx: PlanContext) -> list[dict[str, Any]]:
    """Per node group / Karpenter pool: its name, kind, zones, and whether one is picked at up."""
    by_urn = ctx.inventory.by_urn()
    subnets = ctx.resources_of(SUBNET)
    out: list[dict[str, Any]] = []
    for res in ctx.inventory.resources:
        if res.type == NODE_GROUP:
            pool = (res.inputs.get("labels") or {}).get(POOL_LABEL)
            if not pool:
                continue  # the system node group: no training pod runs there
            zones = _zones(by_urn, res.dependencies.get("subnetIds", []))
            given = res.inputs.get("subnetIds")
            picked = isinstance(given, list) and 0 < len(given) < len(zones)
            out.append({"pool": pool, "kind": "node group", "zones": zones, "picked": picked})
        elif res.type == EC2_NODE_CLASS:
            spec = res.inputs.get("spec") or {}
            pool = (spec.get("tags") or {}).get(POOL_LABEL) or res.name
            zones = _zones(by_urn, res.dependencies.get("spec", []))
            for term in spec.get("subnetSelectorTerms") or []:
                if isinstance(term, dict) and isinstance(term.get("tags"), dict):
                    zones = sorted({*zones, *_tagged(subnets, term["tags"])})
            out.append({"pool": pool, "kind": "Karpenter pool", "zones": zones, "picked": False})
    return out


def check(ctx: PlanContext) -> CheckResult:
    by_urn = ctx.inventory.by_urn()
    systems = ctx.resources_of(FSX_LUSTRE)
    if not systems:
        return CheckResult([], [])
    fsx_zones = _zones(by_urn, systems[0].dependencies.get("subnetIds", []))
    if len(fsx_zones) != 1:
        line = "FSx for Lustre: zone not known at preview (not checked)"
        return CheckResult([], [Section("FSx zone and the pools that read it", [line], {})])
    (fsx,) = fsx_zones
    lines = [f"FSx for Lustre in {fsx}: pods in other zones read it across zones (latency, "
             "inter-AZ data transfer each way)"]  # fmt: skip
    rows = placements(ctx)
    for row in rows:
        zones, name = row["zones"], f"{row['pool']} ({row['kind']})"
        row["cross_zone"] = zones != [fsx]
        if zones == [fsx]:
            lines.append(f"  {name}: {fsx}, same zone as FSx")
        elif row["picked"]:
            lines.append(
                f"  {name}: one of {', '.join(zones)}, its capacity reservation's (known at "
                f"`pulumi up`): outside {fsx} it reads FSx across zones"
            )
        elif not zones:
            lines.append(f"  {name}: zone not known at preview")
        else:
            lines.append(
                f"  {name}: any of {', '.join(zones)}: nodes outside {fsx} read FSx across zones"
            )
    data = {"fsx_zone": fsx, "pools": rows}
    return CheckResult([], [Section("FSx zone and the pools that read it", lines, data)])
