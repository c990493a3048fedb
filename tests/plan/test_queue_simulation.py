"""The queue simulation's branches one by one (Kueue v0.19 semantics, docs/teams.md "How the
plan simulates the queue"), in memory: no plan is built, so each case takes milliseconds (the mutation run of
the simulation runs this file per mutant, docs/rehearsals.md "Mutation testing"). The cases
that render a whole plan are in test_check_queues.py."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from trainforge.core import taints as T
from trainforge.core.contract import PoolFacts, PoolLimits
from trainforge.core.quantity import figure
from trainforge.jobs.capacity import Gang, PodRequest
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q

F = "gpu-pool"


def _queue(name: str, gpus: int, cohort: str | None = None, **kw) -> K.ClusterQueue:
    nominal = {F: {"cpu": K.quantity("1000"), "memory": K.quantity("1Ti"), Q.GPU: K.quantity(gpus)}}
    return K.ClusterQueue(
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
    """A gang of one pod of `gpus` GPUs (`_gang` gives it others)."""
    return Q.Workload(
        job=job, team=queue, namespace=queue, order=order, queue=queue, flavor=F,
        priority=priority, need={Q.GPU: K.quantity(gpus)}, gang=_gang(1, gpus),
    )  # fmt: skip


def _gang(pods: int, gpus: int, cpu: str = "0", memory: str = "0", efa: int = 0) -> Gang:
    """`pods` pods each of `gpus` GPUs, `cpu`, `memory` and `efa` EFA devices, as Karpenter
    packs them (the launch check's capacity.Gang)."""
    return Gang((PodRequest.of(cpu, memory, gpus, efa),) * pods)


def _run(queues: list[K.ClusterQueue], work: list[Q.Workload]) -> dict[str, Q.Workload]:
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
    assert by["wide"].reason.startswith("waits for 2 GPUs in pool gpu-pool")


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
        "preempted by a-high (a borrowing job of higher priority), waits for"
    )
    # the cohort's idle GPU is b's own guarantee (a borrows the other): said whose, so the
    # text does not read as one GPU b could borrow
    assert by["b-low"].reason.endswith(
        "team b is guaranteed 2 GPUs there and uses 0 GPUs; cohort c has 1 GPU idle (team b's "
        "own unused guarantee: 1 GPU; to borrow: none)"
    ), by["b-low"].reason


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


GPU = Q.GPU


def _limit(q: K.ClusterQueue, gpus: int | None) -> K.ClusterQueue:
    q.borrow_limit[F][GPU] = None if gpus is None else K.quantity(gpus)
    return q


