"""`trainforge status|why|logs|wait` against a fake API server on loopback serving recorded
API responses (tests/live/recorded.py), through the official client and a kubeconfig.

The outputs for a job pending on quota, a restarting job and a running job are the examples
in docs/troubleshooting.md: a test fails when the docs and the command disagree.
"""

from __future__ import annotations

import copy
import json
import pathlib
import threading
import time
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from tests.live import recorded
from trainforge.core.contract import GPU_RESOURCE as GPU
from trainforge.live import cli, gather
from trainforge.plan.kueue import words as W

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "recorded-token"


class FakeApi:
    """Serves ROUTES (JSON objects or text) for GETs that carry the kubeconfig's token;
    anything else is a 404 Status, `forbidden` paths a 403, `failing` paths their status."""

    def __init__(self, routes: dict, forbidden: set[str] = frozenset()) -> None:
        self.routes = dict(routes)
        self.forbidden = set(forbidden)
        self.failing: dict[str, tuple[int, str]] = {}  # path -> (status, reason)
        self.slow: dict[str, float] = {}  # path -> seconds before it answers
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                url = urlsplit(self.path)
                q = parse_qs(url.query)
                key = url.path
                if "labelSelector" in q:
                    key += f"?labelSelector={q['labelSelector'][0]}"
                if q.get("previous") == ["true"]:
                    key += "?previous=true"
                if "query" in q:  # a Prometheus query through the service proxy
                    key += f"?query={q['query'][0]}"
                outer.seen.append(key)
                time.sleep(outer.slow.get(key, 0))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.reply(
                        401, {"kind": "Status", "code": 401, "reason": "Unauthorized"}
                    )
                if key in outer.failing:
                    code, reason = outer.failing[key]
                    return self.reply(code, {"kind": "Status", "code": code, "reason": reason})
                if key in outer.forbidden:
                    return self.reply(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
                if key not in outer.routes:
                    return self.reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                self.reply(200, outer.routes[key])

            def reply(self, code: int, body) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                kind = "text/plain" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (`slow`)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() returns when serve_forever next looks at its flag: every poll_interval
        # (0.5 s by default), so each test's teardown slept ~0.5 s for nothing (~90 s over the
        # ~200 tests that start one)
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def kubeconfig(self, tmp: pathlib.Path, namespace: str | None = None) -> str:
        port = self.httpd.server_address[1]
        ctx = {"cluster": "fake", "user": "me"}
        if namespace:
            ctx["namespace"] = namespace
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "me", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": ctx}],
            "current-context": "fake",
        }
        path = tmp / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        return str(path)


@pytest.fixture
def api(tmp_path):
    server = FakeApi(recorded.ROUTES, recorded.FORBIDDEN)
    server.config = server.kubeconfig(tmp_path)
    yield server
    server.httpd.shutdown()


def run(capsys, main, *argv, **kw) -> tuple[int, str, str]:
    code = main(list(argv), **kw)
    out = capsys.readouterr()
    return code, out.out, out.err


def status(capsys, api, ns, job) -> str:
    code, out, err = run(
        capsys, cli.status_main, job, "-n", ns, "--kubeconfig", api.config, now=lambda: recorded.NOW
    )
    assert code == 0, err
    return out


PENDING_STATUS = """\
job:        llm/gpt-13b (PyTorchJob, created 42m ago)
state:      Queued: not admitted by Kueue for 41m
queue:      LocalQueue training -> ClusterQueue llm; Workload pytorchjob-gpt-13b-7c2d9
position:   2 in the team's queue, 2 in ClusterQueue llm
asks:       1 x master pod, each 90 cores, 1000Gi memory, 8 GPUs
asks:       3 x worker pod, each 90 cores, 1000Gi memory, 8 GPUs
blocked:    nvidia.com/gpu in flavor efa-training: 16 GPUs more needed (queue uses 48 of its nominal 64 GPUs)
expected:   start after 2.0 h (about 2026-11-25 14:00 UTC), within ClusterQueue llm's nominal quota in flavor efa-training
ahead:      bert-sweep holds 16 GPUs, ends in 60 min (runs ~3.0 h: 6000 steps x 1.8s (expectedStepSeconds); admitted 2.0 h ago)
ahead:      llama-pt holds 32 GPUs, ends in 2.0 h (ETA from its metrics)
ahead:      llama-ft waits ahead (position 1), asks 24 GPUs, runs ~90 min (3000 steps x 1.8s (expectedStepSeconds))
basis:      the jobs above end when shown; earlier if cohort trainforge lends idle quota (other teams' use is not visible to you), later if a job ahead runs longer
spend:      $0.00 so far (not admitted yet: no pod has run)
pods:       none yet (the job stays suspended until Kueue admits it)
"""

RESTART_STATUS = """\
job:        vision/vit-l (TrainJob, created 4h ago)
state:      Running, restarted 19m ago
queue:      LocalQueue training -> ClusterQueue vision; Workload trainjob-vit-l-3e8f1
admitted:   yes, to flavor gpu-workloads
progress:   step 41200/100000 (41%), 0.61 s/step, ETA 10.0 h
checkpoint: step 41000, 2 min of training ago (200 steps)
restarts:   2 (hang: 1, peer_lost: 1); goodput 83%
spend:      ~$45.19 so far (estimate: 8.0 pod-hours on g5.12xlarge at $5.672/h in us-east-1 on-demand (price facts 2026-11-30) x each pod's share of its node; not OpenCost: cannot read OpenCost's Prometheus monitoring/kube-prometheus-stack-prometheus (403: your access does not include it))
pods:
  vit-l-node-0-0-k8x2p         Running    node ip-10-40-3-17.ec2.internal  restarts 1  last exit 202 (peer_lost) 19m ago  then: the container restarts in place, counted against backoffLimit
  vit-l-node-0-1-q4m7d         Running    node ip-10-40-3-52.ec2.internal  restarts 1  last exit 201 (hang) 20m ago  then: the container restarts in place, counted against backoffLimit
warnings:
  19m ago  vit-l-node-0-1-q4m7d: BackOff: Back-off restarting failed container node in pod vit-l-node-0-1-q4m7d
"""

RUNNING_STATUS = """\
job:        llm/mnist-ddp (Job, created 30m ago)
state:      Running
queue:      LocalQueue training -> ClusterQueue llm; Workload job-mnist-ddp-0b1c4
admitted:   yes, to flavor gpu-workloads
progress:   step 1800/5000 (36%), 0.9 s/step, ETA 48 min
checkpoint: step 1500, 4 min of training ago (300 steps)
restarts:   0; goodput 97%
spend:      $6.84 so far (OpenCost: its pods' CPU, memory and GPU allocation priced at their nodes' prices, since it was created)
pods:
  mnist-ddp-0-7xk2q            Running    node ip-10-40-1-9.ec2.internal  restarts 0
  mnist-ddp-1-p9d3w            Running    node ip-10-40-1-23.ec2.internal  restarts 0
"""


def test_pending_on_quota_names_the_quota_in_readable_units(capsys, api):
    assert status(capsys, api, "llm", "gpt-13b") == PENDING_STATUS


def test_restarting_job_shows_exits_restarts_and_checkpoint(capsys, api):
    assert status(capsys, api, "vision", "vit-l") == RESTART_STATUS


def test_running_job_shows_progress_and_eta(capsys, api):
    assert status(capsys, api, "llm", "mnist-ddp") == RUNNING_STATUS


def test_a_trainjob_the_kubeflow_sdk_made_shows_its_pods_and_logs(capsys, api):
    """`trainforge status` of the TrainJob a newcomer's TrainerClient program sent said its
    pods were none: it looked for pods labelled trainforge.io/job, which only trainforge's own
    TrainJobs set. Every TrainJob's pods carry their JobSet's name (the TrainJob's)."""
    out = status(capsys, api, recorded.SDK_NS, recorded.SDK)
    assert out.startswith("job:        research/x1d870ab9ffc (TrainJob, created 10m ago)\n")
    pods = out.split("pods:\n", 1)[1].splitlines()
    assert [p.split()[:2] for p in pods] == [
        ["x1d870ab9ffc-node-0-0-h2k9s", "Running"],
        ["x1d870ab9ffc-node-0-1-m3x7c", "Running"],
    ]
    code, out, err = run(
        capsys, cli.logs_main, recorded.SDK, "-n", recorded.SDK_NS, "--kubeconfig", api.config
    )
    assert (code, out) == (0, "training\n"), err


