"""The estimates section reads the job's one priced run (`queues.job_run`): the type its
"step and duration on" line names and the duration it prints are the Cost row's and the
queue's, for a job whose object differs from its spec too."""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import replace

from tests.conftest import ROOT, shipped_plan
from trainforge.jobs.duration import duration_text
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check, estimates
from trainforge.plan.checks import queues as Q

JOB = "gpt-350m-fsdp"


def _ctx(anti_affinity: bool, **spec: object) -> PlanContext:
    """The prod plan; its job's PyTorchJob with a required pod anti-affinity on the hostname
    (the object keeps its pods on separate nodes, its spec does not say so) and its spec with
    `spec`'s fields."""
    result = shipped_plan("prod")
    objects = []
    for o in result.objects:
        if anti_affinity and o.kind == "PyTorchJob" and o.obj_name == JOB:
            o = replace(o, doc=copy.deepcopy(o.doc))
            term = {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"trainforge.io/job": JOB}}}  # fmt: skip
            for rs in o.doc["spec"]["pytorchReplicaSpecs"].values():
                rs["template"]["spec"]["affinity"] = {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                }
        objects.append(o)
    declared = copy.copy(result.inventory.declared)
    declared.jobs = [
        replace(d, spec=d.spec.model_copy(update=spec)) if d.spec.name == JOB else d
        for d in declared.jobs
    ]
    return PlanContext(inventory=result.inventory, objects=objects, declared=declared, root=ROOT)


def _three(ctx: PlanContext) -> tuple[dict, dict, dict, list[str]]:
    """The job's Cost row, queue row, estimates row and estimates lines in one plan."""
    (cost,) = [j for j in cost_check.build_report(ctx, dt.date(2026, 11, 23)).jobs if j.name == JOB]
    (queue,) = [s for s in Q.check(ctx).sections if s.title == Q.QUEUE_TITLE]
    (qrow,) = [d for d in queue.data if d["job"] == JOB]
    section = estimates.check(ctx).sections[0]
    (est,) = [d for d in section.data if d["job"] == JOB]
    mine = [ln for ln in section.lines if ln.startswith("  ")]
    return cost.to_json(), qrow, est, mine


def _agree(ctx: PlanContext, launch: str) -> tuple[dict, list[str]]:
    cost, queue, est, lines = _three(ctx)
    assert cost["launch"] == launch
    timed_on = launch.split(" x ")[-1]
    assert est["runOn"]["instanceType"] == timed_on
    assert any(f"step and duration on {timed_on} (" in ln for ln in lines)
    assert est["runOn"]["duration_seconds"] == cost["durationSeconds"] == queue["durationSeconds"]
    (dur,) = [ln for ln in lines if ln.startswith("  duration: ")]
    assert duration_text(cost["durationSeconds"]) in dur
    return cost, lines


def test_a_patched_object_is_timed_on_the_costs_nodes():
    """The object's anti-affinity makes Karpenter launch 2 x g5.12xlarge (its spec alone: one
    g5.48xlarge): the estimates' "step and duration on" type and duration are the Cost's."""
    cost, lines = _agree(_ctx(True), "2 x g5.12xlarge")
    assert cost["durationSource"] == "estimate"
    plain, _ = _agree(_ctx(False), "1 x g5.48xlarge")
    assert plain["durationSeconds"] != cost["durationSeconds"]


def test_a_measured_step_time_is_the_duration_the_estimates_print():
    """With expectedStepSeconds the Cost and the queue time the run from what the user
    measured: the estimates' duration line says that figure (the model's beside it), not
    the model's alone (the section printed 9.4 h where the Cost and the queue said 2.8 h)."""
    cost, lines = _agree(_ctx(True, expected_step_seconds=0.5), "2 x g5.12xlarge")
    assert cost["durationSource"] == "expectedStepSeconds"
    (dur,) = [ln for ln in lines if ln.startswith("  duration: ")]
    assert "expectedStepSeconds" in dur and "the estimate: " in dur
    # docs/cost.md, "Expected run", quotes this line
    doc = " ".join((ROOT / "docs/cost.md").read_text().split())
    assert f"`{dur.strip()}`" in doc


def test_a_fleet_managers_job_is_timed_on_a_worker_as_its_object_has_it():
    """A manager and a worker both like prod, the job's object with the anti-affinity: the
    worker's run (the Cost's per-worker row, the fleet section's) is the object's 2 x
    g5.12xlarge and its duration, the run `queues.job_run` prices for the same object in a
    single cluster (the worker's run was priced from the spec: 1 x g5.48xlarge)."""
    from trainforge.plan.checks import fleet as FC
    from trainforge.plan.fleet import WorkerPlan

    single = _ctx(True)
    d = next(d for d in single.declared.jobs if d.spec.name == JOB)
    alone = Q.job_run(single, d)
    worker = WorkerPlan("w1", "fleet-w1", "us-east-1", single.inventory, single.objects)
    ctx = replace(_ctx(True), fleet_workers={"w1": worker})
    (cost,) = [j for j in cost_check.build_report(ctx, dt.date(2026, 11, 23)).jobs if j.name == JOB]
    (run,) = cost.to_json()["workers"]
    assert run["launch"] == "2 x g5.12xlarge" == alone.to_json()["launch"]
    assert run["durationSeconds"] == alone.duration.seconds
    assert run["onDemandPerHour"] == alone.hourly
    section = FC.check(ctx).sections[0]
    (job,) = [j for j in section.data["jobs"] if j["job"] == JOB]
    (there,) = job["workers"]
    assert there["onDemandPerHour"] == alone.hourly and "g5.12xlarge x2" in there["cost"]
