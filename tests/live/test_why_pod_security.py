"""`trainforge why` of a job whose pods Pod Security admission refuses says what the plan says
of the same pod template (plan/checks/pod_security.py `judge`): the checks, the fields and the
fix, judged at the namespace's labels, or at the policy the refusal names where the namespace
cannot be read; against the fake API server of test_status.py."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from tests.live import recorded
from tests.live.test_status import FakeApi, run
from tests.plan.test_pod_security_check import review_job
from trainforge.core import pod_security
from trainforge.live import cli
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import pod_security as check
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.runner import run_project

ROOT = pathlib.Path(__file__).resolve().parents[2]
NS = "research"  # a dev team's namespace: enforce baseline


@pytest.fixture(scope="module")
def planned(repo_root):
    """dev's objects with the review's hostNetwork/hostPath Job in a team namespace, the
    plan's Pod Security finding for it, and the Namespace the program labels."""
    objects = [*k8s_objects(run_project(repo_root, "dev")), review_job(NS)]
    (finding,) = check.check(PlanContext(inventory=None, objects=objects)).findings
    (ns,) = [o.doc for o in objects if o.kind == "Namespace" and o.obj_name == NS]
    return finding, ns, objects[-1].doc


def _routes(job_doc: dict, ns_doc: dict) -> dict:
    """The Job as the cluster holds it once Kueue admitted it, and the Job controller's
    FailedCreate event with the API server's refusal (the one model's message at the
    namespace's policy)."""
    job = copy.deepcopy(job_doc)
    job["metadata"].update(uid="uid-evil", creationTimestamp="2026-11-25T11:50:00Z")
    job["status"] = {"active": 0}
    pol = pod_security.policy(ns_doc["metadata"]["labels"])
    refusals = pod_security.evaluate(pol, job["spec"]["template"])
    said = pod_security.message(pol, refusals)
    event = {
        "metadata": {"name": "evil.1", "namespace": NS},
        "involvedObject": {"kind": "Job", "name": "evil", "namespace": NS},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": "2026-11-25T11:58:00Z",
        "message": f'Error creating: pods "evil-x7k2p" is forbidden: {said}',
    }  # fmt: skip
    return {
        f"/apis/batch/v1/namespaces/{NS}/jobs/evil": job,
        f"/api/v1/namespaces/{NS}/events": {"kind": "EventList", "items": [event]},
        f"/api/v1/namespaces/{NS}": ns_doc,
    }


