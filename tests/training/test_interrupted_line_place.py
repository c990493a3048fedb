"""The `interrupted` (Ctrl-C, 130) exit line says what happens where the process runs: under
run-local (contract.RUN_LOCAL, which run-local alone sets), that run-local re-creates nothing;
in a pod, what its controller does with 130 under the job's restart policy (the pod's
TRAINFORGE_ON_EXIT, restarts.on_exit of the real job). Before, every place said "run-local
re-creates nothing after a Ctrl-C", a pod too, beside its controller's "the pod is
re-created" (trainforge/training/exits.py `exit_line`)."""

from __future__ import annotations

import pytest

from trainforge.core import failures
from trainforge.jobs.restarts import on_exit, outcome
from trainforge.jobs.spec import parse_job
from trainforge.training import exits
from trainforge.training.contract import ON_EXIT, RUN_LOCAL

RUN_LOCAL_WORDS = "run-local re-creates nothing after a Ctrl-C"


def line() -> str:
    return exits.exit_line(exits.INTERRUPTED, rank=0, step=7, detail="KeyboardInterrupt")


@pytest.fixture(autouse=True)
def nowhere(monkeypatch):
    for name in (RUN_LOCAL, ON_EXIT, "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "raw",
    [
        {"backend": "pytorchjob"},  # ExitCode: 130 >= 128 re-creates the pod
        {"backend": "pytorchjob", "restartPolicy": "Never"},  # the job fails
        {"backend": "indexed-job"},  # counted against backoffLimitPerIndex
    ],
)
def test_in_a_pod_the_line_says_what_its_controller_does_with_130(monkeypatch, raw):
    job = parse_job({"name": "j", "team": "research", "pool": "cpu", **raw}, "t")
    monkeypatch.setenv(ON_EXIT, on_exit(job))
    said = line()
    does = outcome(job, exits.INTERRUPTED.code).words
    assert f"[{does}" in said, said
    assert "run-local" not in said, said


def test_under_run_local_the_line_says_what_run_local_does(monkeypatch):
    job = parse_job({"name": "j", "team": "research", "pool": "cpu"}, "t")
    monkeypatch.setenv(ON_EXIT, on_exit(job))  # a stack's job: told as its pods are
    monkeypatch.setenv(RUN_LOCAL, "1")
    said = line()
    assert f"[a stop you asked for: {RUN_LOCAL_WORDS}; action: " in said, said
    # not the pod's words beside it: run-local does not re-create after a Ctrl-C
    assert failures.pytorchjob_outcome("ExitCode", 130).words not in said, said
    monkeypatch.delenv(ON_EXIT)  # an ad-hoc run: the same, it is run-local's own stop
    assert RUN_LOCAL_WORDS in line()


def test_outside_both_the_line_claims_neither():
    said = line()
    assert "run-local" not in said and "retryable: the launcher decides" in said, said


def test_the_launchers_ctrl_c_line_says_the_same_as_the_workers(monkeypatch):
    """The launcher (torchrun's, one per pod) said "exiting with 130 (the pod is re-created,
    ...)" under run-local too, beside its workers' "run-local re-creates nothing"."""
    import signal

    from trainforge.training.launch import stopped_line

    job = parse_job({"name": "j", "team": "research", "pool": "cpu"}, "t")
    monkeypatch.setenv(ON_EXIT, on_exit(job))
    pod_words = outcome(job, exits.INTERRUPTED.code).words
    in_pod = stopped_line(signal.SIGINT)
    assert in_pod.endswith(f"exiting with 130 ({pod_words})"), in_pod
    monkeypatch.setenv(RUN_LOCAL, "1")
    local = stopped_line(signal.SIGINT)
    assert local.endswith(f"exiting with 130 (a stop you asked for: {RUN_LOCAL_WORDS})"), local
    # a SIGTERM is a pod deletion's, wherever it runs: the controller's words
    assert stopped_line(signal.SIGTERM).endswith(f"({outcome(job, 143).words})")
