"""trainforge.core.quantity against apimachinery's own test cases: every case of
tests/fixtures/upstream/quantity.yaml (pkg/api/resource/quantity_test.go at v0.35.7; the file
says which tests) runs through `parse_quantity` and must give upstream's value, or upstream's
refusal. A case the model deliberately answers otherwise says why (`modelled_less`)."""

from __future__ import annotations

import json
import pathlib
from fractions import Fraction
from typing import Any

import pytest
import yaml

from trainforge.core.quantity import parse_quantity

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "upstream" / "quantity.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
MAX_ALLOWED = 2**63 - 1  # apimachinery pkg/api/resource/math.go maxAllowed (max int64)


def _value(mantissa: Any, exponent: int) -> Fraction:
    if mantissa == "maxAllowed":
        return Fraction(MAX_ALLOWED)
    return Fraction(int(mantissa)) * Fraction(10) ** exponent


@pytest.mark.parametrize(
    ("text", "mantissa", "exponent"),
    [
        pytest.param(
            r[0],
            r[1],
            r[2],
            id=r[0],
            marks=[pytest.mark.xfail(reason=r[4], strict=True)] if len(r) > 4 else [],
        )
        for r in DATA["parse"]
    ],
)
def test_parse_as_apimachinery(text: str, mantissa: Any, exponent: int) -> None:
    """TestQuantityParse: the value, and the same with a leading "-" (negated) and "+"."""
    want = _value(mantissa, exponent)
    assert parse_quantity(text) == want
    assert parse_quantity("-" + text) == -want
    assert parse_quantity("+" + text) == want


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=repr(c["input"]),
            marks=[pytest.mark.xfail(reason=c["modelled_less"], strict=True)]
            if "modelled_less" in c
            else [],
        )
        for c in DATA["invalid"]
    ],
)
def test_refuses_as_apimachinery(case: dict) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(case["input"])


@pytest.mark.parametrize(("text", "want"), [tuple(r) for r in DATA["json"]])
def test_json_as_apimachinery(text: str, want: str) -> None:
    """TestJSONWhitespace: a quantity as a JSON string or number, spaces trimmed."""
    assert parse_quantity(json.loads(text)) == parse_quantity(want)


def test_every_upstream_case_is_here() -> None:
    """The file's accounting: TestQuantityParse's 96 table rows (two of them repeated
    upstream), its 11 invalid strings and the empty one, the non-numeric one, and the 8
    TestJSONWhitespace cases."""
    assert len(DATA["parse"]) == 96
    assert len(DATA["invalid"]) == 13
    assert len(DATA["json"]) == 8
    assert all(c["modelled_less"].strip() for c in DATA["invalid"] if "modelled_less" in c)
