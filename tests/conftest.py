"""Shared fixtures (keep small): the repository root and a mocked run of a stack file."""

import os
import pathlib
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The planner merges the user's calibration file (~/.config/trainforge) into its facts: tests
# read an empty config home, never the developer's own measurements.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="trainforge-test-config-")


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


def run_stack(stack: str, overrides: dict | None = None):
    """Run the project's __main__.py under trainforge.plan.mocks with Pulumi.<stack>.yaml."""
    from trainforge.plan.mocks import read_stack_file, run_mocked

    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    config.update(overrides or {})
    return run_mocked(ROOT / "__main__.py", config, stack=stack)