@pytest.mark.parametrize("namespace_read", [True, False])
def test_why_of_a_job_pod_security_refuses_says_the_plans_finding(
    planned, capsys, tmp_path, namespace_read
):
    finding, ns_doc, job_doc = planned
    routes = _routes(job_doc, ns_doc)
    forbidden = set() if namespace_read else {f"/api/v1/namespaces/{NS}"}
    api = FakeApi(routes, forbidden=forbidden)
    api.config = api.kubeconfig(tmp_path)
    try:
        code, out, err = run(
            capsys, cli.why_main, "evil", "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    assert code == 0, err
    assert out.startswith(
        f"Pod Security refuses its pods: namespace {NS} enforces baseline:latest; the Job "
        "controller (Job evil, event FailedCreate) is refused every pod and retries: it never "
        "runs.\n"
    ), out
    # the plan's checks (field by field) and its fix, word for word
    checks = finding.message.split("which refuses its pods: ", 1)[1].split(". The API", 1)[0]
    assert f"  spec.template.spec: {checks}\n" in out, out
    assert f"  fix: {finding.fix}\n" in out, out
    source = (
        f"namespace {NS}'s labels"
        if namespace_read
        else f"the policy the refusal names (cannot read namespace {NS} (403"
    )
    assert f"judged: the live pod templates at baseline:latest from {source}" in out, out
    assert "nothing blocks it" not in out


def test_why_of_a_trainjob_reads_its_jobsets_jobs_refusal(planned, capsys, tmp_path):
    """A TrainJob's pods are created by the Jobs of its JobSet (`<name>-node-0`), whose Job
    controller's FailedCreate is the refusal: why reads that event and judges the JobSet's
    pod templates (what those Jobs create), with the fix the plan's finding names."""
    finding, ns_doc, job_doc = planned
    api = FakeApi(_trainjob_routes(job_doc, ns_doc))
    api.config = api.kubeconfig(tmp_path)
    try:
        code, out, err = run(
            capsys, cli.why_main, "tj", "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    assert code == 0, err
    assert out.startswith(
        f"Pod Security refuses its node pods: namespace {NS} enforces baseline:latest; the Job "
        "controller (Job tj-node-0, event FailedCreate) is refused every node pod"
    ), out
    assert "  node pod, spec.replicatedJobs[0].template.spec.template.spec: hostNamespaces " in out
    assert f"  fix: {finding.fix}\n" in out, out


def _trainjob_routes(job_doc: dict, ns_doc: dict) -> dict:
    """A started TrainJob `tj` (no pod runs) whose JobSet's Job `tj-node-0` is refused the
    review Job's pod template, with that Job controller's FailedCreate event."""
    from trainforge.jobs import trainjob
    from trainforge.live.gather import JOBSET

    pod = copy.deepcopy(job_doc["spec"]["template"])
    tj = {"apiVersion": trainjob.API_VERSION, "kind": trainjob.KIND,
          "metadata": {"name": "tj", "namespace": NS, "uid": "uid-tj",
                       "creationTimestamp": "2026-11-25T11:50:00Z"},
          "spec": {"runtimeRef": {"name": "torch-distributed"}}, "status": {}}  # fmt: skip
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "tj", "namespace": NS},
              "spec": {"replicatedJobs": [{"name": trainjob.REPLICATED_JOB, "replicas": 1,
                                           "template": {"spec": {"template": pod}}}]}}  # fmt: skip
    pol = pod_security.policy(ns_doc["metadata"]["labels"])
    said = pod_security.message(pol, pod_security.evaluate(pol, pod))
    event = {
        "metadata": {"name": "tj-node-0.1", "namespace": NS},
        "involvedObject": {"kind": "Job", "name": "tj-node-0", "namespace": NS},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": "2026-11-25T11:58:00Z",
        "message": f'Error creating: pods "tj-node-0-0-x7k2p" is forbidden: {said}',
    }  # fmt: skip
    return {
        f"/apis/{trainjob.API_VERSION}/namespaces/{NS}/trainjobs/tj": tj,
        f"{JOBSET}/namespaces/{NS}/jobsets/tj": jobset,
        f"/api/v1/namespaces/{NS}/events": {"kind": "EventList", "items": [event]},
        f"/api/v1/namespaces/{NS}": ns_doc,
    }


