"""What a job, a team's quota and the always-on platform cost (docs/cost.md), from the dated
price facts: a price the table lacks stays None ("unknown"), and so does any total needing it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from trainforge.core.contract import NodeType, PoolFacts, TeamFacts
from trainforge.core.labels import POOL_LABEL
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import capacity, packing, quota
from trainforge.jobs.duration import Duration, duration_text, expected_duration
from trainforge.jobs.spec import JobSpec
from trainforge.plan import price_facts as P
from trainforge.plan import resource_types as T
from trainforge.plan.price_facts import HOURS_PER_MONTH, usd

# --- which nodes a job gets -------------------------------------------------------------------


def pod_size(req: capacity.PodRequest) -> str:
    """ "1 GPU, 4 CPU, 16Gi"."""
    gib = req.memory_mib / 1024
    mem = f"{int(gib)}Gi" if gib.denominator == 1 else f"{float(gib):.1f}Gi"
    gpus = [f"{req.gpus} GPU"] if req.gpus else []
    return ", ".join([*gpus, f"{req.cpu_m / 1000:g} CPU", mem])


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def cents(value: float | None) -> float | None:
    """A figure as the report prints it (`usd`: to the cent). Every total adds these, so a
    total is the sum of the figures printed above it (dev: 3 x $0.38 + $1.05 = $2.19/h, not
    the $2.20 of the unrounded $0.384s)."""
    return None if value is None else round(value, 2)


class RowGroups(NamedTuple):
    """The jobs' rows by admission (`JobCost.admission`; a base report's row without one runs):
    the one split every sum and list of the rows is made from (`row_totals`, the verdict's
    cost_totals), so a figure and the jobs named beside it count the same jobs."""

    running: list[dict[str, Any]]  # admitted at once: their $/h adds up
    counted: list[dict[str, Any]]  # admitted at all (waiting ones too): their runs are paid
    waiting: list[dict[str, Any]]  # admitted later or never: listed, not in the $/h


def row_groups(rows: list[dict[str, Any]]) -> RowGroups:
    """`rows` (`CostReport.rows`, or a base report's JSON) split by admission."""
    admission = [(r, r.get("admission", "runs")) for r in rows]
    return RowGroups(
        running=[r for r, a in admission if a == "runs"],
        counted=[r for r, a in admission if a != "never"],
        waiting=[r for r, a in admission if a != "runs"],
    )


def row_totals(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The sums of the jobs' rows (`CostReport.rows`, or a base report's JSON) that the report
    and the verdict print, each row's figure to the cent: what runs at once per hour and its
    part on node groups' always-on nodes; the runs of every job admitted at all (waiting ones
    too) and their part on those nodes. A row without a figure adds nothing (named apart)."""
    running, counted, _ = row_groups(rows)

    def total(of: list[dict[str, Any]], key: str) -> float:
        return sum(cents(v) or 0.0 for r in of if isinstance(v := r.get(key), int | float))

    return {
        "runningPerHour": total(running, "onDemandPerHour"),
        "runningInFixedPerHour": total(running, "inFixedPerHour"),
        "runCosts": total(counted, "runCost"),
        "runCostInFixed": total(counted, "runCostInFixed"),
    }


def _unknown_first(value: float | None) -> tuple[bool, float]:
    """A sort key where an unknown figure is the highest (it could be)."""
    return (value is None, value or 0.0)


@dataclass(frozen=True)
class NodeChoice:
    """`nodes` of `instance_type` for a job and why; `more`: other types the same launch makes
    (a last, part-full NodeClaim may launch a smaller type; trainforge.jobs.packing)."""

    instance_type: str
    nodes: int
    pods_per_node: int
    on_demand: P.Price | None  # per node
    spot: P.Price | None  # per node
    reason: str
    # the run on this type (jobs.duration, `PoolFacts.only`); with `more`, the slowest's
    duration: Duration | None = None
    more: tuple[NodeChoice, ...] = ()

    @property
    def parts(self) -> tuple[NodeChoice, ...]:
        return (self, *self.more)

    @property
    def hourly_on_demand(self) -> float | None:
        return _sum([p.on_demand and p.nodes * p.on_demand.usd for p in self.parts])

    @property
    def hourly_spot(self) -> float | None:
        return _sum([p.spot and p.nodes * p.spot.usd for p in self.parts])

    @property
    def run_cost(self) -> float | None:
        hourly, d = self.hourly_on_demand, self.duration
        if hourly is None or d is None or d.seconds is None:
            return None
        return hourly * d.seconds / 3600

    def nodes_words(self) -> str:
        """ "g5.48xlarge x1 + g5.12xlarge x1"."""
        return " + ".join(f"{p.instance_type} x{p.nodes}" for p in self.parts)

    @property
    def types(self) -> str:
        return " + ".join(p.instance_type for p in self.parts)

    @property
    def timed_on(self) -> str:
        """The slowest type's (every rank waits for it; an unknown run counts as slowest)."""
        return max(
            self.parts, key=lambda p: _unknown_first(p.duration and p.duration.seconds)
        ).instance_type

    @property
    def node_count(self) -> int:
        return sum(p.nodes for p in self.parts)

    def run_words(self) -> str:
        """ "g5.xlarge x2: 46 min on 2 x A10G, $1.55 ($2.01/h)"."""
        d = self.duration
        run = "unknown run" if d is None or d.seconds is None else duration_text(d.seconds)
        on = f" on {d.hardware}" if d is not None and d.hardware else ""
        hourly = usd(self.hourly_on_demand)
        return f"{self.nodes_words()}: {run}{on}, {usd(self.run_cost)} ({hourly}/h)"

    def price_words(self) -> str:
        """ "2 x g5.12xlarge at $5.67/h" per type."""
        return " + ".join(
            f"{p.nodes} x {p.instance_type} at {usd(p.on_demand.usd if p.on_demand else None)}/h"
            for p in self.parts
        )

    def describe(self) -> str:
        """ "g5.xlarge x2 $2.01/h"."""
        return f"{self.nodes_words()} {usd(self.hourly_on_demand)}/h"


