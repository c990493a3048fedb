"""Shared fixtures-as-functions for the jobs tests: pools, targets, validators, mocks."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import kubernetes_validate

from trainforge.core.contract import (
    DaemonSetLoad,
    JobTarget,
    PoolFacts,
    Taint,
    TeamFacts,
    TeamQuota,
)
from trainforge.jobs import codeship
from trainforge.jobs.node_facts import node_shape
from trainforge.stack.jobs import DNS1035

K8S_VERSION = "1.31"

# What the platform publishes for every node (trainforge.platform.node_daemonsets): 210m CPU
# and 224Mi of DaemonSet requests; GPU pools add the device plugin and the DCGM exporter.
DAEMONSETS = (
    DaemonSetLoad("aws-node", 50),
    DaemonSetLoad("kube-proxy", 100),
    DaemonSetLoad("eks-pod-identity-agent"),
    DaemonSetLoad("ebs-csi-node", 30, 120),
    DaemonSetLoad("fsx-csi-node", 30, 104),
    DaemonSetLoad("node-exporter"),
)
GPU_DAEMONSETS = (
    *DAEMONSETS,
    DaemonSetLoad("nvidia-device-plugin"),
    DaemonSetLoad("dcgm-exporter", 100, 128),
)

CPU_POOL = PoolFacts(
    name="training-workloads",
    instance_types=("c5.4xlarge", "m5.4xlarge"),
    gpus_per_node=0,
    node_selector=(("karpenter.sh/nodepool", "training-workloads"),),
    vcpus_per_node=16,
    memory_mib_per_node=32768,
    # ENI max pods: 8 ENIs x (30 - 1) + 2 = 234 for both types
    nodes=(
        node_shape("c5.4xlarge", 16, 32768, eni_pods=234),
        node_shape("m5.4xlarge", 16, 65536, eni_pods=234),
    ),
    daemonsets=DAEMONSETS,
)
GPU_POOL = PoolFacts(
    name="gpu-workloads",
    instance_types=("g5.12xlarge",),
    gpus_per_node=4,
    taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),),
    node_selector=(("karpenter.sh/nodepool", "gpu-workloads"),),
    capacity_type="spot",
    vcpus_per_node=48,
    memory_mib_per_node=196608,
    nodes=(node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),),
    daemonsets=GPU_DAEMONSETS,
)
EFA_POOL = PoolFacts(
    name="efa-p5",
    instance_types=("p5.48xlarge",),
    gpus_per_node=8,
    efa_interfaces=32,
    taints=(Taint("nvidia.com/gpu", "NoSchedule", None),),
    node_selector=(("eks.amazonaws.com/nodegroup", "efa-p5"),),
    vcpus_per_node=192,
    memory_mib_per_node=2097152,
    max_nodes=16,
    kind="node-group",
    nodes=(node_shape("p5.48xlarge", 192, 2097152, eni_pods=100, gpus=8, efa=32),),
    daemonsets=(*GPU_DAEMONSETS, DaemonSetLoad("aws-efa-k8s-device-plugin", 10, 20)),
)
DLC_IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2"

CODE = codeship.CodeBundle(
    files=(
        ("trainforge/__init__.py", '"""pkg"""\n'),
        ("trainforge/training/__init__.py", ""),
        ("trainforge/training/__main__.py", "print('train')\n"),
    )
)


TEAM_FIELDS = {f.name for f in dataclasses.fields(TeamFacts)}


def target(pool: PoolFacts = GPU_POOL, **kw: Any) -> JobTarget:
    """A JobTarget for team research; keyword arguments override team or target fields."""
    team: dict[str, Any] = dict(
        name="research",
        namespace="team-research",
        service_account="training",
        claim_name="fsx-research",
        checkpoint_prefix="research/",
        quota=TeamQuota(gpus="64", cpu="1000", memory="8Ti", pods="100"),
    )
    rest: dict[str, Any] = dict(
        checkpoint_bucket="tf-checkpoints-123",
        mlflow_tracking_uri="http://mlflow.mlflow.svc:5000",
    )
    for key, value in kw.items():
        (team if key in TEAM_FIELDS else rest)[key] = value
    return JobTarget(team=TeamFacts(**team), pool=pool, **rest)


def script_job(name: str, script: str, **kw: Any) -> dict[str, Any]:
    """A stack job entry of team research on dev's CPU pool that runs code/SCRIPT of its
    project (conftest's dev_project); keyword arguments add or override keys."""
    return {
        "name": name,
        "team": "research",
        "pool": "training-workloads",
        "entrypoint": {"script": f"code/{script}"},
        **kw,
    }


def container(manifest: dict, rtype: str = "Master") -> dict:
    return manifest["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]


def env_of(c: dict) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in c["env"]}


def webhook_errors(doc: dict) -> list[str]:
    """The training operator v1 (release-1.9) validating webhook, plus its defaulting needs:
    DNS-1035 name, Master/Worker only, a `pytorch` container with an image in each, exactly
    one Master, >=1 Worker when present, elasticPolicy needs Workers and does not set
    nProcPerNode next to spec.nprocPerNode, valid restart and clean-pod policies."""
    errs = []
    name = doc["metadata"].get("name", "")
    if not DNS1035.match(name) or len(name) > 63:
        errs.append(f"metadata.name {name!r} is not a DNS-1035 label")
    spec = doc.get("spec") or {}
    specs = spec.get("pytorchReplicaSpecs") or {}
    if not specs:
        errs.append("no replica specs")
    for rtype, rspec in specs.items():
        if rtype not in ("Master", "Worker"):
            errs.append(f"bad replica type {rtype}")
        containers = rspec["template"]["spec"]["containers"]
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(f"{rtype}: no container named pytorch")
        errs += [f"{rtype}: {c.get('name')} has no image" for c in containers if not c.get("image")]
        if rspec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            errs.append(f"{rtype}: bad restartPolicy")
    if "Master" in specs and specs["Master"].get("replicas", 1) != 1:
        errs.append("Master.replicas must be 1")
    if "Worker" in specs and specs["Worker"].get("replicas", 1) < 1:
        errs.append("Worker.replicas must be >= 1")
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        if "Worker" not in specs:
            errs.append("elasticPolicy needs Workers")
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errs.append("nProcPerNode and nprocPerNode both set")
        if elastic.get("minReplicas", 0) > elastic.get("maxReplicas", 1 << 30):
            errs.append("minReplicas > maxReplicas")
    clean = (spec.get("runPolicy") or {}).get("cleanPodPolicy")
    if clean not in (None, "None", "Running", "All"):
        errs.append("bad cleanPodPolicy")
    return errs


def validate_pod_templates(doc: dict) -> int:
    """Validate every replica's pod template as a core PodTemplate (strict); returns count."""
    n = 0
    for rspec in doc["spec"]["pytorchReplicaSpecs"].values():
        shadow = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "shadow", "namespace": doc["metadata"]["namespace"]},
            "template": copy.deepcopy(rspec["template"]),
        }
        kubernetes_validate.validate(shadow, K8S_VERSION, strict=True)
        n += 1
    return n
