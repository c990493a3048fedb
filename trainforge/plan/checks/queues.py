"""Plan check: how each team's Kueue queue admits the declared jobs, and when (a nominal quota
is a guarantee only if the queue gives it back in time). Every declared job is submitted at
once into an idle cluster and run over time through Kueue 0.19's admission (classic
preemption) on the rendered objects; work that names no pool (`placement`) and one object as
any client wrote it (`admit_object`) are rehearsed on the same model (`K.admit`). What it
models: docs/teams.md, "How the plan simulates the queue".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from trainforge.core import taints as T
from trainforge.core.contract import NodeShape, PoolFacts
from trainforge.core.pods import Shape, get
from trainforge.core.quantity import figure, parse_quantity
from trainforge.jobs import capacity, packing, quota, trainjob
from trainforge.jobs.backends import job_shape, pod_templates
from trainforge.jobs.duration import duration_text
from trainforge.jobs.pod import JOB_LABEL
from trainforge.jobs.spec import JobSpec
from trainforge.jobs.tenancy import PRIORITY_LABEL, QUEUE_LABEL
from trainforge.jobs.wiring import quota_fix, quota_lift, sizing_rule
from trainforge.plan import cost as C
from trainforge.plan import kueue as K
from trainforge.plan import price_facts as P
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import scheduling as S
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.kueue import GPU, RESOURCES
from trainforge.platform.queues import DEFAULT_LOCAL_QUEUE as DEFAULT_QUEUE
from trainforge.platform.queues import pool_capacity

QUEUE_TITLE = "Queue admission (Kueue, all declared jobs submitted at once)"
# a pod's terminationGracePeriodSeconds where its spec sets none: Kubernetes' default for the
# pinned minor (versions.KUBERNETES_VERSION 1.35): kubernetes/api tag v0.35.7 (cfdecb50,
# 2026-07-23) core/v1/types.go, PodSpec.TerminationGracePeriodSeconds "Defaults to 30
# seconds." and `DefaultTerminationGracePeriodSeconds = 30` (read 2026-12-01); the job emitter
# always sets one (trainforge.jobs.pod.termination_grace)
DEFAULT_GRACE = 30
RULE_LABEL = "TRAINFORGE_QUEUE_LABEL"
RULE_NEVER = "TRAINFORGE_QUEUE_NEVER_ADMITTED"
RULE_OWNED = "TRAINFORGE_QUEUE_KUEUE_OWNED_FIELD"
RULE_UNLAUNCHABLE = "TRAINFORGE_QUEUE_UNLAUNCHABLE"
RULE_NO_OBJECT = "TRAINFORGE_QUEUE_NO_JOB_OBJECT"
RULE_OVER_LIMITS = "TRAINFORGE_QUEUE_REQUESTS_OVER_LIMITS"
RULES = {
    RULE_UNLAUNCHABLE: "keep every pool's nominal quotas within what the pool holds "
    "(trainforge.platform.queues.quota_plan; docs/teams.md, 'Quotas')",
    RULE_LABEL: "let the job's backend label its object with the team's queue "
    "(trainforge.jobs.tenancy.queue_labels), or give the namespace a LocalQueue `default`",
    RULE_NEVER: "make the job smaller, or give the team more nominal quota (quota.pools) "
    "or a larger borrowing limit in that pool",
    RULE_NO_OBJECT: "let the job's backend emit its object labelled "
    f"{JOB_LABEL}=<job>, of a kind whose pod templates it reads (trainforge.jobs.backends)",
    RULE_OVER_LIMITS: "give the container a limit at least its request, or a request at most "
    "its limit, where the namespace's LimitRange `default` / `defaultRequest` fills the other, "
    "and keep each container and pod within the LimitRange's min and max "
    "(docs/troubleshooting.md, 'Requests over limits: never admitted')",
    RULE_OWNED: "leave suspend, schedulingGates and the flavor's node labels to Kueue "
    "(docs/teams.md, 'Who owns which field')",
}


@dataclass
class Workload:
    job: str
    team: str
    namespace: str
    order: int
    queue: str | None = None
    flavor: str | None = None
    priority: int = 0
    priority_class: str = ""
    need: dict[str, Fraction] = field(default_factory=dict)
    state: str = "pending"  # pending | admitted | never | finished
    borrowing: dict[str, Fraction] = field(default_factory=dict)
    reason: str = ""
    invalid: str = ""  # Kueue's ValidateAdmissibility error, where that keeps it out
    preempted_by: str | None = None
    preempted_why: str = ""
    admitted_at: int = -1
    sizing: str = ""
    pods: int = 1
    gang: capacity.Gang = field(default_factory=lambda: capacity.Gang(()))  # what `_launch` places
    # times in seconds from the first submission
    submitted: float = 0.0
    duration: float | None = None  # expected run time; None: unknown
    ceiling: bool = False  # `duration` is a ceiling (jobs/duration.DEADLINE): it may end sooner
    # `started` is an upper bound: the runs whose ends let it in were timed by a ceiling, or
    # started at one (it may start sooner); `late` the same of any of its admissions
    start_bound: bool = False
    late: bool = False
    duration_note: str = ""  # where the figure comes from, when not the job's own pool
    remaining: float | None = None
    started: float | None = None  # first admission
    running_since: float | None = None
    ends: float | None = None
    # each admission (start, end): a preempted job's pods are gone until it is readmitted, so
    # its nodes are free in between (the cost's `JobCost.spans`); end None: unknown
    spans: list[tuple[float, float | None]] = field(default_factory=list)
    at_once: str = ""  # the state right after submission
    borrowed_at_once: dict[str, Fraction] = field(default_factory=dict)
    queue_name: str = ""  # the LocalQueue it went through
    reason_at_once: str = ""
    # what Kueue reads of its pods; None: its flavor is given
    podsets: list[K.PodSet] | None = None
    # flavor -> what a TrainJob's initializers hold there besides `need`: Kueue charges it
    # from admission and gives it back when their replicatedJob succeeds (`_reclaimed`)
    init_need: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    main_set: str = ""  # the pod set `need` and `flavor` are (its trainer's), where podsets > 1
    # Kueue's QuotaReserved message where no flavor takes it now (`words.message`): what
    # status and why show of it
    kueue_says: str = ""
    # its pods' terminationGracePeriodSeconds (the most over its pod templates): how long
    # they may take to stop once preempted
    grace: float = float(DEFAULT_GRACE)
    # (job, its grace) of each job its first admission preempted: it was admitted at once,
    # but its pods start only once theirs are gone (`preempt_words`)
    first_preempts: list[tuple[str, float]] = field(default_factory=list)

    @property
    def ends_by(self) -> bool:
        """Whether `ends` is an upper bound, not an estimate (it may end sooner)."""
        return self.ceiling or self.late


class Simulation:
    def __init__(
        self,
        queues: dict[str, K.ClusterQueue],
        flavors: dict[str, K.Flavor],
        hard: dict[str, dict[str, Fraction]] | None = None,
        shared: dict[str, dict[str, dict[str, Fraction]]] | None = None,
        pools: Iterable[PoolFacts] = (),
        price: Callable[[str], float | None] | None = None,
    ) -> None:
        self.queues = queues
        self.flavors = flavors
        self.hard = hard or {}  # namespace -> resource -> its ResourceQuota's hard limit
        self.quotas = K.Quotas(queues, shared)  # `shared`: each Cohort's own nominal quota
        self.rooms = {p.name: p for p in pools if p.gpus_per_node}  # flavor -> its GPU pool
        self.ns_usage: dict[str, dict[str, Fraction]] = {}
        self.clock = 0
        self.now = 0.0
        self.unlaunchable: list[str] = []  # "job: why" of admitted gangs no node holds
        # on-demand $/h per type, which ranks a NodeClaim's type (None: the first stands in)
        self.price = price or (lambda _: None)
        # job -> the nodes its gang launched, with the GPUs its pods use on each
        self._nodes: dict[str, list[tuple[NodeShape, int]]] = {}
        self.running: list[Workload] = []  # admitted, in the order they were
        self.ended: list[Workload] = []  # finished, in the order they did

    def over_backstop(self, w: Workload) -> str | None:
        """None, or why the namespace's ResourceQuota would refuse the job's pods now."""
        hard = self.hard.get(w.namespace, {})
        used = self.ns_usage.get(w.namespace, {})
        for r, need in K.summed([w.need, *w.init_need.values()]).items():
            limit = hard.get(r)
            if limit is not None and used.get(r, Fraction(0)) + need > limit:
                return (
                    f"waits for the team's total: {figure(r, need)} {r} more, but namespace "
                    f"{w.namespace}'s ResourceQuota (the team's total over all pools) holds "
                    f"{figure(r, limit)} and {figure(r, used.get(r, Fraction(0)))} are in use"
                )
        return None

    def fits(self, w: Workload) -> bool:
        q, quotas = self.queues[w.queue or ""], self.quotas
        return all(
            need <= quotas.available(q, f, r)
            for f, per in _asks(w).items()
            for r, need in per.items()
        )

    def borrows(self, w: Workload) -> dict[str, Fraction]:
        """What admitting the job now would take beyond its queue's nominal quota."""
        q, f = self.queues[w.queue or ""], w.flavor or ""
        over = {r: q.use(f, r) + n - K.Quotas.nominal(q, f, r) for r, n in w.need.items()}
        return {r: min(v, w.need[r]) for r, v in over.items() if v > 0}

    def _charge(self, w: Workload, sign: int) -> None:
        """Charge (1) or give back (-1) the job's need to its queue and namespace."""
        q = self.queues[w.queue or ""]
        ns = self.ns_usage.setdefault(w.namespace, {})
        for f, per in _asks(w).items():
            use = q.usage.setdefault(f, {})
            for r, need in per.items():
                use[r] = use.get(r, Fraction(0)) + sign * need
                ns[r] = ns.get(r, Fraction(0)) + sign * need

    def can_ever_fit(self, w: Workload) -> str | None:
        """None, or why the job exceeds what its queue could ever hold in its flavor: its
        `need`, with what a TrainJob's initializers hold there beside it (`init_need`: Kueue
        charges a Workload's pod sets together)."""
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        beside = w.init_need.get(f, {})
        for r, need in K.summed([w.need, beside]).items():
            most = self.quotas.potential(q, f, r)
            nominal = K.Quotas.nominal(q, f, r)
            if need > most:
                parts = ""
                if beside.get(r):
                    parts = (
                        f" ({figure(r, w.need.get(r, Fraction(0)))} its trainer, "
                        f"{figure(r, beside[r])} its initializers)"
                    )
                return (
                    f"needs {figure(r, need)} {r} in pool {f}{parts}, but team queue {q.name} "
                    f"can hold at most {figure(r, most)} there (nominal {figure(r, nominal)}"
                    + (
                        f" + up to {figure(r, most - nominal)} borrowed from cohort {q.cohort}"
                        if q.cohort
                        else ", no cohort to borrow from"
                    )
                    + ")"
                )
        return None

    def admit(self, w: Workload) -> None:
        # the ends that let it in now are upper bounds: so is this admission's time
        let_in = [x for x in self.ended if x.ends == self.now > w.submitted]
        bound = bool(let_in) and all(x.ends_by or self._reclaimed(w, x) for x in let_in)
        w.borrowing = self.borrows(w)
        self._charge(w, 1)
        w.state, w.reason, w.admitted_at = "admitted", "", self.clock
        self.clock += 1
        w.late = w.late or bound
        if w.started is None:
            w.started, w.start_bound = self.now, bound
        w.running_since = self.now
        if w.remaining is None:
            w.remaining = w.duration
        w.ends = None if w.remaining is None else self.now + w.remaining
        w.spans.append((self.now, w.ends))
        self.running.append(w)
        self._launch(w)

    def _reclaimed(self, w: Workload, x: Workload) -> bool:
        """Whether `w` fits with ended `x`'s trainer still charged: what let it in is x's
        initializers' quota, which Kueue gives back sooner, when their replicatedJob succeeds
        (the plan knows no initializer's run time: the simulation holds it to x's end)."""
        if not x.init_need:
            return False
        held = replace(x, init_need={})
        self._charge(held, 1)
        try:
            return self.fits(w) and self.over_backstop(w) is None
        finally:
            self._charge(held, -1)

    def _launch(self, w: Workload) -> None:
        """Record an admitted gang its pool cannot launch: on a Karpenter pool of known types,
        what the replay of Karpenter's launch within the limits says (`_karpenter`), the one
        answer: of several types it may launch one that holds more than `pool_capacity`'s
        type (the least, what a guarantee must hold to), and the GPU sum alone would call a
        gang unlaunchable that launches; else over the pool's GPUs, or over a node group's
        nodes (first fit, largest pods first, GPUs and EFA)."""
        room = self.rooms.get(w.flavor or "")
        if room is None or not w.need.get(GPU):
            return
        placed = [  # each pod of the pool's admitted gangs: GPUs, EFA devices
            (p.gpus, p.efa)
            for x in self.running
            if x.flavor == w.flavor and x.need.get(GPU)
            for p in x.gang.pods
        ]
        total = sum(g for g, _ in placed)
        held = pool_capacity(room, GPU)
        why = ""
        if room.kind == "karpenter" and room.nodes:
            why = self._karpenter(w, room)
        elif held is not None and total > held:
            why = f"{total} GPUs admitted in pool {w.flavor}, which holds {figure(GPU, held)}"
        elif room.max_nodes is not None:
            nodes: list[tuple[int, int]] = []  # each node's free GPUs and EFA devices
            for g, e in sorted(placed, reverse=True):
                i = next((i for i, (fg, fe) in enumerate(nodes) if fg >= g and fe >= e), None)
                if i is None:
                    nodes.append((room.gpus_per_node - g, room.efa_interfaces - e))
                else:
                    nodes[i] = (nodes[i][0] - g, nodes[i][1] - e)
            if len(nodes) > room.max_nodes:
                efa = f" and {room.efa_interfaces} EFA devices" if any(e for _, e in placed) else ""
                why = (
                    f"its pods need {len(nodes)} nodes of {room.gpus_per_node} GPUs{efa} in pool "
                    f"{w.flavor}, which has at most {room.max_nodes}"
                )
        if why:
            self.unlaunchable.append(f"{w.job}: {why}")

    def _karpenter(self, w: Workload, pool: PoolFacts) -> str:
        """Why Karpenter cannot launch the gang now ("": it can): its NodeClaims (jobs.packing)
        within what the pool's limits leave after the running gangs' nodes; pods that fit in
        those nodes' spare GPUs (Karpenter tries existing nodes first) are not reported."""
        rooms = capacity.rooms(capacity.packing_pool(pool))  # the node shapes the cost reads
        held: list[tuple[NodeShape, int]] = []  # the running gangs' nodes, GPUs used
        for x in self.running:
            if x is not w and x.flavor == w.flavor and x.need.get(GPU):
                if x.job not in self._nodes:
                    self._nodes[x.job] = self._launched(x, pool, rooms)
                held += self._nodes[x.job]
        limits = packing.limits_of(pool)
        used = {k: sum((packing.capacity_of(n)[k] for n, _ in held), Fraction(0)) for k in limits}
        left = {k: limits[k] - used[k] for k in limits}
        pods = w.gang.pods
        pk = packing.pack_rooms(rooms, pods, left, w.gang.most)
        per = min((pods[i].gpus for i in pk.unplaced), default=0)
        if not pk.unplaced or any(n.gpus - g >= per for n, g in held):
            return ""
        gpus = limits.get(GPU)
        return (
            f"Karpenter places {len(pk.claims)} NodeClaim(s) of its {len(pods)} pod(s) in pool "
            f"{w.flavor} and leaves {len(pk.unplaced)} without a node: {pk.why}"
            + (f" (limit {figure(GPU, gpus)} GPUs, {figure(GPU, used[GPU])} held by the nodes of "
               "the gangs running there)" if gpus is not None else "")
        )  # fmt: skip

    def _launched(
        self, x: Workload, pool: PoolFacts, rooms: list[capacity.NodeRoom]
    ) -> list[tuple[NodeShape, int]]:
        """A gang's launched nodes as the cost table has them, with the GPUs its pods use."""
        shapes = {r.node.instance_type: r.node for r in rooms}
        pk = capacity.launch(pool, x.gang)
        return [
            (shapes[t], sum(x.gang.pods[i].gpus for i in c.pods))
            for c, t in zip(pk.claims, pk.launched(self.price), strict=True)
        ]

    def evict(self, w: Workload, by: Workload, why: str) -> None:
        if w.started == self.now and len(w.spans) == 1:
            # admitted and preempted in the same instant (a later scheduling cycle): it never
            # started; its expected start is its next admission, not this one
            w.started, w.start_bound = None, False
        self._charge(w, -1)
        w.state, w.borrowing, w.preempted_by, w.preempted_why = "pending", {}, by.job, why
        w.reason = f"preempted by {by.job} ({why})"
        if w.remaining is not None and w.running_since is not None:
            # it resumes from its checkpoint (the steps since it are not counted)
            w.remaining = max(w.remaining - (self.now - w.running_since), 0.0)
        w.ends = None
        w.spans[-1] = (w.spans[-1][0], self.now)
        self.running.remove(w)

    def finish(self, w: Workload) -> None:
        self._charge(w, -1)
        w.state, w.remaining, w.borrowing = "finished", 0.0, {}
        self.running.remove(w)
        self.ended.append(w)

    def run_timed(self, workloads: list[Workload], horizon: float = 90 * 24 * 3600.0) -> None:
        """Jobs arrive at `submitted`, run for `duration`, and what waits is admitted as quota
        frees up (Kueue requeues inadmissible jobs when one of the cohort finishes); `started`
        and `ends` None: not within the horizon, or after a job of unknown duration."""
        arrivals = sorted({w.submitted for w in workloads})
        while True:
            live = [w for w in workloads if w.submitted <= self.now]
            self.run(live)
            for w in live:
                if not w.at_once:  # just submitted
                    w.at_once = w.state
                    w.borrowed_at_once = dict(w.borrowing)
                    w.reason_at_once = w.reason
            ends = [w.ends for w in workloads if w.state == "admitted" and w.ends is not None]
            later = [t for t in arrivals if t > self.now]
            upcoming = min(ends + later, default=None)
            if upcoming is None or upcoming > horizon:
                break
            self.now = upcoming
            for w in workloads:
                if w.state == "admitted" and w.ends is not None and w.ends <= self.now:
                    self.finish(w)

    def try_preempt(self, w: Workload, admitted: list[Workload]) -> bool:
        """Evict the fewest victims that make room for `w` in its flavor, and admit it."""
        chosen = self.victims(w, admitted)
        if not chosen:
            return False
        for v, why in chosen:
            self.evict(v, w, why)
        self.admit(w)
        if w.started == self.now and not w.first_preempts:
            w.first_preempts = [(v.job, v.grace) for v, _ in chosen]
        return True

    def victims(self, w: Workload, admitted: list[Workload]) -> list[tuple[Workload, str]]:
        """What classic preemption would evict to admit `w` in its flavor (empty: nothing
        makes room)."""
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        pol = q.preemption
        within = pol.get("withinClusterQueue", "Never")
        reclaim = pol.get("reclaimWithinCohort", "Never")
        borrow = pol.get("borrowWithinCohort") or {}
        needs_borrow = bool(self.borrows(w))
        borrowing_queues = {
            m.name
            for m in self.quotas.members(q)
            if m is not q and any(m.use(f, r) > K.Quotas.nominal(m, f, r) for r in RESOURCES)
        }
        cands: list[tuple[Workload, str]] = []
        for v in admitted:
            if v.flavor != f or v is w:
                continue
            if v.queue == q.name:
                newer_equal = v.priority == w.priority and v.order > w.order
                lower = v.priority < w.priority
                if (within == "LowerPriority" and lower) or (
                    within == "LowerOrNewerEqualPriority" and (lower or newer_equal)
                ):
                    cands.append((v, "priority within the team's queue"))
            elif v.queue in borrowing_queues:
                if not needs_borrow and (
                    reclaim == "Any" or (reclaim == "LowerPriority" and v.priority < w.priority)
                ):
                    cands.append((v, f"{q.name} reclaims its nominal quota"))
                elif (
                    needs_borrow
                    and borrow.get("policy") == "LowerPriority"
                    and v.priority < w.priority
                    and v.priority <= borrow.get("maxPriorityThreshold", v.priority)
                ):
                    cands.append((v, "a borrowing job of higher priority"))
        cands.sort(
            key=lambda c: (c[0].queue not in borrowing_queues, c[0].priority, -c[0].admitted_at)
        )
        # each candidate's quota is given back while its set is tried, then charged again
        chosen: list[tuple[Workload, str]] = []
        try:
            for c in cands:
                chosen.append(c)
                self._charge(c[0], -1)
                if self.fits(w):
                    break
            else:
                return []
            for c in list(reversed(chosen)):  # minimise the set of victims
                self._charge(c[0], 1)
                if self.fits(w):
                    chosen.remove(c)
                else:
                    self._charge(c[0], -1)
            return list(chosen)
        finally:
            for v, _ in chosen:
                self._charge(v, 1)

    def run(self, workloads: list[Workload]) -> None:
        """Kueue's scheduling cycles: each takes the next job of every queue at once."""
        live = [w for w in workloads if w.state == "pending"]
        inadmissible: set[int] = set()
        for _ in range(4 * len(live) + 4):
            heads = self._heads(live, inadmissible)
            if not heads:
                break
            heads.sort(key=lambda w: (bool(self.borrows(w)), -w.priority, w.order))
            freed = False
            for w in heads:
                admitted = [x for x in workloads if x.state == "admitted"]
                # Kueue decides first: a ResourceQuota queues nothing, it refuses the pods of
                # a job Kueue admitted, so it is the reason only where Kueue would admit
                placed = self._place(w, admitted)
                fits = placed and self.fits(w)
                backstop = self.over_backstop(w) if placed else None
                if fits and backstop is None:
                    self.admit(w)
                elif placed and not fits and not backstop and self.try_preempt(w, admitted):
                    freed = True
                else:
                    w.reason = backstop if fits else self.why_waiting(w)
                    inadmissible.add(id(w))
            if freed:
                # evicted jobs queue again, and what waited may fit now
                inadmissible.clear()

    def _place(self, w: Workload, admitted: list[Workload]) -> bool:
        """Give a workload read from its pods the flavor Kueue's assignment gives it now, the
        oracle asking this simulation's preemption; False when none fits even by preempting
        (it keeps its last flavor, which its wait is explained against)."""
        if w.podsets is None:
            return True
        q = self.queues[w.queue or ""]
        seen: dict[str, tuple[str, int]] = {}

        def oracle(queue: K.ClusterQueue, f: str, r: str, val: Fraction) -> tuple[str, int]:
            if f not in seen:
                chosen = self.victims(replace(w, flavor=f), admitted)
                own = all(v.queue == q.name for v, _ in chosen)
                # whether it still borrows once its own queue's victims are gone
                after = any(
                    q.use(f, x) + n - sum(v.need.get(x, 0) for v, _ in chosen if v.queue == q.name)
                    > K.Quotas.nominal(q, f, x)
                    for x, n in w.need.items()
                )
                seen[f] = (
                    (K.POSSIBLE if own else K.RECLAIM, int(after))
                    if chosen
                    else (K.NO_CANDIDATES, 0)
                )
            return seen[f]

        got = K.Assigner(self.quotas, self.flavors, oracle).assign(q, w.podsets)
        w.kueue_says = got.message if got.mode != K.FIT else ""
        if got.mode == K.NO_FIT:
            return False
        if len(w.podsets) == 1 or not w.main_set:
            if got.flavor is None:
                return False
            w.flavor = got.flavor
            return True
        placed = _placed(got, w.podsets, w.main_set)
        if placed is None:
            return False
        w.flavor, w.init_need = placed
        return True

    def _heads(self, live: list[Workload], inadmissible: set[int]) -> list[Workload]:
        """Each queue's next job: highest priority, then oldest. A job that did not fit waits
        aside (BestEffortFIFO lets the next one try) or blocks its queue (StrictFIFO)."""
        heads = []
        for q in self.queues.values():
            pending = sorted(
                (w for w in live if w.queue == q.name and w.state == "pending"),
                key=lambda w: (-w.priority, w.order),
            )
            for w in pending:
                if id(w) not in inadmissible:
                    heads.append(w)
                    break
                if q.strategy == "StrictFIFO":
                    break  # the head blocks its queue
        return heads

    def why_waiting(self, w: Workload) -> str:
        """What the job waits for, in its own terms: a GPU job's GPUs alone when they are short
        (its CPU and memory come with them); after the preemption that sent it back, if any."""
        q = self.queues[w.queue or ""]
        parts = []
        for f, r, need in ((f, r, n) for f, per in _asks(w).items() for r, n in per.items()):
            if need <= self.quotas.available(q, f, r):
                continue
            text = (
                f"{amount(r, need)} in pool {f}: team {q.name} is guaranteed "
                f"{amount(r, q.nominal[f][r])} there and uses {amount(r, q.use(f, r))}"
            )
            if q.cohort:
                idle = self.quotas.cohort_quota(q, f, r) - self.quotas.cohort_usage(q, f, r)
                text += f"; cohort {q.cohort} has {amount(r, max(idle, Fraction(0)))} idle"
                # the cohort's idle quota counts the team's own unused guarantee too (a
                # preempted job's team uses none of it): say whose, and what is left to borrow
                own = min(max(q.nominal[f][r] - q.use(f, r), Fraction(0)), max(idle, Fraction(0)))
                if own:
                    lend = max(idle, Fraction(0)) - own
                    text += (
                        f" (team {q.name}'s own unused guarantee: {amount(r, own)}; to borrow: "
                        f"{amount(r, lend) if lend else 'none'})"
                    )
                limit = q.borrow_limit[f][r]
                if limit is not None:
                    text += f", borrowing limit {amount(r, limit)}"
            parts.append((r, text))
        if any(r == GPU for r, _ in parts):
            parts = [p for p in parts if p[0] == GPU]
        text = "waits for " + (
            "; ".join(t for _, t in parts) or "its cohort's capacity, which is in use"
        )
        if w.kueue_says:
            text += f" (Kueue: {w.kueue_says})"
        if w.preempted_by:
            return f"preempted by {w.preempted_by} ({w.preempted_why}), {text}"
        return text


