"""When a job Kueue holds pending is expected to start, from what its team may read.

The plan answers the same question offline (trainforge.plan.checks.queues: every declared job
submitted at once, each running for its expected duration). Here the queue is the live one:

- the team's ClusterQueue (its nominal quota per flavor, queueing strategy, preemption) and
  its ResourceFlavors: the flavor a pending workload waits for is the one Kueue's flavor
  assignment gives it (trainforge.plan.kueue, the plan's model);
- the workloads that hold its quota now: the team's admitted Workloads, each ending when
  rank 0's metrics say (`eta_seconds`, what `trainforge status` of that job prints as ETA),
  else its expected duration (the annotation the job emitter writes,
  trainforge.jobs.duration) less the time since its admission;
- the workloads waiting ahead of it, in Kueue's order (the visibility API's
  positionInClusterQueue, over every LocalQueue of the namespace that feeds that
  ClusterQueue), each running for its expected duration once admitted.

These run through the plan's own simulation (`queues.queue_start`), so a live estimate and
the plan's agree for the same queue; a job ahead timed by its deadline (a ceiling) makes the
start an upper bound ("within"). It counts the team's nominal quota only: what the rest
of the cohort lends is not visible to a team (other teams' queues and jobs are not), so the
job may start earlier; and later when a job ahead runs longer than expected.

It says the start cannot be estimated, and why, instead of giving a figure, when part of the
queue is out of sight or unknown: a workload holding or waiting for the ClusterQueue's quota
in a namespace the team cannot read, a job ahead without an expected duration (or that ran
past it), a flavor it cannot tell, or a queue that by what the team sees has room for the job
now (then what holds it is outside that view: a cohort whose quota other teams borrow, the
namespace's ResourceQuota; Kueue's own message is shown).

Kueue facts this relies on (kubernetes-sigs/kueue at v0.19.2, the newest v0.19 tag the source
mirror holds; the platform pins chart 0.19.5, trainforge.core.versions; read 2026-11-27):
- the visibility API is on by default: feature gate VisibilityOnDemand is beta and default
  true since 0.9 (pkg/features/kube_features.go), and the chart renders the APIServices
  v1beta2 and v1beta1.visibility.kueue.x-k8s.io unconditionally
  (charts/kueue/templates/visibility/apiservice_v1beta2.yaml);
- `GET .../namespaces/NS/localqueues/LQ/pendingworkloads` lists that LocalQueue's pending
  workloads of its ClusterQueue (heap, inadmissible and in-flight ones, in queue order;
  pkg/cache/queue/cluster_queue.go Snapshot/totalElements), each with
  positionInClusterQueue counted over every LocalQueue of the ClusterQueue, and at most
  1000 by default (pkg/visibility/storage/pending_workloads_lq.go); the RBAC resource is
  `localqueues/pendingworkloads` (config/components/rbac/pending_workloads_lq_viewer_role.yaml),
  which the team's Role grants (trainforge.platform.team_access).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from trainforge.jobs.backends import pod_templates
from trainforge.jobs.duration import (
    DEADLINE_DETAIL,
    EXPECTED_BASIS,
    EXPECTED_SECONDS,
    Duration,
    cut_at_deadline,
    duration_text,
)
from trainforge.jobs.pod import JOB_LABEL
from trainforge.live.gather import (
    KUEUE,
    VISIBILITY,
    Gathered,
    NotFound,
    cannot_read,
    condition,
    find_job,
    metrics_of,
    pending_workloads,
)
from trainforge.live.kube import Api, KubeError
from trainforge.plan import kueue as K
from trainforge.plan.checks.queues import (
    DEFAULT_GRACE,
    Queued,
    amount,
    pods_grace,
    preempt_words,
    queue_start,
)

# what the team's cohort lends is not visible to it: as much as the queue may borrow
_UNSEEN = Fraction(10**18)


@dataclass
class Holder:
    """A workload of the team's ClusterQueue that holds its quota or waits ahead of the job."""

    workload: str
    job: str
    running: bool
    need: dict[str, Fraction]
    flavor: str | None
    seconds: float | None  # what it has left to run (running) or its expected run time
    basis: str  # where `seconds` comes from, or why it is unknown
    ceiling: bool = False  # `seconds` is a ceiling (its activeDeadlineSeconds): it may end sooner
    position: int = -1  # positionInClusterQueue of a waiting one
    priority: int = 0
    grace: float = float(DEFAULT_GRACE)  # its pods' terminationGracePeriodSeconds
    reserved: str = ""  # a running one's QuotaReserved time (RFC 3339: sorts as time)


