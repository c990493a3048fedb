"""One quantity grammar: a stack key's quantity is what apimachinery's ParseQuantity accepts
(core/quantity.parse_quantity, proven on upstream's cases in tests/test_upstream_quantity.py),
not negative; the schema's pattern for editors is core's, and equals the stack's acceptance on
every case of tests/fixtures/upstream/quantity.yaml (each parse row with "", "+" and "-")."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from trainforge.core.quantity import NONNEGATIVE_PATTERN, PATTERN, parse_quantity
from trainforge.stack.base import Quantity

FIXTURE = pathlib.Path(__file__).parents[1] / "fixtures" / "upstream" / "quantity.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
INPUTS = sorted(
    {s for r in DATA["parse"] for s in (r[0], "+" + r[0], "-" + r[0])}
    | {c["input"] for c in DATA["invalid"]}
    | {yaml.safe_load(r[0]) if r[0].startswith('"') else r[0] for r in DATA["json"]}
)
STACK = TypeAdapter(Quantity)


def _parses(text: str) -> bool:
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def _stack_accepts(value: object) -> bool:
    try:
        STACK.validate_python(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("text", INPUTS)
def test_the_pattern_is_the_parsers_grammar(text: str) -> None:
    """Spaces around the text are the JSON decoder's to trim, not the grammar's."""
    if text == text.strip():
        assert (re.fullmatch(PATTERN, text) is not None) is _parses(text)


@pytest.mark.parametrize("text", INPUTS)
def test_the_stack_accepts_what_its_schema_pattern_does(text: str) -> None:
    assert _stack_accepts(text) is (re.fullmatch(NONNEGATIVE_PATTERN, text) is not None)


@pytest.mark.parametrize("text", ["500n", "3.001n", "4u", "0.9n", "1.", ".5e3", "1E-3"])
def test_apimachinery_quantities_the_old_pattern_refused_are_accepted(text: str) -> None:
    assert _stack_accepts(text) and _parses(text)


@pytest.mark.parametrize("value", ["-1", "-0.5Gi", "1.5eMi", "8Gi\n", " 8Gi", -1, True, "1.1.M"])
def test_negative_or_malformed_quantities_are_refused(value: object) -> None:
    assert not _stack_accepts(value)


def test_numbers_are_kept_as_the_string_kubernetes_gets() -> None:
    assert STACK.validate_python(8) == "8" and STACK.validate_python(1.5) == "1.5"
    assert not _stack_accepts(float("inf"))
