"""Emitted PyTorchJobs, field by field, for DDP, FSDP, elastic and CPU jobs on GPU and EFA
pools; every one validated against the upstream CRD (strict), the operator's webhook rules,
and every pod template as a core PodTemplate with kubernetes-validate (strict)."""

from __future__ import annotations

import pytest

from tests.jobs.helpers import (
    CODE,
    CPU_POOL,
    DLC_IMAGE,
    EFA_POOL,
    GPU_POOL,
    container,
    env_of,
    target,
    validate_pod_templates,
    webhook_errors,
)
from tests.jobs.schemas import crd_errors
from trainforge.core import expansion
from trainforge.core.errors import JobConfigError
from trainforge.jobs.backends import emit
from trainforge.jobs.codeship import CODE_MOUNT
from trainforge.jobs.images import image_for
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

W = "trainforge:jobs[0]"


def build(pool=GPU_POOL, code=CODE, tgt=None, **kw):
    raw = {"name": "llm", "team": "research", "pool": pool.name, **kw}
    t = tgt or target(pool)
    job = resolve_job(parse_job(raw, W), t, W)
    return job, emit(job, t, code)


CASES = {
    "ddp-gpu": dict(pool=GPU_POOL, workers=3, model="gpt", steps=1000),
    "ddp-gpu-single-proc": dict(pool=GPU_POOL, workers=2, gpusPerWorker=1),
    "fsdp-gpu": dict(
        pool=GPU_POOL, preset="fsdp", workers=2, activationCheckpointing=True, compile=True
    ),
    "fsdp-efa": dict(pool=EFA_POOL, preset="fsdp", workers=4, image=DLC_IMAGE),
    "elastic-efa": dict(
        pool=EFA_POOL, preset="elastic", image=DLC_IMAGE, elastic={"minWorkers": 2, "maxWorkers": 4}
    ),
    "elastic-gpu": dict(
        pool=GPU_POOL,
        preset="elastic",
        workers=3,
        elastic={"minWorkers": 2, "maxWorkers": 4, "maxRestarts": 7},
    ),
    "cpu-ddp": dict(pool=CPU_POOL, workers=2, model="mlp"),
    "cpu-one-pod": dict(pool=CPU_POOL, workers=1, procsPerWorker=2),
    "image-code": dict(
        pool=GPU_POOL,
        workers=2,
        codeSource="image",
        image="123.dkr.ecr.us-east-1.amazonaws.com/trainforge@sha256:" + "a" * 64,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_emitted_object_is_valid(case):
    _, out = build(**CASES[case])
    pj = out.pytorchjob
    assert crd_errors(pj) == []
    assert webhook_errors(pj) == []
    assert validate_pod_templates(pj) == len(pj["spec"]["pytorchReplicaSpecs"])
    assert crd_errors(out.podmonitor) == []


def test_ddp_on_gpu_pool_field_by_field():
    job, out = build(**CASES["ddp-gpu"])
    pj = out.pytorchjob
    assert pj["apiVersion"] == "kubeflow.org/v1" and pj["kind"] == "PyTorchJob"
    assert pj["metadata"]["name"] == "llm" and pj["metadata"]["namespace"] == "team-research"
    spec = pj["spec"]
    assert spec["nprocPerNode"] == "4" and "elasticPolicy" not in spec
    assert spec["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "backoffLimit": 6,
        "ttlSecondsAfterFinished": 86400,
    }
    master, worker = spec["pytorchReplicaSpecs"]["Master"], spec["pytorchReplicaSpecs"]["Worker"]
    assert (master["replicas"], worker["replicas"]) == (1, 2)
    # ExitCode: the runtime's exit code decides (a bug stops the job, a hang restarts it)
    assert master["restartPolicy"] == worker["restartPolicy"] == "ExitCode"
    assert master["template"] == worker["template"]
    tmpl = master["template"]
    assert tmpl["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert tmpl["metadata"]["labels"]["trainforge.io/job"] == "llm"
    pod = tmpl["spec"]
    assert pod["serviceAccountName"] == "training"
    assert pod["automountServiceAccountToken"] is False  # no API token in training pods
    assert pod["terminationGracePeriodSeconds"] == 90 + 30
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-workloads"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Equal", "value": "true"}
    ]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"][
        "seccompProfile"
    ] == {"type": "RuntimeDefault"}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": job.shm_size}
    assert vols["fsx"]["persistentVolumeClaim"] == {"claimName": "fsx-research"}
    assert vols["code"]["configMap"]["name"] == CODE.configmap_name("llm")
    assert vols["code"]["configMap"]["items"][2] == {
        "key": "trainforge--training--__main__.py",
        "path": "trainforge/training/__main__.py",
    }

    c = container(pj)
    assert c["name"] == "pytorch" and c["image"] == image_for(job, GPU_POOL)
    assert (
        c["resources"]["requests"]
        == c["resources"]["limits"]
        == {"cpu": "47500m", "memory": "173048Mi", "nvidia.com/gpu": "4"}  # wiring defaults
    )
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "pytorchjob-port": 23456,
        "metrics": 9090,
    }
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["dshm"]["mountPath"] == "/dev/shm" and mounts["fsx"]["mountPath"] == "/fsx"
    assert mounts["code"] == {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True}
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}

    cmd = c["command"]
    # torchrun through trainforge.training.launch: the pod exits with the workers' reason
    assert cmd[:9] == [
        "python",
        "-m",
        "trainforge.training.launch",
        "--nnodes=3",
        "--nproc-per-node=4",
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "--rdzv-conf=timeout=960",  # the static rendezvous waits as long as every other wait
    ]
    assert cmd[9:13] == ["-m", "trainforge.training", "--strategy", "ddp"]
    assert "--hang-timeout" not in cmd  # the runtime's default (300 s) unless the job sets one
    flags = " ".join(cmd)
    assert "--model gpt --steps 1000" in flags
    assert "--checkpoint-dir /fsx/checkpoints/team-research/llm" in flags
    # the stock image has no boto3, so the S3 mirror is off unless the job names its own image
    assert "--checkpoint-s3" not in flags
    assert (
        "--grace-period 90" in flags and "--async-checkpoint" in flags and "--resume auto" in flags
    )
    assert "--metrics-port 9090" in flags and "--output-dir /fsx/runs/team-research/llm" in flags

    env = env_of(c)
    assert env["PYTHONPATH"] == CODE_MOUNT
    assert env["NCCL_DEBUG"] == "WARN" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.mlflow.svc:5000"
    assert not any(k.startswith("FI_") for k in env), "no EFA variables off EFA pools"
    assert "LOCAL_RANK" not in env  # torchrun sets it per process
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "90"  # torchrun waits the checkpoint grace

    pm = out.podmonitor
    assert pm["apiVersion"] == "monitoring.coreos.com/v1" and pm["kind"] == "PodMonitor"
    assert pm["metadata"] == {
        "name": "llm-metrics",
        "namespace": "team-research",
        "labels": pj["metadata"]["labels"],
    }
    # metrics come from global rank 0, which is the Master pod
    assert pm["spec"]["selector"] == {
        "matchLabels": {"trainforge.io/job": "llm", "training.kubeflow.org/replica-type": "master"}
    }
    assert pm["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]

    cm = out.configmap
    assert cm["immutable"] is True and cm["metadata"]["name"] == CODE.configmap_name("llm")
    assert cm["data"]["trainforge--training--__main__.py"] == "print('train')\n"


def test_one_gpu_per_pod_runs_python_directly():
    _, out = build(**CASES["ddp-gpu-single-proc"])
    c = container(out.pytorchjob)
    assert c["command"][:3] == ["python", "-m", "trainforge.training"]
    env = env_of(c)
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("0", "1")
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in env
    assert out.pytorchjob["spec"]["nprocPerNode"] == "1"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_fsdp_on_efa_pool():
    _, out = build(**CASES["fsdp-efa"])
    pj = out.pytorchjob
    c = container(pj)
    assert c["image"] == DLC_IMAGE
    assert "--strategy fsdp" in " ".join(c["command"])
    res = c["resources"]
    assert res["requests"] == res["limits"]
    assert res["limits"]["vpc.amazonaws.com/efa"] == "32" and res["limits"]["nvidia.com/gpu"] == "8"
    env = env_of(c)
    assert (
        env["FI_PROVIDER"] == "efa"
        and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
        and env["FI_EFA_FORK_SAFE"] == "1"
    )
    # no hugepages requested, so libfabric must not take its buffers from huge pages
    assert env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert not [k for k in res["limits"] if k.startswith("hugepages-")]
    assert env["NCCL_DEBUG"] == "WARN"
    pod = pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "efa-p5"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Exists"}
    ]
    # no capability is added for EFA: drop ALL stands
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_elastic_job_is_workers_only_with_c10d():
    _, out = build(**CASES["elastic-gpu"])
    spec = out.pytorchjob["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"]
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert spec["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
        "maxRestarts": 7,
        "rdzvBackend": "c10d",
        "rdzvId": "llm",
    }
    assert spec["nprocPerNode"] == "4" and "nProcPerNode" not in spec["elasticPolicy"]
    cmd = container(out.pytorchjob, "Worker")["command"]
    assert cmd[:8] == [
        "python",
        "-m",
        "trainforge.training.launch",
        "--nnodes=2:4",
        "--nproc-per-node=4",
        "--max-restarts=7",
        "--rdzv-backend=c10d",
        "--rdzv-conf=join_timeout=960",
    ]
    # rank 0 can be on any worker of an elastic job: the PodMonitor selects them all
    assert out.podmonitor["spec"]["selector"] == {"matchLabels": {"trainforge.io/job": "llm"}}
    # the operator's rendezvous endpoint needs the pytorchjob-port on the Worker container
    assert any(p["name"] == "pytorchjob-port" for p in container(out.pytorchjob, "Worker")["ports"])


