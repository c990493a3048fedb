"""What a node pool's or group's labels and taints promise that its nodes would not do (issue:
wave 15 poolfollow): a label the platform sets itself, a Karpenter instance-type label none of
the pool's types gives, more labels or taints than the NodePool CRD or EKS holds, a taint key
EKS refuses. Each refused in one line naming the key, before any resource."""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest
import yaml

from trainforge.core import labels
from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.instance_types import (
    instance_type_facts,
    karpenter_bandwidth_megabits,
    karpenter_labels,
)
from trainforge.platform.karpenter import pool_labels
from trainforge.platform.node_groups import group_labels
from trainforge.platform.node_taints import EKS_GROUP_TAINTS_MAX, taint_problems
from trainforge.platform.stack_check import (
    NODEPOOL_LABELS_MAX,
    check_stack,
    platform_label_keys,
)
from trainforge.stack.base import validate
from trainforge.stack.file import read_stack
from trainforge.stack.platform import EKS_TAINT_KEY_MAX, NodeGroupConfig, NodePoolConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "trainforge/plan/data/crds/karpenter.sh_nodepools.yaml"


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def errors_with(stack: str, where: str, **keys) -> list[str]:
    config = copy.deepcopy(read_stack(ROOT, stack).config)
    config[f"trainforge:{where}"][0].update(keys)
    return check_stack(config, known_rules=known_rule_ids(), lookups=True).errors


# --- labels the platform sets itself ---------------------------------------------------------


def test_the_platform_s_label_keys_are_every_key_its_emitters_set():
    """Read off the emitters: a group with EFA sets three, a pool one, none a user's."""
    group = NodeGroupConfig(name="g", instanceTypes=["p5.48xlarge"], efa=True)
    pool = NodePoolConfig(name="p", instanceTypes=["g5.xlarge"])
    emitted = set(group_labels(group)) | set(pool_labels(pool))
    assert platform_label_keys() == emitted
    assert labels.POOL_LABEL in emitted


@pytest.mark.parametrize(("stack", "where"), [("dev", "nodePools"), ("prod", "nodeGroups")])
def test_a_label_the_platform_sets_itself_is_refused_naming_the_key(stack, where):
    """The reviewer's repro: `trainforge.io/pool` was silently replaced by the pool's name."""
    errors = errors_with(stack, where, labels={labels.POOL_LABEL: "mine", "team": "a"})
    keys = ", ".join(sorted(platform_label_keys()))
    assert errors == [
        f"trainforge:{where}[0].labels.{labels.POOL_LABEL}: got 'mine'; expected a label key "
        f"the platform does not set itself (it sets {keys} on its nodes, and jobs and device "
        "plugins select nodes by them), such as example.com/team"
    ]


# --- labels Karpenter derives from the instance type -----------------------------------------

