"""The fleet section (trainforge.plan.checks.fleet) on small fleets built from the dev stack's
planned objects: a manager and workers alike, then one worker broken at a time. The dev
program runs once (session fixture); each case edits copies of its objects."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

import pytest

from trainforge.jobs import backends
from trainforge.jobs.backends import job_shape
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import fleet as FC
from trainforge.plan.checks import queues as Q
from trainforge.plan.fleet import WorkerPlan
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.runner import run_project


@dataclass
class Obj:
    """A rendered object as the checks read it (trainforge.plan.manifests.K8sObject)."""

    doc: dict[str, Any]
    urn: str = ""

    @property
    def kind(self) -> str:
        return self.doc["kind"]

    @property
    def namespace(self) -> str | None:
        return self.doc["metadata"].get("namespace")

    @property
    def ident(self) -> str:
        m = self.doc["metadata"]
        return f"{m.get('namespace') or '_'}/{self.kind}/{m['name']}"


@pytest.fixture(scope="module")
def dev(repo_root):
    inv = run_project(repo_root, "dev", echo_warnings=False)
    return inv, [Obj(copy.deepcopy(o.doc), o.urn) for o in k8s_objects(inv)]


def managed(objs: list[Obj]) -> list[Obj]:
    """The dev objects with every job emitted for MultiKueue (as a manager's are)."""
    out = []
    for o in objs:
        doc = copy.deepcopy(o.doc)
        shape = job_shape(doc)  # where the job's backend keeps managedBy
        if shape and "trainforge.io/job" in (doc["metadata"].get("labels") or {}):
            doc = backends.managed(doc, shape.managed_by, FC.MULTIKUEUE)
        out.append(Obj(doc, o.urn))
    return out


def fleet(dev, **workers) -> PlanContext:
    """A manager (the dev stack, jobs managed by MultiKueue) and workers: name -> (region,
    objects), each with the dev stack's pools."""
    inv, objs = dev
    plans = {
        name: WorkerPlan(name, f"fleet-{name}", region, inv, objects)
        for name, (region, objects) in workers.items()
    }
    return PlanContext(inventory=inv, objects=managed(objs), declared=inv.declared,
                       fleet_workers=plans)  # fmt: skip


def run(ctx):
    result = FC.check(ctx)
    return result, {f.rule for f in result.findings}


def worker_docs(dev, edit=None) -> list[Obj]:
    objs = [Obj(copy.deepcopy(o.doc)) for o in dev[1]]
    if edit:
        objs = [o for o in objs if edit(o.doc) is not False]
    return objs


def test_a_fleet_of_like_workers_lists_each_job_with_its_cost(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    result, rules = run(ctx)
    # checkpoints of dev's jobs are on FSx only: that is the one finding a like fleet has
    assert rules <= {FC.RULE_CHECKPOINTS}, [f.message for f in result.findings]
    (section,) = result.sections
    text = "\n".join(section.lines)
    assert FC.ALL_AT_ONCE in section.lines[0] and "Kueue 0.19's default" in section.lines[0]
    for job in ("mnist-ddp", "gpt-small-fsdp"):
        assert f"job {job} (team research" in text
    # a cost per worker, in the worker's region
    assert "in us-east-1" in text and "in us-west-2" in text and "/h on-demand" in text
    assert "tried first: all 2 at once (use1, usw2); the first to admit it runs it" in text
    job = next(j for j in section.data["jobs"] if j["job"] == "gpt-small-fsdp")
    assert [w["worker"] for w in job["workers"]] == ["use1", "usw2"]
    assert all(w["onDemandPerHour"] for w in job["workers"])


def test_a_job_no_worker_can_hold_is_a_finding(dev):
    def no_gpu_quota(doc):
        # the worker's team queue has no GPU pool: its ClusterQueue lists no such flavor
        if doc["kind"] == "ClusterQueue":
            for g in doc["spec"].get("resourceGroups") or []:
                g["flavors"] = [f for f in g["flavors"] if f["name"] != "gpu-workloads"]

    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev, no_gpu_quota)))
    result, rules = run(ctx)
    assert FC.RULE_NO_WORKER in rules
    (f,) = [f for f in result.findings if f.rule == FC.RULE_NO_WORKER]
    assert f.message.startswith("job gpt-small-fsdp: no worker of the fleet can admit it (use1:")
    assert "job gpt-small-fsdp (team research, 2 pod(s)): no worker can run it" in (
        result.sections[0].lines
    )
    # with one worker that can, the job is not refused
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev, no_gpu_quota)),
                usw2=("us-west-2", worker_docs(dev)))  # fmt: skip
    result, rules = run(ctx)
    assert FC.RULE_NO_WORKER not in rules
    assert any(line.startswith("  not use1: ") for line in result.sections[0].lines)


