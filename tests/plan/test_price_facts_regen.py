"""tools/regen_price_facts.py rebuilds the EC2 tables of the price facts from the pinned
upstream tables (Karpenter's generated Go table, the SkyPilot AWS catalog)."""

from __future__ import annotations

import importlib.util
import json
import sys

from tests.conftest import ROOT

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
    spec = importlib.util.spec_from_file_location("regen", ROOT / "tools/regen_price_facts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    # us-east-1: Karpenter's figures for the families already priced (x9 is not one)
    assert ec2["us-east-1"]["prices"] == {"c5.2xlarge": 0.34, "c5.large": 0.085}
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
