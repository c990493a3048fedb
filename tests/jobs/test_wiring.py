"""Checks that need the platform: pool GPUs, EFA, node size, team quota, unknown team/pool."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tests.jobs.helpers import CPU_POOL, DLC_IMAGE, EFA_POOL, GPU_POOL, target
from trainforge.core.contract import (
    JobTarget,
    PlatformContract,
    PoolLimits,
    TeamFacts,
    TeamQuota,
    efa_count,
)
from trainforge.core.errors import JobConfigError
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import default_size, resolve_job, sizing_rule

W = "trainforge:jobs[0]"


def job(**kw):
    return parse_job({"name": "j", "team": "research", "pool": "gpu-workloads", **kw}, W)


def test_gpu_defaults_take_the_whole_node():
    r = resolve_job(job(workers=2), target(GPU_POOL), W)
    assert r.gpus_per_worker == 4 and r.procs_per_worker == 4
    # What a g5.12xlarge leaves to pods (trainforge.jobs.node_facts): 48 vCPU - 190m kubelet
    # reservation - 310m DaemonSets = 47500m; 196608Mi - 14746Mi VM overhead (7.5%) - 8362Mi
    # kubelet reservation (11Mi x 737 ENI pods + 255Mi) - 100Mi eviction - 352Mi DaemonSets.
    assert r.cpu == "47500m"
    assert r.memory == "173048Mi"
    assert r.shm_size == "43262Mi"  # a quarter of the memory
    assert r.efa is False


def test_partial_node_pod_gets_its_share():
    r = resolve_job(job(gpusPerWorker=1), target(GPU_POOL), W)
    # a quarter of the node (1 of 4 GPUs): four such pods fill exactly one node
    assert (r.gpus_per_worker, r.cpu, r.memory) == (1, "11800m", "43262Mi")


def test_cpu_pool_defaults():
    r = resolve_job(job(pool="training-workloads", procsPerWorker=2), target(CPU_POOL), W)
    # a CPU job asks for the stated default, not the node (c5.4xlarge leaves 15600m/27157Mi)
    assert (r.gpus_per_worker, r.procs_per_worker, r.cpu, r.efa) == (0, 2, "2", False)
    assert r.memory == "8Gi"
    assert sizing_rule(r, CPU_POOL).startswith("CPU job: the stated default (cpu 2, memory 8Gi")


def test_cpu_default_is_capped_at_what_a_small_node_leaves():
    from dataclasses import replace  # noqa: PLC0415

    from trainforge.jobs import node_facts  # noqa: PLC0415

    small = replace(
        CPU_POOL,
        instance_types=("t3.medium",),
        nodes=(node_facts.node_shape("t3.medium", 2, 4096),),
        vcpus_per_node=2,
        memory_mib_per_node=4096,
    )
    cpu, memory = default_size(small, 0)
    assert cpu.endswith("m") and int(cpu[:-1]) < 2000
    assert memory.endswith("Mi") and int(memory[:-2]) < 8192


def test_sizing_rule_says_which_rule_applied():
    whole = resolve_job(job(workers=2), target(GPU_POOL), W)
    assert sizing_rule(whole, GPU_POOL).startswith(
        "4 GPUs per pod: g5.12xlarge 4 of 4 (the whole node); cpu and memory: all that the "
        "smallest node leaves"
    )
    part = resolve_job(job(gpusPerWorker=1), target(GPU_POOL), W)
    rule = sizing_rule(part, GPU_POOL)
    assert rule.startswith(
        "1 GPU per pod: g5.12xlarge 1 of 4 (4 pods per node); cpu and memory: 1/4 of what the "
        "smallest node leaves"
    )
    assert rule.endswith("-> cpu 11800m, memory 43262Mi")


def test_sizing_rule_says_what_a_pod_takes_of_each_type_as_the_packing_places_it():
    """prod's queue section said "4 of 4 GPUs: the whole node (g5.12xlarge, g5.48xlarge)"
    while its cost line put both 4-GPU pods on one 8-GPU g5.48xlarge: on each type, what the
    packing model (capacity.per_node_by_type, the launch's own node shapes) holds."""
    from tests.jobs.test_packing import G5, PRICE
    from trainforge.jobs import capacity

    pool = dataclasses.replace(GPU_POOL, instance_types=G5.instance_types, nodes=G5.nodes)
    r = resolve_job(job(workers=2), target(pool), W)
    assert sizing_rule(r, pool).startswith(
        "4 GPUs per pod: g5.12xlarge 4 of 4 (the whole node), g5.48xlarge 4 of 8 (2 pods per "
        "node); cpu and memory: all that the smallest node leaves"
    )
    # the launch of the same two pods: one g5.48xlarge holding both
    launched = capacity.launch(pool, capacity.job_gang(r, pool))
    assert [len(c.pods) for c in launched.claims] == [2]
    assert launched.launched(PRICE) == ["g5.48xlarge"]
    # a pod asking for more CPU than half a g5.48xlarge: one per node there too
    big = resolve_job(job(workers=2, cpu="100"), target(pool), W)
    assert "g5.48xlarge 4 of 8 (1 pod per node)" in sizing_rule(big, pool)
    mine = resolve_job(job(gpusPerWorker=1, cpu="4"), target(GPU_POOL), W)
    assert "cpu 4 (set by the job), memory 43262Mi" in sizing_rule(mine, GPU_POOL)


def test_more_gpus_than_the_instance_types_have():
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=8), target(GPU_POOL), W)
    assert str(err.value).startswith(f"{W}.gpusPerWorker: got 8;")
    assert "pool 'gpu-workloads' (g5.12xlarge) has at most 4 GPUs per node" in str(err.value)
    assert "use 1 to 4," in str(err.value)
    # dev's GPU pool holds 1 GPU per node: "1 GPU", "use 1" (it said "1 GPUs", "use 1 to 1")
    one = dataclasses.replace(GPU_POOL, gpus_per_node=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=8), target(one), W)
    assert "has at most 1 GPU per node on its smallest instance type; use 1, or" in str(err.value)


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
    # the fix names the key and reads right on a 1-GPU pool (it said "Use 1 to 1")
    one = dataclasses.replace(GPU_POOL, gpus_per_node=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=0), target(one), W)
    assert str(err.value).endswith("Use gpusPerWorker: 1, or a CPU pool")
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=0), target(GPU_POOL), W)
    assert str(err.value).endswith("Use gpusPerWorker: 1 to 4, or a CPU pool")
    # the fix names the platform's CPU pools, as other refusals name the valid values
    named = dataclasses.replace(target(GPU_POOL), cpu_pools=("training-workloads",))
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(gpusPerWorker=0), named, W)
    assert str(err.value).endswith("or a CPU pool (training-workloads)")


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
        JobConfigError,
        match=r"\.image: got 'pytorch/pytorch:[^']+'; EFA on pool 'efa-p5' \(NCCL over "
        r"libfabric\) needs libfabric",
    ):
        resolve_job(job(pool="efa-p5"), target(EFA_POOL), W)
    # opting out of EFA runs the stock image over TCP
    assert resolve_job(job(pool="efa-p5", efa=False), target(EFA_POOL), W).efa is False


