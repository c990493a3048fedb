"""docs/jobs.md's Modules table names files that exist (it listed a `contract.py` under
trainforge/jobs/ that lives in trainforge/core/), and the names it says they define."""

from __future__ import annotations

import re

from tests.conftest import ROOT

JOBS_MD = (ROOT / "docs" / "jobs.md").read_text(encoding="utf-8")


def _rows() -> list[tuple[str, str]]:
    table = JOBS_MD.split("## Modules", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+\.py)` \| (.*) \|$", table, re.M)


def test_every_module_the_table_names_exists():
    rows = _rows()
    assert len(rows) >= 15  # the table was found
    for name, _ in rows:
        path = ROOT / name if "/" in name else ROOT / "trainforge" / "jobs" / name
        assert path.is_file(), f"docs/jobs.md Modules: {name}: no {path.relative_to(ROOT)}"


def test_the_functions_the_table_names_are_defined_in_their_module():
    """`resolve_job`, `pod_templates`, `local_argv_for_job`, ...: each backticked snake_case
    name of a row (a function's; `volumes` is a stack key) is defined in its module."""
    for name, what in _rows():
        path = ROOT / name if "/" in name else ROOT / "trainforge" / "jobs" / name
        source = path.read_text(encoding="utf-8")
        for ident in re.findall(r"`([a-z_][a-z0-9_]+)(?:\([^`]*\))?`", what):
            if ident.startswith("__") or "_" not in ident:  # `__main__`, a key like `volumes`
                continue
            defined = re.search(rf"^(?:def|class) {ident}\b|^{ident}\b", source, re.M)
            assert defined, f"docs/jobs.md Modules: {name} says `{ident}`; not defined there"
