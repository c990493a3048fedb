"""docs/teams.md's Kueue policy, as the prod plan renders it: the priority classes' values,
the cohort, the queueing strategy, the three preemption settings and the flavor fungibility
every team's ClusterQueue carries (the prose was pinned by nothing; the prod stack is planned
once per test session, tests.conftest.shipped_plan)."""

from __future__ import annotations

from tests.conftest import ROOT, shipped_plan

TEXT = " ".join((ROOT / "docs" / "teams.md").read_text(encoding="utf-8").split())


def _objects(kind: str) -> list[dict]:
    return [o.doc for o in shipped_plan("prod").objects if o.doc.get("kind") == kind]


def test_the_priority_classes_are_the_docs():
    values = {o["metadata"]["name"]: o["value"] for o in _objects("WorkloadPriorityClass")}
    names = ("high", "normal", "low")
    assert set(values) == set(names)
    said = ", ".join(str(values[n]) for n in names)
    assert f"names a Kueue `WorkloadPriorityClass` (values {said})" in TEXT


def test_every_teams_cluster_queue_is_as_the_docs_say():
    teams = [
        q["spec"] for q in _objects("ClusterQueue") if q["metadata"]["name"] in ("llm", "vision")
    ]
    assert len(teams) == 2
    low = next(
        o["value"] for o in _objects("WorkloadPriorityClass") if o["metadata"]["name"] == "low"
    )
    for spec in teams:
        assert spec["cohortName"] == "trainforge"
        assert "(default: one cohort `trainforge` for everyone)" in TEXT
        assert spec["queueingStrategy"] == "BestEffortFIFO"
        assert "`queueingStrategy: BestEffortFIFO` (default)" in TEXT
        pre = spec["preemption"]
        assert (
            f"(`kueue.preemption.reclaimWithinCohort`, default `{pre['reclaimWithinCohort']}`)"
            in TEXT
        )
        borrow = pre["borrowWithinCohort"]
        assert borrow["maxPriorityThreshold"] == low
        assert f"(`borrowWithinCohort`, default `{borrow['policy']}` up to `low`)" in TEXT
        assert f"(`withinClusterQueue: {pre['withinClusterQueue']}`)" in TEXT
        fung = spec["flavorFungibility"]
        said = ", ".join(f"{k}: {v}" for k, v in fung.items())
        assert f"`flavorFungibility: {{{said}}}`" in TEXT
