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


_FLOOR = (
    "expected memory of at least 1Mi (or 0), such as 64Gi or 512Mi: a number without a unit "
    "is bytes"
)


@pytest.mark.parametrize(
    ("where", "value", "line"),
    [
        ("team", "256", f"trainforge:teams[0].quota.memory: got '256'; {_FLOOR} (did you mean 256Gi?)"),
        ("pool", 1024, f"trainforge:nodePools[0].limits.memory: got 1024; {_FLOOR} (did you mean 1024Gi?)"),
        ("team", "100Ki", f"trainforge:teams[0].quota.memory: got '100Ki'; {_FLOOR}"),
        ("share", "64", f"trainforge:teams[0].quota.pools.gpu.memory: got '64'; {_FLOOR} (did you mean 64Gi?)"),
    ],
)  # fmt: skip
def test_memory_below_a_mebibyte_is_refused_naming_the_key_and_the_unit_meant(
    where: str, value: object, line: str
) -> None:
    """The wave-19 review: `teams[i].quota.memory: "256"` and `nodePools[i].limits.memory:
    "1024"` were taken as bytes (valid Kubernetes syntax) and the plan then warned that the
    teams' memory was too big for the pool; no team or pool means 256 bytes."""
    from trainforge.platform.config import ConfigError, parse_config

    pool = {"name": "gpu", "instanceTypes": ["g5.12xlarge"], "limits": {"gpus": 8}}
    team = {"name": "a", "quota": {"gpus": "4"}}
    if where == "pool":
        pool["limits"]["memory"] = value
    elif where == "team":
        team["quota"]["memory"] = value
    else:
        team["quota"]["pools"] = {"gpu": {"memory": value}}
    cfg = {"cluster": "c", "nodePools": [pool], "teams": [team]}
    with pytest.raises(ConfigError) as err:
        parse_config(cfg)
    assert str(err.value).splitlines()[1:] == [f"  - {line}"]
    # 0 (none), 1Mi and a unit are fine
    for ok in ("0", "1Mi", "256Gi"):
        pool["limits"]["memory"] = ok if where == "pool" else "512Gi"
        team["quota"]["memory"] = ok if where == "team" else "512Gi"
        team["quota"]["pools"] = {"gpu": {"memory": ok}} if where == "share" else {}
        parse_config(cfg)
