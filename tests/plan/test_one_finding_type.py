"""One finding type and one list of rule ids: validation and the resource rules are registered
checks like every other, and each rule id belongs to exactly one check."""

from __future__ import annotations

import plan_programs
import pytest

from trainforge.plan import core, registry
from trainforge.plan.check_types import CheckResult, Finding, PlanContext
from trainforge.plan.checks import rules, validate
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.runner import run_program


def test_validation_and_the_rules_are_registered_checks():
    runs = [c.run for c in registry.CHECKS]
    assert validate.check in runs and rules.check in runs
    ids = registry.check_rule_ids()
    assert {validate.SCHEMA_RULE, "CKV_AWS_7", "CKV_AWS_145"} <= set(ids)
    assert core.known_rule_ids() == set(ids)  # no second list beside the registry's


def test_a_rule_id_two_checks_declare_is_refused():
    one = registry.Check(lambda ctx: CheckResult(), {"X_RULE": "fix a"})
    other = registry.Check(lambda ctx: CheckResult(), {"X_RULE": "fix b"})
    with pytest.raises(ValueError, match="X_RULE declared by two plan checks"):
        registry.check_rule_ids([one, other])


def test_every_producer_yields_the_one_finding_type():
    result = core.plan_program(plan_programs.program({"schema", "kms-rotation", "unprotected"}))
    by_rule = {v.rule: v for v in result.violations}
    assert {"K8S_SCHEMA", "CKV_AWS_7", "TF_DATA_UNPROTECTED"} <= set(by_rule)
    assert all(type(v) is Finding for v in result.violations)
    schema = by_rule["K8S_SCHEMA"]
    assert schema.resource == "team-a/ConfigMap/bad (bad-cm)"
    assert schema.fix == validate.RULES["K8S_SCHEMA"]


def test_the_rules_check_runs_on_a_context_alone():
    """A check needs its module and a PlanContext, nothing of the engine."""
    inv = run_program(plan_programs.program({"kms-rotation"}), stack="test", config={})
    ctx = PlanContext(inventory=inv, objects=k8s_objects(inv))
    (f,) = rules.check(ctx).findings
    assert (f.rule, f.resource) == ("CKV_AWS_7", "aws:kms/key:Key::key")
    assert f.names == frozenset({"key"}) and f.urn.endswith("::key")