def test_tolerations_follow_the_kubernetes_rules():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    yes = [
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        [{"operator": "Exists"}],  # no key: tolerates every taint
        [{"key": "nvidia.com/gpu", "value": "true"}],  # operator defaults to Equal
        [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        [{"key": "other", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists"}],
    ]
    no = [
        [],
        [{"key": "nvidia.com/gpu", "value": "false"}],
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
        [{"key": "other", "operator": "Exists"}],
        [{"key": "other", "value": "true"}],
        [{"key": "nvidia.com/gpu", "operator": "Equal"}],  # Equal without value: value ""
    ]
    # the one matcher (trainforge.core.taints), which the simulation uses
    assert [T.untolerated([taint], t) is None for t in yes] == [True] * len(yes)
    assert [T.untolerated([taint], t) is None for t in no] == [False] * len(no)


def test_quantities_are_printed_in_their_unit():
    assert figure("memory", K.quantity("1536Mi")) == "1.5Gi"
    assert figure("memory", K.quantity("64Gi")) == "64Gi"
    assert figure("cpu", K.quantity("500m")) == "0.5"
    assert figure(GPU, K.quantity(8)) == "8"


def test_a_large_memory_quota_is_printed_as_the_scheduling_section_prints_it():
    """A team's ResourceQuota of 29,016Gi (prod's) was "2.902e+04Gi" in the queue's wait text."""
    assert figure("memory", K.quantity("29016Gi")) == "29,016Gi"
    assert figure("memory", K.quantity("337.9Gi")) == "337.9Gi"


def test_the_namespace_backstop_holds_a_job_its_queue_would_admit():
    q = _queue("team", 4)
    work = [_work("a", "team", 1, 0), _work("b", "team", 1, 1), _work("c", "team", 1, 2)]
    sim = Q.Simulation({"team": q}, {}, {"team": {GPU: K.quantity(2)}})
    sim.run(work)
    assert [w.state for w in work] == ["admitted", "admitted", "pending"]
    assert work[2].reason == (
        "waits for the team's total: 1 nvidia.com/gpu more, but namespace team's "
        "ResourceQuota (the team's total over all pools) holds 2 and 2 are in use"
    )
    assert sim.ns_usage == {"team": {GPU: 2}} and q.usage == {F: {GPU: 2}}


def test_a_job_its_queue_cannot_admit_waits_for_kueue_not_the_backstop():
    """The kf review: ClusterQueue research (4 GPUs, no lender) and a ResourceQuota of 4 GPUs,
    jobs of 2, 2 and 3: Kueue keeps the third pending on its own quota (what status and why
    show); a ResourceQuota queues nothing, it refuses the pods of an admitted job."""
    q = _queue("research", 4)
    work = [_work("a", "research", 2, 0), _work("b", "research", 2, 1)]
    work.append(_work("c", "research", 3, 2))
    sim = Q.Simulation({"research": q}, {}, {"research": {GPU: K.quantity(4)}})
    sim.run(work)
    assert [w.state for w in work] == ["admitted", "admitted", "pending"]
    assert work[2].reason == sim.why_waiting(work[2])
    assert work[2].reason == (
        "waits for 3 GPUs in pool gpu-pool: team research is guaranteed 4 GPUs there and uses 4 GPUs"
    )


def test_a_job_exactly_at_the_backstop_and_at_nominal_quota_is_admitted():
    q = _queue("team", 2)
    work = [_work("a", "team", 2, 0)]
    Q.Simulation({"team": q}, {}, {"team": {GPU: K.quantity(2), "cpu": K.quantity(1)}}).run(work)
    assert work[0].state == "admitted" and work[0].borrowing == {}


def test_without_a_cohort_a_queue_holds_its_nominal_quota_and_no_more():
    q = _queue("solo", 2)
    work = [_work("a", "solo", 1, 0), _work("b", "solo", 2, 1)]
    by = _run([q], work)
    assert (by["a"].state, by["b"].state) == ("admitted", "pending")
    assert by["b"].reason == (
        "waits for 2 GPUs in pool gpu-pool: team solo is guaranteed 2 GPUs there and uses 1 GPU"
    )


def test_can_ever_fit_counts_what_the_cohort_could_lend_within_the_borrowing_limit():
    def sim(limit):
        a = _limit(_queue("a", 2, cohort="c"), limit)
        return Q.Simulation({"a": a, "b": _queue("b", 4, cohort="c"), "z": _queue("z", 8)}, {})

    assert sim(None).can_ever_fit(_work("j", "a", 6, 0)) is None
    assert sim(None).can_ever_fit(_work("j", "a", 7, 0)) == (
        "needs 7 nvidia.com/gpu in pool gpu-pool, but team queue a can hold at most 6 there "
        "(nominal 2 + up to 4 borrowed from cohort c)"
    )
    assert sim(1).can_ever_fit(_work("j", "a", 3, 0)) is None
    assert sim(1).can_ever_fit(_work("j", "a", 4, 0)) == (
        "needs 4 nvidia.com/gpu in pool gpu-pool, but team queue a can hold at most 3 there "
        "(nominal 2 + up to 1 borrowed from cohort c)"
    )
    solo = Q.Simulation({"s": _queue("s", 2)}, {})
    assert solo.can_ever_fit(_work("j", "s", 2, 0)) is None
    assert solo.can_ever_fit(_work("j", "s", 3, 0)) == (
        "needs 3 nvidia.com/gpu in pool gpu-pool, but team queue s can hold at most 2 there "
        "(nominal 2, no cohort to borrow from)"
    )


def test_borrowing_is_bounded_by_the_limit_and_by_what_the_cohort_has_idle():
    a = _limit(_queue("a", 2, cohort="c"), 1)
    b = _queue("b", 2, cohort="c")
    work = [_work("a3", "a", 3, 0), _work("a1", "a", 1, 1)]
    by = _run([a, b], work)
    assert (by["a3"].state, by["a3"].borrowing) == ("admitted", {GPU: 1})
    assert by["a1"].state == "pending"
    assert by["a1"].reason == (
        "waits for 1 GPU in pool gpu-pool: team a is guaranteed 2 GPUs there and uses 3 GPUs; "
        "cohort c has 1 GPU idle, borrowing limit 1 GPU"
    )
    # the cohort's own jobs use what a could borrow
    a, b = _queue("a", 2, cohort="c"), _queue("b", 2, cohort="c")
    by = _run([a, b], [_work("b2", "b", 2, 0), _work("a3", "a", 3, 1)])
    assert (by["b2"].state, by["a3"].state) == ("admitted", "pending")
    assert by["a3"].reason == (
        "waits for 3 GPUs in pool gpu-pool: team a is guaranteed 2 GPUs there and uses 0 GPUs; "
        "cohort c has 2 GPUs idle (team a's own unused guarantee: 2 GPUs; to borrow: none)"
    )


def test_a_job_that_fits_its_nominal_quota_but_not_the_cohort_waits_for_capacity():
    a, b = _queue("a", 2, cohort="c"), _queue("b", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {})
    b4, a1 = _work("b4", "b", 4, 0), _work("a1", "a", 1, 1)
    sim.run([b4])  # b borrows all of a's quota while a has nothing queued
    assert (b4.state, b4.borrowing) == ("admitted", {GPU: 2})
    sim.run([a1])  # reclaimWithinCohort is Never by default: a1 waits
    assert a1.state == "pending"
    assert a1.reason == (
        "waits for 1 GPU in pool gpu-pool: team a is guaranteed 2 GPUs there and uses 0 GPUs; "
        "cohort c has 0 GPUs idle"
    )


def test_borrows_counts_only_the_part_above_nominal():
    a = _queue("a", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": _queue("b", 4, cohort="c")}, {})
    assert sim.borrows(_work("j", "a", 2, 0)) == {}
    assert sim.borrows(_work("j", "a", 1, 0)) == {}  # room left: nothing borrowed
    assert sim.borrows(_work("j", "a", 3, 0)) == {GPU: 1}
    sim.admit(_work("first", "a", 3, 0))
    assert sim.borrows(_work("j", "a", 2, 1)) == {GPU: 2}  # all of it above nominal now


def test_evict_gives_back_the_quota_and_says_by_whom():
    q = _queue("t", 4)
    sim = Q.Simulation({"t": q}, {})
    low, high = _work("low", "t", 2, 0), _work("high", "t", 3, 1)
    sim.admit(low)
    sim.admit(high)
    assert q.usage == {F: {GPU: 5}} and sim.ns_usage == {"t": {GPU: 5}}
    assert (low.admitted_at, high.admitted_at, sim.clock) == (0, 1, 2)
    sim.evict(low, high, "why")
    assert q.usage == {F: {GPU: 3}} and sim.ns_usage == {"t": {GPU: 3}}
    assert (low.state, low.borrowing, low.preempted_by, low.reason) == (
        "pending",
        {},
        "high",
        "preempted by high (why)",
    )


@pytest.mark.parametrize(
    ("policy", "victim_priority", "victim_order", "preempted"),
    [
        ("LowerPriority", 0, 0, True),
        ("LowerPriority", 10, 0, False),  # equal priority: not lower
        ("LowerPriority", 10, 5, False),
        ("LowerOrNewerEqualPriority", 10, 5, True),  # equal priority, newer
        ("LowerOrNewerEqualPriority", 10, 0, False),  # equal priority, older
        ("LowerOrNewerEqualPriority", 0, 0, True),
        ("LowerOrNewerEqualPriority", 20, 5, False),
        ("Never", 0, 0, False),
    ],
)
def test_preemption_within_the_teams_queue(policy, victim_priority, victim_order, preempted):
    q = _queue("t", 2, preemption={"withinClusterQueue": policy})
    victim = _work("victim", "t", 2, victim_order, priority=victim_priority)
    urgent = _work("urgent", "t", 2, 1, priority=10)
    sim = Q.Simulation({"t": q}, {})
    sim.admit(victim)
    assert sim.try_preempt(urgent, [victim]) is preempted
    assert victim.state == ("pending" if preempted else "admitted")
    if preempted:
        assert urgent.state == "admitted"
        assert victim.reason == "preempted by urgent (priority within the team's queue)"


@pytest.mark.parametrize(
    ("reclaim", "borrower_priority", "reclaimed"),
    [("Any", 100, True), ("LowerPriority", 0, True), ("LowerPriority", 10, False),
     ("LowerPriority", 20, False), ("Never", 0, False)],
)  # fmt: skip
def test_reclaiming_nominal_quota_from_a_borrower(reclaim, borrower_priority, reclaimed):
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": reclaim})
    b = _queue("b", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {})
    borrower = _work("borrower", "b", 4, 0, priority=borrower_priority)
    sim.admit(borrower)
    mine = _work("mine", "a", 2, 1, priority=10)
    assert sim.try_preempt(mine, [borrower]) is reclaimed
    if reclaimed:
        assert borrower.reason == "preempted by mine (a reclaims its nominal quota)"
        assert (a.usage[F][GPU], b.usage[F][GPU]) == (2, 0)


def test_a_queue_that_is_not_borrowing_is_not_reclaimed_from():
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": "Any"})
    b = _queue("b", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {})
    within = _work("within", "b", 2, 0)
    sim.admit(within)
    assert not sim.try_preempt(_work("mine", "a", 3, 1, priority=10), [within])
    assert within.state == "admitted"


def test_victims_are_borrowers_first_then_lowest_priority_then_newest_and_as_few_as_needed():
    a = _queue("a", 4, cohort="c", preemption={
        "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"})  # fmt: skip
    b = _queue("b", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {})
    own_low = _work("own-low", "a", 1, 0, priority=0)
    old_borrow = _work("old-borrow", "b", 2, 1, priority=50)
    new_borrow = _work("new-borrow", "b", 2, 2, priority=50)
    low_borrow = _work("low-borrow", "b", 1, 3, priority=5)
    for w in (own_low, old_borrow, new_borrow, low_borrow):
        sim.admit(w)
    assert b.use(F, GPU) == 5 and a.use(F, GPU) == 1  # b borrows 3
    urgent = _work("urgent", "a", 3, 4, priority=100)
    assert sim.try_preempt(urgent, [own_low, old_borrow, new_borrow, low_borrow])
    # 6 GPUs, 6 used: urgent needs 3. Candidates in order: low-borrow (1), new-borrow (2),
    # old-borrow, own-low. low-borrow + new-borrow free 3: enough, and both are needed.
    assert [w.job for w in (own_low, old_borrow, new_borrow, low_borrow) if w.state == "pending"] \
        == ["new-borrow", "low-borrow"]  # fmt: skip
    assert urgent.state == "admitted"


def test_the_victim_set_is_minimised_after_the_fact():
    q = _queue("t", 4, preemption={"withinClusterQueue": "LowerPriority"})
    sim = Q.Simulation({"t": q}, {})
    small = _work("small", "t", 1, 0, priority=0)
    big = _work("big", "t", 3, 1, priority=1)
    sim.admit(small)
    sim.admit(big)
    urgent = _work("urgent", "t", 3, 2, priority=10)
    assert sim.try_preempt(urgent, [small, big])
    # small (lowest priority) is tried first but big alone frees enough: small stays
    assert (small.state, big.state, urgent.state) == ("admitted", "pending", "admitted")


def test_preemption_that_cannot_free_enough_evicts_nobody():
    q = _queue("t", 2, preemption={"withinClusterQueue": "LowerPriority"})
    sim = Q.Simulation({"t": q}, {})
    low = _work("low", "t", 1, 0, priority=0)
    same = _work("same", "t", 1, 1, priority=10)
    sim.admit(low)
    sim.admit(same)
    assert not sim.try_preempt(_work("urgent", "t", 2, 2, priority=10), [low, same])
    assert (low.state, same.state, q.use(F, GPU)) == ("admitted", "admitted", 2)


def test_a_scheduling_cycle_takes_non_borrowing_jobs_first_then_priority_then_order():
    a = _queue("a", 2, cohort="c")
    b = _queue("b", 2, cohort="c")
    # b's head borrows, a's does not: a goes first although b's is older and more urgent
    by = _run([a, b], [_work("b3", "b", 3, 0, priority=5), _work("a2", "a", 2, 1)])
    assert (by["a2"].state, by["b3"].state) == ("admitted", "pending")
    # neither borrows: higher priority first, then the older job
    a, b = _queue("a", 1, cohort="c"), _queue("b", 1, cohort="c")
    by = _run([a, b], [_work("b", "b", 1, 0), _work("a", "a", 1, 1, priority=5)])
    assert by["a"].admitted_at == 0 and by["b"].admitted_at == 1
    a, b = _queue("a", 1, cohort="c"), _queue("b", 1, cohort="c")
    by = _run([a, b], [_work("b", "b", 1, 1), _work("a", "a", 1, 0)])
    assert by["a"].admitted_at == 0 and by["b"].admitted_at == 1


def test_a_queue_orders_its_own_jobs_by_priority_then_age():
    q = _queue("t", 1)
    work = [_work("old", "t", 1, 0), _work("urgent", "t", 1, 2, priority=9),
            _work("older", "t", 1, 1, priority=9)]  # fmt: skip
    by = _run([q], work)
    assert [by[j].state for j in ("older", "urgent", "old")] == ["admitted", "pending", "pending"]


def test_the_cycle_limit_is_enough_for_every_job_to_be_judged():
    q = _queue("t", 12)
    work = [_work(f"j{i}", "t", 1, i) for i in range(12)]
    by = _run([q], work)
    assert all(w.state == "admitted" for w in by.values())
    assert sorted(w.admitted_at for w in by.values()) == list(range(12))


def fresh(s: str) -> str:
    """An equal string that is another object, as names parsed from the plan's YAML are."""
    return "".join(list(s))


def test_tolerations_compare_effects_keys_and_values_by_equality():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert (
        T.untolerated(
            [taint], [{"operator": "Exists", "effect": "NoExecute"}, {"operator": "Exists"}]
        )
        is None
    )  # a toleration of another effect does not end the search
    for t in (
        {"operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "amd.com/gpu", "operator": "Exists"},
        {"key": "amd.com/gpu", "value": "true"},
    ):
        assert T.untolerated([taint], [t]) is not None, t
    f = {k: fresh(v) for k, v in taint.items()}
    assert T.untolerated([taint], [{"key": f["key"], "operator": fresh("Exists")}]) is None
    tol = {"key": f["key"], "value": f["value"], "effect": f["effect"]}
    assert T.untolerated([taint], [tol]) is None
    assert figure(fresh("memory"), K.quantity("2Gi")) == "2Gi"


def test_the_backstop_holds_the_first_job_of_a_namespace_too():
    sim = Q.Simulation({"t": _queue("t", 4)}, {}, {"t": {GPU: K.quantity(2)}})
    work = [_work("wide", "t", 3, 0)]
    sim.run(work)
    assert work[0].state == "pending" and work[0].reason == (
        "waits for the team's total: 3 nvidia.com/gpu more, but namespace t's ResourceQuota "
        "(the team's total over all pools) holds 2 and 0 are in use"
    )


def test_limits_below_what_they_allow_and_a_cohort_with_nothing_idle():
    a = _limit(_queue("a", 2, cohort="c"), 2)
    sim = Q.Simulation({"a": a, "b": _queue("b", 4, cohort="c")}, {})
    assert sim.fits(_work("j", "a", 3, 0))  # 3 < nominal 2 + limit 2
    assert sim.can_ever_fit(_work("j", "a", 3, 0)) is None  # below the most it could hold
    a, b = _queue("a", 2, cohort="c"), _queue("b", 2, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {})
    sim.run([_work("b4", "b", 4, 0)])
    a3 = _work("a3", "a", 3, 1)
    sim.run([a3])
    assert a3.reason == (
        "waits for 3 GPUs in pool gpu-pool: team a is guaranteed 2 GPUs there and uses 0 GPUs; "
        "cohort c has 0 GPUs idle"
    )


def test_why_waiting_names_the_resource_over_quota_after_one_that_fits():
    q = _queue("t", 2)
    w = _work("w", "t", 3, 0)
    w.need = {"cpu": K.quantity(1000), GPU: K.quantity(3)}  # cpu exactly at its nominal quota
    _run([q], [w])
    assert (
        w.reason
        == "waits for 3 GPUs in pool gpu-pool: team t is guaranteed 2 GPUs there and uses 0 GPUs"
    )


def test_reclaim_for_a_job_within_its_nominal_quota():
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": "Any"})
    sim = Q.Simulation({"a": a, "b": _queue("b", 2, cohort="c")}, {})
    borrower = _work("borrower", "b", 4, 0)
    sim.admit(borrower)
    assert sim.try_preempt(_work("mine", "a", 1, 1), [borrower])
    assert borrower.state == "pending"


def test_only_borrowing_queues_are_reclaimed_from_and_only_in_the_same_flavor():
    def cohort():
        m = _queue("m", 2, cohort="c", preemption={"reclaimWithinCohort": "Any"})
        b, c = _queue("b", 2, cohort="c"), _queue("c", 2, cohort="c")
        return Q.Simulation({"m": m, "b": b, "c": c}, {})

    sim = cohort()
    b_job = _work("b-job", "b", 3, 0, priority=50)  # borrows one
    c_job = _work("c-job", "c", 2, 1, priority=0)  # within its nominal quota
    sim.admit(b_job)
    sim.admit(c_job)
    assert sim.try_preempt(_work("mine", "m", 2, 2, priority=10), [c_job, b_job])
    assert (b_job.state, c_job.state) == ("pending", "admitted")
    for other in ("a-pool", "z-pool"):  # sorts before and after gpu-pool
        sim = cohort()
        elsewhere = _work("elsewhere", "b", 3, 0)
        elsewhere.flavor = other
        for q in sim.queues.values():
            q.nominal[other] = dict(q.nominal[F])
        sim.admit(elsewhere)
        sim.admit(_work("c-full", "c", 2, 1, priority=99))
        b_full = _work("b-full", "b", 3, 2, priority=99)  # b borrows in gpu-pool too
        sim.admit(b_full)
        admitted = [elsewhere, b_full]
        assert sim.try_preempt(_work("mine", "m", 2, 3, priority=10), admitted)
        assert (elsewhere.state, b_full.state) == ("admitted", "pending"), other


@pytest.mark.parametrize(
    ("victim_priority", "threshold", "preempted"),
    [(0, None, True), (5, 5, True), (6, 5, False), (1000, None, False), (2000, None, False)],
)
def test_borrow_within_cohort_priority_and_threshold(victim_priority, threshold, preempted):
    policy = {"policy": "LowerPriority"}
    if threshold is not None:
        policy["maxPriorityThreshold"] = threshold
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": "Any",
                                                "borrowWithinCohort": policy})  # fmt: skip
    sim = Q.Simulation({"a": a, "b": _queue("b", 2, cohort="c")}, {})
    tiny, low = _work("a-tiny", "a", 1, 0), _work("b-low", "b", 3, 1, priority=victim_priority)
    sim.admit(tiny)
    sim.admit(low)
    assert sim.try_preempt(_work("a-high", "a", 2, 2, priority=1000), [tiny, low]) is preempted


def test_priorities_are_compared_by_value_and_ordered_by_size():
    q = _queue("t", 1)
    work = [_work("p5", "t", 1, 0, priority=5), _work("p9", "t", 1, 1, priority=9)]
    by = _run([q], work)
    assert (by["p9"].state, by["p5"].state) == ("admitted", "pending")
    a, b = _queue("a", 1, cohort="c"), _queue("b", 1, cohort="c")
    by = _run([a, b], [_work("b", "b", 1, 0, priority=5), _work("a", "a", 1, 1, priority=9)])
    assert by["a"].admitted_at == 0 and by["b"].admitted_at == 1
    # large priorities (not small cached ints), equal by value: newer equal is preempted
    q = _queue("t", 2, preemption={"withinClusterQueue": fresh("LowerOrNewerEqualPriority")})
    sim = Q.Simulation({"t": q}, {})
    victim = _work("victim", "t", 2, 5, priority=int("1000"))
    sim.admit(victim)
    assert sim.try_preempt(_work("urgent", "t", 2, 1, priority=int("1000")), [victim])


def test_names_from_parsed_objects_compare_by_value():
    """Queue, cohort, flavor and policy names built at run time, as the plan reads them."""
    a = _queue(fresh("a"), 2, cohort=fresh("c1"), strategy=fresh("StrictFIFO"),
               preemption={fresh("reclaimWithinCohort"): fresh("Any"),
                           "withinClusterQueue": fresh("LowerPriority")})  # fmt: skip
    b = _queue(fresh("b"), 2, cohort=fresh("c1"))
    sim = Q.Simulation({"a": a, "b": b}, {})
    borrower = _work("borrower", fresh("b"), 4, 0)
    borrower.flavor = fresh(F)
    sim.admit(borrower)
    mine = _work("mine", fresh("a"), 2, 1, priority=10)
    assert sim.try_preempt(mine, [borrower])
    assert borrower.reason == "preempted by mine (a reclaims its nominal quota)"
    # within the queue: a lower-priority job of the same queue (named anew) is preempted
    alpha = _queue(fresh("alpha"), 2, preemption={"withinClusterQueue": fresh("LowerPriority")})
    sim = Q.Simulation({"alpha": alpha}, {})
    own = _work("own", fresh("alpha"), 2, 0)
    sim.admit(own)
    hi = _work("hi", "alpha", 2, 1, priority=10)
    assert sim.try_preempt(hi, [own]) and own.state == "pending"
    # StrictFIFO by value: the head blocks the queue
    q = _queue(fresh("s"), 2, strategy=fresh("StrictFIFO"))
    work = [_work("first", "s", 1, 0), _work("wide", fresh("s"), 2, 1), _work("small", "s", 1, 2)]
    by = _run([q], work)
    assert (by["first"].state, by["wide"].state, by["small"].state) == (
        "admitted", "pending", "pending"
    )  # fmt: skip
    # borrowWithinCohort's policy by value
    pol = {fresh("policy"): fresh("LowerPriority")}
    c = _queue("a", 2, cohort="c", preemption={"borrowWithinCohort": pol})
    sim = Q.Simulation({"a": c, "b": _queue("b", 2, cohort="c")}, {})
    tiny, low = _work("a-tiny", "a", 1, 0), _work("b-low", "b", 3, 1)
    sim.admit(tiny)
    sim.admit(low)
    assert sim.try_preempt(_work("a-high", "a", 2, 2, priority=1000), [tiny, low])


def test_a_job_that_can_never_be_admitted_is_not_simulated():
    never = _work("never", "t", 1, 0)
    never.state, never.reason = "never", "can never be admitted: too big"
    by = _run([_queue("t", 2)], [never, _work("ok", "t", 1, 1)])
    assert (by["never"].state, by["never"].reason) == ("never", "can never be admitted: too big")
    assert by["ok"].state == "admitted"


def test_reclaim_lower_priority_by_value():
    a = _queue("a", 2, cohort="c", preemption={"reclaimWithinCohort": fresh("LowerPriority")})
    sim = Q.Simulation({"a": a, "b": _queue("b", 2, cohort="c")}, {})
    borrower = _work("borrower", "b", 4, 0)
    sim.admit(borrower)
    assert sim.try_preempt(_work("mine", "a", 2, 1, priority=10), [borrower])


def test_a_job_set_aside_gets_another_try_once_a_preemption_frees_more_than_it_takes():
    """a-late reclaims a's quota from b-hog (3 GPUs) but takes 2: the GPU left over is what
    x-small, set aside in the first cycle when the cohort was full, needs."""
    a = _queue("a", 4, cohort="c", preemption={"reclaimWithinCohort": "Any"})
    b = _queue("b", 0, cohort="c")
    x = _queue("x", 0, cohort="c")
    work = [
        _work("a-first", "a", 1, 0),
        _work("b-hog", "b", 3, 1),
        _work("x-small", "x", 1, 2),
        _work("a-late", "a", 2, 3),
    ]
    by = _run([a, b, x], work)
    states = {j: w.state for j, w in by.items()}
    assert states == {
        "a-first": "admitted", "b-hog": "pending", "x-small": "admitted", "a-late": "admitted",
    }  # fmt: skip
    assert by["x-small"].borrowing == {Q.GPU: 1}
    assert by["b-hog"].reason.startswith(
        "preempted by a-late (a reclaims its nominal quota), waits for"
    )


def test_a_pending_job_is_never_a_preemption_victim():
    """mid may preempt lower priorities, and low is lower but pending: it holds nothing, so
    taking it as a victim would admit mid into quota that top still holds."""
    t = _queue("t", 2, preemption={"withinClusterQueue": "LowerPriority"})
    work = [
        _work("top", "t", 2, 0, priority=100),
        _work("mid", "t", 1, 1, priority=50),
        _work("low", "t", 1, 2, priority=0),
    ]
    by = _run([t], work)
    assert [by[j].state for j in ("top", "mid", "low")] == ["admitted", "pending", "pending"]
    assert t.usage[F][Q.GPU] == 2
    for j in ("mid", "low"):
        assert by[j].reason.startswith("waits for 1 GPU in pool gpu-pool")
        assert by[j].preempted_by is None


def test_over_time_a_waiting_job_starts_when_the_job_ahead_ends():
    q = _queue("t", 2)
    first, second = _work("first", "t", 2, 0), _work("second", "t", 2, 1)
    first.duration, second.duration = 8.6 * 3600, 3600.0
    sim = Q.Simulation({"t": q}, {})
    sim.run_timed([first, second])
    assert (first.at_once, second.at_once) == ("admitted", "pending")
    assert second.started == first.duration and second.ends == first.duration + 3600
    assert Q._waiting_text(second).endswith("; expected to start after 8.6 h")
    # after a job of unknown duration, the start is unknown, and said so
    q = _queue("t", 2)
    first, second = _work("first", "t", 2, 0), _work("second", "t", 2, 1)
    Q.Simulation({"t": q}, {}).run_timed([first, second])
    assert second.started is None and "expected start unknown" in Q._waiting_text(second)


@pytest.mark.parametrize("ceiling", ["first", "middle", None])
def test_a_start_behind_a_ceiling_is_an_upper_bound_and_so_is_what_follows_it(ceiling):
    """A run timed by its deadline may end sooner: the job behind it starts within its time,
    and so does one behind that (its end is an upper bound too, though the first ended before
    it arrived); estimates alone: after."""
    q = _queue("t", 2)
    work = [_work(j, "t", 2, i) for i, j in enumerate(("first", "middle", "last"))]
    for w in work:
        w.duration, w.ceiling = 3600.0, w.job == ceiling
    work[2].submitted = 5400.0  # after first ends, while middle runs
    Q.Simulation({"t": q}, {}).run_timed(work)
    first, middle, last = work
    assert (middle.started, last.started) == (3600.0, 7200.0)
    assert first.start_bound is False
    assert middle.start_bound is (ceiling == "first")
    assert last.start_bound is (ceiling is not None)
    said = "within" if ceiling else "after"
    assert Q._waiting_text(last).endswith(f"; expected to start {said} 30 min")


@pytest.mark.parametrize(("ceiling", "said"), [("short", "after"), ("long", "within")])
def test_only_the_end_that_lets_a_job_in_decides_within_or_after(ceiling, said):
    """The job waits for both GPUs: if the short run, timed by its deadline, ends sooner, it
    still waits for the long one's estimated end (after); a ceiling there: within."""
    q = _queue("t", 2)
    work = [_work("short", "t", 1, 0), _work("long", "t", 1, 1), _work("both", "t", 2, 2)]
    for w, hours in zip(work, (1, 2, 1), strict=True):
        w.duration, w.ceiling = hours * 3600.0, w.job == ceiling
    Q.Simulation({"t": q}, {}).run_timed(work)
    assert work[2].started == 7200.0
    assert Q._waiting_text(work[2]).endswith(f"; expected to start {said} 2.0 h")


def _pool(gpus: int, max_nodes: int | None = None) -> PoolFacts:
    """Pool F of 8-GPU nodes holding `gpus` GPUs in all (a node group: at most `max_nodes`)."""
    return PoolFacts(F, gpus_per_node=8, max_nodes=max_nodes, limits=PoolLimits(gpus=gpus))


def test_a_gang_its_pool_cannot_launch_is_caught():
    """Guarantees that add up to more than the pool holds: both queues admit within their
    nominal quota, and the pool (8 GPUs) cannot launch the second gang."""
    a, b = _queue("a", 8, cohort="c"), _queue("b", 8, cohort="c")
    sim = Q.Simulation({"a": a, "b": b}, {}, pools=[_pool(8)])
    sim.run_timed([_work("a8", "a", 8, 0), _work("b4", "b", 4, 1)])
    assert sim.unlaunchable == ["b4: 12 GPUs admitted in pool gpu-pool, which holds 8"]
    # a node group: pods packed onto at most max_nodes nodes
    a = _queue("a", 16)
    sim = Q.Simulation({"a": a}, {}, pools=[_pool(16, max_nodes=2)])
    three = _work("three", "a", 12, 0)
    three.pods, three.gang = 2, _gang(2, 6)  # 2 pods of 6 GPUs: one node each, 2 GPUs left on each
    four = _work("four", "a", 4, 1)
    four.pods, four.gang = 1, _gang(1, 4)  # 4 GPUs on one pod: no node has 4 left
    sim.run_timed([three, four])
    assert sim.unlaunchable == [
        "four: its pods need 3 nodes of 8 GPUs in pool gpu-pool, which has at most 2"
    ]


def _selected_docs() -> list[dict]:
    """A ClusterQueue only namespace team-a may use, and a LocalQueue `default` for it in
    team-a and in team-b."""
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "a"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
                }
            ],
        },
    }
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "f"}, "spec": {}}  # fmt: skip
    local = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "default", "namespace": ns}, "spec": {"clusterQueue": "a"}}
        for ns in ("team-a", "team-b")
    ]  # fmt: skip
    return [cq, flavor, *local]


