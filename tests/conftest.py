"""Shared fixtures (keep small): the repository root and a mocked run of a stack file."""

import os
import pathlib
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The planner merges the user's calibration file (~/.config/trainforge) into its facts: tests
# read an empty config home, never the developer's own measurements.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="trainforge-test-config-")


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


_SHIPPED_PLANS: dict = {}


def shipped_plan(stack: str):
    """`plan_project(ROOT, stack, standins=False)` of a shipped stack file as committed,
    planned once per test run: about twenty test modules read the same dev and prod plans,
    and each plan costs ~10-20 s on the 2-core machine. The result is shared: read it, never
    change it (a test that needs another config plans its own copy)."""
    if stack not in _SHIPPED_PLANS:
        from trainforge.plan.core import plan_project

        _SHIPPED_PLANS[stack] = plan_project(ROOT, stack, standins=False, echo_warnings=False)
    return _SHIPPED_PLANS[stack]


def run_stack(stack: str, overrides: dict | None = None):
    """Run the project's __main__.py under trainforge.plan.mocks with Pulumi.<stack>.yaml."""
    from trainforge.plan.mocks import read_stack_file, run_mocked

    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    config.update(overrides or {})
    return run_mocked(ROOT / "__main__.py", config, stack=stack)


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Caches whose answer depends on what a test may change are emptied before each test,
    so no result depends on which test ran first: instance-type facts come from whichever
    Pulumi mocks are active. Kept across tests (pure functions of files that never change
    during a run): moto's instance catalog, the Kubernetes schemas, botocore's regions, the
    IAM rehearsal's recorded S3 calls (the one test that patches the runtime's S3 code
    empties that cache itself)."""
    facts = sys.modules.get("trainforge.platform.instance_types")  # never imported for this
    if facts is not None:
        facts.instance_type_facts.cache_clear()
        facts._offered.cache_clear()
    yield
