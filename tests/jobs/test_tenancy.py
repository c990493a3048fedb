"""What makes a job its team's, on every backend: the queue and priority labels on the job's
own object, nothing Kueue owns, a topology request on topology-aware pools, the team's UID/GID
and MLflow identity in its pods."""

from __future__ import annotations

import dataclasses

import pytest

from tests.jobs.helpers import CODE, EFA_POOL, GPU_POOL, target
from tests.jobs.test_backends import ALL, controller_pod, env_entries
from trainforge.core.contract import BACKENDS
from trainforge.core.errors import JobConfigError
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

W = "job"
TAS_POOL = dataclasses.replace(EFA_POOL, topology_aware=True)
TEAM = dict(
    queue="training",
    run_as_user=473852,
    run_as_group=473853,
    mlflow_secret="mlflow-credentials",
    mlflow_experiment="research",
)


def build(backend, pool=GPU_POOL, tgt=None, **kw):
    raw = {"name": "llm", "team": "research", "pool": pool.name, "backend": backend, **kw}
    if pool.efa_interfaces:
        raw.setdefault("efa", False)
    t = tgt or target(pool, **{**ALL, **TEAM})
    job = resolve_job(parse_job(raw, W), t, W)
    return job, emit(job, t, CODE)


def suspends(doc: dict) -> list[str]:
    spec = doc["spec"]
    return [k for k in ("suspend",) if k in spec] + [
        "runPolicy.suspend" for _ in [0] if "suspend" in (spec.get("runPolicy") or {})
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_labels_its_object_with_the_teams_queue_and_priority(backend):
    _, out = build(backend, priority="high")
    labels = out.workload["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "training"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"
    # Kueue suspends and resumes the job: the program never sets the field
    assert suspends(out.workload) == []
    pod = controller_pod(out)
    assert "schedulingGates" not in pod["spec"]
    _, normal = build(backend)
    assert normal.workload["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "normal"


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_kueue_no_queue_labels(backend):
    _, out = build(backend, tgt=target(GPU_POOL, **{**ALL, **TEAM, "queue": None}))
    assert not any(k.startswith("kueue.x-k8s.io/") for k in out.workload["metadata"]["labels"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pods_run_as_the_team_with_its_mlflow_identity(backend):
    _, out = build(backend)
    pod = controller_pod(out)
    sc = pod["spec"]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (473852, 473853, 473853)
    (c,) = [c for c in pod["spec"]["containers"]]
    assert (c["securityContext"]["runAsUser"], c["securityContext"]["runAsGroup"]) == (
        473852,
        473853,
    )
    env = env_entries(c)
    assert env["MLFLOW_EXPERIMENT_NAME"] == {"value": "research"}
    # the identity is a file, never an environment variable (checkov CKV_K8S_35)
    assert not [e for e in c["env"] if "secretKeyRef" in (e.get("valueFrom") or {})]
    assert "MLFLOW_TRACKING_USERNAME" not in env and "MLFLOW_TRACKING_PASSWORD" not in env
    # ... where the MLflow client looks for it: $HOME/.mlflow/credentials
    home = env["HOME"]["value"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "mlflow-credentials"]
    assert mount == {"name": "mlflow-credentials", "mountPath": f"{home}/.mlflow", "readOnly": True}
    (vol,) = [v for v in pod["spec"]["volumes"] if v["name"] == "mlflow-credentials"]
    assert vol["secret"] == {
        "secretName": "mlflow-credentials",
        "items": [{"key": "credentials", "path": "credentials"}],
        # owner and group read: the kubelet gives the file to fsGroup, the team's GID
        "defaultMode": 0o440,
    }
    # inside the pod's /tmp emptyDir, which stays writable
    (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == home]
    assert not tmp.get("readOnly") and "emptyDir" in _volume(pod, tmp["name"])


def _volume(pod: dict, name: str) -> dict:
    (vol,) = [v for v in pod["spec"]["volumes"] if v["name"] == name]
    return vol


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_mlflow_no_credentials_are_mounted(backend):
    for off in ({"mlflow_secret": None}, {"mlflow_tracking_uri": None}):
        _, out = build(backend, tgt=target(GPU_POOL, **{**ALL, **TEAM, **off}))
        pod = controller_pod(out)
        (c,) = pod["spec"]["containers"]
        assert not [m for m in c["volumeMounts"] if m["name"] == "mlflow-credentials"]
        assert not [v for v in pod["spec"]["volumes"] if v["name"] == "mlflow-credentials"]
        assert "MLFLOW_EXPERIMENT_NAME" not in env_entries(c)


def test_a_job_cannot_move_home_away_from_its_mlflow_credentials():
    with pytest.raises(
        JobConfigError, match=r"job\.env\.HOME: got '/fsx/home'; expected no HOME: it is /tmp"
    ):
        parse_job({"name": "x", "team": "t", "pool": "p", "env": {"HOME": "/fsx/home"}}, W)


def test_a_job_cannot_set_the_platforms_mlflow_identity():
    with pytest.raises(JobConfigError, match="MLFLOW_TRACKING_PASSWORD"):
        parse_job(
            {"name": "x", "team": "t", "pool": "p", "env": {"MLFLOW_TRACKING_PASSWORD": "x"}},
            W,
        )


@pytest.mark.parametrize("backend", ["pytorchjob", "trainjob", "indexed-job"])
def test_topology_aware_pools_ask_kueue_to_keep_the_pods_close(backend):
    _, out = build(backend, pool=TAS_POOL, workers=2)
    ann = controller_pod(out)["metadata"]["annotations"]
    assert ann["kueue.x-k8s.io/podset-preferred-topology"] == (
        "topology.k8s.aws/network-node-layer-3"
    )
    # one group: a PyTorchJob's Master and Workers land in the same domain together
    assert ann["kueue.x-k8s.io/podset-group-name"] == "llm"
    _, req = build(backend, pool=TAS_POOL, workers=2, topology="layer-2")
    ann = controller_pod(req)["metadata"]["annotations"]
    assert ann["kueue.x-k8s.io/podset-required-topology"] == "topology.k8s.aws/network-node-layer-2"
    assert "kueue.x-k8s.io/podset-preferred-topology" not in ann
    # `none`: unconstrained, still a topology request (without one Kueue never gives the job
    # its pool's topology flavor; tests/plan/test_kueue_placement.py)
    _, none = build(backend, pool=TAS_POOL, workers=2, topology="none")
    ann = controller_pod(none)["metadata"]["annotations"]
    assert {k: v for k, v in ann.items() if k.startswith("kueue.")} == {
        "kueue.x-k8s.io/podset-unconstrained-topology": "true"
    }


def test_every_replica_of_a_pytorchjob_carries_the_same_topology_request():
    _, out = build("pytorchjob", pool=TAS_POOL, workers=3)
    specs = out.workload["spec"]["pytorchReplicaSpecs"]
    groups = {r: s["template"]["metadata"]["annotations"] for r, s in specs.items()}
    assert set(groups) == {"Master", "Worker"}
    assert groups["Master"] == groups["Worker"]


def test_topology_on_a_pool_without_topology_aware_scheduling_is_refused():
    with pytest.raises(JobConfigError, match=r"job.topology.*no topology-aware scheduling"):
        build("pytorchjob", pool=GPU_POOL, topology="layer-3")
    _, out = build("pytorchjob", pool=GPU_POOL)
    ann = controller_pod(out)["metadata"]["annotations"]
    assert not any(k.startswith("kueue.") for k in ann)


def test_priority_must_be_a_class_the_platform_declares():
    with pytest.raises(JobConfigError, match=r"job.priority.*one of 'high', 'normal', 'low'"):
        parse_job({"name": "x", "team": "t", "pool": "p", "priority": "urgent"}, W)