# karpenter-provider-aws v1.14.1 pkg/providers/instancetype/suite_test.go l.225-262 and
# l.360-380 (bde0065, read 2026-11-30): the labels of a node launched as g4dn.8xlarge (32
# vCPUs, 131072 MiB, one T4 of 16384 MiB, 900 GB NVMe, Intel) and inf2.xlarge (4 vCPUs,
# 16384 MiB, no GPU, no instance store, AMD); the EC2 facts are the fake's
# (pkg/fake/zz_generated.describe_instance_types.go at the same tag).
K = "karpenter.k8s.aws/"
UPSTREAM = [
    (
        ("g4dn.8xlarge", 32, 131072, 1, "T4"),
        {
            "gpu_manufacturer": "NVIDIA",
            "gpu_memory_mib": 16384,
            "hypervisor": "nitro",
            "instance_storage_gb": 900,
            "nvme_support": "required",
            "cpu_manufacturer": "Intel",
            "bandwidth_megabits": 50000,
        },
        {
            f"{K}instance-category": "g",
            f"{K}instance-capability-flex": "false",
            f"{K}instance-generation": "4",
            f"{K}instance-family": "g4dn",
            f"{K}instance-size": "8xlarge",
            f"{K}instance-cpu": "32",
            f"{K}instance-cpu-manufacturer": "intel",
            f"{K}instance-memory": "131072",
            f"{K}instance-network-bandwidth": "50000",
            f"{K}instance-gpu-name": "t4",
            f"{K}instance-gpu-manufacturer": "nvidia",
            f"{K}instance-gpu-count": "1",
            f"{K}instance-gpu-memory": "16384",
            f"{K}instance-local-nvme": "900",
            f"{K}instance-hypervisor": "nitro",
            labels.INSTANCE_TYPE: "g4dn.8xlarge",
        },
    ),
    (
        ("inf2.xlarge", 4, 16384, 0, None),
        {
            "gpu_manufacturer": "",
            "gpu_memory_mib": 0,
            "hypervisor": "nitro",
            "instance_storage_gb": 0,
            "cpu_manufacturer": "AMD",
            "bandwidth_megabits": 2083,
        },
        {
            f"{K}instance-category": "inf",
            f"{K}instance-capability-flex": "false",
            f"{K}instance-generation": "2",
            f"{K}instance-family": "inf2",
            f"{K}instance-size": "xlarge",
            f"{K}instance-cpu": "4",
            f"{K}instance-cpu-manufacturer": "amd",
            f"{K}instance-memory": "16384",
            f"{K}instance-network-bandwidth": "2083",
            f"{K}instance-hypervisor": "nitro",
            # the test's list leaves them out: DoesNotExist
            f"{K}instance-gpu-name": None,
            f"{K}instance-gpu-manufacturer": None,
            f"{K}instance-gpu-count": None,
            f"{K}instance-gpu-memory": None,
            f"{K}instance-local-nvme": None,
            labels.INSTANCE_TYPE: "inf2.xlarge",
        },
    ),
]
# held in the catalog (EC2 via moto), not returned by aws.ec2.get_instance_type
CATALOG_HELD = {labels.KARPENTER_CPU_MANUFACTURER, labels.KARPENTER_LOCAL_NVME}


@pytest.mark.parametrize(("args", "facts", "upstream"), UPSTREAM)
def test_the_type_labels_are_karpenter_s_own_test_cases(args, facts, upstream):
    assert labels.karpenter_type_labels(*args, **facts) == upstream


def test_the_type_labels_read_the_lookup_as_the_pool_does():
    """The same facts the pool's lookup gives (moto's EC2 catalogue offline); g4dn.8xlarge is
    not in the catalog, so its CPU maker and NVMe support are not held: left out, unjudged."""
    derived = karpenter_labels(instance_type_facts("g4dn.8xlarge"))
    upstream = UPSTREAM[0][2]
    assert derived == {k: v for k, v in upstream.items() if k not in CATALOG_HELD}


def test_gpu_memory_is_one_gpu_s_not_the_type_s_total():
    """types.go inserts gpu.MemoryInfo.SizeInMiB: 81920 on p5.48xlarge, not 8 x 81920."""
    f = instance_type_facts("p5.48xlarge")
    assert f.gpu_memory_mib == 655360  # the lookup's total, what job sizing reads
    derived = karpenter_labels(f)
    assert derived[labels.KARPENTER_GPU_MEMORY] == "81920"
    assert derived[labels.KARPENTER_CPU_MANUFACTURER] == "amd"  # from the catalog
    assert derived[labels.KARPENTER_LOCAL_NVME] == "30400"
    assert derived[labels.KARPENTER_NETWORK_BANDWIDTH] == "3200000"


def test_a_total_gpu_memory_label_is_refused_naming_the_per_gpu_value():
    errors = errors_with("prod", "nodePools", labels={labels.KARPENTER_GPU_MEMORY: "655360"})
    assert errors == [
        f"trainforge:nodePools[0].labels.{labels.KARPENTER_GPU_MEMORY}: got '655360'; expected "
        f"a value one of the pool's instance types gives {labels.KARPENTER_GPU_MEMORY}: 81920 "
        "(Karpenter adds template labels to the NodePool's requirements: no type would match "
        "and no node could launch), or no such label"
    ]


