"""PlatformServices under Pulumi mocks: the declared resources carry the properties users rely on.

Two stacks are declared once per module (prod-like: PERSISTENT_2 + S3 association, EFA,
managed Prometheus, MLflow; dev-like: SCRATCH_2, external Prometheus, operator from a Helm
chart, no GPUs) and the tests read the recorded inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import kubernetes_validate
import pulumi
import pulumi_kubernetes as k8s
import pytest

from trainforge.core import versions
from trainforge.plan.checks import rules
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.services import PlatformServices, PlatformServicesArgs
from trainforge.platform.services_config import parse_services_config

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
HELM = "kubernetes:helm.sh/v3:Release"
NODE_SG = "sg-nodes"

PROD = {
    "fsx": {
        "deploymentType": "PERSISTENT_2",
        "storageCapacityGiB": 4800,
        "perUnitStorageThroughput": 500,
        "dataRepository": {"dataRepositoryPath": "s3://datasets-bkt/imagenet"},
    },
    "checkpoints": {"noncurrentVersionExpirationDays": 14, "abortIncompleteMultipartDays": 3},
    "mlflow": {"enabled": True},
    "teams": [
        {"name": "vision", "quota": {"gpus": 16, "cpu": "192", "memory": "1536Gi", "pods": 40}},
        {
            "name": "nlp",
            "quota": {"gpus": "8", "cpu": "96", "memory": "768Gi", "pods": "20"},
            "podSecurity": "restricted",
        },
    ],
}
DEV = {
    "fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 1200},
    "monitoring": {"mode": "external"},
    "trainingOperator": {
        "chart": {"repository": "https://charts.example.com/kubeflow", "version": "1.9.4"}
    },
    "mlflow": {"enabled": True, "backend": "sqlite-ephemeral"},
    "teams": [{"name": "sandbox", "quota": {"gpus": 0, "cpu": "8", "memory": "32Gi", "pods": 10}}],
}


class LustreMocks(TrainforgeMocks):
    """The shared mocks plus the outputs FSx assigns (DNS name, mount name)."""

    def new_resource(self, args):
        rid, outputs = super().new_resource(args)
        if args.typ == FSX:
            outputs = {
                **outputs,
                "dnsName": "fs-1.fsx.us-west-2.amazonaws.com",
                "mountName": "abcd1234",
            }
            self.resources[-1].outputs = outputs
        return rid, outputs


def declare(raw: dict, gpu: bool, efa: bool, kms_key_arn=None):
    errors: list[str] = []
    cfg = parse_services_config(raw, errors)
    assert errors == []

    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        return PlatformServices(
            "svc",
            PlatformServicesArgs(
                config=cfg,
                cluster_name="tf-cluster",
                k8s_provider=provider,
                vpc_id="vpc-123",
                vpc_cidr="10.0.0.0/16",
                private_subnet_ids=["subnet-a", "subnet-b"],
                node_security_group_ids=[NODE_SG],
                region="us-west-2",
                account_id="123456789012",
                kms_key_arn=kms_key_arn,
                gpu_nodes=gpu,
                efa_nodes=efa,
            ),
        )

    return run_mocked(program, mocks=LustreMocks())


@pytest.fixture(scope="module")
def prod():
    return declare(PROD, gpu=True, efa=True)


@pytest.fixture(scope="module")
def dev():
    return declare(DEV, gpu=False, efa=False, kms_key_arn="arn:aws:kms:us-west-2:1:key/given")


def one(run, typ, name=None):
    found = [r for r in run.of_type(typ) if name is None or r.name == name]
    assert len(found) == 1, [r.name for r in run.of_type(typ)]
    return found[0]


def doc(value) -> dict:
    return json.loads(value) if isinstance(value, str) else value


def ints(value):
    """The mocks carry numbers as floats; Kubernetes schemas want integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return value


# --- components ---------------------------------------------------------------------------------


