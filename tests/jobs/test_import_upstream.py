"""`trainforge import` refuses what the API server, the Trainer or the training operator would
refuse or fail at once, in one line naming the field, the value and what is valid, and names
what it drops from a TrainJob's runtime patches (wave 17, importmore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.importing import (
    container,
    imp,
    indexed_job_yaml,
    pytorchjob_yaml,
    replica,
    trainer_spec,
    trainjob_yaml,
    write,
)
from trainforge.jobs.importer import ImportProblem

TRAINJOB = trainjob_yaml(activeDeadlineSeconds="DEADLINE")
PYTORCHJOB = pytorchjob_yaml(
    run_policy={"activeDeadlineSeconds": "DEADLINE"}, Worker=replica(container(), 2)
)
INDEXED_JOB = indexed_job_yaml(container("train"), activeDeadlineSeconds="DEADLINE")


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        (TRAINJOB, "spec.activeDeadlineSeconds",
         "the pinned Trainer's TrainJob CRD has minimum: 1, so the API server refuses it"),
        (PYTORCHJOB, "spec.runPolicy.activeDeadlineSeconds",
         "at 0 the training operator fails the job as soon as it starts"),
        (INDEXED_JOB, "spec.activeDeadlineSeconds",
         "Kubernetes refuses a negative one, and at 0 its Job controller fails the Job as "
         "soon as it starts"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("value", ["0", "-5", "'60'"])
def test_a_deadline_under_one_second_is_refused(tmp_path, text, where, why, value):
    """Trainer v2.2.1's TrainJob CRD has `minimum: 1` (shared/tools/validate-manifests fails
    `activeDeadlineSeconds: 0` on its v2.3 CRD: "0 is less than the minimum of 1"); the
    training operator's CRD takes 0 and its controller fails the job on its first sync
    (PastActiveDeadline: active time >= 0). Import let 0 through, into an entry the stack then
    refused. Kubernetes validates a Job's as non-negative and its Job controller fails the Job
    once its active time is >= it (see import_read._DEADLINE_WHY): an indexed Job's 0 was
    printed as the entry's, which the stack then refused."""
    path = write(tmp_path, text.replace("DEADLINE", value))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    why = f" ({why})" if value != "'60'" else ""  # the reason is a number's only
    assert str(e.value) == (
        f"{path}: {where}: got {value}; expected a whole number of seconds, 1 or more{why}"
    )


@pytest.mark.parametrize("text", [TRAINJOB, PYTORCHJOB, INDEXED_JOB])
def test_a_deadline_of_one_second_or_more_is_kept(tmp_path, text):
    r = imp(write(tmp_path, text.replace("DEADLINE", "1")))
    assert r.entry["runPolicy"]["activeDeadlineSeconds"] == 1


MASTER_WORKER = pytorchjob_yaml(
    Master=replica(container(resources="MASTER")),
    Worker=replica(container(resources="WORKER"), 1),
)
M = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources"
W = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources"
GPU1 = "{limits: {nvidia.com/gpu: 1}}"
UNEQUAL = (
    'got {req}, limits[{res}] {lim}; the API server refuses such a pod ("must be equal to '
    '{res} limit of {lim}": {res} cannot be overcommitted): make the request equal to the '
    "limit, or write the limit alone"
)
NO_LIMIT = (
    'got {req} and no limits[{res}]; the API server refuses such a pod ("Limit must be set '
    'for non overcommitable resources"): write limits[{res}]: {req} (the request then '
    "defaults to it)"
)


