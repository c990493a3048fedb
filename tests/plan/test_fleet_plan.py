"""`plan --stack fleet` end to end: the example manager's plan plans its two workers, reads
their kubeconfigs through its StackReferences (so it renders a MultiKueueCluster per worker),
and keeps the kubeconfigs secret in everything it writes."""

from __future__ import annotations

import json

from tests.conftest import shipped_plan
from trainforge.plan.checks import fleet as FC
from trainforge.plan.runner import SECRET


def test_the_manager_connects_to_each_planned_worker_and_keeps_its_kubeconfig_secret():
    result = shipped_plan("fleet")
    clusters = {o.doc["metadata"]["name"] for o in result.objects if o.kind == "MultiKueueCluster"}
    assert clusters == {"use1", "usw2"}
    secrets = [o.doc for o in result.objects if o.kind == "Secret"
               and o.doc["metadata"]["name"].endswith("-kubeconfig")]  # fmt: skip
    assert {s["metadata"]["name"] for s in secrets} == {"use1-kubeconfig", "usw2-kubeconfig"}
    assert all(s["stringData"] == {"kubeconfig": SECRET} for s in secrets)
    # the stand-in token of a worker never reaches what the plan prints or writes
    assert "standin-token" not in json.dumps(result.to_json())
    assert not any("exports no fleetKubeconfig" in w for w in result.inventory.warnings)


def test_the_fleet_section_lists_each_job_on_each_worker_with_its_cost():
    section = next(s for s in shipped_plan("fleet").sections if s.title == FC.TITLE)
    jobs = {j["job"]: j for j in section.data["jobs"]}
    assert set(jobs) == {"mnist-ddp", "gpt-small-fsdp"}
    for job in jobs.values():
        assert [w["worker"] for w in job["workers"]] == ["use1", "usw2"]
    gpu = {w["worker"]: w for w in jobs["gpt-small-fsdp"]["workers"]}
    assert gpu["use1"]["pool"] == "gpu" and "g6.xlarge" in gpu["use1"]["cost"]
    assert "g5.xlarge" in gpu["usw2"]["cost"] and "us-west-2" in gpu["usw2"]["cost"]
    # a price the facts lack is said, not guessed
    cpu = {w["worker"]: w for w in jobs["mnist-ddp"]["workers"]}
    assert cpu["usw2"]["onDemandPerHour"] is None and "price missing" in cpu["usw2"]["cost"]
