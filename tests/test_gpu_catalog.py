"""The GPU/instance catalog (trainforge/core/data/gpu_catalog.json) is the one place a GPU family
is declared: a family added to a temporary catalog reaches every consumer, and every fact in
the shipped catalog names its source."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

from tests.conftest import ROOT, load_script
from trainforge.core import catalog

SHIPPED = ROOT / "trainforge/core/data/gpu_catalog.json"

# What each consumer makes of the catalog, printed by a fresh interpreter (the tables are built
# at import, once per process, as in a pod or a plan).
PROBE = """
import json
from trainforge.core import contract, versions
from trainforge.jobs import node_facts
from trainforge.jobs.estimate import facts as estimate
from trainforge.platform import node_health
from trainforge.training import gpus
from trainforge.training.acceptance import facts as acceptance
t = "zz9.48xlarge"
print(json.dumps({
    "rdma": "zz9" in contract.RDMA_FAMILIES,
    "pool_rdma": contract.PoolFacts(name="p", instance_types=(t,)).rdma,
    "arch": versions.GPU_ARCH.get("ZX1"),
    "min_driver": versions.GPU_MIN_DRIVER.get("ZX1"),
    "enis": node_facts.ENIS_PER_CARD.get(t),
    "mfu": estimate.mfu_for("ZX1", calibration={}).mid,
    "intra_bus": estimate.INTRA_NODE_BUS.get("ZX1"),
    "dcgm": t in node_health.DCGM_SERVER_INSTANCE_TYPES,
    "peak": gpus.match_gpu("NVIDIA ZX1 96GB").bf16_flops,
    "floor": acceptance.HEALTHCHECK_FLOORS_GBPS.get(t),
    "two_node": acceptance.allreduce_floor([t], 2).gbps,
}))
"""


def _with_new_family() -> dict:
    data = copy.deepcopy(json.loads(SHIPPED.read_text()))
    data["families"]["zz9"] = {"gpu": "ZX1", "rdma": True, "dcgmServerSizes": ["48xlarge"]}
    data["gpus"]["ZX1"] = {
        "computeCapability": 130,
        "minDriver": 610,
        "peak": {"bf16Flops": 2.5e15, "tf32Flops": 1.2e15, "fp32Flops": 8e13,
                 "memoryGiB": 96, "memoryBandwidth": 8e12},
        "mfu": {"low": 0.3, "mid": 0.41, "high": 0.5, "basis": "extrapolated", "source": "t"},
        "intraNodeBusBps": [5e11, 7e11],
    }  # fmt: skip
    data["instanceTypes"]["zz9.48xlarge"] = {
        "enisOnDefaultCard": [3, 40],
        "allreduceFloorGBps": 1200.0,
        "twoNodeAllreduceGBps": 900.0,
        "twoNodeReference": "zz9.48xlarge",
    }
    return data


def test_a_family_added_to_the_catalog_reaches_every_consumer(tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(_with_new_family()))
    env = {**os.environ, catalog.ENV: str(path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout)
    assert seen == {
        "rdma": True,
        "pool_rdma": True,
        "arch": 130,
        "min_driver": 610,
        "enis": [3, 40],
        "mfu": 0.41,
        "intra_bus": [5e11, 7e11],
        "dcgm": True,
        "peak": 2.5e15,
        "floor": 1200.0,
        "two_node": 720.0,
    }
    # and the shipped catalog knows none of it (the probe did not pass by accident)
    env.pop(catalog.ENV)
    probe = PROBE.replace(".bf16_flops,", " is None,")
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "rdma": False, "pool_rdma": False, "arch": None, "min_driver": None, "enis": None,
        "mfu": 0.3, "intra_bus": None, "dcgm": False, "peak": True, "floor": None,
        "two_node": None,
    }  # fmt: skip


def test_the_price_regeneration_prices_every_catalog_family(tmp_path, monkeypatch):
    tool = load_script("tools/regen_price_facts.py", "regen")
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps(_with_new_family()))
    data = tmp_path / "price_facts.json"
    data.write_text((ROOT / "trainforge/plan/data/price_facts.json").read_text())
    go = tmp_path / "p.go"
    go.write_text('\t"us-east-1": {\n\t\t"zz9.48xlarge": 99.5, "zz8.large": 1.0,\n\t},\n')
    monkeypatch.setattr(tool, "DATA", data)
    monkeypatch.setattr(tool, "CATALOG", cat)
    monkeypatch.setattr(sys, "argv", ["regen", "--karpenter", str(go), "--checked", "2030-01-01"])
    tool.main()
    region = json.loads(data.read_text())["ec2OnDemand"]["us-east-1"]
    # Karpenter's table's: the prices another source gave (region["otherSources"]) are kept
    karpenter = {k: v for k, v in region["prices"].items() if k not in region["otherSources"]}
    assert karpenter == {"zz9.48xlarge": 99.5}  # zz8 is in no catalog family


def test_every_fact_of_the_shipped_catalog_names_its_source():
    data = json.loads(SHIPPED.read_text())
    described = " ".join(s["what"] for s in data["sources"].values())
    for s in data["sources"].values():
        assert s["where"] and s["checked"], s
    for section in ("families", "gpus", "instanceTypes"):
        keys = {k for entry in data[section].values() for k in entry}
        for key in keys:
            assert f"{section}.*.{key}" in described, f"{section}.*.{key} has no source"


def test_the_shipped_tables_are_the_catalog():
    """Spot checks of the figures the consumers used to hold as literals."""
    from trainforge.core import contract, versions
    from trainforge.jobs import node_facts
    from trainforge.platform import node_health
    from trainforge.training import gpus
    from trainforge.training.acceptance import facts

    assert versions.GPU_ARCH["H100"] == 90 and versions.GPU_MIN_DRIVER == {"RTX PRO 4500": 595}
    assert "p5" in contract.RDMA_FAMILIES and "g6" not in contract.RDMA_FAMILIES
    assert node_facts.ENIS_PER_CARD["p5.48xlarge"] == (2, 50)
    assert "g6e.12xlarge" in node_health.DCGM_SERVER_INSTANCE_TYPES
    assert gpus.GPUS["L40S"].bf16_flops == 362e12
    assert facts.REFERENCE_STANDS_FOR["p5en.48xlarge"] == "p5.48xlarge"
