"""The policy pack's glue, without starting a PolicyPack (that would start a server and block)."""

from __future__ import annotations

import yaml
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from trainforge.plan.checks import rules as R
from trainforge.plan.policy_adapter import (
    WAIVERS_ENV,
    load_waivers,
    plain_props,
    unwaived,
    validation_messages,
)


def test_engine_props_become_plain_with_unknowns_marked():
    props = unknown_checking_proxy(
        {
            "metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1.0},
            "imageId": UNKNOWN_STRING_VALUE,
            "tags": [UNKNOWN_STRING_VALUE, "a"],
        }
    )
    plain = plain_props(props)
    assert plain == {
        "metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1},
        "imageId": R.UNKNOWN,
        "tags": [R.UNKNOWN, "a"],
    }
    # the pack's rules then judge exactly like the plan
    assert [r.id for r, _ in R.check_resource(R.LAUNCH_TEMPLATE, plain)] == ["CKV_AWS_79"]


def test_unknown_policy_documents_are_not_judged():
    props = plain_props(unknown_checking_proxy({"policy": UNKNOWN_STRING_VALUE}))
    assert R.check_resource("aws:iam/policy:Policy", props) == []


def test_kubernetes_validation_in_the_pack():
    props = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "a"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "main", "image": "x:1"}]}},
                }
            }
        },
    }
    found = validation_messages("kubernetes:kubeflow.org/v1:PyTorchJob", "j", "urn:j", props)
    assert found == [
        (
            "PYTORCHJOB_WEBHOOK",
            "spec.pytorchReplicaSpecs.Master: no container named 'pytorch' "
            "(the operator looks for it)",
        )
    ]
    assert validation_messages("aws:s3/bucket:Bucket", "b", "urn:b", {}) == []


def test_waivers_from_the_stack_file(tmp_path):
    stack = tmp_path / "Pulumi.prod.yaml"
    waiver = {"resource": "gpu-lt", "rule": "CKV_AWS_341", "reason": "legacy AMI"}
    stack.write_text(yaml.safe_dump({"config": {"trainforge-policy:waivers": [waiver]}}))
    waivers = load_waivers({WAIVERS_ENV: str(stack)})
    assert unwaived(waivers, "CKV_AWS_341", "urn:x", "gpu-lt", ["m"]) == []
    assert unwaived(waivers, "CKV_AWS_79", "urn:x", "gpu-lt", ["m"]) == ["m"]
    assert load_waivers({}) == []


def test_the_pack_accepts_waivers_of_plan_check_rules(tmp_path):
    """A stack file that waives a plan check's rule (e.g. a cost cap) is valid for the pack."""
    stack = tmp_path / "Pulumi.prod.yaml"
    waiver = {"resource": "gpt-350m-fsdp", "rule": "TF_COST_JOB_CAP", "reason": "approved"}
    stack.write_text(yaml.safe_dump({"config": {"trainforge-policy:waivers": [waiver]}}))
    (loaded,) = load_waivers({WAIVERS_ENV: str(stack)})
    assert loaded.rule == "TF_COST_JOB_CAP"
