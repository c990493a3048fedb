"""trainforge.core.failures against the controllers' own test cases, and every exit code of the
runtime through each backend's emitted objects.

Every case of tests/fixtures/upstream/restarts.yaml (the training operator v1.9.4's
TestIsRetryableExitCode, the Kubernetes Job controller's TestMatchPodFailurePolicy; the file
says where each was read) runs through the model and must give upstream's answer. Then the
objects each backend emits are run through the same model for each of the runtime's exit
codes (trainforge.training.exits), a SIGKILL 137 and a SIGTERM 143 (with and without the
DisruptionTarget condition of a preemption, an eviction or a lost node), and the plan's retry
bound (`Shape.retry_bound`, what `plan` prints) must agree with what the controller then does."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from tests.jobs.helpers import CODE, CPU_POOL, target
from trainforge.core import failures as F
from trainforge.core.contract import BACKENDS
from trainforge.core.pods import RetryInputs
from trainforge.jobs import indexed_job, pytorchjob, restarts, trainjob
from trainforge.jobs.backends import emit, job_shape
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training import contract, exits

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "upstream" / "restarts.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
W = "trainforge:jobs[0]"


@pytest.mark.parametrize("case", DATA["isRetryableExitCode"], ids=lambda c: str(c["exitCode"]))
def test_is_retryable_exit_code(case: dict) -> None:
    assert F.operator_retries(case["exitCode"]) is case["retryable"]


@pytest.mark.parametrize("case", DATA["matchPodFailurePolicy"], ids=lambda c: c["case"])
def test_match_pod_failure_policy(case: dict) -> None:
    count, action = F.match_pod_failure_policy(case["policy"], case["pod"])
    assert (count, action) == (case["count"], case["action"])


@pytest.mark.parametrize("case", DATA["applyFailurePolicyRuleAction"], ids=lambda c: c["case"])
def test_apply_failure_policy_rule_action(case: dict) -> None:
    verdict, count = F.jobset_on_failed_job(
        case["failurePolicy"], case["restartsCountTowardsMax"], case["action"]
    )
    assert (verdict == "fail", count) == (case["fails"], case["wantRestartsCountTowardsMax"])


def test_a_trainjob_fails_with_its_first_failed_child_job() -> None:
    """The platform's runtimes run the TrainJob's JobSet with failurePolicy.maxRestarts 0:
    the first child Job that fails fails the JobSet, so the TrainJob (JobSet v0.12.0's
    executeFailurePolicy: no rules, the default RestartJobSet at maxRestarts)."""
    for runtime in trainjob.runtime_manifests():
        policy = runtime["spec"]["template"]["spec"]["failurePolicy"]
        assert F.jobset_on_failed_job(policy) == ("fail", 0), runtime["metadata"]["name"]
    assert F.jobset_on_failed_job(None) == ("fail", 0)  # no failurePolicy: fails too


def test_the_runtimes_reasons_are_retryable_exactly_where_the_operator_retries() -> None:
    """exits.Reason.retryable is the operator's IsRetryableExitCode, for every reason."""
    for reason in exits.REASONS.values():
        assert reason.retryable is F.operator_retries(reason.code), reason.name
    assert tuple(range(1, 128)) == F.PERMANENT_EXIT_CODES


# --- every exit code of the runtime through each backend's emitted objects -----------------

CODES = sorted({r.code for r in exits.BY_CODE.values() if r.code} | {F.KILLED, F.TERMINATED})
POLICIES = ("ExitCode", "OnFailure", "Never")


def _emitted(backend: str, policy: str, workers: int = 2) -> tuple[dict, dict]:
    """(the workload, the platform's ClusterTrainingRuntimes by name) of a `workers`-pod job."""
    raw = {"name": "j", "team": "research", "pool": CPU_POOL.name, "backend": backend,
           "workers": workers, "restartPolicy": policy,
           "runPolicy": {"activeDeadlineSeconds": 3600}}  # fmt: skip
    t = target(CPU_POOL, backends=BACKENDS)
    job = resolve_job(parse_job(raw, W), t, W)
    out = emit(job, t, CODE)
    runtimes = trainjob.runtimes_in(trainjob.runtime_manifests())
    return out.workload, runtimes


