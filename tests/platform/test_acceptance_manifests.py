"""The acceptance tests the platform declares (prod's GPU/EFA capacity asks for them): their
objects, and a rehearsal of what their pods run -- the DCGM pod's script and verdict
container on recorded dcgmi output, and the all-reduce pods' exact command line as two local
"pods" (CPU, gloo) that rendezvous through torchrun's static rendezvous by their indexes."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_stack
from tests.ports import communicate_all, retry_on_clash
from trainforge.core import versions
from trainforge.core.contract import PoolFacts, Taint
from trainforge.jobs.codeship import collect
from trainforge.platform import acceptance as A
from trainforge.platform.config import ConfigError, parse_config
from trainforge.platform.published import pool_facts
from trainforge.stack.platform import AcceptanceTestConfig

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "training" / "acceptance_samples"


@pytest.fixture(scope="module")
def prod():
    return run_stack("prod")


def _objects(run, type_):
    return {r.inputs["metadata"]["name"]: r.inputs for r in run.of_type(type_)}


def test_prod_declares_suspended_runs_for_its_gpu_and_efa_capacity(prod) -> None:
    cronjobs = _objects(prod, "kubernetes:batch/v1:CronJob")
    assert set(cronjobs) == {
        "p4d-reserved-dcgm-diag", "p4d-reserved-allreduce",
        "efa-training-dcgm-diag", "efa-training-allreduce",
        "gpu-workloads-dcgm-diag",  # not EFA: no all-reduce
    }  # fmt: skip
    for name, cj in cronjobs.items():
        assert cj["spec"]["suspend"] is True, name  # on demand only
        assert cj["metadata"]["annotations"]["trainforge.io/run"] == A.run_command(name)
        assert cj["metadata"]["namespace"] == A.NAMESPACE
    (ns,) = [r.inputs for r in prod.of_type("kubernetes:core/v1:Namespace")
             if r.inputs["metadata"]["name"] == A.NAMESPACE]  # fmt: skip
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_dcgm_pods_take_a_whole_node_each_and_use_the_agents_host_engine(prod) -> None:
    job = _objects(prod, "kubernetes:batch/v1:CronJob")["efa-training-dcgm-diag"]["spec"][
        "jobTemplate"
    ]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 2, 2)
    pod = job["template"]["spec"]
    (diag,) = pod["initContainers"]
    assert diag["image"] == versions.DCGM_IMAGE
    assert diag["resources"]["limits"]["nvidia.com/gpu"] == "8"  # all of a p5's GPUs
    assert '--host "$HOST_IP"' in diag["command"][2]
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in diag[
        "env"
    ]
    assert diag["securityContext"]["runAsNonRoot"] is True  # a DCGM client needs no root
    (verdict,) = pod["containers"]
    assert verdict["command"][:6] == [
        "python", "-m", "trainforge.training.acceptance.cli", "parse", "dcgm", "/results/dcgm.json",
    ]  # fmt: skip
    assert pod["nodeSelector"] == {"trainforge.io/pool": "efa-training"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
            "effect": "NoSchedule"} in pod["tolerations"]  # fmt: skip


def test_allreduce_pods_find_pod_zero_through_their_headless_service(prod) -> None:
    cj = _objects(prod, "kubernetes:batch/v1:CronJob")["efa-training-allreduce"]
    svc = _objects(prod, "kubernetes:core/v1:Service")["efa-training-allreduce"]
    tmpl = cj["spec"]["jobTemplate"]["spec"]["template"]
    pod = tmpl["spec"]
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == "efa-training-allreduce"
    # the Service selects the run's pods, whatever the run (Job) is called
    assert all(tmpl["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())
    (c,) = pod["containers"]
    args = c["args"]
    assert "--master-addr=$(JOB_NAME)-0.efa-training-allreduce" in args
    assert "--node-rank=$(JOB_COMPLETION_INDEX)" in args and "--nproc-per-node=8" in args
    assert {"name": "JOB_NAME", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}} in c["env"]  # fmt: skip
    assert args[args.index("--min-busbw") + 1] == "389.67" and "--require-efa" in args
    limits = c["resources"]["limits"]
    assert limits["vpc.amazonaws.com/efa"] == "32" and limits["nvidia.com/gpu"] == "8"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_DEBUG_FILE"].startswith("/tmp/")  # read back by the benchmark
    # aws-ofi-nccl inside (the stock image has none), pulled through the stack's cache
    assert c["image"].endswith("/ecr-public/" + versions.EFA_TEST_IMAGE.split("/", 1)[1])
    assert "command" not in c  # the image's entrypoint stays


def test_acceptance_on_cpu_capacity_is_refused_before_any_resource() -> None:
    config = parse_config({
        "cluster": "c",
        "nodePools": [{"name": "cpu", "instanceTypes": ["c5.2xlarge"], "acceptanceTest": True}],
    })  # fmt: skip
    with pytest.raises(
        ConfigError,
        match=r"nodePools\[0\].acceptanceTest: got True; expected false: .* 'cpu' has no GPUs",
    ):
        A.check_acceptance(config, pool_facts(config))


# ------------------------------------------------------------------------- rehearsals


def _container(obj: dict, name: str) -> dict:
    pod = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return next(
        c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name
    )


@pytest.mark.parametrize(("sample", "passed"), [("dcgm_l2_pass.json", True),
                                                ("dcgm_l2_fail_memory.json", False),
                                                ("dcgmi_no_hostengine.txt", False)])  # fmt: skip
def test_the_dcgm_pod_script_feeds_its_verdict_container(tmp_path, sample, passed) -> None:
    """The init container's script (with a stand-in dcgmi that prints a recorded output) and
    the verdict container's command, run as the pod would: the verdict decides the pod."""
    pool = PoolFacts("p5", gpus_per_node=8, taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),))
    cj = A.dcgm_manifest(pool, AcceptanceTestConfig(enabled=True, dcgm_level=2), collect())
    diag, verdict = _container(cj, "dcgm-diag"), _container(cj, "verdict")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "dcgmi"
    fake.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/dcgmi-args\ncat {SAMPLES / sample}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    results = tmp_path / "results"
    results.mkdir()
    script = diag["command"][2].replace("/results", str(results))
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", HOST_IP="10.0.3.4",
               NODE_NAME="ip-10-0-3-4", LEVEL="2")  # fmt: skip
    out = subprocess.run(diag["command"][:2] + [script], env=env, capture_output=True, text=True)
    assert out.returncode == 0  # the script never fails the pod itself
    assert (tmp_path / "dcgmi-args").read_text().split() == [
        "diag",
        "--host",
        "10.0.3.4",
        "-r",
        "2",
        "-j",
    ]
    cmd = [sys.executable if c == "python" else c for c in verdict["command"]]
    cmd = [str(results / "dcgm.json") if c == "/results/dcgm.json" else c for c in cmd]
    cmd = [c.replace("$(NODE_NAME)", "ip-10-0-3-4") for c in cmd]
    v = subprocess.run(
        cmd, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True
    )
    assert (v.returncode == 0) is passed, v.stdout + v.stderr
    assert ("PASS dcgm: level 2 on ip-10-0-3-4" in v.stdout) is passed


