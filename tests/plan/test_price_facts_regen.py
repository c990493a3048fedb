"""tools/regen_price_facts.py rebuilds the EC2 tables of the price facts from the pinned
upstream tables (Karpenter's generated Go table, the SkyPilot AWS catalog)."""

from __future__ import annotations

import json
import sys

from tests.conftest import ROOT, load_script

GO = """package pricing

var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{
\t// us-east-1
\t"us-east-1": {
\t\t// c5 family
\t\t"c5.2xlarge": 0.340000, "c5.large": 0.085000,
\t\t// x9 family
\t\t"x9.large": 9.000000,
\t},
}
"""
CSV = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch
c5.2xlarge,,,8.0,16.0,,0.384,0.2,eu-west-1,euw1-az1,x86_64
c5.2xlarge,,,8.0,16.0,,0.384,0.1,eu-west-1,euw1-az2,x86_64
g6.12xlarge,L4,4.0,48.0,192.0,"{'Gpus': []}",5.75429,2.2,eu-central-1,euc1-az2,x86_64
"""


def _tool():
    return load_script("tools/regen_price_facts.py", "regen")


def test_regenerates_from_the_pinned_tables(tmp_path, monkeypatch):
    tool = _tool()
    data = tmp_path / "price_facts.json"
    data.write_text((ROOT / "trainforge/plan/data/price_facts.json").read_text())
    (tmp_path / "p.go").write_text(GO)
    (tmp_path / "vms.csv").write_text(CSV)
    monkeypatch.setattr(tool, "DATA", data)
    argv = ["regen", "--karpenter", str(tmp_path / "p.go"), "--skypilot", str(tmp_path / "vms.csv"),
            "--type", "g6.12xlarge", "--checked", "2030-01-01"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    tool.main()
    out = json.loads(data.read_text())
    ec2 = out["ec2OnDemand"]
    # us-east-1: Karpenter's figures for the families already priced (x9 is not one); figures
    # another source gave (listed under otherSources) are kept
    other = ec2["us-east-1"].get("otherSources", {})
    own = {t: p for t, p in ec2["us-east-1"]["prices"].items() if t not in other}
    assert own == {"c5.2xlarge": 0.34, "c5.large": 0.085}
    # other regions: the catalog's on-demand price, one per region; what it lacks is dropped
    # (figures another source gave, listed under otherSources, are kept)
    other = ec2["eu-west-1"].get("otherSources", {})
    own = {t: p for t, p in ec2["eu-west-1"]["prices"].items() if t not in other}
    assert own == {"c5.2xlarge": 0.384}
    assert "g6.12xlarge" in ec2["eu-west-1"]["notListed"]  # asked for, not in the catalog
    other = ec2["eu-central-1"].get("otherSources", {})
    assert {t: p for t, p in ec2["eu-central-1"]["prices"].items() if t not in other} == {
        "g6.12xlarge": 5.75429
    }
    assert out["factsDate"] == "2030-01-01"
    assert out["sources"]["skypilot-catalog-v8"]["checked"] == "2030-01-01"


VANTAGE = """// Auto-generated
const allGPUInstances = [
  {"name": "g5.12xlarge", "apiName": "g5.12xlarge",
   "pricing": {"us-west-2": {"onDemand": 5.672}, "eu-west-1": {"onDemand": 6.33167}}},
  {"name": "u-x", "pricing": {}}
];
"""


def test_vantage_prices_every_offered_catalog_type_and_lists_the_rest(tmp_path, monkeypatch):
    tool = _tool()
    data = tmp_path / "price_facts.json"
    src = json.loads((ROOT / "trainforge/plan/data/price_facts.json").read_text())
    for entry in src["ec2OnDemand"].values():  # start from tables without vantage figures
        entry["prices"] = {
            t: p for t, p in entry["prices"].items() if t not in entry.get("otherSources", {})
        }
        entry.pop("otherSources", None)
        entry.pop("missing", None)
    data.write_text(json.dumps(src))
    (tmp_path / "v.js").write_text(VANTAGE)
    monkeypatch.setattr(tool, "DATA", data)
    monkeypatch.setattr(sys, "argv", ["regen", "--vantage", str(tmp_path / "v.js")])
    tool.main()
    out = json.loads(data.read_text())["ec2OnDemand"]["us-west-2"]
    assert out["prices"]["g5.12xlarge"] == 5.672
    assert out["otherSources"]["g5.12xlarge"] == "vantage-tsaol-aws-gpu"
    # offered in us-west-2, in the catalog, priced by no table: listed, not guessed
    assert "p5.48xlarge" in out["missing"] and "p5.48xlarge" not in out["prices"]


G7 = """// Auto-generated from instances.vantage.sh data
var instanceData = [
  {"name": "g7.2xlarge", "apiName": "g7.2xlarge",
   "pricing": {"us-west-2": {"onDemand": 2.52}, "eu-south-2": {"onDemand": 2.646}}},
  {"name": "g5.12xlarge", "apiName": "g5.12xlarge", "pricing": {"us-west-2": {"onDemand": 99.0}}}
];
"""


def _without_vantage(src: dict) -> dict:
    for entry in src["ec2OnDemand"].values():
        entry["prices"] = {
            t: p for t, p in entry["prices"].items() if t not in entry.get("otherSources", {})
        }
        entry.pop("otherSources", None)
        entry.pop("missing", None)
    return src


def test_a_later_vantage_file_fills_only_what_the_earlier_left_missing(tmp_path, monkeypatch):
    tool = _tool()
    data = tmp_path / "price_facts.json"
    data.write_text(json.dumps(_without_vantage(json.loads(
        (ROOT / "trainforge/plan/data/price_facts.json").read_text()))))  # fmt: skip
    (tmp_path / "v.js").write_text(VANTAGE)
    (tmp_path / "g7.js").write_text(G7)
    monkeypatch.setattr(tool, "DATA", data)
    argv = ["regen", "--vantage", str(tmp_path / "v.js"),
            "--vantage", f"vantage-tsaol-aws-gpu-g7={tmp_path / 'g7.js'}"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    tool.main()
    out = json.loads(data.read_text())["ec2OnDemand"]["us-west-2"]
    assert out["prices"]["g7.2xlarge"] == 2.52
    assert out["otherSources"]["g7.2xlarge"] == "vantage-tsaol-aws-gpu-g7"
    assert "g7.2xlarge" not in out["missing"]
    # the first file's figure stands: the later one only fills what is missing
    assert out["prices"]["g5.12xlarge"] == 5.672
    assert out["otherSources"]["g5.12xlarge"] == "vantage-tsaol-aws-gpu"
    # a source the data file does not list is refused with its name, before anything is written
    before = data.read_text()
    monkeypatch.setattr(sys, "argv", ["regen", "--vantage", f"nosuch={tmp_path / 'g7.js'}"])
    try:
        tool.main()
    except SystemExit as e:
        assert "nosuch" in str(e)
    else:
        raise AssertionError("an unknown --vantage source was accepted")
    assert data.read_text() == before


EBS = """[
 {"ebs_prices": {"gp3": {"pricePerGBMonth": {"USD": "0.0952000000"}}},
  "location": "EU (Frankfurt)", "partition": "aws", "rzCode": "eu-central-1", "rzType": "region"},
 {"ebs_prices": {"gp3": {"pricePerGBMonth": {"USD": "0.1000000000"}}},
  "location": "US West (Los Angeles)", "partition": "aws", "rzCode": "us-west-2-lax-1",
  "rzType": "local-zone"},
 {"ebs_prices": {"gp2": {"pricePerGBMonth": {"USD": "0.1000000000"}}},
  "location": "US West (Oregon)", "partition": "aws", "rzCode": "us-west-2", "rzType": "region"}
]
"""


def test_ebs_pricing_sets_gp3_in_every_region_it_lists(tmp_path, monkeypatch):
    tool = _tool()
    data = tmp_path / "price_facts.json"
    src = json.loads((ROOT / "trainforge/plan/data/price_facts.json").read_text())
    for services in src["services"].values():
        services.pop("ebs.gp3", None)
    data.write_text(json.dumps(src))
    (tmp_path / "ebs.json").write_text(EBS)
    monkeypatch.setattr(tool, "DATA", data)
    argv = ["regen", "--ebs-pricing", str(tmp_path / "ebs.json"), "--checked", "2030-01-01"]
    monkeypatch.setattr(sys, "argv", argv)
    tool.main()
    out = json.loads(data.read_text())
    assert out["services"]["eu-central-1"]["ebs.gp3"] == {
        "usd": 0.0952, "unit": "GB-month", "source": "cloudkeep-ebs-pricing"}  # fmt: skip
    # a zone is not a region, and a region without a gp3 row stays unpriced (not guessed)
    assert "ebs.gp3" not in out["services"].get("us-west-2", {})
    assert "us-west-2-lax-1" not in out["services"]
    assert out["sources"]["cloudkeep-ebs-pricing"]["checked"] == "2030-01-01"


def test_ebs_gp3_is_priced_in_every_region_of_the_price_facts():
    from trainforge.plan import price_facts

    for region in json.loads((ROOT / "trainforge/plan/data/price_facts.json").read_text())[
        "ec2OnDemand"
    ]:
        p = price_facts.service(region, "ebs.gp3")
        assert p is not None and p.unit == "GB-month" and p.source in price_facts.SOURCES, region


def test_every_offered_catalog_type_is_priced_or_listed_missing_in_every_region():
    from trainforge.plan import price_facts

    tool = _tool()
    for region in json.loads((ROOT / "trainforge/plan/data/price_facts.json").read_text())[
        "ec2OnDemand"
    ]:
        for t in tool.offered_catalog_types(region):
            priced = price_facts.ec2_on_demand(region, t) is not None
            assert priced != (t in price_facts.MISSING[region]), (region, t)
    # the shipped dev stack's region: g5.12xlarge is priced, with its source
    p = price_facts.ec2_on_demand("us-west-2", "g5.12xlarge")
    assert p.usd == 5.672 and p.source in price_facts.SOURCES
