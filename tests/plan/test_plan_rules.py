"""The policy rules as pure functions: each one passes a good input and names its id on a bad one."""

from __future__ import annotations

import json

import pytest

from trainforge.plan import resource_types as T
from trainforge.plan.checks import rules as R


def ids(type_: str, inputs: dict) -> set[str]:
    return {rule.id for rule, _ in R.check_resource(type_, inputs)}


GOOD_EKS_COMPONENT = {
    "enabledClusterLogTypes": list(R.ALL_LOG_TYPES),
    "endpointPrivateAccess": True,
    "endpointPublicAccess": False,
    "encryptionConfigKeyArn": "arn:aws:kms:us-east-1:1:key/k",
}
GOOD_EKS_AWS = {
    "enabledClusterLogTypes": list(R.ALL_LOG_TYPES),
    "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False},
    "encryptionConfig": {"provider": {"keyArn": "arn:k"}, "resources": ["secrets"]},
}


@pytest.mark.parametrize(
    ("type_", "good"), [(T.EKS_COMPONENT, GOOD_EKS_COMPONENT), (T.EKS_CLUSTER, GOOD_EKS_AWS)]
)
def test_eks_good_inputs_pass_for_both_cluster_types(type_, good):
    assert ids(type_, good) == set()


def test_eks_component_defaults_are_flagged():
    # pulumi-eks with nothing set: no logs, public endpoint open to the world, no encryption
    assert ids(T.EKS_COMPONENT, {}) == {"CKV_AWS_37", "CKV_AWS_38", "CKV_AWS_39", "CKV_AWS_58"}


def test_eks_aws_cluster_public_allow_list_is_accepted_but_world_is_not():
    allow = dict(
        GOOD_EKS_AWS,
        vpcConfig={
            "endpointPrivateAccess": True,
            "endpointPublicAccess": True,
            "publicAccessCidrs": ["203.0.113.0/24"],
        },
    )
    assert ids(T.EKS_CLUSTER, allow) == set()
    world = dict(GOOD_EKS_AWS, vpcConfig=dict(allow["vpcConfig"], publicAccessCidrs=["0.0.0.0/0"]))
    assert ids(T.EKS_CLUSTER, world) == {"CKV_AWS_38"}
    public_only = dict(
        GOOD_EKS_AWS,
        vpcConfig={"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]},
    )
    assert ids(T.EKS_CLUSTER, public_only) == {"CKV_AWS_39"}


def test_eks_missing_log_types_are_named():
    msgs = R.eks_log_types(T.EKS_CLUSTER, {"enabledClusterLogTypes": ["api"]})
    assert "audit" in msgs[0] and "scheduler" in msgs[0]


def test_eks_unknown_values_never_fail():
    inputs = dict(GOOD_EKS_COMPONENT, enabledClusterLogTypes=R.UNKNOWN)
    assert ids(T.EKS_COMPONENT, inputs) == set()


@pytest.mark.parametrize("type_", [R.LAUNCH_TEMPLATE, R.EC2_NODE_CLASS])
def test_imds(type_):
    def inputs(opts):
        return (
            {"spec": {"metadataOptions": opts}}
            if type_ == R.EC2_NODE_CLASS
            else {"metadataOptions": opts}
        )

    assert ids(type_, inputs({"httpTokens": "required", "httpPutResponseHopLimit": 1})) == set()
    assert ids(type_, inputs({"httpTokens": "optional", "httpPutResponseHopLimit": 1})) == {
        "CKV_AWS_79"
    }
    assert ids(type_, inputs({"httpTokens": "required", "httpPutResponseHopLimit": 2})) == {
        "CKV_AWS_341"
    }
    # not judged: the metadata endpoint is off, or the options are known only to the cloud
    assert ids(type_, inputs({"httpEndpoint": "disabled", "httpTokens": "optional"})) == set()
    assert ids(type_, inputs(R.UNKNOWN)) == set()


def test_launch_template_without_metadata_options_fails_but_nodeclass_defaults_are_safe():
    assert ids(R.LAUNCH_TEMPLATE, {}) == {"CKV_AWS_79", "CKV_AWS_341"}
    assert ids(R.EC2_NODE_CLASS, {"spec": {}}) == set()


def test_s3_resources():
    kms = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}
    aes = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}
    assert ids(T.S3_SSE, kms) == set()
    assert ids(T.S3_SSE, aes) == {"CKV_AWS_145"}
    assert ids(R.S3_VERSIONING, {"versioningConfiguration": {"status": "Enabled"}}) == set()
    assert ids(R.S3_VERSIONING, {"versioningConfiguration": {"status": "Suspended"}}) == {
        "CKV_AWS_21"
    }
    full = dict.fromkeys(R.PAB_FLAGS, True)
    assert ids(R.S3_PAB, full) == set()
    assert ids(R.S3_PAB, dict(full, restrictPublicBuckets=False)) == {"CKV2_AWS_6"}


