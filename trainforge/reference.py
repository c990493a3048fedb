"""The configuration reference, machine-readable: every key docs/configuration.md and
docs/jobs.md document, read from their tables.

Why: the docs are what users copy from, so they are the reference; reading the keys out of
them lets a test feed every documented key malformed values (tests/test_config_reference.py)
and fail when a documented key is not handled, or a handled key is not documented. Each table
row's first cell names its keys in backticks; a `### \\`trainforge:<key>\\`` heading gives the
keys of its table their prefix (`[]` marks a list of entries).
"""

from __future__ import annotations

import pathlib
import re

DOCS = ("docs/configuration.md", "docs/jobs.md")
_HEADING = re.compile(r"^#{2,3} `(?P<key>(?:trainforge|aws):[A-Za-z\[\]]+)`")
_JOBS_TABLE = "| Key | Default | Notes |"


def documented_keys(root: pathlib.Path) -> list[str]:
    """Every documented key as a full path, e.g. `trainforge:nodeGroups[].minSize`."""
    keys: list[str] = []
    for doc in DOCS:
        prefix = "trainforge:jobs[]." if doc.endswith("jobs.md") else ""
        in_jobs_table = False
        for line in (root / doc).read_text().splitlines():
            if doc.endswith("configuration.md"):
                m = _HEADING.match(line)
                if m:
                    prefix = m.group("key") + "."
                elif line.startswith("## "):
                    prefix = ""
            else:
                if line.startswith(_JOBS_TABLE):
                    in_jobs_table = True
                    continue
                if in_jobs_table and not line.startswith("|"):
                    in_jobs_table = False
                if not in_jobs_table:
                    continue
            if not line.startswith("| `"):
                continue
            first = line.split("|")[1]
            for token in re.findall(r"`([^`]+)`", first):
                full = token if ":" in token else prefix + token
                if full not in keys:
                    keys.append(full)
    return keys