def test_an_sdk_trainjob_s_exit_1_is_not_read_as_trainforge_s_user_error(capsys, api):
    """The SDK's TrainJob runs its own `torchrun` of the function, not trainforge's wrapper:
    torchrun exits 1 when any worker fails, a lost peer as much as a bug. `status` said
    "last exit 1 (user_error)" and `why` "Most likely cause: user_error (the training code
    raised)", a cause the code does not carry; a lost node read as the user's fault."""
    pods = f"/api/v1/namespaces/{recorded.SDK_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={recorded.SDK}"
    api.routes[pods] = copy.deepcopy(api.routes[pods])
    last = {"exitCode": 1, "reason": "Error", "startedAt": "2026-11-25T11:55:00Z",
            "finishedAt": "2026-11-25T11:58:00Z"}  # fmt: skip
    for p in api.routes[pods]["items"]:
        cs = p["status"]["containerStatuses"][0]
        cs.update(restartCount=1, lastState={"terminated": last})
    out = status(capsys, api, recorded.SDK_NS, recorded.SDK)
    assert out.count("restarts 1  last exit 1 (Error) 2m ago") == 2 and "user_error" not in out
    code, out, err = run(
        capsys, cli.why_main, recorded.SDK, "-n", recorded.SDK_NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0, err
    assert "user_error" not in out and "Most likely cause" not in out
    assert (
        "  exit codes of the Kubeflow SDK's torchrun, not of trainforge's runtime or wrapper: a "
        "code names no cause (torchrun exits 1 when any worker fails: a bug, a lost peer); read "
        f"the log of the run before: trainforge logs {recorded.SDK} -n {recorded.SDK_NS} "
        "--previous\n"
    ) in out
    # trainforge's own TrainJob (vit-l): its codes are its wrapper's, read as before
    assert "last exit 201 (hang)" in status(capsys, api, "vision", "vit-l")


def test_whose_exit_codes_a_job_s_pods_carry_is_read_from_its_own_command():
    """The training operator's cpu-demo PyTorchJob (v1.9.4 examples/pytorch/cpu-demo/demo.yaml,
    `command: [torchrun, demo.py]`) imported as an `entrypoint.command` runs as written, without
    trainforge's wrapper: its codes are torchrun's. A module job runs under the wrapper."""
    from tests.jobs.helpers import CODE, CPU_POOL, target
    from trainforge.jobs.backends import emit, pod_templates
    from trainforge.jobs.spec import parse_job
    from trainforge.jobs.wiring import resolve_job
    from trainforge.live import explain
    from trainforge.live.gather import Gathered

    def gathered(entry: dict) -> Gathered:
        t = target(CPU_POOL, backends=("pytorchjob",))
        job = resolve_job(parse_job(entry, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
        doc = emit(job, t, CODE).workload
        return Gathered("research", entry["name"], "pytorchjob", "PyTorchJob", "pytorch", doc)

    base = {"team": "research", "pool": CPU_POOL.name, "workers": 2}
    demo = {**base, "name": "torchrun-cpu", "image": "ghcr.io/acme/pytorch-cpu:py3.8",
            "entrypoint": {"command": ["torchrun", "demo.py"]}}  # fmt: skip
    g = gathered(demo)
    assert not explain.exit_codes_are_ours(g)
    assert explain.exit_text({"exitCode": 1, "reason": "Error"}, False) == "1 (Error)"
    assert explain.not_our_codes(g).startswith(
        "exit codes of the job's own command (torchrun demo.py), not of trainforge's runtime"
    )
    module_job = {**base, "name": "mine", "image": "registry.example/team/train:1.0",
              "entrypoint": {"module": "team.train"}}  # fmt: skip
    assert explain.exit_codes_are_ours(gathered(module_job))
    # on every backend, trainforge's own job (the wrapper runs the module) is read as ours
    from tests.jobs.test_user_code_exits import user_job
    from trainforge.live import gather

    for backend, (kind, _, _, container) in gather.BACKENDS.items():
        _, out = user_job(backend)
        g = Gathered("research", "own", backend, kind, container, out.workload)
        assert explain.exit_codes_are_ours(g), backend
        commands = [
            c["command"][:3]
            for t in pod_templates(out.workload)
            for c in t.spec["containers"]
            if c["name"] == container
        ]  # read, not absent: the answer is not for want of a command
        assert commands and all(
            x == ["python", "-m", "trainforge.training.usercode"] for x in commands
        )


def test_the_docs_show_what_the_command_prints():
    doc = (ROOT / "docs" / "troubleshooting.md").read_text()
    for block in (PENDING_STATUS, RESTART_STATUS, RUNNING_STATUS):
        assert block in doc, f"docs/troubleshooting.md lacks:\n{block}"


def test_why_explains_quota_and_restarts(capsys, api):
    now = {"now": lambda: recorded.NOW}
    code, out, _ = run(
        capsys, cli.why_main, "gpt-13b", "-n", "llm", "--kubeconfig", api.config, **now
    )
    assert code == 0
    assert out.splitlines()[0] == "Kueue has not admitted it: not enough quota."
    assert "16 GPUs more needed" in out
    code, out, _ = run(
        capsys, cli.why_main, "vit-l", "-n", "vision", "--kubeconfig", api.config, **now
    )
    assert "trainforge exit: hang code=201 (rank 1, step 40211)" in out
    assert "trainforge exit: peer_lost code=202" in out


_LOG0 = f"/api/v1/namespaces/{recorded.RESTART_NS}/pods/vit-l-node-0-0-k8x2p/log?previous=true"
_LOG1 = f"/api/v1/namespaces/{recorded.RESTART_NS}/pods/vit-l-node-0-1-q4m7d/log?previous=true"
_PEER_LOST = "    trainforge exit: peer_lost code=202 (rank 0, step 40211)"


@pytest.mark.parametrize(
    ("failing", "shown", "note"),
    [
        (  # refused: the user's access
            {_LOG1: (403, "Forbidden")},
            [_PEER_LOST],
            "cannot read the log of pod vit-l-node-0-1-q4m7d (403: your access does not include "
            "it): its last exit line is not shown",
        ),
        (  # the platform's, alike for both pods: named together
            {_LOG0: (503, "Service Unavailable"), _LOG1: (503, "Service Unavailable")},
            [],
            "cannot read the logs of pods vit-l-node-0-0-k8x2p, vit-l-node-0-1-q4m7d (503 Service "
            "Unavailable: the cluster failed to answer, not your access; try again later): their "
            "last exit lines are not shown",
        ),
        (  # failing differently: each cause, still one note
            {_LOG0: (500, "Internal Server Error"), _LOG1: (401, "Unauthorized")},
            [],
            "cannot read the log of pod vit-l-node-0-0-k8x2p (500 Internal Server Error: the "
            "cluster failed to answer, not your access; try again later); cannot read the log of "
            "pod vit-l-node-0-1-q4m7d (401: the API server did not accept your credentials): "
            "their last exit lines are not shown",
        ),
    ],
)
def test_why_says_which_last_exit_lines_it_could_not_read(capsys, api, failing, shown, note):
    """A log read that fails is one note saying whose exit lines are missing (it was skipped
    silently before); the logs that were read still show their lines."""
    api.failing.update(failing)
    code, out, _ = run(capsys, cli.why_main, "vit-l", "-n", "vision", "--kubeconfig", api.config,
                       now=lambda: recorded.NOW)  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert [x for x in lines if x.startswith("  note:")] == [f"  note: {note}"]
    exit_lines = [x for x in lines if "trainforge exit:" in x]
    assert len(exit_lines) == len(shown)
    assert all(x.startswith(want) for x, want in zip(exit_lines, shown, strict=True))
    assert lines[-2].startswith("Most likely cause: hang")  # from the pods' exit codes, as before
    assert {_LOG0, _LOG1} <= set(api.seen)


def test_the_namespace_comes_from_the_context(capsys, api, tmp_path):
    config = api.kubeconfig(tmp_path, namespace="llm")
    code, out, _ = run(capsys, cli.status_main, "mnist-ddp", "--kubeconfig", config,
                       now=lambda: recorded.NOW)  # fmt: skip
    assert code == 0 and out == RUNNING_STATUS


def test_logs_of_rank_0_and_of_a_previous_run(capsys, api):
    code, out, _ = run(capsys, cli.logs_main, "mnist-ddp", "-n", "llm", "--kubeconfig", api.config)
    assert (code, out) == (0, "[rank0] step 1800 loss 0.081\n")
    code, out, _ = run(
        capsys, cli.logs_main, "vit-l", "-n", "vision", "--index", "1", "--previous",
        "--kubeconfig", api.config,
    )  # fmt: skip
    assert code == 0 and "trainforge exit: hang" in out


def test_wait_returns_when_running_and_times_out_when_queued(capsys, api):
    code, out, _ = run(
        capsys, cli.wait_main, "mnist-ddp", "-n", "llm", "--for", "running",
        "--kubeconfig", api.config,
    )  # fmt: skip
    assert code == 0 and "mnist-ddp: Running" in out
    ticks = iter(range(100))
    code, out, err = run(
        capsys, cli.wait_main, "gpt-13b", "-n", "llm", "--for", "admitted", "--timeout", "3",
        "--interval", "1", "--kubeconfig", api.config,
        sleep=lambda s: None, clock=lambda: float(next(ticks)),
    )  # fmt: skip
    assert code == 124 and "still Suspended after 3s" in err


def _reads_per_poll(capsys, api, *argv) -> list[list[str]]:
    """The GETs of each poll of `trainforge wait` (it times out after the third poll)."""
    polls: list[list[str]] = []
    ticks = iter(range(100))

    def sleep(_: float) -> None:
        polls.append(api.seen[sum(map(len, polls)) :])

    code, _, err = run(
        capsys, cli.wait_main, *argv, "--timeout", "3", "--interval", "1",
        "--kubeconfig", api.config, sleep=sleep, clock=lambda: float(next(ticks)),
    )  # fmt: skip
    assert code == 124, err
    polls.append(api.seen[sum(map(len, polls)) :])
    return polls


def test_each_wait_poll_reads_only_what_wait_decides_and_prints_from(capsys, api):
    """`wait` read everything `status` shows on each poll (queues, position, LimitRanges,
    pods, events: 8 GETs for a pending PyTorchJob): now the job, at its backend once found,
    and with --for admitted its Workload; a TrainJob's pods, whose phase is its Running."""
    pytorchjob = f"/apis/kubeflow.org/v1/namespaces/llm/pytorchjobs/{recorded.PENDING}"
    workload = f"{recorded.KUEUE}/namespaces/llm/workloads?labelSelector=kueue.x-k8s.io/job-uid=5f0c1e2a-pending"
    polls = _reads_per_poll(capsys, api, recorded.PENDING, "-n", "llm", "--for", "admitted")
    assert polls == [[pytorchjob, workload]] * 3
    # an indexed Job: the first poll finds its backend, later ones read only it
    job = f"/apis/batch/v1/namespaces/llm/jobs/{recorded.RUN}"
    api.seen.clear()
    polls = _reads_per_poll(capsys, api, recorded.RUN, "-n", "llm", "--for", "finished")
    assert polls[0][-1] == job and len(polls[0]) == 3  # PyTorchJob, TrainJob: 404
    assert polls[1:] == [[job], [job]]
    # a TrainJob that is not Running yet: its pods decide, so they are read; started with no
    # pod running (Created), its events too: a Pod Security refusal of its pods would end it
    trainjob = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/vision/trainjobs/{recorded.RESTART}"
    pods = f"/api/v1/namespaces/vision/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={recorded.RESTART}"
    events = "/api/v1/namespaces/vision/events"
    assert api.routes[trainjob]["status"]["conditions"] == []
    api.routes[pods] = {"kind": "PodList", "items": []}
    api.seen.clear()
    polls = _reads_per_poll(capsys, api, recorded.RESTART, "-n", "vision", "--for", "running")
    assert polls[1:] == [[trainjob, pods, events], [trainjob, pods, events]]


def test_wait_fails_when_the_job_fails(capsys, api):
    failed = json.loads(json.dumps(recorded.RUN_ROUTES))
    path = f"/apis/batch/v1/namespaces/{recorded.RUN_NS}/jobs/{recorded.RUN}"
    failed[path]["status"]["conditions"] = [
        recorded.cond("Failed", "True", "2026-11-25T11:50:00Z", "BackoffLimitExceeded",
                      "Job has reached the specified backoff limit"),
    ]  # fmt: skip
    api.routes.update(failed)
    code, out, _ = run(capsys, cli.wait_main, "mnist-ddp", "-n", "llm", "--kubeconfig", api.config)
    assert code == 1 and "backoff limit" in out


def test_errors_are_one_line(capsys, api, tmp_path):
    code, _, err = run(capsys, cli.status_main, "nope", "-n", "llm", "--kubeconfig", api.config)
    assert code == 2
    assert err == (
        "trainforge status: no job 'nope' in namespace 'llm' (looked for a PyTorchJob, "
        "TrainJob, Job)\n"
    )
    code, _, err = run(capsys, cli.status_main, "mnist-ddp", "--kubeconfig", api.config)
    assert code == 2 and err.startswith("trainforge status: no namespace")
    api.forbidden.add(f"/apis/batch/v1/namespaces/{recorded.RUN_NS}/jobs/{recorded.RUN}")
    code, _, err = run(
        capsys, cli.status_main, "mnist-ddp", "-n", "llm", "--kubeconfig", api.config
    )
    assert code == 1 and "403 Forbidden" in err and len(err.splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    code, _, err = run(capsys, cli.status_main, "x", "-n", "llm", "--kubeconfig", str(bad))
    assert code == 2 and "cannot load kubeconfig" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("main", [cli.status_main, cli.why_main, cli.logs_main, cli.wait_main])
def test_a_missing_kubeconfig_is_named_with_its_flag_exit_2(capsys, tmp_path, main, monkeypatch):
    """The client said "Invalid kube-config file. No configuration found." (exit 1, as if the
    cluster refused): the user's typo is named with its flag and path, exit 2, for every live
    command; a $KUBECONFIG of no existing file likewise."""
    name = main.__name__.removesuffix("_main")
    missing = tmp_path / "absent.yaml"
    code, _, err = run(capsys, main, "x", "-n", "llm", "--kubeconfig", str(missing))
    assert (code, err) == (2, f"trainforge {name}: --kubeconfig {missing}: no such file\n")
    code, _, err = run(capsys, main, "x", "-n", "llm", "--kubeconfig", str(tmp_path))
    assert (code, err) == (2, f"trainforge {name}: --kubeconfig {tmp_path}: not a file\n")
    monkeypatch.setenv("KUBECONFIG", str(missing))
    code, _, err = run(capsys, main, "x", "-n", "llm")
    assert (code, err) == (
        2,
        f"trainforge {name}: $KUBECONFIG {missing}: no such file (pass --kubeconfig FILE)\n",
    )


def test_a_forbidden_cluster_queue_is_a_note_not_a_failure(capsys, api):
    api.forbidden.add(f"{recorded.KUEUE}/clusterqueues/llm")
    out = status(capsys, api, "llm", "gpt-13b")
    assert "blocked:    nvidia.com/gpu in flavor efa-training: 16 GPUs more needed\n" in out
    assert "note:       cannot read ClusterQueue llm (403" in out


def test_the_command_line_dispatches_to_the_live_commands():
    from trainforge import cli as top

    for name in ("status", "why", "logs", "wait"):
        target, _, func = top.COMMANDS[name][0].partition(":")
        assert target == "trainforge.live.cli" and hasattr(cli, func)


def test_why_points_at_capacity_when_admitted_pods_wait_for_nodes(capsys, api):
    routes = json.loads(json.dumps(recorded.RUN_ROUTES))
    pods = routes[
        f"/api/v1/namespaces/{recorded.RUN_NS}/pods?labelSelector=trainforge.io/job={recorded.RUN}"
    ]
    waiting = pods["items"][1]
    waiting["spec"].pop("nodeName")
    waiting["status"] = {
        "phase": "Pending",
        "conditions": [
            recorded.cond("PodScheduled", "False", "2026-11-25T11:31:00Z", "Unschedulable",
                          "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."),
        ],
    }  # fmt: skip
    routes[f"/api/v1/namespaces/{recorded.RUN_NS}/events"]["items"].append(
        {"involvedObject": {"kind": "Pod", "name": waiting["metadata"]["name"]},
         "type": "Warning", "reason": "FailedScheduling", "lastTimestamp": "2026-11-25T11:59:00Z",
         "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."}
    )  # fmt: skip
    api.routes.update(routes)
    code, out, _ = run(capsys, cli.why_main, "mnist-ddp", "-n", "llm", "--kubeconfig", api.config,
                       now=lambda: recorded.NOW)  # fmt: skip
    assert code == 0
    assert out.splitlines()[0] == "Admitted, but pods wait for nodes:"
    assert "unscheduled: 0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in out
    assert "docs/troubleshooting.md#pods-stuck-pending-capacity-or-quota" in out


def _gathered(message: str, borrowed: str = "0", admitted: bool = False):
    import copy

    from trainforge.live.gather import Gathered

    wl = copy.deepcopy(recorded._pending_wl)
    wl["status"]["conditions"][0]["message"] = message
    if admitted:
        wl["status"]["conditions"][0]["status"] = "True"
        wl["status"]["admission"] = {
            "clusterQueue": "llm",
            "podSetAssignments": [
                {"name": "worker", "flavors": {"nvidia.com/gpu": "efa-training"}}
            ],
        }
    cq = recorded.cluster_queue("llm", "efa-training", "64", "48")
    cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    for r in cq["status"]["flavorsUsage"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["borrowed"] = borrowed
    return Gathered("llm", "gpt-13b", "pytorchjob", "PyTorchJob", "pytorch", {}, wl, None, cq)


# Kueue's words for a worker pod set 94.8 cores short in efa-training: "94800m" (cpu in
# milli, as its resource_formatter writes it; the plan's words.py writes Kueue's text)
SHORT_OF_CPU = W.message({"worker": [W.short("cpu", "efa-training", Fraction("94.8"))]})


def test_a_gpu_job_short_of_cpu_is_answered_in_its_gpus_and_plain_units():
    from trainforge.live import explain

    assert SHORT_OF_CPU.endswith(", 94800m more needed")
    g = _gathered(SHORT_OF_CPU)
    assert explain.blocked_by(g) == [
        "cpu in flavor efa-training: 94.8 cores more needed (queue uses 1100 of its nominal "
        "1500 cores); it is the cpu that comes with the job's 32 GPUs (queue uses 48 of its "
        "nominal 64 GPUs)"
    ]


def test_a_gpu_job_giving_only_limits_is_still_answered_in_its_gpus():
    """Kueue counts a limit for a missing request (pkg/workload/resources.go
    `UseLimitsAsMissingRequestsInPod`, release-0.19 c90ed70): a job whose containers give
    only limits asks its 32 GPUs all the same (`why` read none before: no GPU line)."""
    from trainforge.live import explain

    g = _gathered(SHORT_OF_CPU)
    for ps in g.workload["spec"]["podSets"]:
        for c in ps["template"]["spec"]["containers"]:
            c["resources"] = {"limits": {**c["resources"].pop("requests")}}
    assert "comes with the job's 32 GPUs" in explain.blocked_by(g)[0]
    assert explain.requests(g) == [
        "1 x master pod, each 90 cores, 1000Gi memory, 8 GPUs",
        "3 x worker pod, each 90 cores, 1000Gi memory, 8 GPUs",
    ]


def test_a_borrowing_job_says_who_may_take_its_gpus_back_and_when():
    from trainforge.live import explain

    assert explain.borrowing(_gathered("", admitted=True)) is None
    text = explain.borrowing(_gathered("", borrowed="8", admitted=True))
    assert text.startswith("queue llm borrows 8 GPUs in flavor efa-training from cohort "
                           "trainforge: any other team of the cohort may take it back at any "
                           "time")  # fmt: skip


def test_every_wait_flag_has_help(capsys):
    with pytest.raises(SystemExit):
        cli.wait_main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--for {admitted,running,finished} admitted: Kueue admitted its workload" in out, out
    assert "finished: it succeeded (default)" in out


# --- the namespace's LimitRange defaults, as Kueue counts them ------------------------------------

LIMIT_RANGES = f"/api/v1/namespaces/{recorded.PENDING_NS}/limitranges"


def _no_requests(api) -> None:
    """gpt-13b's Workload with containers that name neither requests nor limits."""
    key = next(k for k in api.routes if k.startswith(f"{recorded.KUEUE}/namespaces/llm/workloads?"))
    answer = json.loads(json.dumps(api.routes[key]))
    for ps in answer["items"][0]["spec"]["podSets"]:
        for c in ps["template"]["spec"]["containers"]:
            c.pop("resources")
    api.routes[key] = answer


def _team_limit_range(api) -> None:
    """The platform's LimitRange of team llm (platform/teams.py), as the API lists it."""
    from trainforge.platform.services_config import TeamConfig
    from trainforge.platform.teams import LIMIT_RANGE_NAME, limit_range_spec

    lr = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE_NAME, "namespace": "llm"},
        "spec": limit_range_spec(TeamConfig(name="llm")),
    }
    api.routes[LIMIT_RANGES] = {"kind": "LimitRangeList", "apiVersion": "v1", "items": [lr]}


def test_a_container_without_requests_counts_the_namespaces_limit_range(capsys, api):
    """The platform's LimitRange (platform/teams.py) gives it 500m CPU and 1Gi: Kueue counts
    that, and so do status and why (they counted nothing before)."""
    _no_requests(api)
    _team_limit_range(api)
    out = status(capsys, api, "llm", "gpt-13b")
    assert "asks:       1 x master pod, each 0.5 cores, 1Gi memory\n" in out
    assert "asks:       3 x worker pod, each 0.5 cores, 1Gi memory\n" in out
    assert "LimitRange" not in out


def test_a_request_over_the_limit_range_default_limit_is_refused_not_waiting(capsys, api):
    """The worker's container requests 3 CPUs and names no limit: the team LimitRange's
    `default` (2 CPUs) becomes its limit, and Kueue's ValidateResources refuses the Workload
    for good (trainforge.plan.kueue.workload_invalid). status says so in Kueue's words in
    place of a quota wait and an expected start; why does not call it "not enough quota"."""
    key = next(k for k in api.routes if k.startswith(f"{recorded.KUEUE}/namespaces/llm/workloads?"))
    answer = json.loads(json.dumps(api.routes[key]))
    sets = answer["items"][0]["spec"]["podSets"]
    worker = next(i for i, ps in enumerate(sets) if ps["name"] == "worker")
    for ps in sets:  # the platform's pods: limits equal to requests (jobs.pod.resources)
        for c in ps["template"]["spec"]["containers"]:
            c["resources"]["limits"] = dict(c["resources"].get("requests") or {})
    sets[worker]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    api.routes[key] = answer
    _team_limit_range(api)
    kueue_says = (
        "Kueue never admits it (QuotaReserved False, reason Pending): resources "
        f"validation failed: spec.podSets[{worker}].template.spec.containers[0]: Invalid "
        'value: ["cpu"]: requests must not exceed its limits'
    )
    out = status(capsys, api, "llm", "gpt-13b")
    assert f"refused:    {kueue_says}\n" in out
    assert "blocked:" not in out and "expected:" not in out
    code, out, err = run(
        capsys, cli.why_main, "gpt-13b", "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith(kueue_says + "\n")
    assert "not enough quota" not in out and "expected" not in out
    assert "See docs/troubleshooting.md#requests-over-limits-never-admitted\n" in out


def test_a_refused_limit_range_read_is_one_note(capsys, api):
    _no_requests(api)
    api.forbidden.add(LIMIT_RANGES)
    note = (
        "cannot read the LimitRanges of namespace llm (403: your access does not include it): "
        "a container without requests counts 0 here, Kueue counts the LimitRange's defaults, "
        "so the requests shown may be under-counted"
    )
    out = status(capsys, api, "llm", "gpt-13b")
    assert f"note:       {note}\n" in out
    code, out, err = run(
        capsys, cli.why_main, "gpt-13b", "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert f"  note: {note}\n" in out


# --- an optional read that fails: whose failure, and what is then missing -----------------------

CLUSTER_QUEUE = f"{recorded.KUEUE}/clusterqueues/llm"
POSITION = (
    "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/llm/localqueues/training/pendingworkloads"
)
REFUSED = {
    401: "401: the API server did not accept your credentials",
    403: "403: your access does not include it",
}
PLATFORM = "the cluster failed to answer, not your access; try again later"


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
    ("path", "what", "means"),
    [
        (LIMIT_RANGES, "the LimitRanges of namespace llm", "a container without requests counts 0"),
        (
            CLUSTER_QUEUE,
            "ClusterQueue llm",
            "its quota, usage and the expected start are not shown",
        ),
        (POSITION, "the queue position", "the job's place in the queue is not shown"),
    ],
)
def test_a_failed_optional_read_is_one_note_naming_whose_failure_it_is(
    capsys, api, code, reason, cause, path, what, means
):
    """One rule for every optional read (gather.unread): refused (401, 403) says so; any other
    error is the cluster's, never worded as the user's access (a 500 of the ClusterQueue was a
    failed `status`, a 503 of the visibility API no note at all); status still prints."""
    api.failing[path] = (code, reason)
    out = status(capsys, api, "llm", "gpt-13b")
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, out
    assert notes[0].startswith(f"note:       cannot read {what} ({cause}): {means}"), notes
    if code >= 500:
        assert "your access does not include" not in notes[0]


@pytest.mark.parametrize(
    ("code", "reason", "cause"),
    [
        (401, "Unauthorized", REFUSED[401]),
        (403, "Forbidden", REFUSED[403]),
        (500, "Internal Server Error", f"500 Internal Server Error: {PLATFORM}"),
    ],
)
def test_a_failed_metrics_read_is_the_same_rule(capsys, api, code, reason, cause):
    """Rank 0's metrics: the one rule too (it printed `(403 GET PATH: 403 Forbidden)`, naming
    neither whose failure nor what is missing)."""
    pod = "mnist-ddp-0-7xk2q"
    path = f"/api/v1/namespaces/{recorded.RUN_NS}/pods/{pod}:9400/proxy/metrics"
    assert path in api.routes
    api.failing[path] = (code, reason)
    out = status(capsys, api, recorded.RUN_NS, recorded.RUN)
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note:       cannot read the metrics of rank 0's pod {pod} ({cause}): its progress, "
        "ETA, last checkpoint and restarts are not shown"
    ], out
    assert "progress:" not in out


METRICS_BLOCKED = (
    "the API server's proxy could not reach port 9400: the team namespace's NetworkPolicy "
    "allow-metrics-scrape admits it from the monitoring namespace only, not from the control "
    "plane the proxy connects from; Grafana's training board shows them"
)


@pytest.mark.parametrize("answer", ["503 Service Unavailable", "502 Bad Gateway", "timeout"])
def test_a_metrics_read_the_proxy_cannot_make_names_the_network_policy(
    capsys, api, monkeypatch, answer
):
    """The shipped team namespace admits the metrics port from the monitoring namespace only
    (platform.teams allow-metrics-scrape); the API server's pod proxy dials from the control
    plane, so it answers 503 after its 30 s dial, or nothing before the read's timeout. Status
    said "the cluster failed to answer, not your access; try again later": untrue, and no retry
    helps. Now the note names the policy, and where the metrics are shown instead."""
    pod = "mnist-ddp-0-7xk2q"
    path = f"/api/v1/namespaces/{recorded.RUN_NS}/pods/{pod}:9400/proxy/metrics"
    assert path in api.routes
    if answer == "timeout":
        monkeypatch.setattr(gather, "METRICS_TIMEOUT_S", 0.2)
        api.slow[path] = 1.0
        cause = f"no answer in 0.2 s: {METRICS_BLOCKED}"
    else:
        code, reason = answer.split(" ", 1)
        api.failing[path] = (int(code), reason)
        cause = f"{answer}: {METRICS_BLOCKED}"
    out = status(capsys, api, recorded.RUN_NS, recorded.RUN)
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note:       cannot read the metrics of rank 0's pod {pod} ({cause}): its progress, "
        "ETA, last checkpoint and restarts are not shown"
    ], out
    assert "try again later" not in out
    assert "progress:" not in out


def test_an_api_server_that_cannot_be_reached_is_not_the_network_policy():
    """A connect timeout is the API server's (it took no request): still the cluster's failure;
    a read timeout on the proxied read is the pod the proxy cannot reach."""
    from trainforge.live.kube import KubeError

    path = "/api/v1/namespaces/llm/pods/p:9400/proxy/metrics"
    connect = "cannot reach the API server (ConnectTimeoutError: Connection to 10.0.0.1 timed out."
    read = "cannot reach the API server (ReadTimeoutError: Read timed out. (read timeout=5))"
    assert not gather.proxy_blocked(KubeError(path, None, connect + " (connect timeout=5))"))
    assert gather.proxy_blocked(KubeError(path, None, read))
    assert not gather.proxy_blocked(KubeError(path, 500, "Internal Server Error"))
    assert not gather.proxy_blocked(KubeError(path, 403, "Forbidden"))


PENDING_JOB = f"/apis/kubeflow.org/v1/namespaces/llm/pytorchjobs/{recorded.PENDING}"
PENDING_WORKLOAD = f"{recorded.KUEUE}/namespaces/llm/workloads?labelSelector=kueue.x-k8s.io/job-uid=5f0c1e2a-pending"
WAIT_MEANS = (
    "wait sees the admission only when Kueue starts the job (no longer suspended), which a "
    "job that MultiKueue runs on another cluster never does here"
)


@pytest.mark.parametrize(
    ("code", "reason", "cause"),
    [
        (401, "Unauthorized", REFUSED[401]),
        (403, "Forbidden", REFUSED[403]),
        (503, "Service Unavailable", f"503 Service Unavailable: {PLATFORM}"),
    ],
)
def test_wait_for_admitted_says_once_when_the_workload_cannot_be_read(
    capsys, api, code, reason, cause
):
    """`--for admitted` printed nothing while its Workload read failed, until its timeout.
    Now the note, once over every poll, naming whose failure it is and what wait still sees
    (the job's suspension); it keeps waiting (the job's state shows the admission), so the
    timeout is still 124."""
    api.failing[PENDING_WORKLOAD] = (code, reason)
    ticks = iter(range(100))
    code_, out, err = run(
        capsys, cli.wait_main, recorded.PENDING, "-n", "llm", "--for", "admitted",
        "--timeout", "3", "--interval", "1", "--kubeconfig", api.config,
        sleep=lambda s: None, clock=lambda: float(next(ticks)),
    )  # fmt: skip
    assert api.seen.count(PENDING_WORKLOAD) == 3  # three polls, one note
    assert out == (
        f"note: cannot read Kueue Workloads ({cause}): {WAIT_MEANS}\n"
        f"{recorded.PENDING}: Suspended\n"
    )
    assert code_ == 124 and "still Suspended after 3s" in err


def test_wait_for_admitted_sees_kueue_start_the_job_without_its_workload(capsys, api):
    """A refused Workload read does not end the wait: Kueue unsuspends the job it admits
    (gather.WAIT_UNREAD), and wait returns 0 then."""
    api.forbidden.add(PENDING_WORKLOAD)
    started = json.loads(json.dumps(api.routes[PENDING_JOB]))
    started["spec"]["runPolicy"]["suspend"] = False
    started["status"]["conditions"][1]["status"] = "False"

    def sleep(_: float) -> None:  # Kueue admits it between the first and second poll
        api.routes[PENDING_JOB] = started

    code, out, _ = run(
        capsys, cli.wait_main, recorded.PENDING, "-n", "llm", "--for", "admitted",
        "--interval", "1", "--kubeconfig", api.config, sleep=sleep,
    )  # fmt: skip
    assert code == 0
    assert out == (
        f"note: cannot read Kueue Workloads ({REFUSED[403]}): {WAIT_MEANS}\n"
        f"{recorded.PENDING}: Suspended\n{recorded.PENDING}: Created\n"
    )


def test_a_read_that_is_not_found_is_absent_not_a_note(capsys, api):
    """404: no LimitRange, no visibility API of that version (an older Kueue): no note."""
    assert LIMIT_RANGES not in api.routes
    api.routes = {k: v for k, v in api.routes.items() if k != POSITION}
    out = status(capsys, api, "llm", "gpt-13b")
    assert "note:" not in out and "position:" not in out
    assert LIMIT_RANGES in api.seen and POSITION in api.seen
    assert POSITION.replace("v1beta2", "v1beta1") in api.seen  # the next version was tried


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b"a: [\n", "not YAML (line 2: expected the node content, but found '<stream end>')"),
        (b"[]\n", "not a kubeconfig (expected a mapping with clusters, contexts, users)"),
        (b"\xff\xfe not utf-8\n", "not UTF-8 text"),
        (b"# README\nsome: prose\nnot yaml\n", "not YAML (line 4: could not find expected ':')"),
    ],
)
def test_a_kubeconfig_that_is_not_one_is_one_line(capsys, tmp_path, text, why):
    """Not YAML, not a mapping, not UTF-8: tracebacks from the client's loader before."""
    bad = tmp_path / "config"
    bad.write_bytes(text)
    code, _, err = run(capsys, cli.status_main, "x", "-n", "llm", "--kubeconfig", str(bad))
    assert code == 2 and len(err.splitlines()) == 1  # the user's config: 1 is the cluster's
    assert err == f"trainforge status: cannot load kubeconfig {bad}: {why}\n"


