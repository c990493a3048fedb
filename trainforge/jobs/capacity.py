"""Scheduling rehearsal: do a job's pods fit on its pool's nodes, all at once?

Why: a pod that asks for more than a node's allocatable capacity (after the kubelet's
reservations and the DaemonSet pods on that node) stays Pending forever, and so does a job
whose pods together need more nodes than the pool may have or more than the team's quota.
The scheduler and Karpenter would only say so after `pulumi up`; this says it at preview,
with the numbers. `wiring.resolve_job` refuses such a job; the plan's scheduling check
prints the same arithmetic for every job.

The arithmetic, per instance type of the pool (`PoolFacts.nodes`, from `node_facts`):
  free = allocatable - sum(requests of the DaemonSet pods landing on the pool)
  pods per node = min over cpu, memory, GPUs, EFA and pod slots of free // request
A managed node group launches any of its types, so every type must host a pod; Karpenter
picks a type that fits, so one is enough. All pods at once: a node group needs
ceil(pods / pods per node) <= maxSize nodes; a Karpenter pool makes the NodeClaims
trainforge.jobs.packing replays (its provisioning scheduler's packing), and its `limits`
must leave room for each as Karpenter counts it (at its largest candidate type).

Pure: no Pulumi (used before any resource exists).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from trainforge.core import pods as core_pods
from trainforge.core.contract import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    NodeShape,
    NodeType,
    PoolFacts,
    PoolLimits,
    TeamQuota,
    efa_count,
)
from trainforge.core.quantity import counted, parse_quantity, plain
from trainforge.jobs import node_facts, packing

if TYPE_CHECKING:
    from trainforge.jobs.spec import JobSpec

MI = packing.MI


@dataclass(frozen=True)
class PodRequest:
    """What one pod of the job requests (requests == limits in every emitter).

    CPU twice, as each upstream counts it: `cpu_m` the scheduler's (and Kueue's) whole
    millicores, rounded up per pod (`quantity.counted`), `cpu` the exact cores Karpenter's
    packing sums (`with_cpu`; None: exactly `cpu_m`)."""

    cpu_m: int  # millicores, rounded up per pod: what the kube-scheduler binds by
    memory_mib: Fraction  # exact (a request need not be whole Mi)
    gpus: int = 0
    efa: int = 0
    cpu: Fraction | None = None  # exact cores, Karpenter's sum; None: cpu_m / 1000

    @property
    def cpu_exact(self) -> Fraction:
        return Fraction(self.cpu_m, 1000) if self.cpu is None else self.cpu

    @classmethod
    def with_cpu(
        cls, cores: Fraction, memory_mib: Fraction, gpus: int = 0, efa: int = 0
    ) -> PodRequest:
        """A pod of `cores` exactly: the scheduler's millicores from the one rounding rule."""
        cpu_m = int(counted("cpu", cores) * 1000)
        exact = None if cores * 1000 == cpu_m else cores
        return cls(cpu_m=cpu_m, memory_mib=memory_mib, gpus=gpus, efa=efa, cpu=exact)

    @classmethod
    def of(cls, cpu: str, memory: str, gpus: int = 0, efa: int = 0) -> PodRequest:
        return cls.with_cpu(parse_quantity(cpu), parse_quantity(memory) / MI, gpus, efa)


@dataclass(frozen=True)
class NodeRoom:
    """What a node of one type has left for the job's pods after the DaemonSets."""

    node: NodeShape
    cpu_m: int
    memory_mib: int
    pods: int
    ds_cpu_m: int
    ds_memory_mib: int
    ds_pods: int

    def explain_cpu(self) -> str:
        n = self.node
        return (
            f"{n.instance_type}: {n.vcpus} vCPU - {n.kube_reserved_cpu_m}m kubelet reservation"
            f" - {self.ds_cpu_m}m DaemonSets = {self.cpu_m}m"
        )

    def explain_memory(self) -> str:
        n = self.node
        return (
            f"{n.instance_type}: {n.memory_mib}Mi - {n.memory_mib - n.capacity_memory_mib}Mi VM"
            f" overhead - {n.kube_reserved_memory_mib}Mi kubelet reservation"
            f" - {n.eviction_memory_mib}Mi eviction threshold - {self.ds_memory_mib}Mi"
            f" DaemonSets = {self.memory_mib}Mi"
        )