def _asks(w: Workload) -> dict[str, dict[str, Fraction]]:
    """flavor -> what the admitted job holds there: `need` on its flavor, its initializers'."""
    out = {f: dict(per) for f, per in w.init_need.items()}
    out[w.flavor or ""] = K.summed([w.need, out.get(w.flavor or "", {})])
    return out


def _placed(
    a: K.Assignment, sets: list[K.PodSet], main: str
) -> tuple[str, dict[str, dict[str, Fraction]]] | None:
    """The flavor assignment `a` of pod sets `sets` as the simulation runs it: pod set
    `main`'s one flavor, and flavor -> what the others ask there; None where `main` got no
    flavor or a pod set more than one (not modelled: the trainer's pod set alone is run)."""
    flavors = {p: {c.flavor for c in per.values()} for p, per in a.podsets.items()}
    if a.mode == K.NO_FIT or len(flavors.get(main, ())) != 1:
        return None
    if any(len(flavors.get(p.name, ())) > 1 for p in sets):
        return None
    (mine,) = flavors[main]
    return mine, others_held(a, sets, main)


def others_held(a: K.Assignment, sets: list[K.PodSet], main: str) -> dict[str, dict[str, Fraction]]:
    """flavor -> what the pod sets of `sets` other than `main` (a TrainJob's initializers) ask
    there in assignment `a`, each resource in the flavor it took; also of an assignment that
    stopped at `main` (NoFit: Kueue assigns pod sets in order and stops at the first that gets
    none, so those before it hold their flavors). One asking nothing holds nothing."""
    held: dict[str, dict[str, Fraction]] = {}
    for p in sets:
        if p.name == main:
            continue
        total = p.total()
        for r, c in a.podsets.get(p.name, {}).items():
            if total.get(r):
                per = held.setdefault(c.flavor, {})
                per[r] = per.get(r, Fraction(0)) + total[r]
    return held