def test_each_hardware_label_no_type_gives_is_refused_in_one_run():
    """dev's g4dn.xlarge/g5.xlarge: every label wrong at once, one line each."""
    wrong = {
        labels.KARPENTER_GPU_MEMORY: "45776",
        labels.KARPENTER_LOCAL_NVME: "1000",
        labels.KARPENTER_NETWORK_BANDWIDTH: "25000",
        labels.KARPENTER_HYPERVISOR: "xen",
        labels.KARPENTER_CPU_MANUFACTURER: "aws",
    }
    given = {
        labels.KARPENTER_GPU_MEMORY: "16384, 22888",
        labels.KARPENTER_LOCAL_NVME: "125, 250",
        labels.KARPENTER_NETWORK_BANDWIDTH: "2500, 5000",
        labels.KARPENTER_HYPERVISOR: "nitro",
        labels.KARPENTER_CPU_MANUFACTURER: "amd, intel",
    }
    errors = errors_with("dev", "nodePools", labels=wrong)
    assert sorted(errors) == sorted(
        f"trainforge:nodePools[0].labels.{k}: got '{v}'; expected a value one of the pool's "
        f"instance types gives {k}: {given[k]} (Karpenter adds template labels to the "
        "NodePool's requirements: no type would match and no node could launch), or no such "
        "label"
        for k, v in wrong.items()
    )


def test_hardware_labels_one_type_gives_together_pass():
    g5 = {
        labels.KARPENTER_GPU_MEMORY: "22888",
        labels.KARPENTER_LOCAL_NVME: "250",
        labels.KARPENTER_NETWORK_BANDWIDTH: "2500",
        labels.KARPENTER_HYPERVISOR: "nitro",
        labels.KARPENTER_CPU_MANUFACTURER: "amd",
    }
    assert errors_with("dev", "nodePools", labels=g5) == []
    mixed = {**g5, labels.KARPENTER_LOCAL_NVME: "125"}  # g4dn.xlarge's
    errors = errors_with("dev", "nodePools", labels=mixed)
    assert len(errors) == 1 and "no one type has them all" in errors[0], errors


def test_the_bandwidth_table_is_karpenter_s():
    """Upstream's own figures (suite_test.go above) and size of the generated map at v1.14.1."""
    table = karpenter_bandwidth_megabits()
    assert (table["g4dn.8xlarge"], table["inf2.xlarge"]) == (50000, 2083)
    assert len(table) == 1349


def test_a_type_label_no_type_of_the_pool_gives_is_refused_naming_the_key():
    """g6 family and 8 GPUs on the dev pool's g4dn.xlarge/g5.xlarge: no type would match."""
    errors = errors_with(
        "dev",
        "nodePools",
        labels={
            labels.KARPENTER_INSTANCE_FAMILY: "g6",
            labels.KARPENTER_GPU_COUNT: "8",
            "karpenter.k8s.aws/instance-size": "xlarge",
        },
    )
    tail = (
        " (Karpenter adds template labels to the NodePool's requirements: no type would match "
        "and no node could launch), or no such label"
    )
    at = "trainforge:nodePools[0].labels."
    assert sorted(errors) == [
        f"{at}{labels.KARPENTER_INSTANCE_FAMILY}: got 'g6'; expected a value one of the pool's "
        f"instance types gives {labels.KARPENTER_INSTANCE_FAMILY}: g4dn, g5{tail}",
        f"{at}{labels.KARPENTER_GPU_COUNT}: got '8'; expected a value one of the pool's "
        f"instance types gives {labels.KARPENTER_GPU_COUNT}: 1{tail}",
    ]