def node_options(job: JobSpec, pool: PoolFacts, region: str) -> list[NodeChoice]:
    """Every type of the pool that holds a pod of the job, in the pool's order, as if the job
    ran on it alone (its nodes, prices and run, computed once per type)."""
    fitting = [
        (t, n) for t in capacity.pool_types(pool) if (n := capacity.pods_per_node(job, pool, t)) > 0
    ]
    return [
        NodeChoice(t.name, math.ceil(job.workers / n), n, P.ec2_on_demand(region, t.name),
                   P.ec2_spot(region, t.name), "", expected_duration(job, pool, t.name))
        for t, n in fitting
    ]  # fmt: skip


def _launch(options: list[NodeChoice], pk: packing.Packing, picks: list[str]) -> NodeChoice | None:
    """A packing's nodes when each NodeClaim launches its type of `picks`, grouped by type in
    launch order, timed on the slowest."""
    by_type = {o.instance_type: o for o in options}
    groups: dict[str, tuple[int, int]] = {}  # type -> (nodes, pods on its first node)
    for claim, t in zip(pk.claims, picks, strict=True):
        if t not in by_type:
            return None
        nodes, per = groups.get(t, (0, len(claim.pods)))
        groups[t] = (nodes + 1, per)
    if not groups:
        return None
    parts = [replace(by_type[t], nodes=n, pods_per_node=per) for t, (n, per) in groups.items()]
    launch = replace(parts[0], more=tuple(parts[1:]))
    slowest = next(p for p in parts if p.instance_type == launch.timed_on)
    return replace(launch, duration=slowest.duration)


def launch_prices(region: str) -> Callable[[str], float | None]:
    """What every reader ranks a NodeClaim's launch by (`packing.launch`): on-demand $/h."""
    return lambda t: (p := P.ec2_on_demand(region, t)) and p.usd


def choose_nodes(job: JobSpec, pool: PoolFacts, region: str, gang: capacity.Gang | None = None):
    """Where the job's pods land: a Karpenter pool's NodeClaims (trainforge.jobs.packing), each
    launching its cheapest type; a managed node group's types in the order listed. `gang`: its
    object's pods (`capacity.gang`; None: `capacity.job_gang`)."""
    return _choose(job, pool, region, gang)[0]


def _choose(
    job: JobSpec, pool: PoolFacts, region: str, gang: capacity.Gang | None = None
) -> tuple[NodeChoice | None, NodeChoice | None]:
    """(the likely nodes, the dearest run a Karpenter pool may launch instead, each type at its
    on-demand price, the ceiling of its spot price): each NodeClaim's types all go to EC2 Fleet,
    a spot launch is EC2's price-capacity-optimized pick among them (any type whose spot price
    is not above the cheapest on-demand one), an on-demand one the lowest price, and a type
    without capacity is skipped on the next try (karpenter-provider-aws v1.14.1
    pkg/providers/instance/types.go, instance.go)."""
    options = node_options(job, pool, region)
    if not options:
        return None, None
    g = gang or capacity.job_gang(job, pool)
    sizes = [pod_size(p) for p in g.pods]
    what = " + ".join(f"{sizes.count(s)} pod(s) of {s}" for s in dict.fromkeys(sizes)) or "0 pod(s)"
    if pool.kind == "node-group":
        reason = (
            f"managed node group: launches its types in the order listed; {what} (its "
            "desiredSize nodes are also in the platform's fixed cost: they run with or without jobs)"
        )
        return replace(options[0], reason=reason), None
    pk = capacity.launch(pool, g)
    launches = pk.launches(launch_prices(region))
    likely = _launch(options, pk, [x.instance_type for x in launches])
    if likely is None:
        return None, None
    spread = "" if g.most is None else f", at most {g.most} per node (its pod template)"
    reason = (
        f"Karpenter packs {what}{spread} into {pk.words()} (the types that hold all of its "
        "pods) and launches the cheapest of each: "
    )
    unpriced = sorted(
        {t for c in pk.claims for t in c.candidates if P.ec2_on_demand(region, t) is None}
    )
    if likely.hourly_on_demand is None:
        # which type launches is unknown only where its NodeClaim had others to rank it against
        reason += (
            f"no price for {', '.join(unpriced)} in {region}, so which one is unknown "
            f"(first listed shown: {likely.nodes_words()})"
            if any(x.unranked for x in launches)
            else f"{likely.nodes_words()} at an unknown price (no price for "
            f"{', '.join(unpriced)} in {region})"
        )
        if any(P.ec2_not_listed(region, t) for t in unpriced):
            reason += "; " + "; ".join(P.why_unpriced(region, t) for t in unpriced)
    else:
        reason += likely.describe()
        if unpriced:
            reason += f"; unknown price: {', '.join(unpriced)} (could be cheaper)"
    if pk.unplaced:
        why = capacity.launch_stopped(pool, g) or pk.why
        reason += f"; {len(pk.unplaced)} pod(s) get no node: {why}"
    # per NodeClaim, the candidate whose run would cost most, each at its on-demand price
    by_type = {o.instance_type: o for o in options}
    dear = [
        max((t for t in c.candidates if t in by_type), default="",
            key=lambda t: _unknown_first(replace(by_type[t], nodes=1).run_cost))
        for c in pk.claims
    ]  # fmt: skip
    worst = _launch(options, pk, dear)
    if likely.run_cost is None or worst is None or pool.kind != "karpenter":
        worst = None
    if worst and worst.run_cost is not None and worst.run_cost <= (likely.run_cost or 0.0):
        worst = None
    return replace(likely, reason=reason), worst