def test_admit_object_keeps_to_the_cluster_queues_namespace_selector():
    """Kueue admits a workload only from a namespace its ClusterQueue's namespaceSelector
    selects, whatever LocalQueue points at the ClusterQueue."""
    need = {"cpu": K.quantity(1)}
    ok = Q.admit_object(_selected_docs(), "team-a", {}, {"containers": []}, need)
    assert (ok.workload.state, ok.workload.flavor) == ("admitted", "f"), ok.workload.reason
    got = Q.admit_object(_selected_docs(), "team-b", {}, {"containers": []}, need)
    assert got.workload.state == "never"
    assert got.workload.reason == "ClusterQueue a does not admit namespace team-b"


def test_admit_object_never_admits_a_job_naming_an_unknown_priority_class():
    """Kueue creates no Workload for a job whose priority-class label names no
    WorkloadPriorityClass: it stays suspended, as the simulation says of a declared job."""
    labels = {"kueue.x-k8s.io/priority-class": "urgent"}
    got = Q.admit_object(
        _selected_docs(), "team-a", labels, {"containers": []}, {"cpu": K.quantity(1)}
    )
    assert (got.workload.state, got.workload.reason) == (
        "never",
        "no WorkloadPriorityClass 'urgent'",
    )


def test_a_gang_karpenters_packing_cannot_launch_within_the_limits_is_caught():
    """2 pods of 4 GPUs and 100 CPU on [g5.12xlarge (48 vCPU), g5.48xlarge (192)] with a
    12-GPU limit: 8 GPUs in all is within the limit, but only a g5.48xlarge holds a pod, it
    holds one, and after the first (counted at 8 GPUs) the limit leaves 4: no type of 4 GPUs or
    less holds the second pod (trainforge.jobs.packing; scheduler.go addToNewNodeClaim,
    filterByRemainingResources). The GPU sum alone said it launches."""
    from trainforge.jobs.node_facts import node_shape

    def pool(gpus: int) -> PoolFacts:
        shapes = (node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),
                  node_shape("g5.48xlarge", 192, 786432, eni_pods=345, gpus=8))  # fmt: skip
        return PoolFacts(F, gpus_per_node=4, nodes=shapes, limits=PoolLimits(gpus=gpus))

    def gang() -> Q.Workload:
        w = _work("wide", "a", 8, 0)
        w.pods, w.need = 2, {**w.need, "cpu": K.quantity("200"), "memory": K.quantity("64Gi")}
        w.gang = _gang(2, 4, "100", "32Gi")
        return w

    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool(12)])
    sim.run_timed([gang()])
    assert sim.unlaunchable == [
        "wide: Karpenter places 1 NodeClaim(s) of its 2 pod(s) in pool gpu-pool and leaves 1 "
        "without a node: all available instance types exceed limits for nodepool (limit 12 "
        "GPUs, 0 held by the nodes of the gangs running there)"
    ]
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool(16)])
    sim.run_timed([gang()])
    assert sim.unlaunchable == []