def test_the_allreduce_command_line_forms_one_group_across_two_pods(tmp_path) -> None:
    """The pods' exact args, as two local pods (index 0 and 1) with one CPU rank each: the
    static rendezvous on pod 0, node ranks from JOB_COMPLETION_INDEX, the benchmark's verdict."""
    pool = PoolFacts("cpu-rehearsal", gpus_per_node=1, instance_types=("g6.xlarge",))
    _, cj = A.allreduce_manifests(
        pool, AcceptanceTestConfig(enabled=True, all_reduce=True), collect()
    )
    args = _container(cj, "allreduce")["args"]
    assert "--require-efa" not in args  # not an EFA pool

    def start(port: int) -> list[tuple[int, str]]:
        procs = []
        for index in (0, 1):
            a = [sys.executable if x == "python" else x for x in args]
            a = [x.replace("$(JOB_COMPLETION_INDEX)", str(index))
                  .replace("$(JOB_NAME)-0.cpu-rehearsal-allreduce", "127.0.0.1")
                  .replace(f"--master-port={A.RDZV_PORT}", f"--master-port={port}") for x in a]  # fmt: skip
            # small sizes for a CPU (argparse: the last value wins)
            a += ["--max-bytes", "65536", "--min-bytes", "4096", "--iters", "2", "--warmup", "1"]
            env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
            env.pop("CUDA_VISIBLE_DEVICES", None)
            procs.append(subprocess.Popen(a, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))  # fmt: skip
        return communicate_all(procs, 240)

    results = retry_on_clash(start, lambda rs: [o for _, o in rs])
    outs = [o for _, o in results]
    assert [c for c, _ in results] == [0, 0], outs[0][-3000:] + outs[1][-3000:]
    assert re.search(r"trainforge allreduce: 2 ranks, .* 2 node\(s\)", outs[0]), outs[0][-2000:]
    assert "PASS allreduce" in outs[0]