def test_the_efa_refusal_names_the_job_s_own_image():
    """It printed `jobs[0].image: got None` for a job that names an image."""
    own = "ghcr.io/acme/train:1.0"
    facts = {"libfabric": False, "awsOfiNccl": False}
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(pool="efa-p5", image=own, imageFacts=facts), target(EFA_POOL), W)
    assert str(err.value).startswith(f"{W}.image: got {own!r}; EFA on pool 'efa-p5'")


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
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(memory="180Gi"), target(GPU_POOL), W)  # < 192 GiB, > what is left
    assert str(err.value).startswith(f"{W}.memory: got '180Gi'; no instance type of pool")
    assert (
        "needs memory 180Gi, g5.12xlarge: 196608Mi - 14746Mi VM overhead - 8362Mi kubelet "
        "reservation - 100Mi eviction threshold - 352Mi DaemonSets = 173048Mi"
    ) in str(err.value)
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(cpu="48"), target(GPU_POOL), W)  # every vCPU of the node
    assert str(err.value).startswith(f"{W}.cpu: got '48';")
    assert (
        "needs cpu 48000m, g5.12xlarge: 48 vCPU - 190m kubelet reservation - 310m DaemonSets "
        "= 47500m"
    ) in str(err.value)


def test_a_pod_short_of_several_resources_is_told_each_and_the_size_that_fits():
    """A managed node group launches either type: 16 CPUs and 40Gi are short of cpu on both
    and of memory on c5.4xlarge. The refusal names all three shortfalls and one size that fits
    every type; asking for it resolves (before, it named cpu only, and the fixed job then met
    memory)."""
    group = dataclasses.replace(CPU_POOL, kind="node-group", max_nodes=10)
    spec = {"pool": "training-workloads", "workers": 2}
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(**spec, cpu="16", memory="40Gi"), target(group), W)
    said = str(err.value)
    assert said.startswith(f"{W}.cpu: got '16'; no instance type of pool 'training-workloads'")
    for short in ("needs cpu 16000m, c5.4xlarge", "needs memory 40Gi, c5.4xlarge",
                  "needs cpu 16000m, m5.4xlarge"):  # fmt: skip
        assert short in said, said
    fix = dict(re.findall(r"(cpu|memory) at most (\d+(?:m|Mi))", said))
    assert set(fix) == {"cpu", "memory"}, said
    fixed = resolve_job(job(**spec, **fix), target(group), W)  # one fix applied: it fits
    assert (fixed.cpu, fixed.memory) == (fix["cpu"], fix["memory"])
    one_more = {"cpu": f"{int(fix['cpu'][:-1]) + 1}m", "memory": fix["memory"]}
    with pytest.raises(JobConfigError, match=r"\.cpu: got"):  # the size is the most that fits
        resolve_job(job(**spec, **one_more), target(group), W)


def test_a_whole_vcpu_count_does_not_fit_a_small_node():
    """The issue's case: 4 CPUs on a 4-vCPU type never schedule (3.92 allocatable)."""
    from dataclasses import replace

    from trainforge.jobs.node_facts import node_shape

    small = replace(
        GPU_POOL,
        instance_types=("g4dn.xlarge",),
        gpus_per_node=1,
        vcpus_per_node=4,
        memory_mib_per_node=16384,
        nodes=(node_shape("g4dn.xlarge", 4, 16384, eni_pods=29, gpus=1),),
    )
    with pytest.raises(JobConfigError, match=r"\.cpu: got '4';.*= 3610m"):
        resolve_job(job(cpu="4"), target(small), W)
    r = resolve_job(job(), target(small), W)
    assert (r.cpu, r.memory) == ("3600m", "14129Mi")  # the defaults always fit


def test_more_pods_than_a_node_group_holds_at_once():
    """The issue's case: 8 one-node workers on a node group whose maxSize is 4."""
    from dataclasses import replace

    group = replace(EFA_POOL, max_nodes=4)
    big = TeamQuota(gpus="64", cpu="4000", memory="64Ti", pods="100")  # not the limit here
    ok = resolve_job(job(pool="efa-p5", image=DLC_IMAGE, workers=4), target(group, quota=big), W)
    assert ok.workers == 4
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(pool="efa-p5", image=DLC_IMAGE, workers=8), target(group, quota=big), W)
    assert str(err.value).startswith(f"{W}.workers: got 8; 8 pod(s) must run at once")
    assert "they need 8 nodes, but managed node group 'efa-p5' has maxSize 4" in str(err.value)
    # two 4-GPU pods share a node: 8 of them need 4 nodes
    half = resolve_job(
        job(pool="efa-p5", image=DLC_IMAGE, workers=8, gpusPerWorker=4),
        target(group, quota=big),
        W,
    )
    assert half.workers == 8


def test_karpenter_limits_bound_all_pods_at_once():
    from dataclasses import replace

    from trainforge.core.contract import PoolLimits

    limited = replace(GPU_POOL, limits=PoolLimits(gpus=8))
    resolve_job(job(workers=2), target(limited), W)  # 2 nodes x 4 GPUs
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(workers=3), target(limited), W)
    assert str(err.value).startswith(f"{W}.workers: got 3;")
    assert "nvidia.com/gpu 12 of capacity but Karpenter pool 'gpu-workloads' is limited to" in (
        str(err.value)
    )


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
            "workers",  # gpusPerWorker was never set: it is not the key to blame
            "5 pod(s) x 4 GPUs (gpusPerWorker unset: the pool's GPUs per node) need gpus 20 "
            "but team 'research' has a quota of 16",
        ),
        (  # one pod of 4 fits 16: the count grew, and the line names both keys
            TeamQuota(gpus="16"),
            {"workers": 5, "gpusPerWorker": 4},
            "workers",
            "5 pod(s) (workers x gpusPerWorker = 5 x 4) need gpus 20 but team 'research' has a "
            "quota of 16",
        ),
        (  # one pod alone is over: gpusPerWorker is the key
            TeamQuota(gpus="3"),
            {"workers": 1, "gpusPerWorker": 4},
            "gpusPerWorker",
            "1 pod(s) x gpusPerWorker 4 need gpus 4 but team 'research' has a quota of 3",
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


@pytest.mark.parametrize(
    ("quota", "kw", "fix"),
    [
        (TeamQuota(gpus="16"), {"workers": 5}, "use workers: 4, or give team 'research' a "
         "quota.gpus of at least 20 (trainforge:teams)"),
        (TeamQuota(gpus="16"), {"workers": 5, "gpusPerWorker": 4}, "use workers: 4 or "
         "gpusPerWorker: 3, or give team 'research' a quota.gpus of at least 20 (trainforge:teams)"),
        (TeamQuota(pods="2"), {"workers": 3}, "use workers: 2, or give team 'research' a "
         "quota.pods of at least 3 (trainforge:teams)"),
        (TeamQuota(cpu="8"), {"cpu": "6", "workers": 2}, "use cpu of at most 4 per pod, or "
         "give team 'research' a quota.cpu of at least 12 (trainforge:teams)"),
    ],
)  # fmt: skip
def test_a_job_over_its_team_quota_is_told_the_fix(quota, kw, fix):
    """The line ended with "the job could never start" and no way out."""
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(**kw), target(GPU_POOL, quota=quota), W)
    assert str(err.value).endswith(f"the job could never start: {fix}")