def test_a_gang_on_a_pool_of_several_types_is_judged_by_karpenters_launch_alone():
    """[g5.12xlarge (4 GPUs), g5.48xlarge (8)] with limits.gpus 12: the pool is sure of 8 GPUs
    (`pool_capacity`: one g5.48xlarge, the type that holds the least), but 3 pods of 4 GPUs
    launch: the first two share a NodeClaim a g5.48xlarge holds (counted at 8), the third
    gets a g5.12xlarge within the 4 left (scheduler.go addToNewNodeClaim,
    filterByRemainingResources). The GPU sum against the capacity said '12 GPUs admitted in
    pool gpu-pool, which holds 8' while the replay launched it; the replay is the answer, and
    a fourth pod is over it."""
    from trainforge.jobs.node_facts import node_shape

    shapes = (node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),
              node_shape("g5.48xlarge", 192, 786432, eni_pods=345, gpus=8))  # fmt: skip
    pool = PoolFacts(F, gpus_per_node=4, nodes=shapes, limits=PoolLimits(gpus=12))
    assert Q.pool_capacity(pool, Q.GPU) == 8

    def gang(pods: int) -> Q.Workload:
        w = _work("wide", "a", 4 * pods, 0)
        w.pods = pods
        w.need = {**w.need, "cpu": K.quantity(str(30 * pods)), "memory": K.quantity("64Gi")}
        w.gang = _gang(pods, 4, "30", "16Gi")
        return w

    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([gang(3)])
    assert sim.unlaunchable == []
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([gang(4)])
    assert (
        len(sim.unlaunchable) == 1
        and "Karpenter places 2 NodeClaim(s) of its 4 pod(s)" in (sim.unlaunchable[0])
    )


