"""The shared mocks: catalog answers, recorded resources, preview leaves cloud values unknown."""

import pulumi
import pulumi_aws as aws
import pytest

from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.stack.file import engine_config


def program():
    it = aws.ec2.get_instance_type(instance_type="g5.xlarge")
    key = aws.kms.Key("k", enable_key_rotation=True)
    pulumi.export("gpus", sum(g.count for g in it.gpuses))
    pulumi.export("efa", it.efa_supported)
    pulumi.export("arn", key.arn)
    pulumi.export("cluster", pulumi.Config("trainforge").require("cluster"))
    pulumi.export("region", pulumi.Config("aws").get("region"))


def test_run_records_resources_and_outputs():
    run = run_mocked(program, {"cluster": "c1", "aws:region": "eu-west-1"})
    assert run.outputs["gpus"] == 1 and run.outputs["efa"] is False
    assert run.outputs["cluster"] == "c1" and run.outputs["region"] == "eu-west-1"
    assert run.outputs["arn"].startswith("arn:aws:kms:eu-west-1:")
    key = run.find("aws:kms/key:Key", "k")
    assert key.inputs == {"enableKeyRotation": True}
    assert key.urn.endswith("::k") and key.parent
    assert [c.token for c in run.calls] == ["aws:ec2/getInstanceType:getInstanceType"]


def test_preview_leaves_cloud_values_unknown():
    run = run_mocked(program, {"cluster": "c1"}, preview=True)
    assert run.outputs["arn"] is None
    assert run.find("aws:kms/key:Key", "k").id is None
    assert TrainforgeMocks(preview=True).preview


def test_unknown_instance_type_fails_the_invoke():
    def bad():
        aws.ec2.get_instance_type(instance_type="zz9.huge")

    with pytest.raises(Exception, match="zz9.huge"):
        run_mocked(bad, {})


def test_stack_config_namespaces_and_json():
    """The config run_mocked hands a program (the one stack reader's engine form)."""
    assert engine_config(
        {"cluster": "c", "aws:region": "r", "nodePools": [{"name": "a"}], "x": True}, "trainforge"
    ) == {
        "trainforge:cluster": "c",
        "aws:region": "r",
        "trainforge:nodePools": '[{"name": "a"}]',
        "trainforge:x": "true",
    }


@pytest.mark.parametrize(
    ("typ", "name", "inputs", "rid", "key", "arn"),
    [
        ("aws:ec2/placementGroup:PlacementGroup", "pg", {}, "pg-mock", "name",
         "arn:aws:ec2:us-west-2:123456789012:placement-group/pg-mock"),
        ("aws:cloudwatch/eventRule:EventRule", "r", {}, "r-id", "name",
         "arn:aws:events:us-west-2:123456789012:rule/r-mock"),
        ("aws:eks/nodeGroup:NodeGroup", "ng", {"nodeGroupName": "gpu"}, "ng-id", "nodeGroupName",
         "arn:aws:eks:us-west-2:123456789012:nodegroup/gpu"),
    ],
)  # fmt: skip
def test_named_resources_get_the_clouds_name_arn_and_id(typ, name, inputs, rid, key, arn):
    """A placement group's id is its name; an event rule's and a node group's are not."""
    got_id, out = TrainforgeMocks(region="us-west-2")._outputs(typ, name, inputs)
    assert (got_id, out["id"], out["arn"]) == (rid, rid, arn)
    assert out[key] == (inputs.get(key) or f"{name}-mock")
