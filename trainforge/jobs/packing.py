"""Which nodes Karpenter makes for a job's pending pods: its provisioning scheduler, replayed.

The one model of a Karpenter pool's launch that the cost report, the scheduling rehearsal and
the queue simulation read. Upstream: kubernetes-sigs/karpenter at 6e7eab7a0f48 (the
`sigs.k8s.io/karpenter v1.14.1-0.20260819221709-6e7eab7a0f48` that karpenter-provider-aws
v1.14.1's go.mod builds with; read 2026-11-29), pkg/controllers/provisioning/scheduling/:

- queue.go `NewQueue`/`byCPUAndMemoryDescending`: the batch's pods are tried largest CPU
  first, then largest memory (ties keep their order).
- scheduler.go `add`: a pod goes to an existing node, else to an in-flight NodeClaim of this
  batch (`addToInflightNode`: the NodeClaims sorted by how few pods they hold, the first that
  takes it), else to a new NodeClaim (`addToNewNodeClaim`).
- nodeclaim.go `CanAdd`/`filterInstanceTypesByRequirements`/`fits`: a NodeClaim takes the pod
  when some of its instance types still fits *all* its pods (their requests summed, plus the
  DaemonSets, within the type's allocatable); its types narrow to those (`Add`). So two
  4-GPU pods on a pool of [g5.12xlarge, g5.48xlarge] become ONE NodeClaim whose only type is
  g5.48xlarge, not two g5.12xlarge.
- scheduler.go `addToNewNodeClaim`/`filterByRemainingResources`/`subtractMax`: with pool
  `limits`, a new NodeClaim may only use types whose capacity fits what the limits have
  left, and takes the largest capacity among its types off them.
- what it sums: each pod's requests as exact Quantities (pkg/utils/resources/resources.go
  `RequestsForPods`/`Merge`: `Quantity.Add`, `Fits`: `Cmp`), never rounded; the kube-scheduler
  that then binds them counts CPU in whole millicores rounded up per pod (`Resource.Add`:
  `MilliValue`). Sub-millicore requests make the two differ: Karpenter may put on a NodeClaim
  pods the scheduler cannot all bind there, and the one left over stays Pending (Karpenter
  nominates it to that node, where its exact sum still fits). `Claim.unbound` names the types.
- the launch (`launch`): the NodeClaim's remaining types go to the cloud provider, which
  launches the cheapest; the caller passes the prices, this layer has none.

What stops packing is read from the job's pod template (`spread_limit`): a required pod
anti-affinity on the hostname, a hostname topology spread that may not be violated, or a
host port, each of which Karpenter's topology/host-port checks enforce per node.

Not modelled: pods of other jobs already on nodes (each job is placed on fresh nodes; a
packing into another job's spare room only needs less), and a job whose pods arrive in
separate batches (Karpenter batches pods created within a second of each other; a
training operator creates a gang's pods together).

Pure: no Pulumi, no prices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from trainforge.core.contract import GPU_RESOURCE, NodeShape, PoolFacts
from trainforge.core.labels import HOSTNAME, selects
from trainforge.core.quantity import parse_quantity

MI = 2**20


class Room(Protocol):
    """What a node of one type leaves for the job's pods (`capacity.NodeRoom`)."""

    node: NodeShape
    cpu_m: int
    memory_mib: int
    pods: int


class Pod(Protocol):
    """One pod's requests (`capacity.PodRequest`): CPU as the scheduler counts it (`cpu_m`)
    and exactly, as Karpenter sums it (`cpu_exact`)."""

    cpu_m: int
    memory_mib: Fraction
    gpus: int
    efa: int

    @property
    def cpu_exact(self) -> Fraction: ...


@dataclass(frozen=True)
class Claim:
    """One NodeClaim Karpenter makes: the indices of its pods (into the packed list) and the
    types that still hold all of them, in the pool's order."""

    pods: tuple[int, ...]
    candidates: tuple[str, ...]
    # candidates on which the kube-scheduler cannot bind all the pods (their millicores,
    # rounded up per pod, exceed what Karpenter's exact sum fitted): one stays Pending there
    unbound: tuple[str, ...] = ()


@dataclass
class Packing:
    """A batch of pods on a Karpenter pool: its NodeClaims, and the pods none could take."""

    claims: list[Claim] = field(default_factory=list)
    unplaced: list[int] = field(default_factory=list)
    why: str = ""  # why the first unplaced pod found no NodeClaim
    # what the pool's limits count for the batch (Karpenter's `subtractMax`: per NodeClaim,
    # the largest capacity among its types when it was made): cpu (cores), memory (bytes),
    # nvidia.com/gpu, whether or not the pool limits them
    counted: dict[str, Fraction] = field(default_factory=dict)

    def words(self) -> str:
        return claims_words((len(c.pods), c.candidates) for c in self.claims)

    def launches(self, price: Callable[[str], float | None]) -> list[Launch]:
        """What each NodeClaim launches (`launch`)."""
        return [launch(c.candidates, price) for c in self.claims]

    def launched(self, price: Callable[[str], float | None]) -> list[str]:
        """The type each NodeClaim launches (`launch`)."""
        return [x.instance_type for x in self.launches(price)]