@dataclass
class Expected:
    """The expected start of a pending job: `seconds` from now (None: cannot be estimated,
    `unknown` says why), `at` the wall-clock time, and the workloads it waits behind."""

    seconds: float | None
    at: datetime | None
    cluster_queue: str
    flavor: str | None = None
    holders: list[Holder] = field(default_factory=list)
    unknown: str = ""
    cohort: str | None = None
    bound: bool = False  # `seconds` is an upper bound: a job ahead is timed by a ceiling
    # (job, grace) of each running job its admission preempts: its pods start once theirs
    # are gone (the plan's `preempt_words`)
    preempts: list[tuple[str, float]] = field(default_factory=list)


# --- reading the queue --------------------------------------------------------------------------


def _admitted_flavor(wl: dict[str, Any]) -> str | None:
    adm = wl.get("status", {}).get("admission") or {}
    flavors = {
        f for a in adm.get("podSetAssignments", []) or [] for f in (a.get("flavors") or {}).values()
    }
    return next(iter(flavors)) if len(flavors) == 1 else None


def _assignment(
    wl: dict[str, Any], queue: K.ClusterQueue, flavors: dict[str, K.Flavor], lrs: list[dict]
) -> K.Assignment:
    """Kueue's flavor assignment (the plan's model, trainforge.plan.kueue: the flavors' labels
    and taints, flavorFungibility, topology) of a pending Workload's pod sets once the queue's
    quota is free, its cohort lending up to the queue's borrowingLimit: its `flavor` is the
    one the workload waits for (None: no one flavor). `lrs`: the namespace's LimitRanges."""
    lent = {f: {r: _UNSEEN for r in K.RESOURCES} for f in queue.flavors}
    quotas = K.Quotas({queue.name: queue}, {queue.cohort: lent} if queue.cohort else {})
    return K.Assigner(quotas, flavors).assign(queue, K.workload_podsets(wl, lrs))


def _flavors(api: Api, queue: K.ClusterQueue) -> dict[str, K.Flavor]:
    """The queue's ResourceFlavors (one that does not exist is missing: Kueue skips it)."""
    docs = [_get(api, f"ResourceFlavor {f}", f"{KUEUE}/resourceflavors/{f}") for f in queue.flavors]
    return K.read(d for d in docs if d).flavors


def _job_name(wl: dict[str, Any]) -> str:
    owners = wl.get("metadata", {}).get("ownerReferences") or []
    if owners:
        return owners[0].get("name", "")
    return wl.get("metadata", {}).get("labels", {}).get(JOB_LABEL, "")


def _since(t: str | None, now: datetime) -> float | None:
    if not t:
        return None
    return (now - datetime.fromisoformat(t.replace("Z", "+00:00"))).total_seconds()


def _expected(job: dict[str, Any]) -> tuple[float | None, str]:
    """The job's expected run time and its basis, from the annotations its emitter wrote."""
    notes = job.get("metadata", {}).get("annotations") or {}
    basis = notes.get(EXPECTED_BASIS, "")
    try:
        seconds = float(notes[EXPECTED_SECONDS])
    except (KeyError, ValueError):
        return None, basis or f"no expected duration (no {EXPECTED_SECONDS} annotation)"
    return seconds, basis


def _holder(
    api: Api, ns: str, wl: dict[str, Any], running: bool, now: datetime, lrs: list[dict]
) -> Holder:
    name = _job_name(wl)
    h = Holder(
        wl["metadata"]["name"],
        name or wl["metadata"]["name"],
        running,
        K.workload_need(wl, lrs),
        None,
        None,
        "",
    )
    try:
        g = find_job(api, ns, name) if name else None
    except NotFound:
        g = None
    if g is None:
        h.basis = "its job object is not found"
        return h
    expected, basis = _expected(g.job)
    h.ceiling = basis == DEADLINE_DETAIL
    h.grace = pods_grace(pod_templates(g.job, build=False))
    h.reserved = (condition(wl, "QuotaReserved") or {}).get("lastTransitionTime") or ""
    if running:
        m = metrics_of(api, g)
        if m and m.get("eta_seconds") is not None and m.get("progress", 0) < 1:
            eta = metrics_eta(g.job, wl, float(m["eta_seconds"]), now)
            h.seconds, h.basis, h.ceiling = eta.seconds, f"ETA from its metrics{eta.note}", eta.cut
            return h
        admitted = (condition(wl, "Admitted") or condition(wl, "QuotaReserved") or {}).get(
            "lastTransitionTime"
        )
        ran = _since(admitted, now)
        if expected is None or ran is None:
            h.basis = basis
        elif ran > expected:
            h.basis = (
                f"ran {duration_text(ran)}, past its expected {duration_text(expected)}: {basis}"
            )
        else:
            h.seconds = expected - ran
            runs = "at most " if h.ceiling else "~"
            h.basis = (
                f"runs {runs}{duration_text(expected)}: {basis}; admitted {duration_text(ran)} ago"
            )
        return h
    h.seconds, h.basis = expected, basis
    return h


