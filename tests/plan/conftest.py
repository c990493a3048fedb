"""Fixtures for the plan tests: temporary Pulumi projects running the programs in plan_programs."""

from __future__ import annotations

import pathlib
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
