"""The verdict's "Jobs not admitted" lines say what the report's queue section says.

A waiting job's line read "waits (waits for the team's total: ...)" and left out its expected
start, which the "Queue admission" section states (the figure a reviewer wants first).
"""

from __future__ import annotations

from types import SimpleNamespace

from trainforge.jobs.duration import duration_text
from trainforge.plan.check_types import Section
from trainforge.plan.verdict import QUEUE_TITLE, borrowing, not_admitted

WHY = (
    "waits for the team's total: 2 nvidia.com/gpu more, but namespace research's "
    "ResourceQuota (the team's total over all pools) holds 4 and 3 are in use"
)


def _result(*rows):
    return SimpleNamespace(sections=[Section(QUEUE_TITLE, [], list(rows))])


def test_a_waiting_job_has_its_reason_once_and_its_expected_start():
    rows = [
        {"team": "research", "job": "a", "state": "runs", "reason": ""},
        {"team": "research", "job": "b", "state": "waits", "reason": WHY,
         "expectedStartSeconds": 3600.0},
        {"team": "research", "job": "c", "state": "waits", "reason": WHY,
         "expectedStartSeconds": None},
        {"team": "research", "job": "e", "state": "waits", "reason": WHY,
         "expectedStartSeconds": 7200.0, "expectedStartIsBound": True},  # behind a ceiling
        {"team": "vision", "job": "d", "state": "never", "reason": "no flavor can hold it"},
    ]  # fmt: skip
    assert not_admitted(_result(*rows)) == [
        f"research/b: {WHY}; expected to start after {duration_text(3600)}",
        f"research/c: {WHY}; expected start unknown",
        f"research/e: {WHY}; expected to start within {duration_text(7200)}",
        "vision/d: never admitted (no flavor can hold it)",
    ]
    assert duration_text(3600) == "60 min"


def test_a_job_that_runs_only_by_borrowing_is_named_with_who_may_reclaim_it():
    rows = [
        {"team": "research", "job": "a", "state": "runs", "borrowing": {}},
        {"team": "nlp", "job": "big", "state": "runs", "flavor": "gpu-workloads",
         "cohort": "trainforge", "reclaimers": ["vision"],
         "borrowing": {"cpu": "4", "nvidia.com/gpu": "2"}},
        {"team": "nlp", "job": "spare", "state": "runs", "flavor": "gpu-workloads",
         "cohort": "trainforge", "reclaimers": [], "borrowing": {"cpu": "1"}},
        {"team": "nlp", "job": "w", "state": "waits", "borrowing": {"cpu": "1"}},
    ]  # fmt: skip
    assert borrowing(_result(*rows)) == [
        "nlp/big: borrows 2 GPUs in pool gpu-workloads from cohort trainforge; team vision "
        "may reclaim it (preempts it)",
        "nlp/spare: borrows 1 cores in pool gpu-workloads from cohort trainforge; nobody "
        "reclaims it (the cohort's own share)",
    ]