def test_type_labels_no_one_type_gives_together_are_refused():
    errors = errors_with(
        "dev",
        "nodePools",
        labels={
            labels.KARPENTER_INSTANCE_FAMILY: "g5",
            "karpenter.k8s.aws/instance-gpu-name": "t4",  # g4dn's, not g5's
        },
    )
    assert len(errors) == 1
    assert errors[0].startswith(
        "trainforge:nodePools[0].labels: got 'karpenter.k8s.aws/instance-family=g5, "
    )
    assert "no one type has them all" in errors[0]


def test_type_labels_a_type_of_the_pool_gives_pass():
    ok = {labels.KARPENTER_INSTANCE_FAMILY: "g5", "karpenter.k8s.aws/instance-gpu-name": "a10g"}
    assert errors_with("dev", "nodePools", labels=ok) == []


# --- how many labels and taints -----------------------------------------------------------


def _template_labels_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["template"]["properties"]["metadata"]["properties"]["labels"]


def test_the_template_label_bound_is_the_crd_s():
    assert _template_labels_schema()["maxProperties"] == NODEPOOL_LABELS_MAX


def test_more_labels_than_the_nodepool_crd_holds_are_refused():
    """The platform's own label counts: 99 of the user's fit, 100 do not."""
    room = NODEPOOL_LABELS_MAX - len(
        pool_labels(NodePoolConfig(name="p", instanceTypes=["g5.xlarge"]))
    )
    fits = {f"example.com/l{i}": "v" for i in range(room)}
    assert errors_with("dev", "nodePools", labels=fits) == []
    errors = errors_with("dev", "nodePools", labels={**fits, "example.com/one-more": "v"})
    assert errors == [
        f"trainforge:nodePools[0].labels: got '{room + 1} labels'; expected at most {room} "
        f"(the NodePool CRD holds {NODEPOOL_LABELS_MAX} template labels, the platform's among "
        "them)"
    ]


def test_the_eks_taint_bounds_are_botocore_s_model():
    import botocore.session  # noqa: PLC0415

    model = botocore.session.get_session().get_service_model("eks")
    assert model.shape_for("taintKey").metadata["max"] == EKS_TAINT_KEY_MAX
    assert model.shape_for("taintValue").metadata["max"] == 63  # Kubernetes' label value bound


def test_a_node_group_taint_key_eks_refuses_is_refused_naming_it():
    """A 64-character prefixed key is a Kubernetes taint key; EKS refuses it."""
    long_key = "example.com/" + "a" * 52
    raw = {"name": "g", "instanceTypes": ["g5.xlarge"], "taints": [{"key": long_key}]}
    errors: list[str] = []
    assert validate(NodeGroupConfig, raw, "trainforge:nodeGroups[0]", errors) is None
    rule = (
        f"a taint key EKS accepts: at most {EKS_TAINT_KEY_MAX} characters, not starting with "
        "kubernetes.io/, k8s.io/, eks.amazonaws.com/"
    )
    assert errors == [f"trainforge:nodeGroups[0].taints[0].key: got '{long_key}'; expected {rule}"]
    reserved = {**raw, "taints": [{"key": "eks.amazonaws.com/mine"}, {"key": "k8s.io/x"}]}
    errors = []
    assert validate(NodeGroupConfig, reserved, "trainforge:nodeGroups[0]", errors) is None
    assert errors == [
        f"trainforge:nodeGroups[0].taints[0].key: got 'eks.amazonaws.com/mine'; expected {rule}",
        f"trainforge:nodeGroups[0].taints[1].key: got 'k8s.io/x'; expected {rule}",
    ]
    # a Karpenter pool's nodes take it (the API server's bound is the qualified name's)
    pool = {"name": "p", "instanceTypes": ["g5.xlarge"], "taints": [{"key": long_key}]}
    assert validate(NodePoolConfig, pool, "trainforge:nodePools[0]", []) is not None


