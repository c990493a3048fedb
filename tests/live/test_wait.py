"""A pending job's expected start (trainforge/live/wait.py) against the fake API server of
test_status.py: the figure and its basis, the cases where it cannot be estimated, that it is
the plan's figure for the same queue, and that every read it makes is one the team's RBAC
grants (trainforge/platform/team_access.py)."""

from __future__ import annotations

import copy
import pathlib
import re

import pytest

from tests.jobs.helpers import CODE, GPU_POOL, target
from tests.live import recorded
from tests.live.test_status import PLATFORM, REFUSED, FakeApi, run
from trainforge.core.contract import GPU_RESOURCE
from trainforge.jobs.backends import emit
from trainforge.jobs.duration import (
    DEADLINE_DETAIL,
    EXPECTED_BASIS,
    EXPECTED_SECONDS,
    expected_duration,
)
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.live import cli, wait
from trainforge.live.gather import gather
from trainforge.live.kube import Api
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q
from trainforge.plan.kueue import words as W
from trainforge.platform.queues import resource_flavor

ROOT = pathlib.Path(__file__).resolve().parents[2]
NS = recorded.PENDING_NS
WORKLOADS = f"{recorded.KUEUE}/namespaces/{NS}/workloads"
CQ = f"{recorded.KUEUE}/clusterqueues/llm"
VIS = (
    f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/training/pendingworkloads"
)


@pytest.fixture
def api(tmp_path):
    server = FakeApi(copy.deepcopy(recorded.ROUTES), recorded.FORBIDDEN)
    server.config = server.kubeconfig(tmp_path)
    yield server
    server.httpd.shutdown()


def expected(api: FakeApi, job: str = recorded.PENDING, ns: str = NS) -> wait.Expected | None:
    client = Api(api.config)
    return wait.expected_start(client, gather(client, ns, job), recorded.NOW)


def test_the_expected_start_is_when_the_queue_frees_room_for_the_job(api):
    e = expected(api)
    # bert-sweep ends at +1h (3h expected, admitted 2h ago), llama-ft (24 GPUs) takes its
    # place; llama-pt's metrics say +2h: then 24 + 32 GPUs fit the 64 nominal
    assert e.seconds == 7200 and e.unknown == ""
    assert [(h.job, h.running, h.seconds) for h in e.holders] == [
        ("bert-sweep", True, 3600),
        ("llama-pt", True, 7200),
        ("llama-ft", False, 5400),
    ]


def test_a_job_ahead_that_ends_later_moves_the_start(api):
    metrics = f"/api/v1/namespaces/{NS}/pods/llama-pt-master-0:9400/proxy/metrics"
    api.routes[metrics] = recorded.LLAMA_PT_METRICS.replace("7200.0", "10800.0")
    assert expected(api).seconds == 9000  # now llama-ft's end (+1h + 1.5h) frees the room


