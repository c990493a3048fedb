"""Dated price facts for the plan's cost report: one data file, every figure with its source
(docs/cost.md, "Where prices come from").

Why a data file in the package instead of the AWS Price List API: `trainforge plan` runs with
no credentials and no network, and a reviewer must be able to see which price a figure came
from and how old it is. A price that is not there is "unknown", never guessed.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from importlib import resources

from trainforge.core import versions


def usd(value: float | None) -> str:
    """Dollars as every cost line prints them ("$1,234.50"), "unknown" for no price: here,
    beside the prices, so `trainforge status` formats spend without importing the cost model."""
    return "unknown" if value is None else f"${value:,.2f}"


@dataclass(frozen=True)
class Source:
    """Where figures come from: `dated` is the date of the figures themselves (when the
    source states one), `checked` the day we read them."""

    title: str
    url: str
    dated: str | None
    checked: str


_DATA = json.loads(resources.files("trainforge.plan").joinpath("data/price_facts.json").read_text())

SOURCES: dict[str, Source] = {k: Source(**v) for k, v in _DATA["sources"].items()}

# The date of this table: the day every row was last checked.
FACTS_DATE: str = _DATA["factsDate"]
HOURS_PER_MONTH = 730  # AWS's convention for monthly figures (24 x 365 / 12)


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour" | "GB-month"
    source: str  # a key of SOURCES

    def hourly(self, quantity: float = 1.0) -> float:
        """USD per hour for `quantity` units (GB for GB-month prices)."""
        per_unit = self.usd if self.unit == "hour" else self.usd / HOURS_PER_MONTH
        return per_unit * quantity


def _price(d: dict) -> Price:
    return Price(float(d["usd"]), d["unit"], d["source"])


# Per region: its table's "source", on-demand $/hour per instance type ("prices"), the source
# of each figure its own table lacks ("otherSources"), the catalog types EC2 offers there that
# no source prices ("missing", tools/regen_price_facts.py lists them) and the types its source
# lists no offering of ("notListed").
_EC2: dict[str, dict] = _DATA["ec2OnDemand"]

# Keys: "eks.standard" / "eks.extended" (per cluster-hour), "ipv4" (per public IPv4
# address-hour): the same everywhere. Per region: "nat" (per NAT gateway-hour), "ebs.gp3"
# (per GB-month), "fsx.<DEPLOYMENT_TYPE>[.<MB/s/TiB>]" (per GB-month of capacity).
_GLOBAL: dict[str, Price] = {k: _price(v) for k, v in _DATA["global"].items()}
_SERVICES: dict[str, dict[str, Price]] = {
    region: {k: _price(v) for k, v in d.items()} for region, d in _DATA["services"].items()
}

# End of EKS standard support per Kubernetes minor version (extended support costs more
# after it): the project's one calendar, trainforge.core.versions (source "eks-calendar").
EKS_STANDARD_SUPPORT_END: dict[str, dt.date] = {
    v: dt.date.fromisoformat(d) for v, d in versions.EKS_STANDARD_SUPPORT_ENDS.items()
}

MISSING: dict[str, tuple[str, ...]] = {r: tuple(t.get("missing", ())) for r, t in _EC2.items()}


def ec2_on_demand(region: str, instance_type: str) -> Price | None:
    """On-demand $/hour of one instance, or None when the table has no figure."""
    table = _EC2.get(region, {})
    usd = table.get("prices", {}).get(instance_type)
    if usd is None:
        return None
    return Price(
        float(usd), "hour", table.get("otherSources", {}).get(instance_type, table["source"])
    )


def ec2_not_listed(region: str, instance_type: str) -> bool:
    """True when the region's source was read for this type and lists no offering of it there
    (it is most likely not sold in that region), rather than merely not added yet."""
    return instance_type in _EC2.get(region, {}).get("notListed", ())


def why_unpriced(region: str, instance_type: str) -> str:
    """Why an instance type has no price in a region, in a few words for the cost report."""
    if instance_type in MISSING.get(region, ()):
        return (
            f"{instance_type}: EC2 offers it in {region} but no source of the price facts "
            "prices it yet (listed as missing)"
        )
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
    """Why a service has no price in a region, in a few words for the cost report."""
    # the service prices the platform can need there that no source we read prices
    # (tools/regen_price_facts.py --services lists them)
    if key in _DATA["servicesMissing"].get(region, ()):
        return (
            f"no {key} price for {region}: no source of the price facts prices it yet "
            "(listed as missing)"
        )
    return f"no {key} price for {region}"


def service(region: str, key: str) -> Price | None:
    """A service price: the same in every region (`_GLOBAL`), or the region's own."""
    return _GLOBAL.get(key) or _SERVICES.get(region, {}).get(key)


def eks_support(version: str | None, on: dt.date) -> str | None:
    """ "standard" or "extended" for an EKS version on a date; None when the calendar has no
    row for the version."""
    end = EKS_STANDARD_SUPPORT_END.get(version or "")
    if end is None:
        return None
    return "standard" if on <= end else "extended"