def claims_words(claims: Iterable[tuple[int, tuple[str, ...]]]) -> str:
    """NodeClaims in words, alike ones once: "1 NodeClaim(s) of 2 pod(s) on g5.48xlarge",
    "2 NodeClaim(s) of 1 pod(s) on g4dn.xlarge or g5.xlarge" (the types that hold all its
    pods): what the scheduling rehearsal and the cost report print."""
    groups: dict[tuple[int, tuple[str, ...]], int] = {}
    for n, types in claims:
        groups[(n, types)] = groups.get((n, types), 0) + 1
    return "; ".join(
        f"{k} NodeClaim(s) of {n} pod(s) on {' or '.join(types)}"
        for (n, types), k in groups.items()
    )


@dataclass(frozen=True)
class Launch:
    """The type one NodeClaim launches (`launch`), and the candidates that could launch
    instead: those `price` has no figure for, which Karpenter prices and launches when one is
    cheaper. `unranked` is () when the type is certain."""

    instance_type: str
    unranked: tuple[str, ...] = ()


def launch(types: Iterable[str], price: Callable[[str], float | None]) -> Launch:
    """The one rule for which of a NodeClaim's candidate types launches: every figure of the
    plan that names the launched type (the cost table, the queue simulation's launch check)
    reads it.

    Upstream (read 2026-11-29): kubernetes-sigs/karpenter 6e7eab7a0f48
    pkg/cloudprovider/types.go `InstanceTypes.OrderByPrice` orders the NodeClaim's types by
    their cheapest available offering, a type with none last (math.MaxFloat64), and
    `Truncate` keeps the first ones (60: karpenter-provider-aws v1.14.1
    pkg/providers/instance/instance.go `maxInstanceTypes`); its types.go launches on demand
    with EC2 Fleet's `lowest-price` strategy: the cheapest launches. An offering Karpenter
    cannot price is not available (pkg/providers/instancetype/offering/base_resolver.go:
    `Available: ... && hasPrice`), so the scheduler never keeps such a type among a
    NodeClaim's types (nodeclaim.go `fits` reads only available offerings) and it never
    launches blindly; Karpenter's prices come from the AWS Pricing API, falling back to its
    generated static table (pkg/providers/pricing/pricing.go `Reset`: the region's, else
    us-east-1's).

    So a type `price` has no figure for (trainforge's price table lacks it) is one Karpenter
    still prices, at a figure this plan does not know. The rule: the candidates in upstream's
    order with `price`'s figures, an unpriced one after every priced one (as OrderByPrice
    sorts a type it has no price for), ties in the order given; the first launches. The
    fallbacks that follow, for every caller alike:
    - some candidates unpriced: the cheapest priced one, unless an unpriced one is cheaper at
      Karpenter's price; those are `unranked`, for the caller to say so;
    - none priced: the first listed stands in, the others `unranked`;
    - one candidate: it launches, priced or not (nothing to rank: `unranked` is ()).
    The cost table (`plan/cost.py`) prices `instance_type` and names `unranked` ("could be
    cheaper", or "which one is unknown" where the launched type is unpriced); the queue's
    launch check (`plan/checks/queues.py` `Simulation._launched`) holds its node against the
    pool's limits."""
    names = list(types)
    if not names:
        raise ValueError("a NodeClaim has at least one candidate type")
    figures = [price(t) for t in names]
    order = sorted(range(len(names)), key=lambda i: (figures[i] is None, figures[i] or 0.0, i))
    first = order[0]
    unranked = tuple(
        t
        for i, t in enumerate(names)
        if i != first and (figures[i] is None or figures[first] is None)
    )
    return Launch(names[first], unranked)


def capacity_of(n: NodeShape) -> dict[str, Fraction]:
    """What a node of this type counts against a NodePool's limits (the instance type's
    capacity: vCPUs, the memory it reports, GPUs)."""
    return {
        "cpu": Fraction(n.vcpus),
        "memory": Fraction(n.capacity_memory_mib * MI),
        GPU_RESOURCE: Fraction(n.gpus),
    }


def limits_of(pool: PoolFacts) -> dict[str, Fraction]:
    lim = pool.limits
    out: dict[str, Fraction] = {}
    for name, value in (("cpu", lim.cpu), ("memory", lim.memory), (GPU_RESOURCE, lim.gpus)):
        if value is not None:
            out[name] = Fraction(parse_quantity(str(value)))
    return out


def holds(room: Room, pods: Sequence[Pod], most: int | None = None) -> bool:
    """Whether one node of this type holds all `pods` at once (their requests summed within
    what it leaves after the kubelet and the DaemonSets; `most`: a per-node cap on the
    job's pods, from `spread_limit`)."""
    return _room_holds(room, _Sum.of(pods), most)


