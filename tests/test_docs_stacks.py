"""What the docs say the shipped stack files hold is what they hold: docs/configuration.md
called prod's endpoint allow-listed and its p4d group reserved after issue 41 took its
documentation ranges and reservation id out (it admits the deploying machines and launches
on-demand until a user adds theirs), and nothing read the sentence against the files."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT
from trainforge.core import catalog


def _gpu(pool: dict) -> bool:
    """A pool or node group of GPU instance types (the catalog's families with a `gpu`)."""
    return all(catalog.family_of(t) in catalog.gpu_families() for t in pool["instanceTypes"])


def _config(stack: str) -> dict:
    return yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]


def _words(doc: str) -> str:
    return " ".join((ROOT / doc).read_text(encoding="utf-8").split())


def test_configuration_md_describes_the_shipped_stacks_as_they_are():
    text = _words("docs/configuration.md")
    said = text.split("Examples: `Pulumi.dev.yaml` (", 1)[1].split(").", 1)[0]
    dev, prod = said.split("`Pulumi.prod.yaml` (")
    dev_cfg, prod_cfg = _config("dev"), _config("prod")

    dev_pools = dev_cfg.get("trainforge:nodePools", []) + dev_cfg.get("trainforge:nodeGroups", [])
    families = {t.split(".")[0] for p in dev_pools for t in p["instanceTypes"]}
    assert {"g4dn", "g5"} <= families and "CPU pools" in dev
    assert ("no EFA" in dev) == (not any(p.get("efa") for p in dev_pools))

    groups, pools = prod_cfg["trainforge:nodeGroups"], prod_cfg["trainforge:nodePools"]
    p4d = next(g for g in groups if any(t.startswith("p4d.") for t in g["instanceTypes"]))
    assert p4d.get("efa") and "p4d EFA node group" in prod
    reserved = bool(p4d.get("capacityReservationId"))
    assert ("on-demand until you name your capacity reservation" in prod) == (not reserved)
    assert "reserved p4d" not in prod or reserved
    assert any(p.get("efa") and "p5.48xlarge" in p["instanceTypes"] for p in pools)
    assert "p5 EFA pool" in prod
    endpoint = prod_cfg["trainforge:endpoint"]
    listed = bool(endpoint.get("publicAccessCidrs"))
    assert ("allow-listed" in prod) == listed
    deployer = endpoint.get("deployFrom") == "deployer"
    assert ("admits the deploying machines until you list your ranges" in prod) == (
        deployer and not listed
    )


def test_the_readme_describes_the_shipped_stacks_as_they_are():
    """README: dev "a CPU pool and a small GPU pool, scale to zero, no EFA"; prod "p5/p4d EFA
    capacity, ..., two teams sharing GPUs through Kueue, and acceptance tests for its GPU
    capacity"."""
    text = _words("README.md")
    assert "(a CPU pool and a small GPU pool, scale to zero, no EFA)" in text
    dev = _config("dev")
    assert not dev.get("trainforge:nodeGroups")  # Karpenter pools only: they scale to zero
    pools = dev["trainforge:nodePools"]
    assert sorted(_gpu(p) for p in pools) == [False, True]
    assert not any(p.get("efa") for p in pools)

    assert "has p5/p4d EFA capacity, larger pools, two teams sharing GPUs" in text
    prod = _config("prod")
    capacity = prod["trainforge:nodeGroups"] + prod["trainforge:nodePools"]
    efa = {t.split(".")[0] for p in capacity if p.get("efa") for t in p["instanceTypes"]}
    assert efa == {"p5", "p4d"}
    assert len(prod["trainforge:teams"]) == 2
    assert "acceptance tests for its GPU capacity" in text
    assert any(p.get("acceptanceTest") for p in capacity if _gpu(p))


def test_services_md_says_where_prods_p4d_group_runs_as_the_plan_does():
    """docs/services.md said prod's p4d group runs in its reservation's zone, "known at
    `pulumi up`": the shipped group names no reservation, and the plan places it in FSx's
    zone (its "FSx zone" section); the sentence says so, and that a reservation moves it."""
    from tests.conftest import shipped_plan

    (group,) = [g for g in _config("prod")["trainforge:nodeGroups"] if g["name"] == "p4d-reserved"]
    text = _words("docs/services.md")
    said = "as shipped it has none and launches in FSx's zone, as the plan says"
    assert (said in text) == (not group.get("capacityReservationId"))
    section = next(s for s in shipped_plan("prod").sections if s.title.startswith("FSx zone"))
    line = next(ln for ln in section.lines if ln.strip().startswith("p4d-reserved (node group)"))
    assert line.endswith("same zone as FSx"), line
