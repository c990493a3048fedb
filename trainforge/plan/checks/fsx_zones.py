"""Plan check (a section, no finding): each node group's and pool's zones (its inputs' subnet
dependencies; a Karpenter EC2NodeClass's every subnet its tags select) against the FSx file
system's one zone, which pods elsewhere read across zones. docs/services.md, FSx.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainforge.plan.check_types import CheckResult, PlanContext, Section
from trainforge.plan.checks.reachability import SUBNET
from trainforge.plan.checks.rules import EC2_NODE_CLASS
from trainforge.plan.resource_types import FSX_LUSTRE, NODE_GROUP
from trainforge.platform.config import POOL_LABEL

RULES: dict[str, str] = {}
TITLE = "FSx zone and the pools that read it"


def _zones(resources: Iterable[Any]) -> list[str]:
    """The zones of those of `resources` that are subnets."""
    zones = {
        r.inputs.get("availabilityZone") for r in resources if getattr(r, "type", "") == SUBNET
    }
    return sorted(z for z in zones if isinstance(z, str))


def _deps(by_urn: dict[str, Any], res: Any, prop: str) -> list[str]:
    return _zones(by_urn.get(u) for u in res.dependencies.get(prop, []))


def _tagged(subnet: Any, tags: dict[str, Any]) -> bool:
    return all((subnet.inputs.get("tags") or {}).get(k) == v for k, v in tags.items())


def placements(ctx: PlanContext) -> list[dict[str, Any]]:
    """Per node group / Karpenter pool: its name, kind, zones, and whether one is picked at up."""
    by_urn = ctx.inventory.by_urn()
    subnets = ctx.resources_of(SUBNET)
    out: list[dict[str, Any]] = []
    for res in ctx.inventory.resources:
        if res.type == NODE_GROUP:
            if not (pool := (res.inputs.get("labels") or {}).get(POOL_LABEL)):
                continue  # the system node group: no training pod runs there
            zones = _deps(by_urn, res, "subnetIds")
            given = res.inputs.get("subnetIds")
            picked = isinstance(given, list) and 0 < len(given) < len(zones)
            out.append({"pool": pool, "kind": "node group", "zones": zones, "picked": picked})
        elif res.type == EC2_NODE_CLASS:
            spec = res.inputs.get("spec") or {}
            pool = (spec.get("tags") or {}).get(POOL_LABEL) or res.name
            zones = _deps(by_urn, res, "spec")
            for term in spec.get("subnetSelectorTerms") or []:
                tags = term.get("tags") if isinstance(term, dict) else None
                if isinstance(tags, dict):
                    zones = sorted({*zones, *_zones(s for s in subnets if _tagged(s, tags))})
            out.append({"pool": pool, "kind": "Karpenter pool", "zones": zones, "picked": False})
    return out


def check(ctx: PlanContext) -> CheckResult:
    if not (systems := ctx.resources_of(FSX_LUSTRE)):
        return CheckResult()
    fsx_zones = _deps(ctx.inventory.by_urn(), systems[0], "subnetIds")
    if len(fsx_zones) != 1:
        line = "FSx for Lustre: zone not known at preview (not checked)"
        return CheckResult([], [Section(TITLE, [line], {})])
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
    return CheckResult([], [Section(TITLE, lines, data)])