def test_s3_tls_policy():
    deny = {
        "Statement": [
            {
                "Effect": "Deny",
                "Action": "s3:*",
                "Principal": "*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ]
    }
    allow = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Principal": "*"}]}
    assert ids(T.S3_POLICY, {"policy": json.dumps(deny)}) == set()
    assert ids(T.S3_POLICY, {"policy": json.dumps(allow)}) == {"TRAINFORGE_S3_TLS"}
    assert ids(T.S3_POLICY, {"policy": R.UNKNOWN}) == set()


def test_s3_stack_rules_link_bucket_parts_by_dependency():
    bucket = R.StackResource("urn:b", T.S3_BUCKET, "ckpt", {})
    sse = R.StackResource("urn:s", T.S3_SSE, "sse", {"bucket": R.UNKNOWN}, {"bucket": ["urn:b"]})
    found = {(rule.id, urn) for rule, urn, _ in R.check_stack([bucket, sse])}
    assert found == {
        ("CKV_AWS_21", "urn:b"),
        ("CKV2_AWS_6", "urn:b"),
        ("TRAINFORGE_S3_TLS", "urn:b"),
    }
    # a part attached to another bucket does not count for this one
    other = R.StackResource("urn:s", T.S3_SSE, "sse", {"bucket": "x"}, {"bucket": ["urn:other"]})
    assert ("CKV_AWS_145", "urn:b") in {(r.id, u) for r, u, _ in R.check_stack([bucket, other])}


def test_fsx_kms_sqs_iam():
    assert ids(T.FSX_LUSTRE, {"deploymentType": "PERSISTENT_2", "kmsKeyId": "arn:k"}) == set()
    assert ids(T.FSX_LUSTRE, {"deploymentType": "PERSISTENT_2"}) == {"CKV_AWS_190"}
    assert ids(T.FSX_LUSTRE, {"deploymentType": "SCRATCH_2"}) == set()  # no key possible
    assert ids(T.KMS_KEY, {"enableKeyRotation": True}) == set()
    assert ids(T.KMS_KEY, {}) == {"CKV_AWS_7"}
    assert ids(R.SQS_QUEUE, {"kmsMasterKeyId": "alias/k"}) == set()
    assert ids(R.SQS_QUEUE, {}) == {"CKV_AWS_27"}
    admin = json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    scoped = json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
    assert ids("aws:iam/policy:Policy", {"policy": admin}) == {"CKV_AWS_62"}
    assert ids("aws:iam/rolePolicy:RolePolicy", {"policy": scoped}) == set()
    assert ids(T.IAM_ROLE, {"inlinePolicies": [{"name": "x", "policy": admin}]}) == {"CKV_AWS_62"}


SECURE_SC = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def deployment(container: dict, **pod) -> dict:
    c = {
        "name": "app",
        "image": "public.ecr.aws/nginx/nginx:1.27",
        "securityContext": dict(SECURE_SC),
    }
    c.update(container)
    return {
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"template": {"spec": {"serviceAccountName": "app", "containers": [c], **pod}}},
    }


DEPLOY = "kubernetes:apps/v1:Deployment"


def test_pod_rules_good():
    assert ids(DEPLOY, deployment({})) == set()


@pytest.mark.parametrize(
    ("container", "pod", "rule"),
    [
        ({"securityContext": dict(SECURE_SC, runAsNonRoot=False)}, {}, "CKV_K8S_23"),
        ({"securityContext": dict(SECURE_SC, runAsUser=0)}, {}, "CKV_K8S_23"),
        ({"securityContext": dict(SECURE_SC, allowPrivilegeEscalation=True)}, {}, "CKV_K8S_20"),
        (
            {"securityContext": dict(SECURE_SC, capabilities={"drop": ["NET_RAW"]})},
            {},
            "CKV_K8S_37",
        ),
        (
            {"securityContext": dict(SECURE_SC, seccompProfile={"type": "Unconfined"})},
            {},
            "CKV_K8S_31",
        ),
        (
            {"resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}},
            {},
            "TRAINFORGE_GPU_REQUESTS",
        ),
        ({"image": "public.ecr.aws/nginx/nginx"}, {}, "CKV_K8S_14"),
        ({"image": "registry.local:5000/nginx"}, {}, "CKV_K8S_14"),
        ({"image": "public.ecr.aws/nginx/nginx:latest"}, {}, "CKV_K8S_14"),
        ({"image": "pytorch/pytorch:2.13.0-cuda12.6-cudnn9-runtime"}, {}, "TRAINFORGE_DOCKER_HUB"),
        ({"image": "docker.io/library/busybox:1.37.0"}, {}, "TRAINFORGE_DOCKER_HUB"),
        ({}, {"serviceAccountName": "default"}, "TRAINFORGE_DEFAULT_SA"),
        ({"securityContext": dict(SECURE_SC, privileged=True)}, {}, "CKV_K8S_16"),
    ],
)
def test_pod_rules_bad(container, pod, rule):
    assert ids(DEPLOY, deployment(container, **pod)) == {rule}


def test_pod_level_security_context_counts_and_digests_are_pinned():
    d = deployment(
        {
            "image": "public.ecr.aws/nginx/nginx@sha256:" + "a" * 64,
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        },
        securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    )
    assert ids(DEPLOY, d) == set()


def test_privileged_allowed_only_for_documented_system_daemonset():
    ds = deployment({"securityContext": dict(SECURE_SC, privileged=True)})
    ds["metadata"] = {
        "name": "efa",
        "namespace": "kube-system",
        "annotations": {R.PRIVILEGED_REASON_ANNOTATION: "needs /dev/infiniband"},
    }
    assert ids("kubernetes:apps/v1:DaemonSet", ds) == set()
    ds["metadata"]["annotations"] = {}
    assert ids("kubernetes:apps/v1:DaemonSet", ds) == {"CKV_K8S_16"}
    ds["metadata"] = {
        "name": "x",
        "namespace": "team-a",
        "annotations": {R.PRIVILEGED_REASON_ANNOTATION: "because"},
    }
    assert ids("kubernetes:apps/v1:DaemonSet", ds) == {"CKV_K8S_16"}


def test_pytorchjob_replica_templates_are_checked():
    spec = deployment({"image": "public.ecr.aws/x/pytorch"})["spec"]["template"]["spec"]
    job = {"spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": spec}}}}}
    found = R.check_resource("kubernetes:kubeflow.org/v1:PyTorchJob", job)
    assert [(r.id, m.split(":")[0]) for r, m in found] == [("CKV_K8S_14", "Master pod")]


