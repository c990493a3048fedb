"""How durations print (trainforge/jobs/duration.py, the one module): the words form the plan,
cost and estimates use, and the compact form of `trainforge status`'s ages, which is kubectl's
AGE column (k8s.io/apimachinery/pkg/util/duration.HumanDuration)."""

from __future__ import annotations

import pytest

from trainforge.jobs.duration import age_text, duration_text

MIN, HOUR, DAY, YEAR = 60, 3600, 86400, 365 * 86400


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # seconds below 2 minutes; a second of clock skew reads as now, more as <invalid>
        (-2.5, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (59.9, "59s"),
        (119, "119s"),
        # minutes and seconds below 10 minutes, then minutes below 3 hours
        (2 * MIN, "2m"),
        (4 * MIN + 30, "4m30s"),
        (10 * MIN - 1, "9m59s"),
        (10 * MIN + 59, "10m"),
        (42 * MIN, "42m"),
        (3 * HOUR - 1, "179m"),
        # hours and minutes below 8 hours, then hours below 2 days
        (3 * HOUR, "3h"),
        (7 * HOUR + 5 * MIN + 59, "7h5m"),
        (8 * HOUR - 1, "7h59m"),
        (9 * HOUR + 57 * MIN, "9h"),
        (2 * DAY - 1, "47h"),
        # days and hours below 8 days, then days below 2 years
        (2 * DAY, "2d"),
        (3 * DAY + 4 * HOUR, "3d4h"),
        (8 * DAY - 1, "7d23h"),
        (8 * DAY, "8d"),
        (2 * YEAR - 1, "729d"),
        # years and days below 8 years, then years
        (2 * YEAR + 10 * DAY, "2y10d"),
        (3 * YEAR, "3y"),  # a whole year: no "0d" (HumanDuration's dy == 0)
        (8 * YEAR, "8y"),
    ],
)
def test_the_compact_form_is_kubectls_age(seconds, text):
    assert age_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (45, "45 s"),
        (119, "119 s"),
        (120, "2 min"),
        (2 * HOUR - 31, "119 min"),
        (2 * HOUR, "2.0 h"),
        (9 * HOUR + 57 * MIN, "9.9 h"),
        (3 * DAY - 1, "72.0 h"),
        (3 * DAY, "3.0 days"),
        (1000 * DAY, "1,000.0 days"),
    ],
)
def test_the_words_form_of_the_plan(seconds, text):
    assert duration_text(seconds) == text