def test_cpu_job_has_no_gpu_or_nccl_settings():
    job, out = build(**CASES["cpu-ddp"])
    c = container(out.pytorchjob)
    assert c["resources"]["limits"] == {"cpu": job.cpu, "memory": job.memory}
    env = env_of(c)
    assert not any(k.startswith(("NCCL_", "FI_")) for k in env)
    pod = out.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "tolerations" not in pod and pod["nodeSelector"] == {
        "karpenter.sh/nodepool": "training-workloads"
    }
    assert c["command"][0] == "python"


def test_single_pod_multi_process_job_is_master_only_standalone():
    _, out = build(**CASES["cpu-one-pod"])
    specs = out.pytorchjob["spec"]["pytorchReplicaSpecs"]
    assert list(specs) == ["Master"] and specs["Master"]["replicas"] == 1
    assert container(out.pytorchjob)["command"][:6] == [
        "python",
        "-m",
        "trainforge.training.launch",
        "--standalone",
        "--nnodes=1",
        "--nproc-per-node=2",
    ]


def test_image_code_source_has_no_configmap():
    _, out = build(**CASES["image-code"])
    assert out.configmap is None
    c = container(out.pytorchjob)
    assert "PYTHONPATH" not in env_of(c) and all(m["name"] != "code" for m in c["volumeMounts"])


