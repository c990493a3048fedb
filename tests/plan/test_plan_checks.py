"""The plan-check registry: a check's findings become waivable violations, its sections print,
and it sees the typed objects (contracts, resolved jobs) the program declared."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from tests.conftest import full_report
from trainforge.plan import check_types as T
from trainforge.plan import core
from trainforge.plan import registry as C

# The dev stack's jobs, in declaration order (read from the stack file, not restated).
DEV_JOBS = [
    j["name"]
    for j in yaml.safe_load((pathlib.Path(__file__).parents[2] / "Pulumi.dev.yaml").read_text())[
        "config"
    ]["trainforge:jobs"]
]


@pytest.fixture
def seen_check(monkeypatch):
    """Register a check that reports what it saw."""
    seen: list[T.PlanContext] = []

    def check(ctx: T.PlanContext) -> T.CheckResult:
        seen.append(ctx)
        jobs = [j.spec.name for j in ctx.declared.jobs]
        return T.CheckResult(
            findings=[
                T.Finding(
                    resource=f"job {name}",
                    rule="TRAINFORGE_TEST_CHECK",
                    message=f"{name} looked at",
                    fix="do the thing",
                    names=frozenset({name}),
                )
                for name in jobs
            ],
            sections=[T.Section("Test check", [f"jobs: {', '.join(jobs)}"], {"jobs": jobs})],
        )

    rules = {"TRAINFORGE_TEST_CHECK": "do the thing"}
    monkeypatch.setattr(C, "CHECKS", [*C.CHECKS, C.Check(check, rules)])
    return seen


def test_a_check_sees_the_declared_contract_and_jobs(seen_check, repo_root, tmp_path):
    result = core.plan_project(repo_root, "dev", standins=False)
    ctx = seen_check[0]
    (contract,) = ctx.declared.contracts
    assert set(contract.pools) == {"gpu-workloads", "training-workloads"}
    assert {j.spec.name for j in ctx.declared.jobs} == set(DEV_JOBS)
    resolved = {j.spec.name: j.spec for j in ctx.declared.jobs}
    assert resolved["gpt-small-fsdp"].gpus_per_worker == 1  # resolved against the pool
    failing = {v.rule for v in result.failing}
    assert failing == {"TRAINFORGE_TEST_CHECK"} and not result.clean
    (section,) = [s for s in result.to_json()["sections"] if s["title"] == "Test check"]
    assert section["data"] == {"jobs": DEV_JOBS}

    out = full_report(result, tmp_path)
    assert f"Test check:\n  jobs: {', '.join(DEV_JOBS)}" in out


def test_a_check_finding_is_waivable(seen_check, repo_root):
    waivers = [
        {"resource": name, "rule": "TRAINFORGE_TEST_CHECK", "reason": "known and accepted"}
        for name in DEV_JOBS
    ]
    result = core.plan_project(
        repo_root,
        "dev",
        standins=False,
        config_overrides={"trainforge-policy:waivers": waivers},
    )
    assert result.clean
    assert {v.waived for v in result.waived} == {"known and accepted"}
