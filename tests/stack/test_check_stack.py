"""One run reports every area's problems: platform, pool, team, job and policy waiver together.

Before, the program parsed the platform first and the jobs only once the platform was valid,
and it never read the waivers: a user with a typo in each fixed them in three rounds.
"""

from __future__ import annotations

import copy
import pathlib
import re

import pulumi
import pytest

from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack
from trainforge.stack.jobs import JobKeys
from trainforge.stack.platform import PlatformKeys
from trainforge.stack.services import ServiceKeys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (area, the line's path, the suggestion it should carry, the area's model: its reader
# suggests keys once it validates through the model)
FIVE = [
    ("platform", "trainforge:network.natGateway", "natGateways", PlatformKeys),
    ("pool", "trainforge:nodePools[0].consolidateAftr", "consolidateAfter", PlatformKeys),
    ("team", "trainforge:teams[0].quota.gpu", "gpus", ServiceKeys),
    ("job", "trainforge:jobs[0] (gpt-350m-fsdp).wrkers", "workers", JobKeys),
    ("waiver", "trainforge-policy:waivers[0].rule", "TF_COST_JOB_CAP", None),
]


def five_typos() -> dict:
    """The prod stack with one misspelt key or name in each area."""
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:network"]["natGateway"] = "single"
    config["trainforge:nodePools"][0]["consolidateAftr"] = "5m"
    config["trainforge:teams"][0]["quota"]["gpu"] = "4"
    config["trainforge:jobs"][0]["wrkers"] = 2
    config["trainforge-policy:waivers"] = [
        {"resource": "gpt-350m-fsdp", "rule": "TF_COST_JOB_CAPP", "reason": "approved"}
    ]
    return config


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def line_for(errors: list[str], path: str) -> str:
    found = [e for e in errors if e.startswith(path + ":")]
    assert len(found) == 1, f"no single line for {path}: {errors}"
    return found[0]


def test_the_shipped_stacks_have_no_problem():
    """Each stack checked as its program checks it: under its own config (its region's
    offerings), not whatever config an earlier test in the process left set."""
    for stack in ("dev", "prod"):
        config = read_stack(ROOT, stack).config
        run = run_mocked(
            lambda c=config: check_stack(c, known_rules=known_rule_ids(), lookups=True), config
        )
        assert run.result.errors == []


@pytest.mark.parametrize("lookups", [True, False])
def test_five_areas_five_problems_in_one_run(lookups):
    errors = check_stack(five_typos(), known_rules=known_rule_ids(), lookups=lookups).errors
    for _, path, _, _ in FIVE:
        line_for(errors, path)
    assert len(errors) == 5, errors


@pytest.mark.parametrize(
    ("area", "path", "meant"),
    [
        pytest.param(
            area,
            path,
            meant,
            marks=pytest.mark.xfail(
                model is not None and not model.model_fields,
                reason=f"the {area} reader suggests keys once it validates through "
                f"{model.__name__ if model else ''}",
                strict=True,
            ),
            id=area,
        )
        for area, path, meant, model in FIVE
    ],
)
def test_each_line_suggests_what_was_meant(area, path, meant):
    errors = check_stack(five_typos(), known_rules=known_rule_ids(), lookups=True).errors
    assert f"(did you mean {meant!r}?)" in line_for(errors, path)


def test_the_program_reports_all_five_before_any_resource():
    mocks = TrainforgeMocks(preview=True)
    config = {k: v for k, v in five_typos().items()}
    with pytest.raises(Exception) as e:  # noqa: PT011 - the engine wraps the program's RunError
        run_mocked(ROOT / "__main__.py", config, mocks=mocks, preview=True)
    text = str(e.value)
    assert re.search(r"invalid stack configuration \(5 problem\(s\)\)", text), text
    for _, path, _, _ in FIVE:
        assert path + ":" in text
    assert [r for r in mocks.resources if r.type != "pulumi:pulumi:Stack"] == []


def test_the_policy_namespace_refuses_a_key_it_does_not_declare():
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge-policy:waiver"] = []
    errors = check_stack(config).errors
    assert errors == [
        "trainforge-policy:waiver: unknown key (did you mean 'waivers'?); "
        "known keys: costCaps, waivers"
    ]


def test_checks_that_need_the_pools_facts_come_in_the_same_run():
    """An acceptance test on a CPU pool (known once instance types are looked up) and a bad
    job: before, the job's problem only showed once the acceptance test was fixed."""
    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:nodePools"][2]["acceptanceTest"] = {"dcgmLevel": 1, "nodes": 1}
    config["trainforge:jobs"][0]["workers"] = 0
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=True).errors
    assert any(e.startswith("trainforge:nodePools[2].acceptanceTest:") for e in errors), errors
    assert any(e.startswith("trainforge:jobs[0] (gpt-350m-fsdp).workers:") for e in errors), errors


def test_a_misspelt_pool_shows_with_the_platform_s_own_errors():
    """Without a contract (the platform has errors) a job's pool and team are still checked
    against the names the stack declares, so a user fixes both in one round."""
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    del config["trainforge:cluster"]
    config["trainforge:jobs"][0]["pool"] = "training-workload"
    config["trainforge:jobs"][1]["team"] = "reserch"
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=True).errors
    assert line_for(errors, "trainforge:cluster").startswith("trainforge:cluster: missing")
    assert line_for(errors, "trainforge:jobs[0] (mnist-ddp).pool").endswith(
        "(did you mean 'training-workloads'?)"
    )
    assert line_for(errors, "trainforge:jobs[1] (gpt-small-fsdp).team").endswith(
        "(did you mean 'research'?)"
    )
    assert len(errors) == 3, errors


def test_a_null_job_entry_is_refused_naming_its_index():
    """A stray `-` in `trainforge:jobs` (a null entry) was dropped without a word: the plan was
    CLEAN without the job the user meant to declare."""
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge:jobs"].insert(1, None)
    errors = check_stack(config).errors
    assert line_for(errors, "trainforge:jobs[1]").startswith("trainforge:jobs[1]: got null"), errors
    assert len(errors) == 1, errors


def test_a_cpu_only_job_on_a_gpu_pool_is_told_the_stacks_cpu_pools():
    """The refusal names the pools that fix it, as the other refusals name the valid values
    (a newcomer's review: it said "or a CPU pool" and named none)."""
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    job = next(j for j in config["trainforge:jobs"] if j.get("pool") == "gpu-workloads")
    job["gpusPerWorker"] = 0
    errors = check_stack(config, known_rules=known_rule_ids(), lookups=True).errors
    assert len(errors) == 1 and errors[0].endswith("or a CPU pool (training-workloads)"), errors