@pytest.mark.parametrize("fsx", [False, True])
def test_more_taints_than_eks_holds_on_a_group_are_refused(fsx):
    """EKS's 50 count the platform's GPU taint, and the FSx startup taint with FSx."""
    room = EKS_GROUP_TAINTS_MAX - (2 if fsx else 1)

    def group(n: int) -> NodeGroupConfig:
        taints = [{"key": f"example.com/t{i}"} for i in range(n)]
        return NodeGroupConfig(name="g", instanceTypes=["g5.xlarge"], taints=taints)

    assert taint_problems([group(room)], [], fsx, {}) == []
    assert taint_problems([group(room + 1)], [], fsx, {}) == [
        f"trainforge:nodeGroups[0].taints: got '{room + 1} taints'; expected at most {room} "
        f"(EKS holds {EKS_GROUP_TAINTS_MAX} taints per node group, the platform's among them)"
    ]


def test_the_docs_name_what_is_refused():
    """The schema's descriptions list the platform's keys and the bounds the checks use."""
    group = NodeGroupConfig.model_fields
    pool = NodePoolConfig.model_fields
    for field in (group["labels"], pool["labels"]):
        assert all(f"`{k}`" in field.description for k in platform_label_keys())
    room = NODEPOOL_LABELS_MAX - len(
        pool_labels(NodePoolConfig(name="p", instanceTypes=["g5.xlarge"]))
    )
    assert f"at most {room} (the CRD holds {NODEPOOL_LABELS_MAX}" in pool["labels"].description
    derived = labels.karpenter_type_labels(*UPSTREAM[0][0], **UPSTREAM[0][1])  # every label
    for key in derived:  # `karpenter.k8s.aws/instance-family`, then `-size` and the others
        short = key.replace("karpenter.k8s.aws/instance", "")
        description = pool["labels"].description
        assert f"`{key}`" in description or f"`{short}`" in description, key
    assert f"`{labels.ZONE}`" in pool["labels"].description
    assert f"at most {EKS_GROUP_TAINTS_MAX} taints" in group["taints"].description
    assert f"keys of at most {EKS_TAINT_KEY_MAX} characters" in group["taints"].description
    assert all(f"`{p}`" in group["taints"].description for p in labels.EKS_RESERVED_LABEL_PREFIXES)


# --- the zone label ----------------------------------------------------------------------------


def zone_errors(stack: str, i: int, zone: str) -> list[str]:
    """check_stack under the stack's own config (its region's zones and offerings)."""
    config = copy.deepcopy(read_stack(ROOT, stack).config)
    config["trainforge:nodePools"][i]["labels"] = {labels.ZONE: zone}
    run = run_mocked(
        lambda: check_stack(config, known_rules=known_rule_ids(), lookups=True), config
    )
    return run.result.errors


def zone_line(stack: str, i: int, zone: str, zones: str) -> str:
    return (
        f"trainforge:nodePools[{i}].labels.{labels.ZONE}: got '{zone}'; expected a zone the "
        f"pool's nodes can be in: {zones} (the VPC's private subnets' zones that offer its "
        "types; Karpenter adds template labels to the NodePool's requirements: no node could "
        "launch), or no such label"
    )


def test_a_zone_outside_the_stack_s_subnets_is_refused_naming_the_key():
    """dev's new VPC has two zones (availabilityZones: 2): a third one holds no node."""
    assert zone_errors("dev", 0, "us-west-2c") == [
        zone_line("dev", 0, "us-west-2c", "us-west-2a, us-west-2b")
    ]
    assert zone_errors("dev", 0, "us-west-2b") == []


def test_an_efa_pool_s_zone_is_its_one_subnet_s():
    """prod's EFA p5 pool: one subnet, the first zone offering p5.48xlarge."""
    errors = zone_errors("prod", 0, "mars-1a")
    assert len(errors) == 1
    zones = errors[0].split("can be in: ")[1].split(" (")[0]
    assert len(zones.split(", ")) == 1
    assert zone_errors("prod", 0, zones) == []