def plan_region(inventory: Any) -> str:
    """The stack's `aws:region` (as the fleet reads a worker's), else the mocks' default."""
    from trainforge.plan.fleet import region  # noqa: PLC0415 - pulls in the runner
    from trainforge.plan.mocks import DEFAULT_REGION  # noqa: PLC0415 - what the plan used

    return region(inventory.config) or DEFAULT_REGION


# --- per job, per team ----------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerRun:
    """A fleet manager's job as one worker runs it (MultiKueue dispatches it; the manager's
    pools start no node): the flavor's pool there, its region, the cost (None: `why`)."""

    worker: str
    pool: str
    region: str | None
    cost: JobCost | None
    why: str

    @property
    def hourly(self) -> float | None:
        return self.cost and self.cost.hourly

    @property
    def run_cost(self) -> float | None:
        return self.cost and self.cost.run_cost

    def to_json(self) -> dict[str, Any]:
        base = self.cost.to_json() if self.cost is not None else {}
        return {**base, "worker": self.worker, "pool": self.pool, "region": self.region,
                "cost": self.why}  # fmt: skip


def _dearest(values: list[float | None]) -> float | None:
    """The highest figure, None when any is unknown (it could be the highest)."""
    if not values or None in values:
        return None
    return max(v for v in values if v is not None)