def test_rule_ids_are_unique_per_resource_rule():
    assert len({r.id for r in R.RESOURCE_RULES}) == len(R.RESOURCE_RULES)


def _root_job(kind="Job", reason="creates a root-owned directory", add=("CHOWN",), escalate=False):
    container = {
        "name": "mkdir",
        "image": "public.ecr.aws/docker/library/busybox:1.37.0",
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": escalate,
            "capabilities": {"drop": ["ALL"], "add": list(add)},
        },
    }
    annotations = {R.ROOT_REASON_ANNOTATION: reason} if reason else {}
    pod = {
        "containers": [container],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    if kind == "Job":
        spec = {"template": {"spec": pod}}
    else:
        spec = {"selector": {}, "template": {"spec": pod}}
    return f"kubernetes:{'batch' if kind == 'Job' else 'apps'}/v1:{kind}", {
        "metadata": {"name": "x", "namespace": "team", "annotations": annotations},
        "spec": spec,
    }


def test_root_is_allowed_only_for_a_documented_locked_down_job():
    def non_root(case):
        type_, inputs = case
        return [
            m for _, spec in R.pod_specs(type_, inputs) for m in R.pod_non_root(type_, inputs, spec)
        ]

    assert non_root(_root_job()) == []
    assert non_root(_root_job(reason=None))  # no written reason
    assert non_root(_root_job(reason="  "))
    assert non_root(_root_job(kind="Deployment"))  # long-running pods never
    assert non_root(_root_job(add=("CHOWN", "SYS_ADMIN")))  # more than CHOWN
    assert non_root(_root_job(escalate=True))


# --- GPU capacity: health monitoring and repair (stack rules, issue 15) ---------------------


def _res(type_, name, inputs):
    return R.StackResource(f"urn:{name}", type_, name, inputs)


AGENT_OK = _res(
    T.EKS_ADDON,
    "agent",
    {"addonName": "eks-node-monitoring-agent",
     "configurationValues": json.dumps({"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}})},
)  # fmt: skip
GPU_GROUP = _res(
    T.NODE_GROUP,
    "p5-group",
    {"amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["p5.48xlarge"],
     "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
     "nodeRepairConfig": {"enabled": True}},
)  # fmt: skip
# a pool that is GPU only through its instance-type requirement (no GPU taint)
GPU_POOL_UNTAINTED = _res(
    R.NODE_POOL,
    "g6-pool",
    {"spec": {"template": {"spec": {"requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6.12xlarge"]}
    ], "taints": [{"key": "team", "value": "vision", "effect": "NoSchedule"}]}}}},
)  # fmt: skip
CPU_POOL = _res(
    R.NODE_POOL,
    "cpu",
    {"spec": {"template": {"spec": {"requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.9xlarge"]}
    ]}}}},
)  # fmt: skip
KARPENTER_ON = _res(
    T.HELM_RELEASE,
    "karpenter",
    {"chart": "oci://public.ecr.aws/karpenter/karpenter",
     "values": {"settings": {"featureGates": {"nodeRepair": True}}}},
)  # fmt: skip


