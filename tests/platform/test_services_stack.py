"""The services inside the real program: `__main__.py` with the shipped stacks plus teams.

Checks the wiring between TrainingPlatform and PlatformServices (cluster name, node security
group, subnets, GPU/EFA facts) rather than the services' own properties (test_services.py).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_stack

TEAMS = [
    {"name": "vision", "quota": {"gpus": 16, "cpu": "192", "memory": "1536Gi", "pods": 40}},
    {"name": "nlp", "quota": {"gpus": 8, "cpu": "96", "memory": "768Gi", "pods": 20}},
]


@pytest.fixture(scope="module")
def prod():
    return run_stack(
        "prod",
        {
            "trainforge:teams": json.dumps(TEAMS),
            "trainforge:mlflow": json.dumps({"enabled": True}),
        },
    )


@pytest.fixture(scope="module")
def dev():
    return run_stack(
        "dev",
        {
            "trainforge:teams": json.dumps(TEAMS[:1]),
            "trainforge:fsx": json.dumps({"deploymentType": "SCRATCH_2"}),
            # the shipped dev jobs belong to team `research`, which this fixture replaces
            "trainforge:jobs": "[]",
        },
    )


def parent_types(run, resource):
    by_urn = {r.urn: r for r in run.resources if r.urn}
    out = []
    cur = resource
    while cur is not None and cur.parent:
        cur = by_urn.get(cur.parent)
        if cur is not None:
            out.append(cur.type)
    return out


def test_services_are_composed_under_the_training_platform(prod):
    [svc] = prod.of_type("trainforge:index:PlatformServices")
    assert "trainforge:index:TrainingPlatform" in parent_types(prod, svc)
    [fs] = prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert "trainforge:index:PlatformServices" in parent_types(prod, fs)


def test_services_use_the_cluster_and_its_network(prod):
    [cluster] = prod.of_type("eks:index:Cluster")
    name = cluster.outputs.get("name") or cluster.inputs.get("name")
    for pia in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"):
        if pia.inputs["namespace"] in ("vision", "nlp", "kube-system") and "ckpt" in pia.name:
            assert pia.inputs["clusterName"] == name
    [addon] = [
        a
        for a in prod.of_type("aws:eks/addon:Addon")
        if a.inputs["addonName"] == "aws-fsx-csi-driver"
    ]
    assert addon.inputs["clusterName"] == name
    node_sg = cluster.outputs["nodeSecurityGroupId"]
    rules = prod.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    lustre = [r for r in rules if r.name.startswith("platform-services-fsx-lustre-from-nodes")]
    assert lustre and {r.inputs["referencedSecurityGroupId"] for r in lustre} == {node_sg}
    [fs] = prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    subnets = {s.id for s in prod.of_type("aws:ec2/subnet:Subnet")}
    assert fs.inputs["subnetIds"] in subnets


def test_prod_has_gpu_and_efa_plugins_and_team_objects(prod):
    releases = {r.inputs["name"] for r in prod.of_type("kubernetes:helm.sh/v3:Release")}
    assert {"nvidia-device-plugin", "aws-efa-k8s-device-plugin", "dcgm-exporter"} <= releases
    namespaces = {
        r.inputs["metadata"]["name"] for r in prod.of_type("kubernetes:core/v1:Namespace")
    }
    assert {"vision", "nlp", "mlflow", "monitoring"} <= namespaces
    claims = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in prod.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    }
    assert {("vision", "fsx-vision"), ("nlp", "fsx-nlp")} <= claims


def test_efa_plugin_reaches_karpenter_efa_pools(prod):
    # Karpenter EFA NodePools do not set vpc.amazonaws.com/efa.present; the plugin must also
    # select their nodes by trainforge.io/pool or EFA jobs there would never start.
    [efa] = [
        r.inputs
        for r in prod.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["name"] == "aws-efa-k8s-device-plugin"
    ]
    efa_pools = {
        r.inputs["metadata"]["name"]
        for r in prod.of_type("kubernetes:karpenter.sh/v1:NodePool")
        if any("efa" in str(v) for v in (r.inputs.get("spec") or {}).values())
        or "efa" in r.inputs["metadata"]["name"]
    }
    labels = efa["values"]["supportedInstanceLabels"]
    assert "trainforge.io/pool" in labels["keys"]
    assert efa_pools and efa_pools <= set(labels["values"])
    assert "gpu-workloads" not in labels["values"] and "training-workloads" not in labels["values"]


def test_dev_scratch_fsx_and_no_efa_plugin(dev):
    [fs] = dev.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["deploymentType"] == "SCRATCH_2" and "kmsKeyId" not in fs.inputs
    releases = {r.inputs["name"] for r in dev.of_type("kubernetes:helm.sh/v3:Release")}
    assert "nvidia-device-plugin" in releases
    assert "aws-efa-k8s-device-plugin" not in releases