@pytest.mark.parametrize("main", [cli.status_main, cli.why_main, cli.logs_main, cli.wait_main])
def test_an_unknown_context_names_the_flag_and_the_contexts_exit_2(capsys, api, main):
    """--context of a name the kubeconfig lacks was the client's "Invalid kube-config file.
    Expected object with name ... in ... contexts list", exit 1 as if the cluster refused a
    read; it is the user's typo: named with its flag and the contexts there, exit 2, before
    any read."""
    name = main.__name__.removesuffix("_main")
    known = [c["name"] for c in yaml.safe_load(pathlib.Path(api.config).read_text())["contexts"]]
    code, _, err = run(capsys, main, "x", "-n", "llm", "--kubeconfig", api.config,
                       "--context", "typo")  # fmt: skip
    assert (code, err) == (
        2,
        f"trainforge {name}: --context typo: no such context in {api.config} "
        f"(contexts: {', '.join(known)})\n",
    )
    assert api.seen == []  # refused before any read


@pytest.mark.parametrize(
    ("main", "flag", "value", "error"),
    [
        (cli.logs_main, "--tail", "-1", "--tail must be >= 0, got -1"),
        (cli.logs_main, "--index", "-2", "--index must be >= 0, got -2"),
        (cli.wait_main, "--interval", "0", "--interval must be > 0 seconds, got 0"),
        (cli.wait_main, "--interval", "nan", "--interval must be > 0 seconds, got nan"),
        (cli.wait_main, "--timeout", "-5", "--timeout must be >= 0 seconds (0 = no limit), got -5"),
    ],
)
def test_a_count_or_duration_that_cannot_work_is_refused_before_the_cluster(
    capsys, main, flag, value, error
):
    """--interval 0 polled the API server in a busy loop; --timeout -5 gave up after one
    poll with 'still X after -5s'; --tail -1 went to the API server as tailLines=-1."""
    with pytest.raises(SystemExit) as e:
        main(["x", "-n", "llm", "--kubeconfig", "/nonexistent", flag, value])
    assert e.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"error: {error}")