_HARD = {f"requests.{GPU}": GPU, "requests.cpu": "cpu", "requests.memory": "memory"}


def _backstops(ctx: PlanContext) -> dict[str, dict[str, Fraction]]:
    """namespace -> resource -> its ResourceQuota's hard limit on requests."""
    out: dict[str, dict[str, Fraction]] = {}
    for o in ctx.objects:
        if o.kind != "ResourceQuota" or not o.namespace:
            continue
        hard = (o.doc.get("spec") or {}).get("hard") or {}
        mine = out.setdefault(o.namespace, {})
        for key, r in _HARD.items():
            if key in hard:
                v = K.quantity(hard[key])
                mine[r] = min(v, mine[r]) if r in mine else v
    return out


def workload_object(ctx: PlanContext, name: str, namespace: str) -> Any:
    """The object declared job `name` became: its JOB_LABEL and a kind with a backend shape
    (what the queue's and the cost's findings name)."""
    for o in ctx.objects:
        labels = (o.doc.get("metadata") or {}).get("labels") or {}
        if o.namespace == namespace and labels.get(JOB_LABEL) == name and job_shape(o.doc):
            return o
    return None


def limit_ranges(ctx: PlanContext, namespace: str) -> list[dict[str, Any]]:
    """`namespace`'s LimitRanges (what Kueue and the API server default requests from)."""
    return _limit_ranges_in([o.doc for o in ctx.objects], namespace)


