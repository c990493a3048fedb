"""The dev stack's jobs and its platform contract under the preview mocks, as the image tests
(test_piece_fixes.py, test_torchless.py) check a job against them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pulumi
import pytest
import yaml

from trainforge.core.contract import PlatformContract
from trainforge.core.errors import JobConfigError
from trainforge.jobs.declare import check_jobs
from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.config import parse_config
from trainforge.platform.published import contract_from_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dev_jobs() -> list[dict]:
    """Pulumi.dev.yaml's trainforge:jobs, as committed (a test appends its own to a copy)."""
    return yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]["trainforge:jobs"]


@pytest.fixture
def platform(monkeypatch) -> PlatformContract:
    """The contract the dev stack publishes to its jobs, read at preview from this checkout
    (a job's scripts are relative to the project directory)."""
    monkeypatch.chdir(ROOT)
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    config = {
        k.removeprefix("trainforge:"): v for k, v in raw.items() if k.startswith("trainforge:")
    }
    return contract_from_config(parse_config(config))


@pytest.fixture
def refusal(platform) -> Callable[[dict], str]:
    """The one line check_jobs refuses `job` with on the dev platform (it must refuse it)."""

    def refused(job: dict) -> str:
        with pytest.raises(JobConfigError) as err:
            check_jobs(platform, [job])
        (line,) = err.value.errors
        return line

    return refused