@dataclass(frozen=True)
class JobCost:
    name: str
    team: str
    pool: str
    resource: str  # namespace/Kind/name of the job's object, for findings and waivers
    choice: NodeChoice | None
    spot_possible: bool
    duration: Duration
    # the queue simulation's (plan/checks/queues.py): "runs" (at once), "waits" or "never"
    admission: str = "runs"
    admission_reason: str = ""
    worst: NodeChoice | None = None  # a dearer run the pool may launch instead (`_choose`)
    # A fleet manager's job: one run per worker that admits it (None: any other stack's). Its
    # figures, `choice` and `duration` are the dearest worker's: a cap must hold wherever it runs.
    runs: tuple[WorkerRun, ...] | None = None
    no_node: str = ""  # why the pool's limits stop every NodeClaim (`capacity.launch_stopped`)
    # when its pods hold nodes, in seconds after submission: the queue simulation's admissions
    # (start, end); a preempted job's pods are gone until it is readmitted, so its nodes are
    # free in between. End None: until its run is done; (): its start is unknown (behind a
    # run of unknown length). A job that runs at once holds them from 0.
    spans: tuple[tuple[float, float | None], ...] = ((0.0, None),)

    @property
    def start(self) -> float | None:
        """Seconds after submission its run starts (first admission; None: unknown)."""
        return self.spans[0][0] if self.spans else None

    def held(self) -> list[tuple[float, float]]:
        """`spans` with every end known (an open one ends when what is left of the run is
        done; never, where the run's length is unknown), those of no length left out."""
        out, left = [], self.duration.seconds
        for begin, end in self.spans:
            if end is None:
                end = math.inf if left is None else begin + max(left, 0.0)
            if end > begin:  # one preempted in the cycle that admitted it held nothing
                out.append((begin, end))
            left = None if left is None else left - (end - begin)
        return out

    @property
    def why_no_node(self) -> str:
        if self.no_node:
            return f"no pod gets a node: {self.no_node}"
        return f"no instance type of {self.pool} fits a pod"

    @property
    def dispatched(self) -> bool:
        return self.runs is not None

    def dearest_run(self) -> WorkerRun | None:
        """The worker where the run (else the $/hour) costs most; unknown counts as dearest."""
        if not self.runs:
            return None
        return max(
            self.runs, key=lambda r: (*_unknown_first(r.run_cost), *_unknown_first(r.hourly))
        )

    @property
    def runs_at_once(self) -> bool:
        return self.admission == "runs"

    @property
    def hourly(self) -> float | None:
        """On-demand $/hour with every pod running: the ceiling the caps judge (spot is never
        dearer)."""
        if self.runs is not None:
            return _dearest([r.hourly for r in self.runs])
        return None if self.choice is None else self.choice.hourly_on_demand

    @property
    def run_cost(self) -> float | None:
        """$/hour x expected run (`duration.source`: from where; a deadline's is a ceiling)."""
        if self.runs is not None:
            return _dearest([r.run_cost for r in self.runs])
        if self.hourly is None or self.duration.seconds is None:
            return None
        return self.hourly * self.duration.seconds / 3600

    @property
    def month_cost(self) -> float | None:
        """One run's share of a month: at most a month of $/hour; 0 if never admitted."""
        if self.admission == "never":
            return 0.0
        if self.runs is not None:
            return _dearest([r.cost.month_cost if r.cost else None for r in self.runs])
        if self.hourly is None or self.duration.seconds is None:
            return None
        return self.hourly * min(self.duration.seconds / 3600, HOURS_PER_MONTH)

    def missing_price(self, region: str) -> str | None:
        """The price the cost lacks ("g5.12xlarge in us-west-2"); a fleet's: its workers' first."""
        if self.runs is not None:
            lacks = [r.cost.missing_price(r.region) for r in self.runs if r.cost and r.region]
            return next((m for m in lacks if m), None)
        if self.choice is None or self.choice.on_demand is not None:
            return None
        return f"on-demand {self.choice.instance_type} in {region}"

    def fleet_line(self) -> str | None:
        """A fleet manager's job: where it may run, its figures' range, which one counts."""
        if self.runs is None:
            return None
        if not self.runs:
            return "no worker of the fleet admits it (the fleet section says why): no cost"
        names = ", ".join(r.worker for r in self.runs)
        head = (
            f"MultiKueue runs it on the first worker that admits it ({names}), never on the "
            "manager's own pools"
        )
        if len(self.runs) == 1:
            return f"{head}: its figures are {self.runs[0].worker}'s"

        def dearest(figure: Callable[[WorkerRun], float | None]) -> str:
            values = [(r, figure(r)) for r in self.runs or ()]
            if lack := [r.worker for r, v in values if v is None]:
                return f"unknown (unknown on {', '.join(lack)})"
            worker, value = max(values, key=lambda x: x[1] or 0)
            return f"{worker.worker}'s {usd(value)}"

        return (
            f"{head}: {_range([r.hourly for r in self.runs])}/h, run cost "
            f"{_range([r.run_cost for r in self.runs])}; caps, budgets and totals count the "
            f"dearest: $/h {dearest(lambda r: r.hourly)}, run cost "
            f"{dearest(lambda r: r.run_cost)}"
        )

    def to_json(self) -> dict[str, Any]:
        c, w = self.choice, self.worst
        return {
            "name": self.name,
            "team": self.team,
            "pool": self.pool,
            "resource": self.resource,
            "instanceType": c.types if c else None,
            "nodes": c.node_count if c else None,
            "launch": " + ".join(f"{p.nodes} x {p.instance_type}" for p in c.parts) if c else None,
            "nodeChoice": c.reason if c else self.why_no_node,
            "onDemandPerNodeHour": c.on_demand.usd if c and c.on_demand else None,
            "onDemandPerHour": self.hourly,
            "spotPerHour": c.hourly_spot if c else None,
            "spotPossible": self.spot_possible,
            "durationSeconds": self.duration.seconds,
            "durationSource": self.duration.source,
            "durationDetail": self.duration.detail,
            "runCost": self.run_cost,
            "runCostBasis": self.duration.source,
            "monthCost": self.month_cost,
            "admission": self.admission,
            "admissionReason": self.admission_reason,
            "worstCase": w
            and {
                "instanceType": w.instance_type,
                "nodes": w.nodes,
                "onDemandPerHour": w.hourly_on_demand,
                "durationSeconds": w.duration and w.duration.seconds,
                "durationDetail": w.duration and w.duration.detail,
                "runCost": w.run_cost,
            },
            "workers": None if self.runs is None else [r.to_json() for r in self.runs],
            "dearestWorker": (d.worker if (d := self.dearest_run()) else None),
        }

    def launch_line(self) -> str | None:
        """The likely type and the dearer worst case (None: the pool launches none dearer)."""
        if self.worst is None or self.choice is None:
            return None
        return (
            f"likely {self.choice.run_words()} (the cheapest); worst case "
            f"{self.worst.run_words()} (a spot launch is EC2's pick by price and capacity, and "
            "a type without capacity is skipped)"
        )


def _range(values: list[float | None]) -> str:
    """ "$1.61 to $2.01", "$0.38 to unknown", "$1.61" (all alike)."""
    known = [v for v in values if v is not None]
    low = usd(min(known)) if known else "unknown"
    high = "unknown" if None in values else usd(max(known))
    return low if low == high else f"{low} to {high}"


# a fleet manager's job's run where no worker of the fleet prices it
NO_WORKER_RUN = Duration(None, "unknown", "unknown: no worker of the fleet prices it")


def fleet_job_cost(job: JobCost, runs: tuple[WorkerRun, ...]) -> JobCost:
    """A fleet manager's row `job`, priced on the workers MultiKueue may run it on: the
    dearest run's nodes and duration."""
    dear = replace(job, runs=runs).dearest_run()
    cost = dear.cost if dear is not None else None
    run = cost.duration if cost else NO_WORKER_RUN
    return replace(job, choice=cost and cost.choice, duration=run,
                   spot_possible=bool(cost and cost.spot_possible), worst=None, runs=runs)  # fmt: skip


def job_cost(
    job: JobSpec,
    pool: PoolFacts,
    region: str,
    resource: str,
    admission: tuple[str, str] = ("runs", ""),
    gang: capacity.Gang | None = None,
) -> JobCost:
    """The job on `pool` in `region`: the nodes for its gang (`gang`: as its object has it,
    `capacity.gang`; None: `capacity.job_gang`), its run on them, and the worst case."""
    g = gang or capacity.job_gang(job, pool)
    choice, worst = _choose(job, pool, region, g)
    duration = choice.duration if choice and choice.duration else expected_duration(job, pool)
    return JobCost(job.name, job.team, pool.name, resource, choice,
                   "spot" in (pool.capacity_types or (pool.capacity_type,)), duration,
                   *admission, worst, no_node="" if choice else capacity.launch_stopped(pool, g) or "")  # fmt: skip


