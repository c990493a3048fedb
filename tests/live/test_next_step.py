"""`trainforge status` and `why` say what the job's controller does after a pod's exit, as its
emitter told the pod (TRAINFORGE_ON_EXIT: core.failures.told of the backend's outcome), and
where the pod does not carry it, the same model read from the job object; with torchrun's
restarts in the pod first where the pod's launcher has any (live/explain.py `next_text`).

On the recorded objects tests/live uses (tests/live/recorded.py)."""

from __future__ import annotations

import copy

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, target
from tests.live import recorded
from trainforge.core.contract import BACKENDS
from trainforge.jobs.backends import emit, pod_templates
from trainforge.jobs.restarts import on_exit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.live import explain
from trainforge.live.gather import Gathered
from trainforge.training.contract import ON_EXIT

RUNNER = recorded.RUNTIME_COMMAND  # trainforge's runtime: its codes are its reasons


def failed_pod(name: str, container: str, code: int, command: list[str] | None = None) -> dict:
    """A recorded pod that failed with `code` (restartPolicy Never, as ExitCode's pods run:
    its container's own state is terminated), without TRAINFORGE_ON_EXIT (a pod older than
    the variable) unless the test adds it."""
    pod = recorded._pod(name, "llm", "gpt-13b", "0", "ip-10-40-2-8.ec2.internal", container, 0,
                        None, "2026-11-25T11:50:00Z", phase="Failed")  # fmt: skip
    cs = pod["status"]["containerStatuses"][0]
    cs["state"] = {"terminated": {"exitCode": code, "reason": "Error",
                                  "finishedAt": "2026-11-25T11:58:00Z"}}  # fmt: skip
    pod["spec"]["containers"][0]["command"] = command or RUNNER
    return pod


def gathered(job: dict, backend: str, kind: str, container: str, pods: list[dict]) -> Gathered:
    return Gathered("llm", job["metadata"]["name"], backend, kind, container, job, pods=pods)


def pending_pytorchjob(policy: str = "ExitCode") -> dict:
    job = copy.deepcopy(recorded._pending_job)  # a PyTorchJob, replicas under ExitCode
    for r in job["spec"]["pytorchReplicaSpecs"].values():
        r["restartPolicy"] = policy
    return job


@pytest.mark.parametrize(
    ("code", "reason", "then"),
    [
        (1, "user_error", "then: the job fails"),
        (
            137,
            "",
            "then: the pod is re-created, not counted against backoffLimit",
        ),  # SIGKILL: no record
        (202, "peer_lost", "then: the pod is re-created, not counted against backoffLimit"),
    ],
)
def test_status_and_why_say_what_the_operator_does_after_a_failed_pods_exit(code, reason, then):
    """The recorded PyTorchJob (ExitCode) with a failed pod that carries no TRAINFORGE_ON_EXIT:
    the model reads its replicas' restartPolicy. Before, a Failed pod's exit (its container's
    own terminated state) was not shown at all, nor what follows it (watched fail)."""
    g = gathered(pending_pytorchjob(), "pytorchjob", "PyTorchJob", "pytorch",
                 [failed_pod("gpt-13b-master-0", "pytorch", code)])  # fmt: skip
    name = reason or f"Error; {explain.NO_RECORD}"
    status = explain.status(g, recorded.NOW)
    assert f"exit {code} ({name}) 2m ago  {then}\n" in status, status
    why = explain.why(g, recorded.NOW, {})
    assert f"exit {code} ({name}) 2m ago  {then}\n" in why, why
    if reason:
        assert f"Most likely cause: {reason} " in why


def test_the_pods_own_value_wins_over_the_model():
    """What the pod was told is what its runtime printed: said as the pod carries it."""
    pod = failed_pod("gpt-13b-master-0", "pytorch", 1)
    told = "permanent=the container restarts in place, counted against backoffLimit;retryable=x"
    pod["spec"]["containers"][0]["env"] = [{"name": ON_EXIT, "value": told}]
    g = gathered(pending_pytorchjob(), "pytorchjob", "PyTorchJob", "pytorch", [pod])
    assert "then: the container restarts in place, counted against backoffLimit\n" in (
        explain.status(g, recorded.NOW)
    )


