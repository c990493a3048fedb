"""A job's spend so far (`trainforge status`): OpenCost's figure through the API server's
service proxy to Prometheus, else run time x on-demand price, always saying which, against
recorded API responses (tests/live/recorded.py)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

import pytest
import yaml

from tests.live import recorded
from tests.live.test_status import FakeApi
from trainforge.live import spend
from trainforge.live.gather import gather
from trainforge.live.kube import Api


def live(tmp_path, routes=None, forbidden=()):
    server = FakeApi(routes or recorded.ROUTES, set(forbidden))
    return server, Api(server.kubeconfig(tmp_path))


def test_opencost_basis_when_its_prometheus_answers(tmp_path):
    server, api = live(tmp_path)
    try:
        g = gather(api, "llm", "mnist-ddp", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert (s.usd, s.basis) == (6.84, "OpenCost")
        (sent,) = [k for k in server.seen if k.startswith(recorded.PROMETHEUS)]
        query = sent.split("?query=", 1)[1]
        # the job's pods only, since the job was created (30 minutes), sampled each minute
        assert 'namespace="llm", pod=~"mnist-ddp-(' in query
        assert query.endswith("[1800s:1m])) / 60")
    finally:
        server.httpd.shutdown()


def test_estimate_basis_when_prometheus_is_forbidden(tmp_path):
    """vit-l: 2 pods, each holding all 4 GPUs of a g5.12xlarge ($5.672/h in us-east-1) since
    08:01, at 12:00: 2 x 3h59m x $5.672."""
    server, api = live(tmp_path, forbidden=recorded.FORBIDDEN)
    try:
        g = gather(api, "vision", "vit-l", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert s.basis == "estimate"
        assert s.usd == pytest.approx(2 * (3 + 59 / 60) * 5.672)
        assert s.line().startswith("spend:      ~$45.19 so far (estimate: ")
        assert s.detail.endswith(
            "; not OpenCost: cannot read OpenCost's Prometheus monitoring/"
            "kube-prometheus-stack-prometheus (403: your access does not include it)"
        )
    finally:
        server.httpd.shutdown()


FAILED_READ = [
    (401, "Unauthorized", "401: the API server did not accept your credentials"),
    (403, "Forbidden", "403: your access does not include it"),
    (500, "Internal Server Error", "500 Internal Server Error: the cluster failed to answer, "
     "not your access; try again later"),
    (503, "Service Unavailable", "503 Service Unavailable: the cluster failed to answer, "
     "not your access; try again later"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "reason", "cause"), FAILED_READ)
def test_a_failed_prometheus_read_says_whose_failure_it_is(tmp_path, code, reason, cause):
    """The one rule of a failed read (gather.cannot_read): refused (401, 403) says so; any
    other error is the cluster's ("not reachable" before, for a 500 too), never the user's
    access."""
    (query,) = recorded.FORBIDDEN
    server, api = live(tmp_path)
    server.failing[query] = (code, reason)
    try:
        g = gather(api, "vision", "vit-l", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert s.basis == "estimate" and query in server.seen
        assert s.detail.endswith(
            "; not OpenCost: cannot read OpenCost's Prometheus monitoring/"
            f"kube-prometheus-stack-prometheus ({cause})"
        )
    finally:
        server.httpd.shutdown()


@pytest.mark.parametrize(("code", "reason", "cause"), FAILED_READ)
def test_a_failed_node_read_says_whose_failure_it_is(tmp_path, code, reason, cause):
    server, api = live(tmp_path, forbidden=recorded.FORBIDDEN)
    server.failing["/api/v1/nodes/ip-10-40-3-17.ec2.internal"] = (code, reason)
    try:
        g = gather(api, "vision", "vit-l", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert s.usd is None
        assert s.detail.startswith(
            f"estimate impossible: cannot read node ip-10-40-3-17.ec2.internal ({cause}); "
            "not OpenCost: "
        )
    finally:
        server.httpd.shutdown()


def test_a_pods_share_of_its_node_is_its_gpus_else_cpu_or_memory():
    node = recorded.node("n", "g5.12xlarge", "4", "48", "192Gi")
    one_gpu = {"spec": {"containers": [recorded.gpu_container("c", 1, "4", "16Gi")]}}
    assert spend._share(one_gpu, node) == 0.25
    cpu_only = {
        "spec": {"containers": [{"resources": {"requests": {"cpu": "12", "memory": "96Gi"}}}]}
    }
    assert spend._share(cpu_only, node) == 0.5  # memory: 96 of 192 GiB


def test_a_pods_share_counts_what_opencost_allocates_through_the_one_request_model():
    """The estimate stands in for OpenCost, which allocates a pod by its app containers only
    (max(request, usage) for CPU and memory, the GPU request else its limit; no init
    container, sidecar or overhead: opencost v1.112.0 ComputeCostData). The share summed the
    containers' `requests` by hand, so a GPU given as a limit alone counted no GPU (a 2-GPU
    pod of a 4-GPU node was 1/12 of it, by CPU). Now it reads the one request model's
    app-container term (`container_requests`, a limit standing for a missing request), while
    the scheduler's `pod_requests` still adds the sidecar, init container and overhead."""
    from fractions import Fraction

    from trainforge.core.pods import container_requests, pod_requests

    node = recorded.node("n", "g5.12xlarge", "4", "48", "192Gi")
    spec = {
        "containers": [
            {"name": "t", "resources": {"limits": {"nvidia.com/gpu": "2"},
                                        "requests": {"cpu": "4", "memory": "16Gi"}}},
        ],
        "initContainers": [
            {"name": "fetch", "resources": {"requests": {"cpu": "40"}}},
            {"name": "proxy", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "2", "memory": "96Gi"}}},
        ],
        "overhead": {"cpu": "1"},
    }  # fmt: skip
    assert spend._share({"spec": spec}, node) == 0.5  # its 2 GPUs of the node's 4
    cpu_only = copy.deepcopy(spec)
    del cpu_only["containers"][0]["resources"]["limits"]
    cpu_only["containers"][0]["resources"]["requests"] = {"cpu": "12", "memory": "48Gi"}
    assert spend._share({"spec": cpu_only}, node) == 0.25  # 12 of 48 CPUs, 48 of 192 GiB
    opencost = container_requests(cpu_only)
    assert opencost == {"cpu": 12, "memory": 48 * 2**30}
    # the scheduler's: CPU max(init 40, containers 12 + sidecar 2) + overhead 1; memory
    # containers 48 GiB + the sidecar's 96 GiB
    scheduler = pod_requests(cpu_only)
    assert scheduler == {"cpu": Fraction(40 + 1), "memory": Fraction(144 * 2**30)}