def test_without_the_kubernetes_client_the_live_commands_name_the_extra(capsys, api, monkeypatch):
    """troubleshooting.md: "Install with pip install 'trainforge[status]'"; without it the
    command was a ModuleNotFoundError traceback."""
    import sys

    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes -> ImportError
    code, _, err = run(capsys, cli.status_main, "x", "-n", "llm", "--kubeconfig", api.config)
    assert (code, err) == (
        2,  # this side's setup, not a cluster's refusal (exit 1)
        "trainforge status: the live commands need the Kubernetes client: pip install "
        "'trainforge[status]'\n",
    )


def test_troubleshooting_quotes_the_local_config_errors_as_printed(capsys, api, tmp_path):
    """docs/troubleshooting.md quotes the one-line errors of a kubeconfig that does not load
    and of an unknown --context, exit 2: each quote (FILE for the path, ... for the rest) is
    what the command prints."""
    text = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    quotes = text.split("`")[1::2]
    bad = tmp_path / "config"
    bad.write_bytes(b"a: [\n")
    cases = [
        ("cannot load kubeconfig FILE", str(bad), []),
        ("--context typo: no such context in FILE", api.config, ["--context", "typo"]),
    ]
    for start, path, extra in cases:
        (quote,) = [q for q in quotes if q.startswith(start)]
        code, _, err = run(capsys, cli.status_main, "x", "-n", "llm", "--kubeconfig", path,
                           *extra)  # fmt: skip
        assert code == 2
        pos = 0
        for piece in (p.strip() for p in quote.replace("FILE", path).split("...")):
            found = err.find(piece, pos)
            assert found >= 0, f"troubleshooting.md quotes {piece!r}; status prints {err!r}"
            pos = found + len(piece)


