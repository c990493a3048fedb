"""One source for a job's figures across the plan's sections: the queue simulation and the
Cost read the object the job became (its pod templates through its backend's shape, the gang
Karpenter packs, the nodes that launch), not the job's spec, so a job whose object differs
from its spec (a patched manifest, an imported YAML, an SDK TrainJob) gets one duration and
one size in both sections."""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import replace
from fractions import Fraction

import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check
from trainforge.plan.checks import queues as Q

JOB = "gpt-350m-fsdp"


def _ctx(patch) -> PlanContext:
    """The prod plan with `patch` applied to a copy of the job's PyTorchJob replica specs."""
    result = shipped_plan("prod")
    objects = []
    for o in result.objects:
        if o.kind == "PyTorchJob" and o.obj_name == JOB:
            o = replace(o, doc=copy.deepcopy(o.doc))
            for spec in o.doc["spec"]["pytorchReplicaSpecs"].values():
                patch(spec)
        objects.append(o)
    inv = result.inventory
    return PlanContext(inventory=inv, objects=objects, declared=inv.declared, root=ROOT)


def _anti_affinity(spec: dict) -> None:
    term = {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"trainforge.io/job": JOB}}}  # fmt: skip
    spec["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }


def _figures(ctx: PlanContext) -> tuple[Q.Workload, dict]:
    (w,) = [w for w in Q.simulate(ctx)[0] if w.job == JOB]
    (row,) = [j for j in cost_check.build_report(ctx, dt.date(2026, 11, 23)).jobs if j.name == JOB]
    return w, row.to_json()


def test_a_patched_object_gets_one_duration_in_the_queue_and_the_cost():
    """The object keeps its pods on separate nodes (a required anti-affinity), so Karpenter
    launches g5.12xlarge x2, not the g5.48xlarge its spec alone would fill: the Cost timed the
    run on the object's nodes and the queue on the spec's (two durations of one job)."""
    ctx = _ctx(_anti_affinity)
    w, row = _figures(ctx)
    assert row["launch"] == "2 x g5.12xlarge"
    assert row["durationSeconds"] is not None
    assert w.duration == row["durationSeconds"]
    (section,) = [s for s in Q.check(ctx).sections if s.title == Q.QUEUE_TITLE]
    (data,) = [d for d in section.data if d["job"] == JOB]
    assert data["durationSeconds"] == row["durationSeconds"]
    # the same job as emitted times the run on the g5.48xlarge in both
    plain = PlanContext(inventory=ctx.inventory, objects=shipped_plan("prod").objects,
                        declared=ctx.declared, root=ROOT)  # fmt: skip
    w0, row0 = _figures(plain)
    assert row0["launch"] == "1 x g5.48xlarge"
    assert w0.duration == row0["durationSeconds"] != row["durationSeconds"]


def _gang(ctx: PlanContext, d):
    """The job's gang as the queue, the Cost and the estimates read it (`queues.object_gang`)."""
    obj = Q.workload_object(ctx, d.spec.name, d.target.namespace)
    return Q.object_gang(ctx, obj, d.spec, d.target.pool)


def _more_cpu(spec: dict) -> None:
    (c,) = [c for c in spec["template"]["spec"]["containers"] if c["name"] == "pytorch"]
    c["resources"] = {**c["resources"], "requests": {**c["resources"]["requests"], "cpu": "60"}}
    c["resources"]["limits"] = {**c["resources"].get("limits", {}), "cpu": "60"}


def test_the_queue_charges_what_the_objects_pods_ask_as_the_cost_packs_them():
    """The object's pods ask 60 cores where the spec says 47.4: Kueue's Workload and
    Karpenter's packing read the pods, so the queue charges 2 x 60 cores, as many pods as
    the Cost packs (the queue charged the spec's cores times the object's pods)."""
    ctx = _ctx(_more_cpu)
    w, _ = _figures(ctx)
    gang = _gang(ctx, next(d for d in ctx.declared.jobs if d.spec.name == JOB))
    assert {p.cpu_m for p in gang.pods} == {60_000}
    assert w.pods == len(gang.pods) == 2
    assert w.need["cpu"] == Fraction(120)
    assert w.need["nvidia.com/gpu"] == 8


@pytest.mark.parametrize("patch", [_anti_affinity, _more_cpu])
def test_the_cost_row_is_the_queues_run(patch):
    """The Cost's row and the queue's workload are computed from one priced run of the job
    (`queues.job_run`, once per job and plan)."""
    ctx = _ctx(patch)
    d = next(d for d in ctx.declared.jobs if d.spec.name == JOB)
    run = Q.job_run(ctx, d)
    w, row = _figures(ctx)
    assert w.duration == run.duration.seconds == row["durationSeconds"]
    assert row["onDemandPerHour"] == run.hourly


def test_an_sdk_style_trainjob_is_charged_the_pods_the_trainer_builds(monkeypatch):
    """A TrainJob whose resourcesPerNode asks 5 cores where its spec says 3 (as an SDK
    TrainJob's trainer writes its own): the Trainer builds its pods with 5 (Trainer v2.2.1
    resourcesPerNode replaces the runtime's, `trainjob.effective_pod`), so the queue charges
    2 x 5 cores, as the Cost packs them (the queue charged the spec's 3 per pod)."""
    from tests.plan.test_check_queues import job, plan
    from trainforge.jobs import trainjob

    real = trainjob.workload_manifest

    def five_cores(*a, **kw):
        doc = real(*a, **kw)
        res = doc["spec"]["trainer"]["resourcesPerNode"]
        doc["spec"]["trainer"]["resourcesPerNode"] = {
            "requests": {**res["requests"], "cpu": "5"},
            "limits": {**res["limits"], "cpu": "5"},
        }
        return doc

    monkeypatch.setattr(trainjob, "workload_manifest", five_cores)
    result = plan([job("sdk", "vision", 2, cpu="3", backend="trainjob")])
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    (w,) = Q.simulate(ctx)[0]
    gang = _gang(ctx, inv.declared.jobs[0])
    assert [p.cpu_m for p in gang.pods] == [5000, 5000]
    assert w.pods == 2 and w.need["cpu"] == Fraction(10)