def test_a_worker_of_another_shape_is_refused_naming_worker_and_object(dev):
    def no_local_queue(doc):
        return not (doc["kind"] == "LocalQueue" and doc["metadata"]["name"] == "default")

    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)),
                usw2=("us-west-2", worker_docs(dev, no_local_queue)))  # fmt: skip
    result, rules = run(ctx)
    shapes = [f for f in result.findings if f.rule == FC.RULE_SHAPE]
    assert len(shapes) == 1 and shapes[0].resource == "worker/usw2"
    assert "worker usw2 (stack fleet-usw2)" in shapes[0].message
    assert "lacks the manager's LocalQueue research/default" in shapes[0].message

    def other_namespace(doc):
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] == "research":
            doc["metadata"]["name"] = "research-eu"

    result, _ = run(fleet(dev, use1=("us-east-1", worker_docs(dev, other_namespace))))
    (f,) = [f for f in result.findings if f.rule == FC.RULE_SHAPE]
    assert "lacks the manager's team namespace research" in f.message
    assert "has team namespace research-eu that the manager has not" in f.message


def test_a_worker_without_the_managers_job_backend_is_refused(dev):
    inv = dev[0]
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)))
    contracts = [replace(c, backends=("trainjob",)) for c in inv.declared.contracts]
    other = replace(inv.declared, contracts=contracts)
    w = ctx.fleet_workers["use1"]
    ctx.fleet_workers["use1"] = WorkerPlan(
        w.name, w.stack, w.region, replace(inv, declared=other), w.objects
    )
    result, rules = run(ctx)
    (f,) = [f for f in result.findings if f.rule == FC.RULE_SHAPE]
    assert "training operator" in f.message and "backend pytorchjob" in f.message


def test_a_manager_job_without_managed_by_is_a_finding(dev):
    inv, objs = dev
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)))
    ctx.objects = [Obj(copy.deepcopy(o.doc), o.urn) for o in objs]  # as emitted for one cluster
    result, rules = run(ctx)
    found = [f for f in result.findings if f.rule == FC.RULE_MANAGED_BY]
    assert {f.message.split(":")[0] for f in found} >= {"job mnist-ddp", "job gpt-small-fsdp"}
    assert "spec.runPolicy.managedBy is None" in found[0].message


def test_fsx_only_checkpoints_on_several_workers_is_a_finding(dev):
    inv = dev[0]

    def no_mirror(spec):
        ck = spec.checkpoint
        ck = (
            ck.model_copy(update={"s3_mirror": False})
            if hasattr(ck, "model_copy")
            else (replace(ck, s3_mirror=False))
        )
        if hasattr(spec, "model_copy"):
            return spec.model_copy(update={"checkpoint": ck})
        return replace(spec, checkpoint=ck)

    jobs = [
        replace(dj, spec=no_mirror(dj.spec)) if dj.spec.name == "mnist-ddp" else dj
        for dj in inv.declared.jobs
    ]

    def unmirrored(ctx):
        ctx.declared = replace(inv.declared, jobs=jobs)
        return ctx

    one = unmirrored(fleet(dev, use1=("us-east-1", worker_docs(dev))))
    assert FC.RULE_CHECKPOINTS not in run(one)[1]
    two = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    # dev's jobs mirror their checkpoints to S3, all but mnist-user: its script
    # (examples/mnist/train.py) never imports trainforge, whose CheckpointManager mirrors
    flagged = [
        f.message.split(":")[0] for f in run(two)[0].findings if f.rule == FC.RULE_CHECKPOINTS
    ]
    assert flagged == ["job mnist-user"]
    result, rules = run(unmirrored(two))
    found = [f for f in result.findings if f.rule == FC.RULE_CHECKPOINTS]
    assert sorted(f.message.split(":")[0] for f in found) == ["job mnist-ddp", "job mnist-user"]
    (f,) = [f for f in found if f.message.startswith("job mnist-ddp")]
    assert f.message.startswith("job mnist-ddp: its checkpoints (/fsx/checkpoints/research/")
    assert "live on the FSx of whichever cluster runs it, and 2 workers may" in f.message