def test_why_of_a_pytorchjob_in_a_restricted_team_names_the_operators_container(
    repo_root, capsys, tmp_path
):
    """A restricted team's Master/Worker PyTorchJob: the operator adds `init-pytorch` to its
    Workers and is refused them (its FailedCreate on the PyTorchJob). why judges the Worker as
    the operator creates it and says the plan's fix (pod_security.OPERATOR_FIX), not one the
    user cannot apply to a container that is not theirs."""
    from trainforge.jobs import pytorchjob
    from trainforge.stack.file import read_stack_file

    config = read_stack_file(repo_root / "Pulumi.dev.yaml").engine()
    teams = json.loads(config["trainforge:teams"])
    teams[0]["podSecurity"] = "restricted"
    objects = k8s_objects(
        run_project(repo_root, "dev", config_overrides={"trainforge:teams": json.dumps(teams)})
    )
    findings = check.check(PlanContext(inventory=None, objects=objects)).findings
    (f,) = [x for x in findings if x.resource == f"{NS}/PyTorchJob/mnist-user"]
    assert f.fix == check.OPERATOR_FIX
    (ns_doc,) = [o.doc for o in objects if o.kind == "Namespace" and o.obj_name == NS]
    (job,) = [copy.deepcopy(o.doc) for o in objects if o.kind == pytorchjob.KIND
              and o.doc["metadata"]["name"] == "mnist-user"]  # fmt: skip
    job["metadata"].update(uid="uid-m", creationTimestamp="2026-11-25T11:50:00Z")
    job["status"] = {"conditions": []}
    pol = pod_security.policy(ns_doc["metadata"]["labels"])
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    said = pod_security.message(
        pol, pod_security.evaluate(pol, pytorchjob.operator_template(job, "Worker", worker))
    )
    event = {
        "metadata": {"name": "mnist-user.1", "namespace": NS},
        "involvedObject": {"kind": pytorchjob.KIND, "name": "mnist-user", "namespace": NS},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": "2026-11-25T11:58:00Z",
        "message": f'Error creating: pods "mnist-user-worker-0" is forbidden: {said}',
    }  # fmt: skip
    routes = {
        f"/apis/{pytorchjob.API_VERSION}/namespaces/{NS}/pytorchjobs/mnist-user": job,
        f"/api/v1/namespaces/{NS}/events": {"kind": "EventList", "items": [event]},
        f"/api/v1/namespaces/{NS}": ns_doc,
    }
    api = FakeApi(routes)
    api.config = api.kubeconfig(tmp_path)
    try:
        code, out, err = run(
            capsys, cli.why_main, "mnist-user", "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    assert code == 0, err
    assert out.startswith(
        f"Pod Security refuses its Worker pods: namespace {NS} enforces restricted:latest; the "
        "PyTorchJob's controller (PyTorchJob mnist-user, event FailedCreate) is refused every "
        "Worker pod and retries: it never runs.\n"
    ), out
    assert "  Worker pod, spec.pytorchReplicaSpecs.Worker.template.spec: " in out, out
    assert f"  fix: {check.OPERATOR_FIX}\n" in out, out
    # started (Kueue admitted it), no Running condition yet: wait ends in why's first line,
    # read from the event on the PyTorchJob itself (its uid is this PyTorchJob's). Once the
    # operator says Running (its Master runs), wait goes on (test_wait_reads_no_events_while_a_pod_runs_or_for_admitted)
    job["spec"]["runPolicy"]["suspend"] = False
    event["involvedObject"]["uid"] = "uid-m"
    (code, waited, err), _, _ = _wait_and_why(routes, "mnist-user", tmp_path, capsys)
    assert (code, waited) == (1, "mnist-user: Created\n"), err
    assert err == f"trainforge wait: mnist-user: {out.splitlines()[0]}\n"


# --- `trainforge wait` of a job whose pods Pod Security refuses ---------------------------------


EVENTS = f"/api/v1/namespaces/{NS}/events"


def _wait_and_why(routes: dict, job: str, tmp_path, capsys, *argv: str):
    """`wait JOB` (stopped by its third poll, exit 124, if it does not end by itself), the
    GETs of each of its polls, and `why JOB`'s output, against the same routes."""
    api = FakeApi(routes)
    api.config = api.kubeconfig(tmp_path)
    polls: list[list[str]] = []
    ticks = iter(range(100))

    def sleep(_: float) -> None:
        polls.append(api.seen[sum(map(len, polls)) :])

    try:
        waited = run(
            capsys, cli.wait_main, job, "-n", NS, *argv, "--timeout", "3", "--interval", "1",
            "--kubeconfig", api.config, sleep=sleep, clock=lambda: float(next(ticks)),
        )  # fmt: skip
        polls.append(api.seen[sum(map(len, polls)) :])
        _, why, _ = run(
            capsys, cli.why_main, job, "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    return waited, polls, why


@pytest.mark.parametrize("until", ["finished", "running"])
@pytest.mark.parametrize("kind", ["Job", "TrainJob"])
def test_wait_ends_on_a_job_pod_security_refuses_in_whys_words(
    planned, capsys, tmp_path, until, kind
):
    """`wait` polled a started job whose pod creates Pod Security refuses until --timeout
    (forever without one): the controller retries forever, it never runs. Now its first poll
    ends the wait, exit 1, with `why`'s first line (one source: admission.lines), read from
    the Job's event or, for a TrainJob, its JobSet's Job's."""
    _, ns_doc, job_doc = planned
    job = "evil" if kind == "Job" else "tj"
    routes = _routes(job_doc, ns_doc) if kind == "Job" else _trainjob_routes(job_doc, ns_doc)
    (code, out, err), polls, why = _wait_and_why(routes, job, tmp_path, capsys, "--for", until)
    first = why.splitlines()[0]
    what = "its pods" if kind == "Job" else "its node pods"  # the replica type refused
    assert first.startswith(f"Pod Security refuses {what}: ") and first.endswith("never runs.")
    assert (code, len(polls)) == (1, 1), (code, out, err)
    assert err == f"trainforge wait: {job}: {first}\n"
    assert out == f"{job}: Created\n"
    # the events, and the namespace's labels that say its level, as why reads them
    assert EVENTS in polls[0] and f"/api/v1/namespaces/{NS}" in polls[0]
    if kind == "Job":  # troubleshooting.md quotes the line as printed
        doc = " ".join((ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8").split())
        quoted = err.strip().replace(job, "JOB").replace(f"namespace {NS} ", "namespace NS ")
        assert f"(`{quoted}`)" in doc, quoted


def test_a_failed_read_of_the_events_is_one_note_and_the_wait_goes_on(planned, capsys, tmp_path):
    """A team that cannot read the events (or a cluster that fails to answer) is told once
    that wait does not see a refusal, and the wait goes on: no exit 1 from a read."""
    _, ns_doc, job_doc = planned
    api = FakeApi(_routes(job_doc, ns_doc), forbidden={EVENTS})
    api.config = api.kubeconfig(tmp_path)
    ticks = iter(range(100))
    try:
        code, out, err = run(
            capsys, cli.wait_main, "evil", "-n", NS, "--timeout", "3", "--interval", "1",
            "--kubeconfig", api.config, sleep=lambda _: None, clock=lambda: float(next(ticks)),
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    assert code == 124, err
    assert out == (
        f"note: cannot read the events of namespace {NS} (403: your access does not include "
        "it): wait does not see a Pod Security refusal of its pods (which never lets it run)\n"
        "evil: Created\n"
    ), out


def _stale(routes: dict, how: str) -> dict:
    """The refusal event as an earlier `evil` left it: last seen before this Job was created,
    or recorded (now) about another object of the name, its uid not this Job's."""
    routes = copy.deepcopy(routes)
    (event,) = routes[EVENTS]["items"]
    if how == "earlier":
        event["lastTimestamp"] = "2026-11-25T11:49:59Z"  # the Job: created 11:50:00
    else:
        event["involvedObject"]["uid"] = "uid-earlier-evil"
    return routes


@pytest.mark.parametrize("how", ["earlier", "other uid"])
def test_an_earlier_jobs_refusal_does_not_end_the_wait(planned, capsys, tmp_path, how):
    """Events outlive their object (an hour by default): a refusal of an earlier Job of the
    same name, deleted and re-created, says nothing of this one. wait goes on (its timeout
    here) and why does not say it; with this Job's uid the same event ends it."""
    _, ns_doc, job_doc = planned
    routes = _stale(_routes(job_doc, ns_doc), how)
    (code, out, err), polls, why = _wait_and_why(routes, "evil", tmp_path, capsys)
    assert (code, err) == (124, "trainforge wait: evil still Created after 3s\n"), out
    assert "Pod Security" not in why, why
    # each poll of a started job none of whose pods runs reads the events
    assert all(EVENTS in p for p in polls), polls
    if how == "other uid":
        routes[EVENTS]["items"][0]["involvedObject"]["uid"] = "uid-evil"
        (code, _, err), _, _ = _wait_and_why(routes, "evil", tmp_path, capsys)
        assert code == 1 and "Pod Security refuses its pods" in err, err


def test_wait_reads_no_events_while_a_pod_runs_or_for_admitted(planned, capsys, tmp_path):
    """The events are read only where a refusal decides: a running Job's polls (its pods
    were created) and `--for admitted` (admitted it is) read none, and the refusal event,
    stale for a running job, ends neither wait."""
    _, ns_doc, job_doc = planned
    routes = _routes(job_doc, ns_doc)
    (code, _, err), polls, _ = _wait_and_why(routes, "evil", tmp_path, capsys, "--for", "admitted")
    assert code == 0, err
    assert not any(EVENTS in p for p in polls), polls
    routes[f"/apis/batch/v1/namespaces/{NS}/jobs/evil"]["status"] = {"active": 1}
    (code, out, err), polls, _ = _wait_and_why(routes, "evil", tmp_path, capsys)
    assert (code, out) == (124, "evil: Running\n"), err
    assert not any(EVENTS in p for p in polls), polls


# --- a job whose pods Pod Security refuses in part: one replica type, while another runs ---------


def _clean(template: dict) -> dict:
    """The review pod template without what baseline refuses (host network, hostPath)."""
    t = copy.deepcopy(template)
    t["spec"].pop("hostNetwork")
    t["spec"]["volumes"] = [{"name": "h", "emptyDir": {}}]
    return t


def _pod(name: str, labels: dict, phase: str) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "pytorch"}]}, "status": {"phase": phase}}  # fmt: skip


def _partial_pytorchjob(job_doc: dict, ns_doc: dict, refused: str) -> dict:
    """A started Master/Worker PyTorchJob `m` whose `refused` replica type has the review's
    hostNetwork/hostPath template (baseline refuses it) and the other a clean one; the other's
    pods exist (a Master runs, the operator says Running; Workers wait in their init container
    for a Master that never comes: Pending, not Running). The operator's FailedCreate event
    on the PyTorchJob (its uid) names the refused pod."""
    from trainforge.jobs import pytorchjob

    bad = copy.deepcopy(job_doc["spec"]["template"])
    good = _clean(bad)
    other = "Worker" if refused == "Master" else "Master"
    specs = {refused: {"replicas": 1 if refused == "Master" else 2, "template": bad},
             other: {"replicas": 1 if other == "Master" else 2, "template": good}}  # fmt: skip
    running = refused == "Worker"  # the Master runs: the operator's Running condition
    job = {
        "apiVersion": pytorchjob.API_VERSION, "kind": pytorchjob.KIND,
        "metadata": {"name": "m", "namespace": NS, "uid": "uid-m",
                     "creationTimestamp": "2026-11-25T11:50:00Z"},
        "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {"suspend": False}},
        "status": {
            "conditions": [{"type": "Created", "status": "True"}]
            + ([{"type": "Running", "status": "True"}] if running else []),
            "replicaStatuses": {other: {"active": 1 if running else 0}, refused: {}},
        },
    }  # fmt: skip
    pol = pod_security.policy(ns_doc["metadata"]["labels"])
    said = pod_security.message(
        pol, pod_security.evaluate(pol, pytorchjob.operator_template(job, refused, bad))
    )
    event = {
        "metadata": {"name": "m.1", "namespace": NS},
        "involvedObject": {"kind": pytorchjob.KIND, "name": "m", "namespace": NS, "uid": "uid-m"},
        "reason": "FailedCreate", "type": "Warning", "lastTimestamp": "2026-11-25T11:58:00Z",
        "message": f'Error creating: pods "m-{refused.lower()}-0" is forbidden: {said}',
    }  # fmt: skip
    n = specs[other]["replicas"]
    pods = [
        _pod(f"m-{other.lower()}-{i}", {"trainforge.io/job": "m",
             pytorchjob.REPLICA_TYPE_LABEL: other.lower()}, "Running" if running else "Pending")
        for i in range(n)
    ]  # fmt: skip
    return {
        f"/apis/{pytorchjob.API_VERSION}/namespaces/{NS}/pytorchjobs/m": job,
        EVENTS: {"kind": "EventList", "items": [event]},
        f"/api/v1/namespaces/{NS}": ns_doc,
        f"/api/v1/namespaces/{NS}/pods?labelSelector=trainforge.io/job=m": {"items": pods},
    }


@pytest.mark.parametrize("until", ["finished", "running"])
@pytest.mark.parametrize("refused", ["Worker", "Master"])
def test_wait_ends_when_pod_security_refuses_one_replica_type(
    planned, capsys, tmp_path, refused, until
):
    """`wait` of a PyTorchJob whose Workers Pod Security refuses while its Master runs polled
    forever: the operator says Running (its Master runs), `--for running` even exited 0, and
    the Master waits at rendezvous for Workers that never exist. Now the first poll ends it,
    exit 1, naming the refused replica type in why's first line (one source: admission.lines),
    and why says the same, with the plan's finding of that template only. The reverse (the
    Master refused, the Workers waiting for it) ends it the same way."""
    _, ns_doc, job_doc = planned
    routes = _partial_pytorchjob(job_doc, ns_doc, refused)
    (code, out, err), polls, why = _wait_and_why(routes, "m", tmp_path, capsys, "--for", until)
    other = "Worker" if refused == "Master" else "Master"
    first = why.splitlines()[0]
    assert first == (
        f"Pod Security refuses its {refused} pods: namespace {NS} enforces baseline:latest; the "
        "PyTorchJob's controller (PyTorchJob m, event FailedCreate) is refused every "
        f"{refused} pod and retries: it never reaches its world size (its {other} pods run or "
        "wait without them)."
    ), why
    assert (code, len(polls)) == (1, 1), (code, out, err)
    assert err == f"trainforge wait: m: {first}\n"
    assert out == ("m: Running\n" if refused == "Worker" else "m: Created\n")
    assert f"  {refused} pod, spec.pytorchReplicaSpecs.{refused}.template.spec: " in why, why
    assert f"  {other} pod, " not in why, why  # the plan's finding of the refused one only
    # the events, the namespace's labels and the pods (which replica types have pods)
    assert EVENTS in polls[0] and f"/api/v1/namespaces/{NS}" in polls[0], polls
    if refused == "Worker":  # troubleshooting.md quotes the line as printed
        doc = " ".join((ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8").split())
        quoted = (
            err.strip()
            .replace("wait: m: ", "wait: JOB: ")
            .replace("(PyTorchJob m, ", "(PyTorchJob JOB, ")
            .replace(f"namespace {NS} ", "namespace NS ")
        )
        assert f"(`{quoted}`" in doc, quoted


def test_a_refused_replica_type_with_pods_now_does_not_end_the_wait(planned, capsys, tmp_path):
    """A refusal of this PyTorchJob's Workers within the events' hour, after which its
    Workers were created (the namespace's level was lowered): they wait for nodes (Pending,
    not active), so wait reads the events, but the refusal is over; wait goes on and why does
    not say it."""
    _, ns_doc, job_doc = planned
    routes = _partial_pytorchjob(job_doc, ns_doc, "Worker")
    pods = routes[f"/api/v1/namespaces/{NS}/pods?labelSelector=trainforge.io/job=m"]["items"]
    pods.append(_pod("m-worker-0", {"trainforge.io/job": "m",
                                    "training.kubeflow.org/replica-type": "worker"}, "Pending"))  # fmt: skip
    (code, out, err), polls, why = _wait_and_why(routes, "m", tmp_path, capsys)
    assert (code, err) == (124, "trainforge wait: m still Running after 3s\n"), (out, err)
    assert all(EVENTS in p for p in polls), polls  # short of its world: read, found over
    assert "Pod Security" not in why, why


def test_wait_reads_no_events_of_a_pytorchjob_whose_replicas_all_run(planned, capsys, tmp_path):
    """The events are read only while a replica type is short of its replicas (the
    operator's replicaStatuses): a PyTorchJob whose Master and Workers all run reads none,
    and its (stale) refusal ends neither wait."""
    _, ns_doc, job_doc = planned
    routes = _partial_pytorchjob(job_doc, ns_doc, "Worker")
    path = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/m"
    routes[path]["status"]["replicaStatuses"]["Worker"] = {"active": 2}
    (code, out, err), polls, _ = _wait_and_why(routes, "m", tmp_path, capsys, "--for", "running")
    assert (code, out) == (0, "m: Running\n"), err
    assert not any(EVENTS in p for p in polls), polls
    (code, out, err), polls, _ = _wait_and_why(routes, "m", tmp_path, capsys)
    assert (code, out) == (124, "m: Running\n"), err
    assert not any(EVENTS in p for p in polls), polls


def test_wait_ends_when_a_trainjobs_node_is_refused_while_its_initializer_runs(
    planned, capsys, tmp_path
):
    """A TrainJob whose JobSet has an initializer and the trainer's node, in a runtime that
    does not order them (no dependsOn): the initializer's pod runs (the TrainJob is Running
    by its pods), the node's Job is refused its pods (its Job controller's FailedCreate on
    `tj-node-0`). wait ends, exit 1, naming the node, and why says the same. Where the
    runtime orders them (Trainer's own: the node's Job is made once the initializers are
    Complete), the initializer's pod is done: the job is Created and never runs."""
    from trainforge.jobs import trainjob
    from trainforge.live.gather import JOBSET, REPLICATED_JOB_LABEL

    _, ns_doc, job_doc = planned
    routes = _trainjob_routes(job_doc, ns_doc)
    jobset = routes[f"{JOBSET}/namespaces/{NS}/jobsets/tj"]
    init = _clean(job_doc["spec"]["template"])
    jobset["spec"]["replicatedJobs"].insert(
        0, {"name": "dataset-initializer", "replicas": 1,
            "template": {"spec": {"template": init}}}
    )  # fmt: skip
    pod = _pod("tj-dataset-initializer-0-0-abcde", {trainjob.POD_NAME_LABEL: "tj",
               REPLICATED_JOB_LABEL: "dataset-initializer"}, "Running")  # fmt: skip
    routes[f"/api/v1/namespaces/{NS}/pods?labelSelector={trainjob.POD_NAME_LABEL}=tj"] = {
        "items": [pod]
    }
    (code, out, err), polls, why = _wait_and_why(routes, "tj", tmp_path, capsys)
    first = why.splitlines()[0]
    assert first == (
        f"Pod Security refuses its node pods: namespace {NS} enforces baseline:latest; the Job "
        "controller (Job tj-node-0, event FailedCreate) is refused every node pod and retries: "
        "it never reaches its world size (its dataset-initializer pods run or wait without "
        "them)."
    ), why
    assert (code, out, err) == (1, "tj: Running\n", f"trainforge wait: tj: {first}\n")
    assert "  node pod, spec.replicatedJobs[1]." in why, why
    assert "dataset-initializer pod, " not in why, why
    pod["status"]["phase"] = "Succeeded"
    (code, out, err), _, why = _wait_and_why(routes, "tj", tmp_path, capsys)
    assert (code, out) == (1, "tj: Created\n"), err
    assert err == f"trainforge wait: tj: {why.splitlines()[0]}\n"
    assert err.endswith("is refused every node pod and retries: it never runs.\n"), err


def test_another_trainjobs_refusal_does_not_end_the_wait(planned, capsys, tmp_path):
    """TrainJob `tj` and TrainJob `tj-2`, whose JobSet's Job `tj-2-node-0` is refused: its
    name starts `tj-` but it is no Job of tj's JobSet (its replicated jobs: `node`, whose Job
    is `tj-node-0`). wait of tj reads its JobSet once a refusal is found, and goes on; why of
    tj does not say it."""
    from trainforge.jobs import trainjob
    from trainforge.live.gather import JOBSET

    _, ns_doc, job_doc = planned
    routes = _trainjob_routes(job_doc, ns_doc)
    (event,) = routes[EVENTS]["items"]
    event["involvedObject"]["name"] = "tj-2-node-0"
    event["message"] = event["message"].replace('"tj-node-0-0-x7k2p"', '"tj-2-node-0-0-x7k2p"')
    (code, out, err), polls, why = _wait_and_why(routes, "tj", tmp_path, capsys)
    assert (code, err) == (124, "trainforge wait: tj still Created after 3s\n"), (out, err)
    assert f"{JOBSET}/namespaces/{NS}/jobsets/tj" in polls[0], polls
    assert "Pod Security" not in why, why
    assert trainjob.REPLICATED_JOB == "node"


def _mpi_trainjob(job_doc: dict, ns_doc: dict) -> dict:
    """A TrainJob `tj` of an MPI runtime (Trainer's deepspeed-distributed: a `launcher` that
    runs mpirun over the `node` pods' sshd): its node pod runs, its launcher's template is the
    review's (baseline refuses it), its Job `tj-launcher-0` refused its pod."""
    from trainforge.jobs import trainjob
    from trainforge.live.gather import JOBSET, REPLICATED_JOB_LABEL

    routes = _trainjob_routes(job_doc, ns_doc)
    jobset = routes[f"{JOBSET}/namespaces/{NS}/jobsets/tj"]
    (node,) = jobset["spec"]["replicatedJobs"]
    launcher = copy.deepcopy(node)
    launcher["name"] = "launcher"
    node["template"]["spec"]["template"] = _clean(node["template"]["spec"]["template"])
    jobset["spec"]["replicatedJobs"] = [launcher, node]
    (event,) = routes[EVENTS]["items"]
    event["involvedObject"]["name"] = "tj-launcher-0"
    event["message"] = event["message"].replace('"tj-node-0-0-x7k2p"', '"tj-launcher-0-0-x7k2p"')
    pod = _pod("tj-node-0-0-abcde", {trainjob.POD_NAME_LABEL: "tj",
               REPLICATED_JOB_LABEL: trainjob.REPLICATED_JOB}, "Running")  # fmt: skip
    routes[f"/api/v1/namespaces/{NS}/pods?labelSelector={trainjob.POD_NAME_LABEL}=tj"] = {
        "items": [pod]
    }
    return routes


def test_wait_ends_when_a_trainjobs_launcher_is_refused_while_its_node_runs(
    planned, capsys, tmp_path
):
    """An MPI TrainJob whose launcher Pod Security refuses while its node pod runs (sshd,
    waiting for an mpirun that never comes): Running by its pods, and wait polled forever.
    Now wait reads its JobSet once (its replicated jobs: launcher has no pod), then the
    events, and ends, exit 1, naming the launcher in why's words."""
    from trainforge.live.gather import JOBSET

    _, ns_doc, job_doc = planned
    routes = _mpi_trainjob(job_doc, ns_doc)
    (code, out, err), polls, why = _wait_and_why(routes, "tj", tmp_path, capsys)
    first = why.splitlines()[0]
    assert first == (
        f"Pod Security refuses its launcher pods: namespace {NS} enforces baseline:latest; the "
        "Job controller (Job tj-launcher-0, event FailedCreate) is refused every launcher pod "
        "and retries: it never reaches its world size (its node pods run or wait without them)."
    ), why
    assert (code, out, err) == (1, "tj: Running\n", f"trainforge wait: tj: {first}\n")
    assert polls[0].count(f"{JOBSET}/namespaces/{NS}/jobsets/tj") == 1, polls


def test_wait_of_a_whole_running_trainjob_reads_its_jobset_once_and_no_events(
    planned, capsys, tmp_path
):
    """A TrainJob whose every replicated job has its pod running (launcher and node): its
    JobSet is read on the first Running poll only, the events never, and the (stale)
    refusal ends no wait."""
    from trainforge.jobs import trainjob
    from trainforge.live.gather import JOBSET, REPLICATED_JOB_LABEL

    _, ns_doc, job_doc = planned
    routes = _mpi_trainjob(job_doc, ns_doc)
    pods = routes[f"/api/v1/namespaces/{NS}/pods?labelSelector={trainjob.POD_NAME_LABEL}=tj"]
    pods["items"].append(_pod("tj-launcher-0-0-abcde", {trainjob.POD_NAME_LABEL: "tj",
                              REPLICATED_JOB_LABEL: "launcher"}, "Running"))  # fmt: skip
    (code, out, err), polls, _ = _wait_and_why(routes, "tj", tmp_path, capsys)
    assert (code, out) == (124, "tj: Running\n"), err
    jobset = f"{JOBSET}/namespaces/{NS}/jobsets/tj"
    assert [p.count(jobset) for p in polls] == [1, 0, 0], polls
    assert not any(EVENTS in p for p in polls), polls


# --- status: the same first line, under wait's condition ----------------------------------------


def _status_and_why(routes: dict, job: str, tmp_path, capsys) -> tuple[str, str, list[str]]:
    """`status JOB`'s output, `why JOB`'s first line and the GETs status made."""
    api = FakeApi(routes)
    api.config = api.kubeconfig(tmp_path)
    try:
        code, out, err = run(
            capsys, cli.status_main, job, "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
        assert code == 0, err
        seen = list(api.seen)
        _, why, _ = run(
            capsys, cli.why_main, job, "-n", NS, "--kubeconfig", api.config,
            now=lambda: recorded.NOW,
        )  # fmt: skip
    finally:
        api.httpd.shutdown()
    return out, why.splitlines()[0], seen


@pytest.mark.parametrize("kind", ["Job", "TrainJob", "PyTorchJob Worker", "PyTorchJob Master"])
def test_status_of_a_job_pod_security_refuses_says_whys_first_line(planned, capsys, tmp_path, kind):
    """`status` of a started job whose pod creates Pod Security refuses showed it Created (or
    Running: a PyTorchJob's Master runs) with no reason; now it says `refused:` in why's
    first line (admission.first_line: the one source wait ends with too), right under its
    state, and reads nothing more than before."""
    _, ns_doc, job_doc = planned
    if kind == "Job":
        job, routes = "evil", _routes(job_doc, ns_doc)
    elif kind == "TrainJob":
        job, routes = "tj", _trainjob_routes(job_doc, ns_doc)
    else:
        job, routes = "m", _partial_pytorchjob(job_doc, ns_doc, kind.split()[1])
    out, first, seen = _status_and_why(routes, job, tmp_path, capsys)
    assert first.startswith("Pod Security refuses "), first
    state, refused = out.splitlines()[1:3]
    assert state.startswith("state:      "), out
    assert refused == f"refused:    {first} (trainforge why: the checks and the fix)", out
    assert out.count("Pod Security refuses") == 1, out  # one line, not a second message
    assert seen.count(EVENTS) == 1, seen


@pytest.mark.parametrize("how", ["earlier", "running", "whole PyTorchJob", "queued"])
def test_status_says_no_refusal_where_wait_would_not(planned, capsys, tmp_path, how):
    """The refusal event is there, but it says nothing of the job now: an earlier Job's of
    the name, a Job whose pods run, a PyTorchJob whose replica types all run (its Workers'
    pods not listed: `why`, which reads no state, still names them), a job Kueue has not
    started: `status` says no `refused:` line, as `wait` does not end on it."""
    _, ns_doc, job_doc = planned
    job = "m" if how == "whole PyTorchJob" else "evil"
    if how == "whole PyTorchJob":
        routes = _partial_pytorchjob(job_doc, ns_doc, "Worker")
        path = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/m"
        routes[path]["status"]["replicaStatuses"]["Worker"] = {"active": 2}
    elif how == "earlier":
        routes = _stale(_routes(job_doc, ns_doc), how)
    else:
        routes = _routes(job_doc, ns_doc)
        job_path = f"/apis/batch/v1/namespaces/{NS}/jobs/evil"
        if how == "running":
            routes[job_path]["status"] = {"active": 1}
        else:
            routes[job_path]["spec"]["suspend"] = True
    out, first, _ = _status_and_why(routes, job, tmp_path, capsys)
    assert "refused:" not in out, out
    if how == "whole PyTorchJob":
        assert first.startswith("Pod Security refuses its Worker pods"), first
