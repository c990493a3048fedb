"""The dev and prod stacks under mocks: security defaults, GPU/EFA layout and Karpenter
settings asserted on the declared resources (each stack runs once per module)."""

import contextlib
import re
import sys
from collections.abc import Iterator

import pulumi
import pytest

from tests.conftest import OWN_ACCOUNT, OWN_CIDRS, OWN_RESERVATION, prod_own_values, run_stack
from trainforge.core import versions

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


# A provider function's result types, as Pulumi's code generator names them: the top level
# (`GetRegionResult`, `AwaitableGetRegionResult`) and its nested objects
# (`GetInstanceTypeGpusResult`).
INVOKE_RESULT = re.compile(r"(Awaitable)?Get\w*Result")


@contextlib.contextmanager
def unanswered_reads() -> Iterator[set[tuple[str, str]]]:
    """Records (result type, field) for every field of a provider function's result that code
    reads and finds None: what trainforge.plan.mocks did not answer (the mocks answer only
    the fields the platform reads; the generated result class fills the others with None, so
    a platform change reading another field, e.g. `aws.get_region().endpoint`, would plan
    with None). A field read goes through its property, which calls `pulumi.get(self,
    name)` from a getter of the same name; the generated function's own copying of every
    field into its result (`pulumi.get(__ret__, name)`, called from the function) is not a
    read."""
    real = pulumi.get
    found: set[tuple[str, str]] = set()

    def get(self, name):
        value = real(self, name)
        if (
            value is None
            and INVOKE_RESULT.fullmatch(type(self).__name__)
            and sys._getframe(1).f_code.co_name == name
        ):
            found.add((type(self).__name__, name))
        return value

    pulumi.get = get
    try:
        yield found
    finally:
        pulumi.get = real


# stack -> the invoke fields its program read unanswered (recorded while the fixtures run)
UNANSWERED: dict[str, set[tuple[str, str]]] = {}


@pytest.fixture(scope="module")
def dev():
    with unanswered_reads() as UNANSWERED["dev"]:
        return run_stack("dev")


@pytest.fixture(scope="module")
def prod():
    # the shipped prod with its `YOURS:` keys filled in (admins, reservation, allow-list)
    with unanswered_reads() as UNANSWERED["prod"]:
        return run_stack("prod", prod_own_values())


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request, dev, prod):
    return {"dev": dev, "prod": prod}[request.param]


def test_every_provider_function_field_the_platform_reads_is_answered(dev, prod):
    """The programs read only fields of lookup results (aws.get_region(), ...) that the mocks
    answer: a field they leave out reads None, and the plan would judge a wrong document.
    Answer a new one in TrainforgeMocks.call, as the provider does."""
    assert {"dev": set(), "prod": set()} == UNANSWERED


def test_an_unanswered_field_is_seen():
    """A program reading a field the mocks leave out (the region's EC2 endpoint, a type's
    sustained clock speed) is recorded; the fields they answer (a GPU's maker) are not."""
    import pulumi_aws as aws

    from trainforge.plan.mocks import run_mocked

    def program():
        region = aws.get_region()
        p4d = aws.ec2.get_instance_type(instance_type="p4d.24xlarge")
        gpus = p4d.gpuses
        return (
            region.region,
            region.endpoint,
            gpus[0].count,
            gpus[0].manufacturer,
            p4d.sustained_clock_speed,
        )

    with unanswered_reads() as found:
        run = run_mocked(program)
    assert run.result[0] == "us-west-2" and run.result[2] == 8
    assert found == {
        ("AwaitableGetRegionResult", "endpoint"),
        ("AwaitableGetInstanceTypeResult", "sustained_clock_speed"),
    }
    assert run.result[3] == "NVIDIA"


def eks_inputs(run):
    (cluster,) = run.of_type("eks:index:Cluster")
    return cluster.inputs


def test_components_have_trainforge_tokens_and_parents(stack):
    types = {r.type for r in stack.resources}
    for name in ("TrainingPlatform", "Network", "Cluster", "Karpenter"):
        assert f"trainforge:index:{name}" in types
    (top,) = stack.of_type("trainforge:index:TrainingPlatform")
    for r in stack.resources:
        if r is not top:
            assert r.parent and r.parent != "", r.name


