"""`trainforge import` keeps what the original retried: for every exit code, the planned job's
controller retries it exactly when the original's did, or the line names each code whose fate
changed. Both sides are read from the emitted objects with core/failures.py, the one model of
the training operator's and the Job controller's rules (its upstream table tests:
tests/test_upstream_restarts.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs.importing import container, emitted, imp, indexed_job_yaml, write
from trainforge.core import failures
from trainforge.jobs import indexed_job
from trainforge.jobs.import_restarts import CODES, entry_retries
from trainforge.jobs.importer import ImportProblem

ROOT = Path(__file__).resolve().parents[2]
# the newcomer review's Indexed Job (restartPolicy Never, backoffLimitPerIndex 2, its code
# exits 3) and the blog-style PyTorchJob (OnFailure replicas)
REVIEW_INDEXED = ROOT / "tests" / "fixtures" / "import" / "review" / "indexed-never.yaml"
BLOG = ROOT / "examples" / "kubeflow" / "pytorchjob.yaml"


def _retried_job(spec: dict[str, Any], container: str) -> set[int]:
    return {
        c for c in CODES if failures.job_outcome(spec, failures.failed_pod(container, c)).restarts
    }


def test_the_reviews_indexed_job_still_retries_exit_3_twice(tmp_path):
    """Imported with "backoffLimitPerIndex 2: kept" and "restartPolicy: dropped", the entry
    defaulted to ExitCode and its Job failed on exit 3 at the first try; the original retried
    every exit code twice per index. The planned Job now retries the same codes."""
    original = yaml.safe_load(REVIEW_INDEXED.read_text())["spec"]
    r = imp(REVIEW_INDEXED, backends=("indexed-job",))
    assert r.entry["restartPolicy"] == "OnFailure"
    spec = emitted(r.entry, "indexed-job", r.files)["spec"]
    assert spec["backoffLimitPerIndex"] == original["backoffLimitPerIndex"] == 2
    was = _retried_job(original, "main")
    now = _retried_job(spec, indexed_job.CONTAINER)
    assert 3 in was and now == was == set(CODES)
    line = next(c for c in r.changes if c.startswith("spec.template.spec.restartPolicy"))
    assert line.startswith(
        "spec.template.spec.restartPolicy Never, no podFailurePolicy -> restartPolicy "
        "OnFailure, which keeps it: exit codes 1-255 are retried (the plan's restart line says "
        "how often)"
    )
    assert "a disruption (preemption, eviction, a lost node) no longer uses a retry" in line
    assert not any(c.startswith("spec.template.spec.restartPolicy: dropped") for c in r.changes)


def test_the_blog_pytorchjobs_onfailure_replicas_keep_restarting_a_failed_exit_1():
    """examples/kubeflow/pytorchjob.yaml's replicas are OnFailure: the operator restarted a pod
    that exited 1; the entry's default (ExitCode) failed the job on it."""
    doc = next(d for d in yaml.safe_load_all(BLOG.read_text()) if d["kind"] == "PyTorchJob")
    original = doc["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"]
    r = imp(BLOG, backends=("pytorchjob",))
    assert r.entry["restartPolicy"] == original == "OnFailure"
    replicas = emitted(r.entry, "pytorchjob", r.files)["spec"]["pytorchReplicaSpecs"]
    for replica in replicas.values():
        assert all(
            failures.pytorchjob_outcome(replica["restartPolicy"], c).restarts
            == failures.pytorchjob_outcome(original, c).restarts
            for c in CODES
        )
    assert failures.pytorchjob_outcome(replicas["Worker"]["restartPolicy"], 1).restarts
    assert (
        "spec.pytorchReplicaSpecs.Master.restartPolicy OnFailure -> restartPolicy OnFailure, "
        "which keeps it: exit codes 1-255 are retried (the plan's restart line says how often)"
        in r.changes
    )


MAIN = container("main", ["python", "-m", "acme.train"])


