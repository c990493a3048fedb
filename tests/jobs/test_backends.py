"""One job model, three backends: every backend's objects are valid, and the pods each backend's
controller creates are the same pod, field by field (resources, tolerations, volumes, env
contract, security, scheduling, command, metrics). The TrainJob's pod is rehearsed from the
platform's ClusterTrainingRuntime and the TrainJob as Trainer v2.3 builds it."""

from __future__ import annotations

import copy
import dataclasses

import kubernetes_validate
import pytest

from tests.jobs.helpers import (
    CODE,
    CPU_POOL,
    DLC_IMAGE,
    EFA_POOL,
    GPU_POOL,
    K8S_VERSION,
    target,
    validate_pod_templates,
    webhook_errors,
)
from tests.jobs.importing import imp, write
from tests.jobs.schemas import crd_errors
from trainforge.core import pods
from trainforge.core.contract import BACKENDS
from trainforge.core.errors import JobConfigError
from trainforge.core.pods import EACH
from trainforge.jobs import backends, indexed_job, trainjob
from trainforge.jobs.backends import WORKLOAD_TYPES, emit
from trainforge.jobs.pod import COMPLETION_INDEX_FIELD, checkpoint_dir
from trainforge.jobs.restarts import on_exit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.checks import validate as V
from trainforge.training.contract import ON_EXIT

W = "trainforge:jobs[0]"
ALL = {"backends": BACKENDS}

CASES = {
    "ddp-gpu": dict(pool=GPU_POOL, workers=3, model="gpt", steps=1000),
    "ddp-gpu-single-proc": dict(pool=GPU_POOL, workers=2, gpusPerWorker=1),
    "fsdp-gpu": dict(pool=GPU_POOL, preset="fsdp", workers=2, compile=True),
    "fsdp-efa": dict(pool=EFA_POOL, preset="fsdp", workers=4, image=DLC_IMAGE),
    "cpu-ddp": dict(pool=CPU_POOL, workers=2, model="mlp", env={"MY_FLAG": "1"}),
    "cpu-one-pod": dict(pool=CPU_POOL, workers=1, procsPerWorker=2),
    "image-code": dict(
        pool=GPU_POOL,
        workers=2,
        codeSource="image",
        image="123.dkr.ecr.us-east-1.amazonaws.com/trainforge@sha256:" + "a" * 64,
        restartPolicy="ExitCode",
        runPolicy={"activeDeadlineSeconds": 7200},
    ),
}
RENDEZVOUS = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}


def build(backend, pool=GPU_POOL, code=CODE, tgt=None, **kw):
    raw = {"name": "llm", "team": "research", "pool": pool.name, "backend": backend, **kw}
    t = tgt or target(pool, **ALL)
    job = resolve_job(parse_job(raw, W), t, W)
    return job, emit(job, t, code)


def controller_pod(out) -> dict:
    """The pod template the backend's controller gives every pod of the job."""
    wl = out.workload
    if out.backend == "pytorchjob":
        specs = wl["spec"]["pytorchReplicaSpecs"]
        template = copy.deepcopy(specs["Master" if "Master" in specs else "Worker"]["template"])
        # the operator appends PYTHONUNBUFFERED=1 to every container (setPodEnv, v1.9)
        for c in template["spec"]["containers"]:
            c["env"] = [*c.get("env", []), {"name": "PYTHONUNBUFFERED", "value": "1"}]
        return template
    if out.backend == "trainjob":
        runtime = trainjob.runtime_manifest(
            next(p for p, n in trainjob.RUNTIMES.items() if n == wl["spec"]["runtimeRef"]["name"])
        )
        return trainjob.effective_pod(wl, runtime)
    return wl["spec"]["template"]