def test_cluster_security_defaults(stack):
    cfg = eks_inputs(stack)
    assert cfg["version"] == versions.KUBERNETES_VERSION
    assert cfg["authenticationMode"] == "API"
    assert cfg["createOidcProvider"] is True
    assert sorted(cfg["enabledClusterLogTypes"]) == sorted(
        ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    )
    assert cfg["endpointPrivateAccess"] is True
    assert cfg["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    key = stack.find("aws:kms/key:Key", "platform-eks-secrets")
    assert key.inputs["enableKeyRotation"] is True
    assert all(k.inputs["enableKeyRotation"] is True for k in stack.of_type("aws:kms/key:Key"))
    assert cfg["skipDefaultNodeGroup"] is True


def test_endpoint_deployer_only_in_dev_allow_list_in_prod(dev, prod):
    """dev creates its VPC: its endpoint is public only to the deployer's /32, known at
    `pulumi up` (trainforge.platform.endpoint), never open without a list."""
    d = eks_inputs(dev)
    assert d["endpointPublicAccess"] is True and d["endpointPrivateAccess"] is True
    assert "0.0.0.0/0" not in (d.get("publicAccessCidrs") or [])
    p = eks_inputs(prod)
    assert p["endpointPublicAccess"] is True
    assert p["publicAccessCidrs"] == OWN_CIDRS
    assert "0.0.0.0/0" not in p["publicAccessCidrs"]


def test_addons_pinned(stack):
    addons = {
        a.inputs["addonName"]: a.inputs["addonVersion"]
        for a in stack.of_type("aws:eks/addon:Addon")
    }
    for name, version in versions.EKS_ADDON_VERSIONS.items():
        assert addons[name] == version
    assert "eks-pod-identity-agent" in addons


def test_launch_templates_imdsv2_hop_limit_1_encrypted(stack):
    lts = stack.of_type(LT)
    assert lts
    for lt in lts:
        md = lt.inputs["metadataOptions"]
        assert md["httpTokens"] == "required"
        assert md["httpPutResponseHopLimit"] == 1
        ebs = lt.inputs["blockDeviceMappings"][0]["ebs"]
        assert ebs["encrypted"] == "true"


def test_system_node_group_on_demand_small(stack):
    (system,) = [n for n in stack.of_type(NG) if n.inputs["nodeGroupName"].endswith("-system")]
    assert system.inputs["capacityType"] == "ON_DEMAND"
    assert system.inputs["amiType"] == versions.SYSTEM_AMI_TYPE
    assert "taints" not in system.inputs


def test_prod_efa_node_group(prod):
    (ng,) = [n for n in prod.of_type(NG) if n.inputs["nodeGroupName"].endswith("p4d-reserved")]
    assert ng.inputs["amiType"] == versions.GPU_AMI_TYPE
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in ng.inputs[
        "taints"
    ]
    assert len(ng.inputs["subnetIds"]) == 1  # one AZ
    assert ng.options["ignoreChanges"] == ["scalingConfig.desiredSize"]
    assert ng.inputs["labels"]["trainforge.io/pool"] == "p4d-reserved"
    lt = prod.find(LT, "platform-p4d-reserved-lt")
    nics = lt.inputs["networkInterfaces"]
    assert len(nics) == 4  # p4d.24xlarge supports 4 EFA interfaces
    assert [n["interfaceType"] for n in nics] == ["efa", "efa-only", "efa-only", "efa-only"]
    assert sorted(n["networkCardIndex"] for n in nics) == [0, 1, 2, 3]
    assert "vpcSecurityGroupIds" not in lt.inputs
    assert lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": OWN_RESERVATION
    }
    # a reserved group launches in the reservation's placement group, never one we create (the
    # mocks' default reservation has none; tests/platform/test_capacity_placement.py stubs one)
    assert not [r for r in prod.of_type("aws:ec2/placementGroup:PlacementGroup") if "p4d" in r.name]
    assert "placement" not in lt.inputs
    rules = [
        r
        for t in (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        )
        for r in prod.of_type(t)
        if r.name.startswith("platform-p4d-reserved-efa")
    ]
    assert len(rules) == 2
    for r in rules:
        assert r.inputs["ipProtocol"] == "-1"
        assert r.inputs["referencedSecurityGroupId"] == r.inputs["securityGroupId"]


def test_dev_has_no_efa(dev):
    assert not dev.of_type("aws:ec2/placementGroup:PlacementGroup")
    for nc in dev.of_type(NODECLASS):
        assert "networkInterfaces" not in nc.inputs["spec"]


def test_karpenter_node_pools_never_evict_running_jobs(stack):
    pools = stack.of_type(NODEPOOL)
    assert pools
    for p in pools:
        spec = p.inputs["spec"]
        assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
        assert spec["disruption"]["consolidateAfter"]
        assert spec["template"]["spec"]["expireAfter"] == "Never"
        assert spec["template"]["spec"]["nodeClassRef"]["name"] == p.inputs["metadata"]["name"]


