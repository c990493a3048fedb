"""The one pod-template walker (trainforge/core/pods.py, with the backends' shapes).

Why: four walkers used to find pod specs four ways, and disagreed on CronJobs, Pods, a
TrainJob's runtime patch and kinds they did not know. These pin down what the one walker
returns for each: where (the path a finding names), the replica's name and its pod count.
"""

from __future__ import annotations

from trainforge.core import pods
from trainforge.jobs import backends
from trainforge.jobs.pod import JOB_LABEL
from trainforge.plan.checks import rules
from trainforge.plan.checks.pod_scripts import shell_script
from trainforge.plan.job_view import job_view

POD = {"spec": {"containers": [{"name": "c", "image": "i"}]}}


def _where(doc: dict, **kw: bool) -> list[tuple[str, str, int]]:
    return [(t.spec_path, t.label, t.replicas) for t in backends.pod_templates(doc, **kw)]


def test_kubernetes_workloads_by_their_shapes() -> None:
    assert _where({"kind": "Pod", **POD}) == [("spec", "pod", 1)]
    assert _where({"kind": "Deployment", "spec": {"replicas": 3, "template": POD}}) == [
        ("spec.template.spec", "pod", 3)
    ]
    cron = {
        "kind": "CronJob",
        "spec": {"jobTemplate": {"spec": {"parallelism": 2, "template": POD}}},
    }
    assert _where(cron) == [("spec.jobTemplate.spec.template.spec", "pod", 2)]
    job = {"kind": "Job", "spec": {"backoffLimit": 0, "template": POD}}
    assert backends.SHAPES["Job"].restart_limit(job) == 0
    assert _where({"kind": "Job", "spec": {}}) == []
    # a CRD's schema may hold a mapping whose spec has containers: it runs no pod
    crd = {"kind": "CustomResourceDefinition", "spec": {"versions": [{"schema": {"x": POD}}]}}
    assert _where(crd) == [] and _where({**crd, "kind": "Unknown"}) != []


def test_an_undeclared_kind_is_walked_generically_under_its_spec() -> None:
    doc = {
        "kind": "Unknown",
        "metadata": {"annotations": {"x": POD}},  # not under spec: not a pod
        "spec": {"a": [{"template": POD}, {"b": {"template": POD}}], "c": {"containers": "no"}},
    }
    assert _where(doc) == [
        ("spec.a[0].template.spec", "pod", 1),
        ("spec.a[1].b.template.spec", "pod", 1),
    ]
    assert _where({"kind": "Unknown", "spec": POD["spec"]}) == [("spec", "pod", 1)]


def test_a_trainjob_writes_a_runtime_patch_and_runs_the_pod_trainer_builds() -> None:
    """build=False: what the object writes (its runtime patch); build=True: the pod Trainer
    builds, and nothing for a runtime the plan does not know."""
    patch = {"name": "node", "template": {"spec": {"template": POD}}}
    doc = {
        "kind": "TrainJob",
        "metadata": {"name": "j"},
        "spec": {
            "runtimeRef": {"name": "not-the-platforms"},
            "trainer": {"numNodes": 4},
            "runtimePatches": [
                {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [patch]}}}}
            ],
        },
    }
    path = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
    assert _where(doc, build=False) == [(path, "node pod", 1)]
    assert _where(doc) == []


def test_shapes_without_the_backends_table_are_kubernetes_own() -> None:
    ptj = {
        "kind": "PyTorchJob",
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": POD}}},
    }
    # core alone does not know a PyTorchJob: found generically, one pod, no replica name
    assert [(t.label, t.replicas) for t in pods.pod_templates(ptj)] == [("pod", 1)]
    assert [(t.label, t.replicas) for t in backends.pod_templates(ptj)] == [("Worker pod", 2)]


def test_a_containers_security_field_wins_over_its_pods() -> None:
    """The one rule the policy check (CKV_K8S_23) and the pod sandbox's identity both read."""
    pod = {"runAsUser": 1000, "runAsNonRoot": True}
    assert pods.security_field(pod, {"runAsUser": 0}, "runAsUser") == 0
    assert pods.security_field(pod, {}, "runAsNonRoot") is True
    assert pods.security_field(None, None, "runAsUser") is None


def test_literal_env_is_the_one_reader_of_a_containers_env() -> None:
    """The pod script rehearsal and the job view of a diff read a container's env through
    `pods.literal_env`: literal values only (a valueFrom is looked up by Kubernetes, not here),
    a nameless or malformed entry skipped, a number as its string."""
    container = {
        "env": [
            {"name": "A", "value": "1"},
            {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"value": "no name"},
            "not an entry",
            {"name": "N", "value": 8},
        ]
    }
    assert pods.literal_env(container) == {"A": "1", "N": "8"}
    assert pods.literal_env({}) == {} and pods.literal_env({"env": None}) == {}


def test_argv_is_the_one_reader_of_what_a_container_runs() -> None:
    """The pod script rehearsal (`shell_script`, the write flags) and the job view of a diff
    read a container's command line through `pods.argv`: command, then args, as strings."""
    container = {"command": ["torchrun", "--nnodes", 2], "args": ["-m", "train"]}
    assert pods.argv(container) == ["torchrun", "--nnodes", "2", "-m", "train"]
    assert pods.argv({"args": ["x"]}) == ["x"] and pods.argv({"command": None}) == []
    assert pods.argv(None) == []
    pod = {"containers": [{"name": "pytorch", "image": "i", **container}]}
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "a", "labels": {JOB_LABEL: "j"}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": pod}}}},
    }
    view = job_view(doc)
    assert view is not None and view.command == pods.argv(container)
    assert shell_script({"command": ["/bin/sh"], "args": ["-ec", "echo hi"]}) == "echo hi"


def test_containers_is_the_one_walk_over_a_pods_containers() -> None:
    """Init containers first, then containers (the order Kubernetes starts them); entries that
    are not objects, and a field that is not a list (a value unknown at preview), are skipped."""
    pod = {"initContainers": [{"name": "setup"}, "bad"], "containers": [{"name": "main"}]}
    assert [c["name"] for c in pods.containers(pod)] == ["setup", "main"]
    assert pods.containers({"containers": "<unknown>"}) == [] and pods.containers(None) == []
    # the resource rules judge each of them: a privileged init container is a finding
    bad = {"initContainers": [{"name": "setup", "securityContext": {"privileged": True}}]}
    assert "setup" in str(rules.check_resource("kubernetes:core/v1:Pod", {"spec": bad}, None))
