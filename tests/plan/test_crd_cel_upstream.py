"""Upstream's own CEL test cases (tests/plan/fixtures/crd_cel_upstream_*.yaml, each suite naming
its source file and tag) run through the plan's CRD validation (`crds.crd_errors`: the schema,
then the CRD's CEL rules evaluated by `trainforge.plan.crd_cel`): each object is refused, by
the rule upstream's test names, or accepted, exactly as upstream's test expects of the API
server (a case a webhook refuses after the CRD accepts it: by the plan's written-out copy)."""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml

from trainforge.plan import crds, kueue_validate

FIXTURES = sorted((pathlib.Path(__file__).parent / "fixtures").glob("crd_cel_upstream_*.yaml"))


def _cases():
    for path in FIXTURES:
        for suite in yaml.safe_load(path.read_text("utf-8"))["suites"]:
            for case in suite["cases"]:
                yield pytest.param(suite, case, id=f"{suite['base']['kind']}: {case['it']}")


def _at(doc: dict, path: str) -> tuple[dict, str]:
    """The parent mapping of a `/`-separated path (created as needed) and the last key."""
    *parents, last = path.split("/")
    for key in parents:
        doc = doc.setdefault(key, {})
    return doc, last


def _object(suite: dict, case: dict) -> dict:
    doc = copy.deepcopy(suite["base"])
    for path in case.get("unset") or []:
        parent, key = _at(doc, path)
        del parent[key]
    for path, value in (case.get("set") or {}).items():
        parent, key = _at(doc, path)
        parent[key] = copy.deepcopy(value)
    return doc


def test_every_suite_names_its_upstream_and_has_cases():
    assert FIXTURES
    for path in FIXTURES:
        for suite in yaml.safe_load(path.read_text("utf-8"))["suites"]:
            assert " at " in suite["source"] and suite["cases"], path.name
            assert crds.crd_errors(suite["base"]) == [], (path.name, suite["base"]["kind"])


@pytest.mark.parametrize(("suite", "case"), list(_cases()))
def test_upstream_case(suite, case):
    errs = crds.crd_errors(_object(suite, case))
    assert errs is not None, "no vendored CRD serves the case's kind"
    if case["expect"] == "accept":
        assert errs == [], errs
        if "webhook" in case:  # a validating webhook's refusal (Go): the plan's copy says it
            found = kueue_validate.kueue_findings(_object(suite, case))
            assert any(case["webhook"] in f for f in found), (case["webhook"], found)
    else:
        assert case["expect"] == "reject"
        assert any(case["by"] in e for e in errs), (case["by"], errs)
