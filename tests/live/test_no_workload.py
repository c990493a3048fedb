"""A suspended job with a queue label and no Kueue Workload: `why` said "Suspended; nothing
blocks it." and `status` showed no queue line, while nothing will ever admit it.

Kueue release-0.19 (c90ed700c1) pkg/controller/jobframework/reconciler.go ReconcileGenericJob
makes no Workload for a job whose kind has no running reconciler, in a namespace its
managedJobsNamespaceSelector leaves out, under a Kueue-managed owner, or naming a prebuilt
Workload (handleJobWithNoWorkload).
"""

from __future__ import annotations

import copy

import pytest

from tests.live import recorded
from tests.live.test_status import PENDING_JOB, PENDING_WORKLOAD, REFUSED, FakeApi, run
from trainforge.live import cli


@pytest.fixture
def api(tmp_path):
    server = FakeApi(recorded.ROUTES)
    server.routes[PENDING_WORKLOAD] = {"kind": "WorkloadList", "items": []}  # Kueue made none
    server.config = server.kubeconfig(tmp_path)
    yield server
    server.httpd.shutdown()


def _why(capsys, api) -> str:
    code, out, err = run(capsys, cli.why_main, recorded.PENDING, "-n", recorded.PENDING_NS,
                         "--kubeconfig", api.config, now=lambda: recorded.NOW)  # fmt: skip
    assert (code, err) == (0, "")
    return out


def test_why_says_kueue_made_no_workload_and_what_to_check(capsys, api):
    assert _why(capsys, api) == (
        "Suspended, and Kueue has made no Workload for it (LocalQueue training, its "
        "kueue.x-k8s.io/queue-name label): nothing admits it.\n"
        "  Kueue makes one only for a job it manages; check that:\n"
        "  - Kueue's controller runs\n"
        "  - its managedJobsNamespaceSelector selects namespace llm\n"
        "  - its integrations.frameworks lists kubeflow.org/pytorchjob\n"
        "See docs/troubleshooting.md#suspended-with-no-kueue-workload\n"
    )


def test_an_owner_or_a_prebuilt_workload_is_named(capsys, api):
    job = copy.deepcopy(api.routes[PENDING_JOB])
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw",
         "uid": "u", "controller": True},
    ]  # fmt: skip
    api.routes[PENDING_JOB] = job
    assert "  its owner AppWrapper aw is queued instead when Kueue manages it" in _why(capsys, api)
    job["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "wl-1"
    out = _why(capsys, api)
    assert out.splitlines()[1:] == [
        "  it names the prebuilt Workload wl-1 (kueue.x-k8s.io/prebuilt-workload-name), which "
        "does not exist: Kueue makes none for it and waits for that one"
    ]


def test_status_shows_the_queue_it_asks_for_and_no_workload(capsys, api):
    code, out, _ = run(capsys, cli.status_main, recorded.PENDING, "-n", recorded.PENDING_NS,
                       "--kubeconfig", api.config, now=lambda: recorded.NOW)  # fmt: skip
    assert code == 0
    assert (
        "queue:      LocalQueue training; no Kueue Workload: Kueue has not taken the job in "
        "(trainforge why)\n"
    ) in out


def test_an_unread_workload_is_not_known_not_nothing_blocks_it(capsys, api):
    api.forbidden.add(PENDING_WORKLOAD)
    assert _why(capsys, api) == (
        f"Suspended; whether Kueue admits it is not known: cannot read Kueue Workloads "
        f"({REFUSED[403]}): its queue, position and quota are not shown\n"
    )
    code, out, _ = run(capsys, cli.status_main, recorded.PENDING, "-n", recorded.PENDING_NS,
                       "--kubeconfig", api.config, now=lambda: recorded.NOW)  # fmt: skip
    assert "queue:" not in out and "note:       cannot read Kueue Workloads" in out


def test_the_troubleshooting_section_it_points_at_exists():
    from tests.live.test_status import ROOT
    from trainforge.jobs.backends import KUEUE_FRAMEWORKS

    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    section = text.split("\n### Suspended with no Kueue Workload\n")[1].split("\n## ")[0]
    for framework in KUEUE_FRAMEWORKS.values():  # the kinds it names are the ones Kueue gets
        assert f"`{framework}`" in section


def test_wait_for_admitted_says_once_that_kueue_made_no_workload_and_goes_on(capsys, api):
    """`wait --for admitted` polled a job with no Workload until its timeout and said nothing:
    from the second poll without one it says why's first line once, and keeps waiting (Kueue
    may still be starting)."""
    from tests.live.test_status import _wait

    code, out, err, polls = _wait(capsys, api, "--for", "admitted")
    assert (code, polls, err) == (-1, 5, "")
    assert out == (
        f"{recorded.PENDING}: Suspended\n"
        "note: Suspended, and Kueue has made no Workload for it (LocalQueue training, its "
        "kueue.x-k8s.io/queue-name label): nothing admits it. (trainforge why)\n"
    )
