"""Plan check: how each team's Kueue queue would admit the declared jobs.

A small, documented simulation of Kueue's admission (v0.19, classic preemption), run on the
objects the plan rendered (ClusterQueues, ResourceFlavors, LocalQueues,
WorkloadPriorityClasses) and the jobs the program declared:

- Snapshot: every declared job is submitted at once, in declaration order (that order is
  their creation order, Kueue's FIFO tie-break), into a cluster running nothing else.
- A job is one workload: all of its pods at once (gang admission), `workers` x its pod's
  requests of cpu, memory and nvidia.com/gpu (EFA is excluded from quota).
- Its queue: the LocalQueue its `kueue.x-k8s.io/queue-name` label names in its namespace,
  and that queue's ClusterQueue (whose namespaceSelector must admit the namespace). Its
  priority: the WorkloadPriorityClass its `kueue.x-k8s.io/priority-class` label names.
- Its flavor: the first flavor of the ClusterQueue whose nodeLabels agree with the job's
  nodeSelector and whose nodeTaints its pods tolerate.
- Quota: it fits when, for every resource, its queue's usage in that flavor stays within the
  nominal quota plus the borrowing limit (no limit: anything), and the cohort's usage stays
  within the sum of its members' nominal quotas there (what is idle can be lent).
- Order: Kueue cycles; in each, every queue offers its next pending job (highest priority,
  then oldest), and jobs that fit without borrowing go first, then by priority and age.
  `StrictFIFO` queues wait behind their head; `BestEffortFIFO` queues let later jobs pass
  one that does not fit.
- The namespace's ResourceQuota (the hard backstop: the team's total over all pools, since
  Kueue counts quota per pool) must hold the job's pods next to the team's running jobs.
  Kueue does not see it: a job it admits past the backstop gets no pods until the team's
  other jobs finish (waitForPodsReady evicts and requeues it); the simulation shows such a
  job waiting, with the backstop's numbers.
- Preemption (classic): a job that does not fit may evict lower-priority jobs of its own
  queue (`withinClusterQueue`), jobs of queues that borrow in its flavor when it only takes
  back its own nominal quota (`reclaimWithinCohort`), and, when it must borrow itself,
  lower-priority jobs up to `maxPriorityThreshold` of borrowing queues
  (`borrowWithinCohort`); victims are picked from borrowing queues first, lowest priority
  first, newest first, then the set is minimised. Evicted jobs queue again.

What it does not model: node capacity and topology (the scheduling rehearsal and
topology-aware scheduling decide where pods fit), fair sharing, admission checks, partial
admission, and jobs already running on the cluster.

Findings (waivable): a job whose object lacks its queue label, a job that can never be
admitted (bigger than its queue could ever hold, or no queue, flavor or priority class that
accepts it), and a job object that sets a field Kueue owns (its `suspend`, the pod
templates' `schedulingGates`, or a nodeSelector value that conflicts with its flavor, which
makes Kueue fail to start it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trainforge.core.quantity import parse_quantity
from trainforge.jobs.wiring import sizing_rule
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_LABEL = "trainforge.io/job"
GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU)

QUEUE_TITLE = "Queue admission (Kueue, all declared jobs submitted at once)"
RULE_LABEL = "TRAINFORGE_QUEUE_LABEL"
RULE_NEVER = "TRAINFORGE_QUEUE_NEVER_ADMITTED"
RULE_OWNED = "TRAINFORGE_QUEUE_KUEUE_OWNED_FIELD"
RULES = {
    RULE_LABEL: "let the job's backend label its object with the team's queue "
    "(trainforge.jobs.tenancy.queue_labels)",
    RULE_NEVER: "make the job smaller, or give the team more nominal quota (quota.pools) "
    "or a larger borrowing limit in that pool",
    RULE_OWNED: "leave suspend, schedulingGates and the flavor's node labels to Kueue "
    "(docs/teams.md, 'Who owns which field')",
}


@dataclass
class Flavor:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    topology: str | None


@dataclass
class Queue:
    name: str
    cohort: str | None
    namespaces: dict[str, str]  # namespaceSelector.matchLabels
    strategy: str
    preemption: dict[str, Any]
    nominal: dict[str, dict[str, Fraction]]  # flavor -> resource -> quota
    borrow_limit: dict[str, dict[str, Fraction | None]]
    flavors: list[str]
    usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)

    def use(self, flavor: str, resource: str) -> Fraction:
        return self.usage.get(flavor, {}).get(resource, Fraction(0))


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
    state: str = "pending"  # pending | admitted | never
    borrowing: dict[str, Fraction] = field(default_factory=dict)
    reason: str = ""
    preempted_by: str | None = None
    preempted_why: str = ""
    admitted_at: int = -1
    sizing: str = ""


def _q(v: Any) -> Fraction:
    return parse_quantity(str(v))


def _pod_specs(node: Any) -> list[dict[str, Any]]:
    """Every pod spec (a mapping with `containers`) inside an object, in document order."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            out.append(node)
        for v in node.values():
            out += _pod_specs(v)
    elif isinstance(node, list):
        for v in node:
            out += _pod_specs(v)
    return out


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value") == taint.get("value"):
            return True
    return False