def test_a_gangs_efa_devices_count_in_the_launch_check_as_in_the_scheduling_rehearsal():
    """4 one-GPU pods asking EFA on g5.12xlarge nodes (4 GPUs, 1 EFA interface): each pod
    asks 1 EFA device (contract.efa_count: at least one), so a node holds one pod and the
    gang needs 4 NodeClaims of 4 GPUs each, over the pool's 8-GPU limit. The launch check
    counted 0 EFA devices per pod, packed the 4 pods on one node and called the gang
    launchable while the scheduling rehearsal said it cannot run."""
    from trainforge.jobs import capacity
    from trainforge.jobs.node_facts import node_shape
    from trainforge.jobs.spec import parse_job

    shape = node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4, efa=1)
    pool = PoolFacts(F, instance_types=("g5.12xlarge",), gpus_per_node=4, efa_interfaces=1,
                     nodes=(shape,), limits=PoolLimits(gpus=8))  # fmt: skip
    spec = parse_job({"name": "wide", "team": "a", "pool": F, "gpusPerWorker": 1,
                      "cpu": "4", "memory": "16Gi", "workers": 4, "efa": True}, "job")  # fmt: skip
    request = capacity.job_request(spec, pool)
    assert request.efa == 1
    assert capacity.rehearse(request, 4, pool).problems  # the scheduling rehearsal: cannot run

    def gang(efa: int) -> Q.Workload:
        w = _work("wide", "a", 4, 0)
        w.pods, w.gang = 4, _gang(4, 1, "4", "16Gi", efa)
        w.need = {**w.need, "cpu": K.quantity("16"), "memory": K.quantity("64Gi")}
        return w

    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([gang(request.efa)])
    assert sim.unlaunchable == [
        "wide: Karpenter places 2 NodeClaim(s) of its 4 pod(s) in pool gpu-pool and leaves 2 "
        "without a node: all available instance types exceed limits for nodepool (limit 8 "
        "GPUs, 0 held by the nodes of the gangs running there)"
    ]
    # without EFA the four pods share one node: launchable, as the rehearsal says too
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([gang(0)])
    assert sim.unlaunchable == []
    assert not capacity.rehearse(replace(request, efa=0), 4, pool).problems


