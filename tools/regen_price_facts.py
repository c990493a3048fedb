"""Regenerate the EC2 on-demand tables of trainforge/plan/data/price_facts.json.

Why a script: the price facts are data, not Python literals, and every figure must come from
a pinned public table, so anyone can redo (and diff) them. Two sources, both generated from
the AWS Price List API upstream and pinned to a commit:

- us-east-1: Karpenter's generated table (`--karpenter`, a copy of
  pkg/providers/pricing/zz_generated.pricing_aws.go at the pinned tag), every type it lists
  for the families already in the data file and every family of the GPU/instance catalog
  (trainforge/core/data/gpu_catalog.json: a family added there is priced by the next run);
- every other region in the data file: the SkyPilot AWS catalog (`--skypilot`, a copy of
  catalogs/v8/aws/vms.csv at the pinned commit; its `Price` column is the on-demand price,
  the same in every zone of a region), for the instance types already listed in that region
  plus any given with `--type`.

Usage (files fetched by hand at the pinned revisions; the plan itself never goes online):
  python tools/regen_price_facts.py --karpenter zz_generated.pricing_aws.go \\
      --skypilot vms.csv [--type g6.12xlarge ...] [--checked YYYY-MM-DD]
A type the catalog does not list for a region is recorded under "notListed" (the plan reports
it as unknown and says the source lists no offering there).

`--vantage all_gpu_instances.js` (a copy of tsaol/aws-gpu data/all_gpu_instances.js, the
instances.vantage.sh / ec2instances.info figures) then prices every catalog type EC2 offers in
each region (the offerings the plan reads, trainforge.plan.mocks) that the region's own source
lacks, with the source per type under "otherSources"; what no source prices is listed under
"missing" and the plan names it. `--vantage` may be given several times, as `PATH` or
`SOURCE=PATH` (SOURCE a key of the data file's "sources", e.g. the newer per-family copy
data/g7_instances.js as `vantage-tsaol-aws-gpu-g7=g7_instances.js`); each fills only what the
files before it left missing.

`--ebs-pricing ebs_pricing.json` (a copy of cloudkeep-io/ebs-pricing docs/ebs_pricing.json,
the EBS prices per region generated from the AWS Price List API) sets the EBS gp3 $/GB-month
("ebs.gp3" under "services") of every region of the data file.

`--services tools/data/service_prices.json` writes the service prices no machine-readable
pinned table gives (NAT gateway-hours, FSx for Lustre GB-months), each row with its source and
the sentence the source states it in, and lists per region under "servicesMissing" every
required service price ("required" in that file) no source prices, with the file's
"missingWhy" as the data file's "servicesMissingWhy". A figure with no source stays missing.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import pathlib
import re

DATA = pathlib.Path(__file__).resolve().parents[1] / "trainforge/plan/data/price_facts.json"
CATALOG = pathlib.Path(__file__).resolve().parents[1] / "trainforge/core/data/gpu_catalog.json"
KARPENTER = "karpenter-1.14.1"
SKYPILOT = "skypilot-catalog-v8"
VANTAGE = "vantage-tsaol-aws-gpu"
EBS_PRICING = "cloudkeep-ebs-pricing"
SERVICE_PRICES = pathlib.Path(__file__).resolve().parent / "data/service_prices.json"


def ebs_gp3(path: pathlib.Path) -> dict[str, float]:
    """{region: usd per GB-month of gp3} from a copy of cloudkeep-io/ebs-pricing
    docs/ebs_pricing.json (one row per region or zone, `ebs_prices.gp3.pricePerGBMonth.USD`,
    read from the AWS Price List API). Local and Wavelength Zones are skipped: the price facts
    are per region."""
    out: dict[str, float] = {}
    for row in json.loads(path.read_text()):
        gp3 = (row.get("ebs_prices") or {}).get("gp3") or {}
        usd = (gp3.get("pricePerGBMonth") or {}).get("USD")
        if row.get("rzType") == "region" and usd is not None:
            out[row["rzCode"]] = float(usd)
    return out


def set_ebs_gp3(data: dict, table: dict[str, float], source: str) -> None:
    """Price EBS gp3 in every region of the data file from `table`; a region the table lacks
    keeps what it had (and without a figure stays unpriced: the plan names it)."""
    for region in data["ec2OnDemand"]:
        if region in table:
            services = data["services"].setdefault(region, {})
            services["ebs.gp3"] = {"usd": table[region], "unit": "GB-month", "source": source}
    data["services"] = {r: dict(sorted(s.items())) for r, s in sorted(data["services"].items())}


def set_services(data: dict, table: dict) -> None:
    """Replace the service prices the table file gives (every key but EBS, which comes from
    --ebs-pricing) with its rows, copy its sources, and list what stays unpriced per region.

    A row whose source the file does not name, or a row for a region the data file lacks, is
    refused before anything is written."""
    sources = table["sources"]
    regions = set(data["ec2OnDemand"])
    for row in table["prices"]:
        if row["source"] not in sources:
            raise SystemExit(f"--services: row {row['region']} {row['key']}: no source "
                             f"{row['source']!r} in its file's sources")  # fmt: skip
        if row["region"] not in regions:
            raise SystemExit(f"--services: row {row['key']}: region {row['region']!r} is not "
                             f"one of the price facts' regions ({', '.join(sorted(regions))})")  # fmt: skip
    for region in regions:
        kept = {
            k: v
            for k, v in data["services"].get(region, {}).items()
            if v.get("source") == EBS_PRICING
        }
        data["services"][region] = kept
    for row in table["prices"]:
        data["services"][row["region"]][row["key"]] = {
            "usd": float(row["usd"]),
            "unit": row["unit"],
            "source": row["source"],
        }
    data["sources"].update(sources)
    data["services"] = {r: dict(sorted(s.items())) for r, s in sorted(data["services"].items())}
    data["servicesMissing"] = {
        region: [k for k in table["required"] if k not in data["services"].get(region, {})]
        for region in sorted(regions)
    }
    data["servicesMissingWhy"] = table["missingWhy"]


def vantage_arg(value: str) -> tuple[str, pathlib.Path]:
    """`PATH` or `SOURCE=PATH` of a --vantage file."""
    source, sep, path = value.partition("=")
    return (source, pathlib.Path(path)) if sep else (VANTAGE, pathlib.Path(value))


def vantage(path: pathlib.Path) -> dict[str, dict[str, float]]:
    """{region: {type: usd}} from a copy of tsaol/aws-gpu data/all_gpu_instances.js (every GPU
    instance type with its on-demand price per region, generated from instances.vantage.sh,
    the ec2instances.info data, which reads the AWS Price List)."""
    text = path.read_text()
    rows = json.loads(text[text.index("[") : text.rindex("]") + 1])
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        name = row.get("apiName") or row.get("name")
        for region, p in (row.get("pricing") or {}).items():
            if isinstance(p, dict) and p.get("onDemand"):
                out.setdefault(region, {})[name] = float(p["onDemand"])
    return out


def offered_catalog_types(region: str) -> list[str]:
    """Every catalog instance type EC2 offers in `region`, as the plan reads the offerings
    (moto's bundled DescribeInstanceTypeOfferings, trainforge.plan.mocks)."""
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(CATALOG.parents[3]))
    from trainforge.plan.mocks import _region_offerings  # noqa: PLC0415

    families = set(json.loads(CATALOG.read_text())["families"])
    return sorted(t for t in _region_offerings(region) or () if t.split(".")[0] in families)


