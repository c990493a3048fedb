"""One finding type and one list of rule ids: validation and the resource rules are registered
checks like every other, and each rule id belongs to exactly one check."""

from __future__ import annotations

from types import SimpleNamespace

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


def test_a_check_is_registered_by_its_module_alone(tmp_path, monkeypatch):
    """Adding a check touches its module (and its test): the registry finds it in checks/."""
    import sys

    from trainforge.plan import checks as package

    (tmp_path / "zz_toy_check.py").write_text(
        "from trainforge.plan.check_types import CheckResult, Finding\n"
        "RULES = {'TOY_RULE': 'fix the toy'}\n"
        "def check(ctx):\n"
        "    return CheckResult([Finding('toy', 'TOY_RULE', 'a toy finding', RULES['TOY_RULE'])])\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "trainforge.plan.checks.zz_toy_check", raising=False)
    modules = registry._check_modules()
    names = [m.__name__.rsplit(".", 1)[1] for m in modules]
    assert names[: len(registry.ORDER)] == list(registry.ORDER)  # the print order kept
    assert names[-1] == "zz_toy_check"  # not in ORDER: after the others
    assert "iam_eval" not in names  # a helper module is no check
    monkeypatch.delitem(sys.modules, "trainforge.plan.checks.zz_toy_check")


def test_the_plan_context_is_typed():
    """A check's author sees what each field is: no `Any` where a real type exists."""
    import collections.abc
    import typing

    from trainforge.core.contract import Declared
    from trainforge.plan.check_types import Finding as F
    from trainforge.plan.fleet import WorkerPlan
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory, Recorded
    from trainforge.plan.waivers import Waiver

    names = {"Declared": Declared, "K8sObject": K8sObject, "Inventory": Inventory}
    names |= {"Recorded": Recorded, "Waiver": Waiver, "WorkerPlan": WorkerPlan}
    hints = typing.get_type_hints(PlanContext, localns=names)
    assert hints["inventory"] is Inventory
    assert hints["objects"] == list[K8sObject]
    assert hints["declared"] == Declared | None
    assert hints["standin"] == collections.abc.Callable[[], Inventory] | None
    assert hints["fleet_workers"] == dict[str, WorkerPlan]
    assert [k for k, v in hints.items() if v is typing.Any] == []
    methods = typing.get_type_hints(PlanContext.resources_of, localns=names)
    assert methods["return"] == list[Recorded]
    assert typing.get_type_hints(F, localns=names)["waived_by"] == Waiver | None


def test_a_finding_on_a_recorded_resource_is_shown_by_urn_and_waived_by_name():
    res = SimpleNamespace(urn="urn:pulumi:dev::p::aws:s3/bucket:Bucket::logs", name="logs")
    f = Finding.on(res, "X_RULE", "why", "fix", "other")
    assert (f.resource, f.urn) == (res.urn, res.urn)
    assert f.names == frozenset({"logs", "other"})
    assert (f.rule, f.message, f.fix) == ("X_RULE", "why", "fix")