def test_mirrored_checkpoints_state_the_cross_region_traffic(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    lines = run(ctx)[0].sections[0].lines
    data = [line for line in lines if line.startswith("  data: ")]
    # dev's bucket is in us-west-2: use1 reads it across regions, usw2 does not
    assert data and all("in us-west-2; use1 reads and writes it across regions" in d for d in data)
    assert "no price in the price facts" in data[0]


def test_no_section_outside_a_fleet(dev):
    inv, objs = dev
    assert FC.check(PlanContext(inventory=inv, objects=objs, declared=inv.declared)).sections == []


def test_the_dispatcher_is_read_from_the_managers_kueue_configuration(dev):
    import yaml

    from trainforge.plan.runner import Inventory

    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    assert FC.dispatcher(ctx) == FC.ALL_AT_ONCE  # the platform's Configuration names none
    inv = ctx.inventory
    resources = []
    for r in inv.resources:
        if r.type == "kubernetes:helm.sh/v3:Release" and "kueue" in str(r.inputs.get("chart")):
            r = replace(r, inputs=copy.deepcopy(r.inputs))
            mc = r.inputs["values"]["managerConfig"]
            cfg = yaml.safe_load(mc["controllerManagerConfigYaml"])
            cfg["multiKueue"] = {"dispatcherName": FC.INCREMENTAL}
            mc["controllerManagerConfigYaml"] = yaml.safe_dump(cfg)
        resources.append(r)
    ctx.inventory = Inventory(inv.project, inv.stack, resources, declared=inv.declared)
    assert FC.dispatcher(ctx) == FC.INCREMENTAL
    lines = run(ctx)[0].sections[0].lines
    assert lines[0].startswith(f"dispatcher {FC.INCREMENTAL}: workers are tried in name order")
    assert (
        "  tried first: use1, usw2 (every worker in name order, 3 at a time, until one "
        "admits it)" in lines
    )
    assert FC.tried_first(["b", "a"], FC.INCREMENTAL, ["d", "c", "b", "a"]).startswith("a, b, c")


def _with_iam(dev, grants: list[str]):
    """The dev inventory with stand-in IAM: its own bucket and a team policy writing `grants`."""
    import json

    from trainforge.plan.runner import Inventory, Recorded

    inv = dev[0]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
              "Action": ["s3:GetObject", "s3:PutObject"],
              "Resource": [f"arn:aws:s3:::{b}/research/*" for b in grants]}]}  # fmt: skip
    extra = [
        Recorded("urn:b", "aws:s3/bucket:Bucket", "ckpt", None, True, {}, id="worker-ckpt-id"),
        Recorded("urn:p", "aws:iam/rolePolicy:RolePolicy", "ckpt-research", None, True,
                 {"policy": json.dumps(policy)}),
    ]  # fmt: skip
    # the preview's own policies are unknown (built from ARNs): the stand-in run knows them
    known = [r for r in inv.resources if not r.type.startswith(("aws:iam/", "aws:s3/"))]
    return Inventory(inv.project, "fleet-use1", [*known, *extra], declared=inv.declared)


def test_a_worker_that_cannot_write_the_managers_bucket_is_a_finding(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)))
    w = ctx.fleet_workers["use1"]
    # a preview's policies are not known: nothing is claimed
    assert FC.RULE_CHECKPOINTS not in run(ctx)[1]
    ctx.fleet_workers["use1"] = WorkerPlan(
        w.name, w.stack, w.region, _with_iam(dev, ["worker-ckpt-id"]), w.objects
    )
    result, rules = run(ctx)
    found = [f for f in result.findings if f.rule == FC.RULE_CHECKPOINTS]
    assert found and found[0].message.startswith(
        "job mnist-ddp: it mirrors its checkpoints to the manager's bucket, and the team "
        "research role of worker(s) use1 may not write its research/ prefix"
    )
    # a worker whose roles may write another stack's bucket reaches the mirror; from another
    # region, at a stated cost
    ctx.fleet_workers["use1"] = WorkerPlan(
        w.name, w.stack, w.region, _with_iam(dev, ["worker-ckpt-id", "manager-ckpt"]), w.objects
    )
    result, rules = run(ctx)
    assert FC.RULE_CHECKPOINTS not in rules
    assert any("use1 reads and writes it across regions" in ln for ln in result.sections[0].lines)