@dataclass(frozen=True)
class Eta:
    """A running job's time left: its metrics' ETA, cut at its deadline where that comes
    first (`metrics_eta`). `note`: "" or what the cut says, with the time."""

    seconds: float
    cut: bool
    note: str = ""


def job_deadline(job: dict[str, Any]) -> int | None:
    """The job object's activeDeadlineSeconds, where each backend's emitter writes it: a
    PyTorchJob's spec.runPolicy, a TrainJob's and a batch/v1 Job's spec."""
    spec = job.get("spec") or {}
    value = spec.get(
        "activeDeadlineSeconds", (spec.get("runPolicy") or {}).get("activeDeadlineSeconds")
    )
    return int(value) if isinstance(value, int | float) and value > 0 else None


def metrics_eta(job: dict[str, Any], wl: dict[str, Any] | None, eta: float, now: datetime) -> Eta:
    """A running job's time left from its metrics' `eta` (rank 0's trainforge_eta_seconds),
    no later than its deadline: its controller fails it at activeDeadlineSeconds counted from
    its start (jobs.duration.cut_at_deadline, the one rule the plan times runs by), so a run
    whose metrics say it ends later is cut there, and the words say so and when. Its start:
    the job's status.startTime (the training operator's and the Job controller's), else
    its Workload's admission. Why: `status` printed "ETA 5.0 h" for a job its deadline ends
    in 1 h, and a job queued behind it was told to wait 5 h."""
    deadline = job_deadline(job)
    started = (job.get("status") or {}).get("startTime")
    if not started and wl is not None:
        started = (condition(wl, "Admitted") or condition(wl, "QuotaReserved") or {}).get(
            "lastTransitionTime"
        )
    ran = _since(started, now)
    if deadline is None or ran is None:
        return Eta(eta, False)
    run = cut_at_deadline(Duration(ran + eta, "metrics", "ETA from its metrics"), deadline)
    if not run.cut:
        return Eta(eta, False)
    left = max(float(deadline) - ran, 0.0)
    at = (now + timedelta(seconds=left)).strftime("%Y-%m-%d %H:%M UTC")
    return Eta(
        left,
        True,
        f" {duration_text(eta)}, past its activeDeadlineSeconds {deadline}: cut in "
        f"{duration_text(left)} (about {at}), the run needs ~{duration_text(ran + eta)}",
    )


def _get(api: Api, what: str, path: str) -> dict[str, Any] | None:
    """A read the estimate needs: a failure ends it with the one wording of a failed read
    (gather.cannot_read: refused, or the cluster's failure); not found is None."""
    try:
        return api.get(path)
    except KubeError as e:
        raise _Hidden(cannot_read(what, e)) from None


class _Hidden(Exception):
    pass


def _pending_in(api: Api, ns: str, lq: str) -> list[dict[str, Any]]:
    try:
        found = pending_workloads(api, ns, lq)
    except KubeError as e:
        raise _Hidden(cannot_read(f"the queue positions of LocalQueue {lq}", e)) from None
    if found is None:
        served = ", ".join(base.removeprefix("/apis/") for base in VISIBILITY)
        raise _Hidden(f"Kueue's visibility API is not served (not found: {served})")
    return list(found.get("items", []))


def expected_start(api: Api, g: Gathered, now: datetime) -> Expected | None:
    """The expected start of `g`, a job whose Workload Kueue holds pending; None when it is
    not pending in a queue (admitted, or its quota reserved: it waits for admission checks),
    or when Kueue never admits it as things stand or an inactive queue holds it (`K.refused`,
    `K.held`): status and why print no figure then, so no read is made for one."""
    wl = g.workload
    if wl is None or any(
        (condition(wl, c) or {}).get("status") == "True" for c in ("Admitted", "QuotaReserved")
    ):
        return None
    if K.refused(wl, g.limit_ranges) or K.held(wl):
        return None
    cq_doc = g.cluster_queue
    cq_name = (g.local_queue or {}).get("spec", {}).get("clusterQueue", "?")
    if cq_doc is None:
        return Expected(None, None, cq_name, unknown=f"ClusterQueue {cq_name} is not readable")
    try:
        return _estimate(api, g, cq_doc, now)
    except _Hidden as e:
        return Expected(None, None, cq_name, unknown=str(e))
    except KubeError as e:
        # a read of a job ahead (its object, its pods): the rest of `status` stands; only
        # this figure is missing
        return Expected(None, None, cq_name, unknown=cannot_read(e.path, e))