def env_entries(container: dict) -> dict[str, dict]:
    return {e["name"]: {k: v for k, v in e.items() if k != "name"} for e in container["env"]}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_backend_emits_valid_objects(case, backend):
    _, out = build(backend, **CASES[case])
    wl = out.workload
    assert out.backend == backend
    if backend == "pytorchjob":
        assert crd_errors(wl) == [] and webhook_errors(wl) == []
        assert validate_pod_templates(wl) == len(wl["spec"]["pytorchReplicaSpecs"])
    elif backend == "trainjob":
        assert crd_errors(wl) == []
        # the Trainer webhook's rules, and the pod the controller builds as a core PodTemplate
        # from the platform's runtimes (trainjob_findings' default)
        assert V.trainjob_findings(wl, K8S_VERSION) == []
    else:
        kubernetes_validate.validate(wl, K8S_VERSION, strict=True)
        kubernetes_validate.validate(out.service, K8S_VERSION, strict=True)
        assert V.job_spec_findings(wl["spec"]) == []
    pod = controller_pod(out)
    shadow = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "p"}}
    kubernetes_validate.validate({**shadow, "template": pod}, K8S_VERSION, strict=True)
    assert crd_errors(out.podmonitor) == []


def test_the_platform_runtimes_are_valid():
    for runtime in trainjob.runtime_manifests():
        assert crd_errors(runtime) == [], runtime["metadata"]["name"]
        assert V.runtime_findings(runtime, K8S_VERSION) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pods_are_the_same_on_every_backend_field_by_field(case):
    built = {b: build(b, **CASES[case]) for b in BACKENDS}
    pods = {b: controller_pod(out) for b, (_, out) in built.items()}
    ref = pods["pytorchjob"]
    rc = ref["spec"]["containers"][0]
    for backend in ("trainjob", "indexed-job"):
        p, c = pods[backend], pods[backend]["spec"]["containers"][0]
        where = f"{case}/{backend}"
        assert c["resources"] == rc["resources"], where
        assert p["spec"].get("tolerations") == ref["spec"].get("tolerations"), where
        assert p["spec"]["volumes"] == ref["spec"]["volumes"], where
        assert c["volumeMounts"] == rc["volumeMounts"], where
        assert c["image"] == rc["image"] and c["imagePullPolicy"] == rc["imagePullPolicy"], where
        assert c["command"] == rc["command"], where  # one command for every backend
        assert c["securityContext"] == rc["securityContext"], where
        for key in (
            "securityContext",
            "nodeSelector",
            "serviceAccountName",
            "terminationGracePeriodSeconds",
            "automountServiceAccountToken",
            "enableServiceLinks",
        ):
            assert p["spec"][key] == ref["spec"][key], f"{where}: {key}"
        assert p["metadata"]["annotations"] == ref["metadata"]["annotations"], where
        assert ref["metadata"]["labels"].items() <= p["metadata"]["labels"].items(), where
        # the metrics port, by name, where the PodMonitor scrapes it
        metrics = [x for x in c["ports"] if x.get("name") == "metrics"]
        assert metrics == [x for x in rc["ports"] if x.get("name") == "metrics"], where
        # env: the platform's contract is identical; the rendezvous variables the training
        # operator sets on a PyTorchJob pod are set by the backend itself; what the
        # controller does after an exit (TRAINFORGE_ON_EXIT) is each backend's own
        env, ref_env = env_entries(c), env_entries(rc)
        for b, e in ((backend, env), ("pytorchjob", ref_env)):
            assert e.pop(ON_EXIT) == {"value": on_exit(built[b][0])}, where
        assert {
            k: v for k, v in env.items() if k not in RENDEZVOUS and not k.startswith("PET_")
        } == ref_env
        assert env.keys() >= RENDEZVOUS and not RENDEZVOUS & ref_env.keys(), where
        assert env["RANK"] == {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


def test_rendezvous_variables_agree_with_what_trainer_sets():
    """On a TrainJob pod, MASTER_ADDR/PORT and RANK equal the torch plugin's PET_* values."""
    job, out = build("trainjob", **CASES["ddp-gpu"])
    env = env_entries(controller_pod(out)["spec"]["containers"][0])
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == {"value": "llm-node-0-0.llm"}
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == {"value": "29500"}
    assert env["RANK"] == env["PET_NODE_RANK"]
    assert env["PET_NNODES"] == {"value": "3"} and env["PET_NPROC_PER_NODE"] == {"value": "4"}
    assert env["WORLD_SIZE"] == {"value": "12"}  # as the training operator computes it
    _, ix = build("indexed-job", **CASES["ddp-gpu"])
    ienv = env_entries(controller_pod(ix)["spec"]["containers"][0])
    # pod 0's hostname in the Service's subdomain
    assert ienv["MASTER_ADDR"] == {"value": "llm-0.llm"} and ix.service["metadata"]["name"] == "llm"
    assert controller_pod(ix)["spec"]["subdomain"] == "llm"


def test_one_process_pods_get_the_same_env_contract():
    """python -m trainforge.training reads MASTER_ADDR/RANK/WORLD_SIZE: every backend sets them."""
    for backend in ("trainjob", "indexed-job"):
        _, out = build(backend, **CASES["ddp-gpu-single-proc"])
        c = controller_pod(out)["spec"]["containers"][0]
        env = env_entries(c)
        assert c["command"][:3] == ["python", "-m", "trainforge.training"]
        assert env["WORLD_SIZE"] == {"value": "2"} and env["LOCAL_RANK"] == {"value": "0"}


def test_backend_comes_from_the_platform_unless_the_job_names_one():
    raw = {"name": "llm", "team": "research", "pool": "gpu-workloads"}
    t = target(GPU_POOL, backend="indexed-job", backends=("pytorchjob", "indexed-job"))
    assert resolve_job(parse_job(raw, W), t, W).backend == "indexed-job"
    job = resolve_job(parse_job({**raw, "backend": "pytorchjob"}, W), t, W)
    assert job.backend == "pytorchjob"


def test_a_backend_the_platform_does_not_install_is_refused():
    raw = {"name": "llm", "team": "research", "pool": "gpu-workloads", "backend": "trainjob"}
    with pytest.raises(JobConfigError) as err:
        resolve_job(parse_job(raw, W), target(GPU_POOL), W)
    msg = str(err.value)
    assert msg.startswith(f"{W}.backend: got 'trainjob'; the platform installs")
    assert "pytorchjob" in msg and "trainforge:jobBackends" in msg and "\n" not in msg


def test_an_unknown_backend_is_refused_by_the_parser():
    with pytest.raises(JobConfigError, match=r"\.backend: got 'v2'; expected one of 'pytorchjob'"):
        parse_job({"name": "a", "team": "t", "pool": "p", "backend": "v2"}, W)


@pytest.mark.parametrize(
    ("backend", "extra", "key", "says"),
    [
        ("trainjob", dict(preset="elastic", elastic={"maxWorkers": 3}), "preset", "no elastic"),
        (
            "indexed-job",
            dict(preset="elastic", elastic={"maxWorkers": 3}),
            "preset",
            "fixed number",
        ),
        ("trainjob", dict(metricsPort=9191), "metricsPort", "ClusterTrainingRuntime"),
        ("trainjob", dict(runPolicy={"backoffLimit": 2}), "runPolicy.backoffLimit", "runtime"),
        ("trainjob", dict(runPolicy={"ttlSecondsAfterFinished": 60}), "runPolicy.ttl", "runtime"),
        ("trainjob", dict(runPolicy={"cleanPodPolicy": "All"}), "runPolicy.cleanPod", "runtime"),
        ("indexed-job", dict(runPolicy={"cleanPodPolicy": "None"}), "runPolicy.cleanPod", "Job"),
    ],
)
def test_what_a_backend_lacks_is_refused_at_preview(backend, extra, key, says):
    with pytest.raises(JobConfigError) as err:
        build(backend, **extra)
    msg = str(err.value)
    assert msg.startswith(f"{W}.{key}") and says in msg and "\n" not in msg


def test_what_each_backend_supports_of_the_run_policy():
    job, tj = build("trainjob", restartPolicy="Never", runPolicy={"activeDeadlineSeconds": 3600})
    assert tj.workload["spec"]["activeDeadlineSeconds"] == 3600
    assert tj.workload["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "trainforge-torch-never",
    }
    _, ij = build(
        "indexed-job",
        runPolicy={"backoffLimit": 2, "ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 9},
    )
    spec = ij.workload["spec"]
    assert (spec["backoffLimitPerIndex"], spec["ttlSecondsAfterFinished"]) == (2, 60)
    assert spec["activeDeadlineSeconds"] == 9


def test_switching_backend_keeps_checkpoints_and_pods():
    """The replacement on another backend resumes from the same checkpoint directory."""
    dirs = set()
    for backend in BACKENDS:
        job, out = build(backend, **CASES["fsdp-gpu"])
        c = controller_pod(out)["spec"]["containers"][0]
        dirs.add(c["command"][c["command"].index("--checkpoint-dir") + 1])
        assert checkpoint_dir(job, target(GPU_POOL)) in dirs
    assert dirs == {"/fsx/checkpoints/team-research/llm"}
    assert len(set(WORKLOAD_TYPES.values())) == 3


MOVED = (
    ("spec", "patchez", EACH, "runtime", "template"),
    ("spec", "jobz", EACH, "template"),
    ("spec", "podTemplate"),
)
MOVED_POD = "spec.patchez[0].runtime.template.spec.jobz[0].template.spec.podTemplate"


def test_where_a_runtime_patch_puts_things_is_one_declared_fact(monkeypatch, tmp_path):
    """The levels of a TrainJob's runtime patch (Trainer v2.2.1 RuntimePatch: JobSet, Job,
    pod) are declared once, trainjob.SHAPE.levels: moved there, the emitter writes the patch
    at the new path, the plan's walker finds its pod there, the Trainer rehearsal
    (`_pod_patches`) merges it, import names its labels there, and the Trainer webhook
    rehearsal (validate.trainjob_findings) judges the patch there. Each spelled the path."""
    moved = dataclasses.replace(trainjob.SHAPE, levels=MOVED)
    monkeypatch.setattr(trainjob, "SHAPE", moved)
    monkeypatch.setitem(backends.SHAPES, trainjob.KIND, moved)
    _, out = build("trainjob", **CASES["ddp-gpu"])
    wl = out.workload
    assert "runtimePatches" not in wl["spec"]
    patch = wl["spec"]["patchez"][0]
    assert patch["manager"] == trainjob.PATCH_MANAGER
    assert patch["runtime"]["template"]["metadata"]["labels"]["trainforge.io/job"] == "llm"
    job_patch = patch["runtime"]["template"]["spec"]["jobz"][0]
    assert job_patch["name"] == trainjob.REPLICATED_JOB
    [t] = backends.pod_templates(wl, build=False)  # the plan's walker
    assert t.path == MOVED_POD and t.template is job_patch["template"]["spec"]["podTemplate"]
    assert t.spec["tolerations"] and t.name == trainjob.REPLICATED_JOB
    [built] = backends.pod_templates(wl)  # the pod Trainer builds: the patch merged
    assert {v["name"] for v in built.spec["volumes"]} > {"dshm", "tmp"}
    assert built.spec["tolerations"] == t.spec["tolerations"]
    doc = (
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: tjp}\n"
        "spec:\n  trainer: {image: ghcr.io/acme/t:1, command: [torchrun, /code/t.py]}\n"
        "  patchez: [{runtime: {template: {metadata: {labels: {a: b}}, spec: {jobz: "
        "[{template: {spec: {podTemplate: {metadata: {labels: {c: d}}}}}}]}}}}]\n"
    )
    changes = imp(write(tmp_path, doc)).changes
    assert (
        f"{MOVED_POD}.metadata.labels.c d: dropped; not supported (a job entry has no "
        "labels)" in changes
    ), changes
    assert any(
        c.startswith("spec.patchez[0].runtime.template.metadata.labels.a b") for c in changes
    )
    # The Trainer webhook rehearsal (validate.trainjob_findings) judges the patch found there,
    # its field paths named from the levels.
    bad = copy.deepcopy(wl)
    bad["spec"]["patchez"].append(copy.deepcopy(patch))  # a second patch, same manager
    patch = bad["spec"]["patchez"][0]
    patch["manager"] = "trainforge"
    patch["runtime"]["template"]["spec"]["jobz"][0]["name"] = "other"
    patch["runtime"]["template"]["spec"]["jobz"][0]["template"]["spec"]["podTemplate"]["spec"][
        "hostNetwork"
    ] = True
    msgs = V.trainjob_findings(bad, K8S_VERSION)
    assert "spec.patchez: managers must be unique" not in msgs  # one is now "trainforge"
    assert "spec.patchez[0].manager 'trainforge' is not a domain-prefixed path" in msgs, msgs
    assert "spec.patchez[0].jobz[other]: pod field 'hostNetwork' cannot be patched" in msgs
    assert (
        "spec.patchez[0].jobz[other]: no such replicated job in runtime "
        f"{wl['spec']['runtimeRef']['name']!r}" in msgs
    )
    bad["spec"]["patchez"][0]["manager"] = trainjob.PATCH_MANAGER
    assert "spec.patchez: managers must be unique" in V.trainjob_findings(bad, K8S_VERSION)


def test_where_a_runtime_keeps_its_pod_is_one_declared_fact(monkeypatch):
    """The runtime's levels (JobSet template, Job, pod) are declared once,
    trainjob.RUNTIME_SHAPE.levels: moved there, the runtime's emitter writes its pod at the
    new path, the plan's walker finds it there, and the Trainer rehearsal, the retry bound and
    the Trainer webhook rehearsal (validate.trainjob_findings, runtime_findings) read it there
    (each spelled the path)."""
    levels = (("spec", "jobsetTemplate"), *MOVED[1:])
    moved = dataclasses.replace(trainjob.RUNTIME_SHAPE, levels=levels)
    monkeypatch.setattr(trainjob, "RUNTIME_SHAPE", moved)
    monkeypatch.setitem(backends.SHAPES, trainjob.RUNTIME_KIND, moved)
    job, out = build("trainjob", **CASES["ddp-gpu"])
    runtime = trainjob.runtime_manifest(job.restart_policy)
    [t] = backends.pod_templates(runtime)
    assert t.path == "spec.jobsetTemplate.spec.jobz[0].template.spec.podTemplate"
    assert t.name == trainjob.REPLICATED_JOB and "template" not in runtime["spec"]
    pod = trainjob.effective_pod(out.workload, runtime)
    assert pod["spec"]["terminationGracePeriodSeconds"] == t.spec["terminationGracePeriodSeconds"]
    name = runtime["metadata"]["name"]
    assert trainjob.retry_bound(out.workload, pods.RetryInputs(runtimes={name: runtime}))
    [sdk] = backends.pod_templates(trainjob.sdk_runtime_manifest())
    assert "workspace" in {v["name"] for v in sdk.spec["volumes"]}
    # The Trainer webhook rehearsal reads the runtime there: the TrainJob's patch names its
    # replicated job and container, and the runtime's rules judge its Jobs, field paths named
    # from the levels.
    assert V.trainjob_findings(out.workload, K8S_VERSION, {name: runtime}) == []
    assert not any(
        "replicatedJobs" in m or "jobz" in m for m in V.runtime_findings(runtime, K8S_VERSION)
    )
    broken = copy.deepcopy(runtime)
    rjob = broken["spec"]["jobsetTemplate"]["spec"]["jobz"][0]
    rjob["replicas"] = 2
    rjob["template"]["spec"]["podTemplate"]["spec"]["containers"][0]["name"] = "pytorch"
    at = "spec.jobsetTemplate.spec.jobz[0]"
    msgs = V.runtime_findings(broken, K8S_VERSION)
    assert f"{at}.replicas always must be 1 (ancestor trainer)" in msgs, msgs
    assert f"{at}: must contain the container 'node' for the ancestor trainer" in msgs
    rjob["template"]["spec"]["podTemplate"]["spec"]["restartPolicy"] = "OnFailure"
    assert (
        f"{at}.template.spec.podFailurePolicy needs podTemplate.spec.restartPolicy Never"
        in V.runtime_findings(broken, K8S_VERSION)
    )
    rjob["template"]["spec"]["podTemplate"]["spec"]["hostNetwork"] = "yes"  # not a bool
    assert any(m.startswith(f"{at} pod template") for m in V.runtime_findings(broken, K8S_VERSION))
    broken["spec"]["jobsetTemplate"]["spec"]["jobz"] = []
    assert "spec.jobsetTemplate.spec.jobz is empty" in V.runtime_findings(broken, K8S_VERSION)


def test_the_trainjob_pod_needs_the_runtime_and_the_patch():
    """The rehearsal is not vacuous: without the patch the pod lacks the job's volumes and
    tolerations, and a runtime with another container name leaves the job unwired."""
    job, out = build("trainjob", **CASES["ddp-gpu"])
    runtime = trainjob.runtime_manifest(job.restart_policy)  # the job's (ExitCode by default)
    bare = copy.deepcopy(out.workload)
    bare["spec"]["runtimePatches"] = []
    pod = trainjob.effective_pod(bare, runtime)
    assert "tolerations" not in pod["spec"]
    assert {v["name"] for v in pod["spec"]["volumes"]} == {"dshm", "tmp"}
    assert pod["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory"}  # unsized /dev/shm
    wrong = copy.deepcopy(runtime)
    rjob = wrong["spec"]["template"]["spec"]["replicatedJobs"][0]
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "pytorch"
    assert any("node" in m for m in V.runtime_findings(wrong, K8S_VERSION))
    assert any(
        "not in the runtime" in m
        for m in V.trainjob_findings(out.workload, K8S_VERSION, {wrong["metadata"]["name"]: wrong})
    )


def test_a_trainjob_naming_a_training_runtime_is_validated_against_it():
    """Validation finds a TrainJob's runtime as its pod's builder does (`trainjob.runtime_of`):
    a TrainingRuntime of its namespace too, so a patch of a replicated job that runtime lacks
    is refused (it was not judged at all)."""
    job, out = build("trainjob", **CASES["ddp-gpu"])
    runtime = copy.deepcopy(trainjob.runtime_manifest(job.restart_policy))
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = out.workload["metadata"]["namespace"]
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "other"
    doc = copy.deepcopy(out.workload)
    doc["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    runtimes = trainjob.runtimes_in([runtime])
    found = V.trainjob_findings(doc, K8S_VERSION, runtimes)
    assert any("no such replicated job in runtime" in m for m in found), found


def test_a_trainjob_whose_runtime_cannot_build_its_pod_is_a_finding_not_a_crash():
    """A runtime without the replicated job `node` (the one the Trainer wires) builds no pod:
    validation says so, as the pod builder leaves it to (trainjob._built_templates)."""
    job, out = build("trainjob", **CASES["ddp-gpu"])
    runtime = copy.deepcopy(trainjob.runtime_manifest(job.restart_policy))
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "other"
    doc = copy.deepcopy(out.workload)
    doc["spec"]["runtimePatches"] = []
    found = V.trainjob_findings(doc, K8S_VERSION, trainjob.runtimes_in([runtime]))
    assert len(found) == 1 and "cannot build its pod from runtime" in found[0], found


def test_a_trainjob_without_numnodes_runs_its_runtimes_node_count():
    """Trainer v2.2.1 runs a TrainJob that leaves numNodes out on its runtime's
    `mlPolicy.numNodes` (pkg/runtime/core/trainingruntime.go:176 `ptr.Deref(mlPolicy.NumNodes,
    1)`; torch.go:96 lets the TrainJob's own win). Every reader of its pod count (the world
    size, the queue check's quota need, each built template's replicas) reads that one model
    (`Shape.pod_count` -> `trainjob.pod_count`); they counted 1, from `trainer.numNodes` alone."""
    from trainforge.plan.checks.queues import object_workload
    from trainforge.plan.job_view import job_view

    job, out = build("trainjob", **CASES["ddp-gpu"])
    runtime = copy.deepcopy(trainjob.runtime_manifest(job.restart_policy))
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = out.workload["metadata"]["namespace"]
    runtime["spec"]["mlPolicy"]["numNodes"] = 4
    runtimes = trainjob.runtimes_in([runtime])
    doc = copy.deepcopy(out.workload)
    doc["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    del doc["spec"]["trainer"]["numNodes"]
    doc["spec"]["trainer"]["command"] = ["torchrun", "train.py"]  # nnodes: Trainer's PET_NNODES
    shape = backends.shape(doc)
    assert shape is not None and shape.pod_count(doc, runtimes) == 4
    assert [t.replicas for t in backends.pod_templates(doc, runtimes=runtimes)] == [4]
    view = job_view(doc, runtimes)
    assert view is not None and view.pods == 4
    assert view.world_size == 4 * view.gpus_per_pod
    wl = object_workload(doc, job, [], runtimes)
    assert wl.pods == 4 and wl.need["nvidia.com/gpu"] == 4 * view.gpus_per_pod, wl.need
    # the TrainJob's own numNodes wins over its runtime's
    doc["spec"]["trainer"]["numNodes"] = 2
    assert shape.pod_count(doc, runtimes) == 2 and object_workload(doc, job, [], runtimes).pods == 2


def test_indexed_job_failure_handling():
    _, out = build("indexed-job", **CASES["cpu-ddp"], restartPolicy="OnFailure")
    spec = out.workload["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    assert spec["backoffLimitPerIndex"] == 6 and spec["maxFailedIndexes"] == 0
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]
    _, ex = build("indexed-job", **CASES["image-code"])  # restartPolicy: ExitCode
    rules = ex.workload["spec"]["podFailurePolicy"]["rules"]
    assert rules[1]["action"] == "FailJob"
    assert rules[1]["onExitCodes"]["values"] == list(range(1, 128))
    assert rules[1]["onExitCodes"]["containerName"] == indexed_job.CONTAINER
    _, never = build("indexed-job", restartPolicy="Never")
    assert never.workload["spec"]["backoffLimitPerIndex"] == 0
    # ExitCode is the jobs' default (docs/reliability.md): a bug fails the Job at once
    _, default = build("indexed-job", **CASES["cpu-ddp"])
    assert default.workload["spec"]["podFailurePolicy"]["rules"][1]["action"] == "FailJob"


def test_job_validation_rules_catch_broken_jobs():
    """The API server rules the plan applies to Jobs are not vacuous."""
    _, out = build("indexed-job", **CASES["image-code"])
    bad = copy.deepcopy(out.workload["spec"])
    bad["template"]["spec"]["restartPolicy"] = "OnFailure"
    bad["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] = [0, 3, 2]
    bad.pop("completions")
    msgs = V.job_spec_findings(bad)
    assert any("needs template.spec.restartPolicy Never" in m for m in msgs)
    assert any("sorted and unique" in m for m in msgs) and any(
        "0 is not allowed" in m for m in msgs
    )
    assert any("completions is required" in m for m in msgs)


def test_trainjob_webhook_rules_catch_broken_trainjobs():
    _, out = build("trainjob", **CASES["ddp-gpu"])
    bad = copy.deepcopy(out.workload)
    bad["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "9"})
    patch = bad["spec"]["runtimePatches"][0]
    patch["manager"] = "trainforge"
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    pod["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    pod["spec"]["template"]["spec"]["hostNetwork"] = True
    msgs = V.trainjob_findings(bad, K8S_VERSION)
    assert any("reserved envs ['PET_NNODES']" in m for m in msgs)
    assert any("domain-prefixed path" in m for m in msgs)
    assert any("takes env from spec.trainer.env" in m for m in msgs)
    assert any("'hostNetwork' cannot be patched" in m for m in msgs)


def test_the_plan_validates_trainjobs_runtimes_and_jobs_by_rule():
    """`trainforge plan` (validate_object) runs the Trainer and Job rules, with their ids."""
    _, tj = build("trainjob", **CASES["ddp-gpu"])
    assert V.validate_object(tj.workload, K8S_VERSION) == ("pass", [])
    bad = copy.deepcopy(tj.workload)
    bad["spec"]["trainer"]["env"].append({"name": "PET_MASTER_PORT", "value": "1"})
    status, findings = V.validate_object(bad, K8S_VERSION)
    assert status == "fail" and {f.rule for f in findings} == {V.TRAINJOB_RULE}
    runtime = copy.deepcopy(trainjob.runtime_manifest())
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    status, findings = V.validate_object(runtime, K8S_VERSION)
    assert status == "fail" and any("always must be 1" in f.message for f in findings)
    _, ij = build("indexed-job", **CASES["cpu-ddp"])
    broken = copy.deepcopy(ij.workload)
    broken["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    status, findings = V.validate_object(broken, K8S_VERSION)
    assert status == "fail" and {f.rule for f in findings} == {V.JOB_RULE}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("runtimeRef", "kind", "Runtime"), "ClusterTrainingRuntime or TrainingRuntime"),
        (("runtimeRef", "apiGroup", "example.com"), "'example.com': unsupported runtime"),
        # the CRD's CEL rule (trainforge.plan.crd_cel), upstream's message
        (
            ("managedBy", None, "someone.example/ctl"),
            'spec.managedBy: Invalid value: "someone.example/ctl": ManagedBy must be '
            "trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
        ),
        (("trainer", "env", [{"name": "A", "value": "1"}] * 2), "sets ['A'] more than once"),
    ],
)
def test_each_trainjob_webhook_rule_fails_its_broken_trainjob(change, expected):
    """The Trainer webhook's TrainJob rules (validate.trainjob_findings) one at a time, on the
    trainjob backend's own TrainJob, which passes them all."""
    _, out = build("trainjob", **CASES["ddp-gpu"])
    assert V.trainjob_findings(out.workload, K8S_VERSION) == []
    bad = copy.deepcopy(out.workload)
    key, sub, value = change
    if sub is None:
        bad["spec"][key] = value
    else:
        bad["spec"][key][sub] = value
    msgs = V.trainjob_findings(bad, K8S_VERSION)
    assert any(expected in m for m in msgs), msgs


def _rename_first(rjobs):
    rjobs[0]["name"] = "Node_1"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # the CRD's CEL rule (trainforge.plan.crd_cel), upstream's message
        (
            lambda s: s["mlPolicy"].update(mpi={}),
            "spec.mlPolicy: Invalid value: Only one of the policy can be configured",
        ),
        (lambda s: s["template"]["spec"].update(replicatedJobs=[]), "replicatedJobs is empty"),
        (
            lambda s: s["template"]["spec"]["replicatedJobs"].append(
                copy.deepcopy(s["template"]["spec"]["replicatedJobs"][0])
            ),
            "replicatedJobs: names must be unique",
        ),
        (
            lambda s: _rename_first(s["template"]["spec"]["replicatedJobs"]),
            "name 'Node_1' is not a DNS-1123 label",
        ),
    ],
)
def test_each_runtime_webhook_rule_fails_its_broken_runtime(change, expected):
    """The Trainer webhook's runtime rules (validate.runtime_findings) one at a time, on the
    platform's own runtime, which passes them all."""
    runtime = copy.deepcopy(trainjob.runtime_manifests()[0])
    assert V.runtime_findings(runtime, K8S_VERSION) == []
    change(runtime["spec"])
    msgs = V.runtime_findings(runtime, K8S_VERSION)
    assert any(expected in m for m in msgs), msgs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_emitted_objects_gang_is_the_one_its_spec_packs(backend, case):
    """One model of a gang's pods: what Karpenter packs of the object a backend emits (each
    pod template's replicas x its pod's requests, EFA devices too: capacity.gang, the queue's
    launch check and the cost table read it) is what the job's spec packs before its object
    exists (capacity.job_gang: the scheduling rehearsal, the duration estimate)."""
    from trainforge.jobs import capacity
    from trainforge.jobs.backends import pod_templates

    job, out = build(backend, **CASES[case])
    pool = CASES[case]["pool"]
    got = capacity.gang(pod_templates(out.workload))
    assert got == capacity.job_gang(job, pool)
    assert len(got.pods) == job.workers and (got.pods[0].efa > 0) == bool(job.efa)