# --- a Workload Kueue does not admit as things stand: wait stops, status and why say it ---------


def _kueue_says(api, reason: str, message: str) -> None:
    """gpt-13b's Workload with Kueue's QuotaReserved False condition `reason`, `message`."""
    answer = json.loads(json.dumps(api.routes[PENDING_WORKLOAD]))
    (c,) = answer["items"][0]["status"]["conditions"]
    c["reason"], c["message"] = reason, message
    api.routes[PENDING_WORKLOAD] = answer


def _wait(capsys, api, *argv) -> tuple[int, str, str, int]:
    """`wait gpt-13b` with no timeout, (exit code, out, err, polls): a wait that does not end
    by itself is stopped by its fifth poll."""
    polls = []

    def sleep(_: float) -> None:
        polls.append(1)
        if len(polls) > 4:
            raise SystemExit("still waiting")

    try:
        code, out, err = run(
            capsys, cli.wait_main, recorded.PENDING, "-n", "llm", *argv, "--interval", "1",
            "--kubeconfig", api.config, sleep=sleep,
        )  # fmt: skip
    except SystemExit:
        return -1, *capsys.readouterr(), len(polls)
    return code, out, err, len(polls) + 1


# Kueue release-0.19 c90ed700c1's own words (trainforge/plan/kueue/pending.py names where each
# is written), with the reason its default feature gates write
NEVER = [
    ("Inadmissible", "LocalQueue training doesn't exist"),
    ("Inadmissible", "ClusterQueue llm doesn't exist"),
    ("Pending", "ClusterQueue llm not found"),
    ("Pending", "workload namespace doesn't match ClusterQueue selector"),
    (
        "Pending",
        "resources validation failed: spec.podSets[1].template.spec.containers[0]: Invalid "
        'value: ["cpu"]: requests must not exceed its limits',
    ),
    (
        "Pending",
        "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec: "
        'Invalid value: ["memory"]: requests must not be below the limitRange min',
    ),
    (
        "Pending",  # the master took 8 GPUs of efa-training; the workers' own 24 exceed its 16
        W.message(
            {
                "worker": [
                    W.over_capacity(GPU, "efa-training", 8, 24, 16),
                    W.no_affinity("gpu-workloads"),
                ]
            }
        ),
    ),
    ("Misconfigured", "ClusterQueue llm not found"),  # UnadmittedWorkloadsObservability on
]