def test_torchruns_restarts_in_the_pod_come_first():
    """An elastic pod's launcher restarts its workers in the pod `--max-restarts` times before
    the container exits (torch 2.13.0's elastic agent, core.failures.torchrun_restarts)."""
    cmd = [*RUNNER, "--nnodes=2:4", "--nproc-per-node=8", "--max-restarts=3", "-m", "x"]
    g = gathered(pending_pytorchjob(), "pytorchjob", "PyTorchJob", "pytorch",
                 [failed_pod("gpt-13b-worker-0", "pytorch", 202, cmd)])  # fmt: skip
    assert (
        "then: torchrun's 3 restart(s) in the pod spent, the pod is re-created, not counted against backoffLimit\n"
    ) in explain.status(g, recorded.NOW)


def test_a_no_progress_exit_spends_no_torchrun_restart_under_trainforges_launcher():
    """The run ledger's no_progress stop (exit 4) ends the group under trainforge's launcher,
    whatever `--max-restarts` has left (launch.stop_restarts_on_final): `status` said
    "torchrun's 3 restart(s) in the pod spent" although none was."""
    cmd = [*RUNNER, "--nnodes=2:4", "--nproc-per-node=8", "--max-restarts=3", "-m", "x"]
    g = gathered(pending_pytorchjob(), "pytorchjob", "PyTorchJob", "pytorch",
                 [failed_pod("gpt-13b-worker-0", "pytorch", 4, cmd)])  # fmt: skip
    status = explain.status(g, recorded.NOW)
    assert "torchrun's 3 restart(s) in the pod spent" not in status, status
    assert "then: no torchrun restart (no_progress: trainforge's launcher restarts nothing), " in (
        status
    ), status


def test_the_recorded_trainjobs_pods_carry_what_its_emitter_tells_them():
    """recorded.RESTART_ON_EXIT (the vit-l pods', which `status` prints: RESTART_STATUS) is
    what the TrainJob emitter tells a pod of an OnFailure job."""
    job = parse_job({"name": "vit-l", "team": "research", "pool": "p", "workers": 2,
                     "backend": "trainjob", "restartPolicy": "OnFailure"}, "t")  # fmt: skip
    assert on_exit(job) == recorded.RESTART_ON_EXIT


@pytest.mark.parametrize("backend", ["pytorchjob", "indexed-job"])
@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure", "Never"])
def test_the_model_read_from_the_job_object_is_what_its_pods_are_told(backend, policy):
    """Where neither the pod nor the job's templates carry TRAINFORGE_ON_EXIT (a pod that is
    gone, an object older than it), the model read from the emitted object's restart fields
    says what the emitter tells its pods."""
    raw = {"name": "own", "team": "research", "pool": CPU_POOL.name, "backend": backend,
           "workers": 2, "restartPolicy": policy}  # fmt: skip
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    wl = copy.deepcopy(emit(job, t, CODE).workload)
    container = {"pytorchjob": "pytorch", "indexed-job": "trainer"}[backend]
    g = gathered(wl, backend, wl["kind"], container, [])
    assert explain.told_on_exit(g) == on_exit(job)  # from the template's env
    for tpl in pod_templates(wl):
        for c in tpl.spec["containers"]:
            c["env"] = [e for e in c.get("env") or [] if e["name"] != ON_EXIT]
    left = [e for tpl in pod_templates(wl) for c in tpl.spec["containers"] for e in c["env"]]
    assert left and ON_EXIT not in {e["name"] for e in left}  # the templates say it no more
    assert explain.told_on_exit(g) == on_exit(job)  # from the restart fields, by the model