def _child_job_spec(doc: dict, runtimes: dict) -> tuple[dict, str]:
    """The batch/v1 Job spec whose pods run the job, and the trainer container's name."""
    if doc["kind"] == "Job":
        return doc["spec"], indexed_job.CONTAINER
    runtime = trainjob.runtime_of(doc, runtimes)
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    rjob = next(r for r in rjobs if r["name"] == trainjob.REPLICATED_JOB)
    return rjob["template"]["spec"], trainjob.CONTAINER


def outcome(backend: str, policy: str, code: int, disrupted: bool = False) -> F.Outcome:
    """What the backend's controller does with a pod of the emitted job that exited `code`."""
    doc, runtimes = _emitted(backend, policy)
    if backend == "pytorchjob":
        replicas = doc["spec"]["pytorchReplicaSpecs"].values()
        (restart,) = {r["restartPolicy"] for r in replicas}
        return F.pytorchjob_outcome(restart, code, disrupted=disrupted)
    spec, container = _child_job_spec(doc, runtimes)
    return F.job_outcome(spec, F.failed_pod(container, code, disrupted=disrupted))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_each_exit_code_does_what_the_restart_policy_says(backend: str, policy: str) -> None:
    """ExitCode: the runtime's permanent reasons (1-5) end the job and its retryable ones
    (200-205, a SIGKILL, a SIGTERM) run again; OnFailure: every failure runs again, counted;
    Never: every failure ends the job (a plain Job: backoffLimitPerIndex 0 / backoffLimit 0,
    the Job controller's count ends it)."""
    for code in CODES:
        got = outcome(backend, policy, code)
        if policy == "ExitCode":
            if F.operator_retries(code):
                assert got.restarts and got.fails is None, (code, got)
                # the operator does not count re-creations; a Job's controller does
                assert got.counted is (backend != "pytorchjob"), (code, got)
            else:
                assert got == F.Outcome(False, True, fails="job"), (code, got)
        elif policy == "OnFailure":
            assert got.restarts and got.counted, (code, got)
            # an indexed Job's pods run restartPolicy Never (backoffLimitPerIndex needs it)
            assert got.in_place is (backend != "indexed-job"), (code, got)
        elif backend == "pytorchjob":
            assert got.fails == "job", (code, got)
        else:
            assert got.counted, (code, got)  # with a limit of 0: the first failure ends it


@pytest.mark.parametrize("backend", ["indexed-job", "trainjob"])
def test_a_disrupted_pod_is_re_created_without_counting_under_exit_code(backend: str) -> None:
    """Preempted, evicted, or lost with its node (DisruptionTarget=True): the emitted pod
    failure policy's Ignore rule re-creates it uncounted, whatever its exit code."""
    for code in (F.TERMINATED, F.KILLED, exits.USER_ERROR.code):
        got = outcome(backend, "ExitCode", code, disrupted=True)
        assert (got.restarts, got.counted, got.in_place, got.fails) == (True, False, False, None)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_plans_retry_bound_agrees_with_the_controller_for_each_code(
    backend: str, policy: str
) -> None:
    """The plan's retry bound for pods that die with each code (what `plan` prints under
    "Retry bounds"): one attempt where the controller fails the job at once, more where it
    runs the pod again. The PyTorchJob's bound answered every code as a retryable one: an
    ExitCode job whose pods exit 1 was "bounded in time only", where the operator fails it."""
    doc, runtimes = _emitted(backend, policy)
    shape = job_shape(doc)
    assert shape is not None
    for code in CODES:
        bound = shape.retry_bound(doc, RetryInputs(code, runtimes))
        assert bound is not None
        got = outcome(backend, policy, code)
        if got.fails is not None or not got.restarts:
            assert bound.attempts == 1, (code, bound)
        else:
            assert bound.attempts != 1 or "0" in bound.why, (code, bound)


def test_pytorchjob_bound_of_a_permanent_code_under_exit_code() -> None:
    doc, _ = _emitted("pytorchjob", "ExitCode")
    bound = pytorchjob.retry_bound(doc, RetryInputs(exits.OOM.code))
    assert bound.attempts == 1 and "fails the job" in bound.why, bound