def pool_nodes(pool: PoolFacts) -> tuple[NodeShape, ...]:
    """The pool's node shapes; derived from vcpus/memory when the contract has none (a
    hand-built contract: kubelet's default 110 max pods, no DaemonSets known)."""
    if pool.nodes:
        return pool.nodes
    if not pool.vcpus_per_node or not pool.memory_mib_per_node:
        return ()
    name = pool.instance_types[0] if len(pool.instance_types) == 1 else f"{pool.name} node"
    return (
        node_facts.node_shape(
            name,
            pool.vcpus_per_node,
            pool.memory_mib_per_node,
            gpus=pool.gpus_per_node,
            efa=pool.efa_interfaces,
        ),
    )


def rooms(pool: PoolFacts) -> list[NodeRoom]:
    ds_cpu = sum(d.cpu_m for d in pool.daemonsets)
    ds_mem = sum(d.memory_mib for d in pool.daemonsets)
    ds_pods = len(pool.daemonsets)
    return [
        NodeRoom(
            node=n,
            cpu_m=n.allocatable_cpu_m - ds_cpu,
            memory_mib=n.allocatable_memory_mib - ds_mem,
            pods=n.max_pods - ds_pods,
            ds_cpu_m=ds_cpu,
            ds_memory_mib=ds_mem,
            ds_pods=ds_pods,
        )
        for n in pool_nodes(pool)
    ]