def test_no_bucket_no_mirror_and_no_mlflow():
    _, out = build(
        pool=GPU_POOL, tgt=target(GPU_POOL, checkpoint_bucket=None, mlflow_tracking_uri=None)
    )
    c = container(out.pytorchjob)
    assert "--checkpoint-s3" not in c["command"] and "MLFLOW_TRACKING_URI" not in env_of(c)


def test_metrics_off_means_no_podmonitor():
    _, out = build(pool=GPU_POOL, metricsPort=0)
    assert out.podmonitor is None
    assert [p["name"] for p in container(out.pytorchjob)["ports"]] == ["pytorchjob-port"]


def test_run_policy_and_grace_period_follow_the_declaration():
    _, out = build(
        pool=GPU_POOL,
        restartPolicy="ExitCode",
        checkpoint={"gracePeriod": 300, "async": False, "s3Mirror": False},
        runPolicy={
            "cleanPodPolicy": "All",
            "ttlSecondsAfterFinished": 600,
            "backoffLimit": 2,
            "activeDeadlineSeconds": 86400,
        },
    )
    pj = out.pytorchjob
    assert pj["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "backoffLimit": 2,
        "ttlSecondsAfterFinished": 600,
        "activeDeadlineSeconds": 86400,
    }
    master = pj["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["restartPolicy"] == "ExitCode"
    assert master["template"]["spec"]["terminationGracePeriodSeconds"] == 330
    cmd = container(pj)["command"]
    assert "--async-checkpoint" not in cmd and "--checkpoint-s3" not in cmd
    assert cmd[cmd.index("--grace-period") + 1] == "300"
    assert env_of(container(pj))["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "300"
    assert webhook_errors(pj) == [] and crd_errors(pj) == []


def test_hang_timeout_reaches_the_runtime_and_every_wait_derives_from_it():
    _, out = build(pool=GPU_POOL, workers=2, hangTimeout=600, restartPolicy="OnFailure")
    cmd = container(out.pytorchjob)["command"]
    assert cmd[cmd.index("--hang-timeout") + 1] == "600"
    # the static rendezvous: 3 x 600 + 60 s, the same collective timeout as the runtime's
    assert "--rdzv-conf=timeout=1860" in cmd
    master = out.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["restartPolicy"] == "OnFailure"  # a job may still choose it
    assert webhook_errors(out.pytorchjob) == [] and crd_errors(out.pytorchjob) == []


def test_relative_data_path_is_on_the_fsx_volume():
    _, out = build(pool=GPU_POOL, model="gpt", dataset="tokens", dataPath="datasets/owt.bin")
    cmd = container(out.pytorchjob)["command"]
    assert cmd[cmd.index("--data-path") + 1] == "/fsx/datasets/owt.bin"


def test_webhook_rules_catch_broken_jobs():
    """The local webhook check is not vacuous: it rejects what the operator rejects."""
    _, out = build(**CASES["ddp-gpu"])
    import copy

    bad = copy.deepcopy(out.pytorchjob)
    bad["metadata"]["name"] = "Bad_Name"
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    container(bad)["name"] = "main"
    container(bad, "Worker")["image"] = ""
    errs = webhook_errors(bad)
    assert any("DNS-1035" in e for e in errs) and "Master.replicas must be 1" in errs
    assert any("no container named pytorch" in e for e in errs) and any(
        "has no image" in e for e in errs
    )
    el = copy.deepcopy(build(**CASES["elastic-gpu"])[1].pytorchjob)
    el["spec"]["pytorchReplicaSpecs"] = {
        "Master": el["spec"]["pytorchReplicaSpecs"]["Worker"] | {"replicas": 1}
    }
    assert "elasticPolicy needs Workers" in webhook_errors(el)


def test_team_subpath_on_a_shared_file_system():
    _, out = build(pool=GPU_POOL, tgt=target(GPU_POOL, fsx_sub_path="research"))
    pj = out.pytorchjob
    mounts = {m["name"]: m for m in container(pj)["volumeMounts"]}
    assert mounts["fsx"] == {"name": "fsx", "mountPath": "/fsx", "subPath": "research"}
    assert validate_pod_templates(pj) == 1


def test_without_fsx_the_volume_is_pod_local():
    _, out = build(pool=GPU_POOL, tgt=target(GPU_POOL, claim_name=None, fsx_sub_path="research"))
    pj = out.pytorchjob
    vols = {
        v["name"]: v
        for v in pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"]
    }
    assert vols["fsx"] == {"name": "fsx", "emptyDir": {}}
    assert "subPath" not in {m["name"]: m for m in container(pj)["volumeMounts"]}["fsx"]
    assert validate_pod_templates(pj) == 1 and crd_errors(pj) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_runtime_accepts_the_emitted_flags(case):
    """Contract with trainforge.training: its own parser takes every flag we emit."""
    from trainforge.training.config import parse_args

    job, out = build(**CASES[case])
    specs = out.pytorchjob["spec"]["pytorchReplicaSpecs"]
    cmd = container(out.pytorchjob, "Master" if "Master" in specs else "Worker")["command"]
    cfg = parse_args(cmd[cmd.index("trainforge.training") + 1 :])
    assert cfg.strategy == job.strategy
    assert cfg.checkpoint.directory == f"/fsx/checkpoints/team-research/{job.name}"
    assert cfg.checkpoint.grace_period == job.checkpoint.grace_period
    assert cfg.metrics_port == job.metrics_port
    mirror = "s3://tf-checkpoints-123/research/checkpoints/llm"
    assert cfg.checkpoint.s3_uri == (mirror if job.image else None)


def test_s3_mirror_follows_the_image():
    """The mirror needs boto3: on for a user image, off for the stock one, refused if forced."""
    job, out = build(pool=GPU_POOL, workers=2, image="ghcr.io/acme/trainforge:1.0")
    flags = " ".join(container(out.pytorchjob)["command"])
    assert job.checkpoint.s3_mirror is True
    assert "--checkpoint-s3 s3://tf-checkpoints-123/research/checkpoints/llm" in flags
    job, _ = build(
        pool=GPU_POOL, workers=2, image="ghcr.io/acme/t:1", checkpoint={"s3Mirror": False}
    )
    assert job.checkpoint.s3_mirror is False
    with pytest.raises(JobConfigError) as err:
        build(pool=GPU_POOL, workers=2, checkpoint={"s3Mirror": True})
    assert "checkpoint.s3Mirror" in str(err.value) and "boto3" in str(err.value)


def test_user_env_overrides_platform_defaults_and_each_name_renders_once():
    """A user's NCCL_DEBUG / NCCL_SOCKET_IFNAME replaces the platform's default (Kubernetes
    would otherwise keep two entries and the later one silently wins), among the job's own
    variables, so that it may refer to them ($(IFACE) below) as Kubernetes expands it."""
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "$(IFACE)",
        "TRITON_CACHE_DIR": "/fsx/triton",
        "X": "1",
        "IFACE": "^lo,docker",
    }
    _, out = build(workers=2, env=env)
    c = container(out.pytorchjob)
    names = [e["name"] for e in c["env"]]
    assert len(names) == len(set(names)), names
    got = env_of(c)
    assert (got["NCCL_DEBUG"], got["NCCL_SOCKET_IFNAME"]) == ("INFO", "$(IFACE)")
    assert got["TRITON_CACHE_DIR"] == "/fsx/triton" and got["X"] == "1"
    # the job's variables follow the platform's, each after those it refers to
    assert names[-5:] == ["IFACE", "NCCL_DEBUG", "TRITON_CACHE_DIR", "X", "NCCL_SOCKET_IFNAME"]
    pairs = [(e["name"], e.get("value")) for e in c["env"]]
    assert expansion.env_values(pairs)["NCCL_SOCKET_IFNAME"] == "^lo,docker"


def test_names_the_platform_must_own_are_refused():
    for name in ("MASTER_ADDR", "PYTHONPATH", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "PET_NNODES"):
        with pytest.raises(JobConfigError, match=rf"\.env\.{name}: .*cannot be overridden"):
            parse_job(
                {"name": "j", "team": "research", "pool": "gpu-workloads", "env": {name: "1"}}, "j"
            )


def test_no_variable_the_operator_sets_itself_is_duplicated():
    """The operator appends PYTHONUNBUFFERED=1 (setPodEnv, release-1.9): ours would be a second
    entry of the same name, which the API server warns about."""
    from trainforge.jobs.backends import emit as emit_any
    from trainforge.jobs.pytorchjob import LAUNCH

    _, out = build(**CASES["fsdp-efa"])
    names = [e["name"] for e in container(out.pytorchjob)["env"]]
    assert not LAUNCH.controller_env & set(names)
    assert len(names) == len(set(names))
    # backends whose controllers do not set it keep it
    from trainforge.core.contract import BACKENDS

    t = target(EFA_POOL, backends=BACKENDS)
    for backend in ("trainjob", "indexed-job"):
        raw = {"name": "llm", "team": "research", "pool": EFA_POOL.name, "backend": backend}
        raw["image"] = DLC_IMAGE
        other = emit_any(resolve_job(parse_job(raw, W), t, W), t, CODE)
        env = {e["name"] for e in other.pod["spec"]["containers"][0]["env"]}
        assert "PYTHONUNBUFFERED" in env, backend
