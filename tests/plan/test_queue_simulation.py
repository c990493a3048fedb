"""The queue simulation's branches one by one (Kueue v0.19 semantics, plan/checks/queues.py
docstring), in memory: no plan is built, so each case takes milliseconds (the mutation run of
the simulation runs this file per mutant, docs/rehearsals.md "Mutation testing"). The cases
that render a whole plan are in test_check_queues.py."""

from __future__ import annotations

import pytest

from trainforge.plan.checks import queues as Q

F = "gpu-pool"


def _queue(name: str, gpus: int, cohort: str | None = None, **kw) -> Q.Queue:
    nominal = {F: {"cpu": Q._q("1000"), "memory": Q._q("1Ti"), Q.GPU: Q._q(gpus)}}
    return Q.Queue(
        name=name,
        cohort=cohort,
        namespaces={},
        strategy=kw.pop("strategy", "BestEffortFIFO"),
        preemption=kw.pop("preemption", {}),
        nominal=nominal,
        borrow_limit={F: {r: None for r in Q.RESOURCES}},
        flavors=[F],
    )


def _work(job: str, queue: str, gpus: int, order: int, priority: int = 0) -> Q.Workload:
    return Q.Workload(
        job=job, team=queue, namespace=queue, order=order, queue=queue, flavor=F,
        priority=priority, need={Q.GPU: Q._q(gpus)},
    )  # fmt: skip


def _run(queues: list[Q.Queue], work: list[Q.Workload]) -> dict[str, Q.Workload]:
    Q.Simulation({q.name: q for q in queues}, {}).run(work)
    return {w.job: w for w in work}


@pytest.mark.parametrize(
    ("strategy", "states"),
    [
        ("BestEffortFIFO", ("admitted", "pending", "admitted")),  # later job passes the head
        ("StrictFIFO", ("admitted", "pending", "pending")),  # the head blocks its queue
    ],
)
def test_queueing_strategy_decides_whether_a_later_job_passes_one_that_does_not_fit(
    strategy, states
):
    q = _queue("solo", 2, strategy=strategy)
    work = [_work("first", "solo", 1, 0), _work("wide", "solo", 2, 1), _work("small", "solo", 1, 2)]
    by = _run([q], work)
    assert (by["first"].state, by["wide"].state, by["small"].state) == states
    assert by["wide"].reason.startswith("waits for quota: 2 nvidia.com/gpu in pool gpu-pool")


def _borrow_case(borrow_policy: dict | None) -> dict[str, Q.Workload]:
    """b-low borrows one of a's GPUs; then a-high, which must borrow too, arrives."""
    pre = {"borrowWithinCohort": borrow_policy} if borrow_policy else {}
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": "Any", **pre})
    b = _queue("b", 2, cohort="c")
    work = [
        _work("a-tiny", "a", 1, 0, priority=1000),
        _work("b-low", "b", 3, 1, priority=0),
        _work("a-high", "a", 2, 2, priority=1000),
    ]
    return _run([a, b], work)


def test_borrow_within_cohort_preempts_a_lower_priority_borrower():
    by = _borrow_case({"policy": "LowerPriority", "maxPriorityThreshold": 100})
    assert (by["a-high"].state, by["b-low"].state) == ("admitted", "pending")
    assert by["a-high"].borrowing == {Q.GPU: 1}
    assert by["b-low"].reason.startswith(
        "preempted by a-high (a borrowing job of higher priority), waits for quota"
    )


@pytest.mark.parametrize(
    "policy",
    [None, {"policy": "Never"}, {"policy": "LowerPriority", "maxPriorityThreshold": -1}],
    ids=["absent", "never", "victim-above-threshold"],
)
def test_without_borrow_within_cohort_the_borrowing_job_waits(policy):
    """reclaimWithinCohort alone does not apply: a-high needs more than its nominal quota."""
    by = _borrow_case(policy)
    assert (by["a-high"].state, by["b-low"].state) == ("pending", "admitted")
    assert by["b-low"].preempted_by is None