def test_the_launch_check_holds_the_type_the_cost_table_prices_on_a_pool_with_an_unpriced_type():
    """One rule for which type a NodeClaim launches (packing.launch), read by the cost table
    and the queue's launch check alike. In us-west-2 the price table has g5.12xlarge
    ($5.672/h) and no p5e.48xlarge: a 4-GPU pod that either holds launches the priced one
    in the cost table (Karpenter orders by price and prices p5e.48xlarge too, at a figure the
    plan does not know: it is named as possibly cheaper). The launch check took the largest
    instead whenever a candidate was unpriced, so it held an 8-GPU p5e.48xlarge for gang a
    against the pool's 12-GPU limit and called gang b (one 8-GPU pod, only a p5e.48xlarge
    holds it) unlaunchable while the cost table had a on a 4-GPU node."""
    from trainforge.jobs.node_facts import node_shape
    from trainforge.jobs.spec import parse_job
    from trainforge.plan import cost

    region = "us-west-2"
    shapes = (node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),
              node_shape("p5e.48xlarge", 192, 2097152, eni_pods=737, gpus=8))  # fmt: skip
    pool = PoolFacts(F, instance_types=("g5.12xlarge", "p5e.48xlarge"), gpus_per_node=4,
                     nodes=shapes, limits=PoolLimits(gpus=12))  # fmt: skip
    price = cost.launch_prices(region)
    assert (price("g5.12xlarge"), price("p5e.48xlarge")) == (5.672, None)
    spec = parse_job({"name": "a", "team": "a", "pool": F, "gpusPerWorker": 4, "cpu": "40",
                      "memory": "160Gi", "workers": 1}, "job")  # fmt: skip
    priced = cost.choose_nodes(spec, pool, region)
    assert priced.nodes_words() == "g5.12xlarge x1"
    assert priced.reason.endswith("; unknown price: p5e.48xlarge (could be cheaper)")

    def gang(job: str, gpus: int, order: int) -> Q.Workload:
        w = _work(job, "a", gpus, order)
        w.need = {**w.need, "cpu": K.quantity("40"), "memory": K.quantity("160Gi")}
        w.gang = _gang(1, gpus, "40", "160Gi")
        return w

    sim = Q.Simulation({"a": _queue("a", 32)}, {}, pools=[pool], price=price)
    sim.run_timed([gang("a", 4, 0), gang("b", 8, 1)])
    assert [(n.instance_type, g) for n, g in sim._nodes["a"]] == [("g5.12xlarge", 4)]
    assert sim.unlaunchable == []
    # without prices the first listed candidate stands in, in every reader alike
    sim = Q.Simulation({"a": _queue("a", 32)}, {}, pools=[pool])
    sim.run_timed([gang("a", 4, 0), gang("b", 8, 1)])
    assert [n.instance_type for n, _ in sim._nodes["a"]] == ["g5.12xlarge"]
    unpriced = cost.choose_nodes(spec, pool, "sa-east-1")  # no EC2 prices there
    assert unpriced.nodes_words() == "g5.12xlarge x1"
    assert "so which one is unknown (first listed shown: g5.12xlarge x1)" in unpriced.reason


