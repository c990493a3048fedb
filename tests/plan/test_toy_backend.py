"""A backend of a made-up kind, declared in this one module, is seen by the plan's checks.

Why: backends own their object shape (trainforge.jobs.backends.SHAPES). A new backend
declares where its kind keeps its pod templates, how many pods each runs and its restart
bound, and every check that reads pods (the policy rules, the pod script rehearsal, the
reference check, the queue check) finds them through the one walker, without a change of
their own. `ToyGang` keeps its pods where no other kind does (`spec.gangs[].pod`) and counts
them in a field of its own (`size`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainforge.core import pods
from trainforge.jobs import backends
from trainforge.plan import check_types as T
from trainforge.plan.checks import existence as E
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.checks import queues as Q
from trainforge.plan.checks import rules as R
from trainforge.plan.manifests import K8sObject
from trainforge.plan.runner import Inventory

# --- the toy backend: its kind and its shape -------------------------------------------------

API_VERSION = "toy.example.com/v1"
KIND = "ToyGang"
TYPE = f"kubernetes:{API_VERSION}:{KIND}"
SHAPE = pods.Shape(
    templates=(("spec", "gangs", pods.EACH, "pod"),),
    replicas=(("size",),),
    restarts=("spec", "maxRestarts"),
)


@pytest.fixture
def toy_backend() -> Iterator[None]:
    backends.register_shape(KIND, SHAPE)
    yield
    del backends.SHAPES[KIND]


def toy_gang(pod_spec: dict[str, Any], size: int = 4, annotations: dict | None = None) -> dict:
    """A ToyGang object: one gang `trainer` of `size` pods like `pod_spec`."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "toy", "namespace": "t", "labels": {"trainforge.io/job": "toy"}},
        "spec": {
            "maxRestarts": 2,
            "gangs": [
                {
                    "name": "trainer",
                    "size": size,
                    "pod": {"metadata": {"annotations": annotations or {}}, "spec": pod_spec},
                }
            ],
        },
    }


def _container(**kw: Any) -> dict[str, Any]:
    return {"name": "train", "image": "example.com/train@sha256:" + "a" * 64, **kw}


def _obj(doc: dict[str, Any]) -> K8sObject:
    return K8sObject(urn=f"urn:{KIND}:toy", name="toy", type=TYPE, doc=doc)


def _ctx(*objects: K8sObject) -> T.PlanContext:
    return T.PlanContext(
        inventory=Inventory(project="p", stack="s", resources=[]), objects=[*objects]
    )


# --- the walker reads it by its shape --------------------------------------------------------


def test_the_walker_reads_a_registered_kind_by_its_shape(toy_backend: None) -> None:
    doc = toy_gang({"containers": [_container()]}, size=4)
    (t,) = backends.pod_templates(doc)
    assert (t.path, t.spec_path, t.name, t.label, t.replicas) == (
        "spec.gangs[0].pod",
        "spec.gangs[0].pod.spec",
        "trainer",
        "trainer pod",
        4,
    )
    assert t.spec["containers"][0]["name"] == "train"
    assert backends.SHAPES[KIND].restart_limit(doc) == 2


def test_a_known_backend_kind_is_read_by_its_declared_shape() -> None:
    """The emitters' kinds: a PyTorchJob's replicas, a JobSet's jobs times parallelism."""
    tmpl = {"spec": {"containers": [_container()]}}
    ptj = {
        "kind": "PyTorchJob",
        "spec": {
            "runPolicy": {"backoffLimit": 3},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": tmpl},
                "Worker": {"replicas": 3, "template": tmpl},
            },
        },
    }
    got = [(t.label, t.replicas) for t in backends.pod_templates(ptj)]
    assert got == [("Master pod", 1), ("Worker pod", 3)]
    assert backends.SHAPES["PyTorchJob"].restart_limit(ptj) == 3
    jobset = {
        "kind": "JobSet",
        "spec": {
            "replicatedJobs": [
                {"name": "node", "replicas": 2, "template": {"spec": {"parallelism": 4, "template": tmpl}}}
            ]
        },
    }  # fmt: skip
    (t,) = backends.pod_templates(jobset)
    assert (t.path, t.label, t.replicas) == (
        "spec.replicatedJobs[0].template.spec.template",
        "node pod",
        8,
    )


# --- the plan's checks see its pods ------------------------------------------------------------


def test_the_policy_rules_fire_on_its_container(toy_backend: None) -> None:
    doc = toy_gang({"containers": [_container(securityContext={"privileged": True})]})
    got = {(rule.id, m) for rule, m in R.check_resource(TYPE, doc)}
    assert ("CKV_K8S_16", "trainer pod: container 'train' is privileged") in got


def test_the_pod_script_rehearsal_finds_its_script(toy_backend: None) -> None:
    doc = toy_gang({"containers": [_container(command=["sh", "-c", "echo hi > /out/x"])]})
    scripts, _, _ = P._collect(_ctx(_obj(doc)))
    assert [(s.ident, s.container, s.script) for s in scripts] == [
        ("t/ToyGang/toy", "train", "echo hi > /out/x")
    ]


def test_the_reference_check_sees_what_its_pods_need(toy_backend: None) -> None:
    doc = toy_gang({"containers": [_container(envFrom=[{"secretRef": {"name": "toy-creds"}}])]})
    refs = [r for _, r in E.references(_ctx(_obj(doc))) if r.kind == "Secret"]
    assert [(r.kind, r.namespace, r.name, r.where) for r in refs] == [
        (
            "Secret",
            "t",
            "toy-creds",
            "ToyGang t/toy (spec.gangs[0].pod.spec): container train envFrom",
        )
    ]


def test_the_queue_check_reads_its_pod_template(toy_backend: None) -> None:
    """Kueue's podset of the job (its nodeSelector, tolerations, topology request) and the
    fields Kueue owns in its pods come from the gang's pod."""
    pod_spec = {
        "containers": [_container()],
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "schedulingGates": [{"name": "toy"}],
    }
    annotations = {
        "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"
    }
    doc = toy_gang(pod_spec, size=4, annotations=annotations)
    count = sum(t.replicas for t in backends.pod_templates(doc))
    ps = Q.podset(doc, {}, count)
    assert (ps.count, ps.topology) == (4, True)
    assert ps.node_selector == {"pool": "gpu"}
    assert ps.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert Q._owned_fields(_obj(doc), None) == [
        "a pod template's schedulingGates (Kueue adds and removes its own)"
    ]