def test_why_gives_the_same_expected_start(capsys, api):
    code, out, _ = run(
        capsys, cli.why_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    assert "  expected: start after 2.0 h (about 2026-11-25 14:00 UTC)" in out


def test_the_flavor_it_waits_for_is_the_one_kueue_assigns(capsys, api):
    """A spot flavor listed first, whose taint the job does not tolerate, with room now:
    Kueue skips it and names it in its message (its reasons sorted); the job waits for
    efa-training (the flavor assignment of trainforge.plan.kueue), not for a flavor the
    message names (which read as "room now" in spot-gpu)."""
    spot = copy.deepcopy(api.routes[CQ]["spec"]["resourceGroups"][0]["flavors"][0])
    spot["name"] = "spot-gpu"
    api.routes[CQ]["spec"]["resourceGroups"][0]["flavors"].insert(0, spot)
    taint = {"key": "trainforge.io/spot", "value": "true", "effect": "NoSchedule"}
    api.routes[f"{recorded.KUEUE}/resourceflavors/spot-gpu"] = recorded.resource_flavor(
        "spot-gpu", [taint]
    )
    for path in (WORKLOADS, f"{WORKLOADS}?labelSelector=kueue.x-k8s.io/job-uid=5f0c1e2a-pending"):
        wl = next(w for w in api.routes[path]["items"] if "gpt-13b" in w["metadata"]["name"])
        wl["status"]["conditions"][0]["message"] = W.message(
            {
                "worker": [
                    W.untolerated(taint, "spot-gpu"),
                    W.short(GPU_RESOURCE, "efa-training", 16),
                ]
            }
        )
    e = expected(api)
    assert (e.flavor, e.seconds, e.unknown) == ("efa-training", 7200, "")
    code, out, _ = run(
        capsys, cli.why_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    assert (
        "  expected: start after 2.0 h (about 2026-11-25 14:00 UTC), within ClusterQueue llm's "
        "nominal quota in flavor efa-training\n"
    ) in out


def _timed(api: FakeApi, job: str, seconds: int, basis: str = DEADLINE_DETAIL) -> None:
    """`job` expected to run `seconds` (by default its activeDeadlineSeconds: a ceiling), as
    the emitter annotates it."""
    notes = api.routes[f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/{job}"]["metadata"]
    notes["annotations"] = {EXPECTED_BASIS: basis, EXPECTED_SECONDS: str(seconds)}


def test_a_start_the_end_of_a_deadline_timed_job_lets_in_is_within_not_after(capsys, api):
    """llama-pt's end lets gpt-13b in: timed by its deadline (no ETA in its metrics), it may
    end sooner, so the start is within 2.0 h; bert-sweep's deadline lets in only llama-ft,
    ahead of it, so with that one alone the start stays after 2.0 h."""
    metrics = f"/api/v1/namespaces/{NS}/pods/llama-pt-master-0:9400/proxy/metrics"
    api.routes[metrics] = recorded.LLAMA_PT_METRICS.replace(
        'trainforge_eta_seconds{run="llama-pt"} 7200.0\n', ""
    )
    ran = 6 * 3600 - 5  # llama-pt was admitted at 06:00:05, now is 12:00
    _timed(api, "llama-pt", ran + 7200, "16000 steps x 1.8s (expectedStepSeconds)")
    _timed(api, "bert-sweep", 3 * 3600)
    e = expected(api)
    assert (e.seconds, e.bound, e.unknown) == (7200, False, "")
    _timed(api, "llama-pt", ran + 7200)
    e = expected(api)
    assert (e.seconds, e.bound, e.unknown) == (7200, True, "")
    code, out, _ = run(
        capsys, cli.why_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    assert "  expected: start within 2.0 h (by about 2026-11-25 14:00 UTC), within " in out
    assert (
        "llama-pt holds 32 GPUs, ends within 2.0 h (runs at most 8.0 h: at most "
        "activeDeadlineSeconds (a ceiling); admitted 6.0 h ago)"
    ) in " ".join(out.split())


def _hand_written(api: FakeApi) -> None:
    # a job not emitted by trainforge (kubectl, the Kubeflow SDK): no annotations
    job = api.routes[f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-ft"]
    del job["metadata"]["annotations"]


def _unknown_duration(api: FakeApi) -> None:
    job = api.routes[f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-ft"]
    job["metadata"]["annotations"] = {EXPECTED_BASIS: UNKNOWN_BASIS}


def _unseen_holder(api: FakeApi) -> None:
    api.routes[CQ]["status"]["admittedWorkloads"] = 4


def _unseen_ahead(api: FakeApi) -> None:
    api.routes[VIS]["items"][1]["positionInClusterQueue"] = 2


def _overdue(api: FakeApi) -> None:
    wl = next(w for w in api.routes[WORKLOADS]["items"] if "bert-sweep" in w["metadata"]["name"])
    for c in wl["status"]["conditions"]:
        c["lastTransitionTime"] = "2026-11-25T08:00:00Z"


def _room_now(api: FakeApi) -> None:
    # without llama-pt the team's queue, as the team sees it, holds 16 of 64 GPUs
    items = api.routes[WORKLOADS]["items"]
    api.routes[WORKLOADS]["items"] = [w for w in items if "llama-pt" not in w["metadata"]["name"]]
    api.routes[CQ]["status"]["admittedWorkloads"] = 2


def _over_nominal(api: FakeApi) -> None:
    for r in api.routes[CQ]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["nominalQuota"] = "24"


def _no_positions(api: FakeApi) -> None:
    api.forbidden.add(
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/default/pendingworkloads"
    )


def _untolerated_flavor(api: FakeApi) -> None:
    taint = [{"key": "trainforge.io/reserved", "value": "true", "effect": "NoSchedule"}]
    flavor = recorded.resource_flavor("efa-training", taint)
    api.routes[f"{recorded.KUEUE}/resourceflavors/efa-training"] = flavor


UNKNOWN_BASIS = "unknown: set expectedStepSeconds (or runPolicy.activeDeadlineSeconds as a ceiling)"
UNKNOWN = {
    "unknown-duration": (
        _unknown_duration,
        f"llama-ft (waiting ahead (position 1)) has no expected end: {UNKNOWN_BASIS}",
    ),
    "no-duration": (
        _hand_written,
        "llama-ft (waiting ahead (position 1)) has no expected end: no expected duration "
        "(no trainforge.io/expected-duration-seconds annotation)",
    ),
    "holder-elsewhere": (
        _unseen_holder,
        "1 of the 4 workloads holding ClusterQueue llm's quota are outside namespace llm "
        "(your access reads only llm)",
    ),
    "ahead-elsewhere": (
        _unseen_ahead,
        "1 of the 2 workloads ahead of it in ClusterQueue llm are outside namespace llm",
    ),
    "overdue": (
        _overdue,
        "bert-sweep (running) has no expected end: ran 4.0 h, past its expected 3.0 h: "
        "6000 steps x 1.8s (expectedStepSeconds)",
    ),
    "room-now": (
        _room_now,
        "by what your access shows, ClusterQueue llm has room for it now; what holds it is "
        "outside that view (quota of cohort trainforge borrowed by other teams, or the "
        "namespace's ResourceQuota); Kueue says: couldn't assign flavors to pod set worker: "
        "insufficient unused quota for nvidia.com/gpu in flavor efa-training, 16 more needed",
    ),
    "over-nominal": (
        _over_nominal,
        "it asks 32 GPUs in flavor efa-training, more than ClusterQueue llm's nominal 24 GPUs: "
        "it runs only on quota its cohort lends, which your access does not show",
    ),
    "no-flavor": (
        _untolerated_flavor,
        "Kueue assigns it no one flavor of ClusterQueue llm: couldn't assign flavors to pod "
        "set master: untolerated taint {trainforge.io/reserved true NoSchedule <nil>} in "
        "flavor efa-training",
    ),
    "no-positions": (
        _no_positions,
        "cannot read the queue positions of LocalQueue default (403: your access does not "
        "include it)",
    ),
}


@pytest.mark.parametrize("case", list(UNKNOWN))
def test_it_says_when_the_start_cannot_be_estimated_and_why(api, case):
    change, why = UNKNOWN[case]
    change(api)
    e = expected(api)
    assert (e.seconds, e.unknown) == (None, why)
    assert wait.lines(e) == [("expected", f"start cannot be estimated: {why}")]


def test_a_read_that_fails_leaves_the_rest_of_status_standing(capsys, api):
    api.forbidden.add(f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-pt")
    code, out, _ = run(
        capsys, cli.status_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    assert (
        "expected:   start cannot be estimated: cannot read /apis/kubeflow.org/v1/"
        "namespaces/llm/pytorchjobs/llama-pt (403: your access does not include it)\n"
    ) in out
    assert "pods:       none yet" in out


# --- a read the estimate needs that fails: the one rule (gather.cannot_read) ---------------------

LQ_DEFAULT = VIS.replace("/training/", "/default/")


@pytest.mark.parametrize(
    ("code", "reason", "cause"),
    [
        (401, "Unauthorized", REFUSED[401]),
        (403, "Forbidden", REFUSED[403]),
        (500, "Internal Server Error", f"500 Internal Server Error: {PLATFORM}"),
        (503, "Service Unavailable", f"503 Service Unavailable: {PLATFORM}"),
    ],
)
@pytest.mark.parametrize(
    ("path", "what"),
    [
        (f"{recorded.KUEUE}/resourceflavors/efa-training", "ResourceFlavor efa-training"),
        (WORKLOADS, f"the Kueue Workloads of namespace {NS}"),
        (f"{recorded.KUEUE}/namespaces/{NS}/localqueues", f"the LocalQueues of namespace {NS}"),
        (LQ_DEFAULT, "the queue positions of LocalQueue default"),
        (
            f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-pt",
            f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-pt",
        ),
    ],
)
def test_a_failed_read_says_whose_failure_it_is(api, code, reason, cause, path, what):
    """Refused (401, 403) says so; any other error is the cluster's, never worded as the
    user's access (a 500 was "a read failed: GET PATH: 500 ...", naming nobody; a 503 of the
    visibility API "does not answer")."""
    assert path in api.routes  # each read is one the estimate makes
    api.failing[path] = (code, reason)
    e = expected(api)
    assert (e.seconds, e.unknown) == (None, f"cannot read {what} ({cause})")
    assert wait.lines(e) == [("expected", f"start cannot be estimated: {e.unknown}")]


def test_a_visibility_api_not_served_at_any_version_is_said_so(api):
    """Not found (404) at v1beta2 is absent, and the next version is read; at both: said so."""
    api.routes.pop(LQ_DEFAULT)
    e = expected(api)
    assert e.unknown == (
        "Kueue's visibility API is not served (not found: visibility.kueue.x-k8s.io/v1beta2, "
        "visibility.kueue.x-k8s.io/v1beta1)"
    )
    assert LQ_DEFAULT.replace("v1beta2", "v1beta1") in api.seen


def test_the_docs_show_what_it_prints():
    doc = (ROOT / "docs" / "troubleshooting.md").read_text()
    for case in ("no-duration", "holder-elsewhere"):
        line = f"{'expected:':<12}start cannot be estimated: {UNKNOWN[case][1]}"
        assert line in doc, line


def test_a_workload_is_counted_as_the_kueue_model_counts_it():
    """A container that gives only limits asks them (Kueue: a limit stands for its missing
    request) and the largest init container counts: the live wait counts a pod as the plan's
    queue does (trainforge.plan.kueue.workload), not by its containers' requests alone."""
    pod = {
        "initContainers": [{"resources": {"requests": {"cpu": "8"}}}],
        "containers": [{"resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "2"}}}],
    }
    wl = {"spec": {"podSets": [{"name": "main", "count": 4, "template": {"spec": pod}}]}}
    assert K.workload_need(wl) == {"nvidia.com/gpu": 32, "cpu": 32}


def _limits_only(api: FakeApi) -> None:
    """Every served Workload's containers give their requests as limits only."""
    for doc in api.routes.values():
        if not isinstance(doc, dict):
            continue
        for wl in doc.get("items", [doc]) if doc.get("kind") == "WorkloadList" else [doc]:
            for ps in (wl.get("spec") or {}).get("podSets") or []:
                for c in ps["template"]["spec"].get("containers", []):
                    res = c.get("resources") or {}
                    c["resources"] = {
                        "limits": {**res.get("requests", {}), **res.get("limits", {})}
                    }


def test_a_workload_giving_only_limits_is_counted_as_kueue_counts_it(capsys, api):
    """Kueue counts a container's limit for its missing request: it adjusts every Workload it
    reads (pkg/workload/resources.go `AdjustResources` -> `handleLimitsToRequests` ->
    `UseLimitsAsMissingRequestsInPod`, called by pkg/cache/queue/manager.go before
    `workload.NewInfo`) and totals the adjusted pod spec (pkg/workload/workload.go
    `totalRequestsFromPodSets`: the Kubernetes `PodRequests` times the count), release-0.19
    c90ed70. So `trainforge wait`'s expected start, `trainforge status`'s "asks" lines and
    `why` are the same when the pending job and the jobs ahead give only limits (status's
    lines read nothing before: it totalled the requests alone)."""

    def said() -> str:
        out = ""
        for main in (cli.status_main, cli.why_main):
            code, text, _ = run(
                capsys, main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
                now=lambda: recorded.NOW,
            )  # fmt: skip
            assert code == 0
            out += text
        return out

    before = expected(api)
    shown = said()
    assert "asks:       3 x worker pod, each 90 cores, 1000Gi memory, 8 GPUs" in shown
    _limits_only(api)
    wl = next(w for w in api.routes[WORKLOADS]["items"] if "gpt-13b" in w["metadata"]["name"])
    assert (
        "requests" not in wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
    )
    after = expected(api)
    assert (after.seconds, after.flavor, after.unknown) == (7200, "efa-training", "")
    assert [(h.job, h.need) for h in after.holders] == [(h.job, h.need) for h in before.holders]
    assert said() == shown


def test_the_expected_start_counts_the_namespaces_limit_range(api):
    """Containers that ask GPUs only: Kueue gives each the namespace's LimitRange defaults
    (the platform's: 500m CPU, 1Gi; pkg/workload/resources.go `handlePodLimitRange`), and so
    does the live wait, for the pending job and every job ahead (it counted GPUs alone)."""
    from fractions import Fraction

    from trainforge.platform.services_config import TeamConfig
    from trainforge.platform.teams import LIMIT_RANGE_NAME, limit_range_spec

    for doc in api.routes.values():
        if isinstance(doc, dict) and "items" in doc:
            for wl in doc.get("items", []):
                for ps in (wl.get("spec") or {}).get("podSets") or []:
                    for c in ps["template"]["spec"].get("containers", []):
                        req = (c.get("resources") or {}).get("requests") or {}
                        req.pop("cpu", None)
                        req.pop("memory", None)
    lr = {"metadata": {"name": LIMIT_RANGE_NAME, "namespace": NS},
          "spec": limit_range_spec(TeamConfig(name="llm"))}  # fmt: skip
    api.routes[f"/api/v1/namespaces/{NS}/limitranges"] = {"kind": "LimitRangeList", "items": [lr]}
    client = Api(api.config)
    g = gather(client, NS, recorded.PENDING)
    assert g.limit_ranges == [lr] and g.limit_ranges_unread == ""
    assert K.workload_need(g.workload, g.limit_ranges)["cpu"] == 2  # 4 pods x 500m
    e = wait.expected_start(client, g, recorded.NOW)
    assert e.seconds == 7200 and e.unknown == ""
    assert e.holders
    for h in e.holders:
        pods = h.need["nvidia.com/gpu"] / 8
        assert (h.need["cpu"], h.need["memory"]) == (pods / 2, pods * 2**30), h.job
        assert isinstance(h.need["cpu"], Fraction)


def test_an_admitted_job_has_no_expected_start(api):
    assert expected(api, recorded.RUN, recorded.RUN_NS) is None


# --- the plan's figure for the same queue --------------------------------------------------------


def _emitted(name: str, workers: int, steps: int, step_seconds: float):
    raw = {
        "name": name, "team": "llm", "pool": GPU_POOL.name, "workers": workers,
        "model": "gpt", "steps": steps, "expectedStepSeconds": step_seconds,
    }  # fmt: skip
    t = target(GPU_POOL)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    return job, emit(job, t, CODE)


def test_a_deadline_timed_jobs_object_says_so_as_the_live_wait_reads_it():
    """The emitter's basis annotation of a job timed by its deadline alone is what the live
    wait reads as a ceiling (`_timed` above writes the same)."""
    raw = {"name": "d", "team": "llm", "pool": GPU_POOL.name, "workers": 1,
           "runPolicy": {"activeDeadlineSeconds": 7200},
           "entrypoint": {"command": ["python", "-c", "pass"]}, "image": "repo/img:1"}  # fmt: skip
    t = target(GPU_POOL)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    notes = emit(job, t, CODE).workload["metadata"]["annotations"]
    assert (notes[EXPECTED_BASIS], notes[EXPECTED_SECONDS]) == (DEADLINE_DETAIL, "7200")


def test_the_live_estimate_is_the_plans_for_the_same_queue(tmp_path):
    """Four jobs the emitter wrote (their annotations are the plan's expected durations),
    submitted at once into the team's idle queue: the plan's simulation gives the last one a
    start; on the live cluster 40 minutes later, with the first two admitted, `status` gives
    the same start, 40 minutes nearer."""
    specs = [("a", 2, 1000, 3.6), ("b", 1, 2000, 3.6), ("c", 2, 500, 3.6), ("d", 2, 100, 3.6)]
    emitted = [_emitted(*s) for s in specs]
    gpus = GPU_POOL.gpus_per_node
    cq = recorded.cluster_queue("llm", GPU_POOL.name, str(3 * gpus), "0")
    cq["status"]["admittedWorkloads"] = 2
    # the plan: every job submitted at once, each running its expected duration
    queue = K.cluster_queue(cq)
    queue.cohort = None
    plan = []
    for i, (job, _) in enumerate(emitted):
        w = Q.Workload(job.name, "llm", NS, i, queue="llm", flavor=GPU_POOL.name)
        w.need = {Q.GPU: K.quantity(job.gpus_per_worker * job.workers)}
        w.duration = expected_duration(job, GPU_POOL).seconds
        plan.append(w)
    Q.Simulation({"llm": queue}, {}).run_timed(plan)
    assert [w.at_once for w in plan] == ["admitted", "admitted", "pending", "pending"]
    plan_start = plan[3].started
    assert plan_start and plan_start > 2400
    # the live cluster 40 minutes after submission
    submitted = "2026-11-25T11:20:00Z"
    routes = {
        f"{recorded.KUEUE}/clusterqueues/llm": cq,
        # the flavor as the platform renders it: the jobs' selector and tolerations match it
        f"{recorded.KUEUE}/resourceflavors/{GPU_POOL.name}": resource_flavor(GPU_POOL),
    }
    wls, pending = [], []
    for i, (job, out) in enumerate(emitted):
        doc = copy.deepcopy(out.workload)
        doc["metadata"].update(uid=f"uid-{job.name}", creationTimestamp=submitted)
        routes[f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/{job.name}"] = doc
        wl = recorded._queued_wl(
            f"pytorchjob-{job.name}", job.name, submitted, job.workers,
            submitted if i < 2 else None, flavor=GPU_POOL.name,
        )  # fmt: skip
        wl["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": f"uid-{job.name}"}
        wl["spec"]["podSets"][0]["template"] = out.workload["spec"]["pytorchReplicaSpecs"][
            "Worker" if "Worker" in out.workload["spec"]["pytorchReplicaSpecs"] else "Master"
        ]["template"]
        wl["spec"]["podSets"][0]["count"] = job.workers
        wls.append(wl)
        if i >= 2:
            pending.append({"metadata": wl["metadata"], "priority": 0, "localQueueName": "training",
                            "positionInClusterQueue": i - 2, "positionInLocalQueue": i - 2})  # fmt: skip
        routes[
            f"{recorded.KUEUE}/namespaces/{NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=uid-{job.name}"
        ] = {"items": [wl]}
    routes[WORKLOADS] = {"items": wls}
    routes[f"{recorded.KUEUE}/namespaces/{NS}/localqueues"] = {
        "items": [{"metadata": {"name": "training"}, "spec": {"clusterQueue": "llm"}}]
    }
    routes[f"{recorded.KUEUE}/namespaces/{NS}/localqueues/training"] = {
        "spec": {"clusterQueue": "llm"}
    }
    routes[VIS] = {"items": pending}
    server = FakeApi(routes)
    try:
        client = Api(server.kubeconfig(tmp_path))
        g = gather(client, NS, "d", metrics=False)
        e = wait.expected_start(client, g, recorded.NOW)
    finally:
        server.httpd.shutdown()
    assert e.unknown == ""
    assert e.seconds == pytest.approx(plan_start - 2400)


# --- what the team may read ----------------------------------------------------------------------

_PATH = re.compile(
    r"^/apis?/(?:(?P<group>[^/]+)/)?v[^/]+/(?:namespaces/(?P<ns>[^/]+)/)?(?P<res>[^/?]+)"
    r"(?:/(?P<name>[^/?]+))?(?:/(?P<sub>[^?]+))?"
)


def _allowed(path: str, rules: list[dict], cluster_rules: list[dict]) -> bool:
    m = _PATH.match(path)
    assert m, path
    group = m["group"] if path.startswith("/apis/") else ""
    res, name, sub = m["res"], m["name"], m["sub"]
    if sub and ("proxy" in sub):
        sub = "proxy"
    resource = f"{res}/{sub}" if sub else res
    verb = "get" if name else "list"
    for r in rules if m["ns"] else cluster_rules:
        if (
            group in r["apiGroups"]
            and resource in r["resources"]
            and verb in r["verbs"]
            and ("resourceNames" not in r or name in r["resourceNames"])
        ):
            return True
    return False


def test_every_read_is_one_the_teams_role_grants(api):
    from trainforge.platform import team_access
    from trainforge.platform.services_config import TeamConfig

    objs = team_access.rbac_objects(TeamConfig(name="llm"), NS)
    rules = next(o for o in objs if o["kind"] == "Role")["rules"]
    cluster = next(o for o in objs if o["kind"] == "ClusterRole")["rules"]
    client = Api(api.config)
    g = gather(client, NS, recorded.PENDING)  # its own reads count too (the ClusterQueue)
    assert wait.expected_start(client, g, recorded.NOW).seconds == 7200
    paths = [p.split("?")[0] for p in api.seen]
    assert (
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/default/pendingworkloads"
        in paths
    )
    denied = [p for p in paths if not _allowed(p, rules, cluster)]
    assert denied == []


def test_a_job_that_preempts_a_running_one_starts_once_its_pods_are_gone(capsys, api):
    """gpt-13b at priority 1000 heads ClusterQueue llm (withinClusterQueue LowerPriority):
    Kueue admits it by preempting bert-sweep (16 GPUs, priority 0), the fewest that make room.
    `why` said the queue had room now and that what holds it is outside the team's view (the
    simulation's start at 0 s read as room); it now says it is admitted at the next cycle and
    that its pods start once bert-sweep's pods are gone, within their terminationGracePeriod
    Seconds as bert-sweep's own pod spec sets it (330 s: 6 min); the plan's words
    (`queues.preempt_words`)."""
    api.routes[CQ]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    for item in api.routes[VIS]["items"]:
        gpt = "gpt-13b" in item["metadata"]["name"]
        item["priority"], item["positionInClusterQueue"] = (1000, 0) if gpt else (0, 1)
    bert = api.routes[f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/bert-sweep"]
    pod = {"spec": {"terminationGracePeriodSeconds": 330, "containers": [{"name": "pytorch"}]}}
    for replica in bert["spec"]["pytorchReplicaSpecs"].values():
        replica["template"] = copy.deepcopy(pod)
    e = expected(api)
    assert (e.seconds, e.unknown, e.preempts) == (0, "", [("bert-sweep", 330.0)])
    code, out, _ = run(
        capsys, cli.why_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    said = " ".join(out.split())
    assert "has room for it now" not in said, out
    assert (
        "expected: admitted at Kueue's next scheduling cycle; it preempts bert-sweep: its pods "
        "start once bert-sweep's pods are gone, within their terminationGracePeriodSeconds "
        "(6 min), within ClusterQueue llm's nominal quota in flavor efa-training"
    ) in said, out