def _fmt(resource: str, v: Fraction) -> str:
    if resource == "memory":
        return f"{float(v / 2**30):.4g}Gi"
    return f"{float(v):g}"


class Simulation:
    def __init__(
        self,
        queues: dict[str, Queue],
        flavors: dict[str, Flavor],
        hard: dict[str, dict[str, Fraction]] | None = None,
    ) -> None:
        self.queues = queues
        self.flavors = flavors
        self.hard = hard or {}  # namespace -> resource -> its ResourceQuota's hard limit
        self.ns_usage: dict[str, dict[str, Fraction]] = {}
        self.clock = 0

    # -- the namespace backstop -----------------------------------------------------------
    def over_backstop(self, w: Workload) -> str | None:
        """None, or why the namespace's ResourceQuota would refuse the job's pods now."""
        hard = self.hard.get(w.namespace, {})
        used = self.ns_usage.get(w.namespace, {})
        for r, need in w.need.items():
            limit = hard.get(r)
            if limit is not None and used.get(r, Fraction(0)) + need > limit:
                return (
                    f"waits for the team's total: {_fmt(r, need)} {r} more, but namespace "
                    f"{w.namespace}'s ResourceQuota (the team's total over all pools) holds "
                    f"{_fmt(r, limit)} and {_fmt(r, used.get(r, Fraction(0)))} are in use"
                )
        return None

    # -- quota ----------------------------------------------------------------------------
    def cohort(self, q: Queue) -> list[Queue]:
        if not q.cohort:
            return [q]
        return [x for x in self.queues.values() if x.cohort == q.cohort]

    def fits(self, w: Workload, extra_free: dict[str, dict[str, Fraction]] | None = None) -> bool:
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        members = self.cohort(q)
        for r, need in w.need.items():
            freed = (extra_free or {}).get(q.name, {}).get(r, Fraction(0))
            used = q.use(f, r) - freed + need
            limit = q.borrow_limit[f][r]
            if limit is not None and used > q.nominal[f][r] + limit:
                return False
            if not q.cohort and used > q.nominal[f][r]:
                return False
            total_used = (
                sum(
                    (m.use(f, r) - (extra_free or {}).get(m.name, {}).get(r, Fraction(0)))
                    for m in members
                )
                + need
            )
            if total_used > sum(m.nominal[f][r] for m in members):
                return False
        return True

    def borrows(self, w: Workload) -> dict[str, Fraction]:
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        out = {}
        for r, need in w.need.items():
            over = q.use(f, r) + need - q.nominal[f][r]
            if over > 0:
                out[r] = min(over, need)
        return out

    def can_ever_fit(self, w: Workload) -> str | None:
        """None, or why the job exceeds what its queue could ever hold in its flavor."""
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        for r, need in w.need.items():
            lendable = sum(m.nominal[f][r] for m in self.cohort(q) if m is not q)
            limit = q.borrow_limit[f][r]
            most = q.nominal[f][r] + (lendable if limit is None else min(limit, lendable))
            if need > most:
                return (
                    f"needs {_fmt(r, need)} {r} in pool {f}, but team queue {q.name} can hold "
                    f"at most {_fmt(r, most)} there (nominal {_fmt(r, q.nominal[f][r])}"
                    + (
                        f" + up to {_fmt(r, most - q.nominal[f][r])} borrowed from cohort "
                        f"{q.cohort}"
                        if q.cohort
                        else ", no cohort to borrow from"
                    )
                    + ")"
                )
        return None

    def admit(self, w: Workload) -> None:
        q = self.queues[w.queue or ""]
        w.borrowing = self.borrows(w)
        ns = self.ns_usage.setdefault(w.namespace, {})
        for r, need in w.need.items():
            q.usage.setdefault(w.flavor or "", {})
            q.usage[w.flavor or ""][r] = q.use(w.flavor or "", r) + need
            ns[r] = ns.get(r, Fraction(0)) + need
        w.state, w.reason, w.admitted_at = "admitted", "", self.clock
        self.clock += 1

    def evict(self, w: Workload, by: Workload, why: str) -> None:
        q = self.queues[w.queue or ""]
        ns = self.ns_usage.setdefault(w.namespace, {})
        for r, need in w.need.items():
            q.usage[w.flavor or ""][r] = q.use(w.flavor or "", r) - need
            ns[r] = ns.get(r, Fraction(0)) - need
        w.state, w.borrowing, w.preempted_by, w.preempted_why = "pending", {}, by.job, why
        w.reason = f"preempted by {by.job} ({why})"

    # -- preemption (classic) ---------------------------------------------------------------
    def try_preempt(self, w: Workload, admitted: list[Workload]) -> bool:
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        pol = q.preemption
        within = pol.get("withinClusterQueue", "Never")
        reclaim = pol.get("reclaimWithinCohort", "Never")
        borrow = pol.get("borrowWithinCohort") or {}
        needs_borrow = any(
            q.use(f, r) + n > q.nominal[f][r] for r, n in w.need.items() if r in q.nominal[f]
        )
        borrowing_queues = {
            m.name
            for m in self.cohort(q)
            if m is not q and any(m.use(f, r) > m.nominal[f][r] for r in RESOURCES)
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
        if not cands:
            return False
        cands.sort(
            key=lambda c: (
                c[0].queue not in borrowing_queues,
                c[0].priority,
                -c[0].admitted_at,
            )
        )
        chosen: list[tuple[Workload, str]] = []
        freed: dict[str, dict[str, Fraction]] = {}

        def free(v: Workload, sign: int) -> None:
            per = freed.setdefault(v.queue or "", {})
            for r, n in v.need.items():
                per[r] = per.get(r, Fraction(0)) + sign * n

        for c in cands:
            chosen.append(c)
            free(c[0], 1)
            if self.fits(w, freed):
                break
        else:
            return False
        for c in list(reversed(chosen)):  # minimise the set of victims
            free(c[0], -1)
            if self.fits(w, freed):
                chosen.remove(c)
            else:
                free(c[0], 1)
        for v, why in chosen:
            self.evict(v, w, why)
        self.admit(w)
        return True

    # -- the loop -----------------------------------------------------------------------------
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
                admitted = [x for x in live if x.state == "admitted"]
                backstop = self.over_backstop(w)
                if backstop:
                    w.reason = backstop
                    inadmissible.add(id(w))
                elif self.fits(w):
                    self.admit(w)
                elif self.try_preempt(w, admitted):
                    freed = True
                else:
                    w.reason = self.why_waiting(w)
                    if w.preempted_by:
                        w.reason = f"preempted by {w.preempted_by} ({w.preempted_why}), {w.reason}"
                    inadmissible.add(id(w))
            if freed:
                # evicted jobs queue again, and what waited may fit now
                inadmissible.clear()

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
                if id(w) in inadmissible:
                    if q.strategy == "StrictFIFO":
                        break  # the head blocks its queue
                    continue
                heads.append(w)
                break
        return heads

    def why_waiting(self, w: Workload) -> str:
        q = self.queues[w.queue or ""]
        f = w.flavor or ""
        parts = []
        for r, need in w.need.items():
            used = q.use(f, r)
            members = self.cohort(q)
            # what the whole cohort has unused (a borrower already took its part of it)
            idle = max(
                sum(m.nominal[f][r] for m in members) - sum(m.use(f, r) for m in members),
                Fraction(0),
            )
            over = used + need - q.nominal[f][r]
            if over <= 0 and self.fits(w):
                continue
            if used + need > q.nominal[f][r]:
                limit = q.borrow_limit[f][r]
                text = (
                    f"{_fmt(r, need)} {r} in pool {f}: team {q.name} has "
                    f"{_fmt(r, q.nominal[f][r])} nominal, {_fmt(r, used)} in use"
                )
                if q.cohort:
                    text += f"; cohort {q.cohort} has {_fmt(r, idle)} idle"
                    if limit is not None:
                        text += f", borrowing limit {_fmt(r, limit)}"
                parts.append(text)
        return "waits for quota: " + ("; ".join(parts) or "its cohort's capacity is in use")


# --- reading the rendered objects ----------------------------------------------------------


def _queues(ctx: PlanContext) -> tuple[dict[str, Queue], dict[str, Flavor], dict, dict]:
    queues: dict[str, Queue] = {}
    flavors: dict[str, Flavor] = {}
    local: dict[tuple[str, str], str] = {}
    priorities: dict[str, int] = {}
    for o in ctx.objects:
        d = o.doc
        if not str(d.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            continue
        spec = d.get("spec") or {}
        if o.kind == "ResourceFlavor":
            flavors[o.obj_name] = Flavor(
                o.obj_name,
                dict(spec.get("nodeLabels") or {}),
                list(spec.get("nodeTaints") or []),
                spec.get("topologyName"),
            )
        elif o.kind == "LocalQueue":
            local[(o.namespace or "", o.obj_name)] = str(spec.get("clusterQueue"))
        elif o.kind == "WorkloadPriorityClass":
            priorities[o.obj_name] = int(d.get("value", 0))
        elif o.kind == "ClusterQueue":
            nominal: dict[str, dict[str, Fraction]] = {}
            limits: dict[str, dict[str, Fraction | None]] = {}
            order = []
            for group in spec.get("resourceGroups") or []:
                for fl in group.get("flavors") or []:
                    order.append(fl["name"])
                    nominal[fl["name"]] = {r: Fraction(0) for r in RESOURCES}
                    limits[fl["name"]] = {r: Fraction(0) for r in RESOURCES}
                    for res in fl.get("resources") or []:
                        nominal[fl["name"]][res["name"]] = _q(res.get("nominalQuota", 0))
                        lim = res.get("borrowingLimit")
                        limits[fl["name"]][res["name"]] = _q(lim) if lim is not None else None
            sel = ((spec.get("namespaceSelector") or {}).get("matchLabels")) or {}
            queues[o.obj_name] = Queue(
                name=o.obj_name,
                cohort=spec.get("cohortName"),
                namespaces=dict(sel),
                strategy=spec.get("queueingStrategy", "BestEffortFIFO"),
                preemption=dict(spec.get("preemption") or {}),
                nominal=nominal,
                borrow_limit=limits,
                flavors=order,
            )
    return queues, flavors, local, priorities


_HARD = {"requests.nvidia.com/gpu": GPU, "requests.cpu": "cpu", "requests.memory": "memory"}


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
                v = _q(hard[key])
                mine[r] = min(v, mine[r]) if r in mine else v
    return out


def _workload_object(ctx: PlanContext, name: str, namespace: str) -> Any:
    for o in ctx.objects:
        labels = (o.doc.get("metadata") or {}).get("labels") or {}
        if (
            o.namespace == namespace
            and labels.get(JOB_LABEL) == name
            and _pod_specs(o.doc.get("spec"))
            and o.kind not in ("ConfigMap", "PodMonitor", "Service")
        ):
            return o
    return None


def _owned_fields(obj: Any, flavor: Flavor | None) -> list[str]:
    """Fields of the job's object that Kueue owns once it manages the job."""
    spec = obj.doc.get("spec") or {}
    out = []
    if "suspend" in spec:
        out.append("spec.suspend (Kueue suspends and resumes the job)")
    if "suspend" in (spec.get("runPolicy") or {}):
        out.append("spec.runPolicy.suspend (Kueue suspends and resumes the job)")
    for pod in _pod_specs(spec):
        if pod.get("schedulingGates"):
            out.append("a pod template's schedulingGates (Kueue adds and removes its own)")
        if flavor is not None:
            for k, v in (pod.get("nodeSelector") or {}).items():
                if k in flavor.labels and flavor.labels[k] != v:
                    out.append(
                        f"nodeSelector {k}={v}, which conflicts with flavor {flavor.name}'s "
                        f"{k}={flavor.labels[k]} (Kueue could not start the job)"
                    )
    return sorted(set(out))


def check(ctx: PlanContext) -> CheckResult:
    declared = getattr(ctx.declared, "jobs", None) or []
    queues, flavors, local, priorities = _queues(ctx)
    if not declared or not queues:
        return CheckResult()
    findings: list[Finding] = []
    workloads: list[Workload] = []

    def finding(w: Workload, rule: str, message: str, obj: Any = None) -> None:
        ident = obj.ident if obj is not None else f"{w.namespace}/job/{w.job}"
        findings.append(
            Finding(
                resource=ident,
                rule=rule,
                message=f"job {w.job} (team {w.team}): {message}",
                fix=RULES[rule],
                urn=getattr(obj, "urn", "") or "",
                names=frozenset({w.job, ident}),
            )
        )

    for i, dj in enumerate(declared):
        spec, target = dj.spec, dj.target
        if target.team.queue is None:
            continue
        w = Workload(spec.name, spec.team, target.namespace, i)
        w.sizing = sizing_rule(spec, target.pool)
        workloads.append(w)
        obj = _workload_object(ctx, spec.name, target.namespace)
        labels = ((obj.doc.get("metadata") or {}).get("labels") or {}) if obj else {}
        queue_name = labels.get(QUEUE_LABEL)
        if obj is None or queue_name is None:
            w.state = "never"
            w.reason = "its object has no kueue.x-k8s.io/queue-name label: Kueue ignores it"
            finding(w, RULE_LABEL, w.reason, obj)
            continue
        pods = _pod_specs(obj.doc.get("spec"))
        pod = pods[0]
        cq_name = local.get((target.namespace, queue_name))
        if cq_name is None or cq_name not in queues:
            w.state = "never"
            w.reason = f"no LocalQueue {queue_name!r} (with a ClusterQueue) in {target.namespace}"
            finding(w, RULE_NEVER, w.reason, obj)
            continue
        q = queues[cq_name]
        if any(
            k != "kubernetes.io/metadata.name" or v != target.namespace
            for k, v in q.namespaces.items()
        ):
            w.state = "never"
            w.reason = f"ClusterQueue {cq_name} does not admit namespace {target.namespace}"
            finding(w, RULE_NEVER, w.reason, obj)
            continue
        w.queue = cq_name
        pclass = labels.get(PRIORITY_LABEL, "")
        w.priority_class = pclass
        if pclass and pclass not in priorities:
            w.state = "never"
            w.reason = f"no WorkloadPriorityClass {pclass!r}"
            finding(w, RULE_NEVER, w.reason, obj)
            continue
        w.priority = priorities.get(pclass, 0)
        selector = pod.get("nodeSelector") or {}
        tolerations = pod.get("tolerations") or []
        for fname in q.flavors:
            fl = flavors.get(fname)
            if fl is None:
                continue
            agrees = all(selector.get(k, v) == v for k, v in fl.labels.items())
            tolerated = all(_tolerates(tolerations, t) for t in fl.taints)
            if agrees and tolerated:
                w.flavor = fname
                break
        owned = _owned_fields(obj, flavors.get(w.flavor or ""))
        if owned:
            finding(w, RULE_OWNED, "sets " + "; ".join(owned), obj)
        if w.flavor is None:
            w.state = "never"
            w.reason = (
                f"no flavor of ClusterQueue {cq_name} matches its nodeSelector {selector} "
                "and tolerations"
            )
            finding(w, RULE_NEVER, w.reason, obj)
            continue
        workers = spec.workers
        per_pod = {
            "cpu": _q(spec.cpu or 0),
            "memory": _q(spec.memory or 0),
            GPU: Fraction(spec.gpus_per_worker or 0),
        }
        w.need = {r: v * workers for r, v in per_pod.items() if v}
        sim = Simulation(queues, flavors)
        why = sim.can_ever_fit(w)
        if why:
            w.state = "never"
            w.reason = f"can never be admitted: {why}"
            finding(w, RULE_NEVER, w.reason, obj)

    sim = Simulation(queues, flavors, _backstops(ctx))
    sim.run(workloads)
    return CheckResult(findings=findings, sections=[_section(workloads, queues)])


def summary(workloads: list[Workload]) -> str:
    """One line: every job admitted at once, or which wait (or never run) and why."""
    waiting = [w for w in workloads if w.state != "admitted"]
    if not waiting:
        return f"all {len(workloads)} job(s) are admitted at once"
    whys = "; ".join(f"{w.team}/{w.job} {w.reason or 'waits'}" for w in waiting)
    return f"{len(waiting)} of {len(workloads)} job(s) do not start at once: {whys}"


def _section(workloads: list[Workload], queues: dict[str, Queue]) -> Section:
    lines: list[str] = [summary(workloads)]
    data = []
    for w in workloads:
        if w.state == "admitted":
            text = f"runs on {w.flavor}"
            if w.borrowing:
                q = queues[w.queue or ""]
                lent = ", ".join(f"{_fmt(r, v)} {r}" for r, v in sorted(w.borrowing.items()))
                text += f", borrowing {lent} from cohort {q.cohort}"
            else:
                text += " within its nominal quota"
        elif w.state == "never":
            text = w.reason
        else:
            text = w.reason or "waits"
        label = f"{w.team}/{w.job}"
        prio = f" [{w.priority_class}]" if w.priority_class else ""
        lines.append(f"{label}{prio}: {text}")
        if w.sizing:
            lines.append(f"  sizing: {w.sizing}")
        data.append(
            {
                "job": w.job,
                "team": w.team,
                "queue": w.queue,
                "flavor": w.flavor,
                "priority": w.priority_class,
                "state": {"admitted": "runs", "pending": "waits"}.get(w.state, "never"),
                "borrowing": {r: str(v) for r, v in w.borrowing.items()},
                "preemptedBy": w.preempted_by,
                "reason": w.reason,
                "sizing": w.sizing,
            }
        )
    return Section(QUEUE_TITLE, lines, data)


def admission(ctx: PlanContext) -> dict[tuple[str, str], tuple[str, str]]:
    """(team, job) -> (state, reason) of the queue simulation, state "runs" | "waits" |
    "never", for the cost report: what runs at once is what Kueue admits, not every declared
    job. Empty without Kueue queues (nothing holds a job back)."""
    result = check(ctx)
    rows = next((s.data for s in result.sections if s.title == QUEUE_TITLE), None) or []
    return {(r["team"], r["job"]): (r["state"], r["reason"] or "") for r in rows}


# --- a workload submitted from outside the stack (the Kubeflow SDK, kubectl) ---------------------

DEFAULT_LOCAL_QUEUE = "default"


def admit_submitted(
    ctx: PlanContext, doc: dict[str, Any], pod: dict[str, Any], pods: int
) -> Workload:
    """Would Kueue admit `doc` (a TrainJob, Job, ... the stack does not declare), whose `pods`
    pods look like `pod` (its effective pod template), on this plan's queues? Alone, on empty
    queues: the question is whether it can ever run, not when.

    Kueue's rules, as documented upstream (read 2026-11-27):
    * a job of a built-in integration without the `kueue.x-k8s.io/queue-name` label is given
      the LocalQueue `default` when its namespace has one (apache/spark-kubernetes-operator
      PR #961 on Kueue v0.20's webhook; without one Kueue leaves it alone);
    * a flavor's `nodeTaints` must be tolerated by the pod's own tolerations for the flavor to
      be assigned; its `tolerations` are added to the admitted pods, for the nodes' taints
      (kubernetes-sigs/kueue site/content/en/docs/concepts/resource_flavor.md @013beab).
    The pods must then tolerate the taints of the pool the flavor's node labels select
    (`flavor_pool_taints`, from the plan's Karpenter NodePools)."""
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace") or ""
    labels = meta.get("labels") or {}
    w = Workload(str(meta.get("name")), ns, ns, 0)
    queues, flavors, local, priorities = _queues(ctx)
    queue_name = labels.get(QUEUE_LABEL)
    if queue_name is None and (ns, DEFAULT_LOCAL_QUEUE) in local:
        queue_name = DEFAULT_LOCAL_QUEUE
    if queue_name is None:
        w.state, w.reason = (
            "never",
            (
                f"no kueue.x-k8s.io/queue-name label and no LocalQueue {DEFAULT_LOCAL_QUEUE!r} in "
                f"{ns}: Kueue leaves it alone"
            ),
        )
        return w
    cq_name = local.get((ns, queue_name))
    if cq_name is None or cq_name not in queues:
        w.state, w.reason = "never", f"no LocalQueue {queue_name!r} (with a ClusterQueue) in {ns}"
        return w
    q = queues[cq_name]
    w.queue = cq_name
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    own = list(spec.get("tolerations") or [])
    container_requests: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            container_requests[r] = container_requests.get(r, Fraction(0)) + _q(v)
    w.need = {r: v * pods for r, v in container_requests.items() if r in RESOURCES and v}
    node_taints = _pool_taints(ctx)
    why_not = []
    for fname in q.flavors:
        fl = flavors.get(fname)
        if fl is None:
            continue
        if not all(selector.get(k, v) == v for k, v in fl.labels.items()):
            why_not.append(f"{fname}: nodeSelector {selector} disagrees")
            continue
        if GPU in w.need and not q.nominal.get(fname, {}).get(GPU):
            why_not.append(f"{fname}: no GPU quota")
            continue
        untolerated = [t for t in fl.taints if not _tolerates(own, t)]
        if untolerated:
            why_not.append(f"{fname}: untolerated flavor taint {untolerated[0].get('key')}")
            continue
        added = _flavor_tolerations(ctx, fname)
        pool = node_taints.get(tuple(sorted(fl.labels.items())), [])
        blocked = [t for t in pool if not _tolerates([*own, *added], t)]
        if blocked:
            why_not.append(f"{fname}: its nodes' taint {blocked[0].get('key')} is not tolerated")
            continue
        w.flavor = fname
        # a flavor whose quota can never hold it: Kueue tries the next (flavor fungibility)
        why = Simulation(queues, flavors).can_ever_fit(w)
        if why is None:
            break
        why_not.append(f"{fname}: {why}")
        w.flavor = None
    if w.flavor is None:
        w.state, w.reason = "never", "no flavor fits: " + "; ".join(why_not)
        return w
    w.state = "admitted"
    return w


def _flavor_tolerations(ctx: PlanContext, name: str) -> list[dict[str, Any]]:
    for o in ctx.objects:
        if o.kind == "ResourceFlavor" and o.obj_name == name:
            return list(((o.doc.get("spec") or {}).get("tolerations")) or [])
    return []


def _pool_taints(ctx: PlanContext) -> dict[tuple, list[dict[str, Any]]]:
    """The taints of each Karpenter NodePool's nodes, by the node labels a flavor selects
    them with (its template's labels)."""
    out: dict[tuple, list[dict[str, Any]]] = {}
    for o in ctx.objects:
        if o.kind != "NodePool":
            continue
        tmpl = (o.doc.get("spec") or {}).get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        taints = list((tmpl.get("spec") or {}).get("taints") or [])
        for k, v in labels.items():
            out[((k, v),)] = taints
    return out
