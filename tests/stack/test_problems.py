"""base.Problems (a rule relating several fields reports each problem at its own key) and the
Pulumi value types Bool, Int and Float."""

from __future__ import annotations

from pydantic import field_validator, model_validator

from trainforge.stack.base import MISSING, Bool, Int, Problems, StackModel, validate


class Item(StackModel):
    name: str
    size: Int = 1


class Box(StackModel):
    on: Bool = True
    items: tuple[Item, ...] = ()
    limit: Int | None = None

    @field_validator("items")
    @classmethod
    def _unique(cls, items: tuple[Item, ...]) -> tuple[Item, ...]:
        names = [i.name for i in items]
        Problems.raise_any(
            ((i, "name"), n, "a name no other item has")
            for i, n in enumerate(names)
            if n in names[:i]
        )
        return items

    @model_validator(mode="after")
    def _limit(self) -> Box:
        if self.limit is None and len(self.items) > 2:
            raise Problems([(("limit",), MISSING, "a limit when there are more than 2 items")])
        return self


def test_each_problem_of_a_rule_is_a_line_at_its_own_key() -> None:
    errors: list[str] = []
    raw = {"items": [{"name": "a"}, {"name": "b"}, {"name": "a"}, {"name": "b"}]}
    assert validate(Box, raw, "trainforge:box", errors) is None
    assert errors == [
        "trainforge:box.items[2].name: got 'a'; expected a name no other item has",
        "trainforge:box.items[3].name: got 'b'; expected a name no other item has",
    ]
    errors.clear()
    raw = {"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    assert validate(Box, raw, "trainforge:box", errors) is None
    assert errors == [
        "trainforge:box.limit: missing; expected a limit when there are more than 2 items"
    ]


def test_pulumi_values_but_not_pydantics_lax_guesses() -> None:
    errors: list[str] = []
    box = validate(Box, {"on": "False", "items": [{"name": "a", "size": "3"}]}, "b", errors)
    assert errors == [] and box is not None and box.on is False and box.items[0].size == 3
    validate(Box, {"on": "yes", "limit": True, "items": [{"name": "a", "size": 1.5}]}, "b", errors)
    assert errors == [
        "b.on: got 'yes'; expected true or false",
        "b.items[0].size: got 1.5; expected an integer",
        "b.limit: got True; expected a number, not true or false",
    ]
