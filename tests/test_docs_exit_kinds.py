"""Every exit kind is where the docs send you to read an exit code (review, wave 20:
troubleshooting.md routed code 1-4 to reasons that map 2 to config_error and 3 to oom, and
reliability.md's failure table had no `user_exit`, so a `sys.exit(3)` of your own code read as
an out-of-memory). The kinds come from the one model, trainforge/training/exits.py (REASONS and
USER_EXIT); a kind missing from either place fails here."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from trainforge.core import failures
from trainforge.training import exits

KINDS = {name for name in exits.REASONS if name != exits.SUCCESS.name} | {exits.USER_EXIT}


def _section(doc: str, heading: str) -> str:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    body = f"\n{text}".split(f"\n{heading}\n", 1)[1]
    return re.split(r"\n#{1,3} ", body, maxsplit=1)[0]


def test_reliability_s_failure_table_has_a_row_for_every_exit_kind():
    table = _section("reliability.md", "# Reliability: failures at scale")
    rows = [r.split(" | ") for r in table.splitlines() if r.startswith("| ") and "---" not in r]
    assert rows[0][3] == "exit (reason, code)", rows[0]
    named = {m for row in rows[1:] for m in re.findall(r"`([a-z_]+)` \d|`([a-z_]+)` n", row[3])}
    named = {a or b for a, b in named}
    assert named >= KINDS, sorted(KINDS - named)
    (own,) = [row for row in rows if f"`{exits.USER_EXIT}` n" in row[3]]
    # what the job does with your code's n: the operator's reading of the code, as for any
    assert failures.operator_retries(128) and not failures.operator_retries(127)
    assert "**stops** for 1-127, restarts for 128-255" in own[4]


def test_troubleshooting_names_every_kind_that_stops_a_job():
    stopped = " ".join(_section("troubleshooting.md", "## A job that stopped itself").split())
    permanent = {n for n in KINDS if n == exits.USER_EXIT or exits.REASONS[n].code < 128}
    missing = [n for n in sorted(permanent) if f"`{n}`" not in stopped]
    assert not missing, missing
    assert "trainforge exit: user_exit code=3" in stopped  # the line your sys.exit(3) prints
    symptoms = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    (row,) = [r for r in symptoms.splitlines() if r.startswith("| Job `Failed` after `exit:")]
    assert "code=1-127" in row and f"`{exits.USER_EXIT}`" in row, row


def test_the_user_exit_line_the_docs_quote_is_the_wrapper_s():
    """troubleshooting.md quotes the line a `sys.exit(3)` prints; it is the wrapper's."""
    from trainforge.training import usercode

    reason = usercode.own_exit(3)
    line = exits.exit_line(reason, rank=None, step=None, detail=reason.what)
    stopped = " ".join(_section("troubleshooting.md", "## A job that stopped itself").split())
    quoted = re.search(r"`(trainforge exit: user_exit code=3: [^`]*?)\[", stopped)
    assert quoted and line.startswith(quoted[1]), (line, quoted)
