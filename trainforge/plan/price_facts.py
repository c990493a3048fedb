"""Dated price facts for the cost report: one data file, every figure with its source, since
`trainforge plan` has no credentials or network and a reviewer must see where and how old a
price is (docs/cost.md, "Where prices come from"). A missing price is "unknown", never guessed.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from importlib import resources

from trainforge.core import versions


def usd(value: float | None, places: int = 2) -> str:
    """ "$1,234.50" or "unknown" (here so `trainforge status` needs no cost model); `places`
    3 where a price is a fraction of a cent ($0.005 per IPv4 address-hour)."""
    return "unknown" if value is None else f"${value:,.{places}f}"


@dataclass(frozen=True)
class Source:
    """`dated`: the figures' own date (when the source states one); `checked`: when we read them."""

    title: str
    url: str
    dated: str | None
    checked: str


_DATA = json.loads(resources.files("trainforge.plan").joinpath("data/price_facts.json").read_text())

SOURCES: dict[str, Source] = {k: Source(**v) for k, v in _DATA["sources"].items()}

FACTS_DATE: str = _DATA["factsDate"]  # the day every row was last checked
HOURS_PER_MONTH = 730  # AWS's convention for monthly figures (24 x 365 / 12)


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour" | "GB-month" | "month" (per item, e.g. a KMS key-month)
    source: str  # a key of SOURCES

    def hourly(self, quantity: float = 1.0) -> float:
        """USD per hour for `quantity` units (GB for GB-month prices)."""
        per_unit = self.usd if self.unit == "hour" else self.usd / HOURS_PER_MONTH
        return per_unit * quantity


def _price(d: dict) -> Price:
    return Price(float(d["usd"]), d["unit"], d["source"])


# Per region: "source", on-demand $/h per type ("prices"), the source of a figure from elsewhere
# ("otherSources"), types EC2 offers there that no source prices ("missing",
# tools/regen_price_facts.py) and types its source lists no offering of ("notListed").
_EC2: dict[str, dict] = _DATA["ec2OnDemand"]

# The same everywhere: "eks.standard" / "eks.extended" (cluster-hour), "ipv4" (address-hour).
# Per region: "nat" (gateway-hour), "ebs.gp3", "fsx.<DEPLOYMENT_TYPE>[.<MB/s/TiB>]" (GB-month),
# "kms" (key-month), "vpce.interface" (interface endpoint AZ-hour).
_GLOBAL: dict[str, Price] = {k: _price(v) for k, v in _DATA["global"].items()}
_SERVICES: dict[str, dict[str, Price]] = {
    region: {k: _price(v) for k, v in d.items()} for region, d in _DATA["services"].items()
}

# End of EKS standard support per minor version (extended costs more after it): the project's
# one calendar, trainforge.core.versions (source "eks-calendar").
EKS_STANDARD_SUPPORT_END: dict[str, dt.date] = {
    v: dt.date.fromisoformat(d) for v, d in versions.EKS_STANDARD_SUPPORT_ENDS.items()
}

MISSING: dict[str, tuple[str, ...]] = {r: tuple(t.get("missing", ())) for r, t in _EC2.items()}


def ec2_on_demand(region: str, instance_type: str) -> Price | None:
    """On-demand $/hour of one instance, or None when the table has no figure."""
    table = _EC2.get(region, {})
    if (usd := table.get("prices", {}).get(instance_type)) is None:
        return None
    return Price(
        float(usd), "hour", table.get("otherSources", {}).get(instance_type, table["source"])
    )


def ec2_not_listed(region: str, instance_type: str) -> bool:
    """The region's source lists no offering of the type (likely not sold there), not merely
    not added yet."""
    return instance_type in _EC2.get(region, {}).get("notListed", ())


# why a figure the table lists as missing (tools/regen_price_facts.py) has no price
NOT_YET = "no source of the price facts prices it yet (listed as missing)"


def why_unpriced(region: str, instance_type: str) -> str:
    """Why a type has no price in a region, in a few words."""
    if instance_type in MISSING.get(region, ()):
        return f"{instance_type}: EC2 offers it in {region} but {NOT_YET}"
    if ec2_not_listed(region, instance_type):
        return (
            f"{instance_type}: [{_EC2[region]['source']}] lists no offering in {region} (check "
            "that the type is sold there)"
        )
    return f"{instance_type}: not in the price table for {region}"


def ec2_spot(region: str, instance_type: str) -> Price | None:
    """Spot $/hour: always unknown. Spot prices change per Availability Zone and per hour, and
    no dated figure backs one; the on-demand price is its ceiling."""
    return None


def why_service_unpriced(region: str, key: str) -> str:
    """Why a service has no price in a region ("servicesMissing": tools/regen_price_facts.py
    --services)."""
    missing = key in _DATA["servicesMissing"].get(region, ())
    return f"no {key} price for {region}" + (f": {NOT_YET}" if missing else "")


def service(region: str, key: str) -> Price | None:
    """The same in every region (`_GLOBAL`), or the region's own."""
    return _GLOBAL.get(key) or _SERVICES.get(region, {}).get(key)


def eks_support(version: str | None, on: dt.date) -> str | None:
    """ "standard" or "extended" on a date; None when the calendar has no row for the version."""
    end = EKS_STANDARD_SUPPORT_END.get(version or "")
    return None if end is None else "standard" if on <= end else "extended"