@pytest.mark.parametrize(
    ("fields", "policy", "said"),
    [
        # the platform's own rule (FailJob on 1-127): the entry's default keeps it
        (
            {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
                "operator": "In", "values": list(range(1, 128))}}]}},
            None,
            "-> the entry's default, which keeps it: exit codes 128-255 are retried (the "
            "plan's restart line says how often), 1-127 fail the job at once",
        ),
        # no retry at all: the default with a limit of 0 retries nothing either
        (
            {"backoffLimitPerIndex": 0},
            None,
            "-> the entry's default, which keeps it: no failed exit code is retried",
        ),
        # a rule no entry has (FailJob on 42 only): the default, with what changed named
        (
            {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
                "operator": "In", "values": [42]}}]}},
            None,
            "-> the entry's default ExitCode (exit codes 128-255 are retried (the plan's "
            "restart line says how often), 1-127 fail the job at once): exit codes 1-41, "
            "43-127 now fail the job at once; the original retried them",
        ),
    ],
)  # fmt: skip
def test_each_indexed_retry_rule_is_kept_or_each_changed_code_named(tmp_path, fields, policy, said):
    text = yaml.safe_load(indexed_job_yaml(MAIN, **{"backoffLimitPerIndex": 2, **fields}))
    r = imp(write(tmp_path, yaml.safe_dump(text)), backends=("indexed-job",))
    assert r.entry.get("restartPolicy") == policy
    line = next(c for c in r.changes if c.startswith("spec.template.spec.restartPolicy"))
    assert said in line, line
    spec = emitted(r.entry, "indexed-job", r.files)["spec"]
    was, now = _retried_job(text["spec"], "main"), _retried_job(spec, indexed_job.CONTAINER)
    assert (was == now) == ("which keeps it" in line)


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure", "Never"])
def test_every_backend_retries_the_same_codes_for_each_policy(policy):
    """A PyTorchJob's policy is chosen on the pytorchjob backend (the stack's default backend
    is not known to the importer): that holds only while the others retry the same codes."""
    codes = {b: entry_retries(b, policy) for b in ("pytorchjob", "trainjob", "indexed-job")}
    assert len(set(codes.values())) == 1, codes


def test_a_replica_restart_policy_no_pod_takes_is_one_line(tmp_path):
    text = BLOG.read_text().replace("restartPolicy: OnFailure", "restartPolicy: Sometimes", 1)
    path = write(tmp_path, text)
    with pytest.raises(ImportProblem) as e:
        imp(path, backends=("pytorchjob",))
    assert str(e.value) == (
        f"{path}: spec.pytorchReplicaSpecs.Master.restartPolicy: got 'Sometimes'; expected one "
        "of Always, OnFailure, Never, ExitCode (the operator gives it to the pods, whose API "
        "refuses any other)"
    )


@pytest.mark.parametrize(
    ("given", "entry"),
    [(None, "OnFailure"), ("Always", "OnFailure"), ("Never", "Never"), ("ExitCode", None)],
)
def test_each_replica_policy_becomes_the_entry_policy_that_retries_the_same_codes(
    tmp_path, given, entry
):
    """Unset is the operator's default, OnFailure (pytorch_types.go at v1.9.4); Always retries
    a failure as OnFailure does; ExitCode is the entry's default."""
    doc = BLOG.read_text()
    doc = doc.replace(
        "restartPolicy: OnFailure", "" if given is None else f"restartPolicy: {given}"
    )
    r = imp(write(tmp_path, doc), backends=("pytorchjob",))
    assert r.entry.get("restartPolicy") == entry
    original = {c for c in CODES if failures.pytorchjob_outcome(given or "OnFailure", c).restarts}
    replicas = emitted(r.entry, "pytorchjob", r.files)["spec"]["pytorchReplicaSpecs"].values()
    for replica in replicas:
        policy = replica["restartPolicy"]
        assert {c for c in CODES if failures.pytorchjob_outcome(policy, c).restarts} == original