def _limit_ranges_in(docs: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == "LimitRange"
            and (d.get("metadata") or {}).get("namespace") == namespace]  # fmt: skip


def object_gang(ctx: PlanContext, obj: Any, spec: Any, pool: PoolFacts) -> capacity.Gang:
    """A declared job's gang as Karpenter packs it (`_gang` of its object's built pods), once
    per plan: the launch check, the cost table and the estimates read this one."""
    memo = ctx.memo.setdefault("queues.gangs", {})
    key = (spec.team, spec.name)
    if key not in memo:
        templates = pod_templates(obj.doc, runtimes=runtime_docs(ctx)) if obj is not None else []
        memo[key] = _gang(templates, limit_ranges(ctx, obj.namespace if obj else ""), spec, pool)
    return memo[key]


def _gang(templates: list[Any], lrs: list[dict[str, Any]], spec: Any, pool: PoolFacts):
    """`capacity.gang` of the pod templates; the spec's (`job_gang`) when no pod is read."""
    got = capacity.gang(templates, lrs)
    return got if got.pods else capacity.job_gang(spec, pool, got.most)


def job_run(ctx: PlanContext, d: Any) -> C.JobCost:
    """Declared job `d`'s `object_gang` on its pool: nodes, prices and run time, once per plan
    (the queue's durations and the Cost's row read it)."""
    memo = ctx.memo.setdefault("queues.runs", {})
    key = (d.spec.team, d.spec.name)
    if key not in memo:
        obj = workload_object(ctx, d.spec.name, d.target.namespace)
        where = obj.ident if obj is not None else f"{d.target.namespace}/{d.spec.name}"
        gang = object_gang(ctx, obj, d.spec, d.target.pool)
        region = C.plan_region(ctx.inventory)
        memo[key] = C.job_cost(d.spec, d.target.pool, region, where, gang=gang)
    return memo[key]


def _pod_need(spec: Any, pod: Mapping[str, Any] | None, lrs: list[dict[str, Any]]):
    """What Kueue charges for one pod (`K.pod_requests`), in the quota's resources; the spec's
    (`K.pod_need`) where no pod is read."""
    if pod is None:
        return {r: v for r, v in K.pod_need(spec).items() if v}
    return {r: v for r, v in K.pod_requests(pod, lrs).items() if r in RESOURCES and v}


@dataclass(frozen=True)
class ObjectWorkload:
    """Kueue's Workload of one job object (`object_workload`)."""

    queue: str | None  # its queue label
    priority_class: str
    pods: int  # as its backend counts them
    need: dict[str, Fraction]  # all its pods (a TrainJob: its trainer's), in the quota's resources
    sets: list[K.PodSet]  # one per pod template; a TrainJob's: one per replicatedJob
    main: K.PodSet  # all its pods as its first pod's, which the simulation runs over time
    checked: list[K.PodSet] | None  # the pod sets Kueue validates where not `sets`


def object_workload(
    doc: dict[str, Any], spec: Any, lrs: list[dict[str, Any]], runtimes: Mapping[str, Any]
) -> ObjectWorkload:
    """The Workload Kueue builds from `doc` with its namespace's LimitRanges `lrs` and TrainJob
    `runtimes`: the simulation's and each fleet worker's (`dispatches`)."""
    shape = job_shape(doc) or Shape()
    pods = shape.pod_count(doc, runtimes)
    templates = pod_templates(doc, build=False)
    # what each pod asks, from the built pods (a TrainJob's from its runtime)
    built = pod_templates(doc, runtimes=runtimes)
    per_pod = _pod_need(spec, built[0].spec if built else None, lrs)
    main = K.podset(templates[0].template if templates else {}, per_pod, pods, lrs)
    # a pod set per template, named in lower case (kubeflowjob_controller.go:117
    # NewPodSetReference, release-0.19 c90ed70), as its message then does ("pod set master")
    sets = [
        K.counted_podset(t.template, t.replicas, lrs, (t.name or main.name).lower())
        for t in templates
    ]
    checked, counted = None, sets
    if doc.get("kind") == trainjob.KIND:
        # Kueue validates the pods the Trainer builds, whatever its numNodes, and names the
        # trainer's pod set after its replicatedJob (as `K.trainjob_podsets`); it assigns a
        # flavor to every replicatedJob's pod set, an initializer's too (v0.19.2 trainjob
        # `podSets` -> jobset `JobSet.PodSets`; flavorassigner.go `assignFlavors`, read
        # 2026-11-30). `need`: the trainer's (`_simulate` adds the initializers').
        checked = K.trainjob_podsets(doc, runtimes, lrs) or []
        main = replace(main, name=trainjob.REPLICATED_JOB)
        sets = [main if p.name == main.name else p for p in checked] or [main]
        counted = [main]
    need = K.summed(p.total() for p in counted)
    labels = (doc.get("metadata") or {}).get("labels") or {}
    return ObjectWorkload(
        shape.queue(doc), labels.get(PRIORITY_LABEL, ""), pods, need, sets, main, checked
    )


def _owned_fields(obj: Any, flavor: K.Flavor | None) -> list[str]:
    """Fields of the object Kueue owns once it manages the job; `flavor`: its first pod set's."""
    out = []
    suspend = (job_shape(obj.doc) or Shape()).suspend  # where its kind keeps `suspend`
    if get(obj.doc, *suspend) is not None:
        out.append(f"{'.'.join(suspend)} (Kueue suspends and resumes the job)")
    for t in pod_templates(obj.doc, build=False):
        pod = t.spec
        if pod.get("schedulingGates"):
            out.append("a pod template's schedulingGates (Kueue adds and removes its own)")
        if flavor is not None:
            for k, v in (pod.get("nodeSelector") or {}).items():
                if k in flavor.labels and flavor.labels[k] != v:
                    out.append(
                        f"nodeSelector {k}={v} in pod template {t.name or t.path}, which "
                        f"contradicts flavor {flavor.name}'s {k}={flavor.labels[k]}: Kueue "
                        "gives that pod set another flavor or none, not the job's"
                    )
    return sorted(set(out))


def simulate(ctx: PlanContext) -> tuple[list[Workload], list[Finding], Simulation | None]:
    """Every declared job run through the queue over time, once per plan (the queue section,
    the cost report and the verdict read the same run)."""
    if "kueue.simulate" not in ctx.memo:
        ctx.memo["kueue.simulate"] = _simulate(ctx)
    return ctx.memo["kueue.simulate"]


