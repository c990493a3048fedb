"""trainforge.core.taints against Kubernetes' own test cases: every case of
tests/fixtures/upstream/scheduling.yaml (k8s.io/api's ToleratesTaint, component-helpers'
FindMatchingUntoleratedTaint, MatchNodeSelectorTerms and nodeaffinity tests at v0.35.7; the
file names each) runs through the model and must give upstream's answer. A case the model
deliberately answers otherwise says why (`modelled_less`). In memory, milliseconds each."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import pytest
import yaml

from trainforge.core import taints as T

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "upstream" / "scheduling.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
FILTERS = {
    "all": lambda t: True,
    "nil": lambda t: True,
    "none": lambda t: False,
    "effect=NoExecute": lambda t: t.get("effect") == "NoExecute",
}


def _cases(section: str) -> list[Any]:
    return [
        pytest.param(
            c,
            id=str(c.get("case", i)),
            marks=[pytest.mark.xfail(reason=c["modelled_less"], strict=True)]
            if "modelled_less" in c
            else [],
        )
        for i, c in enumerate(DATA[section])
    ]


@pytest.mark.parametrize("case", _cases("toleratesTaint"))
def test_tolerates_taint(case: dict) -> None:
    assert T.tolerates(case["toleration"], case["taint"]) is case["want"]


@pytest.mark.parametrize("case", _cases("findMatchingUntoleratedTaint"))
def test_find_matching_untolerated_taint(case: dict) -> None:
    found = T.untolerated(case["taints"], case["tolerations"], FILTERS[case["filter"]])
    assert (found is None) is case["wantTolerated"]


def _match(selector: Any, node: Any) -> bool:
    """MatchNodeSelectorTerms(node, selector): a nil node matches nothing."""
    if node is None:
        return False
    return T.node_selector_terms(
        (selector or {}).get("nodeSelectorTerms"), node["labels"], node["name"]
    )


@pytest.mark.parametrize("case", _cases("matchNodeSelectorTerms"))
def test_match_node_selector_terms(case: dict) -> None:
    assert _match(case["nodeSelector"], case["node"]) is case["want"]


@pytest.mark.parametrize("case", _cases("matchNodeSelectorTermsStateless"))
def test_matching_leaves_the_selector_as_it_was(case: dict) -> None:
    before = copy.deepcopy(case["nodeSelector"])
    _match(case["nodeSelector"], case["node"])
    assert case["nodeSelector"] == before


@pytest.mark.parametrize("case", _cases("nodeSelectorMatch"))
def test_node_selector_match(case: dict) -> None:
    """NewNodeSelector's parse errors (by field path), else NodeSelector.Match."""
    terms = case["nodeSelector"]["nodeSelectorTerms"]
    assert T.node_selector_errors(terms) == case.get("wantErrors", [])
    if "wantMatch" in case:
        assert _match(case["nodeSelector"], case["node"]) is case["wantMatch"]


@pytest.mark.parametrize("case", _cases("requirementsAsSelector"))
def test_requirements_as_selector(case: dict) -> None:
    """nodeSelectorRequirementsAsSelector: the errors (by field path under "root"); a term
    of no requirements selects nothing; the valid ones parse."""
    errors = [
        f"root[{i}].{f}" for i, e in enumerate(case["in"] or ()) for f in T.requirement_errors(e)
    ]
    assert errors == case.get("wantErrors", [])
    if case.get("selectsNothing"):
        term = {"matchExpressions": case["in"]}
        assert not T.node_selector_terms([term], {}) and not T.node_selector_terms(
            [term], {"a": "b"}
        )


@pytest.mark.parametrize("case", _cases("podMatchesNodeSelectorAndAffinityTerms"))
def test_pod_matches_node_selector_and_affinity_terms(case: dict) -> None:
    spec = case["pod"].get("spec") or {}
    node = case["node"]
    assert T.required_node_affinity(spec, node["labels"], node["name"]) is case["want"]


def test_every_upstream_case_is_here() -> None:
    """The file's accounting, per upstream test function."""
    counts = {k: len(v) for k, v in DATA.items()}
    assert counts == {
        "toleratesTaint": 14,
        "findMatchingUntoleratedTaint": 10,
        "matchNodeSelectorTerms": 10,
        "matchNodeSelectorTermsStateless": 9,
        "nodeSelectorMatch": 5,
        "requirementsAsSelector": 7,
        "podMatchesNodeSelectorAndAffinityTerms": 27,
    }
