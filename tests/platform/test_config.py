"""Bad stack config fails before any resource is declared, naming key, value and what is valid."""

import pytest

from trainforge.plan.mocks import run_mocked
from trainforge.platform.config import ConfigError, load_config, parse_config
from trainforge.platform.training_platform import TrainingPlatform, config_from_args

BASE = {"cluster": "tf"}


def pools(*items):
    return {**BASE, "nodePools": list(items)}


@pytest.mark.parametrize(
    ("raw", "key", "value"),
    [
        ({"cluster": "9bad name"}, "trainforge:cluster", "9bad name"),
        ({}, "trainforge:cluster", "None"),
        ({**BASE, "clustr": "x"}, "trainforge:clustr", "x"),
        (
            {**BASE, "endpoint": {"publicAccessCidrs": ["0.0.0.0/0"]}},
            "endpoint.publicAccessCidrs[0]",
            "0.0.0.0/0",
        ),
        (
            {**BASE, "endpoint": {"publicAccessCidrs": ["not-a-cidr"]}},
            "endpoint.publicAccessCidrs[0]",
            "not-a-cidr",
        ),
        ({**BASE, "admins": ["bob"]}, "trainforge:admins[0]", "bob"),
        ({**BASE, "network": {"cidr": "10.0.0.0/8"}}, "network.cidr", "10.0.0.0/8"),
        ({**BASE, "network": {"availabilityZones": 1}}, "network.availabilityZones", "1"),
        ({**BASE, "network": {"natGateways": "many"}}, "network.natGateways", "many"),
        ({**BASE, "network": {"vpcId": "vpc-0abc"}}, "network.privateSubnetIds", "[]"),
        (
            {**BASE, "systemNodeGroup": {"minSize": 3, "maxSize": 2}},
            "systemNodeGroup.desiredSize",
            "3",
        ),
        (
            pools({"name": "Bad_Name", "instanceTypes": ["g5.xlarge"]}),
            "nodePools[0].name",
            "Bad_Name",
        ),
        (pools({"name": "a"}), "nodePools[0].instanceTypes", "None"),
        (
            pools({"name": "a", "instanceTypes": ["g5 xlarge"]}),
            "nodePools[0].instanceTypes[0]",
            "g5 xlarge",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge"], "capacityTypes": ["cheap"]}),
            "nodePools[0].capacityTypes[0]",
            "cheap",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge"], "consolidateAfter": "soon"}),
            "nodePools[0].consolidateAfter",
            "soon",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge"], "limits": {"memory": "lots"}}),
            "nodePools[0].limits.memory",
            "lots",
        ),
        (
            pools(
                {
                    "name": "a",
                    "instanceTypes": ["g5.xlarge"],
                    "taints": [{"key": "k", "effect": "Never"}],
                }
            ),
            "nodePools[0].taints[0].effect",
            "Never",
        ),
        (
            pools(
                {"name": "a", "instanceTypes": ["g5.xlarge"]},
                {"name": "a", "instanceTypes": ["c5.xlarge"]},
            ),
            "nodePools[1].name",
            "a",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge"], "efa": "yes"}),
            "nodePools[0].efa",
            "yes",
        ),
        (
            {
                **BASE,
                "nodeGroups": [
                    {
                        "name": "g",
                        "instanceTypes": ["p4d.24xlarge"],
                        "capacityType": "CAPACITY_BLOCK",
                    }
                ],
            },
            "nodeGroups[0].capacityReservationId",
            "None",
        ),
        (
            {
                **BASE,
                "nodeGroups": [
                    {"name": "g", "instanceTypes": ["p4d.24xlarge", "p5.48xlarge"], "efa": True}
                ],
            },
            "nodeGroups[0].instanceTypes",
            "p5.48xlarge",
        ),
        (
            {
                **BASE,
                "karpenter": {"enabled": False},
                "nodePools": [{"name": "a", "instanceTypes": ["c5.xlarge"]}],
            },
            "karpenter.enabled",
            "False",
        ),
    ],
)
def test_bad_config_names_key_and_value(raw, key, value):
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    msg = str(exc.value)
    assert key in msg and value in msg and "expected" in msg


def test_all_errors_reported_at_once():
    with pytest.raises(ConfigError) as exc:
        parse_config({"cluster": "1", "network": {"natGateways": "x"}, "admins": ["y"]})
    assert len(exc.value.errors) == 3


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (
            {**BASE, "nodeGroups": [{"name": "g", "instanceTypes": ["c5.xlarge"]}]},
            "trainforge:nodeGroups[0].instanceTypes",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge"], "efa": True}),
            "trainforge:nodePools[0].efa",
        ),
        (
            pools({"name": "a", "instanceTypes": ["c5.xlarge"], "gpu": True}),
            "trainforge:nodePools[0].instanceTypes",
        ),
        (
            pools({"name": "a", "instanceTypes": ["g5.xlarge", "c5.xlarge"]}),
            "trainforge:nodePools[0].instanceTypes",
        ),
        (
            pools({"name": "a", "instanceTypes": ["zz9.huge"]}),
            "trainforge:nodePools[0].instanceTypes[0]",
        ),
    ],
)
def test_instance_type_facts_checked_before_any_resource(raw, key):
    def program():
        TrainingPlatform("platform", parse_config(raw))

    with pytest.raises(Exception) as exc:
        run = run_mocked(program, raw)
        assert not run.resources
    assert key in str(exc.value)


def test_load_config_reads_stack_keys():
    def program():
        return load_config()

    run = run_mocked(
        program,
        {
            "cluster": "tf",
            "nodePools": [{"name": "a", "instanceTypes": ["c5.xlarge"]}],
            "aws:region": "eu-west-1",
        },
    )
    assert run.result.cluster == "tf"
    assert run.result.node_pools[0].instance_types == ("c5.xlarge",)


def test_component_args_use_the_same_rules():
    cfg = config_from_args(
        {
            "cluster": "tf",
            "node_pools": [{"name": "a", "instance_types": ["c5.xlarge"], "root_volume_gib": 80}],
            "public_access_cidrs": ["203.0.113.0/24"],
        }
    )
    assert cfg.node_pools[0].root_volume_gib == 80
    assert cfg.endpoint.public_access_cidrs == ("203.0.113.0/24",)
    with pytest.raises(ConfigError, match=r"nodePools\[0\]\.rootVolumeGiB"):
        config_from_args(
            {
                "cluster": "tf",
                "node_pools": [
                    {"name": "a", "instance_types": ["c5.xlarge"], "root_volume_gib": 1}
                ],
            }
        )