@pytest.mark.parametrize(
    ("master", "worker", "where", "says"),
    [
        ("{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}", GPU1,
         f"{M}.requests[nvidia.com/gpu]", UNEQUAL.format(req=1, res="nvidia.com/gpu", lim=2)),
        ("{requests: {nvidia.com/gpu: 1}}", GPU1,
         f"{M}.requests[nvidia.com/gpu]", NO_LIMIT.format(req=1, res="nvidia.com/gpu")),
        ("{requests: {vpc.amazonaws.com/efa: 1}, limits: {nvidia.com/gpu: 1, vpc.amazonaws.com/efa: 4}}",
         "{limits: {nvidia.com/gpu: 1, vpc.amazonaws.com/efa: 4}}",
         f"{M}.requests[vpc.amazonaws.com/efa]",
         UNEQUAL.format(req=1, res="vpc.amazonaws.com/efa", lim=4)),
        ("{requests: {vpc.amazonaws.com/efa: 2}, limits: {nvidia.com/gpu: 1}}",
         "{limits: {nvidia.com/gpu: 1}}",
         f"{M}.requests[vpc.amazonaws.com/efa]", NO_LIMIT.format(req=2, res="vpc.amazonaws.com/efa")),
        ("{requests: {hugepages-2Mi: 1Gi, memory: 2Gi}, limits: {hugepages-2Mi: 2Gi, memory: 2Gi}}",
         "{}", f"{M}.requests.hugepages-2Mi", UNEQUAL.format(req="1Gi", res="hugepages-2Mi", lim="2Gi").replace(
            "limits[hugepages-2Mi]", "limits.hugepages-2Mi"
        )),
        # the Worker's own pod, named as its own (not as a difference from Master's)
        (GPU1, "{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}",
         f"{W}.requests[nvidia.com/gpu]", UNEQUAL.format(req=1, res="nvidia.com/gpu", lim=2)),
    ],
)  # fmt: skip
def test_an_extended_request_the_api_server_refuses_is_refused(
    tmp_path, master, worker, where, says
):
    """kubernetes pkg/apis/core/validation/validation.go `validateResourceRequirements` (at
    8a84988b, 1.35's changelog commit): a request of a resource outside kubernetes.io (or of
    hugepages) must equal its limit and must have one. Import read the GPUs from the limit
    (2 here: a pod the API server never creates) or from a request with no limit."""
    path = write(tmp_path, MASTER_WORKER.replace("MASTER", master).replace("WORKER", worker))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == f"{path}: {where}: {says}"


def test_a_trainjobs_resources_per_node_are_held_to_the_same_rule(tmp_path):
    """The Trainer writes resourcesPerNode as the node container's resources, its limits
    only where it has some (v2.2.1 pkg/runtime/framework/plugins/jobset/builder.go), so the
    pod of a TrainJob asking `requests: {nvidia.com/gpu: 1}` alone (the Trainer v2 proposal's
    "Example of TrainJob") is refused by the API server too; the Kubeflow SDK writes both,
    equal (kubeflow/trainer/backends/kubernetes/utils.py `get_resources_per_node`)."""
    gpus = {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}
    path = write(tmp_path, trainjob_yaml(trainer=trainer_spec(resourcesPerNode=gpus)))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    where = "spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]"
    assert str(e.value) == f"{path}: {where}: " + UNEQUAL.format(req=1, res="nvidia.com/gpu", lim=2)


@pytest.mark.parametrize(
    "resources",
    [
        GPU1,  # a limit alone: the API server's defaulting copies it to the request
        "{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: '1'}}",
        "{requests: {nvidia.com/gpu: 1000m}, limits: {nvidia.com/gpu: 1}}",  # Cmp: equal
        # cpu and memory may be overcommitted: a limit above the request is the importer's
        # to name (it keeps the request), not a refusal
        "{requests: {nvidia.com/gpu: 1, cpu: '1'}, limits: {nvidia.com/gpu: 1, cpu: '2'}}",
    ],
)
def test_equal_or_overcommittable_requests_are_taken(tmp_path, resources):
    path = write(tmp_path, MASTER_WORKER.replace("MASTER", resources).replace("WORKER", "{}"))
    r = imp(path)
    assert r.entry["gpusPerWorker"] == 1


PATCHED = trainjob_yaml("tjp", runtimePatches="PATCHES")
PATCHES = """
    - manager: acme.io/tuner
      trainingRuntimeSpec:
        template:
          metadata:
            labels: {js-label: x}
            annotations: {js-note: y}
          spec:
            replicatedJobs:
              - name: node
                template:
                  metadata: {labels: {job-label: z}}
                  spec:
                    template:
                      metadata:
                        labels: {kueue.x-k8s.io/queue-name: q1}
                        annotations: {sidecar.istio.io/inject: "false"}
                      spec: {nodeSelector: {a: b}}
"""
RJ = "spec.runtimePatches[0].trainingRuntimeSpec.template"


def test_the_labels_a_trainjobs_runtime_patches_set_are_each_named(tmp_path):
    """Trainer v2.2.1's RuntimePatch labels and annotates the JobSet
    (`trainingRuntimeSpec.template.metadata`), each Job (`...replicatedJobs[].template.metadata`)
    and its pods (`...template.spec.template.metadata`): import dropped them inside one
    "spec.runtimePatches: dropped" line, unnamed, while it names the job's own one by one."""
    r = imp(write(tmp_path, PATCHED.replace(" PATCHES", PATCHES)), queue="research-queue")
    named = [c for c in r.changes if c.startswith(f"{RJ}.")]
    assert named == [
        f"{RJ}.metadata.labels.js-label x: dropped; not supported (a job entry has no labels)",
        f"{RJ}.metadata.annotations.js-note y: dropped; not supported (a job entry has no "
        "annotations)",
        f"{RJ}.spec.replicatedJobs[0].template.metadata.labels.job-label z: dropped; not "
        "supported (a job entry has no labels)",
        f"{RJ}.spec.replicatedJobs[0].template.spec.template.metadata.labels."
        "kueue.x-k8s.io/queue-name q1: dropped; the job uses its team's LocalQueue "
        "`research-queue`",
        f"{RJ}.spec.replicatedJobs[0].template.spec.template.metadata.annotations."
        "sidecar.istio.io/inject false: dropped; not supported (a job entry has no annotations)",
        f"{RJ}.spec.replicatedJobs[0].template.spec.template.spec.nodeSelector: dropped; it "
        "names no pool or instance type, so it chose nothing; the pool's own selector is set",
    ]
    assert any(c.startswith("spec.runtimePatches: dropped;") for c in r.changes)