def default_size(pool: PoolFacts, share: Fraction) -> tuple[str, str] | None:
    """CPU and memory for a pod that takes `share` of a node: that share of what the smallest
    type leaves after the kubelet and the DaemonSets (CPU rounded down to 100m, memory to Mi),
    so it fits whichever type is launched. None when the pool's nodes are unknown."""
    rs = rooms(pool)
    if not rs:
        return None
    cpu_m = int(min(r.cpu_m for r in rs) * share) // 100 * 100
    mem_mib = int(min(r.memory_mib for r in rs) * share)
    if cpu_m <= 0 or mem_mib <= 0:
        return None
    cpu = str(cpu_m // 1000) if cpu_m % 1000 == 0 else f"{cpu_m}m"
    return cpu, f"{mem_mib}Mi"


@dataclass(frozen=True)
class NodeFit:
    room: NodeRoom
    per_node: int  # pods of the job one such node holds (0: not even one)
    short: tuple[tuple[str, str], ...]  # (resource, why) where one pod does not fit


def fit(room: NodeRoom, req: PodRequest) -> NodeFit:
    n = room.node
    limits: list[int] = []
    short: list[tuple[str, str]] = []
    if req.cpu_m:
        limits.append(room.cpu_m // req.cpu_m)
        if req.cpu_m > room.cpu_m:
            short.append(("cpu", f"needs cpu {req.cpu_m}m, {room.explain_cpu()}"))
    if req.memory_mib:
        limits.append(math.floor(room.memory_mib / req.memory_mib))
        if req.memory_mib > room.memory_mib:
            short.append(
                ("memory", f"needs memory {_mib(req.memory_mib)}, {room.explain_memory()}")
            )
    if req.gpus:
        limits.append(n.gpus // req.gpus)
        if req.gpus > n.gpus:
            short.append(("gpus", f"needs {req.gpus} GPUs, {n.instance_type} has {n.gpus}"))
    if req.efa:
        limits.append(n.efa // req.efa)
        if req.efa > n.efa:
            short.append(("efa", f"needs {req.efa} EFA devices, {n.instance_type} has {n.efa}"))
    limits.append(room.pods)
    if room.pods < 1:
        short.append(
            (
                "pods",
                f"{n.instance_type} runs at most {n.max_pods} pods and its {room.ds_pods} "
                "DaemonSet pods take them all",
            )
        )
    per_node = max(0, min(limits))
    return NodeFit(room, per_node, tuple(short))


@dataclass(frozen=True)
class Problem:
    """Why a job can never run: the key to change (the job's, or its pool's `limits.<r>` when
    not even one pod fits them), and the numbers."""

    key: str  # cpu | memory | gpusPerWorker | efa | workers | pool; limits.<r>: the pool's
    message: str
    value: Any = None  # the pool's limit as configured, for a `limits.<r>` key


@dataclass
class JobCapacity:
    """The scheduling rehearsal of one job on its pool (see the module docstring)."""

    pool: PoolFacts
    pods: int
    request: PodRequest
    fits: list[NodeFit]
    nodes_needed: int | None = None
    pool_usage: list[tuple[str, str, str]] = field(default_factory=list)  # (res, need, limit)
    problems: list[Problem] = field(default_factory=list)
    # Karpenter pools: the NodeClaims it makes for the pods (trainforge.jobs.packing), each
    # as (its pods, the types that hold them all): what the cost table prices, one model
    claims: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


_KEYS = {"cpu": "cpu", "memory": "memory", "gpus": "gpusPerWorker", "efa": "efa", "pods": "pool"}
MOST_SHORTS = 4  # shortfalls a refusal lists before "and N more" (its size covers them all)


def _bounds(room: NodeRoom) -> dict[str, int]:
    """The most of each resource one pod may ask of a node of this room (`fit`'s limits)."""
    n = room.node
    return {"cpu": room.cpu_m, "memory": room.memory_mib, "gpus": n.gpus, "efa": n.efa}


def _fitting_size(fits: list[NodeFit], req: PodRequest, *, every: bool) -> str:
    """ " One pod fits ... with cpu at most 3600m and memory at most 14481Mi.": the request,
    lowered only where it is short, that `fit` places on every type (`every`: a managed node
    group launches any) or on one (Karpenter picks a type that fits: the one needing the
    fewest lowered, then the least of the request given up); "" where no smaller pod fits
    (no pod slot left, no CPU, memory or GPU left)."""
    asked = {"cpu": req.cpu_m, "memory": req.memory_mib, "gpus": req.gpus, "efa": req.efa}
    sizes = []
    for group in [fits] if every else [[f] for f in fits]:
        most = {k: min(_bounds(f.room)[k] for f in group) for k in asked}
        lower = {k: v for k, v in most.items() if asked[k] > v}
        slots = all(f.room.pods >= 1 for f in group)
        if lower and slots and all(v >= (k != "efa") for k, v in lower.items()):
            cut = sum((asked[k] - v) / asked[k] for k, v in lower.items())  # share given up
            sizes.append(((len(lower), cut), group, lower))
    if not sizes:
        return ""
    _, group, lower = min(sizes, key=lambda x: x[0])
    where = "every type of the pool" if every else f"a {group[0].room.node.instance_type} node"
    words = {"cpu": f"cpu at most {lower.get('cpu')}m",
             "memory": f"memory at most {lower.get('memory')}Mi",
             "gpus": f"at most {lower.get('gpus')} GPUs",
             "efa": f"at most {lower.get('efa')} EFA devices" if lower.get("efa") else
                    "no EFA devices (efa: false)"}  # fmt: skip
    return f" One pod fits {where} with " + " and ".join(words[k] for k in lower) + "."


def rehearse(req: PodRequest, pods: int, pool: PoolFacts) -> JobCapacity:
    """Fit `pods` pods of `req` on `pool`: per node, then all at once against its size."""
    fits = [fit(r, req) for r in rooms(pool)]
    out = JobCapacity(pool=pool, pods=pods, request=req, fits=fits)
    if not fits:
        return out  # nodes unknown: nothing to rehearse against
    types = ", ".join(f.room.node.instance_type for f in fits)
    fitting = [f for f in fits if f.per_node > 0]
    node_group = pool.kind == "node-group"
    failing = [f for f in fits if f.per_node == 0]
    if failing and (node_group or not fitting):
        # every shortfall of every failing type, and one size that fits, so that one fix does
        shorts = [s for f in failing for s in f.short] or [("pods", "no room")]
        shown = "; ".join(why for _, why in shorts[:MOST_SHORTS])
        if len(shorts) > MOST_SHORTS:
            shown += f"; and {len(shorts) - MOST_SHORTS} more"
        scope = (
            f"managed node group {pool.name!r} launches any of its types ({types})"
            if node_group and fitting
            else f"no instance type of pool {pool.name!r} ({types}) can hold one pod"
        )
        size = _fitting_size(fits, req, every=node_group)
        out.problems.append(
            Problem(
                _KEYS[shorts[0][0]],
                f"{scope}: {shown}.{size} Ask for less, or use a pool with bigger nodes "
                "(docs/rehearsals.md, Scheduling rehearsal)",
            )
        )
        return out
    if node_group:
        per_node = min(f.per_node for f in fits)
        out.nodes_needed = math.ceil(pods / per_node)
        limit = pool.max_nodes
        out.pool_usage.append(("nodes", str(out.nodes_needed), str(limit)))
        if limit is not None and out.nodes_needed > limit:
            out.problems.append(
                Problem(
                    "workers",
                    f"{pods} pod(s) must run at once and a node holds {per_node}, so they need "
                    f"{out.nodes_needed} nodes, but managed node group {pool.name!r} has "
                    f"maxSize {limit}. Use fewer workers (its {limit} nodes hold {limit * per_node} "
                    "of these pods at once) or a bigger node group",
                )
            )
        return out
    _karpenter_limits(out)
    return out


def pack(pool: PoolFacts, pods: Sequence[PodRequest], most: int | None = None) -> packing.Packing:
    """The NodeClaims Karpenter makes for a batch of `pods` on a Karpenter pool
    (`packing.pack_rooms` on the pool's types as `rooms` sees them, and its `limits`)."""
    return packing.pack_rooms(rooms(pool), pods, packing.limits_of(pool), most)


# --- a job's pods on its pool: what the cost, the estimate and the emitter read --------------


def pool_types(pool: PoolFacts) -> list[NodeType]:
    """The pool's instance types with their sizes; a contract built by hand (no per-type
    facts): every type at the pool's guaranteed minimum size."""
    if pool.node_types:
        return list(pool.node_types)
    return [
        NodeType(t, pool.vcpus_per_node or 0, pool.memory_mib_per_node or 0, pool.gpus_per_node)
        for t in pool.instance_types
    ]


def job_request(job: JobSpec, pool: PoolFacts) -> PodRequest:
    """One pod of a *resolved* job, as the packing counts it (EFA interfaces when it uses EFA):
    what its emitter writes (`jobs.pod.resources`), before its object exists."""
    gpus = job.gpus_per_worker or 0
    efa = efa_count(pool, gpus) if job.efa else 0
    return PodRequest.of(job.cpu or "0", job.memory or "0", gpus, efa)


def pod_request(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> PodRequest:
    """One pod as Karpenter packs it: its requests as the API server stores the pod and the
    scheduler counts them (`core.pods.scheduled_pod_requests`: limits for missing requests,
    then the namespace's `limit_ranges`, the pod's own requests as the API server defaults
    them, init containers, sidecars, overhead; not Kueue's order), with its EFA devices."""
    r = core_pods.scheduled_pod_requests(pod_spec, limit_ranges)
    return PodRequest.with_cpu(
        r.get("cpu", Fraction(0)),
        r.get("memory", Fraction(0)) / MI,
        gpus=math.ceil(r.get(GPU_RESOURCE, Fraction(0))),
        efa=math.ceil(r.get(EFA_RESOURCE, Fraction(0))),
    )


@dataclass(frozen=True)
class Gang:
    """A job's pods as Karpenter sees them, all at once: each pod's request, and the most of
    them one node may hold (`packing.templates_limit`; None: no cap)."""

    pods: tuple[PodRequest, ...]
    most: int | None = None


def gang(
    templates: Iterable[core_pods.PodTemplate], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> Gang:
    """The gang of an object's pod templates (`backends.pod_templates`, with the pods a
    controller builds): each template's replicas x its pod's requests (`pod_request`), a
    Master unlike its Workers included. The one model of a gang's pods that the queue's launch
    check, the cost table and the SDK section pack (`launch`)."""
    templates, limit_ranges = list(templates), list(limit_ranges)
    pods = tuple(p for t in templates for p in [pod_request(t.spec, limit_ranges)] * t.replicas)
    return Gang(pods, packing.templates_limit(t.template for t in templates))


def job_gang(job: JobSpec, pool: PoolFacts, most: int | None = None) -> Gang:
    """A resolved job's gang before its object exists: `job.workers` pods of `job_request`."""
    return Gang((job_request(job, pool),) * job.workers, most)


def packing_pool(pool: PoolFacts) -> PoolFacts:
    """The pool as the packing model and `pods_per_node` read it: its node shapes, and each
    type without one (a contract built by hand) at its own size with the pool's DaemonSets."""
    shaped = {n.instance_type for n in pool.nodes}
    shapes = list(pool.nodes)
    for t in pool_types(pool):
        if t.name not in shaped and t.vcpus and t.memory_mib:
            sized = replace(pool, nodes=(), instance_types=(t.name,), vcpus_per_node=t.vcpus,
                            memory_mib_per_node=t.memory_mib, gpus_per_node=t.gpus)  # fmt: skip
            shapes += [r.node for r in rooms(sized)]
    return pool if len(shapes) == len(pool.nodes) else replace(pool, nodes=tuple(shapes))


def per_node_by_type(job: JobSpec, pool: PoolFacts) -> list[tuple[NodeShape, int]]:
    """Each node shape the packing reads (`packing_pool`) with how many of the job's pods one
    such node holds (0: it does not fit): the scheduling rehearsal's arithmetic (what the
    node leaves after the kubelet's reservations and the pool's DaemonSets)."""
    req = job_request(job, pool)
    return [(r.node, fit(r, req).per_node) for r in rooms(packing_pool(pool))]


def pods_per_node(job: JobSpec, pool: PoolFacts, node: NodeType) -> int:
    """How many of the job's pods one node of this type holds (`per_node_by_type`)."""
    found = [n for shape, n in per_node_by_type(job, pool) if shape.instance_type == node.name]
    return found[0] if found else 0


def launch(pool: PoolFacts, g: Gang) -> packing.Packing:
    """The NodeClaims Karpenter makes for a gang's pods on `pool` (trainforge.jobs.packing),
    at most `g.most` of them per node."""
    return pack(packing_pool(pool), g.pods, g.most)


def _karpenter_limits(out: JobCapacity) -> None:
    """A Karpenter pool: the NodeClaims its provisioning scheduler makes for the pods
    (trainforge.jobs.packing, the one model of its launch), and its limits as it counts them:
    each NodeClaim at the largest capacity among its types when it is made."""
    pool, pods = out.pool, out.pods
    limited = pack(pool, [out.request] * pods)
    # what every pod would count: the limits' verdict is `limited`'s, its figures this one's
    # when the limits leave pods without a node (they need more than the limits allow)
    unlimited = pack(replace(pool, limits=PoolLimits()), [out.request] * pods)
    counted = unlimited if limited.unplaced else limited
    out.nodes_needed = len(counted.claims)
    out.claims = [(len(c.pods), c.candidates) for c in counted.claims]
    lim = pool.limits
    checks = _limit_checks(lim)
    for name, limit, fmt in checks:
        need = counted.counted.get(name, Fraction(0))
        if limit is None:
            if need:
                out.pool_usage.append((name, fmt(need), "unlimited"))
            continue
        out.pool_usage.append((name, fmt(need), limit))
    unbound = next((c for c in counted.claims if c.unbound), None)
    if unbound is not None:
        out.problems.append(Problem("cpu", _unbound(pool, out.request, unbound)))
    if limited.unplaced:
        short = _one_pod_short(pool, out.request)
        if short is not None:  # not even one pod: the pool's limit is what is wrong
            out.problems.append(short)
            return
        room = sum(len(c.pods) for c in limited.claims)
        out.problems.append(
            Problem(
                "workers",
                f"{pods} pod(s) must run at once; {_over_limits(pool, unlimited)}. Use fewer "
                f"workers (the limits hold {room} of these pods at once) or raise the pool's "
                "limits",
            )
        )


def _one_pod_short(pool: PoolFacts, req: PodRequest) -> Problem | None:
    """The pool's limit that leaves not even one pod a node, as a Problem on that limit's key
    (`limits.<resource>`, the value to raise it to: what one node that holds the pod counts,
    as Karpenter counts it: the type's capacity); None when one pod fits the limits (or no
    type holds it, the per-node finding's case). Karpenter only launches a type whose
    capacity fits what the limits leave (packing.pack_rooms's `allowed`)."""
    lim = packing.limits_of(pool)
    holders = [r for r in rooms(pool) if packing.holds(r, [req])]
    if not holders or not lim:
        return None
    over = [
        (
            r,
            [
                (k, packing.capacity_of(r.node)[k])
                for k in lim
                if packing.capacity_of(r.node)[k] > lim[k]
            ],
        )
        for r in holders
    ]
    # the type that needs the fewest limits raised, and the least of them
    room, needs = min(over, key=lambda o: (len(o[1]), [v for _, v in o[1]]))
    if not needs:
        return None
    fmt = {name: f for name, _, f in _limit_checks(pool.limits)}
    limit_of = {name: v for name, v, _ in _limit_checks(pool.limits)}
    keys = [("gpus" if k == GPU_RESOURCE else k, k, v) for k, v in needs]
    raise_ = " and ".join(f"limits.{key} to at least {fmt[k](v)}" for key, k, v in keys)
    limits = " and ".join(f"{key} {limit_of[k]}" for key, k, _ in keys)
    counts = ", ".join(f"{key} {fmt[k](v)}" for key, k, v in keys)
    t = room.node.instance_type
    types = ", ".join(r.node.instance_type for r in holders)
    return Problem(
        f"limits.{keys[0][0]}",
        f"Karpenter pool {pool.name!r} is limited to {limits}, less than one {t} node counts "
        f"({counts}: Karpenter counts a node at its type's capacity and launches none past "
        f"the limits), and no type of the pool that holds one pod of the job ({types}) counts "
        f"less: not even one pod would get a node. Set {raise_}",
        value=getattr(pool.limits, keys[0][0]),
    )


def _unbound(pool: PoolFacts, req: PodRequest, claim: packing.Claim) -> str:
    """Why some of a NodeClaim's pods never bind: Karpenter sums their CPU exactly, the
    kube-scheduler in whole millicores rounded up per pod (packing's module doc)."""
    n, t = len(claim.pods), claim.unbound[0]
    room = next(r for r in rooms(pool) if r.node.instance_type == t)
    return (
        f"cpu {plain(req.cpu_exact)} per pod is a fraction of a millicore: Karpenter sums "
        f"{n} pods exactly ({plain(req.cpu_exact * n)} cores) and puts them on one {t} node "
        f"({room.cpu_m}m left after the kubelet and DaemonSets), but the kube-scheduler counts "
        f"{req.cpu_m}m per pod ({req.cpu_m * n}m), so a pod stays Pending there (Karpenter "
        f"nominates it to that node). Request whole millicores, e.g. cpu: "
        f"{math.floor(req.cpu_exact * 1000)}m (all on one node) or {req.cpu_m}m"
    )


def _over_limits(pool: PoolFacts, unlimited: packing.Packing) -> str:
    """Why a Karpenter pool's limits leave pods without a node, from what every pod's
    NodeClaims would count (`unlimited`: the packing without the limits): the scheduling
    rehearsal's finding and the cost report's line (`launch_stopped`) say it alike."""
    lim = pool.limits
    checks = _limit_checks(lim)
    over = [(n, f(u), lim_) for n, lim_, f in checks if lim_ is not None
            for u in [unlimited.counted.get(n, Fraction(0))] if u > parse_quantity(lim_)]  # fmt: skip
    name, need, limit = over[0] if over else ("", "", "")
    what = f"{name} {need} of capacity" if over else "more capacity"
    limits = f"{name} {limit}" if over else _limits_words(lim)
    return (
        f"their nodes have {what} but Karpenter pool {pool.name!r} is limited to {limits}, so "
        "Karpenter would stop launching nodes before all pods run (it counts each NodeClaim "
        "at its largest type)"
    )


def launch_stopped(pool: PoolFacts, g: Gang) -> str | None:
    """Why the pool's limits leave some of a gang's pods without a node (`launch`), in the
    scheduling rehearsal's words and figures (`_one_pod_short`'s when none gets one); None
    when they do not (every pod gets a node, or a pod no type holds is why, not the limits)."""
    shaped = packing_pool(pool)
    limited = pack(shaped, g.pods, g.most)
    if not limited.unplaced:
        return None
    unlimited = pack(replace(shaped, limits=PoolLimits()), g.pods, g.most)
    if unlimited.unplaced:
        return None
    # no pod got a node: each alone is over the limits (the rehearsal's words for one pod)
    short = None if limited.claims else _one_pod_short(shaped, g.pods[0])
    return short.message if short is not None else _over_limits(pool, unlimited)


def _limit_checks(lim: PoolLimits) -> list[tuple[str, str | None, Callable[[Fraction], str]]]:
    """Each limit a pool may set: (resource, its limit or None, how its figures print)."""
    return [
        ("cpu", lim.cpu, _cores),
        ("memory", lim.memory, format_bytes),
        (GPU_RESOURCE, None if lim.gpus is None else str(lim.gpus), str),
    ]


def _limits_words(lim: PoolLimits) -> str:
    parts = [f"{k} {v}" for k, v in (("cpu", lim.cpu), ("memory", lim.memory),
                                      (GPU_RESOURCE, lim.gpus)) if v is not None]  # fmt: skip
    return ", ".join(parts)


def quota_usage(
    req: PodRequest, pods: int, quota: TeamQuota
) -> list[tuple[str, Fraction, str | None]]:
    """(resource, what `pods` pods request, the team's quota) for every quota resource."""
    return [
        ("gpus", Fraction(req.gpus * pods), quota.gpus),
        ("cpu", Fraction(req.cpu_m * pods, 1000), quota.cpu),
        ("memory", req.memory_mib * pods * MI, quota.memory),
        ("pods", Fraction(pods), quota.pods),
    ]


def _cores(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{float(v):g}"


def format_bytes(v: Fraction) -> str:
    return _mib(v / MI)


def _mib(v: Fraction | int) -> str:
    v = Fraction(v)
    if v >= 1024 and v % 1024 == 0:
        return f"{v // 1024}Gi"
    return f"{math.ceil(v)}Mi"