def test_the_quota_error_quotes_the_guarantee_and_what_may_be_borrowed():
    """The namespace may hold 32 (16 guaranteed + 16 borrowable): the error says both, not
    'a quota of 32' where the config says 16."""
    t = target(GPU_POOL, quota=TeamQuota(gpus="32"))
    team = dataclasses.replace(t.team, guarantee=TeamQuota(gpus="16"))
    t = dataclasses.replace(t, team=team)
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(workers=9), t, W)
    assert str(err.value).startswith(f"{W}.workers: ")
    assert (
        "need gpus 36 but team 'research' may hold at most 32: its quota.gpus guarantees 16 "
        "and it may borrow up to 16 more from its cohort" in str(err.value)
    )


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


def test_a_cpu_quota_error_blames_workers_and_states_the_guarantee_truly():
    """A CPU job that sets no `cpu` gets the pool's default per pod: too many pods is the
    `workers` key's fault, not `cpu`'s. The team's cpu guarantee includes the CPU that comes
    with its GPUs, so the message must not call it `quota.cpu` (the user typed another figure)."""
    t = target(CPU_POOL, quota=TeamQuota(cpu="78400m"))
    team = dataclasses.replace(t.team, guarantee=TeamQuota(cpu="46400m"))
    t = dataclasses.replace(t, team=team)
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(pool="training-workloads", workers=200), t, W)
    text = str(err.value)
    assert text.startswith(f"{W}.workers: got 200; 200 pod(s) x cpu 2 (cpu unset"), text
    assert (
        "need cpu 400 but team 'research' may hold at most 78.4: its quota guarantees 46.4 ("
        in text
    )
    assert "quota.cpu guarantees" not in text and "46400m" not in text


def test_fp8_is_refused_at_preview_on_pools_whose_gpus_lack_fp8_tensor_cores():
    """GPU_POOL is g5 (A10G, compute capability 8.6): no FP8 Tensor Cores. The same job on
    an H100 pool (p5, 9.0) resolves; a CPU pool is refused with its own reason."""
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(precision="fp8"), target(GPU_POOL), W)
    assert str(err.value).startswith(f"{W}.precision: got 'fp8'; pool 'gpu-workloads' has A10G")
    assert "lack FP8 Tensor Cores" in str(err.value) and "\n" not in str(err.value)
    # p5: H100 (the catalog's GPU of the family, as no GPU name came from AWS here)
    r = resolve_job(job(precision="fp8", pool="efa-p5", efa=False), target(EFA_POOL), W)
    assert r.training.precision == "fp8"
    mixed = dataclasses.replace(EFA_POOL, gpu_models=("H100", "A100"))
    with pytest.raises(JobConfigError, match="has A100 GPUs, which lack FP8"):
        resolve_job(job(precision="fp8", pool="efa-p5"), target(mixed), W)
    with pytest.raises(JobConfigError, match="pool 'training-workloads' has no GPUs; fp8"):
        resolve_job(
            job(precision="fp8", pool="training-workloads", procsPerWorker=1), target(CPU_POOL), W
        )


def test_fp8_capability_comes_from_the_catalogs_compute_capability():
    from trainforge.core import catalog

    assert catalog.fp8_capable("NVIDIA H100 80GB HBM3") is True
    assert catalog.fp8_capable("L40S") is True and catalog.fp8_capable("L4") is True
    assert catalog.fp8_capable("A10G") is False and catalog.fp8_capable("T4") is False
    assert catalog.fp8_capable("A100") is False
    assert catalog.fp8_capable("B200") is True
    assert catalog.fp8_capable("Some Future GPU") is None


def test_s3_mirror_on_an_image_without_boto3_says_what_the_mirror_is():
    """`checkpoint.s3Mirror: true` on an image declared without boto3 is refused for the
    bundled runtime, which runs the mirror (trainforge's CheckpointManager), saying what
    mirrors and when. Own shipped code is not judged here, before its files are read: it runs
    the mirror only if a file imports trainforge (entrypoint.refuse_missing_pieces; it was
    refused here whatever its files, and passed on an image with boto3: the pod is the same)."""
    raw = {"pool": CPU_POOL.name, "image": "ghcr.io/acme/t:1", "imageFacts": {"boto3": False},
           "checkpoint": {"s3Mirror": True}, "model": "mlp"}  # fmt: skip
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(**raw), target(CPU_POOL), W)
    msg = str(err.value)
    assert msg.startswith(f"{W}.checkpoint.s3Mirror: got True; the S3 checkpoint mirror ("), msg
    assert "trainforge's checkpoint code copies each checkpoint to S3 with boto3" in msg
    assert "your own code only if it imports trainforge" in msg
    assert "needs boto3, which image ghcr.io/acme/t:1 lacks" in msg
    assert msg.endswith("or set checkpoint.s3Mirror: false"), msg
    # the way out it names works
    assert resolve_job(job(**{**raw, "checkpoint": {"s3Mirror": False}}), target(CPU_POOL), W)
    # own code: judged with its files, not here
    del raw["model"]
    own = resolve_job(job(**raw, entrypoint={"script": "examples/mnist/train.py"}),
                      target(CPU_POOL), W)  # fmt: skip
    assert own.checkpoint.s3_mirror is True


