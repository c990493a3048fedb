"""The verdict's "Jobs not admitted" lines say what the report's queue section says.

A waiting job's line read "waits (waits for the team's total: ...)" and left out its expected
start, which the "Queue admission" section states (the figure a reviewer wants first).
"""

from __future__ import annotations

from types import SimpleNamespace

from trainforge.plan.check_types import Section
from trainforge.plan.checks.queues import hours
from trainforge.plan.verdict import QUEUE_TITLE, not_admitted

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
        {"team": "vision", "job": "d", "state": "never", "reason": "no flavor can hold it"},
    ]  # fmt: skip
    assert not_admitted(_result(*rows)) == [
        f"research/b: {WHY}; expected to start after {hours(3600)}",
        f"research/c: {WHY}; expected start unknown",
        "vision/d: never admitted (no flavor can hold it)",
    ]
    assert hours(3600) == "1 h"