def test_equal_prices_name_no_cheapest_worker(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    lines = run(ctx)[0].sections[0].lines
    cheapest = [ln for ln in lines if ln.startswith("  cheapest: ")]
    assert cheapest and all(
        ln == "  cheapest: none, the same on-demand price on every worker"
        or ln.startswith("  cheapest: use")
        for ln in cheapest
    )


def test_a_job_reading_what_only_the_manager_declares_is_a_finding(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)))
    assert FC.RULE_INPUTS not in run(ctx)[1]  # the worker declares the same ConfigMaps

    def no_config_maps(doc):
        return doc["kind"] != "ConfigMap"

    result, rules = run(fleet(dev, use1=("us-east-1", worker_docs(dev, no_config_maps))))
    found = {
        f.message.split(":")[0]: f.message for f in result.findings if f.rule == FC.RULE_INPUTS
    }
    # the jobs that ship their script in a ConfigMap; the bundled runtime's read none
    assert set(found) == {"job mnist-user", "job resumable"}, found
    assert "its pods read ConfigMap research/mnist-user-src-" in found["job mnist-user"]
    assert (
        "which worker use1 does not declare (MultiKueue copies the job object alone)"
        in (found["job mnist-user"])
    )


def test_an_image_of_another_regions_registry_is_a_stated_pull(dev):
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    lines = run(ctx)[0].sections[0].lines
    images = [ln for ln in lines if ln.startswith("  image: ")]
    # dev's runtime image is in its own ECR, us-west-2: only use1 pulls across regions
    assert images and all(
        " from ECR in us-west-2; use1 pulls it across regions" in ln for ln in images
    ), images
    assert FC.image_regions([{"containers": [{"image": "ghcr.io/x/y:1"}]}]) == {}


def test_a_worker_whose_training_runtime_differs_is_refused(dev):
    def runtime(nodes: int) -> Obj:
        return Obj({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
                    "metadata": {"name": "torch-distributed"},
                    "spec": {"mlPolicy": {"numNodes": nodes, "torch": {"numProcPerNode": "auto"}}}})  # fmt: skip

    ctx = fleet(dev, use1=("us-east-1", [*worker_docs(dev), runtime(1)]),
                usw2=("us-west-2", [*worker_docs(dev), runtime(2)]))  # fmt: skip
    ctx.objects = [*ctx.objects, runtime(1)]
    result, _ = run(ctx)
    (f,) = [f for f in result.findings if f.rule == FC.RULE_SHAPE]
    assert f.resource == "worker/usw2"
    assert (
        "lacks the manager's ClusterTrainingRuntime torch-distributed (mlPolicy {numNodes: 1"
        in (f.message)
    )


def test_a_worker_with_another_training_operator_version_is_refused(dev):
    from trainforge.plan.runner import Inventory

    inv = dev[0]
    assert any(o.startswith("overlay ") for o in FC.operators(inv))
    resources = []
    for r in inv.resources:
        if r.type == "kubernetes:kustomize/v2:Directory" and "training-operator" in r.name:
            directory = r.inputs["directory"].rsplit("?ref=", 1)[0] + "?ref=v1.8.1"
            r = replace(r, inputs={**r.inputs, "directory": directory})
        resources.append(r)
    ctx = fleet(dev, use1=("us-east-1", worker_docs(dev)))
    w = ctx.fleet_workers["use1"]
    other = Inventory(inv.project, "fleet-use1", resources, declared=inv.declared)
    ctx.fleet_workers["use1"] = WorkerPlan(w.name, w.stack, w.region, other, w.objects)
    (f,) = [f for f in run(ctx)[0].findings if f.rule == FC.RULE_SHAPE]
    assert "lacks the manager's training operator overlay " in f.message
    assert "has training operator overlay https://github.com/kubeflow/trainer//manifests/" in (
        f.message
    )
    assert "?ref=v1.8.1 that the manager has not" in f.message


