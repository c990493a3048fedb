"""Where Kueue puts work that names no pool, on the shipped prod stack (issue 41's first major
finding): a CPU-only Job created with kubectl, a CronJob's Job or a Kubeflow SDK TrainJob must
land on a CPU pool, and a 1-GPU job from vision must use vision's own nominal GPUs (g5,
gpu-workloads) before borrowing llm's p5 quota. Shown twice: by the one admission model
(trainforge.plan.kueue through checks.queues.admit_object) and by the plan's own output (the
placement section, and no placement finding)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.conftest import shipped_plan
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q

GI = 2**30


@pytest.fixture(scope="module")
def prod():
    return shipped_plan("prod")


def _docs(result) -> list[dict]:
    return [o.doc for o in result.objects]


def test_a_cpu_only_unlabelled_job_in_prod_is_admitted_on_a_cpu_flavor(prod):
    for team in ("llm", "vision"):
        pod = {"containers": [{"name": "main", "image": "busybox"}]}
        got = Q.admit_object(_docs(prod), team, {}, pod, {"cpu": Fraction(2), "memory": 8 * GI})
        assert got.local_queue == "default"
        assert (got.workload.state, got.workload.flavor) == ("admitted", "training-workloads"), (
            team,
            got.workload.reason,
        )


def test_a_one_gpu_vision_job_uses_visions_own_g5_quota_before_borrowing(prod):
    need = {K.GPU: Fraction(1), "cpu": Fraction(4), "memory": 16 * GI}
    got = Q.admit_object(_docs(prod), "vision", {}, {"containers": []}, need)
    w = got.workload
    assert (w.state, w.flavor, w.borrowing) == ("admitted", "gpu-workloads", {}), w.reason


def test_when_its_own_quota_is_in_use_the_gpu_job_borrows_in_its_own_pool_first(prod):
    """vision's 16 nominal GPUs in gpu-workloads are taken: the next 1-GPU job borrows the
    cohort's idle g5 GPUs there (MayStopSearch), it does not move to llm's p5 pool."""
    m = K.read(_docs(prod))
    vision = m.queues["vision"]
    vision.usage = {"gpu-workloads": {K.GPU: Fraction(16)}}
    ps = K.PodSet("main", 1, {K.GPU: Fraction(1)})
    got = K.Assigner(K.Quotas(m.queues, m.shared), m.flavors).assign(vision, [ps])
    assert (got.flavor, got.mode, got.borrowing) == ("gpu-workloads", K.FIT, 1)


def test_the_plan_shows_the_placement_and_finds_nothing_to_fix(prod):
    (section,) = [s for s in prod.sections if s.title == Q.PLACEMENT_TITLE]
    by = {(d["namespace"], d["probe"]): d for d in section.data}
    assert by[("llm", "CPU-only")]["flavor"] == "training-workloads"
    assert by[("vision", "CPU-only")]["flavor"] == "training-workloads"
    assert (by[("vision", "1-GPU")]["flavor"], by[("vision", "1-GPU")]["borrows"]) == (
        "gpu-workloads",
        False,
    )
    # llm's own GPUs: p4d-reserved is a topology flavor (skipped for a job that asks no
    # topology), so efa-training, where llm has nominal GPUs
    assert (by[("llm", "1-GPU")]["flavor"], by[("llm", "1-GPU")]["borrows"]) == (
        "efa-training",
        False,
    )
    assert any(
        ln.startswith("namespace vision (ClusterQueue vision): CPU-only -> training-workloads")
        for ln in section.lines
    )
    assert not [f for f in prod.failing if f.rule == Q.RULE_PLACEMENT]


def test_the_placement_finding_names_the_queue_when_the_order_is_wrong(prod):
    """The stack as it was (pool order, no flavorFungibility): the plan finds both problems."""
    import copy
    import dataclasses

    from trainforge.plan.check_types import PlanContext

    pool_order = ["p4d-reserved", "efa-training", "gpu-workloads", "training-workloads"]
    objects = []
    for o in prod.objects:
        if o.kind == "ClusterQueue":
            doc = copy.deepcopy(o.doc)
            doc["spec"].pop("flavorFungibility", None)
            (group,) = doc["spec"]["resourceGroups"]
            group["flavors"].sort(key=lambda f: pool_order.index(f["name"]))
            o = dataclasses.replace(o, doc=doc)
        objects.append(o)
    ctx = PlanContext(inventory=prod.inventory, objects=objects)
    found = Q.placement(ctx).findings
    text = " | ".join(f.message for f in found)
    assert "namespace llm: a CPU-only job that names no pool lands on GPU pool efa-training" in text
    assert "namespace vision: a 1-GPU job that names no pool borrows in efa-training" in text


def test_the_queue_simulation_runs_once_per_plan(prod, monkeypatch):
    """The queue check, the cost report's admission and the outcomes read one run (issue 42:
    it ran twice, once for queues.check and again through cost_check -> admission)."""
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.checks import cost_check

    calls = []
    real = Q._simulate
    monkeypatch.setattr(Q, "_simulate", lambda ctx: calls.append(ctx) or real(ctx))
    ctx = PlanContext(
        inventory=prod.inventory, objects=list(prod.objects), declared=prod.inventory.declared
    )
    Q.check(ctx)
    cost_check.build_report(ctx)
    Q.outcomes(ctx)
    assert len(calls) == 1


def test_a_gang_kueue_admits_but_its_pool_cannot_launch_is_a_finding(prod):
    """The shipped prod job's pool shrunk to 1 GPU behind the same rendered quotas: Kueue
    admits the gang on vision's nominal quota, Karpenter could never launch it
    (TRAINFORGE_QUEUE_UNLAUNCHABLE, named on the job), in the words of the replay of its
    launch: no g5.48xlarge (8 GPUs) is within a 1-GPU limit."""
    from dataclasses import replace

    from trainforge.plan.check_types import PlanContext

    declared = prod.inventory.declared
    (job,) = declared.jobs
    small = replace(job.target.pool, limits=replace(job.target.pool.limits, gpus=1))
    contracts = [
        replace(c, pools={n: small if n == small.name else p for n, p in c.pools.items()})
        for c in declared.contracts
    ]
    ctx = PlanContext(
        inventory=prod.inventory,
        objects=list(prod.objects),
        declared=replace(declared, contracts=contracts),
    )
    found = [f for f in Q.check(ctx).findings if f.rule == Q.RULE_UNLAUNCHABLE]
    assert [(f.resource, f.message) for f in found] == [
        (
            "vision/job/gpt-350m-fsdp",
            "job gpt-350m-fsdp (team vision): admitted, but its pool cannot launch it: "
            "gpt-350m-fsdp: Karpenter places 0 NodeClaim(s) of its 2 pod(s) in pool "
            "gpu-workloads and leaves 2 without a node: all available instance types exceed "
            "limits for nodepool (limit 1 GPUs, 0 held by the nodes of the gangs running there)",
        )
    ]