@dataclass(frozen=True)
class QuotaCeiling:
    """The most a team's quota lets it spend per hour: every GPU at the priciest $/GPU of the
    GPU types, every CPU at the priciest $/vCPU of the CPU-only types (an upper bound)."""

    hourly: float | None
    detail: str
    unlimited: bool = False

    @property
    def monthly(self) -> float | None:
        return None if self.hourly is None else self.hourly * HOURS_PER_MONTH


def _worst_rate(
    pools: Iterable[tuple[PoolFacts, str]], per_unit: Callable[[NodeType], int]
) -> tuple[float | None, str, list[str]]:
    """(the highest $/unit-hour of the pools' types, each in its pool's region, that type, the
    unpriced types), a type named with its region when the pools span several."""
    pools = list(pools)
    several = len({r for _, r in pools}) > 1
    rates: list[tuple[float | None, str]] = []
    unknown: list[str] = []
    for pool, region in pools:
        for t in (t for t in capacity.pool_types(pool) if per_unit(t)):
            name = f"{t.name} in {region}" if several else t.name
            if (price := P.ec2_on_demand(region, t.name)) is None:
                unknown.append(name)
            else:
                rates.append((price.usd / per_unit(t), name))
    rate, worst = max(rates, key=lambda r: r[0] or 0.0, default=(None, ""))
    return rate, worst, unknown


def _cpu_pool_cores(team: TeamFacts, pools: list[PoolFacts]) -> float | None:
    """The vCPUs the team's pods may hold at once in the CPU-only `pools`, by the quota model:
    with Kueue, what its ClusterQueue may hold in each (`QuotaInputs.room`: `pool_room`,
    nominal plus borrowable, within what each pool holds); without Kueue (or its inputs: a
    hand-built contract) nothing counts quota per pool, so what the pools hold
    (`quota.pool_capacity`), which the namespace quota bounds in `quota_ceiling`. None: a
    pool without a bound (only the namespace quota holds it)."""
    q = team.quota_inputs
    rooms = [q.room(p.name) for p in pools] if q is not None else [None]
    if all(r is not None for r in rooms):
        return float(sum(r["cpu"] for r in rooms if r is not None))
    held = [quota.pool_capacity(p, "cpu") for p in pools]
    if any(h is None for h in held):
        return None
    return float(sum(h for h in held if h is not None))


def quota_ceiling(team: TeamFacts, placed: list[tuple[PoolFacts, str]]) -> QuotaCeiling:
    """`placed`: the pools the team's pods may run on, each with its region (a fleet
    manager's: its workers' pools)."""
    parts: list[str] = []
    total = 0.0
    for gpu, limit, unit, per_unit in (
        (True, team.quota.gpus, "GPU", lambda t: t.gpus),
        (False, team.quota.cpu, "vCPU", lambda t: t.vcpus),
    ):
        pools_ = [(p, r) for p, r in placed if bool(p.gpus_per_node) == gpu]
        if not pools_:
            continue
        if limit is None:
            return QuotaCeiling(None, f"no {unit} quota: unlimited", unlimited=True)
        amount = float(parse_quantity(limit))
        # the namespace quota's vCPUs within what the queue (or, without Kueue, the pools)
        # lets its pods hold in the CPU-only pools
        cores = None if gpu else _cpu_pool_cores(team, [p for p, _ in pools_])
        if cores is not None:
            amount = min(amount, cores)
        rate, worst, unknown = _worst_rate(pools_, per_unit)
        if unknown:
            return QuotaCeiling(None, f"unknown: no price for {', '.join(sorted(set(unknown)))}")
        assert rate is not None
        total += amount * rate
        parts.append(f"{amount:g} {unit} x {usd(rate, 3)}/{unit}-h ({worst})")
    return QuotaCeiling(total, " + ".join(parts) or "no pools")


@dataclass(frozen=True)
class TeamCost:
    name: str
    namespace: str
    jobs: tuple[str, ...]  # the jobs that run at once (admitted by the queue simulation)
    jobs_hourly: float | None  # those jobs' $/hour, each on its own nodes (None: unknown)
    ceiling: QuotaCeiling
    waiting: tuple[str, ...] = ()  # declared jobs that wait for quota (or are never admitted)
    month: float | None = 0.0  # every declared job run once, within a month (None: unknown)
    month_unknown: tuple[str, ...] = ()  # the jobs whose run cost is unknown
    # a job's run in `month` is a ceiling (its activeDeadlineSeconds), so the month is one too
    month_at_most: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "jobs": list(self.jobs),
            "waiting": list(self.waiting),
            "monthEstimate": self.month,
            "monthAtMost": self.month_at_most,
            "monthUnknown": list(self.month_unknown),
            "jobsOnDemandPerHour": self.jobs_hourly,
            "quotaCeilingPerHour": self.ceiling.hourly,
            "quotaCeilingPerMonth": self.ceiling.monthly,
            "quotaCeiling": self.ceiling.detail,
            "quotaUnlimited": self.ceiling.unlimited,
        }


