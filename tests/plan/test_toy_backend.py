"""A backend of a made-up kind, declared in this one module, is seen by the plan's checks.

Why: backends own their object shape (trainforge.jobs.backends.SHAPES). A new backend
declares where its kind keeps its pod templates, how many pods each runs and its restart
bound, and every check that reads pods (the policy rules, the pod script rehearsal, the
reference check, the queue check) finds them through the one walker, without a change of
their own; the plan's view of a job (job_view: pods, container, queue), its retry bound and
the queue's count of its pods read the same shape. `ToyGang` keeps its pods where no other
kind does (`spec.gangs[].pod`), counts them in a field of its own (`size`) and bounds its
restarts with one of its own (`spec.maxRestarts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainforge.core import pods
from trainforge.jobs import backends
from trainforge.plan import check_types as T
from trainforge.plan import kueue as K
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
    job=True,  # a job's workload: the plan's job view, retry bound and queue read it
)


@pytest.fixture
def toy_backend() -> Iterator[None]:
    backends.register_shape(KIND, SHAPE)
    yield
    del backends.SHAPES[KIND]


def toy_gang(
    pod_spec: dict[str, Any],
    size: int = 4,
    annotations: dict | None = None,
    metadata: dict | None = None,
    max_restarts: int | None = 2,
) -> dict:
    """A ToyGang object: one gang `trainer` of `size` pods like `pod_spec`."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata
        or {"name": "toy", "namespace": "t", "labels": {"trainforge.io/job": "toy"}},
        "spec": {
            **({"maxRestarts": max_restarts} if max_restarts is not None else {}),
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
    ps = K.podset(backends.pod_templates(doc, build=False)[0].template, {}, count)
    assert (ps.count, ps.topology) == (4, True)
    assert ps.node_selector == {"pool": "gpu"}
    assert ps.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert Q._owned_fields(_obj(doc), None) == [
        "a pod template's schedulingGates (Kueue adds and removes its own)"
    ]


def test_a_pytorchjob_replica_without_replicas_counts_one() -> None:
    """Training operator v1.9 defaults a replica's missing `replicas` to 1
    (pkg/apis/kubeflow.org/v1 SetDefaults_PyTorchJob -> setDefaultReplicas(spec, 1), tag
    v1.9.0): the job view counted such a replica as 0 pods (world size 0)."""
    from trainforge.plan.job_view import job_view

    tmpl = {"spec": {"containers": [_container(name="pytorch")]}}
    ptj = {
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "t", "labels": {"trainforge.io/job": "j"}},
        "spec": {
            "nprocPerNode": "2",
            "pytorchReplicaSpecs": {
                "Master": {"template": tmpl},
                "Worker": {"replicas": 3, "template": tmpl},
            },
        },
    }
    v = job_view(ptj)
    assert v is not None and (v.pods, v.world_size, v.procs_per_pod) == (4, 8, 2)
    assert backends.SHAPES["PyTorchJob"].pod_count(ptj) == 4


# --- the plan's job view, retry bound and queue read its replicas and restarts ---------------


def test_the_job_view_reads_its_pods_container_and_queue(toy_backend: None) -> None:
    from trainforge.plan.job_view import job_view

    c = _container(
        command=["torchrun", "--nproc-per-node=2", "train.py"],
        resources={"requests": {"nvidia.com/gpu": "2"}},
        env=[{"name": "TRAINFORGE_CHECKPOINT_DIR", "value": "/ckpt"}],
    )
    meta = {
        "name": "toy",
        "namespace": "t",
        "labels": {"trainforge.io/job": "toy", "kueue.x-k8s.io/queue-name": "team"},
    }
    v = job_view(toy_gang({"containers": [c]}, size=3, metadata=meta))
    assert v is not None
    assert (v.ident, v.pods, v.world_size, v.gpus_per_pod) == ("t/ToyGang/toy", 3, 6, 2)
    assert (v.queue, v.checkpoint_dir, v.image) == ("team", "/ckpt", c["image"])