def test_every_component_has_the_trainforge_token_and_children_are_parented(prod):
    tokens = {r.type for r in prod.resources if r.type.startswith("trainforge:index:")}
    assert tokens == {
        "trainforge:index:PlatformServices",
        "trainforge:index:FsxLustre",
        "trainforge:index:CheckpointBucket",
        "trainforge:index:TrainingOperator",
        "trainforge:index:DevicePlugins",
        "trainforge:index:Monitoring",
        "trainforge:index:TeamNamespaces",
        "trainforge:index:Kueue",
    }
    top = one(prod, "trainforge:index:PlatformServices")
    for r in prod.resources:
        if r.type not in ("trainforge:index:PlatformServices", "pulumi:providers:kubernetes"):
            assert r.parent and r.parent != "", r.name
    assert top.urn


# --- FSx ------------------------------------------------------------------------------------------


def test_fsx_persistent_file_system(prod):
    fs = one(prod, FSX).inputs
    kms = one(prod, "aws:kms/key:Key")
    assert kms.inputs["enableKeyRotation"] is True
    assert fs["deploymentType"] == "PERSISTENT_2"
    assert fs["perUnitStorageThroughput"] == 500
    assert fs["storageCapacity"] == 4800
    assert fs["dataCompressionType"] == "LZ4"
    assert fs["kmsKeyId"] == kms.outputs["arn"]
    assert fs["subnetIds"] == "subnet-a"
    assert fs["fileSystemTypeVersion"] == versions.LUSTRE_VERSION
    assert rules.check_resource(FSX, fs) == []


def test_fsx_scratch_uses_the_aws_managed_key_and_no_throughput(dev):
    fs = one(dev, FSX).inputs
    assert fs["deploymentType"] == "SCRATCH_2"
    assert "kmsKeyId" not in fs and "perUnitStorageThroughput" not in fs
    assert dev.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation") == []