@dataclass(frozen=True)
class _Sum:
    """The summed requests of a NodeClaim's pods (kept per NodeClaim, not re-added per try)."""

    cpu_m: int = 0  # the scheduler's: whole millicores per pod
    memory_mib: Fraction = Fraction(0)
    gpus: int = 0
    efa: int = 0
    count: int = 0
    cpu: Fraction = Fraction(0)  # Karpenter's: exact cores

    def plus(self, p: Pod) -> _Sum:
        return _Sum(self.cpu_m + p.cpu_m, self.memory_mib + p.memory_mib, self.gpus + p.gpus,
                    self.efa + p.efa, self.count + 1, self.cpu + p.cpu_exact)  # fmt: skip

    @classmethod
    def of(cls, pods: Iterable[Pod]) -> _Sum:
        total = cls()
        for p in pods:
            total = total.plus(p)
        return total


def _room_holds(room: Room, total: _Sum, most: int | None) -> bool:
    """Karpenter's `Fits`: the exact sum (the scheduler's millicores: `_binds`)."""
    n = room.node
    return (
        total.cpu * 1000 <= room.cpu_m
        and total.memory_mib <= room.memory_mib
        and total.gpus <= n.gpus
        and total.efa <= n.efa
        and total.count <= room.pods
        and (most is None or total.count <= most)
    )


def pack_rooms(
    node_rooms: Sequence[Room],
    pods: Sequence[Pod],
    limits: Mapping[str, Fraction] | None = None,
    most: int | None = None,
) -> Packing:
    """Karpenter's provisioning of one batch of pending `pods` onto fresh NodeClaims of a
    pool whose types leave `node_rooms` (see the module docstring for the upstream code)."""
    order = sorted(range(len(pods)), key=lambda i: (-pods[i].cpu_exact, -pods[i].memory_mib))
    remaining = dict(limits or {})
    by_name = {r.node.instance_type: r for r in node_rooms}
    out = Packing(counted={k: Fraction(0) for k in ("cpu", "memory", GPU_RESOURCE)})
    members: list[list[int]] = []
    sums: list[_Sum] = []
    cands: list[list[str]] = []
    for i in order:
        # in-flight NodeClaims, fewest pods first (a stable sort: Go's sort.Slice is not
        # stable, but claims of equal size either all take the pod or none does here)
        placed = False
        for c in sorted(range(len(members)), key=lambda c: len(members[c])):
            total = sums[c].plus(pods[i])
            fit = [t for t in cands[c] if _room_holds(by_name[t], total, most)]
            if fit:
                members[c].append(i)
                sums[c], cands[c] = total, fit
                placed = True
                break
        if placed:
            continue
        allowed = [
            r
            for r in node_rooms
            if all(capacity_of(r.node)[k] <= left for k, left in remaining.items())
        ]
        fit = [r for r in allowed if holds(r, [pods[i]], most)]
        if not fit:
            out.unplaced.append(i)
            if not out.why:
                out.why = (
                    "all available instance types exceed limits for nodepool"
                    if len(allowed) < len(node_rooms)
                    and any(holds(r, [pods[i]], most) for r in node_rooms)
                    else "no instance type holds the pod"
                )
            continue
        members.append([i])
        sums.append(_Sum().plus(pods[i]))
        cands.append([r.node.instance_type for r in fit])
        for k in out.counted:
            most_k = max(capacity_of(r.node)[k] for r in fit)
            out.counted[k] += most_k
            if k in remaining:
                remaining[k] -= most_k
    out.claims = [
        Claim(tuple(m), tuple(c), tuple(t for t in c if sums[k].cpu_m > by_name[t].cpu_m))
        for k, (m, c) in enumerate(zip(members, cands, strict=True))
    ]
    return out


# --- what stops packing, read from the emitted pod template ------------------------------------


def spread_limit(template: Mapping[str, Any]) -> tuple[int | None, str]:
    """(the most pods of this template one node may hold, why), or (None, "") when nothing in
    the pod template limits it: a required pod anti-affinity on the hostname that selects the
    pod's own labels (1), a hostname topology spread with whenUnsatisfiable DoNotSchedule that
    selects them (maxSkew: a fresh node is always a domain with 0), a container host port (1)."""
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    labels = meta.get("labels") or {}
    caps: list[tuple[int, str]] = []
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    for term in anti:
        if term.get("topologyKey") == HOSTNAME and selects(term.get("labelSelector"), labels):
            caps.append((1, "a required pod anti-affinity on kubernetes.io/hostname"))
    for tsc in spec.get("topologySpreadConstraints") or []:
        if (
            tsc.get("topologyKey") == HOSTNAME
            and tsc.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
            and selects(tsc.get("labelSelector"), labels)
        ):
            skew = int(tsc.get("maxSkew") or 1)
            caps.append((skew, f"a kubernetes.io/hostname topology spread of maxSkew {skew}"))
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                caps.append((1, f"host port {port['hostPort']}"))
    if not caps:
        return None, ""
    most = min(n for n, _ in caps)
    return most, "; ".join(why for n, why in caps if n == most)


def templates_limit(templates: Iterable[Mapping[str, Any]]) -> int | None:
    """The tightest `spread_limit` over a job's pod templates (None: none limits packing)."""
    caps = [n for t in templates if (n := spread_limit(t)[0]) is not None]
    return min(caps, default=None)
