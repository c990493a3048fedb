"""Fixtures for the plan tests: temporary Pulumi projects running the programs in plan_programs."""

from __future__ import annotations

import pathlib
import shutil
import textwrap

import pytest

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def make_project(tmp_path):
    """Write a project folder whose __main__.py runs plan_programs.program(flaws)."""

    def make(flaws=(), config=None, stack="test", body=None, name="proj"):
        root = tmp_path / name
        root.mkdir()
        (root / "Pulumi.yaml").write_text("name: trainforge\nruntime: python\n")
        main = (
            body
            or f"""
            import sys
            sys.path.insert(0, {str(HERE)!r})
            import plan_programs
            plan_programs.program({set(flaws)!r} or set())()
        """
        )
        (root / "__main__.py").write_text(textwrap.dedent(main))
        import yaml

        (root / f"Pulumi.{stack}.yaml").write_text(
            yaml.safe_dump({"config": config or {"trainforge:cluster": "tf"}})
        )
        return root

    return make


@pytest.fixture(scope="session")
def prod_standin(repo_root):
    """The prod stack's stand-in run (every IAM document built), recorded once for the
    session: the IAM reader's and the IAM rehearsal's cases read it, and edit copies only."""
    from trainforge.plan.core import standin_pass

    return standin_pass(repo_root, "prod")()


def copy_project(
    tmp_path: pathlib.Path, name: str, change=None, stack: str = "prod"
) -> pathlib.Path:
    """A copy of this repository's project (Pulumi.yaml, __main__.py, examples/) in
    tmp_path/name with its `stack` file, `change(config)` applied first: the head side of a
    `plan --base` review. One helper for every review test, so the sides they compare are
    built the same way."""
    root = tmp_path / name
    root.mkdir()
    repo = HERE.parents[1]
    for f in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(repo / f, root / f)
    shutil.copytree(repo / "examples", root / "examples")
    import yaml

    data = yaml.safe_load((repo / f"Pulumi.{stack}.yaml").read_text())
    if change:
        change(data["config"])
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(data))
    return root


@pytest.fixture(scope="session")
def project_copy():
    """`copy_project` (a fixture: tests/plan is no package, so its test modules cannot
    import a helper module of it by name, and a second conftest-style module would clash
    with same-named test helpers in other test folders)."""
    return copy_project