def team_costs(
    teams: dict[str, TeamFacts], placed: list[tuple[PoolFacts, str]], jobs: list[JobCost]
) -> list[TeamCost]:
    """Per team: what the queue admits at once, and a month of its declared jobs, each run
    once (waiting ones too: they run when admitted)."""
    out = []
    for name in sorted(teams):
        mine = [j for j in jobs if j.team == name]
        running = [j for j in mine if j.runs_at_once]
        unpriced = any(j.hourly is None for j in running)
        hourly = None if unpriced else sum(cents(j.hourly) or 0.0 for j in running)
        unknown = tuple(j.name for j in mine if j.month_cost is None)
        month = None if unknown else sum(cents(j.month_cost) or 0.0 for j in mine)
        out.append(
            TeamCost(name, teams[name].namespace, tuple(j.name for j in running), hourly,
                     quota_ceiling(teams[name], placed),
                     tuple(j.name for j in mine if not j.runs_at_once), month, unknown,
                     any(j.duration.ceiling and j.month_cost for j in mine))
        )  # fmt: skip
    return out


# --- the platform's fixed cost ------------------------------------------------------------------


@dataclass(frozen=True)
class FixedItem:
    """One always-on part of the stack (`hourly` None: price unknown)."""

    what: str
    quantity: str
    hourly: float | None
    source: str | None = None
    note: str = ""
    missing: str = ""  # the price the table lacks ("ebs.gp3 in us-west-2"), when unknown
    # a node group's: its pool (the POOL_LABEL of its nodes), instance type and desiredSize
    pool: str = ""
    instance_type: str = ""
    nodes: float = 0.0

    @property
    def monthly(self) -> float | None:
        return None if self.hourly is None else self.hourly * HOURS_PER_MONTH

    @property
    def per_hour(self) -> str:
        """Its $/h as the platform table prints it: to a tenth of a cent, since an item's price
        may be one ($0.005 per IPv4 address-hour), so that the column adds up to the total."""
        return usd(self.hourly, 3)

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "quantity": self.quantity, "perHour": self.hourly,
                "perMonth": self.monthly, "source": self.source, "note": self.note}  # fmt: skip


# Paid by use, not by existence: listed so that nobody mistakes the total for the whole bill.
USAGE_BASED = (
    "NAT data processing per GB, data transfer, S3 storage and requests, CloudWatch Logs "
    "(control-plane logs), SQS messages, EBS snapshots and FSx backups"
)


def _inputs(rec: Any) -> dict[str, Any]:
    """Inputs with masked secrets revealed (a Helm release with one secret is masked whole)."""
    return {**(rec.inputs or {}), **(getattr(rec, "revealed", None) or {})}


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _item(
    what: str, qty: str, price: P.Price | None, quantity: float, note: str, missing: str
) -> FixedItem:
    if price is None:
        return FixedItem(what, qty, None, None, note, missing)
    return FixedItem(what, qty, price.hourly(quantity), price.source, note)


def _priced(region: str, key: str, quantity: float, what: str, qty: str, note: str = ""):
    price = P.service(region, key)
    note = note or ("" if price else P.why_service_unpriced(region, key))
    return _item(what, qty, price, quantity, note, f"{key} in {region}")