def test_the_launch_check_holds_a_running_gang_on_a_type_its_pools_limits_allow():
    """In us-east-1 a g4dn.metal (8 T4, $7.824/h) is cheaper than a g6e.12xlarge (4 L40S,
    $10.49264/h). With a 6-GPU limit Karpenter may not start the g4dn.metal
    (scheduler.go filterByRemainingResources), so gang a's 4-GPU pod launches a g6e.12xlarge,
    as the cost table prices it; then 2 GPUs are left and gang b's 2-GPU pod fits no type:
    it cannot launch. The launch check packed a running gang without the pool's limits, held a
    g4dn.metal for a, found room for b on its spare GPUs and reported nothing."""
    from trainforge.jobs.node_facts import node_shape
    from trainforge.jobs.spec import parse_job
    from trainforge.plan import cost

    shapes = (node_shape("g6e.12xlarge", 48, 393216, eni_pods=234, gpus=4),
              node_shape("g4dn.metal", 96, 393216, eni_pods=737, gpus=8))  # fmt: skip
    pool = PoolFacts(F, instance_types=("g6e.12xlarge", "g4dn.metal"), gpus_per_node=4,
                     nodes=shapes, limits=PoolLimits(gpus=6))  # fmt: skip
    spec = parse_job({"name": "a", "team": "a", "pool": F, "gpusPerWorker": 4, "cpu": "40",
                      "memory": "160Gi", "workers": 1}, "job")  # fmt: skip
    assert cost.choose_nodes(spec, pool, "us-east-1").nodes_words() == "g6e.12xlarge x1"

    def gang(job: str, gpus: int, order: int) -> Q.Workload:
        w = _work(job, "a", gpus, order)
        w.need = {**w.need, "cpu": K.quantity(10 * gpus), "memory": K.quantity(f"{40 * gpus}Gi")}
        w.gang = _gang(1, gpus, str(10 * gpus), f"{40 * gpus}Gi")
        return w

    sim = Q.Simulation({"a": _queue("a", 32)}, {}, pools=[pool],
                       price=cost.launch_prices("us-east-1"))  # fmt: skip
    sim.run_timed([gang("a", 4, 0), gang("b", 2, 1)])
    assert [n.instance_type for n, _ in sim._nodes["a"]] == ["g6e.12xlarge"]
    assert sim.unlaunchable == [
        "b: Karpenter places 0 NodeClaim(s) of its 1 pod(s) in pool gpu-pool and leaves 1 "
        "without a node: all available instance types exceed limits for nodepool (limit 6 "
        "GPUs, 4 held by the nodes of the gangs running there)"
    ]


def test_a_node_groups_launch_check_counts_each_pods_efa_devices_too():
    """The node-group branch of the launch check: 4 one-GPU EFA pods on nodes of 4 GPUs and
    1 EFA interface need a node each (4 > maxSize 2); by GPUs alone they shared one."""
    group = PoolFacts(F, gpus_per_node=4, efa_interfaces=1, max_nodes=2, kind="node-group")

    def gang(efa: int) -> Q.Workload:
        w = _work("wide", "a", 4, 0)
        w.pods, w.gang = 4, _gang(4, 1, efa=efa)
        return w

    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[group])
    sim.run_timed([gang(1)])
    assert sim.unlaunchable == [
        "wide: its pods need 4 nodes of 4 GPUs and 1 EFA devices in pool gpu-pool, which has "
        "at most 2"
    ]
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[group])
    sim.run_timed([gang(0)])
    assert sim.unlaunchable == []


def test_a_master_unlike_its_workers_is_launched_as_the_cost_table_packs_it():
    """A PyTorchJob whose Master asks 1 GPU (a limit only) and 90 CPU and whose 3 Workers ask
    4 GPUs and 8 CPU each, on p4d.24xlarge (8 GPUs, 95.69 CPU left for pods) with a 16-GPU
    limit: the Master shares a node with no Worker (98 CPU), the Workers take 2 more nodes,
    and the third NodeClaim would pass the limit (24 GPUs counted). The launch check split
    the gang's 13 GPUs and 114 CPU evenly (4 pods of 3 GPUs, 28.5 CPU: 2 per node, 16 GPUs)
    and called it launchable while the cost table, packing the pods themselves, left one
    without a node. Both now pack the object's pods (capacity.gang) and agree."""
    from trainforge.jobs import capacity
    from trainforge.jobs.backends import pod_templates
    from trainforge.jobs.node_facts import node_shape
    from trainforge.jobs.spec import parse_job
    from trainforge.plan import cost

    def replica(n: int, resources: dict) -> dict:
        pod = {"containers": [{"name": "pytorch", "image": "x", "resources": resources}]}
        return {"replicas": n, "template": {"spec": pod}}

    master = {"limits": {"nvidia.com/gpu": 1, "cpu": "90", "memory": "64Gi"}}
    worker = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": 4}}
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "het", "namespace": "a"},
           "spec": {"pytorchReplicaSpecs": {"Master": replica(1, master),
                                            "Worker": replica(3, worker)}}}  # fmt: skip
    templates = pod_templates(doc)
    g = capacity.gang(templates)
    assert [(p.gpus, p.cpu_m) for p in g.pods] == [(1, 90000), (4, 8000), (4, 8000), (4, 8000)]
    shape = node_shape("p4d.24xlarge", 96, 1179648, eni_pods=737, gpus=8)
    pool = PoolFacts(F, instance_types=("p4d.24xlarge",), gpus_per_node=8, nodes=(shape,),
                     limits=PoolLimits(gpus=16))  # fmt: skip
    # Kueue's count of the same templates: 13 GPUs, 114 CPU in all
    need: dict = {}
    for t in templates:
        for r, v in K.pod_requests(t.spec).items():
            need[r] = need.get(r, 0) + v * t.replicas
    assert (need[Q.GPU], need["cpu"]) == (13, 114)
    w = _work("het", "a", 13, 0)
    w.pods, w.need, w.gang = 4, {r: v for r, v in need.items() if r in Q.RESOURCES}, g
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([w])
    assert sim.unlaunchable == [
        "het: Karpenter places 2 NodeClaim(s) of its 4 pod(s) in pool gpu-pool and leaves 1 "
        "without a node: all available instance types exceed limits for nodepool (limit 16 "
        "GPUs, 0 held by the nodes of the gangs running there)"
    ]
    spec = parse_job({"name": "het", "team": "a", "pool": F, "gpusPerWorker": 4, "cpu": "8",
                      "memory": "64Gi", "workers": 4}, "job")  # fmt: skip
    c = cost.job_cost(spec, pool, "us-east-1", "a/PyTorchJob/het", gang=g)
    assert c.choice.reason.startswith(
        "Karpenter packs 1 pod(s) of 1 GPU, 90 CPU, 64Gi + 3 pod(s) of 4 GPU, 8 CPU, 64Gi into "
        "1 NodeClaim(s) of 1 pod(s) on p4d.24xlarge; 1 NodeClaim(s) of 2 pod(s) on p4d.24xlarge"
    )
    assert c.choice.nodes_words() == "p4d.24xlarge x2"
    assert (
        "; 1 pod(s) get no node: their nodes have nvidia.com/gpu 24 of capacity" in c.choice.reason
    )


