"""Kubernetes' `$(VAR)` expansion (trainforge/core/expansion.py) on upstream's own cases:
tests/fixtures/k8s_expand_cases.json transcribes kubernetes' expand_test.go (source in the
file), so a port that drifts from the kubelet fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainforge.core.expansion import dependency_order, env_values, expand, unresolved

CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "k8s_expand_cases.json").read_text())


def _dual(name: str) -> str | None:
    for context in CASES["dual"]:
        if name in context:
            return context[name]
    return None


@pytest.mark.parametrize(("name", "text", "expected"), CASES["cases"], ids=lambda v: str(v)[:40])
def test_upstream_expansion_cases(name: str, text: str, expected: str) -> None:
    assert expand(text, CASES["context"]) == expected, name  # TestMapping
    assert expand(text, _dual) == expected, name  # TestMappingDual


def test_upstream_map_reference_walks_the_env_in_order() -> None:
    ref = CASES["map_reference"]
    assert env_values([tuple(e) for e in ref["envs"]]) == ref["expected"]


def test_a_reference_to_a_later_variable_stays_literal_and_is_named() -> None:
    env = [("OUT_DIR", "/tmp/$(RUN_ID)"), ("RUN_ID", "exp7")]
    assert env_values(env)["OUT_DIR"] == "/tmp/$(RUN_ID)"
    (u,) = unresolved(env)
    assert (u.name, u.ref, u.where) == ("OUT_DIR", "RUN_ID", "later")
    (u,) = unresolved([("R", "$(RANK)"), ("X", "$(NOPE)$$(ESC)")], controller={"RANK"})[:1]
    assert u.where == "controller"
    assert [x.where for x in unresolved([("X", "$(NOPE)$$(ESC)")])] == ["nowhere"]


def test_dependency_order_puts_a_variable_after_those_it_refers_to() -> None:
    order = dependency_order([("OUT_DIR", "/tmp/$(RUN_ID)"), ("RUN_ID", "exp7"), ("A", "1")])
    assert [n for n, _ in order] == ["A", "RUN_ID", "OUT_DIR"]
    assert unresolved(order) == []
    # a cycle has no good order: name order, and the failing reference is named
    cyc = dependency_order([("B", "$(A)"), ("A", "$(B)")])
    assert [n for n, _ in cyc] == ["A", "B"]
    assert [(u.name, u.ref) for u in unresolved(cyc)] == [("A", "B")]