@pytest.mark.parametrize(
    ("quota", "kw", "need", "fix"),
    [
        # 8 cores over 3 pods: "2.66667" x 3 is over 8; the fix must fit, in millicores
        (TeamQuota(cpu="8"), {"cpu": "3", "workers": 3}, "need cpu 9 ",
         "use cpu of at most 2666m per pod, or give team 'research' a quota.cpu of at least 9"),
        # memory in Gi as the plan writes it, never in bytes; a per-pod fix that fits, in Mi
        (TeamQuota(memory="100Gi"), {"memory": "50.5Gi", "workers": 3}, "need memory 151.5Gi ",
         "use memory of at most 34133Mi per pod, or give team 'research' a quota.memory of at "
         "least 151.5Gi"),
        (TeamQuota(memory="3000Mi"), {"memory": "1001Mi", "workers": 3}, "need memory 2.933Gi ",
         "use memory of at most 1000Mi per pod, or give team 'research' a quota.memory of at "
         "least 3003Mi"),
    ],
)  # fmt: skip
def test_the_quota_error_writes_amounts_as_the_plan_does_and_a_fix_that_fits(quota, kw, need, fix):
    """The quota error's amounts go through the plan's one writer (core/quantity `figure`):
    memory in Gi, not "162671886336" bytes; the values it tells the user to write read back
    as quantities that hold (a per-pod size at most the quota's share, a quota at least the
    need), not a rounded `:g` figure over the quota."""
    from fractions import Fraction

    from trainforge.core.quantity import parse_quantity

    with pytest.raises(JobConfigError) as err:
        resolve_job(job(**kw), target(GPU_POOL, quota=quota), W)
    text = str(err.value)
    assert need in text, text
    assert text.endswith(f"the job could never start: {fix} (trainforge:teams)"), text
    name = "cpu" if "cpu" in kw else "memory"
    per_pod = fix.split(" of at most ")[1].split(" per pod")[0]
    cap = parse_quantity(getattr(quota, name))
    assert parse_quantity(per_pod) * kw["workers"] <= cap
    assert parse_quantity(fix.rsplit(" ", 1)[1]) >= parse_quantity(kw[name]) * kw["workers"]
    assert Fraction(parse_quantity(per_pod)) > 0


def _stack_target(
    gpus: str, limit: int, kueue: bool, cpu: str | None = None, pool=None
) -> JobTarget:
    """Team research's target as the stack publishes it: its quota from the platform's own
    quota model (trainforge.platform.queues), on a Karpenter pool with `limits.gpus: limit`
    (or on `pool`)."""
    from trainforge.core.contract import PoolLimits
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import parse_services_config

    errors: list[str] = []
    raw = {"teams": [{"name": "research", "quota": {"gpus": gpus}}], "kueue": {"enabled": kueue}}
    services = parse_services_config(raw, errors)
    assert errors == []
    if pool is None:
        pool = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=limit, cpu=cpu))
    team = team_facts(services, pools={pool.name: pool})["research"]
    return JobTarget(team=team, pool=pool, checkpoint_bucket="b")


_POOL_KEY = "trainforge:nodePools[0].limits.gpus"
_TEAM_KEY = "trainforge:teams[0].quota.gpus"
# 10 pods of 1 GPU on nodes of 4 GPUs: 3 NodeClaims, which the pool's limit counts as 12 GPUs
_NODES = " (Karpenter counts each of the job's nodes at its largest type)"


@pytest.mark.parametrize(
    ("gpus", "limit", "kueue", "caps", "sets"),
    [
        # the review's case: quota.gpus 10 in a pool of 4; the line said "a quota of 4" and
        # told the user to raise the quota it already had
        ("10", 4, True, f"{_POOL_KEY}: 4", f"{_POOL_KEY} to 12{_NODES}"),
        # without Kueue nothing is borrowed: the team's own quota caps it
        ("4", 16, False, f"{_TEAM_KEY}: 4", f"{_TEAM_KEY} to 10"),
        # both cap: raising either alone would leave it at 4
        ("4", 4, False, f"{_POOL_KEY}: 4, {_TEAM_KEY}: 4",
         f"{_POOL_KEY} to 12 and {_TEAM_KEY} to 10{_NODES}"),
        # with Kueue the team borrows what the pool holds beyond its 4: the pool caps it
        ("4", 4, True, f"{_POOL_KEY}: 4", f"{_POOL_KEY} to 12{_NODES}"),
    ],
)  # fmt: skip
def test_the_quota_refusal_names_the_key_that_caps_it_and_its_fix_fixes_it(
    gpus, limit, kueue, caps, sets
):
    """10 workers x 1 GPU over an effective quota of 4: the line names the stack key that caps
    it (from the platform's quota model), `workers` (one pod fits), and changes that, applied
    to the stack, make the refusal go; so does the job-side fix."""
    ten = job(workers=10, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(ten, _stack_target(gpus, limit, kueue), W)
    text = str(err.value)
    assert text.startswith(f"{W}.workers: got 10; 10 pod(s) (workers x gpusPerWorker = 10 x 1)")
    assert f"may hold at most 4 gpus ({caps} caps it)" in text
    assert text.endswith(f"the job could never start: use workers: 4, or set {sets}")
    resolve_job(job(workers=4, gpusPerWorker=1), _stack_target(gpus, limit, kueue), W)
    # the fix fixes it: each `set KEY to VALUE` of the line applied to the stack
    for change in text.split(", or set ")[1].removesuffix(_NODES).split(" and "):
        key, value = change.split(" to ")
        if key == _POOL_KEY:
            limit = int(value)
        else:
            assert key == _TEAM_KEY
            gpus = value
    resolve_job(ten, _stack_target(gpus, limit, kueue), W)


def test_a_raised_pool_limit_comes_with_the_pool_s_other_limits_the_job_passes():
    """Raising limits.gpus alone met the next refusal (the pool's cpu limit of 48 against
    the 3 nodes' 144): the line names every limit the job's nodes pass, and applying them
    all lets the job through."""
    ten = job(workers=10, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(ten, _stack_target("10", 4, True, cpu="48"), W)
    cpu_key = "trainforge:nodePools[0].limits.cpu"
    assert str(err.value).endswith(f"set {_POOL_KEY} to 12 and {cpu_key} to 144{_NODES}")
    with pytest.raises(JobConfigError, match=r"limits.cpu: 48 caps it"):  # gpus alone: not enough
        resolve_job(ten, _stack_target("10", 12, True, cpu="48"), W)
    resolve_job(ten, _stack_target("10", 12, True, cpu="144"), W)


def test_a_capped_quota_that_borrows_still_says_what_is_guaranteed_and_borrowed():
    """Kueue: quota.gpus 2 in a pool of 4 holds 4 (2 borrowed); the pool's limit caps it."""
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(workers=10, gpusPerWorker=1), _stack_target("2", 4, True), W)
    assert (
        "team 'research' may hold at most 4: its quota.gpus guarantees 2 and it may borrow up "
        f"to 2 more from its cohort ({_POOL_KEY}: 4 caps it)" in str(err.value)
    )
    resolve_job(job(workers=10, gpusPerWorker=1), _stack_target("2", 12, True), W)


def _applied(text: str, gpus: str, pool):
    """The stack after each `set KEY to VALUE` of a refusal's fix (the team's quota.gpus, the
    pool's limits or a node group's maxSize): (quota.gpus, pool)."""
    from trainforge.core.contract import PoolLimits

    for change in text.split(", or set ")[1].removesuffix(_NODES).split(" and "):
        key, value = change.split(" to ")
        if key == _TEAM_KEY:
            gpus = value
        elif key == "trainforge:nodeGroups[0].maxSize":
            pool = dataclasses.replace(pool, max_nodes=int(value))
        else:
            r = key.removeprefix("trainforge:nodePools[0].limits.")
            assert r in ("gpus", "cpu", "memory"), key
            limits = {
                "gpus": pool.limits.gpus,
                "cpu": pool.limits.cpu,
                "memory": pool.limits.memory,
            }
            limits[r] = int(value) if r == "gpus" else value
            pool = dataclasses.replace(pool, limits=PoolLimits(**limits))
    return gpus, pool


@pytest.mark.parametrize("kueue", [True, False])
def test_a_node_group_s_quota_is_lifted_by_its_max_size(kueue):
    """A node group has no limits: its quota is maxSize nodes of its largest type (1 x 4 GPUs
    here). The fix names `nodeGroups[<index>].maxSize` (wave 16 said only quota.gpus, which
    the split scales back to 4), and applying it lets the job through."""
    from trainforge.core.contract import PoolLimits

    group = dataclasses.replace(GPU_POOL, kind="node-group", limits=PoolLimits(), max_nodes=1)
    ten = job(workers=10, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(ten, _stack_target("4", 0, kueue, pool=group), W)
    text = str(err.value)
    assert "trainforge:nodeGroups[0].maxSize: 1" in text
    sets = "trainforge:nodeGroups[0].maxSize to 3" + ("" if kueue else f" and {_TEAM_KEY} to 10")
    assert text.endswith(f"use workers: 4, or set {sets}")
    gpus, group = _applied(text, "4", group)
    resolve_job(ten, _stack_target(gpus, 0, kueue, pool=group), W)


@pytest.mark.parametrize("kueue", [True, False])
def test_cpu_of_a_gpu_pool_is_lifted_through_its_gpus(kueue):
    """4 pods of 1 GPU and 12 cpu on a pool of one g5.12xlarge (4 GPUs, 47.5 cpu left to pods):
    48 cpu over 47.5. The cpu of a GPU pool follows its GPUs (docs/teams.md), so no change of
    the cpu keys lifts it (wave 16 told the team to raise quota.cpu, its CPU pools'): the fix
    raises the GPUs that bring it, with the pool's figure per GPU, and applying it resolves."""
    fat = job(workers=4, gpusPerWorker=1, cpu="12")
    with pytest.raises(JobConfigError) as err:
        resolve_job(fat, _stack_target("4", 4, kueue), W)
    text = str(err.value)
    assert "the cpu of GPU pool 'gpu-workloads' comes with its GPUs, 11.875 per GPU" in text
    assert "quota.cpu" not in text.split("the job could never start")[1]
    assert ", or set " in text, text
    gpus, pool = _applied(text, "4", dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=4)))
    resolve_job(fat, _stack_target(gpus, 0, kueue, pool=pool), W)