def _declared_toy(doc: dict[str, Any], job: Any = None, target: Any = None) -> Any:
    from types import SimpleNamespace

    from tests.jobs.helpers import CPU_POOL
    from tests.jobs.helpers import target as make_target
    from trainforge.core.contract import Declared, DeclaredJob
    from trainforge.jobs.spec import parse_job

    if job is None:
        target = make_target(CPU_POOL)
        job = parse_job({"name": "toy", "team": "research", "pool": CPU_POOL.name}, "toy")
    emitted = SimpleNamespace(workload=doc, backend="toy")
    return DeclaredJob(job, target, emitted, "job-toy"), Declared


def test_the_retry_bound_is_its_restart_field(toy_backend: None) -> None:
    """Its restart bound (maxRestarts 2: 3 attempts) is the plan's retry bound; without one
    its retries are unbounded, a finding."""
    from trainforge.plan.checks import retry_bounds

    def bound(max_restarts: int | None) -> T.CheckResult:
        dj, declared = _declared_toy(
            toy_gang({"containers": [_container()]}, 2, None, None, max_restarts)
        )
        ctx = T.PlanContext(
            inventory=Inventory(project="p", stack="s", resources=[]),
            objects=[],
            declared=declared(jobs=[dj]),
        )
        return retry_bounds.check(ctx)

    bounded = bound(2)
    assert bounded.findings == []
    (row,) = bounded.sections[0].data
    assert (row["backend"], row["attempts"], row["why"]) == (
        "toy",
        3,
        "spec.maxRestarts 2: 3 attempts",
    )
    (finding,) = bound(None).findings
    assert finding.rule == retry_bounds.RULE and finding.resource == "team-research/ToyGang/toy"


def test_the_queue_admits_its_pods_as_its_shape_counts_them(toy_backend: None) -> None:
    """The dev stack's first GPU job, its workload replaced by a ToyGang of 3 pods on the same
    pod template: the queue simulation counts the gang's 3 pods (not the job's `workers`)."""
    from tests.conftest import shipped_plan
    from trainforge.jobs import backends as B

    dev = shipped_plan("dev")
    first = next(dj for dj in dev.inventory.declared.jobs if dj.spec.gpus_per_worker)
    wl = first.emitted.workload
    (tmpl, *_) = B.pod_templates(wl, build=False)
    toy = toy_gang(tmpl.spec, size=3, metadata=wl["metadata"])
    toy["spec"]["gangs"][0]["pod"]["metadata"] = tmpl.template.get("metadata") or {}
    assert first.spec.workers != 3
    dj, declared = _declared_toy(toy, first.spec, first.target)
    objects = [o for o in dev.objects if o.doc is not wl and o.doc.get("kind") != wl["kind"]]
    ctx = T.PlanContext(
        inventory=dev.inventory,
        objects=[*objects, _obj(toy)],
        declared=declared(contracts=dev.inventory.declared.contracts, jobs=[dj]),
    )
    workloads, _, _ = Q.simulate(ctx)
    (w,) = workloads
    assert (w.job, w.pods) == (first.spec.name, 3) and w.state != "never"
    assert w.need[Q.GPU] == 3 * first.spec.gpus_per_worker > 0  # the gang's 3 pods' GPUs


def test_the_backends_suspend_and_managedby_are_where_their_crds_have_them() -> None:
    """The paths a backend declares for `suspend` and `managedBy` are fields of its CRD (the
    vendored schemas the plan validates against), and the shape reads them there."""
    from trainforge.plan import crds

    for kind, api_version in (
        ("PyTorchJob", "kubeflow.org/v1"),
        ("TrainJob", "trainer.kubeflow.org/v1alpha1"),
    ):
        shape = backends.SHAPES[kind]
        schema = crds.schema(api_version, kind)
        for path in (shape.suspend, shape.managed_by):
            node = schema
            for key in path:
                node = node["properties"][key]  # KeyError: no such field in the CRD
        doc: dict[str, Any] = {"kind": kind}
        for path, value in ((shape.suspend, True), (shape.managed_by, "kueue.x-k8s.io/multikueue")):
            at = doc
            for key in path[:-1]:
                at = at.setdefault(key, {})
            at[path[-1]] = value
        assert shape.is_suspended(doc) and shape.manager(doc) == "kueue.x-k8s.io/multikueue"
        assert not backends.SHAPES[kind].is_suspended({"kind": kind, "spec": {}})