# --- what the plan and run-local print is what the controller does -------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_restart_budget_line_says_what_the_controller_does(backend: str, policy: str) -> None:
    """The plan's restart-budget line (`restarts.describe`, also run-local's) for each backend
    and restart policy, read against the model's answer for every exit code: "re-created on
    exit >= 128" where exactly the codes the operator retries run again (the others fail the
    job), "on any failure" where all do, "never re-created" where none does; "restarted" for
    a container restarted in place and "re-created" for a new pod; "no count limit" where the
    controller does not count the re-creations, "at most N" where it does."""
    from trainforge.jobs.restarts import describe  # noqa: PLC0415

    raw = {"name": "j", "team": "research", "pool": CPU_POOL.name, "backend": backend,
           "workers": 2, "restartPolicy": policy,
           "runPolicy": {"activeDeadlineSeconds": 3600}}  # fmt: skip
    t = target(CPU_POOL, backends=BACKENDS)
    line = describe(resolve_job(parse_job(raw, W), t, W))
    said = line.split("; pod ", 1)[1]
    got = {code: outcome(backend, policy, code) for code in CODES}
    if said.startswith("re-created on exit >= 128"):
        for code, o in got.items():
            assert o.restarts is F.operator_retries(code) and not o.in_place, (code, o, line)
            assert (o.fails == "job") is (not F.operator_retries(code)), (code, o, line)
    elif said.startswith(("restarted on any failure", "re-created on any failure")):
        in_place = said.startswith("restarted")
        assert all(o.restarts and o.in_place is in_place for o in got.values()), (got, line)
    else:
        assert said.startswith("never re-created"), line
        assert not any(o.restarts and not o.counted for o in got.values()), (got, line)
    counted = {o.counted for o in got.values() if o.restarts}
    if ", no count limit (" in said:
        assert counted == {False}, (got, line)
    elif counted:
        assert counted == {True} and ", at most " in said, (got, line)


RELIABILITY_MD = pathlib.Path(__file__).parents[1] / "docs" / "reliability.md"
# the table's columns: a code the operator does not retry, one it retries, a disruption
COLUMNS = ((exits.OOM.code, False), (exits.PEER_LOST.code, False), (F.TERMINATED, True))


