"""Bad stack config fails before any resource is declared, naming key, value and what is valid."""

from pathlib import Path

import pytest

from trainforge.core.contract import PoolLimits, Taint
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
        ({}, "trainforge:cluster", "missing"),
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
            "systemNodeGroup.maxSize",
            "got 2; expected at least minSize (3)",
        ),
        (
            {**BASE, "systemNodeGroup": {"minSize": 3, "desiredSize": 7}},
            "systemNodeGroup.desiredSize",
            "got 7; expected a size between minSize (3) and maxSize (3)",
        ),
        (
            {
                **BASE,
                "nodeGroups": [
                    {"name": "g", "instanceTypes": ["p4d.24xlarge"], "maxSize": 3, "desiredSize": 5}
                ],
            },
            "nodeGroups[0].desiredSize",
            "got 5; expected a size between minSize (0) and maxSize (3)",
        ),
        (
            pools({"name": "Bad_Name", "instanceTypes": ["g5.xlarge"]}),
            "nodePools[0].name",
            "Bad_Name",
        ),
        (pools({"name": "a"}), "nodePools[0].instanceTypes", "missing"),
        (pools({"name": "a", "instanceTypes": []}), "nodePools[0].instanceTypes", "[]"),
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


def test_rules_across_pools_come_with_the_other_problems_in_one_format():
    ok = {"name": "a", "instanceTypes": ["c5.xlarge"]}
    raw = {
        "cluster": "1",
        "karpenter": {"enabled": "false"},
        "nodePools": [ok, ok, {"name": "b", "instanceTypes": ["c5 xlarge"]}],
    }
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert exc.value.errors == [
        "trainforge:cluster: got '1'; expected a cluster name: a letter then letters, digits, "
        "'-' or '_' (at most 100)",
        "trainforge:nodePools[2].instanceTypes[0]: got 'c5 xlarge'; expected an EC2 instance "
        "type such as g5.xlarge or m6i.large",
        "trainforge:nodePools[1].name: got 'a'; expected a name not used by another node group "
        "or node pool",
        "trainforge:karpenter.enabled: got False; expected true while nodePools are declared "
        "(Karpenter runs them)",
    ]


def test_a_misspelt_key_gets_a_suggestion_at_every_level():
    raw = {
        **BASE,
        "clustr": "x",
        "network": {"natGateway": "single"},
        "nodePools": [{"name": "a", "instanceTypes": ["c5.xlarge"], "consolidateAftr": "5m"}],
    }
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    first, *rest = exc.value.errors
    assert first.startswith(
        "trainforge:clustr: unknown key (did you mean 'cluster'?); known keys: "
    )
    assert "nodePools" in first and "teams" in first  # every area's keys
    assert rest == [
        "trainforge:network.natGateway: unknown key (did you mean 'natGateways'?); known keys: "
        "availabilityZones, cidr, natGateways, privateSubnetIds, vpcEndpoints, vpcId",
        "trainforge:nodePools[0].consolidateAftr: unknown key (did you mean 'consolidateAfter'?); "
        "known keys: acceptanceTest, capacityTypes, consolidateAfter, efa, gpu, instanceTypes, "
        "labels, limits, name, rootVolumeGiB, taints, weight",
    ]


def test_pulumi_string_values_and_null_sections():
    cfg = parse_config(
        {
            **BASE,
            "karpenter": None,
            "systemNodeGroup": {"minSize": "3", "maxSize": "5"},
            "nodePools": [
                {
                    "name": "a",
                    "instanceTypes": "c5.xlarge",
                    "efa": "false",
                    "weight": "5",
                    "labels": None,
                    "acceptanceTest": "true",
                    "taints": [{"key": "k", "value": True}],
                    "limits": {"cpu": 64, "gpus": "8"},
                }
            ],
        }
    )
    sys, pool = cfg.system_node_group, cfg.node_pools[0]
    assert (sys.min_size, sys.desired_size, sys.max_size) == (3, 3, 5)
    assert (pool.efa, pool.weight, pool.instance_types, pool.labels) == (
        False,
        5,
        ("c5.xlarge",),
        (),
    )
    assert pool.acceptance.enabled and pool.taints == (Taint("k", "NoSchedule", "true"),)
    assert pool.limits == PoolLimits(cpu="64", gpus=8)


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


def test_consolidate_after_takes_what_karpenters_nodepool_takes():
    """The stack refused `consolidateAfter: Never`, which Karpenter's NodePool accepts: the
    stack's pattern is the vendored CRD's."""
    import yaml

    from trainforge.stack.platform import CONSOLIDATE_AFTER

    crd = yaml.safe_load(
        (
            Path(__file__).parents[2] / "trainforge/plan/data/crds/karpenter.sh_nodepools.yaml"
        ).read_text()
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    field = spec["disruption"]["properties"]["consolidateAfter"]
    assert field["pattern"] == f"^({CONSOLIDATE_AFTER})$"
    cfg = parse_config(
        pools({"name": "a", "instanceTypes": ["g5.xlarge"], "consolidateAfter": "Never"})
    )
    assert cfg.node_pools[0].consolidate_after == "Never"
