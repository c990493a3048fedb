"""Checks that need the platform: pool GPUs, EFA, node size, team quota, unknown team/pool."""

from __future__ import annotations

import dataclasses

import pytest

from tests.jobs.helpers import CPU_POOL, DLC_IMAGE, EFA_POOL, GPU_POOL, target
from trainforge.jobs.errors import JobConfigError
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import (
    TeamQuota,
    efa_count,
    quota_from_mapping,
    resolve_job,
    target_from_platform,
)

W = "trainforge:jobs[0]"


def job(**kw):
    return parse_job({"name": "j", "team": "research", "pool": "gpu-workloads", **kw}, W)


def test_gpu_defaults_take_the_whole_node():
    r = resolve_job(job(workers=2), target(GPU_POOL), W)
    assert r.gpus_per_worker == 4 and r.procs_per_worker == 4
    assert r.cpu == "42"  # 48 vCPU * 0.9 - 1, for kubelet and daemonsets
    assert r.memory == "167116Mi"  # 85% of 192 GiB
    assert r.shm_size == "41779Mi"  # a quarter of the memory
    assert r.efa is False


def test_partial_node_pod_gets_its_share():
    r = resolve_job(job(gpusPerWorker=1), target(GPU_POOL), W)
    assert (r.gpus_per_worker, r.cpu, r.memory) == (1, "10", "41779Mi")


def test_cpu_pool_defaults():
    r = resolve_job(job(pool="training-workloads", procsPerWorker=2), target(CPU_POOL), W)
    assert (r.gpus_per_worker, r.procs_per_worker, r.cpu, r.efa) == (0, 2, "13", False)


def test_more_gpus_than_the_instance_types_have():
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=8), target(GPU_POOL), W)
    assert str(err.value).startswith(f"{W}.gpusPerWorker: got 8;")
    assert "pool 'gpu-workloads' (g5.12xlarge) has at most 4 GPUs per node" in str(err.value)


def test_gpus_on_a_cpu_pool():
    with pytest.raises(
        JobConfigError, match=r"gpusPerWorker: got 1; pool 'training-workloads' .* has no GPUs"
    ):
        resolve_job(job(gpusPerWorker=1), target(CPU_POOL), W)


def test_cpu_only_pods_on_a_gpu_pool():
    with pytest.raises(
        JobConfigError, match=r"gpusPerWorker: got 0; pool 'gpu-workloads' is a GPU pool"
    ):
        resolve_job(job(gpusPerWorker=0), target(GPU_POOL), W)


def test_procs_must_match_gpus():
    with pytest.raises(
        JobConfigError, match=r"procsPerWorker: got 2; a GPU job runs one process per GPU"
    ):
        resolve_job(job(gpusPerWorker=4, procsPerWorker=2), target(GPU_POOL), W)


def test_efa_on_a_pool_without_it():
    with pytest.raises(
        JobConfigError, match=r"\.efa: got True; pool 'gpu-workloads' has no EFA interfaces"
    ):
        resolve_job(job(efa=True, image=DLC_IMAGE), target(GPU_POOL), W)


def test_efa_needs_an_image_with_libfabric():
    with pytest.raises(
        JobConfigError, match=r"\.image: got None; pool 'efa-p5' uses EFA, which needs libfabric"
    ):
        resolve_job(job(pool="efa-p5"), target(EFA_POOL), W)
    # opting out of EFA runs the stock image over TCP
    assert resolve_job(job(pool="efa-p5", efa=False), target(EFA_POOL), W).efa is False


def test_efa_auto_on_efa_pool_and_device_count():
    r = resolve_job(job(pool="efa-p5", image=DLC_IMAGE, workers=4), target(EFA_POOL), W)
    assert r.efa is True and r.gpus_per_worker == 8
    assert (
        efa_count(EFA_POOL, 8) == 32
        and efa_count(EFA_POOL, 4) == 16
        and efa_count(EFA_POOL, 1) == 4
    )
    assert efa_count(GPU_POOL, 4) == 0


def test_pod_bigger_than_node():
    with pytest.raises(
        JobConfigError, match=r"\.memory: got '300Gi'; nodes in pool 'gpu-workloads' have 196608Mi"
    ):
        resolve_job(job(memory="300Gi"), target(GPU_POOL), W)
    with pytest.raises(
        JobConfigError, match=r"\.cpu: got '64'; nodes in pool 'gpu-workloads' have 48 vCPUs"
    ):
        resolve_job(job(cpu="64"), target(GPU_POOL), W)


def test_shm_must_be_below_memory():
    with pytest.raises(
        JobConfigError, match=r"\.shmSize: got '16Gi'; must be smaller than memory \(16Gi\)"
    ):
        resolve_job(job(memory="16Gi", shmSize="16Gi"), target(GPU_POOL), W)


@pytest.mark.parametrize(
    ("quota", "kw", "field", "message"),
    [
        (
            TeamQuota(gpus="16"),
            {"workers": 5},
            "gpusPerWorker",
            "5 pod(s) need gpus 20 but team 'research' has a quota of 16",
        ),
        (TeamQuota(pods="2"), {"workers": 3}, "workers", "need pods 3"),
        (
            TeamQuota(memory="100Gi"),
            {"memory": "64Gi", "workers": 2},
            "memory",
            "need memory 128Gi",
        ),
        (TeamQuota(cpu="8"), {"cpu": "6", "workers": 2}, "cpu", "need cpu 12"),
    ],
)
def test_job_that_can_never_fit_the_team_quota(quota, kw, field, message):
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(**kw), target(GPU_POOL, quota=quota), W)
    assert str(err.value).startswith(f"{W}.{field}:")
    assert message in str(err.value) and "could never start" in str(err.value)