def fill_offered(data: dict, table: dict[str, dict[str, float]], source: str) -> None:
    """Price every offered catalog type a region's own source lacks from `table`, recording
    the source per type; what no source prices is listed under "missing" (reported, never
    guessed)."""
    for region, entry in data["ec2OnDemand"].items():
        other = entry.setdefault("otherSources", {})
        have = table.get(region, {})
        missing = []
        for t in offered_catalog_types(region):
            if t in entry["prices"] and other.get(t, entry["source"]) != source:
                continue
            if t in have:
                entry["prices"][t] = have[t]
                other[t] = source
            else:
                missing.append(t)
        entry["prices"] = dict(sorted(entry["prices"].items()))
        entry["otherSources"] = dict(sorted(other.items()))
        entry["missing"] = missing
        entry["notListed"] = [t for t in entry.get("notListed", ()) if t not in entry["prices"]]


def karpenter_us_east_1(path: pathlib.Path) -> dict[str, float]:
    """{type: usd} from the "us-east-1" block of Karpenter's generated Go table."""
    text = path.read_text()
    block = text.split('"us-east-1": {', 1)[1].split("\n\t},", 1)[0]
    return {m[0]: float(m[1]) for m in re.findall(r'"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9.]+)', block)}


def skypilot(path: pathlib.Path) -> dict[str, dict[str, float]]:
    """{region: {type: usd}} from the SkyPilot catalog (one on-demand price per region)."""
    out: dict[str, dict[str, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row.get("Price"):
                out.setdefault(row["Region"], {})[row["InstanceType"]] = float(row["Price"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--karpenter", type=pathlib.Path)
    ap.add_argument("--skypilot", type=pathlib.Path)
    ap.add_argument(
        "--vantage",
        type=vantage_arg,
        action="append",
        default=[],
        help="[SOURCE=]all_gpu_instances.js (tsaol/aws-gpu); repeatable, in order",
    )
    ap.add_argument("--ebs-pricing", type=pathlib.Path, help="ebs_pricing.json (cloudkeep-io)")
    ap.add_argument(
        "--services",
        type=pathlib.Path,
        nargs="?",
        const=SERVICE_PRICES,
        help=f"service price table (default {SERVICE_PRICES.relative_to(SERVICE_PRICES.parents[2])})",
    )
    ap.add_argument("--type", action="append", default=[], help="also price this type")
    ap.add_argument("--checked", default=dt.date.today().isoformat())
    args = ap.parse_args()
    data = json.loads(DATA.read_text())
    ec2 = data["ec2OnDemand"]
    if args.karpenter:
        table = karpenter_us_east_1(args.karpenter)
        families = {t.split(".")[0] for t in ec2["us-east-1"]["prices"]}
        families |= {t.split(".")[0] for t in args.type}
        families |= set(json.loads(CATALOG.read_text())["families"])
        entry = ec2["us-east-1"]
        other = entry.get("otherSources", {})
        kept = {t: p for t, p in entry["prices"].items() if t in other}
        entry["source"] = KARPENTER
        entry["prices"] = {
            t: p for t, p in sorted(table.items()) if t.split(".")[0] in families
        } | kept
        data["sources"][KARPENTER]["checked"] = args.checked
    if args.skypilot:
        catalog = skypilot(args.skypilot)
        for region, entry in ec2.items():
            if entry["source"] != SKYPILOT:
                continue
            wanted = set(entry["prices"]) | set(entry.get("notListed", ())) | set(args.type)
            have = catalog.get(region, {})
            kept = {t: p for t, p in entry["prices"].items() if t in entry.get("otherSources", {})}
            entry["prices"] = {t: have[t] for t in sorted(wanted) if t in have} | kept
            # asked for and absent from every zone of the region: most likely not sold there
            entry["notListed"] = sorted(t for t in wanted if t not in have)
        data["sources"][SKYPILOT]["checked"] = args.checked
    for source, path in args.vantage:
        if source not in data["sources"]:
            raise SystemExit(f"--vantage {source}=...: no source {source!r} in {DATA.name}")
        fill_offered(data, vantage(path), source)
        data["sources"][source]["checked"] = args.checked
    if args.ebs_pricing:
        set_ebs_gp3(data, ebs_gp3(args.ebs_pricing), EBS_PRICING)
        data["sources"][EBS_PRICING]["checked"] = args.checked
    if args.services:
        set_services(data, json.loads(args.services.read_text()))
    data["factsDate"] = args.checked
    DATA.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {DATA}")


if __name__ == "__main__":
    main()
