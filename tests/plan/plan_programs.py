"""Small Pulumi programs for the plan tests: a secure one, and the same with seeded flaws.

They use the typed SDK classes like the platform does, so the plan sees exactly what the
engine would; `flaws` names what to break.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

SECURE_CONTAINER_SC = {
    "run_as_non_root": True,
    "run_as_user": 1000,
    "allow_privilege_escalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccomp_profile": {"type": "RuntimeDefault"},
}


# through a pull-through cache (a Docker Hub reference would be TRAINFORGE_DOCKER_HUB)
CACHED_PYTORCH = "123456789012.dkr.ecr.us-west-2.amazonaws.com/docker-hub/pytorch/pytorch"


def pod_spec(flaws: frozenset[str], image: str = f"{CACHED_PYTORCH}:2.5.1-cuda12.4-cudnn9-runtime"):
    sc = dict(SECURE_CONTAINER_SC)
    if "root" in flaws:
        sc = {k: v for k, v in sc.items() if k not in ("run_as_non_root", "run_as_user")}
    if "escalation" in flaws:
        sc["allow_privilege_escalation"] = True
    gpu_req = "1" if "gpu-mismatch" in flaws else "2"
    return {
        "service_account_name": "default" if "default-sa" in flaws else "training",
        "containers": [
            {
                "name": "pytorch",
                "image": f"{CACHED_PYTORCH}:latest" if "latest" in flaws else image,
                "command": ["python", "-m", "trainforge.training"],
                "resources": {
                    "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpu_req},
                    "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
                },
                "security_context": sc,
            }
        ],
    }


def pytorchjob(
    name: str, flaws: frozenset[str], workers: int = 2, ns: str = "team-a", after: tuple = ()
):
    replicas = {
        "Master": {
            "replicas": 2 if "two-masters" in flaws else 1,
            "restartPolicy": "OnFailure",
            "template": {"spec": pod_spec(flaws)},
        },
        "Worker": {
            "replicas": workers,
            "restartPolicy": "OnFailure",
            "template": {"spec": pod_spec(flaws)},
        },
    }
    if "container-name" in flaws:
        replicas["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    return k8s.apiextensions.CustomResource(
        name,
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata={"name": "Bad_Name" if "job-name" in flaws else name, "namespace": ns},
        spec={
            "pytorchReplicaSpecs": _camel(replicas),
            "runPolicy": {"cleanPodPolicy": "Sometimes" if "clean-policy" in flaws else "None"},
        },
        # the pods name the team's ServiceAccount: the job waits for it (plan.checks.existence)
        opts=pulumi.ResourceOptions(delete_before_replace=True, depends_on=list(after)),
    )


def _camel(obj):
    """CustomResource specs are sent as given: write them in wire (camelCase) form."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            parts = k.split("_")
            key = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
            out[key] = _camel(v)
        return out
    if isinstance(obj, list):
        return [_camel(v) for v in obj]
    return obj


