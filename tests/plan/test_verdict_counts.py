"""A list the verdict counts shows what it drops: `Warnings (6):` over 3 items said nothing of
the other 3 (the review's were about the team the user had changed); violations and borrowers
said `… and N more (full report)`. Every counted list now does, through one helper; the
`Jobs not admitted` list showed 4 of its N and nothing of the rest until wave 19."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from trainforge.plan import verdict
from trainforge.plan.checks.queues import QUEUE_TITLE


def result(warnings: int = 0, findings: int = 0, borrowers: int = 0, waiting: int = 0):
    rows = [
        {"team": "llm", "job": f"j{i}", "state": "runs", "flavor": "p5",
         "borrowing": {"nvidia.com/gpu": 8}, "cohort": "all", "reclaimers": ["vision"]}
        for i in range(borrowers)
    ] + [
        {"team": "llm", "job": f"w{i}", "state": "waits", "reason": "waits for j0",
         "expectedStartSeconds": None}
        for i in range(waiting)
    ]  # fmt: skip
    sections = [
        SimpleNamespace(
            title="Program warnings (3 teams)",
            data=None,
            lines=[f"warning: team t{i}'s quota is larger than its pools" for i in range(warnings)],
        ),
        SimpleNamespace(title=QUEUE_TITLE, data=rows, lines=[]),
    ]
    failing = [
        SimpleNamespace(rule="TF_X", resource=f"r{i}", message="why", fix="fix")
        for i in range(findings)
    ]
    return SimpleNamespace(
        failing=failing,
        waived=[],
        sections=sections,
        unused_waivers=[],
        validation={"pass": 1, "fail": 0, "unchecked": 0},
        inventory=SimpleNamespace(resources=[], to_create=1),
        objects=[],
    )


def _block(lines: list[str], header: str) -> tuple[int, list[str]]:
    """The count in `header (N):` (or `header (...): N`) and the lines under it up to the next
    unindented line."""
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{header} ("))
    found = re.match(
        rf"{re.escape(header)} \((\d+)\):|{re.escape(header)} \(.*\): (\d+)$", lines[at]
    )
    count = int(found.group(1) or found.group(2))
    under = []
    for line in lines[at + 1 :]:
        if not line.startswith(" "):
            break
        under.append(line)
    return count, under


@pytest.mark.parametrize(
    ("kw", "header", "item", "shown"),
    [
        ({"warnings": 6}, "Warnings", "  Program warnings: ", 3),
        ({"warnings": 3}, "Warnings", "  Program warnings: ", 3),
        ({"findings": 7}, "Violations", "  [TF_X] ", verdict.MAX_FINDINGS),
        ({"borrowers": 5}, "Jobs that run only by borrowing", "  llm/", 3),
        ({"waiting": 7}, "Jobs not admitted", "  llm/w", 4),
        ({"waiting": 4}, "Jobs not admitted", "  llm/w", 4),
    ],
)
def test_a_counted_list_shows_its_items_and_how_many_more(kw, header, item, shown):
    lines = verdict.verdict_lines(result(**kw), stack="dev")
    count, under = _block(lines, header)
    items = [line for line in under if line.startswith(item)]
    more = [line for line in under if line.startswith("  … and ")]
    assert len(items) == shown
    if count > shown:
        assert more == [f"  … and {count - shown} more (full report)"]
    else:
        assert more == []
    assert len(items) + (count - shown if more else 0) == count
