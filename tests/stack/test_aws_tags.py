"""`trainforge:tags` are AWS tags, judged by AWS's rules (the Resource Groups Tagging API's Tag:
1-128 character keys, values up to 256, Unicode letters, separators, numbers and _ . : / = + - @,
the `aws:` prefix reserved), not by Kubernetes' label-name rules, which refused keys AWS takes."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def errors(tags: dict) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, "dev").config)
    config["trainforge:tags"] = tags
    return check_stack(config, lookups=False).errors


@pytest.mark.parametrize(
    "tags",
    [
        {"Cost Center": "ML research"},  # a space, in the key and the value
        {"team:owner": "a@example.com"},  # ':' and '@'
        {"c++": "a=b"},  # '+' and '='
        {"Équipe": "données"},  # Unicode letters
        {"k" * 128: "v" * 256, "empty": ""},  # the longest key and value, an empty value
        {"version": 3},  # a YAML number, as text
    ],
)
def test_tags_aws_accepts_are_accepted(tags):
    assert errors(tags) == []


@pytest.mark.parametrize(
    ("tags", "key"),
    [
        ({"aws:createdBy": "me"}, "aws:createdBy"),  # the reserved prefix
        ({"AWS:x": "me"}, "AWS:x"),  # in any case
        ({"owner": "aws:me"}, "owner"),  # on values too
        ({"k#1": "v"}, "k#1"),
        ({"k": "v!"}, "k"),
        ({"k" * 129: "v"}, "k" * 129),
        ({"k": "v" * 257}, "k"),
        ({"": "v"}, ""),
    ],
)
def test_tags_aws_refuses_are_refused_in_one_line_naming_the_key(tags, key):
    (line,) = errors(tags)
    assert line.startswith(f"trainforge:tags.{key}: got ")
    assert "expected an AWS tag: letters, digits, spaces and _ . : / = + - @" in line
    assert "\n" not in line
