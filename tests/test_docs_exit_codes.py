"""Every exit reason the docs name with its code (`hang` 201, `exit 205 (user_retryable)`,
`peer_lost code=202`) is the code trainforge/training/exits.py gives it: the tables of
docs/reliability.md and the lines of jobs.md/troubleshooting.md were pinned by nothing."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from trainforge.training.exits import REASONS

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATTERNS = (
    re.compile(r"`(?P<name>[a-z_]+)`,? (?:code |exit )?(?P<code>\d{1,3})\b"),
    re.compile(r"\bexits? (?P<code>\d{1,3}) \(`?(?P<name>[a-z_]+)`?"),
    re.compile(r"\b(?P<name>[a-z_]+) code=(?P<code>\d{1,3})\b"),
)


def test_the_docs_exit_codes_are_the_runtimes():
    named = [
        (doc.name, m["name"], int(m["code"]))
        for doc in DOCS
        for pattern in PATTERNS
        for m in pattern.finditer(doc.read_text(encoding="utf-8"))
        if m["name"] in REASONS
    ]
    assert len({name for _, name, _ in named}) >= 8  # the reliability table was read
    wrong = [(doc, name, code) for doc, name, code in named if REASONS[name].code != code]
    assert not wrong, {name: REASONS[name].code for _, name, _ in wrong}