def test_no_opencost_series_falls_back_and_says_why(tmp_path):
    routes = dict(recorded.ROUTES)
    key = next(k for k in routes if k.startswith(f"{recorded.PROMETHEUS}?query="))
    routes[key] = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
    for n in ("ip-10-40-1-9.ec2.internal", "ip-10-40-1-23.ec2.internal"):
        routes[f"/api/v1/nodes/{n}"] = recorded.node(n, "p4d.24xlarge", "8", "95690m", "1100Gi")
    server, api = live(tmp_path, routes)
    try:
        g = gather(api, "llm", "mnist-ddp", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert s.basis == "estimate" and "OpenCost has no cost series" in s.detail
        # each mnist-ddp pod holds 4 of a p4d.24xlarge's 8 GPUs ($21.957642/h in us-east-1);
        # the recorded pods started 08:01
        assert s.usd == pytest.approx(2 * (3 + 59 / 60) * 21.957642 / 2)
    finally:
        server.httpd.shutdown()


def test_unknown_when_neither_basis_can_be_read(tmp_path):
    nodes = {f"/api/v1/nodes/ip-10-40-3-{i}.ec2.internal" for i in (17, 52)}
    server, api = live(tmp_path, forbidden=set(recorded.FORBIDDEN) | nodes)
    try:
        g = gather(api, "vision", "vit-l", metrics=False)
        s = spend.job_spend(api, g, recorded.NOW)
        assert s.usd is None and s.line().startswith("spend:      unknown so far (")
        assert (
            "cannot read node ip-10-40-3-17.ec2.internal (403: your access does not include it)"
            in s.detail
        )
    finally:
        server.httpd.shutdown()


def test_spot_nodes_say_the_estimate_is_a_ceiling(tmp_path):
    routes = copy.deepcopy(recorded.ROUTES)
    for k, v in routes.items():
        if k.startswith("/api/v1/nodes/"):
            v["metadata"]["labels"]["karpenter.sh/capacity-type"] = "spot"
    server, api = live(tmp_path, routes, recorded.FORBIDDEN)
    try:
        g = gather(api, "vision", "vit-l", metrics=False)
        assert "the on-demand price is the ceiling" in spend.job_spend(api, g, recorded.NOW).detail
    finally:
        server.httpd.shutdown()


def test_an_evicted_job_without_pods_is_not_called_free():
    g = type("G", (), {})()
    g.pods = []
    g.workload = {"status": {"conditions": [{"type": "Admitted", "status": "False"}]}}
    assert spend.never_ran(g)
    g.workload["status"]["conditions"].append({"type": "Evicted", "status": "True"})
    assert not spend.never_ran(g)


def test_the_prometheus_it_asks_is_the_one_opencost_reads():
    from trainforge.platform import opencost
    from trainforge.stack.services import MonitoringConfig

    assert spend.PROMETHEUS_SERVICE == opencost.PROMETHEUS_SERVICE
    assert spend.PROMETHEUS_PORT == opencost.PROMETHEUS_PORT
    assert MonitoringConfig().namespace == spend.PROMETHEUS_NAMESPACE


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not found")
def test_the_query_is_valid_promql(tmp_path):
    rule = {"record": "check:spend", "expr": spend.opencost_query("llm", "mnist-ddp", 1800)}
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": [rule]}]}))
    res = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_docs_cost_shows_the_lines_status_prints():
    from tests.live.test_status import RESTART_STATUS, ROOT, RUNNING_STATUS

    doc = (ROOT / "docs" / "cost.md").read_text()
    for block in (RUNNING_STATUS, RESTART_STATUS):
        (line,) = [x for x in block.splitlines() if x.startswith("spend:")]
        assert f"\n{line}\n" in doc, line