def test_dev_pools_match_seed_names_taints_and_limits(dev):
    pools = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in dev.of_type(NODEPOOL)}
    assert set(pools) == {"gpu-workloads", "training-workloads"}
    gpu = pools["gpu-workloads"]
    assert gpu["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    ]
    assert gpu["limits"]["nvidia.com/gpu"] == 4
    reqs = {r["key"]: r["values"] for r in gpu["template"]["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ["g4dn.xlarge", "g5.xlarge"]
    assert reqs["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
    # CPU pools are for jobs only (tests/platform/test_addon_placement.py)
    assert pools["training-workloads"]["template"]["spec"]["taints"] == [
        {"key": "trainforge.io/jobs-only", "value": "true", "effect": "NoSchedule"}
    ]


def test_node_classes_pinned_ami_and_imds(stack):
    for nc in stack.of_type(NODECLASS):
        spec = nc.inputs["spec"]
        (term,) = spec["amiSelectorTerms"]
        assert term["alias"] == versions.KARPENTER_AMI_ALIAS
        assert not term["alias"].endswith("@latest")
        assert spec["metadataOptions"]["httpTokens"] == "required"
        assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
        assert spec["blockDeviceMappings"][0]["ebs"]["encrypted"] is True


def test_prod_efa_pool_every_interface_and_placement(prod):
    spec = prod.find(NODECLASS, "platform-karpenter-efa-training-class").inputs["spec"]
    nics = spec["networkInterfaces"]
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa) == 32  # p5.48xlarge supports 32 EFA interfaces
    assert {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"} in nics
    assert len({n["networkCardIndex"] for n in efa}) == 32
    assert spec["placementGroupSelector"]["name"] == "trainforge-prod-efa-training"
    assert len(spec["subnetSelectorTerms"]) == 1 and "id" in spec["subnetSelectorTerms"][0]
    assert len(spec["securityGroupSelectorTerms"]) == 2


def test_interruption_queue_encrypted_and_rules(stack):
    (q,) = stack.of_type("aws:sqs/queue:Queue")
    assert q.inputs["sqsManagedSseEnabled"] is True
    patterns = [
        r.inputs["eventPattern"] for r in stack.of_type("aws:cloudwatch/eventRule:EventRule")
    ]
    for detail in (
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ):
        assert any(detail in p for p in patterns), detail
    targets = stack.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5 and all(t.inputs["arn"] == q.outputs["arn"] for t in targets)


def test_karpenter_roles_and_charts(stack):
    assoc = stack.find(
        "aws:eks/podIdentityAssociation:PodIdentityAssociation", "platform-karpenter-controller"
    )
    assert assoc.inputs["serviceAccount"] == "karpenter"
    assert assoc.inputs["namespace"] == "kube-system"
    entries = [
        e
        for e in stack.of_type("aws:eks/accessEntry:AccessEntry")
        if e.inputs["type"] == "EC2_LINUX"
    ]
    assert len(entries) == 1
    policy = stack.find("aws:iam/rolePolicy:RolePolicy", "platform-karpenter-controller").inputs[
        "policy"
    ]
    import json

    for st in json.loads(policy)["Statement"]:
        assert not (st["Action"] == "*" or st["Action"] == ["*"])
    releases = {r.inputs["name"]: r.inputs for r in stack.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["karpenter"]["version"] == versions.KARPENTER_VERSION
    assert releases["karpenter-crd"]["version"] == versions.KARPENTER_VERSION
    assert releases["karpenter"]["skipCrds"] is True
    for r in stack.of_type("kubernetes:helm.sh/v3:Release") + stack.of_type(NODEPOOL):
        assert r.options["provider"].split("::")[-2] == "platform-k8s"


def test_admin_access_entries(prod, dev):
    # (team members' entries carry their team's Kubernetes group: test_team_access.py)
    (entry,) = [
        e
        for e in prod.of_type("aws:eks/accessEntry:AccessEntry")
        if e.inputs["type"] == "STANDARD" and not e.inputs.get("kubernetesGroups")
    ]
    assert entry.inputs["principalArn"] == f"arn:aws:iam::{OWN_ACCOUNT}:role/PlatformAdmin"
    assert not [
        e for e in dev.of_type("aws:eks/accessEntry:AccessEntry") if e.inputs["type"] == "STANDARD"
    ]


def test_network_tags_for_elb_and_karpenter(dev):
    private = [s for s in dev.of_type("aws:ec2/subnet:Subnet") if "-private-" in s.name]
    assert len(private) == 2
    for s in private:
        assert s.inputs["tags"]["karpenter.sh/discovery"] == "trainforge-dev"
        assert s.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert s.inputs["mapPublicIpOnLaunch"] is False


def test_outputs(stack):
    for key in ("clusterName", "kubeconfig", "nodeRoleName", "interruptionQueueName", "poolNames"):
        assert key in stack.outputs
    assert stack.outputs["clusterName"].startswith("trainforge-")


def test_existing_vpc_tags_subnets():
    with unanswered_reads() as unanswered:  # the VPC's, subnets' and route tables' lookups
        run = run_stack(
            "dev",
            {
                "trainforge:network": {
                    "vpcId": "vpc-0abc",
                    "privateSubnetIds": ["subnet-0a1", "subnet-0b2"],
                }
            },
        )
    assert unanswered == set()
    assert not run.of_type("aws:ec2/vpc:Vpc")
    tags = run.of_type("aws:ec2/tag:Tag")
    assert {(t.inputs["resourceId"], t.inputs["key"]) for t in tags} >= {
        ("subnet-0a1", "karpenter.sh/discovery"),
        ("subnet-0b2", "kubernetes.io/role/internal-elb"),
    }
    assert eks_inputs(run)["vpcId"] == "vpc-0abc"


def test_edge_no_karpenter_one_nat_per_az():
    run = run_stack(
        "dev",
        {
            "trainforge:karpenter": {"enabled": False},
            "trainforge:nodePools": [],
            "trainforge:nodeGroups": [{"name": "g5", "instanceTypes": ["g5.xlarge"], "maxSize": 3}],
            "trainforge:network": {"availabilityZones": 3, "natGateways": "onePerAz"},
            "trainforge:jobs": [],  # the shipped dev jobs name pools this edge config drops
        },
    )
    assert not run.of_type(NODEPOOL) and not run.of_type("aws:sqs/queue:Queue")
    assert len(run.of_type("aws:ec2/natGateway:NatGateway")) == 3
    ng = run.find(NG, "platform-g5")
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 3}
    assert len(ng.inputs["subnetIds"]) == 3  # not EFA: spread over AZs
    assert "networkInterfaces" not in run.find(LT, "platform-g5-lt").inputs
    assert run.outputs["poolNames"] == ["g5"]


def test_ebs_csi_addon_gets_a_pod_identity_role(stack):
    """Without it the gp3 claims of Prometheus and MLflow never bind (issue 10 item 3)."""
    import json

    role = stack.find("aws:iam/role:Role", "platform-eks-ebs-csi")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == (
        "ebs-csi-controller-sa"
    )
    att = stack.find("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "platform-eks-ebs-csi")
    assert (
        att.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    )
    pia = stack.find(
        "aws:eks/podIdentityAssociation:PodIdentityAssociation", "platform-eks-ebs-csi"
    ).inputs
    assert (pia["namespace"], pia["serviceAccount"]) == ("kube-system", "ebs-csi-controller-sa")
    addon = stack.find("aws:eks/addon:Addon", "platform-eks-aws-ebs-csi-driver")
    assert any(d.endswith("::platform-eks-ebs-csi") for d in addon.options["dependencies"])


def test_nvme_pools_put_images_and_scratch_on_raid0_instance_store(prod):
    """p5.48xlarge (8 x 3.8 TB NVMe) and g5: instanceStorePolicy RAID0; the c5/m5 CPU pool
    (no instance store) keeps the root volume. The object passes the vendored EC2NodeClass
    CRD (v1.14.1: an enum with the one value RAID0), and a value it does not list fails."""
    from trainforge.plan.checks.validate import validate_object

    classes = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in prod.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    }
    assert classes["efa-training"]["spec"]["instanceStorePolicy"] == "RAID0"
    assert classes["gpu-workloads"]["spec"]["instanceStorePolicy"] == "RAID0"
    assert "instanceStorePolicy" not in classes["training-workloads"]["spec"]
    doc = {**classes["efa-training"], "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass"}
    doc["spec"] = {
        **doc["spec"],
        "role": "r",
        "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef0"}],
        "subnetSelectorTerms": [{"id": "subnet-0123456789abcdef0"}],
        "placementGroupSelector": {"name": "pg"},
    }
    status, findings = validate_object(doc)
    assert status == "pass", findings
    status, _ = validate_object({**doc, "spec": {**doc["spec"], "instanceStorePolicy": "RAID1"}})
    assert status == "fail"