def test_the_refusal_and_the_quota_warnings_write_the_team_key_alike():
    """One form for a list key (stack/base.py: `trainforge:jobs[1].pool`): the refusal's
    team key is the quota warnings' `teams[<index>]`, not `teams[<name>]`."""
    from trainforge.platform.queues import quota_plan
    from trainforge.platform.services_config import parse_services_config

    target = _stack_target("6", 4, False)  # 6 asked of a pool of 4: a warning
    with pytest.raises(JobConfigError) as err:
        resolve_job(job(workers=10, gpusPerWorker=1), target, W)
    raw = {"teams": [{"name": "research", "quota": {"gpus": "6"}}]}
    services = parse_services_config(raw, [])
    (warning,) = quota_plan(services.teams, [target.pool]).warnings
    assert warning.startswith("trainforge:teams[0].quota.gpus: 6 asked")
    assert f"{_TEAM_KEY}: 6 caps it" in str(err.value)
    assert str(err.value).endswith(f"{_TEAM_KEY} to 10{_NODES}")
    assert "teams[research]" not in str(err.value)


def test_prod_s_node_group_fix_applied_to_the_stack_resolves_the_job():
    """The shipped prod stack, one job of 21 p4d nodes on its node group p4d-reserved (maxSize
    4): over team llm's 160 GPUs. The fix names nodeGroups[0].maxSize at the 21 nodes the job
    needs (not the 5 that lift the namespace quota alone, which the scheduling rehearsal would
    refuse next), and `workers` at the 4 nodes the group holds (not the 20 the quota holds);
    either applied, the job resolves."""
    import pulumi
    import yaml

    from tests.conftest import ROOT
    from trainforge.jobs.declare import check_jobs
    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    raw = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    cfg = {k.removeprefix("trainforge:"): v for k, v in raw.items() if k.startswith("trainforge:")}
    spec = {"name": "big", "team": "llm", "pool": "p4d-reserved", "workers": 21, "model": "mlp"}
    with pytest.raises(JobConfigError) as err:
        check_jobs(contract_from_config(parse_config(cfg)), [spec])
    text = str(err.value)
    assert "(trainforge:nodeGroups[0].maxSize: 4 caps it)" in text
    assert text.endswith("use workers: 4, or set trainforge:nodeGroups[0].maxSize to 21")
    check_jobs(contract_from_config(parse_config(cfg)), [{**spec, "workers": 4}])
    assert cfg["nodeGroups"][0]["name"] == "p4d-reserved"
    cfg["nodeGroups"] = [{**cfg["nodeGroups"][0], "maxSize": 21}, *cfg["nodeGroups"][1:]]
    check_jobs(contract_from_config(parse_config(cfg)), [spec])


def _two_teams(research: dict, pool):
    """Team research (`research`: its config) beside team other asking 100 GPUs, on `pool`."""
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import parse_services_config

    raw = {"teams": [research, {"name": "other", "quota": {"gpus": "100"}}]}
    services = parse_services_config(raw, [])
    return team_facts(services, pools={pool.name: pool})["research"]