def _foreign_trainjob(policy: str = "OnFailure"):
    """A TrainJob the platform's emitter made, naming a runtime that is not the platform's (so
    no pod template, hence no TRAINFORGE_ON_EXIT, is known), and the JobSet the Trainer made
    of the platform's runtime for it (its JobSet template spec)."""
    from trainforge.jobs import trainjob

    raw = {"name": "vit-l", "team": "research", "pool": CPU_POOL.name, "backend": "trainjob",
           "workers": 2, "restartPolicy": policy}  # fmt: skip
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    doc = copy.deepcopy(emit(job, t, CODE).workload)
    runtime = trainjob.runtime_of(doc)
    doc["spec"]["runtimeRef"]["name"] = "their-runtime"
    jobset = {
        "metadata": {"name": "vit-l"},
        "spec": copy.deepcopy(runtime["spec"]["template"]["spec"]),
    }
    pod = failed_pod("vit-l-node-0-0-x", trainjob.CONTAINER, 1)
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] = trainjob.REPLICATED_JOB
    g = gathered(doc, "trainjob", "TrainJob", trainjob.CONTAINER, [pod])
    return job, g, jobset


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure", "Never"])
def test_a_trainjob_whose_pods_do_not_say_reads_its_jobset(policy):
    """A TrainJob whose runtime is not the platform's and whose pods carry no
    TRAINFORGE_ON_EXIT: no `then:` before; now the same model read from its JobSet (the
    replicated job's Job spec, then the JobSet's failurePolicy), which for the platform's
    runtime's JobSet is what the emitter tells its pods."""
    job, g, jobset = _foreign_trainjob(policy)
    assert explain.told_on_exit(g, g.pods[0]) is None  # nothing says it without the JobSet
    g.jobset = jobset
    assert explain.told_on_exit(g, g.pods[0]) == on_exit(job)
    then = explain.next_text(g, g.pods[0], 1)
    assert then is not None and then.startswith("then: ") and "not known" not in then


def test_a_jobset_that_restarts_its_jobs_says_so():
    """JobSet v0.12.0: a child Job that failed restarts every Job while restarts are left
    (failurePolicy.maxRestarts), counted; without a failurePolicy the JobSet fails."""
    _, g, jobset = _foreign_trainjob("Never")
    g.jobset = jobset
    jobset["spec"]["failurePolicy"] = {"maxRestarts": 3}
    assert explain.next_text(g, g.pods[0], 1) == (
        "then: the pod is re-created, counted against the JobSet's maxRestarts"
    )
    del jobset["spec"]["failurePolicy"]
    assert explain.next_text(g, g.pods[0], 1) == "then: the job fails"


def test_a_trainjobs_next_step_not_known_says_why():
    """No JobSet, a JobSet read that failed, or failurePolicy rules (not modelled): `then:`
    says it is not known and why, instead of nothing."""
    _, g, jobset = _foreign_trainjob()
    g.jobset_unread = "no JobSet vit-l (the Trainer has not created it, or it is gone)"
    assert explain.next_text(g, g.pods[0], 1) == (
        "then: not known (no JobSet vit-l (the Trainer has not created it, or it is gone))"
    )
    g.jobset_unread = "cannot read JobSet vit-l (403: your access does not include it)"
    assert explain.next_text(g, g.pods[0], 1) == (
        "then: not known (cannot read JobSet vit-l (403: your access does not include it))"
    )
    g.jobset, g.jobset_unread = jobset, ""
    jobset["spec"]["failurePolicy"] = {"maxRestarts": 1, "rules": [{"action": "FailJobSet"}]}
    assert explain.next_text(g, g.pods[0], 1) == (
        "then: not known (JobSet vit-l's failurePolicy has rules, which trainforge does not model)"
    )
    status = explain.status(g, recorded.NOW)
    assert "then: not known (JobSet vit-l's failurePolicy has rules" in status


