"""`trainforge.core.labels.selects`, the one label selector reader, on Kubernetes' own cases.

Transcribed from kubernetes/apimachinery tag v0.35.7 (3e341b59, read 2026-12-01):
- pkg/apis/meta/v1/helpers_test.go `TestLabelSelectorAsSelector`, every case (nil: Nothing,
  `{}`: Everything, an Exists with values: an error, which selects nothing);
- pkg/labels/selector_test.go `TestSelectorMatches`, every case a LabelSelector can write:
  `x=y` is matchLabels, `x!=y` NotIn [y], `x` Exists, `!x` DoesNotExist; `notin=in` is
  matchLabels; `x>1`/`x<1` have no LabelSelector operator, so the case stands as the
  operator-error case of `LabelSelectorAsSelector` (`"Gt" is not a valid label selector
  operator`), which selects nothing whatever the labels;
- pkg/labels/selector.go `NewRequirement`: In/NotIn with no values is an error;
  `Requirement.Matches`: NotIn holds where the key is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainforge.core.labels import selects


def _e(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


_FOO_BAZ = {"foo": "bar", "baz": "blah"}
_AS_SELECTOR = {"matchLabels": {"foo": "bar"}, "matchExpressions": [_e("baz", "In", "qux", "norf")]}

CASES: list[tuple[str, Any, dict[str, str], bool]] = [
    # TestLabelSelectorAsSelector
    ("nil selects nothing", None, {"x": "y"}, False),
    ("nil selects nothing, not even no labels", None, {}, False),
    ("empty selects everything", {}, {"x": "y"}, True),
    ("empty selects no labels too", {}, {}, True),
    ("matchLabels foo=bar", {"matchLabels": {"foo": "bar"}}, {"foo": "bar"}, True),
    ("matchLabels foo=bar, other value", {"matchLabels": {"foo": "bar"}}, {"foo": "x"}, False),
    (
        "baz in (norf,qux)",
        {"matchExpressions": [_e("baz", "In", "qux", "norf")]},
        {"baz": "norf"},
        True,
    ),
    (
        "baz in (norf,qux), absent",
        {"matchExpressions": [_e("baz", "In", "qux", "norf")]},
        {},
        False,
    ),
    ("baz in (norf,qux),foo=bar", _AS_SELECTOR, {"foo": "bar", "baz": "qux"}, True),
    ("baz in (norf,qux),foo=bar, foo missing", _AS_SELECTOR, {"baz": "qux"}, False),
    (
        "Exists with values is an error",
        {"matchExpressions": [_e("baz", "Exists", "qux", "norf")]},
        {"baz": "qux"},
        False,
    ),
    # NewRequirement
    ("In without values is an error", {"matchExpressions": [_e("x", "In")]}, {"x": ""}, False),
    ("NotIn without values is an error", {"matchExpressions": [_e("x", "NotIn")]}, {}, False),
    # Requirement.Matches: NotIn holds for a missing key
    ("x!=y, x absent", {"matchExpressions": [_e("x", "NotIn", "y")]}, {}, True),
    # TestSelectorMatches
    ('"" matches', {}, {"x": "y"}, True),
    ("x=y", {"matchLabels": {"x": "y"}}, {"x": "y"}, True),
    ("x=y,z=w", {"matchLabels": {"x": "y", "z": "w"}}, {"x": "y", "z": "w"}, True),
    (
        "x!=y,z!=w",
        {"matchExpressions": [_e("x", "NotIn", "y"), _e("z", "NotIn", "w")]},
        {"x": "z", "z": "a"},
        True,
    ),
    ("notin=in", {"matchLabels": {"notin": "in"}}, {"notin": "in"}, True),
    ("x", {"matchExpressions": [_e("x", "Exists")]}, {"x": "z"}, True),
    ("!x", {"matchExpressions": [_e("x", "DoesNotExist")]}, {"y": "z"}, True),
    (
        "x>1 (no such LabelSelector operator)",
        {"matchExpressions": [_e("x", "Gt", "1")]},
        {"x": "2"},
        False,
    ),
    (
        "x<1 (no such LabelSelector operator)",
        {"matchExpressions": [_e("x", "Lt", "1")]},
        {"x": "0"},
        False,
    ),
    ("x=z, no labels", {"matchLabels": {"x": "z"}}, {}, False),
    ("x=y, x=z", {"matchLabels": {"x": "y"}}, {"x": "z"}, False),
    ("x=y,z=w vs x=w", {"matchLabels": {"x": "y", "z": "w"}}, {"x": "w", "z": "w"}, False),
    (
        "x!=y,z!=w vs z=w",
        {"matchExpressions": [_e("x", "NotIn", "y"), _e("z", "NotIn", "w")]},
        {"x": "z", "z": "w"},
        False,
    ),
    ("x, absent", {"matchExpressions": [_e("x", "Exists")]}, {"y": "z"}, False),
    ("!x, present", {"matchExpressions": [_e("x", "DoesNotExist")]}, {"x": "z"}, False),
    ("foo=bar", {"matchLabels": {"foo": "bar"}}, _FOO_BAZ, True),
    ("baz=blah", {"matchLabels": {"baz": "blah"}}, _FOO_BAZ, True),
    ("foo=bar,baz=blah", {"matchLabels": {"foo": "bar", "baz": "blah"}}, _FOO_BAZ, True),
    ("foo=blah", {"matchLabels": {"foo": "blah"}}, _FOO_BAZ, False),
    ("baz=bar", {"matchLabels": {"baz": "bar"}}, _FOO_BAZ, False),
    (
        "foo=bar,foobar=bar,baz=blah",
        {"matchLabels": {"foo": "bar", "foobar": "bar", "baz": "blah"}},
        _FOO_BAZ,
        False,
    ),
]


@pytest.mark.parametrize(("case", "selector", "labels", "want"), CASES, ids=[c[0] for c in CASES])
def test_selects_gives_apimachinerys_answer(
    case: str, selector: Any, labels: dict[str, str], want: bool
) -> None:
    assert selects(selector, labels) is want, case


def test_the_readers_of_a_selector_read_it_with_the_one_model() -> None:
    """packing (pod affinity, topology spread) and the admission check use `selects` itself:
    an unknown operator now selects nothing in both (packing's copy skipped it)."""
    from trainforge.jobs import packing
    from trainforge.plan.checks import admission_policies

    assert packing.selects is selects
    assert admission_policies.selects is selects
    gt = {
        "labelSelector": {"matchExpressions": [_e("app", "Gt", "1")]},
        "topologyKey": "kubernetes.io/hostname",
    }
    template = {
        "metadata": {"labels": {"app": "2"}},
        "spec": {
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [gt]}
            }
        },
    }
    assert packing.spread_limit(template) == (None, "")