def fixed_costs(resources: list[Any], region: str, today: dt.date) -> list[FixedItem]:
    """Always-on costs of what the program declares (Karpenter pools scale to zero: a job's
    nodes are in its own cost)."""
    by_urn = {r.urn: r for r in resources}
    items: list[FixedItem] = []

    def of(type_: str) -> list[Any]:
        return [r for r in resources if r.type == type_]

    clusters = of(T.EKS_COMPONENT) + [
        r
        for r in of(T.EKS_CLUSTER)
        if not (r.parent in by_urn and by_urn[r.parent].type == T.EKS_COMPONENT)
    ]
    for c in clusters:
        version = _inputs(c).get("version")
        what = f"EKS control plane {version}"
        tier = P.eks_support(version if isinstance(version, str) else None, today)
        if tier is None:
            missing = f"EKS support calendar row for {version}"
            items.append(FixedItem(what, "1 cluster", None, note="no support row", missing=missing))
            continue
        end = P.EKS_STANDARD_SUPPORT_END[version]
        note = (
            f"standard support until {end}"
            if tier == "standard"
            else f"extended support since {end}: upgrade to pay $0.10/h"
        )
        items.append(_priced(region, f"eks.{tier}", 1, what, "1 cluster", note))

    for type_, key, what in (
        ("aws:ec2/natGateway:NatGateway", "nat", "NAT gateways"),
        ("aws:ec2/eip:Eip", "ipv4", "Public IPv4 addresses (NAT)"),
    ):
        if count := len(of(type_)):
            items.append(_priced(region, key, count, what, f"{count}"))

    ebs: list[tuple[float, str]] = []  # (GB, whose)
    for ng in of(T.NODE_GROUP):
        inp = _inputs(ng)
        size = _num((inp.get("scalingConfig") or {}).get("desiredSize")) or 0
        if not size:
            continue
        name = inp.get("nodeGroupName") or ng.name
        itype = next((t for t in inp.get("instanceTypes") or [] if isinstance(t, str)), "?")
        cap = inp.get("capacityType", "ON_DEMAND")
        capacity = cap.lower().replace("_", "-")
        price = P.ec2_spot(region, itype) if cap == "SPOT" else P.ec2_on_demand(region, itype)
        note = "" if price is not None else f"no {cap.lower()} price for {itype} in {region}"
        if price is None and P.ec2_not_listed(region, itype):
            note += f" ({P.why_unpriced(region, itype)})"
        for u in (ng.dependencies or {}).get("launchTemplate", []):
            lt = _inputs(by_urn[u]) if u in by_urn else {}
            target = (lt.get("capacityReservationSpecification") or {}).get(
                "capacityReservationTarget"
            ) or {}
            if target.get("capacityReservationId"):
                # An On-Demand Capacity Reservation bills at the on-demand rate for every
                # reserved instance, running or not; its size is not in the program.
                note = (
                    f"capacity reservation {target['capacityReservationId']}: billed for every "
                    "reserved instance whether running or not (reservation size not declared)"
                )
            for bdm in lt.get("blockDeviceMappings") or []:
                vol = bdm.get("ebs") or {}
                gb = _num(vol.get("volumeSize"))
                if gb and vol.get("volumeType", "gp3") == "gp3":
                    ebs.append((gb * size, f"{size:g} x {gb:g} GB ({name})"))
        what = f"node group {name} ({itype}, {capacity})"
        item = _item(what, f"{size:g} nodes (desiredSize)", price, size, note,
                     f"{capacity} {itype} in {region}")  # fmt: skip
        pool = (inp.get("labels") or {}).get(POOL_LABEL) or ""
        items.append(replace(item, pool=pool, instance_type=itype, nodes=size))

    gp3_classes = {
        (_inputs(sc).get("metadata") or {}).get("name")
        for sc in of("kubernetes:storage.k8s.io/v1:StorageClass")
        if _inputs(sc).get("provisioner") == "ebs.csi.aws.com"
        and (_inputs(sc).get("parameters") or {}).get("type") == "gp3"
    }
    claims: list[tuple[dict[str, Any], str]] = []  # (a claim's spec, whose): PVCs, Helm values
    for pvc in of(T.PVC):
        meta = _inputs(pvc).get("metadata") or {}
        claims.append(
            (_inputs(pvc).get("spec") or {}, f"pvc {meta.get('namespace')}/{meta.get('name')}")
        )
    for rel in of(T.HELM_RELEASE):
        whose = _inputs(rel).get("name") or rel.name
        claims += [(t, whose) for t in _claim_templates(_inputs(rel).get("values"))]
    for spec, whose in claims:
        gb = _gib(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
        if spec.get("storageClassName") in gp3_classes and gb:
            ebs.append((gb, f"{gb:g} GB ({whose})"))
    if ebs:
        total = sum(gb for gb, _ in ebs)
        note = "; ".join(w for _, w in ebs)
        items.append(_priced(region, "ebs.gp3", total, "EBS gp3 volumes", f"{total:g} GB", note))

    for fs in of(T.FSX_LUSTRE):
        inp = _inputs(fs)
        kind = inp.get("deploymentType", "SCRATCH_1")
        gb = _num(inp.get("storageCapacity")) or 0
        tput = inp.get("perUnitStorageThroughput")
        key = f"fsx.{kind}" + (f".{tput}" if tput is not None else "")
        what = f"FSx for Lustre {kind}" + (f" {tput} MB/s/TiB" if tput is not None else "")
        items.append(_priced(region, key, gb, what, f"{gb:g} GiB"))

    if keys := of(T.KMS_KEY):
        rotated = sum(bool(_inputs(k).get("enableKeyRotation")) for k in keys)
        rotation = "each rotation's new backing key adds $1/month (not counted)"
        note = f"{rotated} rotated yearly: {rotation}" if rotated else ""
        items.append(_priced(region, "kms", len(keys), "KMS keys", f"{len(keys)}", note))

    # Interface endpoints bill per endpoint per AZ: one network interface per subnet given.
    zones = [len(_inputs(e).get("subnetIds") or []) for e in of(T.VPC_ENDPOINT)
             if _inputs(e).get("vpcEndpointType") == "Interface"]  # fmt: skip
    if zones:
        qty = (
            f"{len(zones)} endpoints x {zones[0]} AZs"
            if len(set(zones)) == 1
            else f"{sum(zones)} endpoint-AZs ({len(zones)} endpoints)"
        )
        items.append(_priced(region, "vpce.interface", sum(zones), "VPC interface endpoints", qty))
    return items


def _gib(quantity: Any) -> float | None:
    try:  # str(None) is no quantity either
        return float(parse_quantity(str(quantity)) / 2**30)
    except ValueError:
        return None


def _claim_templates(values: Any) -> list[dict[str, Any]]:
    """Every `volumeClaimTemplate.spec` in a Helm release's values (e.g. Prometheus)."""
    if isinstance(values, list):
        return [t for v in values for t in _claim_templates(v)]
    if not isinstance(values, dict):
        return []
    tmpl = values.get("volumeClaimTemplate")
    found = [tmpl["spec"]] if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict) else []
    return found + [t for v in values.values() for t in _claim_templates(v)]


# --- the whole report ---------------------------------------------------------------------------


