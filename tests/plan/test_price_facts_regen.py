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
    assert ec2["eu-west-1"]["prices"] == {"c5.2xlarge": 0.384}
    assert "g6.12xlarge" in ec2["eu-west-1"]["notListed"]  # asked for, not in the catalog
    assert ec2["eu-central-1"]["prices"] == {"g6.12xlarge": 5.75429}
    assert out["factsDate"] == "2030-01-01"
    assert out["sources"]["skypilot-catalog-v8"]["checked"] == "2030-01-01"
