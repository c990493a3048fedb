"""The retry bound rehearsal: pods that die with 137 on every attempt end after a bounded
number of attempts on every backend, computed from the controller's semantics."""

from __future__ import annotations

from tests.jobs.helpers import CODE, CPU_POOL, target
from trainforge.core.contract import BACKENDS, Declared, DeclaredJob, PlatformContract
from trainforge.core.pods import job_spec_bound as job_bound
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks.retry_bounds import RULE, check, ledger_bound
from trainforge.training.ledger import NO_PROGRESS_LIMIT


def plan(**raw_extra):
    t = target(CPU_POOL, backends=BACKENDS)
    out = Declared(contracts=[PlatformContract(pools={}, teams={}, backends=BACKENDS)])
    raw = {"name": "j", "team": "research", "pool": CPU_POOL.name, **raw_extra}
    job = resolve_job(parse_job(raw, "j"), t, "j")
    out.jobs.append(DeclaredJob(job, t, emit(job, t, CODE), "job-research-j"))
    result = check(PlanContext(None, [], out))
    return job, result, result.sections[0].data[0]


USER_CODE = {"entrypoint": {"command": ["python", "-c", "pass"]}, "image": "repo/img:1"}


def test_an_exitcode_pytorchjob_without_a_bound_is_refused():
    job, result, row = plan(restartPolicy="ExitCode", **USER_CODE)
    assert job.restart_policy == "ExitCode" and row["attempts"] is None
    (finding,) = result.findings
    assert finding.rule == RULE and "job-research-j" in finding.names
    assert "retried forever" in finding.message


def test_user_code_on_a_pytorchjob_defaults_to_a_counted_policy():
    job, result, row = plan(**USER_CODE)
    assert job.restart_policy == "OnFailure"  # its pods cannot count their attempts
    assert result.findings == [] and row["attempts"] == 7  # backoffLimit 6, then failed


def test_onfailure_counts_the_restarts_of_all_the_jobs_pods_together():
    """Training operator release-1.9 PastBackoffLimit sums the container restarts of every
    Running pod of the job: 2 pods that both die on every attempt reach backoffLimit 6 after
    3 restarts each (4 container runs each), not 6 (the fleet stack's jobs printed 7)."""
    cases = [(2, 6, 4), (3, 6, 3), (4, 6, 3), (2, 0, 2), (1, 6, 7), (6, 6, 2)]
    for workers, limit, runs in cases:
        job, result, row = plan(workers=workers, runPolicy={"backoffLimit": limit}, **USER_CODE)
        assert job.restart_policy == "OnFailure" and result.findings == []
        assert row["attempts"] == runs, (workers, limit, row)
        if workers > 1:
            assert f"all {workers} pods together, {runs} container runs each" in row["why"]


def test_a_jobs_backofflimit_counts_the_failures_of_all_its_pods_together():
    """The Kubernetes Job controller counts failed pods (or the restarts of active OnFailure
    pods) over the whole Job against backoffLimit; backoffLimitPerIndex counts each index
    alone. So a TrainJob of 2 nodes whose pods all die reaches backoffLimit 6 (7 failed pods)
    on its 4th attempt, not its 7th; an indexed-job's per-index bound is unchanged."""
    assert job_bound({"backoffLimit": 6}, pods=2).attempts == 4
    assert job_bound({"backoffLimit": 6}, pods=7).attempts == 1
    on_failure = {"backoffLimit": 6, "template": {"spec": {"restartPolicy": "OnFailure"}}}
    assert job_bound(on_failure, pods=2).attempts == 4  # 3 restarts each, 4 runs each
    assert job_bound(on_failure, pods=1).attempts == 7
    assert job_bound({"backoffLimitPerIndex": 6}, pods=3).attempts == 7
    for workers, attempts in ((1, 7), (2, 4), (3, 3)):
        _, result, row = plan(backend="trainjob", workers=workers)
        assert result.findings == [] and row["attempts"] == attempts, (workers, row)
        _, _, row = plan(backend="indexed-job", workers=workers)
        assert row["attempts"] == 7  # backoffLimitPerIndex 6: per index


# A module from the job's image, run through trainforge.training.usercode (the library ships).
WRAPPED_CODE = {"entrypoint": {"module": "team.train"}, "image": "repo/img:1"}


def test_wrapped_user_code_on_a_pytorchjob_is_exitcode_bounded_by_its_wrapper():
    """A bug (exit 1) fails the job at once; the uncounted re-creations of a pod that keeps
    dying end when the wrapper's ledger (on the team's FSx) stops the attempt."""
    job, result, row = plan(**WRAPPED_CODE)
    assert job.restart_policy == "ExitCode"
    assert result.findings == []
    assert row["attempts"] == NO_PROGRESS_LIMIT + 1 == ledger_bound(user_code=True)
    assert "your code's wrapper (usercode) stops attempt" in row["why"]


def test_a_wrapper_that_never_stops_would_not_bound(monkeypatch):
    """The rehearsal runs the wrapper's own check: break it and the bound disappears."""
    monkeypatch.setattr("trainforge.training.usercode.start_check", lambda ledger: None)
    assert ledger_bound(cap=20, user_code=True) is None
    _, result, _ = plan(**WRAPPED_CODE)
    assert [f.rule for f in result.findings] == [RULE]


def test_the_bundled_runtime_is_stopped_by_its_ledger():
    job, result, row = plan()
    assert job.restart_policy == "ExitCode"
    assert result.findings == []
    assert row["attempts"] == NO_PROGRESS_LIMIT + 1 == ledger_bound()


def test_a_deadline_bounds_exitcode_in_time():
    _, result, row = plan(
        restartPolicy="ExitCode", runPolicy={"activeDeadlineSeconds": 3600}, **USER_CODE
    )
    assert result.findings == [] and row["deadline_s"] == 3600


def test_every_backend_is_bounded_by_default():
    for backend in BACKENDS:
        for extra in ({}, USER_CODE):
            _, result, row = plan(backend=backend, **extra)
            assert result.findings == [] and row["attempts"], (backend, extra, row)


def test_job_semantics():
    fail_on_137 = {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}}]
    }
    ignore_all = {
        "rules": [{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1]}}]
    }
    assert job_bound({"backoffLimit": 3}).attempts == 4
    assert job_bound({"backoffLimitPerIndex": 0, "backoffLimit": 9}).attempts == 1
    assert job_bound({"podFailurePolicy": fail_on_137}).attempts == 1
    assert job_bound({"podFailurePolicy": ignore_all, "backoffLimit": 3}).attempts is None
    assert job_bound({}).attempts == 7  # the API server's default backoffLimit 6


def test_a_ledger_that_ignores_attempts_killed_before_resuming_would_not_bound(monkeypatch):
    """The rehearsal runs the real ledger: break its counting and the bound disappears."""
    from trainforge.training.ledger import RunLedger

    monkeypatch.setattr(RunLedger, "attempts_without_progress", lambda self, step: 0)
    assert ledger_bound(cap=20) is None
    _, result, _ = plan()
    assert [f.rule for f in result.findings] == [RULE]
