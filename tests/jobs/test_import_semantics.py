"""`trainforge import` keeps, or names, what the original's runtime, restarts and failure
policy did (the rev20 Kubeflow user's review: tests/fixtures/import/review/trainjob-*.yaml,
indexed-ignore-*.yaml). Both sides are read with core/failures.py, the one model of upstream's
rules; the upstream facts are cited where they are kept (core/failures.py,
jobs/import_read.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.jobs.test_import_restarts import imp
from trainforge.core import failures

REVIEW = Path(__file__).resolve().parents[1] / "fixtures" / "import" / "review"
NO_STATUS = REVIEW / "indexed-ignore-no-status.yaml"
WITH_STATUS = REVIEW / "indexed-ignore-status.yaml"
DISRUPTION_CLAUSE = "a disruption (preemption, eviction, a lost node) no longer uses a retry"


def _doc(path: Path, kind: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind)


def _restart_line(changes: list[str]) -> str:
    return next(c for c in changes if c.startswith("spec.template.spec.restartPolicy"))


def test_an_ignore_rule_without_status_matches_a_disruption_as_the_api_server_defaults_it():
    """The API server stores an onPodConditions pattern without status as status True
    (SetDefaults_Job), so the Job controller ignores a preempted pod's failure."""
    spec = _doc(NO_STATUS, "Job")["spec"]
    assert "status" not in spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]
    lost = failures.failed_pod("trainer", failures.TERMINATED, disrupted=True)
    assert failures.match_pod_failure_policy(spec["podFailurePolicy"], lost) == (False, "Ignore")
    assert not failures.job_outcome(spec, lost).counted
    # a pattern that asks another status still does not match True
    other = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": failures.DISRUPTION_TARGET, "status": "False"}]}]}  # fmt: skip
    assert failures.match_pod_failure_policy(other, lost) == (True, None)


def test_the_import_of_an_ignore_rule_without_status_says_what_the_one_with_status_says():
    """rev/ij.yaml (no status) was said to lose its disruption retry; ij_status.yaml was not.
    Both Jobs are the same Job once the API server has defaulted them."""
    lines = [_restart_line(imp(p, ("indexed-job",)).changes) for p in (NO_STATUS, WITH_STATUS)]
    assert lines[0] == lines[1]
    assert DISRUPTION_CLAUSE not in lines[0]
