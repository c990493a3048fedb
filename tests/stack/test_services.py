"""The services' keys: each declared with a one-line description, and their JSON Schema
accepts the shipped stacks and refuses a wrong type in every section."""

from __future__ import annotations

import pathlib
import typing

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from trainforge.stack.base import aliases
from trainforge.stack.services import ServiceKeys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def models(root: type[BaseModel]) -> set[type[BaseModel]]:
    """Every model reachable from `root` through its fields' annotations."""
    seen: set[type[BaseModel]] = set()
    todo: list[typing.Any] = [root]
    while todo:
        ann = todo.pop()
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if ann not in seen:
                seen.add(ann)
                todo += [f.annotation for f in ann.model_fields.values()]
        else:
            todo += list(typing.get_args(ann))
    return seen


def test_every_key_has_a_one_line_description():
    found = models(ServiceKeys)
    assert len(found) > 15
    for model in found:
        for name, field in model.model_fields.items():
            text = field.description or ""
            assert text.strip() and "\n" not in text, f"{model.__name__}.{name}"


def services(stack: str) -> dict:
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    keys = {k.removeprefix("trainforge:"): v for k, v in config.items()}
    return {k: v for k, v in keys.items() if k in aliases(ServiceKeys)}


SCHEMA = ServiceKeys.model_json_schema(by_alias=True)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_schema_accepts_the_shipped_stacks(stack):
    assert {"teams", "fsx"} <= set(services(stack))
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(services(stack))) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"fsx": {"storageCapacityGiB": "lots"}},
        {"checkpoints": {"forceDestroy": 3}},
        {"trainingOperator": {"chart": {"repository": "oci://r/c", "version": 1.9}}},
        {"devicePlugins": {"nvidia": "on"}},
        {"monitoring": {"receivers": [{"type": "email"}]}},
        {"mlflow": {"storageSize": [50]}},
        {"kueue": {"podsReadyTimeout": True}},
        {"teams": [{"name": "a", "quota": {"pools": {"gpu": {"gpus": "many"}}}}]},
        {"teams": [{"name": "a", "uid": 7}]},
        {"jobBackends": ["tfjob"]},
    ],
)
def test_the_schema_refuses_a_wrong_type_in_each_section(bad):
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(bad)), bad


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30), ("15m", 900), ("2h", 7200), ("32d", 32 * 86400), ("1w", 604800)]
    + [("768h", 32 * 86400), ("1y", 365 * 86400)],
)
def test_one_reading_of_a_prometheus_duration_for_the_alerts_and_the_retention(text, seconds):
    """The alert thresholds (platform/alerts) and the OpenCost retention floor read it here."""
    from trainforge.stack.services import prometheus_seconds

    assert prometheus_seconds(text) == seconds
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        prometheus_seconds(text + " ")