def _simulate(ctx: PlanContext) -> tuple[list[Workload], list[Finding], Simulation | None]:
    declared = getattr(ctx.declared, "jobs", None) or []
    m = K.read(o.doc for o in ctx.objects)
    if not declared or not m.queues:
        return [], [], None
    findings: list[Finding] = []
    workloads: list[Workload] = []

    # (team, job) -> `node_fit`'s fix, which its queue findings name instead of quota
    unfit: dict[tuple[str, str], str] = {}

    def finding(w: Workload, rule: str, message: str, obj: Any = None, fix: str = "") -> None:
        ident = obj.ident if obj is not None else f"{w.namespace}/job/{w.job}"
        why = unfit.get((w.team, w.job)) if rule in (RULE_NEVER, RULE_UNLAUNCHABLE) else None
        why = why or fix
        text = f"job {w.job} (team {w.team}): {message}"
        urn = getattr(obj, "urn", "") or ""
        findings.append(
            Finding(ident, rule, text, why or RULES[rule], urn, frozenset({w.job, ident}))
        )

    def never(w: Workload, rule: str, reason: str, obj: Any, fix: str = "") -> None:
        w.state = w.at_once = "never"
        w.reason = reason
        finding(w, rule, reason, obj, fix)

    for i, dj in enumerate(declared):
        spec, target = dj.spec, dj.target
        if target.team.queue is None:
            continue
        w = Workload(spec.name, spec.team, target.namespace, i)
        w.sizing = sizing_rule(spec, target.pool)
        if fit := node_fit(spec, target.pool):
            unfit[(spec.team, spec.name)] = fit
        where = dispatches(ctx).get((spec.team, spec.name))  # {} for a stack without workers
        if where is not None:  # a fleet manager holds its quota while a worker runs it
            w.duration, w.ceiling, w.duration_note = _longest_run(where)
        else:
            run = job_run(ctx, dj).duration
            w.duration, w.ceiling, w.duration_note = run.seconds, run.ceiling, run.cut_note
        workloads.append(w)
        obj = workload_object(ctx, spec.name, target.namespace)
        if obj is None:
            never(w, RULE_NO_OBJECT, no_object(spec.name, target.namespace), obj)
            continue
        w.gang = object_gang(ctx, obj, spec, target.pool)
        w.grace = pods_grace(pod_templates(obj.doc, runtimes=runtime_docs(ctx)))
        wl = object_workload(obj.doc, spec, limit_ranges(ctx, target.namespace), runtime_docs(ctx))
        w.pods, w.need, ps, sets = wl.pods, dict(wl.need), wl.main, wl.sets
        got = K.admit(m, target.namespace, wl.queue, wl.priority_class, sets, wl.checked)
        if got.local_queue is None:
            never(w, RULE_LABEL, got.reason, obj)
            continue
        w.queue_name, q = got.local_queue, got.queue
        if q is not None and q.admits(target.namespace):
            w.queue, w.priority_class, w.priority = q.name, wl.priority_class, got.priority
        if got.reason or q is None or got.assignment is None:
            never(w, RULE_OVER_LIMITS if got.invalid else RULE_NEVER, got.reason, obj)
            continue
        all_tas = K.only_tas(q, m.flavors)
        skips_of = [
            {f: K.flavor_fits_podset(p, m.flavors.get(f), all_tas, f) for f in q.flavors}
            for p in sets
        ]
        mine = next((i for i, p in enumerate(sets) if p.name == ps.name), 0)  # `ps`'s index
        w.flavor = next((f for f, why in skips_of[mine].items() if why is None), None)
        stuck = next((i for i, sk in enumerate(skips_of) if all(sk.values())), None)
        owned = _owned_fields(obj, m.flavors.get(w.flavor or "")) if stuck is None else []
        if owned:
            finding(w, RULE_OWNED, "sets " + "; ".join(owned), obj)
        if stuck is not None:
            w.flavor = None
            p, skips = sets[stuck], skips_of[stuck]
            whys = [y for y in skips.values() if y and "doesn't match node affinity" not in y]
            templates = pod_templates(obj.doc, build=False)
            name = templates[stuck].name if len(templates) == len(sets) else p.name
            whose = "its" if len(sets) == 1 else f"its pod template {name}'s"
            never(
                w,
                RULE_NEVER,
                f"no flavor of ClusterQueue {q.name} matches {whose} nodeSelector "
                f"{dict(p.node_selector)}, tolerations and topology request"
                + (f" ({'; '.join(whys)})" if whys else ""),
                obj,
            )
            continue
        idle = got.assignment
        if idle.mode == K.NO_FIT:
            # a TrainJob's initializers come before its trainer (JobSet order) and took their
            # flavors before it got none: what they hold in its flavor counts with it
            w.init_need = others_held(idle, sets, ps.name) if wl.checked is not None else {}
            sim = Simulation(m.queues, m.flavors, shared=m.shared)
            why, said = sim.can_ever_fit(w), kueue_refusal(q.name, idle)
            fix = _never_fix(sim, w, dj) if why else ""
            text = f"can never be admitted: {f'{why}; ' if why else ''}{said}"
            never(w, RULE_NEVER, text, obj, fix)
            continue
        # pod sets on different flavors: the simulation runs the job on the first one's
        w.flavor, w.podsets = idle.flavor or w.flavor, [ps]
        placed = _placed(idle, sets, ps.name) if wl.checked is not None else None
        if len(sets) > 1 and placed is not None:
            # Kueue admits and charges a TrainJob with every pod set, its initializers' too
            # (each on its own flavor); their quota comes back when their replicatedJob
            # succeeds (kueue v0.19.2 8eab687 pkg/controller/jobs/trainjob `ReclaimablePods`,
            # as jobset's; read 2026-11-30), a time the plan does not know: held here to the
            # job's end, and a start it decides is a bound (`Simulation._reclaimed`)
            w.podsets, w.main_set = list(sets), ps.name
            w.flavor, w.init_need = placed

    contracts = getattr(ctx.declared, "contracts", None) or []
    pools = (p for c in contracts for p in c.pools.values())
    region = C.plan_region(ctx.inventory)
    sim = Simulation(
        m.queues, m.flavors, _backstops(ctx), m.shared, pools,
        price=C.launch_prices(region),
    )  # fmt: skip
    sim.run_timed(workloads)
    for gone in sim.unlaunchable:
        job = gone.split(":", 1)[0]
        w = next(x for x in workloads if x.job == job)
        finding(w, RULE_UNLAUNCHABLE, "admitted, but its pool cannot launch it: " + gone)
    return workloads, findings, sim


def _never_fix(sim: Simulation, w: Workload, dj: Any) -> str:
    """The fix of a job over what its queue may ever hold in its pool (`can_ever_fit`):
    `quota_change`'s, its initializers' part there beside it. "": not its pool."""
    if w.flavor != dj.spec.pool:
        return ""
    q, beside = sim.queues[w.queue or ""], w.init_need.get(dj.spec.pool, {})
    return quota_change(sim.quotas, q, w.need, w.pods, dj.spec, dj.target, beside=beside)


def quota_change(
    quotas: K.Quotas,
    q: K.ClusterQueue,
    need: Mapping[str, Fraction],
    pods: int,
    spec: Any,
    target: Any,
    said: Mapping[str, str] | None = None,
    beside: Mapping[str, Fraction] | None = None,
) -> str:
    """The preview refusal's fix of `pods` pods needing `need` in all, over what queue `q` may
    ever hold in pool `spec.pool` (`wiring.quota_fix`: fewer pods, or the stack keys that the
    quota model, which renders the queues, says lift it; or that none does). "": nothing over.
    `said`: how the fewer pods are written (`quota_fix`). `beside`: what the Workload's other
    pod sets (a TrainJob's initializers, declared or sent by the SDK) hold in the pool with
    them: Kueue admits the pod sets together, so the raise lifts both and the fewer pods fit
    beside it. The one fix of a declared job and of an SDK job (`submitted_fix`)."""
    beside = beside or {}
    total = K.summed([need, beside])
    over = [r for r, n in total.items() if n > quotas.potential(q, spec.pool, r)]
    if not over or over[0] not in quota.CONFIG_KEY:
        return ""
    r = over[0]
    name, mine, held = quota.CONFIG_KEY[r], need.get(r, Fraction(0)), beside.get(r, Fraction(0))
    # what one pod asks is within the pool's room: fewer of them fit; else a pod is too big
    room = (target.team.quota_inputs.room(spec.pool) or {}) if target.team.quota_inputs else {}
    cap = parse_quantity(getattr(target.quota, name) or "0") or total[r]
    one_fits = mine / max(pods, 1) + held <= room.get(name, cap)
    key = "workers" if one_fits else ("gpusPerWorker" if name == "gpus" else name)
    also = {quota.CONFIG_KEY[x]: v for x, v in total.items() if x in quota.CONFIG_KEY}
    lift = quota_lift(spec, target, name, total[r], also)
    return quota_fix(spec, target, name, key, mine, cap, pods, lift, said=said, beside=held)


def node_fit(spec: Any, pool: PoolFacts) -> str | None:
    """The fix of a job's queue finding where its pod fits no node of its pool
    (`capacity.rehearse`, as the scheduling check reports it): no quota helps. None where a
    node holds one."""
    r = capacity.rehearse(capacity.job_request(spec, pool), spec.min_workers, pool)
    if not any(p.key != "workers" for p in r.problems):
        return None
    return (
        f"more quota cannot help: its pod fits no node of pool {pool.name} ({S.RULE} says by "
        "how much); ask for less per pod, or use a pool with bigger nodes (docs/rehearsals.md, "
        "Scheduling rehearsal)"
    )


def no_object(job: str, namespace: str) -> str:
    """A declared job without an object (`workload_object`): nothing reaches Kueue."""
    return (
        f"no object labelled {JOB_LABEL}={job} with a pod template of its backend's kind is "
        f"rendered in namespace {namespace}: nothing reaches Kueue"
    )