def test_where_the_pool_must_grow_past_the_other_team_s_ask_the_fix_says_how_far():
    """Team research, alone in its cohort, asks 2 GPUs of a pool of 4 beside a team asking
    100, and may borrow none: the split gives it 0. A pool raised by the 6 it lacks goes
    mostly to the other team (each ask is scaled to what the pool holds), so wave 21 said "no
    raise ... alone or together ... lifts it"; but quota.gpus 6 with the pool at 106 admits it.
    The fix now names the least pool (whole GPUs) with which a raise of the team's keys lifts
    it, without lowering the other team's guarantee; applied, the job resolves, and one GPU
    less of the pool is still refused."""
    research = {"name": "research", "cohort": "solo",
                "quota": {"gpus": "2", "borrowingLimit": {"gpus": 0}}}  # fmt: skip
    pool = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=4))
    spec = job(workers=6, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(spec, JobTarget(team=_two_teams(research, pool), pool=pool), W)
    fix = str(err.value).split("the job could never start: ")[1]
    assert fix == (
        "set trainforge:nodePools[0].limits.gpus to 76 and trainforge:teams[0].quota.gpus to 8 "
        "(Karpenter counts each of the job's nodes at its largest type)"
    ), fix
    raised = {**research, "quota": {"gpus": "8", "borrowingLimit": {"gpus": 0}}}
    bigger = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=76))
    resolve_job(spec, JobTarget(team=_two_teams(raised, bigger), pool=bigger), W)
    less = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=75))
    with pytest.raises(JobConfigError):
        resolve_job(spec, JobTarget(team=_two_teams(raised, less), pool=less), W)


def test_where_only_the_pools_cap_and_the_borrowing_limit_together_lift_it_the_fix_says_both():
    """The same, research in the other team's cohort: a borrowing limit alone gets it at most
    the pool's 4 GPUs, and a raised pool alone goes to the other team's guarantee, which
    research may not borrow (limit 0); wave 20 said no raise lifts it. Together they do: the
    fix names both keys, applied the job resolves, and each alone is still refused."""
    research = {"name": "research", "quota": {"gpus": "2", "borrowingLimit": {"gpus": 0}}}
    pool = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=4))
    spec = job(workers=6, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(spec, JobTarget(team=_two_teams(research, pool), pool=pool), W)
    fix = str(err.value).split("the job could never start: ")[1]
    assert fix == (
        "set trainforge:nodePools[0].limits.gpus to 8 and "
        "trainforge:teams[0].quota.borrowingLimit.gpus to 6 (Karpenter counts each of the "
        "job's nodes at its largest type)"
    ), fix
    bigger = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=8))
    borrows = {**research, "quota": {"gpus": "2", "borrowingLimit": {"gpus": 6}}}
    resolve_job(spec, JobTarget(team=_two_teams(borrows, bigger), pool=bigger), W)
    for team, p in ((research, bigger), (borrows, pool)):  # either alone: refused
        with pytest.raises(JobConfigError):
            resolve_job(spec, JobTarget(team=_two_teams(team, p), pool=p), W)


def _plan_stack(tmp_path, config: dict, capsys) -> tuple[int, str]:
    """`trainforge plan --stack bl` of a project holding the program and `config` as its
    Pulumi.bl.yaml, run here (`cli.main`): the exit code and what the user reads (stdout and
    stderr)."""
    import shutil

    import yaml
    from pulumi.runtime import config as runtime_config

    from tests.conftest import ROOT
    from trainforge.plan import cli

    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "Pulumi.bl.yaml").write_text(yaml.safe_dump(config))
    capsys.readouterr()
    config = runtime_config.CONFIG.get()
    try:
        code = cli.main(["--stack", "bl", "--no-standins", "--project-dir", str(tmp_path),
                         "--out", str(tmp_path / "out"), "--report", str(tmp_path / "r.txt")])  # fmt: skip
    finally:  # the stack's config (its aws:region) is no other test's
        runtime_config.set_all_config(config)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_borrowing_limit_raise_that_reaches_the_cohort_s_share_is_the_fix(tmp_path, capsys):
    """The wave-22 review (rev22pe Pulumi.bl.yaml): both teams borrow no GPUs; asr-ddp asks
    2 x 4 GPUs of t4-pool, where speech holds 3, nlp 2 and nobody 3 (a team at limit 0 takes
    no part of it: its cohort's share is 0). The refusal said no raise lifts it "with or
    without a raise of ...borrowingLimit.gpus": the search bounded the limit by what the
    cohort lends at limit 0 (nlp's 2). It now names the least limit, 5, which applied plans
    CLEAN, the plan's Kueue admission (plan.kueue, Kueue's PotentialAvailable) saying the job
    borrows 5 there; at 4 both models hold it to 7."""
    import copy

    import yaml

    from tests.conftest import ROOT
    from trainforge.plan import kueue as K

    raw = yaml.safe_load((ROOT / "tests/jobs/data/quota_borrow_cohort_share.yaml").read_text())
    code, text = _plan_stack(tmp_path, raw, capsys)
    key = "trainforge:teams[1].quota.borrowingLimit.gpus"
    assert code == 2, text
    assert "no raise of" not in text, text
    assert text.rstrip().endswith(f"the job could never start: set {key} to 5"), text
    fixed = copy.deepcopy(raw)
    fixed["config"]["trainforge:teams"][1]["quota"]["borrowingLimit"]["gpus"] = 5
    code, text = _plan_stack(tmp_path, fixed, capsys)
    assert code == 0 and "plan --stack bl: CLEAN" in text, text
    assert "speech/asr-ddp: borrows 5 GPUs in pool t4-pool" in text, text
    cfg = {k.removeprefix("trainforge:"): v for k, v in raw["config"].items()
           if k.startswith("trainforge:")}  # fmt: skip
    for limit, most in ((4, 7), (5, 8)):  # the quota model and Kueue's arithmetic agree
        cfg["teams"][1]["quota"]["borrowingLimit"]["gpus"] = limit
        contract, objects = _solo_stack(cfg)
        assert contract.teams["speech"].quota_inputs.room("t4-pool")["gpus"] == most
        kueue = K.read(objects)
        assert (
            K.Quotas(kueue.queues, kueue.shared).potential(kueue.queues["speech"], "t4-pool", K.GPU)
            == most
        )


def _solo_stack(cfg):
    """The contract, the Kueue objects and the parsed config of a stack config (`trainforge:`
    keys without the prefix), as the program builds them."""
    import pulumi

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.platform.config import parse_config
    from trainforge.platform.published import contract_from_config
    from trainforge.platform.queues import queue_objects

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    parsed = parse_config(cfg)
    contract = contract_from_config(parsed)
    inputs = next(iter(contract.teams.values())).quota_inputs
    objects = queue_objects(inputs.teams, inputs.pools, parsed.services.kueue)
    return contract, objects


def _set_path(cfg: dict, key: str, value: str) -> None:
    """`trainforge:teams[2].quota.pools.l40s-pool.gpus` set to `value` in `cfg`."""
    import re

    here, parts = cfg, re.findall(r"[^.\[\]]+|\[\d+\]", key.removeprefix("trainforge:"))
    for i, part in enumerate(parts):
        step = int(part[1:-1]) if part.startswith("[") else part
        if i == len(parts) - 1:
            here[step] = value
        else:
            if isinstance(step, str):
                here.setdefault(step, {})
            here = here[step]