def test_elastic_quota_uses_the_minimum():
    el = job(preset="elastic", elastic={"minWorkers": 2, "maxWorkers": 8})
    resolve_job(el, target(GPU_POOL, quota=TeamQuota(gpus="8")), W)  # 2 x 4 fits
    with pytest.raises(JobConfigError, match="2 pod"):
        resolve_job(el, target(GPU_POOL, quota=TeamQuota(gpus="7")), W)


def test_quota_from_resourcequota_keys():
    q = quota_from_mapping(
        {
            "requests.nvidia.com/gpu": "16",
            "limits.memory": "512Gi",
            "requests.memory": "256Gi",
            "pods": 20,
        }
    )
    assert q == TeamQuota(gpus="16", cpu=None, memory="256Gi", pods="20")


class _Platform:
    """A stand-in with the attributes target_from_platform reads."""

    teams = {
        "research": {
            "namespace": "team-research",
            "service_account": "trainer",
            "claim_name": "fsx-research",
            "quota": {"gpus": "32"},
        }
    }
    node_pools = {
        "gpu-workloads": {
            "instance_types": ["g5.12xlarge"],
            "gpus_per_node": 4,
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        "efa-p5": dataclasses.asdict(EFA_POOL),
    }
    checkpoint_bucket_name = "bucket-1"
    mlflow_tracking_uri = "http://mlflow:5000"


def test_target_from_platform():
    t = target_from_platform(_Platform(), "research", "gpu-workloads", W)
    assert (t.namespace, t.service_account, t.claim_name) == (
        "team-research",
        "trainer",
        "fsx-research",
    )
    assert t.pool.gpus_per_node == 4 and t.pool.node_selector == (
        ("karpenter.sh/nodepool", "gpu-workloads"),
    )
    assert t.pool.taints[0].key == "nvidia.com/gpu" and t.pool.taints[0].value is None
    assert (
        t.quota.gpus == "32"
        and t.checkpoint_bucket == "bucket-1"
        and t.checkpoint_prefix == "research/"
    )
    assert t.mlflow_tracking_uri == "http://mlflow:5000"


def test_unknown_team_or_pool():
    with pytest.raises(
        JobConfigError, match=r"jobs\[0\]\.team: got 'vision'; known teams: research"
    ):
        target_from_platform(_Platform(), "vision", "gpu-workloads", W)
    with pytest.raises(
        JobConfigError, match=r"jobs\[0\]\.pool: got 'tpu'; known node pools: efa-p5, gpu-workloads"
    ):
        target_from_platform(_Platform(), "research", "tpu", W)


@dataclasses.dataclass(frozen=True, slots=True)
class _Quota:
    gpus: str
    pods: str


@dataclasses.dataclass(frozen=True)
class _Team:
    name: str
    namespace: str
    service_account_name: str
    pvc_name: str
    quota: _Quota


def test_target_from_platform_accepts_other_shapes():
    """Teams as a list of objects, per-instance-type GPU counts, a slotted quota dataclass."""

    class Platform:
        teams = [_Team("vision", "team-vision", "sa-vision", "fsx-vision", _Quota("8", "4"))]
        pools = {
            "mixed": {
                "instanceTypes": ["g5.xlarge", "g5.12xlarge"],
                "gpusPerNode": {"g5.xlarge": 1, "g5.12xlarge": 4},
                "labels": {"pool": "mixed"},
                "capacity_types": ["spot", "on-demand"],
            }
        }
        checkpoint_bucket = None

    t = target_from_platform(Platform(), "vision", "mixed", W)
    assert (t.namespace, t.service_account, t.claim_name) == (
        "team-vision",
        "sa-vision",
        "fsx-vision",
    )
    assert t.quota == TeamQuota(gpus="8", pods="4")
    assert (
        t.pool.gpus_per_node == 4
        and t.pool.node_selector == (("pool", "mixed"),)
        and t.pool.capacity_type == "spot"
    )
    assert t.checkpoint_bucket is None


def test_target_from_platform_with_the_services_team_facts():
    """The services layer's TeamFacts: team-level bucket, MLflow, mount and subPath win;
    a claim of None (no FSx) stays None instead of inventing a claim name."""
    from trainforge.platform.services import TeamFacts

    def facts(claim):
        return TeamFacts(
            name="vision",
            namespace="vision",
            service_account="training",
            claim_name=claim,
            fsx_mount_path="/data",
            fsx_sub_path="vision",
            quota={
                "requests.nvidia.com/gpu": "16",
                "requests.cpu": "192",
                "limits.cpu": "192",
                "pods": "40",
            },
            checkpoint_bucket="team-bucket",
            checkpoint_prefix="vision/",
            mlflow_tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
        )

    class Platform:
        teams = {"vision": facts("fsx-vision")}
        node_pools = {"gpu-workloads": GPU_POOL}
        checkpoint_bucket_name = "platform-bucket"
        mlflow_tracking_uri = None
        fsx_mount_path = "/fsx"

    t = target_from_platform(Platform(), "vision", "gpu-workloads", W)
    assert (t.claim_name, t.fsx_mount_path, t.fsx_sub_path) == ("fsx-vision", "/data", "vision")
    assert t.checkpoint_bucket == "team-bucket" and t.mlflow_tracking_uri.startswith(
        "http://mlflow"
    )
    assert t.quota == TeamQuota(gpus="16", cpu="192", memory=None, pods="40")
    Platform.teams = {"vision": facts(None)}
    assert target_from_platform(Platform(), "vision", "gpu-workloads", W).claim_name is None