def kueue_refusal(queue: str, a: K.Assignment) -> str:
    """Why idle ClusterQueue `queue` gives a Workload no one flavor: Kueue's own QuotaReserved
    message where no flavor takes a pod set (what `status` and `why` show), else the flavors
    its resources take."""
    if a.mode == K.NO_FIT:
        return (
            f"no flavor of ClusterQueue {queue} fits; on idle queues Kueue would say: " + a.message
        )
    names = ", ".join(sorted({c.flavor for per in a.podsets.values() for c in per.values()}))
    took = f"its resources take {names}" if names else "it requests nothing the queue covers"
    return f"Kueue assigns it no one flavor of ClusterQueue {queue}: {took}"


@dataclass
class ObjectAdmission:
    workload: Workload
    local_queue: str | None  # the LocalQueue it went through (`default` when unlabelled)
    # what Kueue adds to the pods on admission: the flavor's node labels and new tolerations
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)


def object_podset(
    docs: list[dict[str, Any]],
    namespace: str,
    pod: dict[str, Any],
    need: Mapping[str, Fraction],
    pods: int,
    name: str = "main",
) -> K.PodSet:
    """The pod set Kueue makes of `pods` pods with spec `pod` asking `need` in all (the
    namespace's LimitRanges in `docs`): what `admit_object` admits and, for a job it never
    admits, what `workload_fix` matches flavors against (its node selector, tolerations)."""
    lrs = _limit_ranges_in(docs, namespace)
    ps = K.podset({"spec": pod}, {r: v / pods for r, v in need.items()}, pods, lrs)
    return replace(ps, name=name)


def admit_object(
    docs: list[dict[str, Any]],
    namespace: str,
    labels: dict[str, str],
    pod: dict[str, Any],
    need: dict[str, Fraction],
    pods: int = 1,
    validated: list[K.PodSet] | None = None,
    name: str = "main",
) -> ObjectAdmission:
    """Admit one job as any client wrote it (an SDK TrainJob, a hand-written Job) on the
    rendered Kueue objects into an idle cluster (`K.admit`), its gang `need` (all `pods` pods);
    state "admitted", "pending" or "never" with its reason. `validated`: as `K.admit`; `name`:
    its pod set's, as Kueue's Workload names it."""
    m = K.read(docs)
    w = Workload(str(labels.get(JOB_LABEL, "job")), namespace, namespace, 0)
    w.need, w.pods = dict(need), pods
    ps = object_podset(docs, namespace, pod, need, pods, name)
    # every pod set takes a flavor (a TrainJob's initializers too, `object_workload`)
    sets = [ps if p.name == name else p for p in validated or ()] or [ps]
    queue, pclass = labels.get(QUEUE_LABEL), labels.get(PRIORITY_LABEL, "")
    got = K.admit(m, namespace, queue, pclass, sets, validated)
    out = ObjectAdmission(w, got.local_queue)
    if got.reason or got.queue is None or got.assignment is None:
        w.state, w.reason, w.invalid = "never", got.reason, got.invalid
        return out
    w.queue = w.team = got.queue.name
    w.queue_name = got.local_queue
    w.priority = got.priority
    a = got.assignment
    took = {c.flavor for c in a.podsets.get(name, {}).values()}  # its pod set's
    # what a TrainJob's initializers hold beside it (their flavors are taken before its own)
    w.init_need = others_held(a, sets, name) if validated else {}
    if a.mode == K.NO_FIT or len(took) != 1:
        w.state, w.reason = "never", kueue_refusal(w.queue, a)
        return out
    w.flavor = took.pop()
    fl = m.flavors[w.flavor]
    out.node_selector = dict(fl.labels)
    out.tolerations = [t for t in fl.tolerations if t not in (pod.get("tolerations") or [])]
    Simulation(m.queues, m.flavors, shared=m.shared).run([w])
    return out


def _run(spec: Any, obj: Any, w: Any, flavor: str, pool: Any) -> C.WorkerRun:
    """A fleet manager's job on worker `w`'s pool, priced and timed as `job_run` does with the
    worker's runtimes and LimitRanges, with the words the fleet section prints."""
    worker, region = w.name, w.region
    if pool is None or region is None:
        why = "declares no pool of that name" if pool is None else "'s stack sets no aws:region"
        return C.WorkerRun(worker, flavor, region, None, f"cost unknown: the worker{why}")
    runtimes = trainjob.runtimes_in(w.docs)
    templates = pod_templates(obj.doc, runtimes=runtimes) if obj is not None else []
    lrs = _limit_ranges_in(w.docs, obj.namespace if obj is not None else "")
    cost = C.job_cost(spec, pool, region, spec.name, gang=_gang(templates, lrs, spec, pool))
    choice = cost.choice
    if choice is None:
        why = f"cost unknown: {cost.why_no_node}"
    elif choice.hourly_on_demand is None:
        why = f"price missing: {P.why_unpriced(region, choice.instance_type)}"
    else:
        why = f"{choice.describe()} on-demand in {region}"
    return C.WorkerRun(worker, flavor, region, cost, why)


@dataclass(frozen=True)
class Dispatch:
    """Where MultiKueue may run one job: the workers that admit it, the others with why."""

    runs: tuple[C.WorkerRun, ...]
    refused: tuple[str, ...]
    pods: int  # the job's pods, as its object has them (MultiKueue copies the object)


def _worker_flavor(m: K.Kueue, namespace: str, wl: ObjectWorkload) -> tuple[str | None, str]:
    """The flavor (its trainer's pod set's, else its first's) a worker's Kueue `m` gives the
    Workload when idle, or None and why it never admits it."""
    got = K.admit(m, namespace, wl.queue, wl.priority_class, wl.sets, wl.checked)
    if got.reason or got.queue is None or got.assignment is None:
        return None, got.reason
    a = got.assignment
    # the trainer's pod set where it is named (a TrainJob's initializers may come first)
    per = a.podsets.get(wl.main.name) or next(iter(a.podsets.values()), {})
    taken = [c.flavor for c in per.values()]
    if a.mode == K.NO_FIT or not taken:
        return None, kueue_refusal(got.queue.name, a)
    return a.flavor or taken[0], ""


def dispatches(ctx: PlanContext) -> dict[tuple[str, str], Dispatch]:
    """(team, job) -> where a fleet manager's job may run ({} for any other stack): each
    planned worker admits `object_workload` of its copy or not, priced where it does. Once
    per plan: the fleet section, the cost section and the simulation read it."""
    if "fleet.dispatches" in ctx.memo:
        return ctx.memo["fleet.dispatches"]
    out: dict[tuple[str, str], Dispatch] = {}
    workers = getattr(ctx, "fleet_workers", None) or {}
    planned = {n: w for n, w in workers.items() if w.planned}
    kueues = {n: (K.read(w.docs), trainjob.runtimes_in(w.docs)) for n, w in planned.items()}
    for dj in (getattr(ctx.declared, "jobs", None) or []) if workers else []:
        spec, target = dj.spec, dj.target
        obj = workload_object(ctx, spec.name, target.namespace)
        if obj is None:
            continue
        runs: list[C.WorkerRun] = []
        refused: list[str] = []
        counts: list[int] = []  # its pods on each worker, as that worker's runtimes build it
        for name, w in planned.items():
            m, runtimes = kueues[name]
            lrs = _limit_ranges_in(w.docs, target.namespace)
            wl = object_workload(obj.doc, spec, lrs, runtimes)
            counts.append(wl.pods)
            flavor, why = _worker_flavor(m, target.namespace, wl)
            if flavor is None:
                refused.append(f"{name}: {why}")
                continue
            pool = w.declared.pool(flavor) if w.declared else None
            runs.append(_run(spec, obj, w, flavor, pool))
        pods = max(counts, default=(job_shape(obj.doc) or Shape()).pod_count(obj.doc))
        out[(spec.team, spec.name)] = Dispatch(tuple(runs), tuple(refused), pods)
    ctx.memo["fleet.dispatches"] = out
    return out


def _longest_run(where: Dispatch) -> tuple[float | None, bool, str]:
    """A fleet job's expected run: the longest on a worker that may run it (its quota on the
    manager is held until it ends), whether that figure is a ceiling; None when one is
    unknown."""
    runs = [r.cost.duration if r.cost else None for r in where.runs]
    if not runs or any(d is None or d.seconds is None for d in runs):
        return None, False, ""
    longest = max((d for d in runs if d is not None), key=lambda d: d.seconds or 0.0)
    if len(runs) == 1:
        return longest.seconds, longest.ceiling, f" (on worker {where.runs[0].worker})"
    return longest.seconds, longest.ceiling, " (the longest on a worker that may run it)"


def outcomes(ctx: PlanContext) -> dict[tuple[str, str], tuple[str, str]]:
    """(team, job) -> ("runs" | "waits" | "never", why it does not run at once)."""
    return {(w.team, w.job): _outcome(w) for w in simulate(ctx)[0]}


def _outcome(w: Workload) -> tuple[str, str]:
    state = {"admitted": "runs", "pending": "waits"}.get(w.at_once, "never")
    return state, (w.reason_at_once or w.reason) if state != "runs" else ""