def _reliability_rows() -> dict[tuple[str, str], list[str]]:
    text = RELIABILITY_MD.read_text(encoding="utf-8")
    section = text.split("### What the controller does next", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in BACKENDS:
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_reliability_md_says_what_the_controller_does(backend: str) -> None:
    """docs/reliability.md's "What the controller does next" table, cell by cell, is the
    model's answer for the emitted objects of each backend and restart policy."""
    rows = _reliability_rows()
    for policy in POLICIES:
        said = rows[(backend, policy)]
        want = [outcome(backend, policy, code, disrupted=d).words for code, d in COLUMNS]
        assert said == want, (backend, policy)


# --- the runtime's exit line in each backend's pods ---------------------------------------


def _on_exit_env(doc: object) -> list[str]:
    """Every TRAINFORGE_ON_EXIT value in the emitted object (its pods' env, a TrainJob's
    trainer.env)."""
    if isinstance(doc, dict):
        if doc.get("name") == contract.ON_EXIT and "value" in doc:
            return [doc["value"]]
        return [v for x in doc.values() for v in _on_exit_env(x)]
    if isinstance(doc, list):
        return [v for x in doc for v in _on_exit_env(x)]
    return []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_exit_line_in_each_backends_pod_says_what_the_controller_does(
    backend: str, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank's exit line (and the launcher's) said "permanent: the job stops" for a bug's
    exit 1 and "retryable: the launcher decides whether the job restarts" for a lost peer on
    every backend and restart policy: under OnFailure exit 1 restarts the container, under
    Never a lost peer fails the job. The emitter now tells each pod what its controller does
    (TRAINFORGE_ON_EXIT, from the model of the emitted objects) and the line says it, for
    every exit code of the runtime."""
    from trainforge.training import launch  # noqa: PLC0415

    doc, _ = _emitted(backend, policy)
    (value,) = set(_on_exit_env(doc))
    monkeypatch.setenv(contract.ON_EXIT, value)
    for reason in exits.BY_CODE.values():
        if reason is exits.SUCCESS:
            continue
        words = outcome(backend, policy, reason.code).words
        line = exits.exit_line(reason, rank=0, step=1, detail="x")
        assert f"[{words}" in line, (reason.name, line)
        assert "permanent:" not in line and "retryable:" not in line, line
        _, launched = launch.worker_exit_code({0: reason.code})
        assert f"({reason.name}, {words}, rank 0)" in launched, launched
    _, killed = launch.worker_exit_code({0: -9})  # SIGKILL: 137, the kernel's code
    assert f"(retryable, {outcome(backend, policy, F.KILLED).words}" not in killed, killed
    assert f"exiting with 137 (node_lost, {outcome(backend, policy, F.KILLED).words}, rank 0)" in (
        killed
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_restarts_outcome_is_the_emitted_objects(backend: str, policy: str) -> None:
    """jobs.restarts.outcome reads the emitter's restart_doc: the same answer as the full
    emitted object for every code, with and without a disruption."""
    raw = {"name": "j", "team": "research", "pool": CPU_POOL.name, "backend": backend,
           "workers": 2, "restartPolicy": policy,
           "runPolicy": {"activeDeadlineSeconds": 3600}}  # fmt: skip
    job = resolve_job(parse_job(raw, W), target(CPU_POOL, backends=BACKENDS), W)
    for code in CODES:
        for d in (False, True):
            assert restarts.outcome(job, code, disrupted=d) == outcome(backend, policy, code, d)


def test_a_jobs_limit_of_zero_fails_it_at_the_first_counted_failure() -> None:
    """The Job controller fails a Job whose counted failures pass backoffLimit (the API
    server's default 6 where unset or null), and an index whose failures pass
    backoffLimitPerIndex (the Job, with maxFailedIndexes 0)."""
    pod = F.failed_pod("c", 1)
    assert F.job_outcome({"backoffLimit": 0}, pod).fails == "job"
    for spec in ({}, {"backoffLimit": None}, {"backoffLimit": 1}):
        assert F.job_outcome(spec, pod) == F.Outcome(True, True), spec
    assert F.job_outcome({"backoffLimitPerIndex": 0}, pod).fails == "index"
    per_index = {"backoffLimitPerIndex": 0, "maxFailedIndexes": 0}
    assert F.job_outcome(per_index, pod).fails == "job"
    ignored = F.failed_pod("c", 1, disrupted=True)
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                  "status": "True"}]}]}  # fmt: skip
    assert F.job_outcome({"backoffLimit": 0, "podFailurePolicy": policy}, ignored).restarts


def test_torchrun_restarts_a_failed_worker_whatever_its_code_and_the_line_says_so(
    tmp_path: pathlib.Path,
) -> None:
    """torch's own elastic agent (torchrun --max-restarts 1, a real run): a worker that exits
    3 (oom, which the operator never retries) is restarted in the pod all the same, so its
    exit line says torchrun restarts it, and the last one, with no restart left, says what
    happens next without torchrun (here no controller: the ExitCode words)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "worker.py"
    script.write_text(
        "import sys\n"
        "from trainforge.training import exits\n"
        "print(exits.exit_line(exits.OOM, rank=0, step=None, detail='x'), flush=True)\n"
        "sys.exit(exits.OOM.code)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "TORCHELASTIC"))}
    env.update(PYTHONPATH=str(pathlib.Path(__file__).parents[1]), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
         "--max-restarts", "1", str(script)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [x for x in proc.stdout.splitlines() if x.startswith("trainforge exit:")]
    assert len(lines) == 2, proc.stdout + proc.stderr[-2000:]
    assert "[torchrun restarts the workers in the pod (restart 1 of 1); action:" in lines[0]
    assert "[permanent: the job stops; action:" in lines[1]
    assert proc.returncode != 0


def test_the_exit_line_says_torchrun_first_while_it_has_restarts_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(contract.ON_EXIT, F.on_exit_value(F.Outcome(False, True, fails="job"),
                                                          F.Outcome(True, False)))  # fmt: skip
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    for count, said in (("0", "restart 1 of 2"), ("1", "restart 2 of 2")):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", count)
        line = exits.exit_line(exits.USER_ERROR, rank=0, step=None, detail="x")
        assert f"[torchrun restarts the workers in the pod ({said}); action:" in line
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")  # none left: the controller's turn
    line = exits.exit_line(exits.USER_ERROR, rank=0, step=None, detail="x")
    assert "[the job fails; action:" in line
