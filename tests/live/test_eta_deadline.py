"""A running job's ETA from its metrics is cut at its deadline (wave 21, restartwords).

Before: llama-pt's metrics said ETA 2.0 h, and `status` printed "ETA 2.0 h" and `why` of the
job queued behind it "llama-pt ... ends in 2.0 h", though its activeDeadlineSeconds (7 h from
its start at 06:00:05; now is 12:00) makes its controller fail it in 1.0 h: the one rule the
plan times runs by (jobs.duration.cut_at_deadline), read by wait.metrics_eta. Against the fake
API server of test_status.py and its recorded queue.
"""

from __future__ import annotations

import copy

import pytest

from tests.live import recorded
from tests.live.test_status import FakeApi, run
from trainforge.live import cli, wait
from trainforge.live.gather import gather
from trainforge.live.kube import Api

NS = recorded.PENDING_NS
LLAMA_PT = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/llama-pt"
CUT = (
    "ETA from its metrics 2.0 h, past its activeDeadlineSeconds 25200: cut in 60 min (about "
    "2026-11-25 13:00 UTC), the run needs ~8.0 h"
)


@pytest.fixture
def api(tmp_path):
    server = FakeApi(copy.deepcopy(recorded.ROUTES), recorded.FORBIDDEN)
    server.config = server.kubeconfig(tmp_path)
    yield server
    server.httpd.shutdown()


def _deadline(api: FakeApi, seconds: int) -> None:
    api.routes[LLAMA_PT]["spec"]["runPolicy"] = {"activeDeadlineSeconds": seconds}


def _holder(api: FakeApi) -> wait.Holder:
    client = Api(api.config)
    e = wait.expected_start(client, gather(client, NS, recorded.PENDING), recorded.NOW)
    assert e is not None
    return next(h for h in e.holders if h.job == "llama-pt")


def test_a_queued_jobs_wait_ends_at_the_running_jobs_deadline(capsys, api):
    """7 h from its admission at 06:00:05: llama-pt ends within 3605 s, not the 7200 s of its
    metrics, and `why` of gpt-13b says it is cut and when. Broken on purpose (_holder taking
    the metrics' ETA as it was): 7200 s, "ETA from its metrics" alone."""
    assert (_holder(api).seconds, _holder(api).ceiling) == (7200.0, False)  # no deadline
    _deadline(api, 7 * 3600)
    h = _holder(api)
    assert (h.seconds, h.ceiling, h.basis) == (3605.0, True, CUT)
    code, out, _ = run(
        capsys, cli.why_main, recorded.PENDING, "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0
    assert f"llama-pt holds 32 GPUs, ends within 60 min ({CUT})" in " ".join(out.split())


def test_status_of_the_running_job_says_its_eta_is_cut(capsys, api):
    """`status llama-pt`: its progress line's ETA says the deadline cuts it and when, counted
    from the job's status.startTime (the training operator's, as it counts the deadline); a
    deadline its ETA fits says the ETA alone. Broken on purpose (explain.progress_lines
    without metrics_eta): "ETA 2.0 h"."""
    api.routes[LLAMA_PT]["status"] = {"startTime": "2026-11-25T06:00:05Z"}
    _deadline(api, 7 * 3600)
    code, out, err = run(
        capsys, cli.status_main, "llama-pt", "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert code == 0, err
    assert (
        "ETA 2.0 h, past its activeDeadlineSeconds 25200: cut in 60 min (about 2026-11-25 13:00 "
        "UTC), the run needs ~8.0 h"
    ) in " ".join(out.split())
    _deadline(api, 9 * 3600)
    code, out, err = run(
        capsys, cli.status_main, "llama-pt", "-n", NS, "--kubeconfig", api.config,
        now=lambda: recorded.NOW,
    )  # fmt: skip
    assert "ETA 2.0 h" in out and "cut in" not in out