def test_the_fix_for_a_job_over_its_pool_quota_is_the_one_kueue_admits():
    """The wave-19 review (Pulumi.bad12.yaml): team speech, alone in cohort speech-solo, holds
    8 GPUs of l40s-pool by `quota.pools` and borrows none; 4 workers x 4 GPUs there. The fix
    said `quota.gpus to 16`: applied, the namespace took 16 but the split spent the extra 8 in
    other pools (llm's guarantee dropped 32 -> 30) and Kueue still held the job to 8 there,
    never admitting it. The fix now names the pool's key, and applied to the stack the job
    resolves, Kueue's own arithmetic (plan.kueue.Quotas, the never-admitted check's) lets its
    ClusterQueue hold 16 GPUs there, and no other team's guarantee moves."""
    import yaml

    from tests.conftest import ROOT
    from trainforge.jobs.declare import check_jobs
    from trainforge.plan import kueue as K

    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_solo_cohort.yaml").read_text())
    spec = {"name": "speech-ddp", "team": "speech", "pool": "l40s-pool", "workers": 4}
    contract, before = _solo_stack(cfg)
    with pytest.raises(JobConfigError) as err:
        check_jobs(contract, [{**spec, "model": "mlp"}])
    text = str(err.value)
    team = "trainforge:teams[2].quota"
    assert text.endswith(
        f"use workers: 2, or set {team}.pools.l40s-pool.gpus to 16 and {team}.gpus to 16"
    ), text
    for change in text.split(", or set ")[1].split(" and "):
        _set_path(cfg, *change.split(" to "))
    contract, after = _solo_stack(cfg)
    check_jobs(contract, [{**spec, "model": "mlp"}])
    kueue = K.read(after)
    most = K.Quotas(kueue.queues, kueue.shared).potential(
        kueue.queues["speech"], "l40s-pool", K.GPU
    )
    assert most == 16
    queues = {d["metadata"]["name"]: d for d in before if d["kind"] == "ClusterQueue"}
    for d in after:
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] != "speech":
            assert d == queues[d["metadata"]["name"]]


def test_a_team_split_over_two_pools_is_told_its_part_of_the_job_s_pool():
    """Team research's 8 GPUs split 4 + 4 over two pools of 16; it borrows none. 10 x 1 GPU in
    gpu-workloads: raising quota.gpus by the 6 missing gives that pool only 7 (the split), so
    the fix names the pool's part and the total with it; `workers` is what the pool's queue
    holds (4), not the namespace's 8, which Kueue would never admit there. Each applied, the
    job resolves and its queue holds it in the pool."""
    from trainforge.jobs import quota
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import parse_services_config

    other = dataclasses.replace(
        GPU_POOL, name="gpu-b", node_selector=(("trainforge.io/pool", "gpu-b"),)
    )
    pools = {p.name: dataclasses.replace(p, limits=PoolLimits(gpus=16)) for p in (GPU_POOL, other)}

    def facts(q: dict) -> JobTarget:
        quota_ = {"borrowingLimit": {"gpus": 0}, **q}
        raw = {"teams": [{"name": "research", "quota": quota_}], "nodePools": [
            {"name": name} for name in pools]}  # fmt: skip
        errors: list[str] = []
        services = parse_services_config(raw, errors)
        assert errors == []
        team = team_facts(services, pools=pools)["research"]
        return JobTarget(team=team, pool=pools["gpu-workloads"], checkpoint_bucket="b")

    ten = job(workers=10, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(ten, facts({"gpus": "8"}), W)
    text = str(err.value)
    key = "trainforge:teams[0].quota"
    assert (
        f"may hold at most 8 gpus ({key}.pools.gpu-workloads.gpus: unset (4 by the split), "
        f"{key}.gpus: 8 caps it) in namespace 'research', at most 4 in pool 'gpu-workloads' "
        "(Kueue counts quota per pool); " in text
    ), text
    assert text.endswith(
        f"use workers: 4, or set {key}.pools.gpu-workloads.gpus to 10 and {key}.gpus to 14"
    ), text
    # the namespace holds 8, the pool's queue 4: workers 8 would never be admitted there
    assert facts({"gpus": "8"}).team.quota_inputs.held()["gpus"] == "8"
    assert facts({"gpus": "8"}).team.quota_inputs.room("gpu-workloads")["gpus"] == 4
    resolve_job(job(workers=4, gpusPerWorker=1), facts({"gpus": "8"}), W)
    fixed = facts({"gpus": "14", "pools": {"gpu-workloads": {"gpus": "10"}}})
    resolve_job(ten, fixed, W)
    assert fixed.team.quota_inputs.room("gpu-workloads")["gpus"] == 10
    assert (
        quota.pool_room(
            fixed.team.quota_inputs.teams[0], fixed.team.quota_inputs.teams, pools.values()
        )["gpu-b"]["nvidia.com/gpu"]
        == 4
    )  # the other pool keeps its part


def test_a_pool_limit_too_small_for_one_pod_is_blamed_on_the_pool_s_key():
    """The review's case: `limits.memory: "1024"` (bytes) and one worker. The refusal names
    `trainforge:nodePools[0].limits.memory` and its value, not `workers` (one is the fewest);
    the printed fix applied to the stack lets the job resolve. Without the stack's pool keys
    (a program's job) it names the job's `pool`."""
    pool = dataclasses.replace(GPU_POOL, limits=dataclasses.replace(GPU_POOL.limits, memory="1024"))
    one = job(workers=1, gpusPerWorker=1)
    with pytest.raises(JobConfigError) as err:
        resolve_job(one, _stack_target("4", 4, True, pool=pool), W)
    text = str(err.value)
    assert text.startswith("trainforge:nodePools[0].limits.memory: got '1024'; ")
    assert "fewer workers" not in text
    fix = text.rsplit("Set limits.memory to at least ", 1)[1]
    fixed = dataclasses.replace(pool, limits=dataclasses.replace(pool.limits, memory=fix))
    resolve_job(one, _stack_target("4", 4, True, pool=fixed), W)
    with pytest.raises(JobConfigError, match=rf"^{re.escape(W)}\.pool: got 'gpu-workloads'; "):
        resolve_job(one, target(pool), W)


def test_where_only_the_borrowing_limit_holds_it_the_fix_raises_it_to_what_kueue_admits():
    """The wave-20 review (rev20pe Pulumi.pe3.yaml): team research holds 4 GPUs of l40s by
    the split and may borrow 4; l40s-ft asks 16. The finding said no raise lifts it, yet
    pe4.yaml's `borrowingLimit: {gpus: 12}` admitted it. The fix is that key at the least
    value after which Kueue's own arithmetic (plan.kueue.Quotas, the never-admitted check's)
    lets the ClusterQueue hold 16 there; applied, no other queue changes; one less does not."""
    from fractions import Fraction

    import yaml

    from tests.conftest import ROOT
    from trainforge.jobs import quota
    from trainforge.plan import kueue as K

    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_borrow_limit.yaml").read_text())
    contract, before = _solo_stack(cfg)
    inputs = contract.teams["research"].quota_inputs
    lift = quota.quota_raise(inputs, "gpus", Fraction(16), "l40s")
    key = "trainforge:teams[2].quota.borrowingLimit.gpus"
    assert lift == quota.Lift(((key, "4", "12"),))

    def most(value: str) -> tuple[Fraction, list]:
        _set_path(cfg, key, value)
        objects = _solo_stack(cfg)[1]
        kueue = K.read(objects)
        got = K.Quotas(kueue.queues, kueue.shared).potential(
            kueue.queues["research"], "l40s", K.GPU
        )
        return got, [d for d in objects if d["kind"] == "ClusterQueue"]

    assert most("12")[0] == 16 and most("11")[0] == 15
    queues = {d["metadata"]["name"]: d for d in before if d["kind"] == "ClusterQueue"}
    for d in most("12")[1]:
        if d["metadata"]["name"] != "research":
            assert d == queues[d["metadata"]["name"]]


def _grown_teams(research: dict, pool, other_gpus: str):
    """Team research (`research`: its config) beside team other asking `other_gpus` GPUs."""
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import parse_services_config

    raw = {"teams": [research, {"name": "other", "quota": {"gpus": other_gpus}}]}
    return team_facts(parse_services_config(raw, []), pools={pool.name: pool})["research"]


def test_a_job_short_of_cpu_in_a_gpu_pool_gets_the_pool_grown_as_a_gpu_job_does():
    """Team research, alone in its cohort, asks 1000 GPUs of a pool of 102 beside a team
    asking 100000: the split gives it 1 GPU and its 11.875 cores. A job of 1 GPU and 30 cores
    needs 3 GPUs' CPU; a raise of the pool goes mostly to the other team, so only the pool
    grown past the other's ask lifts it, the step GPUs got in wave 22. The CPU search lacked
    it and said "no raise ... lifts it" (and named quota.cpu and limits.cpu, which a GPU
    pool's CPU does not follow). It now names the pool's GPUs and the team's; applied, the
    job resolves, and one GPU less of the pool is still refused."""
    research = {"name": "research", "cohort": "solo",
                "quota": {"gpus": "1000", "borrowingLimit": {"gpus": 0}}}  # fmt: skip
    pool = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=102))
    spec = job(workers=1, gpusPerWorker=1, cpu="30")
    with pytest.raises(JobConfigError) as err:
        resolve_job(spec, JobTarget(team=_grown_teams(research, pool, "100000"), pool=pool), W)
    fix = str(err.value).split("the job could never start: ")[1]
    assert fix == (
        "use cpu of at most 11.875 per pod, or set trainforge:nodePools[0].limits.gpus to 252 "
        "and trainforge:teams[0].quota.gpus to 1003 (Karpenter counts each of the job's nodes "
        "at its largest type)"
    ), fix
    raised = {**research, "quota": {"gpus": "1003", "borrowingLimit": {"gpus": 0}}}
    bigger = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=252))
    team = _grown_teams(raised, bigger, "100000")
    resolve_job(spec, JobTarget(team=team, pool=bigger), W)
    assert team.quota_inputs.room("gpu-workloads")["cpu"] >= 30
    less = dataclasses.replace(GPU_POOL, limits=PoolLimits(gpus=251))
    with pytest.raises(JobConfigError):
        resolve_job(spec, JobTarget(team=_grown_teams(raised, less, "100000"), pool=less), W)


