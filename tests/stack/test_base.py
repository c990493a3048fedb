"""The stack model's base: one error line per problem, did-you-mean, Pulumi's string values."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field, field_validator

from trainforge.stack.base import StackError, StackModel, one_of, problem, suggest, validate


class Inner(StackModel):
    max_nodes: int = Field(4, ge=1, description="the most nodes")
    capacity_type: Literal["on-demand", "spot"] = "on-demand"


class Outer(StackModel):
    name: str = Field(description="a name")
    enabled: bool = True
    pools: tuple[Inner, ...] = ()
    extra: Inner | None = None

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not v.islower():
            raise ValueError("a lowercase name")
        return v


def test_pulumi_strings_are_accepted_as_pulumi_gives_them() -> None:
    errors: list[str] = []
    out = validate(
        Outer, {"name": "a", "enabled": "false", "pools": [{"maxNodes": "3"}]}, "t", errors
    )
    assert errors == []
    assert out is not None and out.enabled is False and out.pools[0].max_nodes == 3


def test_every_problem_in_one_run_with_paths_and_suggestions() -> None:
    errors: list[str] = []
    raw = {
        "name": "Bad",
        "enabld": True,
        "pools": [{"maxNodes": 0}, {"capacityType": "reserved", "maxNode": 2}],
        "extra": {"maxNodes": "x"},
    }
    assert validate(Outer, raw, "trainforge:", errors) is None
    assert errors == [
        "trainforge:name: got 'Bad'; expected a lowercase name",
        "trainforge:pools[0].maxNodes: got 0; expected a value >= 1",
        "trainforge:pools[1].capacityType: got 'reserved'; expected one of 'on-demand', 'spot'",
        "trainforge:pools[1].maxNode: unknown key (did you mean 'maxNodes'?); "
        "known keys: capacityType, maxNodes",
        "trainforge:extra.maxNodes: got 'x'; expected an integer",
        "trainforge:enabld: unknown key (did you mean 'enabled'?); "
        "known keys: enabled, extra, name, pools",
    ]


def test_missing_key_says_what_it_is() -> None:
    errors: list[str] = []
    validate(Outer, {}, "trainforge:", errors)
    assert errors == ["trainforge:name: missing; expected a name"]


def test_helpers() -> None:
    assert suggest("gpu-pol", ["gpu-pool", "cpu"]) == " (did you mean 'gpu-pool'?)"
    assert suggest("zzz", ["gpu-pool"]) == ""
    assert one_of("p5-nowhere", ["p5", "cpu"], "node pools") == (
        "one of the node pools: cpu, p5 (did you mean 'p5'?)"
    )
    assert (
        problem("trainforge:jobs[1].pool", "x", "y")
        == "trainforge:jobs[1].pool: got 'x'; expected y"
    )
    with pytest.raises(StackError, match=r"2 problem\(s\)"):
        raise StackError(["a", "b"])


def test_models_are_frozen_and_built_by_attribute_name() -> None:
    inner = Inner(max_nodes=2)
    with pytest.raises(ValueError):
        inner.max_nodes = 3  # type: ignore[misc]
    assert Inner.model_validate({"maxNodes": 2}) == inner
