"""The component provider host can build a package schema from TrainingPlatform's annotations."""

from pulumi.provider.experimental.analyzer import Analyzer

from trainforge.platform.training_platform import TrainingPlatform


def test_analyzer_infers_training_platform_inputs_and_outputs():
    result = Analyzer("trainforge").analyze([TrainingPlatform])
    comp = result["component_definitions"]["TrainingPlatform"]
    assert set(comp.inputs) == {
        "cluster",
        "network",
        "publicAccessCidrs",
        "deployFrom",
        "admins",
        "systemNodeGroup",
        "nodeGroups",
        "nodePools",
        "karpenter",
        "nodeHealth",
        "tags",
        "images",
        "jobBackend",
        "jobBackends",
    }
    assert set(comp.outputs) == {
        "clusterName",
        "kubeconfig",
        "nodeRoleName",
        "interruptionQueueName",
        "poolNames",
    }
    types = result["type_definitions"]
    assert {
        "NodePoolArgs",
        "NodeGroupArgs",
        "TaintArgs",
        "PoolLimitsArgs",
        "NetworkConfigArgs",
    } <= set(types)
    assert {"instanceTypes", "capacityTypes", "efa", "limits", "consolidateAfter"} <= set(
        types["NodePoolArgs"].properties
    )
    assert {"monitoringAgent", "autoRepair"} == set(types["NodeHealthSettingsArgs"].properties)
    assert "acceptanceTest" in types["NodeGroupArgs"].properties


def test_provider_entry_point_lists_components():
    from trainforge.provider import components

    assert TrainingPlatform in components()


def test_component_args_choose_the_job_backends():
    """Other languages set the backends the same way as stack config does."""
    from trainforge.platform.training_platform import config_from_args

    config = config_from_args(
        {"cluster": "c", "job_backend": "indexed-job", "job_backends": ["trainjob"]}
    )
    assert config.services.job_backend == "indexed-job"
    assert config.services.job_backends == ("trainjob", "indexed-job")