def test_the_launch_check_reads_the_pools_types_as_the_cost_does():
    """A pool whose contract has a node shape for g5.12xlarge only and lists g5.48xlarge as a
    type (a hand-built contract): the cost packs on both (`capacity.launch`, which sizes a
    type without a shape by `packing_pool`), so a pod of 4 GPUs and 100 CPU launches a
    g5.48xlarge. The launch check packed on the shapes alone and called the gang
    unlaunchable while the cost table priced its node."""
    from trainforge.core.contract import NodeType
    from trainforge.jobs import capacity
    from trainforge.jobs.node_facts import node_shape

    pool = PoolFacts(
        F, instance_types=("g5.12xlarge", "g5.48xlarge"), gpus_per_node=4,
        nodes=(node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),),
        node_types=(NodeType("g5.12xlarge", 48, 196608, 4), NodeType("g5.48xlarge", 192, 786432, 8)),
        limits=PoolLimits(gpus=16),
    )  # fmt: skip
    w = _work("wide", "a", 4, 0)
    w.need = {**w.need, "cpu": K.quantity("100"), "memory": K.quantity("32Gi")}
    w.gang = _gang(1, 4, "100", "32Gi")
    pk = capacity.launch(pool, w.gang)
    assert not pk.unplaced and pk.claims[0].candidates == ("g5.48xlarge",)
    sim = Q.Simulation({"a": _queue("a", 16)}, {}, pools=[pool])
    sim.run_timed([w])
    assert sim.unlaunchable == []


def _cpu_and_gpu_pools() -> list[dict]:
    """ClusterQueue t (LocalQueue default in namespace t): flavor cpu-pool (8 cpu, no GPU)
    first, then gpu-pool (8 cpu, 4 GPUs)."""
    api = "kueue.x-k8s.io/v1beta2"

    def flavor(name: str) -> dict:
        return {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": name}}

    quota = [
        {"name": f, "resources": [{"name": r, "nominalQuota": q} for r, q in res.items()]}
        for f, res in (
            ("cpu-pool", {"cpu": "8", Q.GPU: "0"}),
            ("gpu-pool", {"cpu": "8", Q.GPU: "4"}),
        )
    ]
    return [
        flavor("cpu-pool"), flavor("gpu-pool"),
        {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "t"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu", Q.GPU], "flavors": quota}]}},
        {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": "t"},
         "spec": {"clusterQueue": "t"}},
    ]  # fmt: skip


INIT = K.PodSet("dataset-initializer", 1, {"cpu": Fraction(1)})
NODE = K.PodSet("node", 1, {"cpu": Fraction(1), Q.GPU: Fraction(1)})


def test_a_fleet_worker_runs_a_trainjob_on_its_trainers_flavor_not_its_initializers():
    """A TrainJob's initializer pod set comes before `node` and may take another flavor (a
    CPU pool): the worker runs (and the fleet prices) the job on the trainer's flavor."""
    wl = Q.ObjectWorkload("default", "", 1, NODE.total(), [INIT, NODE], NODE, [INIT, NODE])
    assert Q._worker_flavor(K.read(_cpu_and_gpu_pools()), "t", wl) == ("gpu-pool", "")


@pytest.mark.parametrize(
    ("init", "state", "said"),
    [
        (INIT, "admitted", ""),  # on cpu-pool, the trainer on gpu-pool
        (replace(INIT, requests={"cpu": Fraction(9)}), "never",
         "couldn't assign flavors to pod set dataset-initializer: insufficient quota for cpu in "
         "flavor cpu-pool, previously considered podsets requests (0) + current podset request "
         "(9) > maximum capacity (8)"),
    ],
)  # fmt: skip
def test_an_undeclared_trainjobs_initializer_takes_a_flavor_too(init, state, said):
    """`admit_object` (an SDK or hand-written TrainJob) assigns every pod set as Kueue does:
    one no flavor can hold leaves it pending for good; one on another flavor than the
    trainer's is fine, the trainer's flavor is the job's."""
    got = Q.admit_object(
        _cpu_and_gpu_pools(), "t", {}, {}, NODE.requests, 1, [init, NODE], "node"
    ).workload
    assert got.state == state and said in got.reason, got.reason
    assert got.flavor == ("gpu-pool" if state == "admitted" else None)


@pytest.mark.parametrize(("init_gpus", "words"), [(1, "within"), (2, "after")])
def test_an_initializers_quota_is_held_from_admission_and_given_back_before_the_job_ends(
    init_gpus, words
):
    """A TrainJob's initializer pod set is charged from admission (Kueue admits the Workload
    with every pod set) and reclaimed when its replicatedJob succeeds (kueue v0.19.2 8eab687
    pkg/controller/jobs/trainjob `ReclaimablePods`), a time the plan does not know: held to
    the job's end, and a start only its release lets in is said "within", one that needs the
    trainer's quota too "after". 5 GPUs; each job's trainer 2, its initializer 1
    (2 + 2 + 1 <= 5) or 2 (2 + 2 + 2 > 5)."""
    q = _queue("t", 5)
    first, second = _work("first", "t", 2, 0), _work("second", "t", 2, 1)
    for w in (first, second):
        w.init_need = {F: {Q.GPU: K.quantity(init_gpus)}}
        w.duration = 7200.0
    sim = Q.Simulation({"t": q}, {})
    sim.run_timed([first, second])
    assert (first.at_once, second.at_once) == ("admitted", "pending")
    assert second.reason_at_once.startswith(f"waits for {2 + init_gpus} GPUs in pool gpu-pool")
    assert second.started == 7200.0
    assert Q._waiting_text(second).endswith(f"; expected to start {words} 2.0 h")
    assert q.usage[F][Q.GPU] == 0  # every pod set's quota given back at the end


def test_a_waiting_jobs_start_by_preempting_adds_the_preempted_pods_grace():
    """h (priority 10, 2 GPUs) waits behind a and b (priority 10, 1 GPU each); l (priority 0)
    takes a's GPU when a ends at 1 h; at 2 h b ends and h gets in by preempting l. Kueue admits
    h then, but its pods start once l's pods are gone, within their terminationGracePeriod
    Seconds (330 s here): the plan said "expected to start after 2.0 h (it preempts l ...)",
    a figure the words contradicted; the figure now adds the grace, in the section's line and
    in the verdict's (plan/verdict.py admission, from the section's row)."""
    from trainforge.plan import verdict

    q = _queue("t", 2, preemption={"withinClusterQueue": "LowerPriority"})
    work = [_work("a", "t", 1, 0, priority=10), _work("b", "t", 1, 1, priority=10),
            _work("h", "t", 2, 2, priority=10), _work("l", "t", 1, 3)]  # fmt: skip
    for w, hours in zip(work, (1, 2, 1, 5), strict=True):
        w.duration = w.remaining = hours * 3600.0
    work[3].grace = 330.0
    sim = Q.Simulation({"t": q}, {})
    sim.run_timed(work)
    h = work[2]
    assert (h.started, h.first_preempts) == (7200.0, [("l", 330.0)])
    said = (
        "expected to start after 2.1 h (admitted after 2.0 h; it preempts l: its pods start once "
        "l's pods are gone, within their terminationGracePeriodSeconds (6 min))"
    )
    assert said in Q.summary(work), Q.summary(work)
    row = next(r for r in Q._section(work, sim, []).data if r["job"] == "h")
    assert verdict.admission(row).endswith(said), verdict.admission(row)
