"""bench/plan.py --ref: the "before" of a side-by-side plan timing is a commit's own tree."""

import subprocess

import pytest

from tests.conftest import ROOT, load_script


def _bench():
    return load_script("bench/plan.py", "bench_plan")


def test_export_ref_is_the_commits_tree_byte_for_byte(tmp_path):
    bench = _bench()
    dest = bench.export_ref(ROOT, "HEAD", tmp_path / "ref")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    exported = sorted(
        str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink()
    )
    assert exported == sorted(listed)
    committed = subprocess.run(
        ["git", "-C", str(ROOT), "show", "HEAD:trainforge/plan/runner.py"],
        capture_output=True,
        check=True,
    ).stdout
    assert (dest / "trainforge/plan/runner.py").read_bytes() == committed


def test_a_ref_that_is_no_commit_is_one_line_naming_it(tmp_path):
    bench = _bench()
    with pytest.raises(SystemExit) as err:
        bench.export_ref(ROOT, "no-such-ref-0000", tmp_path / "ref")
    assert str(err.value) == (
        f"--ref: 'no-such-ref-0000' is not a commit of {ROOT} (try HEAD~1, main or a sha)"
    )
    assert not (tmp_path / "ref").exists()
