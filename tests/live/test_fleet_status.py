"""`trainforge status|why` on a fleet's manager (MultiKueue): which worker runs a job, or whom
it was offered to. Recorded objects in the shapes Kueue 0.19 writes them on the manager
(apis/kueue/v1beta2 Workload `status.clusterName`, `status.nominatedClusterNames`,
`status.admissionChecks`; the MultiKueue check's message from
pkg/controller/admissionchecks/multikueue/workload.go at release-0.19 c90ed700c1)."""

from __future__ import annotations

import pytest

from tests.live.recorded import KUEUE, NOW, cond, gpu_container, meta
from tests.live.test_status import FakeApi, run
from trainforge.live import cli

NS = "research"
CHECK = "trainforge-fleet"


def _job(name: str, created: str, conditions: list[dict]) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": meta(name, NS, created, labels={"trainforge.io/job": name,
                                                    "kueue.x-k8s.io/queue-name": "default"}),
        "spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"},
                 "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
        "status": {"conditions": conditions},
    }  # fmt: skip


def _workload(job: str, created: str, status: dict) -> dict:
    owner = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": job,
            "uid": f"uid-{job}",
            "controller": True,
        }
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": meta(f"pytorchjob-{job}-5e1f2", NS, created, ownerReferences=owner,
                         labels={"kueue.x-k8s.io/job-uid": f"uid-{job}"}),
        "spec": {"queueName": "default", "podSets": [
            {"name": "master", "count": 1, "template": {"spec": {"containers": [
                gpu_container("pytorch", 1, "4", "16Gi")]}}},
            {"name": "worker", "count": 1, "template": {"spec": {"containers": [
                gpu_container("pytorch", 1, "4", "16Gi")]}}}]},
        "status": status,
    }  # fmt: skip


_ADMISSION = {"clusterQueue": NS, "podSetAssignments": [
    {"name": n, "count": 1, "flavors": {"cpu": "gpu-workloads", "memory": "gpu-workloads",
                                        "nvidia.com/gpu": "gpu-workloads"}}
    for n in ("master", "worker")]}  # fmt: skip
RUNS = _workload("gpt-small", "2026-11-25T11:00:00Z", {
    "conditions": [cond("QuotaReserved", "True", "2026-11-25T11:00:01Z", "QuotaReserved"),
                   cond("Admitted", "True", "2026-11-25T11:00:09Z", "Admitted")],
    "admission": _ADMISSION,
    "admissionChecks": [{"name": CHECK, "state": "Ready", "lastTransitionTime":
                         "2026-11-25T11:00:09Z", "message": 'The workload was admitted on "use1"'}],
    "clusterName": "use1",
})  # fmt: skip
OFFERED = _workload("mnist-ddp", "2026-11-25T11:50:00Z", {
    "conditions": [cond("QuotaReserved", "True", "2026-11-25T11:50:01Z", "QuotaReserved"),
                   cond("Admitted", "False", "2026-11-25T11:50:01Z", "NoChecks",
                        "The workload has not all checks ready")],
    "admission": _ADMISSION,
    "admissionChecks": [{"name": CHECK, "state": "Pending", "lastTransitionTime":
                         "2026-11-25T11:50:01Z", "message": ""}],
    "nominatedClusterNames": ["use1", "usw2"],
})  # fmt: skip
ROUTES = {
    f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/gpt-small": _job(
        "gpt-small", "2026-11-25T11:00:00Z",
        [cond("Created", "True", "2026-11-25T11:00:10Z"),
         cond("Running", "True", "2026-11-25T11:02:00Z")]),
    f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/mnist-ddp": _job(
        "mnist-ddp", "2026-11-25T11:50:00Z", []),
    f"{KUEUE}/namespaces/{NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=uid-gpt-small":
        {"kind": "WorkloadList", "items": [RUNS]},
    f"{KUEUE}/namespaces/{NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=uid-mnist-ddp":
        {"kind": "WorkloadList", "items": [OFFERED]},
}  # fmt: skip


@pytest.fixture
def api(tmp_path):
    server = FakeApi(ROUTES)
    server.config = server.kubeconfig(tmp_path)
    yield server
    server.httpd.shutdown()


def _run(capsys, api, main, job):
    code, out, err = run(capsys, main, job, "-n", NS, "--kubeconfig", api.config,
                         now=lambda: NOW)  # fmt: skip
    assert code == 0, err
    return out


def test_status_names_the_worker_that_runs_the_job(capsys, api):
    out = _run(capsys, api, cli.status_main, "gpt-small")
    assert "worker:     use1 (MultiKueue runs it on that cluster" in out
    assert 'check:      trainforge-fleet Ready: The workload was admitted on "use1"' in out
    assert "pods:       none on this cluster (they run on worker use1)" in out
    # the manager has no pod to price: its spend is the worker's
    assert "spend:      on worker use1, where its pods run (ask that cluster)" in out


def test_status_of_a_job_offered_to_workers_names_them(capsys, api):
    out = _run(capsys, api, cli.status_main, "mnist-ddp")
    assert "worker:     none yet; offered to use1, usw2 (the first to admit it runs it)" in out
    assert "check:      trainforge-fleet Pending" in out
    # its quota is reserved on the manager: it waits for the check, not for quota
    assert (
        "reserved:   its quota in ClusterQueue research; it waits for admission check(s) "
        "trainforge-fleet" in out
    )
    assert "asks:" not in out and "expected:" not in out


def test_why_sends_the_reader_to_the_worker(capsys, api):
    out = _run(capsys, api, cli.why_main, "gpt-small")
    assert out.splitlines()[0].startswith("Running on worker cluster use1: MultiKueue runs it")
    assert "`trainforge why gpt-small -n research` with that cluster's kubeconfig" in out
    out = _run(capsys, api, cli.why_main, "mnist-ddp")
    assert out.splitlines()[0] == (
        "Kueue reserved its quota on this cluster; it waits for its admission check(s):"
    )
    assert "  trainforge-fleet Pending" in out
    assert "MultiKueue offered it to use1, usw2; none has admitted it yet" in out


def test_docs_fleet_md_quotes_what_why_prints(capsys, api):
    from tests.live.test_status import ROOT

    out = _run(capsys, api, cli.why_main, "gpt-small")
    doc = (ROOT / "docs" / "fleet.md").read_text()
    quoted = "\n".join(out.splitlines()[:2])
    assert quoted in doc, f"docs/fleet.md lacks:\n{quoted}"


def test_no_expected_start_is_read_for_a_workload_whose_quota_is_reserved(capsys, api):
    """status estimated a start (its ResourceFlavors, the namespace's Workloads and
    LocalQueues, its queues' pending workloads) for a Workload whose quota Kueue has reserved, waiting
    for its admission checks, and printed none: now it reads none of that."""
    api.routes[f"{KUEUE}/clusterqueues/{NS}"] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": NS},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]}]},
    }  # fmt: skip
    api.seen.clear()
    _run(capsys, api, cli.status_main, "mnist-ddp")
    reads = [p for p in api.seen if p.endswith(("/workloads", "/localqueues"))
             or "/resourceflavors/" in p]  # fmt: skip
    assert reads == [], reads