def test_fsx_security_group_admits_lustre_from_nodes_only(prod):
    sg = one(prod, "aws:ec2/securityGroup:SecurityGroup")
    sg_id = sg.id
    ingress = prod.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    into_fsx = {
        (r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
        for r in ingress
        if r.inputs["securityGroupId"] == sg_id
    }
    assert into_fsx == {
        (988, 988, NODE_SG),
        (1018, 1023, NODE_SG),
        (988, 988, sg_id),
        (1018, 1023, sg_id),
    }
    for r in ingress:
        assert r.inputs["ipProtocol"] == "tcp"
        assert "cidrIpv4" not in r.inputs and "cidrIpv6" not in r.inputs
    into_nodes = {
        (r.inputs["fromPort"], r.inputs["toPort"])
        for r in ingress
        if r.inputs["securityGroupId"] == NODE_SG
    }
    assert into_nodes == {(988, 988), (1018, 1023)}
    assert one(prod, FSX).inputs["securityGroupIds"] == [sg_id]


def test_fsx_data_repository_association(prod):
    dra = one(prod, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation").inputs
    assert dra["dataRepositoryPath"] == "s3://datasets-bkt/imagenet"
    assert dra["fileSystemPath"] == "/s3"
    assert dra["deleteDataInFilesystem"] is False
    assert dra["s3"]["autoImportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]
    assert dra["s3"]["autoExportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]


def test_fsx_csi_addon_is_pinned_with_a_pod_identity_role(prod):
    addon = one(prod, "aws:eks/addon:Addon").inputs
    assert addon["addonName"] == "aws-fsx-csi-driver"
    assert addon["addonVersion"] == versions.FSX_CSI_ADDON_VERSION
    assert addon["clusterName"] == "tf-cluster"
    pia = [
        r.inputs
        for r in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs["namespace"] == "kube-system"
    ]
    assert [p["serviceAccount"] for p in pia] == ["fsx-csi-controller-sa"]
    policy = doc(one(prod, "aws:iam/rolePolicy:RolePolicy", "svc-fsx-csi").inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"fsx:DescribeFileSystems", "fsx:UpdateFileSystem"}


def test_fsx_static_volume_and_claim_per_team(prod):
    """Each team's volume reaches only its own directory of the shared file system: its PV
    mounts the Lustre fileset `<mountname>/<team>`; only the platform's fsx-admin namespace
    has a claim on the file system root."""
    fs = one(prod, FSX)
    pvs = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in prod.of_type("kubernetes:core/v1:PersistentVolume")
    }
    assert set(pvs) == {"fsx-root", "fsx-vision-dir", "fsx-nlp-dir"}
    pv = pvs["fsx-vision-dir"]
    assert pv["metadata"]["annotations"] == {"trainforge.io/fsx-directory": "/vision"}
    assert pv["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": fs.id,
        "volumeAttributes": {
            "dnsname": "fs-1.fsx.us-west-2.amazonaws.com",
            # the CSI driver mounts <dnsname>@tcp:/<mountname>: here the /vision fileset
            "mountname": "abcd1234/vision",
        },
    }
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["claimRef"] == {"namespace": "vision", "name": "fsx-vision"}
    root = pvs["fsx-root"]["spec"]
    assert root["csi"]["volumeAttributes"]["mountname"] == "abcd1234"
    assert root["claimRef"] == {"namespace": "fsx-admin", "name": "fsx-root"}
    # no team namespace can claim the whole file system
    for name, doc in pvs.items():
        whole = doc["spec"]["csi"]["volumeAttributes"]["mountname"] == "abcd1234"
        assert whole == (doc["spec"]["claimRef"]["namespace"] == "fsx-admin"), name
    pvcs = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs
        for r in prod.of_type("kubernetes:core/v1:PersistentVolumeClaim")
        if r.inputs["metadata"]["name"].startswith("fsx-")
    }
    assert set(pvcs) == {
        ("vision", "fsx-vision"),
        ("nlp", "fsx-nlp"),
        ("fsx-admin", "fsx-root"),
    }
    claim = pvcs[("nlp", "fsx-nlp")]["spec"]
    assert claim["volumeName"] == "fsx-nlp-dir" and claim["storageClassName"] == ""
    assert claim["accessModes"] == ["ReadWriteMany"]
    assert claim["resources"]["requests"]["storage"] == "4800Gi"


def test_fsx_team_directory_belongs_to_the_training_uid(prod):
    """Training pods (the team's own UID, no capabilities) can only write where the team dir
    is theirs; the Job that makes it runs where the whole file system is mounted (fsx-admin),
    so every team gets one, a `restricted` team (nlp) too."""
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import default_team_id

    facts = team_facts(parse_services_config(PROD, []))["vision"]
    uid = default_team_id("vision")
    assert (facts.run_as_user, facts.run_as_group) == (uid, uid)
    assert facts.fsx_sub_path is None  # the claim is the team's directory: no subPath
    jobs = {
        r.inputs["metadata"]["labels"]["trainforge.io/team"]: r.inputs
        for r in prod.of_type("kubernetes:batch/v1:Job")
    }
    assert set(jobs) == {"vision", "nlp"}
    assert {j["metadata"]["namespace"] for j in jobs.values()} == {"fsx-admin"}
    job = jobs["vision"]
    assert job["metadata"]["annotations"][rules.ROOT_REASON_ANNOTATION]
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"][-1].endswith(f"chown {uid}:{uid} /fsx/vision")
    sc = c["securityContext"]
    assert sc["runAsUser"] == 0 and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-root"}}]
    assert c["image"] == versions.BUSYBOX_IMAGE


# --- checkpoint bucket ----------------------------------------------------------------------------


def test_checkpoint_bucket_security(prod):
    key_arn = one(prod, "aws:kms/key:Key").outputs["arn"]
    bucket_id = one(prod, "aws:s3/bucket:Bucket").id
    sse = one(
        prod,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    ).inputs
    rule = sse["rules"][0]
    assert sse["bucket"] == bucket_id
    assert rule["applyServerSideEncryptionByDefault"] == {
        "sseAlgorithm": "aws:kms",
        "kmsMasterKeyId": key_arn,
    }
    assert rule["bucketKeyEnabled"] is True
    ver = one(prod, "aws:s3/bucketVersioning:BucketVersioning").inputs
    assert ver["versioningConfiguration"]["status"] == "Enabled"
    pab = one(prod, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"):
        assert pab[k] is True
    policy = doc(one(prod, "aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    [deny] = policy["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert set(deny["Resource"]) == {f"arn:aws:s3:::{bucket_id}", f"arn:aws:s3:::{bucket_id}/*"}
    lc = {
        r["id"]: r
        for r in one(
            prod, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
        ).inputs["rules"]
    }
    assert lc["expire-noncurrent-versions"]["noncurrentVersionExpiration"]["noncurrentDays"] == 14
    assert (
        lc["abort-incomplete-multipart-uploads"]["abortIncompleteMultipartUpload"][
            "daysAfterInitiation"
        ]
        == 3
    )
    for typ in (
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "aws:s3/bucketVersioning:BucketVersioning",
        "aws:s3/bucketPolicy:BucketPolicy",
        "aws:kms/key:Key",
    ):
        assert rules.check_resource(typ, one(prod, typ).inputs) == [], typ


def test_team_role_reads_and_writes_only_its_prefix(prod):
    bucket_arn = f"arn:aws:s3:::{one(prod, 'aws:s3/bucket:Bucket').id}"
    key_arn = one(prod, "aws:kms/key:Key").outputs["arn"]
    role = one(prod, "aws:iam/role:Role", "svc-ckpt-vision").inputs
    trust = doc(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    # only the team's own ServiceAccount, through Pod Identity, in this account
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "123456789012",
            "aws:RequestTag/eks-cluster-name": "tf-cluster",
            "aws:RequestTag/kubernetes-namespace": "vision",
            "aws:RequestTag/kubernetes-service-account": "training",
        }
    }
    stmts = doc(one(prod, "aws:iam/rolePolicy:RolePolicy", "svc-ckpt-vision").inputs["policy"])[
        "Statement"
    ]
    granted = {}
    for s in stmts:
        acts = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        for a in acts:
            granted[a] = (s["Resource"], s.get("Condition"))
    assert set(granted) == {
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",  # s3transfer aborts a failed multipart upload
        "s3:ListBucket",
        "kms:Decrypt",
        "kms:GenerateDataKey",
    }
    assert granted["s3:PutObject"] == (f"{bucket_arn}/vision/*", None)
    assert granted["s3:AbortMultipartUpload"] == (f"{bucket_arn}/vision/*", None)
    assert granted["s3:ListBucket"] == (bucket_arn, {"StringLike": {"s3:prefix": ["vision/*"]}})
    via_s3 = {"StringEquals": {"kms:ViaService": "s3.us-west-2.amazonaws.com"}}
    assert granted["kms:Decrypt"] == (key_arn, via_s3)
    pia = [
        r.inputs
        for r in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.name == "svc-ckpt-vision"
    ][0]
    assert (pia["namespace"], pia["serviceAccount"], pia["clusterName"]) == (
        "vision",
        "training",
        "tf-cluster",
    )
    assert pia["roleArn"] == one(prod, "aws:iam/role:Role", "svc-ckpt-vision").outputs["arn"]


def test_given_kms_key_is_used_and_none_is_created(dev):
    assert dev.of_type("aws:kms/key:Key") == []
    sse = one(
        dev,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    )
    assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == (
        "arn:aws:kms:us-west-2:1:key/given"
    )


# --- operator, plugins, monitoring ---------------------------------------------------------------


def test_training_operator_from_the_pinned_upstream_overlay(prod):
    d = one(prod, "kubernetes:kustomize/v2:Directory").inputs
    assert d["directory"] == (
        "https://github.com/kubeflow/trainer//manifests/overlays/standalone?ref=v1.9.4"
    )
    assert not [r for r in prod.of_type(HELM) if r.inputs.get("name") == "training-operator"]


def test_training_operator_from_a_configured_chart(dev):
    assert dev.of_type("kubernetes:kustomize/v2:Directory") == []
    rel = [r.inputs for r in dev.of_type(HELM) if r.inputs.get("name") == "training-operator"][0]
    assert rel["repositoryOpts"]["repo"] == "https://charts.example.com/kubeflow"
    assert rel["version"] == "1.9.4" and rel["namespace"] == "kubeflow"


def releases(run):
    return {r.inputs["name"]: r.inputs for r in run.of_type(HELM)}


def test_device_plugins_only_on_their_nodes(prod):
    rel = releases(prod)
    nv = rel["nvidia-device-plugin"]
    assert nv["version"] == versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION
    terms = nv["values"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    assert keys == {"nvidia.com/gpu.present", "karpenter.k8s.aws/instance-gpu-count"}
    gpu_tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert gpu_tol in nv["values"]["tolerations"]
    efa = rel["aws-efa-k8s-device-plugin"]
    assert efa["version"] == versions.EFA_DEVICE_PLUGIN_CHART_VERSION
    # the chart builds its node affinity from supportedInstanceLabels (it has no affinity value)
    assert efa["values"]["supportedInstanceLabels"] == {
        "keys": ["vpc.amazonaws.com/efa.present"],
        "values": ["true"],
    }
    assert "nodeSelector" not in efa["values"] and "affinity" not in efa["values"]
    assert gpu_tol in efa["values"]["tolerations"]


def test_no_gpu_no_efa_no_plugins(dev):
    rel = releases(dev)
    assert "nvidia-device-plugin" not in rel and "aws-efa-k8s-device-plugin" not in rel
    assert "dcgm-exporter" not in rel


def test_prometheus_picks_up_every_monitor(prod):
    rel = releases(prod)
    stack = rel["kube-prometheus-stack"]
    assert stack["version"] == versions.KUBE_PROMETHEUS_STACK_CHART_VERSION
    spec = stack["values"]["prometheus"]["prometheusSpec"]
    assert spec["serviceMonitorSelectorNilUsesHelmValues"] is False
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False
    assert (
        spec["serviceMonitorNamespaceSelector"] == {} and spec["podMonitorNamespaceSelector"] == {}
    )
    # Grafana is off by default (the chart's default admin password is public)
    assert stack["values"]["grafana"] == {"enabled": False}
    dcgm = rel["dcgm-exporter"]
    assert dcgm["values"]["serviceMonitor"]["enabled"] is True
    assert dcgm["version"] == versions.DCGM_EXPORTER_CHART_VERSION


def test_volumes_use_an_encrypted_gp3_class(prod):
    # EKS 1.30+ has no default StorageClass: every claim names trainforge's class.
    sc = one(prod, "kubernetes:storage.k8s.io/v1:StorageClass").inputs
    assert sc["metadata"]["name"] == "trainforge-gp3"
    assert sc["provisioner"] == "ebs.csi.aws.com"
    assert sc["parameters"]["type"] == "gp3" and sc["parameters"]["encrypted"] == "true"
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    spec = releases(prod)["kube-prometheus-stack"]["values"]["prometheus"]["prometheusSpec"]
    assert (
        spec["storageSpec"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "trainforge-gp3"
    )
    [pvc] = [
        r.inputs
        for r in prod.of_type("kubernetes:core/v1:PersistentVolumeClaim")
        if r.inputs["metadata"]["name"] == "mlflow-data"
    ]
    assert pvc["spec"]["storageClassName"] == "trainforge-gp3"


def test_grafana_uses_an_admin_secret_when_enabled():
    from trainforge.platform.monitoring import prometheus_values
    from trainforge.platform.services_config import MonitoringConfig

    g = prometheus_values(MonitoringConfig(grafana=True), "sc")["grafana"]
    assert g["enabled"] is True
    assert g["admin"]["existingSecret"] == "grafana-admin"


def test_external_monitoring_skips_the_stack(dev):
    assert "kube-prometheus-stack" not in releases(dev)
    # nothing in dev needs a volume (ephemeral MLflow, no Prometheus)
    assert dev.of_type("kubernetes:storage.k8s.io/v1:StorageClass") == []


def test_mlflow_server_is_non_root_pinned_and_limited(prod):
    dep = one(prod, "kubernetes:apps/v1:Deployment").inputs
    assert dep["metadata"]["namespace"] == "mlflow"
    pod = dep["spec"]["template"]["spec"]
    # the server, and the sidecar that keeps its users as the platform declares them
    assert [c["name"] for c in pod["containers"]] == ["mlflow", "auth-sync"]
    c = pod["containers"][0]
    assert c["image"] == versions.MLFLOW_IMAGE
    assert (
        pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    )
    assert c["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    data = [v for v in pod["volumes"] if v["name"] == "data"][0]
    assert data["persistentVolumeClaim"]["claimName"] == "mlflow-data"
    assert rules.check_resource("kubernetes:apps/v1:Deployment", dep) == []
    svc = one(prod, "kubernetes:core/v1:Service").inputs
    assert svc["metadata"] == {**svc["metadata"], "name": "mlflow", "namespace": "mlflow"}
    assert svc["spec"]["ports"][0]["port"] == 5000


def test_the_mlflow_server_runs_without_mlflows_job_runner(prod):
    """MLflow's job runner (GenAI jobs, which no trainforge feature submits) is off in the
    deployed server; tests/platform/test_mlflow_auth.py shows the setting's effect on a real
    server of the pinned version."""
    pod = one(prod, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"


def test_mlflow_accepts_traffic_from_team_namespaces_only(prod):
    pol = [
        r.inputs
        for r in prod.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["namespace"] == "mlflow"
    ]
    [spec] = [p["spec"] for p in pol]
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    assert rule["from"] == [
        {
            "namespaceSelector": {
                "matchExpressions": [{"key": "trainforge.io/team", "operator": "Exists"}]
            }
        }
    ]
    assert [int(p["port"]) for p in rule["ports"]] == [5000]
    team_ns = [
        r
        for r in prod.of_type("kubernetes:core/v1:Namespace")
        if r.inputs["metadata"]["name"] == "nlp"
    ]
    assert team_ns[0].inputs["metadata"]["labels"]["trainforge.io/team"] == "nlp"


def test_mlflow_ephemeral_backend_uses_empty_dir(dev):
    pod = one(dev, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"]
    data = [v for v in pod["volumes"] if v["name"] == "data"][0]
    assert "emptyDir" in data


def _sync_sidecar(run) -> tuple[dict, dict, dict]:
    """The auth-sync container, its pod's volumes by name, and its mounts by path."""
    pod = one(run, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"]
    (sync,) = [c for c in pod["containers"] if c["name"] == "auth-sync"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    return sync, volumes, {m["mountPath"]: m for m in sync["volumeMounts"]}


def test_the_mlflow_pod_gets_secrets_as_files_but_flasks_key(prod):
    dep = one(prod, "kubernetes:apps/v1:Deployment").inputs
    pod = dep["spec"]["template"]["spec"]
    from_secrets = {
        (c["name"], e["name"])
        for c in pod["containers"]
        for e in c.get("env") or ()
        if "secretKeyRef" in (e.get("valueFrom") or {})
    }
    # MLflow reads Flask's secret key from the environment only: the one waived exception
    assert from_secrets == {("mlflow", "MLFLOW_FLASK_SERVER_SECRET_KEY")}
    skips = [v for k, v in dep["metadata"]["annotations"].items() if k.startswith("checkov.io/")]
    assert [s.split("=", 1)[0] for s in skips] == ["CKV_K8S_35"]
    # the sync reads the admin password from the Secret, mounted as a file
    sync, volumes, mounts = _sync_sidecar(prod)
    (arg,) = [a for a in sync["args"] if a.startswith("--admin-password-file=")]
    path = arg.split("=", 1)[1]
    mount = mounts[path.rsplit("/", 1)[0]]
    assert mount["readOnly"] is True
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == "mlflow-auth"
    assert secret["items"] == [{"key": "admin-password", "path": path.rsplit("/", 1)[1]}]


def test_the_sync_sidecars_probes_check_the_heartbeat_its_loop_writes(prod, tmp_path):
    """Rehearse the sidecar as rendered: its files where its mounts put them (the script from
    the ConfigMap), its loop run once against a server that is not there, then its probe."""
    sync, volumes, mounts = _sync_sidecar(prod)
    assert sync["livenessProbe"] == sync["readinessProbe"]
    (cm,) = [
        r.inputs
        for r in prod.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"]["name"] == "mlflow-auth-sync"
    ]

    def local(path: str) -> str:
        for at in sorted(mounts, key=len, reverse=True):
            if path == at or path.startswith(at + "/"):
                return str(tmp_path / at.strip("/")) + path[len(at) :]
        raise AssertionError(f"{path} is on the read-only root filesystem")

    def argv(command: list[str]) -> list[str]:
        assert command[0] == "python"
        out = [sys.executable]
        for a in command[1:]:
            flag, eq, value = a.partition("=")
            out.append(f"{flag}={local(value)}" if eq and value.startswith("/") else a)
            if not eq and a.startswith("/"):
                out[-1] = local(a)
        return out

    for at, m in mounts.items():
        d = tmp_path / at.strip("/")
        d.mkdir(parents=True)
        vol = volumes[m["name"]]
        if "configMap" in vol:
            for key, text in cm["data"].items():
                (d / key).write_text(text)
        for item in (vol.get("secret") or {}).get("items") or ():
            (d / item["path"]).write_text("password-from-the-secret\n")
        # only the emptyDir is writable
        assert ("emptyDir" in vol) == (not m.get("readOnly")), m
    probe = argv(sync["livenessProbe"]["exec"]["command"])
    assert subprocess.run(probe, capture_output=True).returncode == 1  # the loop never ran
    port = 1  # nothing listens there: the pass fails, and is retried later
    loop = [*argv([*sync["command"], *sync["args"]]), f"--url=http://127.0.0.1:{port}"]
    done = subprocess.run([*loop, "--once", "--wait=0"], capture_output=True, text=True)
    assert done.returncode == 1 and "not healthy" in done.stderr, done.stderr
    assert subprocess.run(probe, capture_output=True).returncode == 0
    (beat,) = [a.split("=", 1)[1] for a in sync["args"] if a.startswith("--heartbeat-file=")]
    old = os.stat(local(beat)).st_mtime - 3600
    os.utime(local(beat), (old, old))
    stuck = subprocess.run(probe, capture_output=True, text=True)
    assert stuck.returncode == 1 and "stuck" in stuck.stderr


# --- teams ----------------------------------------------------------------------------------------


def test_team_namespace_quota_limits_and_service_account(prod):
    nss = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
        for r in prod.of_type("kubernetes:core/v1:Namespace")
    }
    # baseline enforced (the operator's injected init container is not `restricted`), restricted
    # warned/audited; a team may opt into enforcing restricted
    assert nss["vision"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert nss["vision"]["pod-security.kubernetes.io/warn"] == "restricted"
    assert nss["vision"]["pod-security.kubernetes.io/audit"] == "restricted"
    assert nss["nlp"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # only the node agents' namespace admits privileged pods
    assert nss["monitoring"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert nss["node-agents"]["pod-security.kubernetes.io/enforce"] == "privileged"
    quotas = {
        r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
        for r in prod.of_type("kubernetes:core/v1:ResourceQuota")
    }
    assert quotas["vision"] == {
        "requests.nvidia.com/gpu": "16",
        "requests.cpu": "192",
        "limits.cpu": "192",
        "requests.memory": "1536Gi",
        "limits.memory": "1536Gi",
        "pods": "40",
    }
    lr = [
        r.inputs
        for r in prod.of_type("kubernetes:core/v1:LimitRange")
        if r.inputs["metadata"]["namespace"] == "nlp"
    ][0]
    assert lr["spec"]["limits"][0]["type"] == "Container"
    assert lr["spec"]["limits"][0]["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
    sas = [
        r.inputs
        for r in prod.of_type("kubernetes:core/v1:ServiceAccount")
        if r.inputs["metadata"]["name"] == "training"
    ]
    assert sorted(s["metadata"]["namespace"] for s in sas) == ["nlp", "vision"]
    assert all(s["automountServiceAccountToken"] is False for s in sas)


def test_team_network_policies(prod):
    pols = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in prod.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["namespace"] == "vision"
    }
    assert set(pols) == {
        "default-deny",
        "allow-same-namespace",
        "allow-dns",
        "allow-aws-endpoints",
        "allow-metrics-scrape",
        "allow-mlflow",
    }
    assert pols["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert pols["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    dns = pols["allow-dns"]["egress"][0]
    assert dns["to"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "kube-system"
    }
    assert {(p["protocol"], int(p["port"])) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    scrape = pols["allow-metrics-scrape"]["ingress"][0]
    assert scrape["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    assert scrape["ports"] == [{"protocol": "TCP", "port": "metrics"}]
    ports = {
        int(p["port"]) for rule in pols["allow-aws-endpoints"]["egress"] for p in rule["ports"]
    }
    assert ports == {443, 80}  # 80 only to the Pod Identity agent
    agent = [r for r in pols["allow-aws-endpoints"]["egress"] if int(r["ports"][0]["port"]) == 80][
        0
    ]
    assert agent["to"] == [{"ipBlock": {"cidr": "169.254.170.23/32"}}]


# --- rendered Kubernetes objects are valid for the cluster version --------------------------------

K8S_KINDS = (
    "kubernetes:storage.k8s.io/v1:StorageClass",
    "kubernetes:core/v1:Namespace",
    "kubernetes:core/v1:ResourceQuota",
    "kubernetes:core/v1:LimitRange",
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:core/v1:PersistentVolume",
    "kubernetes:core/v1:PersistentVolumeClaim",
    "kubernetes:core/v1:Service",
    "kubernetes:apps/v1:Deployment",
    "kubernetes:networking.k8s.io/v1:NetworkPolicy",
)


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_kubernetes_objects_validate_strictly(stack, request):
    run = request.getfixturevalue(stack)
    objs = [ints(r.inputs) for r in run.resources if r.type in K8S_KINDS]
    assert len(objs) > 8
    version = f"{versions.KUBERNETES_VERSION}.0"
    for obj in objs:
        assert obj["apiVersion"] and obj["kind"]
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:  # pragma: no cover - message on failure
            pytest.fail(f"{obj['kind']} {obj['metadata'].get('name')}: {e}")


def test_every_declared_resource_passes_the_plan_rules(prod):
    for r in prod.resources:
        assert rules.check_resource(r.type, r.inputs) == [], (r.type, r.name)


# --- interface for the jobs layer -----------------------------------------------------------------


def test_team_facts_feed_the_jobs_target(prod):
    from trainforge.platform.published import team_facts

    services: PlatformServices = prod.result
    errors: list[str] = []
    facts = team_facts(parse_services_config(PROD, errors))["vision"]
    assert (facts.namespace, facts.service_account, facts.claim_name) == (
        "vision",
        "training",
        "fsx-vision",
    )
    assert (facts.fsx_mount_path, facts.fsx_sub_path, facts.checkpoint_prefix) == (
        "/fsx",
        None,
        "vision/",
    )
    assert facts.quota.gpus == "16" and facts.quota.memory == "1536Gi"
    assert services.mlflow_tracking_uri == "http://mlflow.mlflow.svc.cluster.local:5000"
    assert isinstance(services.checkpoint_bucket_name, pulumi.Output)
    # every team's jobs wait for the Job that prepares its FSx directory, and for what their
    # pods name: the team's claim, ServiceAccount and MLflow credentials
    assert [r._name for r in services.team_ready["vision"]] == [
        "fsx-team-dir-vision",
        "svc-fsx-pvc-vision",
        "svc-teams-vision-sa",
        "svc-monitoring-mlflow-credentials-vision",
    ]


def test_efa_plugin_also_targets_named_efa_pools():
    from trainforge.platform.device_plugins import EFA_NODE_TERMS, efa_values

    v = efa_values(EFA_NODE_TERMS, ["efa-training"])["supportedInstanceLabels"]
    assert v["keys"] == ["vpc.amazonaws.com/efa.present", "trainforge.io/pool"]
    assert v["values"] == ["efa-training", "true"]