def _selected(selector: dict, labels: dict) -> bool:
    """A LabelSelector's verdict on a namespace's labels (matchLabels and Exists/In)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or ():
        if e["operator"] == "Exists" and e["key"] not in labels:
            return False
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
    return True


def test_acceptance_runs_go_through_a_queue_the_teams_share(prod) -> None:
    """Acceptance runs hold whole p5/p4d nodes of pools the teams' queues share: Kueue must
    see them (issue 41), so a queue admits them only on idle quota."""
    import yaml

    from trainforge.plan import crds
    from trainforge.platform import kueue, queues

    (ns,) = [r.inputs for r in prod.of_type("kubernetes:core/v1:Namespace")
             if r.inputs["metadata"]["name"] == A.NAMESPACE]  # fmt: skip
    # the chart makes managedJobsNamespaceSelector its job webhooks' namespaceSelector: a Job
    # in an unselected namespace is never suspended at creation
    [release] = [r for r in prod.of_type("kubernetes:helm.sh/v3:Release")
                 if r.inputs.get("name") == "kueue"]  # fmt: skip
    config = yaml.safe_load(
        release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert _selected(config["managedJobsNamespaceSelector"], ns["metadata"]["labels"])
    teams = [r.inputs for r in prod.of_type("kubernetes:core/v1:Namespace")
             if "trainforge.io/team" in (r.inputs["metadata"].get("labels") or {})]  # fmt: skip
    assert teams and all(
        _selected(config["managedJobsNamespaceSelector"], t["metadata"]["labels"]) for t in teams
    )
    for name, cj in _objects(prod, "kubernetes:batch/v1:CronJob").items():
        labels = cj["spec"]["jobTemplate"]["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] == A.LOCAL_QUEUE, name
    queues_ = {
        (r.inputs["kind"], r.inputs["metadata"]["name"]): r.inputs
        for r in prod.resources
        if r.inputs.get("kind") in ("ClusterQueue", "LocalQueue")
    }
    local = queues_[("LocalQueue", A.LOCAL_QUEUE)]
    assert local["metadata"]["namespace"] == A.NAMESPACE
    cq = queues_[("ClusterQueue", local["spec"]["clusterQueue"])]
    team_cq = queues_[("ClusterQueue", "llm")]
    assert cq["spec"]["cohortName"] == team_cq["spec"]["cohortName"]
    flavors = {f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    assert flavors == {
        queues.flavor_name(p) for p in ("p4d-reserved", "efa-training", "gpu-workloads")
    }
    # no quota of its own: it runs on what the teams leave idle, and never preempts
    assert all(r["nominalQuota"] == 0 for f in cq["spec"]["resourceGroups"][0]["flavors"]
               for r in f["resources"])  # fmt: skip
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    for obj in (cq, local):
        schema = crds.schema(obj["apiVersion"], obj["kind"])
        assert schema is not None
        import jsonschema

        jsonschema.validate({k: v for k, v in obj.items() if k != "metadata"}, schema)
    assert kueue.QUEUED_LABEL == "trainforge.io/queued"
