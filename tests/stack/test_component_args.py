"""The components' arguments are generated from the stack model: every platform
and job key is an argument, with the model's type and description, and what other languages
send parses as the stack file does.

Why: hand-written TypedDicts of the stack model drifted from it (a key missing here cannot be
set from TypeScript or Go) and needed a test of their own to catch it; now the model is the
one source (trainforge/stack/component_args.py).
"""

from __future__ import annotations

import typing

from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.util import camel_case

from trainforge.platform.training_platform import TrainingPlatform, config_from_args
from trainforge.stack import component_args
from trainforge.stack.base import StackModel
from trainforge.stack.platform import EndpointConfig, NodePoolConfig, PlatformKeys
from trainforge.stack.services import ServiceKeys


def _described(model: type[StackModel], flatten: tuple[str, ...] = ()) -> dict[str, str]:
    """schema property -> the model's description (of the flattened blocks' keys too)."""
    out = {}
    for name, f in model.model_fields.items():
        if name in flatten:
            out.update(_described(EndpointConfig))
        else:
            arg = component_args.arg_name(name, f.alias or name)
            out[camel_case(arg)] = " ".join((f.description or "").split())
    return out


def test_every_platform_key_is_an_argument_with_the_models_description() -> None:
    result = Analyzer("trainforge").analyze([TrainingPlatform])
    inputs = result["component_definitions"]["TrainingPlatform"].inputs
    expected = {
        **_described(PlatformKeys, flatten=("endpoint",)),
        "jobBackend": " ".join(str(ServiceKeys.model_fields["job_backend"].description).split()),
        "jobBackends": " ".join(str(ServiceKeys.model_fields["job_backends"].description).split()),
    }
    assert {k: p.description or "" for k, p in inputs.items()} == expected
    # a nested block: its type is the model's, every key with its description
    pools = result["type_definitions"]["NodePoolArgs"].properties
    assert {k: p.description or "" for k, p in pools.items()} == _described(NodePoolConfig)


def test_what_other_languages_send_parses_like_the_stack_file() -> None:
    """Snake_case arguments (the special ones included) and the flattened endpoint keys."""
    config = config_from_args(
        {
            "cluster": "tf",
            "public_access_cidrs": ["203.0.113.0/24"],
            "deploy_from": "deployer",
            "node_pools": [
                {
                    "name": "a",
                    "instance_types": ["p4d.24xlarge"],
                    "root_volume_gib": 200,
                    "acceptance_test": {"enabled": True, "min_bus_bandwidth_g_bps": 40.0},
                }
            ],
        }
    )
    assert config.endpoint.public_access_cidrs == ("203.0.113.0/24",)
    assert config.endpoint.deploy_from == "deployer"
    pool = config.node_pools[0]
    assert (pool.root_volume_gib, pool.acceptance.min_bus_bandwidth_gbps) == (200, 40.0)


class _Limits(StackModel):
    gpus: int | None = None
    """Most GPUs."""


class _Pool(StackModel):
    """A pool."""

    name: str
    instance_types: tuple[str, ...] = ()
    limits: _Limits = _Limits()
    volume_gib: int = 100
    """Root volume (GiB)."""


def test_a_model_key_becomes_an_argument_whose_docstring_the_provider_host_reads() -> None:
    made = component_args.generate(
        _Pool, "PoolArgs", module="tests.generated_pool_args", doc="A pool.", names={}
    )
    pool, limits = made["PoolArgs"], made["_LimitsArgs"]
    assert typing.get_type_hints(pool) == {
        "name": str,
        "instance_types": list[str],
        "limits": limits,
        "volume_gib": int,
    }
    assert typing.get_type_hints(limits) == {"gpus": int}
    assert pool.__optional_keys__ == {"name", "instance_types", "limits", "volume_gib"}
    analyzer = Analyzer("t")  # reads field docstrings from the class's source
    assert analyzer.get_docstring(pool, "volume_gib") == "Root volume (GiB)."
    assert analyzer.get_docstring(limits, "gpus") == "Most GPUs."
    assert component_args.camel("root_volume_gib") == "rootVolumeGiB"


def test_every_job_key_is_an_argument_with_the_models_description() -> None:
    """TrainingJob's arguments: the job model's keys (by attribute name, or the key when it
    is one word), each described as the model describes it, plus the hand-written target."""
    from trainforge.jobs.component import TrainingJob
    from trainforge.stack.jobs import CheckpointSpec, JobModel

    result = Analyzer("trainforge").analyze([TrainingJob])
    inputs = result["component_definitions"]["TrainingJob"].inputs

    def described(model: type[StackModel], left_out: tuple[str, ...] = ()) -> dict[str, str]:
        return {
            camel_case(component_args.attribute_arg(n, f.alias or n)): " ".join(
                (f.description or "").split()
            )
            for n, f in model.model_fields.items()
            if n not in left_out
        }

    expected = described(JobModel, ("image_facts",))
    got = {k: p.description or "" for k, p in inputs.items() if k != "target"}
    assert got == expected
    checkpoint = result["type_definitions"]["JobCheckpointArgs"].properties
    assert {k: p.description or "" for k, p in checkpoint.items()} == described(CheckpointSpec)
    assert {"dir", "asyncSave", "keepLast"} <= set(checkpoint)


def test_job_arguments_parse_like_the_stack_file() -> None:
    from trainforge.jobs.component import spec_from_args

    job = spec_from_args(
        "j",
        {
            "team": "research",
            "pool": "gpu",
            "checkpoint": {"dir": "/fsx/ck/j", "keep_last": 2, "async_save": False},
            "run_policy": {"backoff_limit": 1},
            "priority": "high",
        },
        "args",
    )
    assert (job.checkpoint.directory, job.checkpoint.keep_last, job.checkpoint.async_save) == (
        "/fsx/ck/j",
        2,
        False,
    )
    assert (job.run_policy.backoff_limit, job.priority) == (1, "high")