def _estimate(api: Api, g: Gathered, cq_doc: dict[str, Any], now: datetime) -> Expected:
    ns, wl = g.namespace, g.workload or {}
    queue = K.cluster_queue(cq_doc)
    out = Expected(None, None, queue.name, cohort=queue.cohort)
    flavors = _flavors(api, queue)
    got = _assignment(wl, queue, flavors, g.limit_ranges)
    out.flavor = got.flavor
    if out.flavor is None:
        # Kueue's own message where no flavor takes a pod set (it names that one, the last)
        why = got.message if got.mode == K.NO_FIT else "its pod sets take different flavors"
        out.unknown = f"Kueue assigns it no one flavor of ClusterQueue {queue.name}: {why}"
        return out
    mine = wl["metadata"]["name"]
    workloads = _get(
        api, f"the Kueue Workloads of namespace {ns}", f"{KUEUE}/namespaces/{ns}/workloads"
    )
    workloads = (workloads or {}).get("items", [])
    by_name = {w["metadata"]["name"]: w for w in workloads}
    # quota holders: the namespace's workloads with quota reserved in this ClusterQueue
    holding = [
        w
        for w in workloads
        if (w.get("status", {}).get("admission") or {}).get("clusterQueue") == queue.name
        and (condition(w, "QuotaReserved") or {}).get("status") == "True"
        and (condition(w, "Finished") or {}).get("status") != "True"
    ]
    status = cq_doc.get("status", {})
    total = status.get("reservingWorkloads", status.get("admittedWorkloads"))
    if isinstance(total, int) and total > len(holding):
        out.unknown = (
            f"{total - len(holding)} of the {total} workloads holding ClusterQueue {queue.name}'s "
            f"quota are outside namespace {ns} (your access reads only {ns})"
        )
        return out
    # who waits ahead: every LocalQueue of the namespace that feeds this ClusterQueue
    lqs = _get(api, f"the LocalQueues of namespace {ns}", f"{KUEUE}/namespaces/{ns}/localqueues")
    lqs = (lqs or {}).get("items", [])
    pending: list[dict[str, Any]] = []
    for lq in lqs:
        if lq.get("spec", {}).get("clusterQueue") == queue.name:
            pending += _pending_in(api, ns, lq["metadata"]["name"])
    me = next((p for p in pending if p["metadata"]["name"] == mine), None)
    if me is None:
        out.unknown = f"Kueue's visibility API does not list {mine} among the pending workloads"
        return out
    position = int(me.get("positionInClusterQueue", 0))
    ahead = [p for p in pending if int(p.get("positionInClusterQueue", 0)) < position]
    if len(ahead) < position:
        out.unknown = (
            f"{position - len(ahead)} of the {position} workloads ahead of it in ClusterQueue "
            f"{queue.name} are outside namespace {ns}"
        )
        return out
    for w in holding:
        flavor = _admitted_flavor(w)
        if flavor != out.flavor:
            continue  # it holds quota of another flavor, which this job does not wait for
        h = _holder(api, ns, w, True, now, g.limit_ranges)
        h.flavor = flavor
        h.priority = int(w.get("spec", {}).get("priority") or 0)
        out.holders.append(h)
    for p in sorted(ahead, key=lambda p: int(p.get("positionInClusterQueue", 0))):
        w = by_name.get(p["metadata"]["name"])
        if w is None:
            out.unknown = f"workload {p['metadata']['name']} ahead of it is not readable"
            return out
        flavor = _assignment(w, queue, flavors, g.limit_ranges).flavor
        if flavor != out.flavor:
            # another flavor's quota: it does not compete, unless a StrictFIFO head blocks the
            # whole queue (or its flavor is not known)
            if flavor is None or queue.strategy == "StrictFIFO":
                out.unknown = (
                    f"{_job_name(w) or w['metadata']['name']}, ahead of it, may hold the queue: "
                    + ("its flavor is not known" if flavor is None else "StrictFIFO queue")
                )
                return out
            continue
        h = _holder(api, ns, w, False, now, g.limit_ranges)
        h.flavor = flavor
        h.position = int(p.get("positionInClusterQueue", 0))
        h.priority = int(p.get("priority", 0))
        out.holders.append(h)
    return _run(out, queue, wl, me, now, g.limit_ranges)


