"""One run lists every problem: the rules across fields (model validators, which pydantic skips
after a field error) also run on an entry with a wrong field, on the fields that parsed, and a
rule that needs the wrong field is skipped rather than judged on a value nobody wrote
(stack/base.py StackModel._rules_on_what_parsed; wave 15 newcomer review: a 13th problem and
a job's hangTimeout appeared only on a second run)."""

from __future__ import annotations

import copy
import pathlib

import pytest
from pydantic import model_validator

from trainforge.jobs.spec import parse_jobs
from trainforge.platform.services_config import parse_services_config
from trainforge.platform.stack_check import check_stack
from trainforge.stack.base import Int, Problems, StackModel, validate
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Pair(StackModel):
    """A rule across two fields, as the stack's sections write one."""

    low: Int = 0
    high: Int = 10
    label: str = "x"

    @model_validator(mode="after")
    def _ordered(self) -> Pair:
        if self.low > self.high:
            raise Problems([(("low",), self.low, f"at most high ({self.high})")])
        return self


def lines(raw: dict) -> list[str]:
    errors: list[str] = []
    validate(Pair, raw, "trainforge:pair", errors)
    return sorted(errors)


def test_a_rule_across_fields_runs_beside_another_field_s_error():
    assert lines({"low": 20, "high": 5, "label": 3}) == [
        "trainforge:pair.label: got 3; expected a string",
        "trainforge:pair.low: got 20; expected at most high (5)",
    ]


def test_a_rule_across_fields_runs_beside_an_unknown_key():
    found = lines({"low": 20, "high": 5, "lable": "y"})
    assert found[1] == "trainforge:pair.low: got 20; expected at most high (5)"
    assert found[0].startswith("trainforge:pair.lable: unknown key (did you mean 'label'?)")
    assert len(found) == 2


def test_a_rule_that_needs_the_wrong_field_is_skipped_not_judged_on_its_default():
    # high's default (10) would make low 20 wrong; high was written, wrongly: no guess
    assert lines({"low": 20, "high": "many"}) == [
        "trainforge:pair.high: got 'many'; expected an integer"
    ]


def services(raw: dict) -> list[str]:
    errors: list[str] = []
    parse_services_config(raw, errors)
    return sorted(errors)


def test_the_review_s_13th_problem_comes_with_the_other_monitoring_problems():
    """retention is judged (OpenCost on: a month) though storageSize is wrong too."""
    assert services({"monitoring": {"retention": "7d", "storageSize": "50GB"}}) == [
        "trainforge:monitoring.retention: got '7d'; expected at least 32d while "
        "opencost.enabled is true (a team's month-to-date spend sums the whole month's "
        "samples), or opencost.enabled: false",
        "trainforge:monitoring.storageSize: got '50GB'; expected a Kubernetes quantity such "
        "as 8, 500m, 64Gi or 1.5",
    ]


def test_retention_is_not_judged_while_opencost_itself_is_wrong():
    found = services({"monitoring": {"retention": "7d", "opencost": {"enabled": "maybe"}}})
    assert found == ["trainforge:monitoring.opencost.enabled: got 'maybe'; expected true or false"]


def test_a_job_s_field_error_and_its_cross_field_rule_in_one_run():
    """The review's job: restartPolicy wrong, and hangTimeout 30 below what a start needs."""
    job = {"name": "j5", "team": "t", "pool": "p", "workers": 2}
    with pytest.raises(Exception) as e:  # noqa: PT011 - JobsError, its lines checked below
        parse_jobs([{**job, "restartPolicy": "Always", "hangTimeout": 30}])
    found = sorted(e.value.errors)
    assert [f.split(":")[1].split(" ")[0] for f in found] == [
        "jobs[0].hangTimeout",
        "jobs[0].restartPolicy",
    ], found


def job_lines(**keys: object) -> list[str]:
    job = {"name": "j5", "team": "t", "pool": "p", "workers": 2, **keys}
    with pytest.raises(Exception) as e:  # noqa: PT011 - JobsError, its lines returned
        parse_jobs([job])
    return sorted(e.value.errors)


def test_a_job_s_other_checks_run_when_one_of_its_checks_needs_a_wrong_key():
    """The job's rule checks many things; the name-length check reads workers, the hang check
    does not: hangTimeout is still judged while workers is wrong."""
    found = job_lines(workers="two", hangTimeout=30)
    assert [f.split(":")[1].split(" ")[0] for f in found] == [
        "jobs[0].hangTimeout",
        "jobs[0].workers",
    ], found


def test_nothing_is_said_again_at_a_wrong_key_nor_of_a_value_not_read():
    """expectedStepSeconds without modelSize.steps is refused whatever its value: with the
    value itself wrong, its own line stands alone (no `got UNPARSED`)."""
    found = job_lines(entrypoint={"script": "train.py"}, expectedStepSeconds="slow")
    assert len(found) == 1 and "expectedStepSeconds: got 'slow'" in found[0], found
    assert not any("UNPARSED" in f for f in found)


def test_a_rule_across_pools_beside_a_platform_field_error_is_one_line():
    """The partial platform entry and the valid pools (platform/config._valid_parts) both
    judge unique names: one line."""
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge:network"]["natGateways"] = "double"
    config["trainforge:nodePools"][1]["name"] = config["trainforge:nodePools"][0]["name"]
    errors = check_stack(config).errors
    assert errors[:2] == [
        "trainforge:network.natGateways: got 'double'; expected one of 'single', 'onePerAz'",
        "trainforge:nodePools[1].name: got 'gpu-workloads'; expected a name not used by another "
        "node group or node pool",
    ]
    assert len([e for e in errors if e.startswith("trainforge:nodePools")]) == 1, errors


def test_a_patterned_key_given_a_number_is_told_what_is_valid():
    """`monitoring.alerts.stalledAfter: 15` said only "expected a string" (review 4): a key
    with a pattern (`base.matching`) names the values it takes whatever the value's type."""
    from trainforge.stack.services import AlertsConfig

    for bad in (15, 1.5, "15"):
        errors: list[str] = []
        validate(AlertsConfig, {"stalledAfter": bad}, "trainforge:monitoring.alerts", errors)
        assert errors == [
            f"trainforge:monitoring.alerts.stalledAfter: got {bad!r}; expected a Prometheus "
            "duration such as 30s, 15m or 2h"
        ], errors