@pytest.mark.parametrize(("reason", "message"), NEVER)
@pytest.mark.parametrize("until", ["admitted", "finished"])
def test_wait_stops_at_once_on_a_workload_kueue_never_admits(capsys, api, reason, message, until):
    """`wait --for admitted` (and --for finished, the job staying suspended) waited forever on
    a Workload Kueue never admits as things stand; now its first poll ends it, exit 1, one
    line in status's words (its `refused:` line)."""
    _kueue_says(api, reason, message)
    code, out, err, polls = _wait(capsys, api, "--for", until)
    said = f"Kueue never admits it (QuotaReserved False, reason {reason}): {message}"
    assert (code, polls) == (1, 1)
    assert err == f"trainforge wait: {recorded.PENDING}: {said}\n"
    assert out == f"{recorded.PENDING}: Suspended\n"
    assert f"refused:    {said}\n" in status(capsys, api, "llm", recorded.PENDING)


def test_wait_stops_on_a_request_over_its_limit_before_kueue_says_it(capsys, api):
    """A container requesting more than it limits, written so: the model's refusal (what the
    scheduler writes at its first try) ends the wait even while Kueue's condition is not set."""
    answer = json.loads(json.dumps(api.routes[PENDING_WORKLOAD]))
    wl = answer["items"][0]
    wl["status"]["conditions"] = []
    c = wl["spec"]["podSets"][1]["template"]["spec"]["containers"][0]
    c["resources"]["limits"] = {**c["resources"]["requests"], "cpu": "80"}
    api.routes[PENDING_WORKLOAD] = answer
    code, _, err, polls = _wait(capsys, api, "--for", "admitted")
    assert (code, polls) == (1, 1)
    assert err == (
        f"trainforge wait: {recorded.PENDING}: Kueue never admits it (QuotaReserved False, "
        "reason Pending): resources validation failed: spec.podSets[1].template.spec."
        'containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits\n'
    )


WAITS = [
    W.message({"worker": [W.short(GPU, "efa-training", 16)]}),
    # one flavor never fits, another may once quota frees: Kueue may still admit it
    W.message({"worker": [W.over_capacity(GPU, "a", 0, 24, 16), W.short(GPU, "b", 8)]}),
    # the master filled the flavor, the workers' own 24 within its 30: not never
    W.message({"worker": [W.over_capacity(GPU, "efa-training", 8, 24, 30)]}),
    "The workload has failed admission checks",  # release-0.19 pkg/scheduler/scheduler.go:675
]


@pytest.mark.parametrize("message", WAITS)
def test_wait_keeps_waiting_while_kueue_may_admit_it(capsys, api, message):
    _kueue_says(api, "Pending", message)
    code, out, err, polls = _wait(capsys, api, "--for", "admitted")
    assert (code, polls, err) == (-1, 5, "")
    assert "refused:" not in status(capsys, api, "llm", recorded.PENDING)


@pytest.mark.parametrize("queue", ["LocalQueue training", "ClusterQueue llm"])
def test_a_workload_an_inactive_queue_holds_is_said_once_and_waited_for(capsys, api, queue):
    """An inactive (stopped) queue holds the Workload; Kueue requeues it once the queue is
    active again: wait says so once and keeps waiting; status says it in place of a quota
    wait and an expected start."""
    _kueue_says(api, "Inadmissible", f"{queue} is inactive")
    code, out, err, polls = _wait(capsys, api, "--for", "admitted")
    held = f"Kueue holds it: {queue} is inactive; it is requeued once that queue is active again"
    assert (code, polls, err) == (-1, 5, "")
    assert out == f"{recorded.PENDING}: Suspended\nnote: {held}\n"
    text = status(capsys, api, "llm", recorded.PENDING)
    assert f"held:       {held}\n" in text
    assert "blocked:" not in text and "expected:" not in text


