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


def test_what_an_sdk_trainjobs_pods_have_is_the_docs():
    """teams.md said every job pulls its data "through S3 or FSx"; a TrainJob the Kubeflow SDK
    makes runs the platform's `torch-distributed` runtime (what platform/trainer.py installs
    with the trainjob backend, which no shipped stack enables): no FSx claim, no ServiceAccount
    (the namespace's `default`, which none of prod's Pod Identity associations names), while
    the team's `training` ServiceAccount has one."""
    from trainforge.jobs.trainjob import SDK_RUNTIME, sdk_runtime_manifest
    from trainforge.platform.teams import TRAINING_SERVICE_ACCOUNT

    runtime = sdk_runtime_manifest()
    assert runtime["metadata"]["name"] == SDK_RUNTIME
    (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == [
        "/dev/shm",
        "/tmp",
        "/workspace",
    ]
    assert "serviceAccountName" not in pod
    identities = {
        r.inputs.get("serviceAccount")
        for r in shipped_plan("prod").inventory.resources
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    }
    assert TRAINING_SERVICE_ACCOUNT in identities and "default" not in identities
    assert (
        f"through the team's `{TRAINING_SERVICE_ACCOUNT}` ServiceAccount, whose Pod Identity role"
        in TEXT
    )
    assert (
        "mounts no FSx volume (only `/dev/shm`, `/tmp` and its `/workspace` emptyDir) and names "
        "no ServiceAccount, so they run as the namespace's `default` one, which no Pod Identity "
        "association names: no AWS credentials." in TEXT
    )
    assert "through S3 or FSx" not in TEXT