def _run(
    out: Expected, queue: K.ClusterQueue, wl: dict, me: dict, now: datetime, lrs: list[dict]
) -> Expected:
    """The live queue through the plan's simulation: holders run out their time, then the
    waiting workloads are admitted in Kueue's order as the team's nominal quota frees up."""
    unknown = [h for h in out.holders if h.seconds is None]
    if unknown:
        h = unknown[0]
        what = "running" if h.running else f"waiting ahead (position {h.position + 1})"
        out.unknown = f"{h.job} ({what}) has no expected end: {h.basis}"
        return out
    need = K.workload_need(wl, lrs)
    over = [r for r, v in need.items() if v > queue.nominal[out.flavor].get(r, 0)]
    if over:
        r = over[0]
        out.unknown = (
            f"it asks {amount(r, need[r])} in flavor {out.flavor}, more than ClusterQueue "
            f"{queue.name}'s nominal {amount(r, queue.nominal[out.flavor][r])}: it runs "
            "only on quota its cohort lends, which your access does not show"
        )
        return out
    # what a team sees of its cohort is its own queue: that queue alone; the running ones in
    # the order Kueue reserved their quota (the simulation's admission order), by which its
    # preemption picks the most recently admitted of a priority first, as Kueue's does
    # (kueue pkg/scheduler/preemption/preemptioncommon CandidatesOrdering: lower priority,
    # then "admitted more recently first", by the QuotaReserved time; read 2026-12-01)
    ordered = sorted(out.holders, key=lambda h: (not h.running, h.reserved if h.running else ""))
    ahead = [
        Queued(h.job, h.need, h.seconds, h.ceiling, h.running, h.position, h.priority, h.grace)
        for h in ordered
    ]
    at, prio = int(me["positionInClusterQueue"]), int(me.get("priority", 0))
    mine = Queued(wl["metadata"]["name"], need, position=at, priority=prio)
    start = queue_start(queue, out.flavor, ahead, mine)
    if start.room_now:
        msg = (condition(wl, "QuotaReserved") or {}).get("message", "")
        outside = "the namespace's ResourceQuota"
        if out.cohort:
            outside = f"quota of cohort {out.cohort} borrowed by other teams, or {outside}"
        out.unknown = (
            f"by what your access shows, ClusterQueue {queue.name} has room for it now; what "
            f"holds it is outside that view ({outside})" + (f"; Kueue says: {msg}" if msg else "")
        )
        return out
    if start.seconds is None:
        out.unknown = "it does not fit within 90 days of the jobs ahead ending"
        return out
    out.seconds, out.bound = start.seconds, start.bound
    out.preempts = list(start.preempts)
    out.at = now + timedelta(seconds=start.seconds)
    return out


# --- what a person reads ------------------------------------------------------------------------


def lines(e: Expected) -> list[tuple[str, str]]:
    """(label, text) lines for `trainforge status` and `why`."""
    if e.seconds is None:
        return [("expected", f"start cannot be estimated: {e.unknown}")]
    when = e.at.strftime("%Y-%m-%d %H:%M UTC") if e.at else "?"
    if e.seconds <= 0:
        head = "start at Kueue's next scheduling cycle"
    elif e.bound:  # a job ahead may end before its ceiling
        head = f"start within {duration_text(e.seconds)} (by about {when})"
    else:
        head = f"start after {duration_text(e.seconds)} (about {when})"
    if e.preempts:  # admitted then, its pods start once the preempted pods are gone
        head = head.replace("start", "admitted", 1) + f"; {preempt_words(e.preempts)}"
    quota = f"ClusterQueue {e.cluster_queue}'s nominal quota in flavor {e.flavor}"
    out = [("expected", f"{head}, within {quota}")]
    for h in e.holders:
        took = duration_text(h.seconds or 0)
        if h.running:
            ends = "within" if h.ceiling else "in"
            text = f"{h.job} holds {_gang(h.need)}, ends {ends} {took} ({h.basis})"
        else:
            runs = "at most " if h.ceiling else "~"
            text = (
                f"{h.job} waits ahead (position {h.position + 1}), asks {_gang(h.need)}, "
                f"runs {runs}{took} ({h.basis})"
            )
        out.append(("ahead", text))
    cohort = f"cohort {e.cohort}" if e.cohort else "a cohort"
    out.append(
        (
            "basis",
            f"the jobs above end when shown; earlier if {cohort} lends idle quota (other "
            "teams' use is not visible to you), later if a job ahead runs longer",
        )
    )
    return out


def _gang(need: dict[str, Fraction]) -> str:
    if K.GPU in need:
        return amount(K.GPU, need[K.GPU])
    return ", ".join(amount(r, v) for r, v in sorted(need.items())) or "nothing"