def _succeeded_pytorchjob_with_a_failed_worker():
    """An emitted PyTorchJob (2 pods, ExitCode) the operator marked Succeeded (its Master
    exited 0) whose Worker pod ended with exit 1 after it, carrying what the emitter told it."""
    raw = {"name": "own", "team": "research", "pool": CPU_POOL.name, "workers": 2}
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    doc = copy.deepcopy(emit(job, t, CODE).workload)
    doc["status"] = {"conditions": [
        recorded.cond("Running", "False", "2026-11-25T11:57:00Z"),
        recorded.cond("Succeeded", "True", "2026-11-25T11:57:30Z", "PyTorchJobSucceeded"),
    ]}  # fmt: skip
    pod = failed_pod("own-worker-0", "pytorch", 1)
    pod["spec"]["containers"][0]["env"] = [{"name": ON_EXIT, "value": on_exit(job)}]
    return job, gathered(doc, "pytorchjob", "PyTorchJob", "pytorch", [pod])


def test_a_workers_exit_after_the_masters_success_says_what_the_success_rule_says():
    """A Worker pod that failed once its Master's exit 0 had ended the job: the operator
    re-creates nothing (v1.9.4 UpdateJobStatus: the Master's success finishes the job), so
    status and why say the told `succeeded` part (jobs/success.after_success, the rule
    run-local's verdict reads), not 'then: the pod is re-created' or 'the job fails'; why
    says the job finished, and shows that pod (before, it said only 'finished successfully')."""
    from trainforge.jobs.local import succeeded_line
    from trainforge.jobs.success import after_success

    job, g = _succeeded_pytorchjob_with_a_failed_worker()
    said = after_success(job)
    assert said is not None
    status = explain.status(g, recorded.NOW)
    why = explain.why(g, recorded.NOW, {})
    for text in (status, why):
        assert f"exit 1 (user_error) 2m ago  then: nothing; {said}\n" in text, text
        assert "the pod is re-created" not in text and "the job fails" not in text, text
    assert why.startswith("own finished successfully.\n"), why
    # run-local's verdict for the same run says the same of the pods
    assert "no pod is re-created, and " + said.split("no pod is re-created, and ")[1] in (
        succeeded_line(1, " (user_error)", job)
    )
    # while the job has not succeeded, the same exit is the controller's failure words
    g.job["status"]["conditions"][1]["status"] = "False"
    assert "then: the job fails" in explain.status(g, recorded.NOW)


def test_status_and_why_commands_on_the_fake_cluster_say_the_success_rules_words(capsys, tmp_path):
    """The same Succeeded PyTorchJob and failed Worker pod served by the fake API server the
    live tests use: `trainforge status` and `trainforge why` print the pod's exit with what
    the success rule says follows it."""
    from tests.live.test_status import FakeApi, run
    from trainforge.jobs.pod import JOB_LABEL
    from trainforge.jobs.success import after_success
    from trainforge.live import cli

    job, g = _succeeded_pytorchjob_with_a_failed_worker()
    ns, name = g.job["metadata"]["namespace"], g.job["metadata"]["name"]
    g.job["metadata"].update(uid="uid-own", creationTimestamp="2026-11-25T11:00:00Z")
    pod = g.pods[0]
    pod["metadata"]["namespace"] = ns
    routes = {
        f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{name}": g.job,
        f"/api/v1/namespaces/{ns}/pods?labelSelector={JOB_LABEL}={name}": {
            "kind": "PodList", "items": [pod]},
        f"/api/v1/namespaces/{ns}/events": {"kind": "EventList", "items": []},
    }  # fmt: skip
    api = FakeApi(routes)
    api.config = api.kubeconfig(tmp_path)
    said = f"then: nothing; {after_success(job)}"
    try:
        for main in (cli.status_main, cli.why_main):
            code, out, err = run(capsys, main, name, "-n", ns, "--kubeconfig", api.config,
                                 now=lambda: recorded.NOW)  # fmt: skip
            assert code == 0, err
            assert said in out and "the job fails" not in out, out
    finally:
        api.httpd.shutdown()
