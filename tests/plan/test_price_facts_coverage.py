"""The price facts price what the plan can ask for in every region, or say it is missing.

Issue "Money that is true": in every region of the price facts, every catalog GPU type EC2
offers there has a price, and EBS and FSx are priced. What no source we could read prices is
listed (never guessed); these tests keep those lists exact both ways, and pin today's gaps so
a regression that loses a price, or a price that appears without a source, is seen."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import ROOT, load_script

DATA = ROOT / "trainforge/plan/data/price_facts.json"
SERVICE_TABLE = ROOT / "tools/data/service_prices.json"

# The gaps of 2026-11-27 (the data file's missingWhy / servicesMissingWhy say what was
# searched). A price found later shrinks these; a price lost grows them: both fail here.
EC2_GAPS = {
    "us-east-2": {"p5e.48xlarge", "trn2.48xlarge"},
    "us-west-2": {
        f"g7e.{s}" for s in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")
    }
    | {"p5e.48xlarge"},  # fmt: skip
    "eu-central-1": {
        f"{f}.{s}"
        for f in ("g7", "g7e")
        for s in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")
    },  # fmt: skip
    "ap-northeast-1": {
        f"g7e.{s}" for s in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")
    },  # fmt: skip
}
FSX_ALL = {"fsx.SCRATCH_2"} | {f"fsx.PERSISTENT_2.{t}" for t in (125, 250, 500, 1000)}
# Interface VPC endpoint-hours: priced in us-east-1 only (searched 2026-11-30: servicesMissingWhy).
VPCE = {"vpce.interface"}
SERVICE_GAPS = {
    "us-east-1": {f"fsx.PERSISTENT_2.{t}" for t in (250, 500, 1000)},
    "us-east-2": FSX_ALL | VPCE,
    "us-west-2": FSX_ALL | VPCE,
    "eu-west-1": FSX_ALL | {"nat"} | VPCE,
    "eu-central-1": FSX_ALL | {"nat"} | VPCE,
    "ap-northeast-1": FSX_ALL | VPCE,
}


def _facts() -> dict:
    return json.loads(DATA.read_text())


def _offered(region: str) -> set[str]:
    from trainforge.plan.mocks import _region_offerings

    families = set(json.loads((ROOT / "trainforge/core/data/gpu_catalog.json").read_text())[
        "families"])  # fmt: skip
    return {t for t in _region_offerings(region) or () if t.split(".")[0] in families}


@pytest.mark.parametrize("region", sorted(json.loads(DATA.read_text())["ec2OnDemand"]))
def test_every_offered_catalog_type_is_priced_or_listed_missing(region):
    entry = _facts()["ec2OnDemand"][region]
    offered = _offered(region)
    assert offered, f"no offerings read for {region}"
    unpriced = offered - set(entry["prices"])
    assert unpriced == set(entry["missing"]), region  # listed exactly: no more, no fewer
    assert unpriced == EC2_GAPS.get(region, set()), region


def test_every_service_price_the_plan_needs_is_priced_or_listed_missing():
    data = _facts()
    required = json.loads(SERVICE_TABLE.read_text())["required"]
    for region in data["ec2OnDemand"]:
        priced = set(data["services"].get(region, {}))
        unpriced = {k for k in required if k not in priced}
        assert unpriced == set(data["servicesMissing"][region]), region
        assert unpriced == SERVICE_GAPS[region], region
        assert "ebs.gp3" in priced, region
        assert "kms" in priced, region  # one figure on AWS's KMS page for every region


def test_every_service_the_platform_cost_prices_is_a_required_key(monkeypatch):
    """Each service price fixed_costs looks up is in the table's "required" keys, so a region
    without it is listed missing (the review of 1eea5a9f: `kms` was asked for, never listed)."""
    import datetime as dt

    from trainforge.plan import cost
    from trainforge.plan.runner import Recorded

    asked: set[str] = set()
    real = cost._priced
    monkeypatch.setattr(
        cost, "_priced", lambda r, key, *a, **k: asked.add(key) or real(r, key, *a, **k)
    )
    records = [
        ("aws:ec2/natGateway:NatGateway", {}),
        ("aws:ec2/eip:Eip", {}),
        ("aws:kms/key:Key", {}),
        ("aws:ec2/vpcEndpoint:VpcEndpoint", {"vpcEndpointType": "Interface", "subnetIds": ["a"]}),
        ("aws:fsx/lustreFileSystem:LustreFileSystem",
         {"deploymentType": "SCRATCH_2", "storageCapacity": 1200}),
    ]  # fmt: skip
    resources = [Recorded(t, t, t, None, True, inputs) for t, inputs in records]
    cost.fixed_costs(resources, "us-east-1", dt.date(2026, 11, 30))
    required = set(json.loads(SERVICE_TABLE.read_text())["required"])
    assert asked == {"nat", "ipv4", "kms", "vpce.interface", "fsx.SCRATCH_2"}
    assert asked - set(_facts()["global"]) <= required  # eks.*, ipv4: the same everywhere


def test_every_figure_names_a_dated_source():
    data = _facts()
    used = {p["source"] for p in data["global"].values()}
    used |= {p["source"] for s in data["services"].values() for p in s.values()}
    used |= {e["source"] for e in data["ec2OnDemand"].values()}
    used |= {s for e in data["ec2OnDemand"].values() for s in e.get("otherSources", {}).values()}
    for key in used:
        src = data["sources"][key]
        assert src["url"].startswith("https://") and src["checked"], key


def _tool():
    return load_script("tools/regen_price_facts.py", "regen")


def test_the_service_prices_are_regenerated_from_their_table(tmp_path, monkeypatch):
    """The shipped services block is what --services writes from the reviewed table; a row
    removed from the table becomes a listed gap, never a leftover figure."""
    tool = _tool()
    data = tmp_path / "price_facts.json"
    data.write_text(DATA.read_text())
    monkeypatch.setattr(tool, "DATA", data)
    monkeypatch.setattr(sys, "argv", ["regen", "--services", "--checked", _facts()["factsDate"]])
    tool.main()
    assert json.loads(data.read_text()) == _facts()  # the shipped file is the regenerated one

    table = json.loads(SERVICE_TABLE.read_text())
    table["prices"] = [r for r in table["prices"] if r["region"] != "ap-northeast-1"]
    (tmp_path / "t.json").write_text(json.dumps(table))
    monkeypatch.setattr(sys, "argv", ["regen", "--services", str(tmp_path / "t.json")])
    tool.main()
    out = json.loads(data.read_text())
    assert "nat" not in out["services"]["ap-northeast-1"]
    assert "nat" in out["servicesMissing"]["ap-northeast-1"]
    assert out["services"]["ap-northeast-1"]["ebs.gp3"]["usd"] == 0.096  # EBS is kept


def test_a_service_row_without_its_source_is_refused_before_writing(tmp_path, monkeypatch):
    tool = _tool()
    data = tmp_path / "price_facts.json"
    data.write_text(DATA.read_text())
    table = json.loads(SERVICE_TABLE.read_text())
    table["prices"].append(
        {"region": "eu-west-1", "key": "nat", "usd": 0.048, "unit": "hour", "source": "guess"}
    )
    (tmp_path / "t.json").write_text(json.dumps(table))
    monkeypatch.setattr(tool, "DATA", data)
    monkeypatch.setattr(sys, "argv", ["regen", "--services", str(tmp_path / "t.json")])
    with pytest.raises(SystemExit, match="guess"):
        tool.main()
    assert data.read_text() == DATA.read_text()


def test_a_listed_missing_service_price_says_so_in_the_cost_report():
    from trainforge.plan import cost

    item = cost._priced("us-west-2", "fsx.SCRATCH_2", 1200, "FSx for Lustre SCRATCH_2", "1200 GiB")
    assert item.hourly is None and item.missing == "fsx.SCRATCH_2 in us-west-2"
    assert item.note == (
        "no fsx.SCRATCH_2 price for us-west-2: no source of the price facts prices it yet "
        "(listed as missing)"
    )
    nat = cost._priced("ap-northeast-1", "nat", 3, "NAT gateways", "3")
    assert nat.hourly == pytest.approx(3 * 0.062) and nat.source == "nat-ap-northeast-1"