def _found(rule, resources):
    return {urn.removeprefix("urn:"): msg for urn, msg in rule(resources)}


def test_gpu_capacity_is_recognised_by_ami_types_taints_and_requirements():
    assert R.gpu_capacity(GPU_GROUP) and R.gpu_capacity(GPU_POOL_UNTAINTED)
    assert not R.gpu_capacity(CPU_POOL)
    cpu_group = _res(T.NODE_GROUP, "sys", {"amiType": "AL2023_x86_64_STANDARD",
                                            "instanceTypes": ["m6i.large"]})  # fmt: skip
    assert not R.gpu_capacity(cpu_group)


def test_healthy_gpu_capacity_passes_both_rules():
    res = [AGENT_OK, GPU_GROUP, GPU_POOL_UNTAINTED, CPU_POOL, KARPENTER_ON]
    assert _found(R.gpu_health_monitoring, res) == {}
    assert _found(R.gpu_node_repair, res) == {}


def test_missing_agent_or_repair_names_each_gpu_resource_only():
    res = [GPU_GROUP, GPU_POOL_UNTAINTED, CPU_POOL]
    assert set(_found(R.gpu_health_monitoring, res)) == {"p5-group", "g6-pool"}
    no_repair = _res(T.NODE_GROUP, "p5-group", {**GPU_GROUP.inputs, "nodeRepairConfig": None})
    karpenter_off = _res(T.HELM_RELEASE, "karpenter", {"chart": "karpenter", "values": {}})
    found = _found(R.gpu_node_repair, [no_repair, GPU_POOL_UNTAINTED, CPU_POOL, karpenter_off])
    assert set(found) == {"p5-group", "g6-pool"}
    assert "nodeRepairConfig" in found["p5-group"] and "NodeRepair" in found["g6-pool"]


def test_an_agent_whose_dcgm_server_cannot_land_on_the_pool_is_flagged():
    default_agent = _res(T.EKS_ADDON, "agent", {"addonName": "eks-node-monitoring-agent"})
    found = _found(R.gpu_health_monitoring, [default_agent, GPU_GROUP, GPU_POOL_UNTAINTED])
    assert (
        "dcgm-server" in found["p5-group"] and "nvidia.com/gpu=true:NoSchedule" in found["p5-group"]
    )
    assert "team=vision:NoSchedule" in found["g6-pool"]


def test_unknown_values_never_fail_the_gpu_rules():
    agent = _res(T.EKS_ADDON, "agent", {"addonName": "eks-node-monitoring-agent",
                                         "configurationValues": R.UNKNOWN})  # fmt: skip
    karpenter = _res(T.HELM_RELEASE, "karpenter", {
        "chart": "karpenter", "values": {"settings": {"featureGates": {"nodeRepair": R.UNKNOWN}}}
    })  # fmt: skip
    group = _res(
        T.NODE_GROUP, "g", {**GPU_GROUP.inputs, "nodeRepairConfig": {"enabled": R.UNKNOWN}}
    )
    res = [agent, karpenter, group, GPU_POOL_UNTAINTED]
    assert _found(R.gpu_health_monitoring, res) == {} and _found(R.gpu_node_repair, res) == {}