def test_a_queue_borrowing_no_gpus_and_no_cpu_is_told_to_raise_both(tmp_path, capsys):
    """tests/jobs/data/quota_borrow_two_limits.yaml: speech borrows no GPUs and no CPU
    (`borrowingLimit: {gpus: 0, cpu: 0}`); asr-ddp asks 2 x 4 GPUs of t4-pool, where speech
    holds 3. Wave 22's fix raised GPUs only ("quota.gpus to 9 and borrowingLimit.gpus to 2"),
    which Kueue never admits: it checks every resource of the flavor (kueue v0.19.2
    flavorassigner, per resource), and at a CPU limit of 0 the CPU stays at what speech is
    guaranteed. The fix now raises both limits, each to the least that holds; applied, the
    plan is CLEAN and Kueue's own arithmetic (plan.kueue.Quotas) lets speech's ClusterQueue
    hold the job's GPUs and CPU there; the GPU limit alone, or one millicore less, is still
    never admitted."""
    import copy
    from fractions import Fraction

    import yaml

    from tests.conftest import ROOT
    from trainforge.plan import kueue as K

    raw = yaml.safe_load((ROOT / "tests/jobs/data/quota_borrow_two_limits.yaml").read_text())
    code, text = _plan_stack(tmp_path, raw, capsys)
    key = "trainforge:teams[1].quota.borrowingLimit"
    assert code == 2, text
    assert text.rstrip().endswith(
        f"the job could never start: set {key}.gpus to 5 and {key}.cpu to 59182m"
    ), text

    def planned(limits: dict) -> tuple[int, str]:
        fixed = copy.deepcopy(raw)
        fixed["config"]["trainforge:teams"][1]["quota"]["borrowingLimit"] = limits
        return _plan_stack(tmp_path, fixed, capsys)

    code, text = planned({"gpus": 5, "cpu": "59182m"})
    assert code == 0 and "plan --stack bl: CLEAN" in text, text
    assert "speech/asr-ddp: borrows 5 GPUs in pool t4-pool" in text, text
    for limits in ({"gpus": 5, "cpu": 0}, {"gpus": 5, "cpu": "59181m"}):
        code, text = planned(limits)
        assert code == 1 and "speech/asr-ddp: never admitted" in text, (limits, text)
    cfg = {k.removeprefix("trainforge:"): v for k, v in raw["config"].items()
           if k.startswith("trainforge:")}  # fmt: skip
    cfg["teams"][1]["quota"]["borrowingLimit"] = {"gpus": 5, "cpu": "59182m"}
    contract, objects = _solo_stack(cfg)
    kueue = K.read(objects)
    quotas, speech = K.Quotas(kueue.queues, kueue.shared), kueue.queues["speech"]
    room = contract.teams["speech"].quota_inputs.room("t4-pool")
    assert quotas.potential(speech, "t4-pool", K.GPU) == room["gpus"] == 8
    assert quotas.potential(speech, "t4-pool", "cpu") == room["cpu"] >= Fraction("94.8")