@dataclass
class CostReport:
    region: str
    today: dt.date
    jobs: list[JobCost] = field(default_factory=list)
    teams: list[TeamCost] = field(default_factory=list)
    fixed: list[FixedItem] = field(default_factory=list)

    @property
    def fixed_hourly_known(self) -> float:
        """The platform table's $/h column added, each as printed (`FixedItem.per_hour`)."""
        return sum(round(i.hourly, 3) for i in self.fixed if i.hourly is not None)

    @property
    def fixed_monthly_known(self) -> float:
        """The platform table's $/month column added, each to the cent as printed."""
        return sum(cents(i.monthly) or 0.0 for i in self.fixed if i.monthly is not None)

    @property
    def fixed_unknown(self) -> list[str]:
        return [i.what for i in self.fixed if i.hourly is None]

    def fixed_total(self) -> str:
        """Dollars, or "at least $X/h ..., N items unknown (...)": never a bare $0.00."""
        known = self.fixed_hourly_known
        unknown = self.fixed_unknown
        money = f"{usd(known)}/h = {usd(self.fixed_monthly_known)}/month"
        if not unknown:
            return money
        return f"at least {money}, {len(unknown)} item(s) unknown ({', '.join(unknown)})"

    def rows(self) -> list[dict[str, Any]]:
        """The jobs' data rows (`JobCost.to_json`) with each one's part on node groups'
        always-on nodes ($/h and its run), to the cent: what `row_totals` sums."""
        return [
            {**j.to_json(), "inFixedPerHour": cents(s[0][2] if s else 0.0),
             "runCostInFixed": cents(self._job_in_fixed(s, math.inf))}
            for j, s in zip(self.jobs, self._fixed_spans(), strict=True)
        ]  # fmt: skip

    @property
    def running_hourly(self) -> float:
        """$/hour of the priced jobs that run at once, each on its own nodes (no packing of
        several jobs' pods onto shared nodes)."""
        return row_totals(self.rows())["runningPerHour"]

    @property
    def in_fixed_hourly(self) -> list[float]:
        """Per job (as `jobs`), to the cent as printed: its $/h on nodes a node group keeps up
        anyway when it starts (`_fixed_spans`' first; what runs at once runs on)."""
        return [cents(s[0][2] if s else 0.0) or 0.0 for s in self._fixed_spans()]

    def _fixed_spans(self) -> list[list[tuple[float, float, float]]]:
        """Per job (as `jobs`): (from, until, $/h) of each span its pods hold on the nodes a node
        group keeps up anyway (its desiredSize, already in the fixed cost, paid whether a job
        runs or not); only nodes beyond add to the bill. The jobs on its pool and type take the
        desired nodes free at each admission (`JobCost.spans`, the queue simulation's: a job
        waiting behind another takes those the one ahead left, and a preempted one's are free
        until it is readmitted), in time then declared order; one whose start is unknown takes
        none (a ceiling). The one model of that overlap: the verdict, the report and the
        cluster budget read it."""
        out: list[list[tuple[float, float, float]]] = [[] for _ in self.jobs]
        for i in self.fixed:
            if not i.pool or not i.nodes or i.hourly is None:
                continue
            spans = sorted(
                (begin, n, until, j.choice.nodes)
                for n, j in enumerate(self.jobs)
                if j.admission != "never" and j.runs is None and j.pool == i.pool and j.choice
                and j.choice.instance_type == i.instance_type and j.hourly is not None
                for begin, until in j.held()
            )  # fmt: skip
            held: list[tuple[float, float]] = []  # (until, nodes) of the spans that took some
            for begin, n, until, nodes in spans:
                busy = sum(k for end, k in held if end > begin)
                took = min(nodes, max(i.nodes - busy, 0.0))
                if took:
                    held.append((until, took))
                out[n].append((begin, until, took * i.hourly / i.nodes))  # 0: none free then
        return out

    @property
    def running_in_fixed(self) -> float:
        """The part of `running_hourly` on node groups' always-on nodes (`in_fixed_hourly`)."""
        return row_totals(self.rows())["runningInFixedPerHour"]

    def run_in_fixed(self, most_hours: float = math.inf) -> float:
        """The part of the jobs' run costs on those nodes, within the first `most_hours` after
        submission (each span as the queue simulation times it), to the cent each: the
        platform's fixed cost pays it already (a run of unknown length: none)."""
        return sum(cents(self._job_in_fixed(s, most_hours)) or 0.0 for s in self._fixed_spans())

    @staticmethod
    def _job_in_fixed(spans: list[tuple[float, float, float]], most_hours: float) -> float:
        """A job's run cost on those nodes, its spans within the first `most_hours` (a span
        that never ends: none, its run's length is unknown)."""
        most = most_hours * 3600
        return sum(rate * max(0.0, min(until, most) - begin) / 3600
                   for begin, until, rate in spans if until != math.inf)  # fmt: skip

    def fixed_missing(self) -> list[str]:
        """The prices the platform's total lacks ("ebs.gp3 in us-west-2")."""
        return [i.missing for i in self.fixed if i.hourly is None and i.missing]

    def sources(self) -> list[str]:
        used = {i.source for i in self.fixed if i.source}
        used |= {j.choice.on_demand.source for j in self.jobs if j.choice and j.choice.on_demand}
        return sorted(used)

    def to_json(self) -> dict[str, Any]:
        rows = self.rows()
        return {
            "factsDate": P.FACTS_DATE,
            "region": self.region,
            "asOf": self.today.isoformat(),
            "jobs": rows,
            "teams": [t.to_json() for t in self.teams],
            "fixed": [i.to_json() for i in self.fixed],
            "fixedPerHourKnown": self.fixed_hourly_known,
            "fixedPerMonthKnown": self.fixed_monthly_known,
            "fixedUnknown": self.fixed_unknown,
            "fixedTotal": self.fixed_total(),
            "fixedMissingPrices": self.fixed_missing(),
            **row_totals(rows),
            "usageBased": USAGE_BASED,
            "sources": {k: P.SOURCES[k].__dict__ for k in self.sources()},
        }