def test_a_fleet_of_unplanned_workers_judges_no_job(dev):
    ctx = fleet(dev)
    ctx.fleet_workers = {"far": WorkerPlan("far", "acme/other/prod", note="worker far: stack "
                                           "acme/other/prod belongs to another project")}  # fmt: skip
    result, rules = run(ctx)
    assert not rules & {FC.RULE_NO_WORKER, FC.RULE_SHAPE}
    lines = result.sections[0].lines
    assert "note: worker far: stack acme/other/prod belongs to another project" in lines
    assert (
        "job mnist-ddp (team research, 2 pod(s)): not judged: no worker of the fleet could be "
        "planned here" in lines
    )


def test_pod_inputs_are_the_existence_checks_references_and_pull_secrets():
    """What a job's pods need on a worker: the existence check's required references (an
    optional one, and what Kubernetes makes in every namespace, are not needed) and the
    imagePullSecrets."""
    pod = {
        "volumes": [
            {"name": "ca", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
            {"name": "opt", "configMap": {"name": "maybe", "optional": True}},
            {"name": "code", "configMap": {"name": "code"}},
        ],
        "containers": [{"name": "main", "envFrom": [{"secretRef": {"name": "env"}}]}],
        "imagePullSecrets": [{"name": "pull"}],
        "serviceAccountName": "runner",
    }
    assert FC.pod_inputs(pod) == {
        ("ConfigMap", "code"),
        ("Secret", "env"),
        ("Secret", "pull"),
        ("ServiceAccount", "runner"),
    }
    assert FC.pod_inputs({"containers": [{"name": "main"}]}) == set()  # runs as `default`


def test_s3_grants_match_actions_as_iam_does():
    """What a stack's policies let a role write is read with IAM's action matching
    (iam_eval.action_matches: wildcards anywhere, any case): `s3:*Object` and `S3:PUTOBJECT`
    write; `s3:Get*` does not. A fixed list of three spellings missed the first two."""
    import json

    from trainforge.plan.runner import Inventory, Recorded

    def grants(action: str) -> set[str]:
        policy = {"Statement": {"Effect": "Allow", "Action": action,
                                "Resource": "arn:aws:s3:::other/research/*"}}  # fmt: skip
        pol = Recorded("urn:p", "aws:iam/rolePolicy:RolePolicy", "p", None, True,
                       {"policy": json.dumps(policy)})  # fmt: skip
        return FC.s3_grants(Inventory("p", "s", [pol]))[1]

    for action in ("s3:*Object", "S3:PUTOBJECT", "s3:Put*", "*"):
        assert grants(action) == {"other"}, action
    assert grants("s3:Get*") == set()


def test_image_regions_reads_the_hosts_image_routes_writes():
    """China (aws-cn) registries are `<acct>.dkr.ecr.<region>.amazonaws.com.cn`, as
    image_routes.registry_host writes them; a host no partition has is no ECR registry."""
    from trainforge.core.image_routes import registry_host

    def regions(*images: str) -> dict[str, str]:
        return FC.image_regions([{"containers": [{"image": i} for i in images]}])

    cn = f"{registry_host('123456789012', 'cn-northwest-1')}/trainforge/train:1"
    us = f"{registry_host('123456789012', 'us-west-2')}/trainforge/train:1"
    assert regions(cn, us) == {cn: "cn-northwest-1", us: "us-west-2"}
    assert (
        regions(
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com/x:1",  # cn- region under .com
            "123456789012.dkr.ecr.us-west-2.amazonaws.com.cn/x:1",  # .com.cn outside China
            "example.com/123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1",  # a path, not the host
        )
        == {}
    )


def test_s3_grants_read_resources_with_iams_arn_matching():
    """The buckets a role may write, by iam_eval's ARN matching: any partition (a China
    stack's arn:aws-cn:s3:::), a wildcard service or region; other services' ARNs are none."""
    import json

    from trainforge.plan.runner import Inventory, Recorded

    def grants(*resources: str) -> set[str]:
        policy = {"Statement": {"Effect": "Allow", "Action": "s3:PutObject",
                                "Resource": list(resources)}}  # fmt: skip
        pol = Recorded("urn:p", "aws:iam/rolePolicy:RolePolicy", "p", None, True,
                       {"policy": json.dumps(policy)})  # fmt: skip
        return FC.s3_grants(Inventory("p", "s", [pol]))[1]

    assert grants("arn:aws-cn:s3:::manager/research/*") == {"manager"}
    assert grants("arn:aws:s*:::a/*", "arn:*:s3:*:*:b") == {"a", "b"}
    assert grants("*") == {"*"}
    assert grants("arn:aws:iam::123456789012:role/x", "arn:aws:sqs:*:*:s3") == set()


def _grants(*statements: dict) -> set[str]:
    import json

    from trainforge.plan.runner import Inventory, Recorded

    pol = Recorded("urn:p", "aws:iam/rolePolicy:RolePolicy", "p", None, True,
                   {"policy": json.dumps({"Statement": list(statements)})})  # fmt: skip
    return FC.s3_grants(Inventory("p", "s", [pol]))[1]


def test_s3_grants_read_not_resource_and_deny_as_iam_does():
    """`Allow s3:PutObject NotResource: [bucket-a/*]` lets the role write every other bucket
    (IAM's NotResource, iam_eval `_element`): read as "*", not as no grant; a Deny in the same
    document takes away what its Allow gives; NotAction grants what it does not name."""
    put = {"Effect": "Allow", "Action": "s3:PutObject"}
    assert _grants({**put, "NotResource": ["arn:aws:s3:::bucket-a/*"]}) == {"*"}
    assert _grants({**put, "NotResource": "*"}) == set()
    deny = {"Effect": "Deny", "Action": "s3:*", "NotResource": "arn:aws:s3:::bucket-a/*"}
    assert _grants({**put, "Resource": "*"}, deny) == {"bucket-a"}
    assert _grants({**put, "Resource": ["arn:aws:s3:::a/*", "arn:aws:s3:::b/*"]},
                   {**deny, "NotResource": "arn:aws:s3:::a/*"}) == {"a"}  # fmt: skip
    assert _grants({"Effect": "Allow", "NotAction": "s3:Get*", "Resource": "*"}) == {"*"}
    assert _grants({"Effect": "Allow", "NotAction": "s3:Put*", "Resource": "*"}) == set()
    # a China stack's NotResource grants the other buckets of its own partition
    cn = {**put, "NotResource": "arn:aws-cn:s3:::bucket-a/*"}
    assert _grants(cn) == {"*"}


def test_s3_grants_count_a_write_through_an_access_point():
    """A write through an S3 access point (arn:aws:s3:<region>:<account>:accesspoint/<name>,
    its objects under /object/) lands in the bucket the access point was made for, which the
    policy does not name: the grant is the access point's, not none."""
    put = {"Effect": "Allow", "Action": "s3:PutObject"}
    ap = "arn:aws:s3:us-west-2:123456789012:accesspoint/ckpt"
    assert _grants({**put, "Resource": f"{ap}/object/research/*"}) == {ap}
    assert _grants({**put, "Resource": "arn:aws:s3:*:*:accesspoint/*"}) == {
        "arn:aws:s3:*:*:accesspoint/*"
    }
    assert _grants({"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{ap}/*"}) == set()
    # a bucket named "accesspoint" is a bucket (no region, no account)
    assert _grants({**put, "Resource": "arn:aws:s3:::accesspoint/x"}) == {"accesspoint"}


# --- a worker admits a job as Kueue would, from its object -------------------------------------

JOB = "gpt-small-fsdp"


def _job_pods(doc) -> dict | None:
    """The job's PyTorchJob replica specs (None for any other object)."""
    if doc["kind"] != "PyTorchJob" or doc["metadata"]["name"] != JOB:
        return None
    return doc["spec"]["pytorchReplicaSpecs"]


def _sidecar(doc):
    # a patched object: its Worker pod runs a proxy that names no requests, so the
    # namespace's LimitRange defaults them (the spec's figure knows neither)
    if (specs := _job_pods(doc)) is not None:
        specs["Worker"]["template"]["spec"]["containers"].append({"name": "proxy", "image": "x"})


def _big_default(doc):
    # a worker whose team LimitRange defaults a container to 8 CPUs: the proxy asks 8 there,
    # 3.6 + 3.6 + 8 = 15.2 > the queue's 14.4 in gpu-workloads
    _sidecar(doc)
    if doc["kind"] == "LimitRange":
        for lim in doc["spec"]["limits"]:
            lim["defaultRequest"]["cpu"] = lim["default"]["cpu"] = "8"


def _small_worker(doc):
    # a patched object whose Worker asks 3 CPUs, not the spec's 3.6 (6.6 in all), on a worker
    # whose team queue holds 7 CPUs in gpu-workloads: the spec's 7.2 would not fit
    if (specs := _job_pods(doc)) is not None:
        res = specs["Worker"]["template"]["spec"]["containers"][0]["resources"]
        res["requests"]["cpu"] = res["limits"]["cpu"] = "3"
    if doc["kind"] == "ClusterQueue":
        for g in doc["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                if f["name"] == "gpu-workloads":
                    f["resources"][0]["nominalQuota"] = "7"


def _own_plan(dev, objs) -> str:
    """What the worker's own plan of the job says (its queue simulation): runs, waits or never."""
    inv = dev[0]
    ctx = PlanContext(inventory=inv, objects=objs, declared=inv.declared)
    return Q.outcomes(ctx)[("research", JOB)][0]


@pytest.mark.parametrize(
    ("manager_edit", "use1_edit", "usw2_edit", "admitted"),
    [
        # LimitRange defaults of the worker's own namespace: usw2 can never admit it
        (_sidecar, _sidecar, _big_default, ["use1"]),
        # the object asks less than the spec: usw2 can admit it
        (_small_worker, None, _small_worker, ["use1", "usw2"]),
    ],
)
def test_a_worker_admits_the_jobs_object_as_its_own_plan_does(
    dev, manager_edit, use1_edit, usw2_edit, admitted
):
    inv = dev[0]
    manager = (inv, worker_docs(dev, manager_edit))
    use1, usw2 = worker_docs(dev, use1_edit), worker_docs(dev, usw2_edit)
    ctx = fleet(manager, use1=("us-east-1", use1), usw2=("us-west-2", usw2))
    where = Q.dispatches(ctx)[("research", JOB)]
    assert [r.worker for r in where.runs] == admitted, where.refused
    # each worker's own plan of the same object (its queue simulation) says the same
    own = {n: _own_plan(dev, o) != "never" for n, o in (("use1", use1), ("usw2", usw2))}
    assert [n for n, ok in own.items() if ok] == admitted
    if admitted == ["use1"]:
        (refused,) = where.refused
        assert refused.startswith("usw2: ") and "gpu-workloads" in refused, refused
    else:
        assert not where.refused


def test_the_section_counts_the_pods_of_the_jobs_object(dev):
    def three_workers(doc):
        # a patched object: 3 Worker replicas where the spec says 1 (2 pods in all)
        if (specs := _job_pods(doc)) is not None:
            specs["Worker"]["replicas"] = 3

    manager = (dev[0], worker_docs(dev, three_workers))
    ctx = fleet(manager, use1=("us-east-1", worker_docs(dev)))
    result, _ = run(ctx)
    assert f"job {JOB} (team research, 4 pod(s)):" in result.sections[0].lines


def test_a_recorded_run_shorter_than_a_workers_is_said(dev):
    """`trainforge status` on a worker counts the run the job's object records (estimated on
    the manager's pool): the section says where a worker runs the job longer than that."""
    inv = dev[0]
    like = fleet(dev, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    job = next(j for j in run(like)[0].sections[0].data["jobs"] if j["job"] == JOB)
    # the same pools on the manager and its workers: the recorded run is the longest there
    assert job["recordedSeconds"] == round(max(w["runSeconds"] for w in job["workers"]))
    assert not any("recorded run" in ln for ln in run(like)[0].sections[0].lines)

    def faster_manager(doc):
        # the object as a manager whose pool runs the job in 10 min records it
        if _job_pods(doc) is not None:
            doc["metadata"]["annotations"]["trainforge.io/expected-duration-seconds"] = "600"

    manager = (inv, worker_docs(dev, faster_manager))
    ctx = fleet(manager, use1=("us-east-1", worker_docs(dev)), usw2=("us-west-2", worker_docs(dev)))
    lines = run(ctx)[0].sections[0].lines
    (said,) = [ln for ln in lines if "recorded run" in ln]
    assert said.startswith("  recorded run: 10 min on its object") and "use1's 45 min" in said
    assert "usw2's 45 min" in said and "promised an earlier start" in said
