"""Checks that need the platform: pool GPUs, EFA, node size, team quota, unknown team/pool."""

from __future__ import annotations

import pytest

from tests.jobs.helpers import CPU_POOL, DLC_IMAGE, EFA_POOL, GPU_POOL, target
from trainforge.jobs.contract import PlatformContract, TeamFacts
from trainforge.jobs.errors import JobConfigError
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import TeamQuota, efa_count, resolve_job

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


CONTRACT = PlatformContract(
    pools={"gpu-workloads": GPU_POOL, "efa-p5": EFA_POOL},
    teams={
        "research": TeamFacts(
            name="research",
            namespace="team-research",
            service_account="trainer",
            claim_name="fsx-research",
            checkpoint_prefix="research/",
            quota=TeamQuota(gpus="32"),
        )
    },
    checkpoint_bucket="bucket-1",
    mlflow_tracking_uri="http://mlflow:5000",
)


def test_target_from_the_contract():
    t = CONTRACT.target("research", "gpu-workloads", W)
    assert (t.namespace, t.service_account, t.claim_name) == (
        "team-research",
        "trainer",
        "fsx-research",
    )
    assert t.pool is GPU_POOL and t.team is CONTRACT.teams["research"]
    assert t.quota.gpus == "32" and t.checkpoint_prefix == "research/"
    assert t.checkpoint_bucket == "bucket-1" and t.mlflow_tracking_uri == "http://mlflow:5000"
    assert t.backend == "pytorchjob"


def test_unknown_team_or_pool():
    with pytest.raises(
        JobConfigError, match=r"jobs\[0\]\.team: got 'vision'; known teams: research"
    ):
        CONTRACT.target("vision", "gpu-workloads", W)
    with pytest.raises(
        JobConfigError, match=r"jobs\[0\]\.pool: got 'tpu'; known node pools: efa-p5, gpu-workloads"
    ):
        CONTRACT.target("research", "tpu", W)
