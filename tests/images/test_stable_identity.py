"""The same commit planned from two checkouts diffs as no change (docs/pr-review.md's recipe).

Why: every PR comment carries the plan's diff against the base branch, planned from another
worktree. A resource input holding the checkout's absolute path (the runtime builds'
`context.location` once did) shows as changed on every PR, and reviewers learn to skip the
diff. Each copy runs `trainforge plan` in its own process with its own tree on PYTHONPATH,
as the recipe does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# what a checkout does not hold: .gitignore's venvs and tools (`make test` made .sdk-venv, 100 MB
# and ~6,700 files, which each copy took a few seconds to write), caches, outputs
SKIP = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv", ".mutation-venv", ".sdk-venv", ".tools", "build", "runs",
    "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", "*.egg-info",
)  # fmt: skip


def _plan(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-m", "trainforge", "plan", "--stack", "dev", "--summary",
         "--no-standins", *args],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_two_checkouts_of_one_commit_diff_as_no_change(tmp_path):
    a, b = tmp_path / "checkout-a", tmp_path / "elsewhere" / "checkout-b"
    for tree in (a, b):
        shutil.copytree(ROOT, tree, ignore=SKIP, symlinks=True)
    base = _plan(a, "--out", str(tmp_path / "base-plan"))
    assert base.returncode == 0, base.stdout[-2000:] + base.stderr[-2000:]
    md = tmp_path / "diff.md"
    head = _plan(
        b, "--out", str(tmp_path / "head-plan"), "--diff", str(tmp_path / "base-plan"),
        "--diff-md", str(md),
    )  # fmt: skip
    assert head.returncode == 0, head.stdout[-2000:] + head.stderr[-2000:]
    text = md.read_text()
    assert re.search(r"Kubernetes objects: 0 added, 0 changed, 0 removed", text), text
    # the cloud resources' line is left out when nothing changed, or reads all zeros
    cloud = re.search(r"Cloud resources: (\d+) added, (\d+) changed, (\d+) removed", text)
    assert cloud is None or cloud.groups() == ("0", "0", "0"), text
    # and no input anywhere names either checkout
    for plan in ("base-plan", "head-plan"):
        inventory = (tmp_path / plan / "inventory.json").read_text()
        assert str(a) not in inventory and str(b) not in inventory