@pytest.mark.parametrize(
    ("patches", "where", "expected"),
    [
        ("{a: b}", "spec.runtimePatches", "a list"),
        ("[x]", "spec.runtimePatches[0]", "a mapping"),
        ("[{trainingRuntimeSpec: {template: {spec: {replicatedJobs: x}}}}]",
         f"{RJ}.spec.replicatedJobs", "a list"),
        ("[{trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{template: 3}]}}}}]",
         f"{RJ}.spec.replicatedJobs[0].template", "a mapping"),
        ("[{trainingRuntimeSpec: {template: {metadata: {labels: [a]}}}}]",
         f"{RJ}.metadata.labels", "a mapping"),
    ],
)  # fmt: skip
def test_a_malformed_runtime_patch_is_one_line(tmp_path, patches, where, expected):
    path = write(tmp_path, PATCHED.replace("PATCHES", patches))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value).startswith(f"{path}: {where}: got "), str(e.value)
    assert str(e.value).endswith(f"; expected {expected}"), str(e.value)


def test_a_worker_whose_pod_the_api_server_stores_as_masters_is_the_same_pod(tmp_path):
    """A limit alone is also the request (the API server's defaulting, core/pods.py
    `stored_pod_spec`): Master's `requests` and `limits` of 1 GPU and a Worker's limit of 1
    alone are one pod. Import refused it ("requests: got unset; Master's is ...")."""
    both = "{requests: {nvidia.com/gpu: 1, cpu: '2'}, limits: {nvidia.com/gpu: 1, cpu: '2'}}"
    path = write(tmp_path, MASTER_WORKER.replace("MASTER", both).replace(
        "WORKER", "{limits: {nvidia.com/gpu: 1, cpu: '2'}}"))  # fmt: skip
    assert imp(path).entry["gpusPerWorker"] == 1
    # a size that differs is still refused, naming the Worker's field
    path = write(tmp_path, MASTER_WORKER.replace("MASTER", both).replace(
        "WORKER", "{limits: {nvidia.com/gpu: 1, cpu: '4'}}"), "other.yaml")  # fmt: skip
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value).startswith(f"{path}: {W}.limits.cpu: got '4'; Master's is '2'; ")


NODE_POD = f"{RJ}.spec.replicatedJobs[0].template.spec.template.spec"


def test_a_trainjobs_patched_node_selector_and_tolerations_are_each_said(tmp_path):
    """The review's TrainJob places its node pods with its runtime patch (the pinned CRD's pod
    patch: nodeSelector, tolerations, ...; the Trainer applies it to the pods it builds): the
    import dropped both inside the one "spec.runtimePatches: dropped" line and chose the pool
    without reading the selector. Read as a pod's own: the selector chooses the pool (here
    the 4-GPU pool over the smaller one a 1-GPU pod would get), or is refused naming the
    patch's field; the tolerations give way to the pool's, each on its own line."""
    review = Path(__file__).resolve().parents[1] / "fixtures" / "import" / "review"
    r = imp(review / "trainjob-patch-mount.yaml")
    assert r.entry["pool"] == "gpu-workloads"  # without the selector: gpu-small
    assert [c for c in r.changes if c.startswith(f"{NODE_POD}.") and "volumeMounts" not in c] == [
        f"{NODE_POD}.nodeSelector: dropped; karpenter.sh/nodepool: gpu-workloads chose pool "
        "gpu-workloads; the pool's own selector is set",
        f"{NODE_POD}.tolerations: dropped; the platform tolerates the pool's own taints",
    ]
    text = (review / "trainjob-patch-mount.yaml").read_text()
    bad = write(tmp_path, text.replace("nodepool: gpu-workloads", "nodepool: p5-nowhere"))
    with pytest.raises(ImportProblem) as e:
        imp(bad)
    assert str(e.value).startswith(
        f"{bad}: {NODE_POD}.nodeSelector[karpenter.sh/nodepool]: got 'p5-nowhere'; no pool of "
        "the stack matches it"
    ), str(e.value)