def check(ctx: PlanContext) -> CheckResult:
    workloads, findings, sim = simulate(ctx)
    warnings = list(getattr(ctx.declared, "quota_warnings", None) or [])
    placed = placement(ctx)
    sections = list(placed.sections)
    if sim is not None:
        sections.insert(0, _section(workloads, sim, warnings))
    elif warnings:
        sections.insert(0, Section(QUEUE_TITLE, [f"quota: {x}" for x in warnings], []))
    return CheckResult(findings=findings + placed.findings, sections=sections)


PLACEMENT_TITLE = "Queue placement of work that names no pool (kubectl, CronJobs, Kubeflow SDK)"
RULE_PLACEMENT = "TRAINFORGE_QUEUE_PLACEMENT"
RULES[RULE_PLACEMENT] = (
    "order the team's ClusterQueue flavors CPU pools first, then the pools where the team has "
    "nominal GPUs, with flavorFungibility MayStopSearch (trainforge.platform.queues."
    "flavor_order); or give such jobs a nodeSelector"
)
# what a client that names no pool sends (no nodeSelector, no tolerations), one pod
CPU_PROBE = {"cpu": Fraction(2), "memory": Fraction(8 * 2**30)}
GPU_PROBE = {GPU: Fraction(1), "cpu": Fraction(1), "memory": Fraction(4 * 2**30)}


def placement(ctx: PlanContext) -> CheckResult:
    """Where Kueue puts a CPU-only and a 1-GPU pod that name no pool, per namespace with a
    LocalQueue `default`, on idle queues: CPU-only on a GPU pool while there is a CPU pool, or
    a GPU pod borrowing while the team has nominal GPUs where it could land, is a finding."""
    m = K.read(o.doc for o in ctx.objects)
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for (ns, lq), cq_name in sorted(m.local.items()):
        q = m.queues.get(cq_name)
        if lq != DEFAULT_QUEUE or q is None:
            continue
        gpu_flavors = {f for f in q.flavors if _gpu_flavor(m, f)}
        texts = []
        for kind, need in (("CPU-only", CPU_PROBE), ("1-GPU", GPU_PROBE)):
            ps = K.PodSet("main", 1, need)
            got = K.admit(m, ns, lq, "", [ps]).assignment or K.Assignment({}, [])
            flavor = got.flavor
            how = (
                "no flavor fits"
                if flavor is None
                else f"{flavor}, " + ("borrowing" if got.borrowing else "within nominal quota")
            )
            texts.append(f"{kind} -> {how}")
            data.append({"namespace": ns, "clusterQueue": q.name, "probe": kind,
                         "flavor": flavor, "borrows": bool(got.borrowing)})  # fmt: skip
            why = ""
            if kind == "CPU-only" and flavor in gpu_flavors:
                cpu = [f for f in q.flavors if f not in gpu_flavors]
                if cpu:
                    why = (
                        f"a CPU-only job that names no pool lands on GPU pool {flavor}, not on "
                        f"CPU pool {cpu[0]} (Kueue tries flavors in order: "
                        f"{', '.join(q.flavors)})"
                    )
            elif kind == "1-GPU" and flavor is not None and got.borrowing:
                own = [
                    f
                    for f in q.flavors
                    if f != flavor
                    and K.Quotas.nominal(q, f, GPU) >= 1
                    and K.flavor_fits_podset(ps, m.flavors.get(f), False, f) is None
                ]
                if own:
                    why = (
                        f"a 1-GPU job that names no pool borrows in {flavor} although team "
                        f"queue {q.name} has nominal GPUs in {own[0]} (Kueue tries flavors "
                        f"in order: {', '.join(q.flavors)}; whenCanBorrow "
                        f"{q.fungibility.when_can_borrow})"
                    )
            if why:
                ident = f"ClusterQueue/{q.name}"
                findings.append(
                    Finding(ident, RULE_PLACEMENT, f"namespace {ns}: {why}",
                            RULES[RULE_PLACEMENT], names=frozenset({ident, q.name}))
                )  # fmt: skip
        lines.append(f"namespace {ns} (ClusterQueue {q.name}): " + "; ".join(texts))
    return CheckResult(findings, [Section(PLACEMENT_TITLE, lines, data)] if lines else [])


def _gpu_flavor(m: K.Kueue, f: str) -> bool:
    """Some queue or cohort has GPU quota in it."""
    return any(K.Quotas.nominal(q, f, GPU) > 0 for q in m.queues.values()) or any(
        per.get(f, {}).get(GPU, 0) > 0 for per in m.shared.values()
    )


def amount(resource: str, v: Fraction) -> str:
    """An amount in the job's own terms: 8 GPUs, 94.8 cores, 64Gi."""
    if resource == GPU:
        return f"{figure(GPU, v)} GPU{'s' if v != 1 else ''}"
    if resource == "cpu":
        return f"{figure('cpu', v)} cores"
    return figure(resource, v)


def summary(workloads: list[Workload]) -> str:
    waiting = [w for w in workloads if w.at_once != "admitted"]
    if not waiting:
        return f"all {len(workloads)} job(s) are admitted at once"
    whys = "; ".join(f"{w.team}/{w.job} {_waiting_text(w)}" for w in waiting)
    return f"{len(waiting)} of {len(workloads)} job(s) do not start at once: {whys}"


def pods_grace(templates: Iterable[Any]) -> float:
    """The most terminationGracePeriodSeconds over an object's pod templates (each a
    `PodTemplate`, its `spec` the pod's): how long its pods may take to stop once Kueue
    preempts it (the kubelet's SIGKILL comes no later)."""
    graces = [t.spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE) for t in templates]
    return float(max(graces, default=DEFAULT_GRACE))


def preempt_words(preempts: Iterable[tuple[str, float]]) -> str:
    """What a start by preemption means: Kueue admits the job in the cycle it preempts, and
    its pods start once the preempted jobs' pods are gone (their nodes' GPUs are theirs until
    then; Kueue releases a Job's quota when it has no active pod, KEP-6143 in kueue's keps/),
    which takes up to their terminationGracePeriodSeconds."""
    preempts = list(preempts)
    names = " and ".join(n for n, _ in preempts)
    most = max(g for _, g in preempts)
    return (
        f"it preempts {names}: its pods start once {names}'s pods are gone, within their "
        f"terminationGracePeriodSeconds ({duration_text(most)})"
    )


def start_text(admitted: float, bound: bool, preempts: Iterable[tuple[str, float]] = ()) -> str:
    """A waiting job's expected start, `admitted` seconds after submission when Kueue admits
    it (`bound`: "within" where it is an upper bound, a run ahead timed by its ceiling that may
    end sooner; "after" where every run ahead is an estimate): its pods start then, or where
    its admission preempts jobs ((job, grace) each), once their pods are gone: up to their
    terminationGracePeriodSeconds later, which the figure adds (`preempt_words`). The one
    wording of the plan's section and verdict (plan/verdict.py `admission`)."""
    preempts = list(preempts)
    most = max((g for _, g in preempts), default=0.0)
    at = "within" if bound else "after"
    text = f"expected to start {at} {duration_text(admitted + most)}"
    if preempts:
        text += f" (admitted {at} {duration_text(admitted)}; {preempt_words(preempts)})"
    return text


def _waiting_text(w: Workload) -> str:
    text = w.reason_at_once or w.reason or "waits"
    if w.at_once == "never":
        return text
    if w.started is not None:
        text += f"; {start_text(w.started - w.submitted, w.start_bound, w.first_preempts)}"
    else:
        text += (
            "; expected start unknown (a job ahead has no expected duration, or it is more "
            "than 90 days away)"
        )
    return text


@dataclass(frozen=True)
class Queued:
    """A workload of one live ClusterQueue as its team sees it (trainforge.live.wait): what it
    asks in the flavor, how long it runs (a running one: what it has left), whether that is
    a ceiling; a waiting one's positionInClusterQueue and priority."""

    name: str
    need: dict[str, Fraction]
    seconds: float | None = None
    ceiling: bool = False
    running: bool = False
    position: int = 0
    priority: int = 0
    grace: float = float(DEFAULT_GRACE)  # its pods' terminationGracePeriodSeconds (`pods_grace`)


@dataclass(frozen=True)
class Start:
    """`queue_start`'s answer: seconds from now (None: not within 90 days), whether that is an
    upper bound (`start_text`), whether a waiting one fits at once without preempting (then
    what holds it is outside the team's view), and (job, grace) of each job its admission
    preempts (`preempt_words`: its pods start once theirs are gone)."""

    seconds: float | None
    bound: bool
    room_now: bool
    preempts: tuple[tuple[str, float], ...] = ()


def queue_start(queue: K.ClusterQueue, flavor: str, holders: list[Queued], job: Queued) -> Start:
    """When `job` starts on `queue`'s nominal quota in `flavor` alone (no cohort: other teams'
    use is not visible to a team), behind `holders`, through this simulation: the live
    estimate is the plan's for the same queue."""
    queue = replace(queue, cohort=None, usage={})
    s = Simulation({queue.name: queue}, {})
    items: list[Workload] = []
    for i, h in enumerate([*holders, job]):
        order = i - 10**6 if h.running else h.position
        w = Workload(h.name, queue.name, "", order, queue=queue.name, flavor=flavor)
        w.need, w.priority, w.duration, w.ceiling = h.need, h.priority, h.seconds, h.ceiling
        w.grace = h.grace
        if h.running:
            s.admit(w)
        items.append(w)
    s.run_timed(items)
    waiting = [w for w, h in zip(items, [*holders, job], strict=True) if not h.running]
    mine = items[-1]
    room = any(w.started == 0 and not w.first_preempts for w in waiting)
    return Start(mine.started, mine.start_bound, room, tuple(mine.first_preempts))


