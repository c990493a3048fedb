"""The platform's keys: one declaration each, a JSON Schema editors can use, core types kept."""

from __future__ import annotations

import dataclasses
import pathlib

import jsonschema
import pytest
import yaml

from trainforge.core.contract import PoolLimits, Taint
from trainforge.stack.base import own_keys
from trainforge.stack.platform import (
    NodePoolConfig,
    PlatformKeys,
    PoolLimitsKeys,
    TaintKeys,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def platform_part(stack: str) -> dict:
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    raw = {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("trainforge:")}
    return own_keys(PlatformKeys, raw)


@pytest.mark.parametrize(("keys", "dc"), [(TaintKeys, Taint), (PoolLimitsKeys, PoolLimits)])
def test_the_core_dataclasses_and_their_rules_have_the_same_fields(keys, dc):
    """The rules live in the model, the type in core: the same names and defaults."""
    fields = {f.name: f.default for f in dataclasses.fields(dc)}
    assert {n: f.default for n, f in keys.model_fields.items() if not f.is_required()} == {
        n: d for n, d in fields.items() if d is not dataclasses.MISSING
    }
    assert set(keys.model_fields) == set(fields)


def test_pools_hold_the_core_types_jobs_read():
    pool = NodePoolConfig.model_validate(
        {
            "name": "p",
            "instanceTypes": ["c5.xlarge"],
            "taints": [{"key": "k", "value": 1}],
            "limits": {"gpus": "8"},
        }
    )
    assert type(pool.taints[0]) is Taint and pool.taints[0] == Taint("k", "NoSchedule", "1")
    assert type(pool.limits) is PoolLimits and pool.limits.gpus == 8
    # Python callers build them with attribute names and the core types
    again = NodePoolConfig(name="p", instance_types=("c5.xlarge",), taints=pool.taints)
    assert again.taints == pool.taints and again.limits == PoolLimits()
    assert pool.model_dump(mode="json")["taints"] == [
        {"key": "k", "effect": "NoSchedule", "value": "1"}
    ]


def test_every_key_says_what_it_is():
    """docs/configuration.md's tables and the editors' hover come from these descriptions."""
    schema = PlatformKeys.model_json_schema()
    missing = [
        f"{model}.{key}"
        for model, spec in [("PlatformKeys", schema), *schema["$defs"].items()]
        for key, prop in spec.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert missing == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_json_schema_takes_the_shipped_stacks_and_refuses_a_wrong_type(stack):
    schema = PlatformKeys.model_json_schema()
    raw = platform_part(stack)
    jsonschema.validate(raw, schema)
    jsonschema.validate(
        {**raw, "nodePools": [{**raw["nodePools"][0], "acceptanceTest": True}]}, schema
    )
    bad = {**raw, "nodePools": [{**raw["nodePools"][0], "rootVolumeGiB": "big"}]}
    with pytest.raises(jsonschema.ValidationError, match="rootVolumeGiB|'big'"):
        jsonschema.validate(bad, schema)
    with pytest.raises(jsonschema.ValidationError, match="natGateway"):
        jsonschema.validate({**raw, "network": {"natGateway": "single"}}, schema)