def test_every_troubleshooting_anchor_why_prints_is_a_heading():
    """`why` ends with `See docs/troubleshooting.md#ANCHOR`: each anchor is a heading there (as
    GitHub makes an anchor of a heading: lower case, punctuation dropped, spaces to dashes)."""
    import re

    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    slugs = {
        re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, re.M)
    }
    source = (ROOT / "trainforge" / "live" / "explain.py").read_text(encoding="utf-8")
    anchors = set(re.findall(r"docs/troubleshooting\.md#([\w-]+)", source))
    assert "never-admitted-its-queue-or-no-flavor" in anchors
    assert anchors <= slugs, anchors - slugs


def test_why_says_kueue_never_admits_it_or_holds_it_not_quota(capsys, api):
    """why called any unadmitted Workload with a message "not enough quota" or "waiting for
    its turn": a missing LocalQueue is neither, and an inactive queue holds it."""

    def why() -> str:
        code, out, err = run(
            capsys, cli.why_main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
        assert (code, err) == (0, "")
        return out

    _kueue_says(api, "Inadmissible", "LocalQueue training doesn't exist")
    out = why()
    assert out.startswith(
        "Kueue never admits it (QuotaReserved False, reason Inadmissible): LocalQueue "
        "training doesn't exist\n  it never waits its turn"
    )
    assert "not enough quota" not in out and "expected" not in out
    assert out.endswith("See docs/troubleshooting.md#never-admitted-its-queue-or-no-flavor\n")
    _kueue_says(api, "Inadmissible", "ClusterQueue llm is inactive")
    out = why()
    assert out.startswith(
        "Kueue holds it: ClusterQueue llm is inactive; it is requeued once that queue is "
        "active again.\n"
    )
    assert "expected" not in out


# what `status` and `why` read of a pending job (gather's reads): the expected start's reads
# (ResourceFlavors, the namespace's Workloads and LocalQueues, each queue's pending workloads,
# the jobs ahead) come after these
GATHER_READS = 8


@pytest.mark.parametrize("main", [cli.status_main, cli.why_main])
@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("Inadmissible", "LocalQueue training doesn't exist"),  # refused
        ("Inadmissible", "ClusterQueue llm is inactive"),  # held
    ],
)
def test_no_expected_start_is_read_for_a_workload_refused_or_held(
    capsys, api, main, reason, message
):
    """status and why computed an expected start (ResourceFlavors, Workloads, LocalQueues,
    queue positions, the jobs ahead: 11 more reads here) for a Workload Kueue never admits or
    an inactive queue holds, and then did not print it; now they make none of those reads."""
    api.seen.clear()
    code, out, err = run(
        capsys, main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "") and "expected" in out  # the plain pending job's estimate
    assert len(api.seen) > GATHER_READS
    _kueue_says(api, reason, message)
    api.seen.clear()
    code, out, err = run(
        capsys, main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "") and "expected" not in out
    assert len(api.seen) == GATHER_READS, api.seen[GATHER_READS:]
    assert not any(p.endswith(("/resourceflavors/efa-training", "/workloads", "/localqueues"))
                   for p in api.seen)  # fmt: skip


def _limit_ranges(api, *cpus: str) -> None:
    """LimitRanges lr-0, lr-1, ... of namespace llm, each defaulting a container to `cpu`."""
    items = [
        {"metadata": {"name": f"lr-{i}", "namespace": "llm"},
         "spec": {"limits": [{"type": "Container", "default": {"cpu": cpu},
                              "defaultRequest": {"cpu": cpu}}]}}
        for i, cpu in enumerate(cpus)
    ]  # fmt: skip
    api.routes[LIMIT_RANGES] = {"kind": "LimitRangeList", "apiVersion": "v1", "items": items}


ORDER = (
    "which LimitRange decides is not fixed: namespace llm's LimitRanges lr-0, lr-1 default "
    "this job differently in different orders, and Kueue takes them in its informer's order, "
    "which the API does not fix; shown: in the order listed"
)


def test_which_of_several_limit_ranges_decides_is_said_not_fixed(capsys, api):
    """Kueue keeps the first LimitRange default of a resource in its informer's order, which
    the API does not fix: status showed the listed order's figure as if it were Kueue's. Now
    it says in one line that the order decides (and why says the same), only where it does."""
    _no_requests(api)
    _limit_ranges(api, "1", "2")
    out = status(capsys, api, "llm", "gpt-13b")
    assert "asks:       1 x master pod, each 1 cores\n" in out
    assert f"note:       {ORDER}\n" in out
    code, why, err = run(
        capsys, cli.why_main, "gpt-13b", "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "") and f"  note: {ORDER}\n" in why
    # the same default in both, or a container that names its own requests: no order decides
    _limit_ranges(api, "1", "1000m")
    assert "LimitRange decides" not in status(capsys, api, "llm", "gpt-13b")
    _limit_ranges(api, "1", "2")
    api.routes[PENDING_WORKLOAD] = recorded.ROUTES[PENDING_WORKLOAD]
    assert "LimitRange decides" not in status(capsys, api, "llm", "gpt-13b")


# release-0.19 c90ed700c1 pkg/controller/core/workload_controller.go: a Workload whose
# spec.active someone set false (the platform sets no requeuing backoffLimitCount, Kueue's
# other way to deactivate one) is evicted with reason Deactivated and this message; the job
# reconciler (jobframework/reconciler.go) then clears its quota with the eviction's message
DEACTIVATED = "The workload is deactivated"


def test_a_deactivated_workload_is_never_admitted_until_reactivated(capsys, api):
    """Kueue queues no Workload whose spec.active is false (IsAdmissible): why called it "not
    enough quota" and wait waited for ever; now wait stops at once (exit 1) and status and why
    say it is deactivated and what queues it again."""
    answer = json.loads(json.dumps(api.routes[PENDING_WORKLOAD]))
    wl = answer["items"][0]
    wl["spec"]["active"] = False
    (c,) = wl["status"]["conditions"]
    c["reason"], c["message"] = "Pending", DEACTIVATED
    wl["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "message": DEACTIVATED,
         "reason": "Deactivated"}
    )  # fmt: skip
    api.routes[PENDING_WORKLOAD] = answer
    said = (
        "Kueue never admits it while it is deactivated (its spec.active is false; Evicted, "
        f"reason Deactivated: {DEACTIVATED}): Kueue queues it "
        "again only once its spec.active is true"
    )
    code, out, err, polls = _wait(capsys, api, "--for", "admitted")
    assert (code, polls, err) == (1, 1, f"trainforge wait: {recorded.PENDING}: {said}\n")
    text = status(capsys, api, "llm", recorded.PENDING)
    assert f"refused:    {said}\n" in text and "expected:" not in text
    code, out, err = run(
        capsys, cli.why_main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "") and out.startswith(f"{said}.\nSee docs/"), out
    assert "not enough quota" not in out


@pytest.mark.parametrize(
    "message",
    [
        "The workload has failed admission checks",  # release-0.19 pkg/scheduler/scheduler.go nominate
        # pkg/scheduler/scheduler_tas_test.go:2135 (release-0.19 c90ed700c1): nodes, not quota
        'couldn\'t assign flavors to pod set worker: topology "default" allows to fit only 1 '
        "out of 2 pod(s)",
    ],
)
def test_why_calls_only_a_quota_message_not_enough_quota(capsys, api, message):
    """why said "not enough quota" for any QuotaReserved False message it did not place; now
    only where Kueue names a resource short, else Kueue's own message."""
    _kueue_says(api, "Pending", message)
    code, out, err = run(
        capsys, cli.why_main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith(f"Kueue has not admitted it: {message}\n"), out
    assert "not enough quota" not in out


def test_why_of_a_reserved_workload_once_evicted_says_it_is_reserved(capsys, api):
    """Kueue turns Evicted False ("Previously: ...", reason QuotaReserved) when it reserves
    quota again (release-0.19 c90ed700c1 pkg/workload/workload.go SetQuotaReservation,
    resetActiveCondition): why read any Evicted condition as an eviction, "it is requeued"."""
    answer = json.loads(json.dumps(api.routes[PENDING_WORKLOAD]))
    wl = answer["items"][0]
    wl["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": "Quota reserved in ClusterQueue llm"},
        {"type": "Evicted", "status": "False", "reason": "QuotaReserved",
         # pkg/workload/workload.go:932 of pkg/scheduler/preemption/preemption_test.go:372
         "message": "Previously: Preempted to accommodate a workload (UID: wl-in, JobUID: "
                    "job-in) due to prioritization in the ClusterQueue; preemptor path: "
                    "/standalone; preemptee path: /standalone"},
    ]  # fmt: skip
    wl["status"]["admissionChecks"] = [{"name": "check", "state": "Ready", "message": ""}]
    api.routes[PENDING_WORKLOAD] = answer
    code, out, err = run(
        capsys, cli.why_main, recorded.PENDING, "-n", "llm", "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith("Kueue reserved its quota; it is admitted once every admission check"), (
        out
    )
    assert "evicted" not in out and "expected" not in out