def _reclaimers(owners: list[str]) -> str:
    if not owners:
        return "nobody reclaims it (what it borrows is the cohort's own share)"
    return (
        f"team {' or '.join(owners)} may reclaim it at any time: a job of theirs that fits "
        "their nominal quota in this pool preempts it (it resumes from its checkpoint)"
    )


def _section(workloads: list[Workload], sim: Simulation, warnings: list[str]) -> Section:
    lines: list[str] = [f"quota: {x}" for x in warnings] + [summary(workloads)]
    data = []
    for w in workloads:
        state, reason = _outcome(w)
        borrowing = w.borrowed_at_once
        q = sim.queues.get(w.queue or "")
        owners = sim.quotas.reclaimers(q, w.flavor or "", borrowing) if q and borrowing else []
        if state == "runs":
            text = f"runs on {w.flavor}"
            if borrowing and q is not None:
                lent = ", ".join(amount(r, v) for r, v in sorted(borrowing.items()))
                text += f", borrowing {lent} from cohort {q.cohort}; " + _reclaimers(owners)
            else:
                text += " within its nominal quota"
            if w.first_preempts:
                text += f"; {preempt_words(w.first_preempts)}"
        else:
            text = _waiting_text(w)
        if w.queue_name == DEFAULT_QUEUE:
            text += " (no queue label: through LocalQueue default)"
        if w.duration is not None and state != "never":
            runs = "at most " if w.ceiling else "~"
            text += f"; runs {runs}{duration_text(w.duration)}{w.duration_note}"
        label = f"{w.team}/{w.job}"
        prio = f" [{w.priority_class}]" if w.priority_class else ""
        lines.append(f"{label}{prio}: {text}")
        if w.sizing:
            lines.append(f"  sizing: {w.sizing}")
        never = state == "never"
        data.append({
            "job": w.job, "team": w.team, "queue": w.queue, "flavor": w.flavor,
            "priority": w.priority_class, "state": state,
            "borrowing": {r: str(v) for r, v in borrowing.items()},
            "cohort": q.cohort if q is not None else None, "reclaimers": owners,
            "preemptedBy": w.preempted_by, "reason": reason, "sizing": w.sizing,
            # Kueue's admission (the cost's spans begin there); where it preempts, its pods
            # start up to preemptedStopSeconds later (`start_text`)
            "expectedStartSeconds": None if never else w.started,
            "expectedStartIsBound": w.start_bound,  # at the latest, not about then
            "expectedEndSeconds": None if never or w.started is None else w.ends,
            "durationSeconds": w.duration,
            "preempts": [n for n, _ in w.first_preempts],
            "preemptedStopSeconds": max((g for _, g in w.first_preempts), default=None),
        })  # fmt: skip
    return Section(QUEUE_TITLE, lines, data)


def submitted_requests(
    ctx: PlanContext, doc: dict[str, Any], pod: dict[str, Any]
) -> dict[str, Fraction]:
    """One pod's requests of undeclared workload `doc` as Kueue counts them, with its
    namespace's LimitRanges (an SDK job naming none is not "empty")."""
    ns = (doc.get("metadata") or {}).get("namespace") or ""
    asks = K.pod_requests(pod.get("spec") or {}, limit_ranges(ctx, ns))
    return {r: v for r, v in asks.items() if r in RESOURCES}


def admit_submitted(
    ctx: PlanContext,
    doc: dict[str, Any],
    pod: dict[str, Any],
    pods: int,
    per_pod: dict[str, Fraction] | None = None,
) -> Workload:
    """Would Kueue admit undeclared `doc`, `pods` pods like `pod`, alone on idle queues
    (`admit_object`), and would its pods, with what Kueue adds, tolerate the taints of the
    pool the flavor selects? Admitted onto nodes it cannot land on, it holds quota and never
    starts. `per_pod`: the caller's `submitted_requests`, when it has them."""
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace") or ""
    labels = dict(meta.get("labels") or {})
    spec = pod.get("spec") or {}
    if per_pod is None:
        per_pod = submitted_requests(ctx, doc, pod)
    need = {r: v * pods for r, v in per_pod.items() if v}
    labels.setdefault(JOB_LABEL, str(meta.get("name")))
    checked, name = None, "main"
    if doc.get("kind") == trainjob.KIND:
        checked = K.trainjob_podsets(doc, runtime_docs(ctx), limit_ranges(ctx, ns))
        name = trainjob.REPLICATED_JOB  # Kueue's name of the trainer's pod set
    docs = [o.doc for o in ctx.objects]
    admission = admit_object(docs, ns, labels, spec, need, pods, checked, name)
    w = admission.workload
    if w.state == "never" or w.flavor is None:
        return w
    pool_taints = _pool_taints(ctx, admission.node_selector)
    tolerated = [*(spec.get("tolerations") or []), *admission.tolerations]
    blocked = T.untolerated(pool_taints, tolerated, T.schedules)
    if blocked is not None:
        w.state = "never"
        w.reason = (
            f"admitted on flavor {w.flavor}, but its pods do not tolerate the pool's taint "
            f"{blocked.get('key')}"
        )
        return w
    w.state, w.reason = "admitted", ""
    return w


# how an SDK program writes fewer pods, or fewer GPUs per pod (kubeflow 0.4.1 CustomTrainer)
SDK_SAID = {
    "workers": "CustomTrainer num_nodes={}",
    "gpusPerWorker": 'resources_per_node {{"gpu": {}}}',
}


def submitted_fix(
    ctx: PlanContext, w: Workload, per_pod: Mapping[str, Fraction], pod: Mapping[str, Any]
) -> str:
    """The never-admitted fix of undeclared job `w` (`admit_submitted`), `w.pods` pods like
    `pod` each asking `per_pod`: `workload_fix` on the plan's contracts and rendered queues,
    on the first flavor its pods may take as Kueue's flavor assigner matches them (their node
    selector and tolerations: `K.flavor_fits_podset` on `object_podset`, what the admission
    read), fewer pods in the SDK's words."""
    contracts = getattr(ctx.declared, "contracts", None) or []
    docs = [o.doc for o in ctx.objects]
    need = {r: v * w.pods for r, v in per_pod.items() if v}
    podset = object_podset(docs, w.namespace, pod.get("spec") or {}, need, w.pods)
    return workload_fix(contracts, K.read(docs), w, per_pod, SDK_SAID, podset)


def workload_fix(
    contracts: list[Any],
    m: K.Kueue,
    w: Workload,
    per_pod: Mapping[str, Fraction],
    said: Mapping[str, str] | None = None,
    podset: K.PodSet | None = None,
) -> str:
    """The never-admitted fix of a Workload read from its pods (an SDK job in the plan, any
    job in `trainforge why`), `w.pods` pods each asking `per_pod`, its initializers'
    `w.init_need` beside them: `quota_change`'s on the first flavor of its ClusterQueue its
    pods may take (a GPU pool where it asks GPUs), sized as a job spec of its pods, the keys
    named the stack's (`contracts`: the stack's platform contract). "": no team, pool or
    quota change to name. `podset`: its pods' pod set, whose node selector, tolerations and
    topology request rule out flavors (`K.flavor_fits_podset`). The one fix the plan and `why`
    print."""
    team = next(
        (t for c in contracts for t in c.teams.values() if t.namespace == w.namespace), None
    )
    q = m.queues.get(w.queue or "")
    if team is None or q is None or not contracts:
        return ""
    gpus = int(per_pod.get(GPU, 0))
    pools = {n: p for c in reversed(contracts) for n, p in c.pools.items()}
    tas = K.only_tas(q, m.flavors)
    pool = next(
        (p for f in q.flavors if (p := pools.get(f)) is not None and (p.gpus_per_node or not gpus)
         and (podset is None or K.flavor_fits_podset(podset, m.flavors.get(f), tas, f) is None)),
        None,
    )  # fmt: skip
    if pool is None:
        return ""
    spec = JobSpec.model_construct(
        name=w.job, team=team.name, pool=pool.name, workers=w.pods, gpus_per_worker=gpus,
        cpu=str(float(per_pod.get("cpu", 0))), memory=str(int(per_pod.get("memory", 0))),
    )  # fmt: skip
    target = contracts[0].target(team.name, pool.name)
    need = {r: v * w.pods for r, v in per_pod.items() if v}
    beside = w.init_need.get(pool.name, {})  # its initializers' there (`admit_object`)
    return quota_change(K.Quotas(m.queues, m.shared), q, need, w.pods, spec, target, said, beside)


def _pool_taints(ctx: PlanContext, node_labels: dict[str, str]) -> list[dict[str, Any]]:
    """The taints of the NodePool whose template carries `node_labels` (none: no match)."""
    for o in ctx.objects:
        if o.kind != "NodePool":
            continue
        tmpl = (o.doc.get("spec") or {}).get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        if node_labels and all(labels.get(k) == v for k, v in node_labels.items()):
            return list((tmpl.get("spec") or {}).get("taints") or [])
    return []