@pytest.mark.parametrize(
    ("instance_type", "gpu"),
    [
        ("p5.48xlarge", True),
        ("g6f.xlarge", True),  # in the catalog without a GPU model: its DCGM sizes say NVIDIA
        ("p6e-gb200.36xlarge", True),
        ("g4ad.xlarge", False),  # AMD Radeon Pro V520: no nvidia.com/gpu, not in the catalog
        ("g9z.xlarge", False),  # a family the catalog does not list
        ("trn1.32xlarge", False),  # in the catalog, Trainium
        ("c5.9xlarge", False),
    ],
)
def test_gpu_capacity_by_instance_type_is_the_catalogs_answer(instance_type, gpu):
    from trainforge.core import catalog

    group = _res(T.NODE_GROUP, "g", {"amiType": "AL2023_x86_64_STANDARD",
                                      "instanceTypes": [instance_type]})  # fmt: skip
    assert R.gpu_capacity(group) is gpu
    assert catalog.nvidia_gpu_family(instance_type) is gpu


# The four pod-security rules are checkov's checks first: the id is checkov's promise, so a
# container checkov 3.3.30 fails (`ckv`, read from its check in checkov/kubernetes/checks/
# resource/k8s/ and confirmed by running it: `test_checkov_verdicts_are_checkovs_own`) the
# rule fails too. Beyond checkov the rule fails what really runs as root or unconfined.
# Each row is also judged by Pod Security's restricted level (core/pod_security, the check
# ids in `_RESTRICTED`): the rule agrees with it unless the row says why checkov's rule
# means something else (and then the two must really differ).
_RD, _LH, _UN = ({"type": t} for t in ("RuntimeDefault", "Localhost", "Unconfined"))
_RESTRICTED = {
    "CKV_K8S_20": {"allowPrivilegeEscalation"},
    "CKV_K8S_23": {"runAsNonRoot", "runAsUser"},
    "CKV_K8S_37": {"capabilities_restricted"},
    "CKV_K8S_31": {"seccompProfile_restricted"},
}
_UID_ONLY = "checkov passes a non-zero runAsUser; restricted wants runAsNonRoot: true"
_ONLY_RD = "checkov passes only RuntimeDefault; restricted admits Localhost too"
_ROWS = [  # (rule, pod securityContext, container securityContext, checkov fails, rule fails, why)
    ("CKV_K8S_20", {}, {"allowPrivilegeEscalation": True}, True, True, ""),
    ("CKV_K8S_20", {}, {"allowPrivilegeEscalation": None}, True, True, ""),  # unset: may
    ("CKV_K8S_20", {}, {}, False, False, ""),
    ("CKV_K8S_23", {}, {}, False, False, ""),
    ("CKV_K8S_23", {"runAsNonRoot": None}, {"runAsNonRoot": None}, True, True, ""),
    ("CKV_K8S_23", {"runAsNonRoot": None, "runAsUser": 1000}, {"runAsNonRoot": None}, False,
     False, _UID_ONLY),
    ("CKV_K8S_23", {"runAsNonRoot": None}, {"runAsNonRoot": False, "runAsUser": 1000}, False,
     False, _UID_ONLY),
    # the pod's runAsUser does not excuse a container's own runAsNonRoot: false for checkov
    ("CKV_K8S_23", {"runAsUser": 1000}, {"runAsNonRoot": False}, True, True, ""),
    # UID 0 beside runAsNonRoot: true: checkov passes, the kubelet refuses to start it
    ("CKV_K8S_23", {}, {"runAsUser": 0}, False, True, ""),
    ("CKV_K8S_23", {"runAsNonRoot": None, "runAsUser": 0}, {"runAsNonRoot": True}, False,
     True, ""),
    ("CKV_K8S_37", {}, {}, False, False, ""),
    ("CKV_K8S_37", {}, {"capabilities": None}, True, True, ""),
    ("CKV_K8S_37", {}, {"capabilities": {"drop": ["NET_RAW"]}}, True, True, ""),
    ("CKV_K8S_37", {}, {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
     False, False, ""),
    ("CKV_K8S_37", {}, {"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}, False, False,
     "checkov's CKV_K8S_37 never reads add; restricted refuses any but NET_BIND_SERVICE"),
    ("CKV_K8S_37", {}, {"capabilities": {"drop": ["all"]}}, False, False,
     "checkov (and containerd) take a lower-case all; restricted wants the exact ALL"),
    ("CKV_K8S_31", {"seccompProfile": _RD}, {"seccompProfile": None}, False, False, ""),
    ("CKV_K8S_31", {"seccompProfile": _UN}, {"seccompProfile": None}, True, True, ""),
    ("CKV_K8S_31", {"seccompProfile": _LH}, {"seccompProfile": None}, True, True, _ONLY_RD),
    ("CKV_K8S_31", {}, {"seccompProfile": None}, True, True, ""),
    ("CKV_K8S_31", {}, {"seccompProfile": _LH}, True, True, _ONLY_RD),
    # the pod's Unconfined fails though every container overrides it (checkov reads the
    # pod's profile first; restricted refuses the pod's field)
    ("CKV_K8S_31", {"seccompProfile": _UN}, {"seccompProfile": _RD}, True, True, ""),
    ("CKV_K8S_31", {"seccompProfile": _UN}, {"seccompProfile": _LH}, True, True, ""),
    # under a pod's RuntimeDefault checkov reads no container: the rule still fails one
    # that runs unconfined (a profile without a type: the pod's is not read either)
    ("CKV_K8S_31", {"seccompProfile": _RD}, {"seccompProfile": _UN}, False, True, ""),
    ("CKV_K8S_31", {"seccompProfile": _RD}, {"seccompProfile": {}}, False, True, ""),
    ("CKV_K8S_31", {"seccompProfile": _RD}, {"seccompProfile": _LH}, False, False, ""),
]  # fmt: skip


def _row_deployment(pod_sc: dict, container_sc: dict) -> dict:
    """A Deployment of one container: SECURE_SC and a pod runAsNonRoot: true, with the row's
    fields over them (None removes one)."""

    def merged(base: dict, over: dict) -> dict:
        return {k: v for k, v in {**base, **over}.items() if v is not None}

    return deployment(
        {"securityContext": merged(SECURE_SC, container_sc)},
        securityContext=merged({"runAsNonRoot": True}, pod_sc),
    )


@pytest.mark.parametrize(("rule", "pod_sc", "container_sc", "ckv", "want", "why"), _ROWS)
def test_pod_security_rules_keep_checkovs_promise_and_agree_with_restricted_pod_security(
    rule, pod_sc, container_sc, ckv, want, why
):
    from trainforge.core import pod_security as ps

    d = _row_deployment(pod_sc, container_sc)
    found = rule in ids(DEPLOY, d)
    assert found == want
    assert found or not ckv  # a container checkov fails, the rule fails
    template = d["spec"]["template"]
    refused = {r.check for r in ps.evaluate(ps.Policy("restricted", ps.LATEST), template)}
    assert found == bool(refused & _RESTRICTED[rule]) or why
    assert found != bool(refused & _RESTRICTED[rule]) or not why  # a difference is real


_CHECKOV = """
import json, sys
from checkov.kubernetes.checks.resource.k8s.AllowPrivilegeEscalation import check as c20
from checkov.kubernetes.checks.resource.k8s.RootContainers import check as c23
from checkov.kubernetes.checks.resource.k8s.MinimizeCapabilities import check as c37
from checkov.kubernetes.checks.resource.k8s.Seccomp import check as c31
checks = {"CKV_K8S_20": c20, "CKV_K8S_23": c23, "CKV_K8S_37": c37, "CKV_K8S_31": c31}
out = []
for rule, conf in json.load(sys.stdin):
    checks[rule].entity_type = conf["kind"]
    out.append(checks[rule].scan_spec_conf(conf).name == "FAILED")
print(json.dumps(out))
"""


def test_checkov_verdicts_are_checkovs_own():
    """The rows' `ckv` column is what the pinned checkov says, where `make checkov` has made
    its virtualenv (.ci-venv): the transcription cannot drift from the check it names."""
    import subprocess
    from pathlib import Path

    python = Path(__file__).resolve().parents[2] / ".ci-venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .ci-venv (make checkov makes it)")
    confs = [
        (rule, {"kind": "Deployment", **_row_deployment(pod, c)}) for rule, pod, c, *_ in _ROWS
    ]
    out = subprocess.run(
        [str(python), "-c", _CHECKOV], input=json.dumps(confs), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    want = [(rule, pod, c, ckv) for rule, pod, c, ckv, *_ in _ROWS]
    got = json.loads(out.stdout)
    assert [(*w[:3], g) for w, g in zip(want, got, strict=True)] == want