def _conditions(api, conditions: list[dict], checks: list[dict] | None = None) -> None:
    """gpt-13b's Workload (created 11:18:01, 42m before NOW) with these conditions."""
    answer = json.loads(json.dumps(api.routes[PENDING_WORKLOAD]))
    wl = answer["items"][0]
    wl["status"]["conditions"] = conditions
    if checks is not None:
        wl["status"]["admissionChecks"] = checks
    api.routes[PENDING_WORKLOAD] = answer


def test_a_reserved_workload_has_no_queue_position_and_is_queued_since_created(capsys, api):
    """Kueue takes a Workload out of its queue once it reserves its quota, and the visibility
    API lists only the queue's pending ones: status read its position (a failed read of it
    became a note) and counted "not admitted" from the reservation."""
    _conditions(
        api,
        [recorded.cond("QuotaReserved", "True", "2026-11-25T11:57:00Z", "QuotaReserved",
                       "Quota reserved in ClusterQueue llm")],
        [{"name": "check", "state": "Pending", "message": ""}],
    )  # fmt: skip
    api.failing[POSITION] = (503, "Service Unavailable")
    out = status(capsys, api, "llm", recorded.PENDING)
    assert "state:      Queued: not admitted by Kueue for 41m; its quota reserved 3m ago\n" in out
    assert (
        "reserved:   its quota in ClusterQueue llm; it waits for admission check(s) check\n" in out
    )
    assert "note:" not in out and "position:" not in out
    assert not [p for p in api.seen if "visibility.kueue.x-k8s.io" in p]


@pytest.mark.parametrize(
    ("conditions", "since"),
    [
        # the scheduler's first try, 10 minutes before NOW: queued since it was created
        ([recorded.cond("QuotaReserved", "False", "2026-11-25T11:50:00Z", "Pending", "x")], "41m"),
        # admitted once, evicted at 11:40 (Kueue writes Admitted when admission changes)
        (
            [
                recorded.cond("QuotaReserved", "False", "2026-11-25T11:45:00Z", "Pending", "x"),
                recorded.cond("Admitted", "False", "2026-11-25T11:40:00Z", "NoReservation"),
            ],
            "20m",
        ),
    ],
)
def test_not_admitted_counts_from_creation_or_the_lost_admission(capsys, api, conditions, since):
    """Counted from the QuotaReserved condition, the scheduler's latest try, it was too short."""
    _conditions(api, conditions)
    out = status(capsys, api, "llm", recorded.PENDING)
    assert f"state:      Queued: not admitted by Kueue for {since}\n" in out


def test_your_own_exit_code_is_labelled_yours_by_status_and_why(capsys, api):
    """A wrapper job whose code ran `sys.exit(3)`: `status` said "last exit 3 (oom)" and `why`
    "Most likely cause: oom (out of memory)", a reason the runtime never decided. The pod's
    termination message carries the exit record (exits.write_termination): user_exit."""
    pods = f"/api/v1/namespaces/{recorded.RESTART_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={recorded.RESTART}"
    api.routes[pods] = copy.deepcopy(api.routes[pods])
    mine = {"exitCode": 3, "reason": "Error", "message": '{"reason": "user_exit", "code": 3}',
            "startedAt": "2026-11-25T10:02:00Z", "finishedAt": "2026-11-25T11:40:00Z"}  # fmt: skip
    for p in api.routes[pods]["items"]:
        p["status"]["containerStatuses"][0]["lastState"] = {"terminated": mine}
    out = status(capsys, api, recorded.RESTART_NS, recorded.RESTART)
    assert out.count("last exit 3 (user_exit)") == 2 and "oom" not in out
    code, out, err = run(
        capsys, cli.why_main, recorded.RESTART, "-n", recorded.RESTART_NS, "--kubeconfig",
        api.config, now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0, err
    assert "Most likely cause: user_exit (your code exited with 3)" in out and "oom" not in out


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (None, "SIGTERM: stopped; trainforge cannot tell whether a checkpoint was saved"),
        ('{"reason": "preempted", "code": 143}',
         "SIGTERM: stopped; trainforge cannot tell whether a checkpoint was saved"),
        ('{"reason": "preempted", "code": 143, "checkpoint": 40}',
         "SIGTERM: stopped; the newest checkpoint it saved is step 40"),
    ],
    ids=["runtime_without_record", "record_without_checkpoint", "record_with_checkpoint"],
)  # fmt: skip
def test_why_says_a_checkpoint_of_a_preemption_only_where_its_record_names_one(
    capsys, api, message, cause
):
    """`why` said "Most likely cause: preempted (SIGTERM: checkpointed and stopped)" for every
    143 of ours, the wrapper's record of code that never checkpointed included. Now it says
    the checkpoint step the record names (the runtime's save on SIGTERM, exits.leave_record),
    else that trainforge cannot tell."""
    pods = f"/api/v1/namespaces/{recorded.RESTART_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={recorded.RESTART}"
    api.routes[pods] = copy.deepcopy(api.routes[pods])
    ended = {"exitCode": 143, "reason": "Error",
             "startedAt": "2026-11-25T10:02:00Z", "finishedAt": "2026-11-25T11:40:00Z"}  # fmt: skip
    if message is not None:
        ended["message"] = message
    for p in api.routes[pods]["items"]:
        p["status"]["containerStatuses"][0]["lastState"] = {"terminated": ended}
    out = status(capsys, api, recorded.RESTART_NS, recorded.RESTART)
    assert out.count("last exit 143 (preempted)") == 2, out
    code, why, err = run(
        capsys, cli.why_main, recorded.RESTART, "-n", recorded.RESTART_NS, "--kubeconfig",
        api.config, now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0, err
    assert f"Most likely cause: preempted ({cause}); the others follow from it." in why, why
    assert "checkpointed" not in why


@pytest.mark.parametrize("runtime", [False, True], ids=["wrapper", "runtime"])
def test_an_exit_without_a_record_names_no_reason_the_runtime_did_not_decide(capsys, api, runtime):
    """A pod of an older wrapper (no termination message) whose code ran `sys.exit(3)`:
    `status` said "last exit 3 (oom)" and `why` "Most likely cause: oom (out of memory)" from
    the runtime's table, for a reason nobody recorded. Now: the code, what the controller
    does with it, and that the reason is unknown. The runtime's own pods (`python -m
    trainforge.training`, which exits only with its reasons' codes) keep the table."""
    pods = f"/api/v1/namespaces/{recorded.RESTART_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={recorded.RESTART}"
    api.routes[pods] = copy.deepcopy(api.routes[pods])
    old = {"exitCode": 3, "reason": "Error",
           "startedAt": "2026-11-25T10:02:00Z", "finishedAt": "2026-11-25T11:40:00Z"}  # fmt: skip
    for p in api.routes[pods]["items"]:
        p["status"]["containerStatuses"][0]["lastState"] = {"terminated": old}
        if not runtime:  # your script under the wrapper, as entrypoint.program runs it
            p["spec"]["containers"][0]["command"] = [
                *recorded.RUNTIME_COMMAND[:-2], "-m", "trainforge.training.usercode",
                "/workspace/train.py",
            ]  # fmt: skip
    out = status(capsys, api, recorded.RESTART_NS, recorded.RESTART)
    code, why, err = run(
        capsys, cli.why_main, recorded.RESTART, "-n", recorded.RESTART_NS, "--kubeconfig",
        api.config, now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0, err
    then = "then: the container restarts in place, counted against backoffLimit"
    if runtime:
        assert out.count(f"last exit 3 (oom) 20m ago  {then}") == 2, out
        assert "Most likely cause: oom (out of memory)" in why, why
        return
    assert out.count(f"last exit 3 (Error; no exit record: reason unknown) 20m ago  {then}") == 2
    assert "oom" not in out and "oom" not in why, why
    assert "Most likely cause" not in why and "Cause not known: the pods left no exit record" in why