def program(flaws: frozenset[str] | set[str] = frozenset(), jobs: list[str] | None = None):
    """Return a Pulumi program function declaring a small but complete platform."""
    flaws = frozenset(flaws)

    def run() -> None:
        cfg = pulumi.Config("trainforge")
        cluster_name = cfg.get("cluster") or "tf"
        # data-holding resources are protected (the plan's data safety check), unless a flaw
        keep = pulumi.ResourceOptions(protect="unprotected" not in flaws)
        key = aws.kms.Key("key", enable_key_rotation="kms-rotation" not in flaws, opts=keep)
        bucket = aws.s3.Bucket("ckpt", opts=keep)
        aws.s3.BucketServerSideEncryptionConfiguration(
            "ckpt-sse",
            bucket=bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {
                        "sse_algorithm": "AES256" if "s3-aes" in flaws else "aws:kms",
                        "kms_master_key_id": key.arn,
                    },
                    "bucket_key_enabled": True,
                }
            ],
        )
        if "s3-no-versioning" not in flaws:
            aws.s3.BucketVersioning(
                "ckpt-versioning", bucket=bucket.id, versioning_configuration={"status": "Enabled"}
            )
        aws.s3.BucketPublicAccessBlock(
            "ckpt-pab",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy="s3-public" not in flaws,
            ignore_public_acls=True,
            restrict_public_buckets=True,
        )
        aws.s3.BucketPolicy(
            "ckpt-tls",
            bucket=bucket.id,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "TlsOnly",
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "s3:*",
                            "Resource": ["arn:aws:s3:::ckpt", "arn:aws:s3:::ckpt/*"],
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        }
                    ],
                }
            ),
        )
        vpc_config = {
            "subnet_ids": ["subnet-1", "subnet-2"],
            "endpoint_private_access": True,
            "endpoint_public_access": "eks-public" in flaws,
        }
        if "eks-public" in flaws:
            vpc_config["public_access_cidrs"] = ["0.0.0.0/0"]
        aws.eks.Cluster(
            "cluster",
            name=cluster_name,
            role_arn="arn:aws:iam::123456789012:role/eks",
            vpc_config=vpc_config,
            enabled_cluster_log_types=(
                ["api", "audit"]
                if "eks-logs" in flaws
                else ["api", "audit", "authenticator", "controllerManager", "scheduler"]
            ),
            encryption_config=None
            if "eks-secrets" in flaws
            else {"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
        )
        aws.ec2.LaunchTemplate(
            "gpu-lt",
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "optional" if "imdsv1" in flaws else "required",
                "http_put_response_hop_limit": 2 if "hop-limit" in flaws else 1,
            },
        )
        aws.sqs.Queue(
            "interruptions",
            sqs_managed_sse_enabled=None if "sqs-plain" in flaws else True,
        )
        aws.fsx.LustreFileSystem(
            "fsx",
            storage_capacity=1200,
            subnet_ids="subnet-1",
            deployment_type="PERSISTENT_2",
            per_unit_storage_throughput=125,
            kms_key_id=None if "fsx-key" in flaws else key.arn,
            opts=keep,
        )
        statement = (
            {"Effect": "Allow", "Action": "*", "Resource": "*"}
            if "iam-admin" in flaws
            else {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::ckpt/*"}
        )
        aws.iam.Policy(
            "reader", policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]})
        )
        # Objects take the namespace from the Namespace's output, so they are created after it
        # (trainforge.plan.checks.ordering).
        team_a = k8s.core.v1.Namespace("team-a", metadata={"name": "team-a"}).metadata.name
        sa = k8s.core.v1.ServiceAccount(
            "training", metadata={"name": "training", "namespace": team_a}
        )
        k8s.core.v1.ConfigMap(
            "code", metadata={"name": "code", "namespace": team_a}, data={"a.py": "print(1)"}
        )
        if "schema" in flaws:
            k8s.core.v1.ConfigMap(
                "bad-cm",
                metadata={"name": "bad", "namespace": team_a},
                data={"a": "b"},
                # typed args cannot misspell fields; a numeric string where an int is due can
                # only come from config, so seed it the way a config mistake would arrive
                immutable="yes",  # type: ignore[arg-type]
            )
        if "privileged" in flaws:
            spec = pod_spec(frozenset())
            spec["containers"][0]["security_context"] = dict(SECURE_CONTAINER_SC, privileged=True)
            k8s.apps.v1.Deployment(
                "priv",
                metadata={"name": "priv", "namespace": team_a},
                spec={
                    "selector": {"match_labels": {"app": "priv"}},
                    "template": {"metadata": {"labels": {"app": "priv"}}, "spec": spec},
                },
                opts=pulumi.ResourceOptions(depends_on=[sa]),
            )
        for name in jobs if jobs is not None else ["llm-pretrain"]:
            pytorchjob(name, flaws, ns=team_a, after=(sa,))
        k8s.apiextensions.CustomResource(
            "gpu-nodeclass",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": "gpu"},
            spec={
                "amiSelectorTerms": [
                    {"alias": "al2023@latest" if "ami-latest" in flaws else "al2023@v20251001"}
                ],
                "role": "KarpenterNodeRole",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster_name}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster_name}}],
                "metadataOptions": {
                    "httpEndpoint": "enabled",
                    "httpTokens": "required",
                    "httpPutResponseHopLimit": 1,
                },
            },
        )
        k8s.apiextensions.CustomResource(
            "gpu-nodepool",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            metadata={"name": "gpu-workloads"},
            spec={
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "gpu",
                        },
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-family",
                                "operator": "Among" if "nodepool-op" in flaws else "In",
                                "values": ["g5"],
                            }
                        ],
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"},
                "limits": {"nvidia.com/gpu": "lots" if "nodepool-limit" in flaws else 16},
            },
        )
        pulumi.export("bucket", bucket.bucket)
        pulumi.export("cluster", cluster_name)

    return run


def standin_iam() -> None:
    """A policy built from an ARN the cloud assigns, so judged only by the plan's stand-in pass
    (the golden findings' "standin-iam" case; tests/plan/test_plan_standin_child.py's project)."""
    bucket = aws.s3.Bucket("data")
    role = aws.iam.Role("r", assume_role_policy="{}")
    aws.iam.RolePolicy(
        "too-wide",
        role=role.id,
        policy=bucket.arn.apply(
            lambda arn: json.dumps(
                {
                    "Statement": [
                        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{arn}/*"},
                        {"Effect": "Allow", "Action": "*", "Resource": "*"},
                    ]
                }
            )
        ),
    )
