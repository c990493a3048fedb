"""The jobs tests' project setups: a copy of the program with a dev stack of the test's own
jobs and scripts, and `trainforge run-local --stack dev` of it in this process."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dev_project(tmp_path_factory) -> Callable[..., Path]:
    """A project folder as a function of (NAME, JOBS, CODE, **CONFIG): the program, and
    Pulumi.dev.yaml as committed with its trainforge:jobs replaced by JOBS and CONFIG's
    `trainforge:` keys set; CODE's {file: text} under code/ (helpers.script_job's jobs)."""

    def make(name: str, jobs: list[dict[str, Any]], code: dict[str, str], **config: Any) -> Path:
        root = tmp_path_factory.mktemp(name)
        for file in ("Pulumi.yaml", "__main__.py"):
            shutil.copy(ROOT / file, root / file)
        stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
        stack["config"].update({f"trainforge:{k}": v for k, v in config.items()})
        stack["config"]["trainforge:jobs"] = jobs
        (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
        (root / "code").mkdir()
        for file, text in code.items():
            (root / "code" / file).write_text(text)
        return root

    return make


@pytest.fixture
def run_local(trainforge_here) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`trainforge run-local --stack dev ARGS` from PROJECT, as a function of (PROJECT, *ARGS),
    in this process (tests/conftest.py's trainforge_here): the subject is what it starts and
    says, not its own process."""

    def run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return trainforge_here(project, "run-local", "--stack", "dev", *args)

    return run
