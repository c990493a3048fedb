"""`trainforge why` of a job whose pods Pod Security admission refuses: what the plan says of
the same pod template (plan/checks/pod_security.py `judge`: the checks, the fields, the fix).

Why: the API server refuses the Pod create, not the job; the Job controller (a batch/v1 Job's,
or the Jobs a TrainJob's JobSet makes) and the training operator (a PyTorchJob's pods) record
a Warning event on their object, `Error creating: pods "x" is forbidden: violates PodSecurity
"baseline:latest": host namespaces (hostNetwork=true), ...` (the admission's message,
`pod_security.message`), and retry forever: the job holds its quota and never runs. The event
says what failed, not which field to change or how: the live pod templates (the Job's, the
PyTorchJob's as the operator creates them, a TrainJob's JobSet's: what its Jobs create) are
judged by the one model, at the namespace's labels where they can be read, else at the policy
the event names, and `why` says which.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from trainforge.core import pod_security
from trainforge.jobs.pytorchjob import REPLICA_TYPE_LABEL
from trainforge.live.gather import REPLICATED_JOB_LABEL, Gathered, replicated_job, short
from trainforge.plan.checks.pod_security import RULE, judge

_VIOLATES = re.compile(r'violates PodSecurity "([^":]+):([^"]+)"')
_NEVER = datetime.min.replace(tzinfo=UTC)  # an event without a time sorts first
SEE = "See docs/troubleshooting.md#a-job-that-never-leaves-created"


def refusals(g: Gathered) -> list[tuple[dict[str, Any], str | None]]:
    """This job's standing Pod Security refusals, latest first: (the event, the replica type
    it refuses: a PyTorchJob's Master/Worker, a TrainJob's JobSet's replicated job, None for
    a batch/v1 Job's one template), the latest event of each type. Only this job's: an event
    of an earlier object of the same name (deleted and re-created; events outlive their
    object: kube-apiserver --event-ttl, 1h by default) does not count, told by its object's uid
    where the event is on the job itself, else by its time: last seen before the job was
    created is an earlier object's. Nor does one whose replica type has a pod now (`g.pods`):
    its pods were created since (the namespace's level changed), the refusal is over."""
    found = [
        e for e in g.events if _VIOLATES.search(str(e.get("message") or "")) and _this_jobs(g, e)
    ]
    have = {_pod_type(g, p) for p in g.pods}
    out: dict[str | None, dict[str, Any]] = {}
    for e in sorted(found, key=lambda e: _when(e) or _NEVER, reverse=True):
        rtype = _replica(g, e)
        if rtype not in have and rtype not in out:
            out[rtype] = e
    return [(e, t) for t, e in out.items()]


_POD_NAME = re.compile(r'pods "([^"]+)" is forbidden')


def _replica(g: Gathered, e: dict[str, Any]) -> str | None:
    """The replica type whose pod create the event refuses. A PyTorchJob's: the pod the
    message names, `<job>-<type, lowercase>-<index>` (the training operator's pod name,
    GenGeneralName); a TrainJob's: the event's Job, `<jobset>-<replicatedJob>-<index>`
    (kubernetes-sigs/jobset v0.12.0 GenJobName), by the JobSet's replicated jobs where it was
    read; a batch/v1 Job's: None (one template, all its pods or none)."""
    if g.backend == "pytorchjob":
        m = _POD_NAME.search(str(e.get("message") or ""))
        pod = m.group(1) if m else ""
        types = ((g.job.get("spec") or {}).get("pytorchReplicaSpecs") or {}).keys()
        return next((t for t in types if pod.startswith(f"{g.name}-{t.lower()}-")), None)
    if g.backend == "trainjob":
        job = str((e.get("involvedObject") or {}).get("name") or "")
        return replicated_job(g, job)
    return None


def _pod_type(g: Gathered, pod: dict[str, Any]) -> str | None:
    """A pod's replica type, as `_replica` names it: the training operator's replica-type
    label (lowercase) matched to the PyTorchJob's types, a JobSet pod's replicated-job label;
    None for a batch/v1 Job's pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if g.backend == "pytorchjob":
        low = str(labels.get(REPLICA_TYPE_LABEL) or "")
        types = ((g.job.get("spec") or {}).get("pytorchReplicaSpecs") or {}).keys()
        return next((t for t in types if t.lower() == low), low or None)
    if g.backend == "trainjob":
        return labels.get(REPLICATED_JOB_LABEL)
    return None


def _this_jobs(g: Gathered, e: dict[str, Any]) -> bool:
    """Whether the event was recorded about this job object, not an earlier one of its name."""
    meta = g.job.get("metadata") or {}
    obj = e.get("involvedObject") or {}
    uid = obj.get("uid")
    if uid and obj.get("kind") == g.kind and obj.get("name") == g.name:
        return uid == meta.get("uid")
    created, seen = _time(str(meta.get("creationTimestamp") or "")), _when(e)
    # unknown times: the event counts (as before), rather than hiding a refusal
    return created is None or seen is None or seen >= created


def _time(text: str) -> datetime | None:
    """An RFC 3339 time of the API (`2026-11-25T11:58:00Z`, an eventTime's microseconds)."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _when(e: dict[str, Any]) -> datetime | None:
    """When the event was last seen: core/v1's lastTimestamp (the legacy recorder the Job
    controller and the training operator use), else an events.k8s.io event's series'
    lastObservedTime, else its eventTime."""
    series = e.get("series") or {}
    for text in (e.get("lastTimestamp"), series.get("lastObservedTime"), e.get("eventTime")):
        t = _time(str(text or ""))
        if t is not None:
            return t
    return None


def event_policy(message: str) -> pod_security.Policy | None:
    """The policy the API server's refusal names (`violates PodSecurity "level:version"`)."""
    m = _VIOLATES.search(message)
    if m is None:
        return None
    return pod_security.policy(
        {pod_security.ENFORCE: m.group(1), pod_security.ENFORCE_VERSION: m.group(2)}
    )


def _templates_doc(g: Gathered) -> dict[str, Any] | None:
    """The object whose pod templates are the pods created: a TrainJob's JobSet (its Jobs'
    templates as the Trainer built them), else the job itself."""
    if g.backend == "trainjob":
        return g.jobset
    return g.job


def _controller(e: dict[str, Any]) -> str:
    obj = e.get("involvedObject") or {}
    kind, name = obj.get("kind") or "?", obj.get("name") or "?"
    who = "the Job controller" if kind == "Job" else f"the {kind}'s controller"
    return f"{who} ({kind} {name}, event {e.get('reason') or '?'})"


def may_refuse(g: Gathered, state: str) -> bool:
    """Whether a Pod Security refusal can keep the job, or a replica type of it, from running
    whole, from what was read and no further read: started and short of its world (`state`
    Created, or Running and gather.`short`: a replica type with fewer pods running than it
    declares). Not a suspended (queued), whole running or finished job, whose stale refusal
    events say nothing of it now. `wait` reads the events only when it holds; `status` says
    the refusal only when it holds."""
    return state == "Created" or state == "Running" and short(g)


def _policy(g: Gathered, message: str) -> tuple[pod_security.Policy, str]:
    """The policy the refusal is judged at and where it was read: the namespace's labels
    where they were read, else the policy the event names."""
    if g.namespace_labels is not None:
        return pod_security.policy(g.namespace_labels), f"namespace {g.namespace}'s labels"
    return (
        event_policy(message) or pod_security.policy({}),
        f"the policy the refusal names ({g.namespace_unread or 'namespace not read'})",
    )


def _first(g: Gathered, found: list[tuple[dict[str, Any], str | None]]) -> str:
    """The first line of `lines`: which replica types are refused, the policy, whose creates
    are refused and what that means."""
    e = found[0][0]
    pol, _ = _policy(g, str(e.get("message") or "").strip())
    types = [t for _, t in found]
    return (
        f"Pod Security refuses {_head(types)}: namespace {g.namespace} enforces {pol}; "
        f"{_controller(e)} is refused {_tail(g, types)}"
    )


def first_line(g: Gathered) -> str:
    """`why`'s first line of a refusal ("" when no event says so): what `wait` ends with and
    `status` prints as `refused:`, without judging the templates (`lines` does)."""
    found = refusals(g)
    return _first(g, found) if found else ""


def lines(g: Gathered) -> list[str]:
    """What `why` says of a job whose pods Pod Security refuses ([] when no event says so),
    the first line `wait`'s and `status`'s too (`first_line`): which of its replica types are
    refused (all of a batch/v1 Job's pods; a PyTorchJob's Workers while its Master runs and
    waits for them: the job never reaches its world size), the policy and where it was read,
    each refused pod template's checks and the plan's fix."""
    found = refusals(g)
    if not found:
        return []
    e = found[0][0]
    message = str(e.get("message") or "").strip()
    pol, source = _policy(g, message)
    doc = _templates_doc(g)
    judged = judge(doc, pol)[1] if doc is not None else []
    out = [_first(g, found), f"  the API server: {message}"]
    out += [f"  the API server: {str(x.get('message') or '').strip()}" for x, _ in found[1:]]
    if not judged:
        what = "its JobSet was not read" if doc is None else "they pass it now"
        return out + [
            f"  its pod templates were not judged at {pol} from {source}: {what}; "
            f"`trainforge plan` names the check, the field and the fix ({RULE})",
            SEE,
        ]
    for j in judged:
        out.append(f"  {j.where}: {j.checks}")
        out.append(f"  fix: {j.fix}")
    out.append(
        f"  judged: the live pod templates at {pol} from {source}, by the model the plan's "
        f"{RULE} check reads (the same finding before `pulumi up`)"
    )
    return out + [SEE]


def _names(types: list[str | None]) -> str:
    named = sorted(str(t) for t in types if t)
    return " and ".join(named)


def _head(types: list[str | None]) -> str:
    """`its pods` (a batch/v1 Job's), else the replica types refused: `its Worker pods`."""
    named = _names(types)
    return f"its {named} pods" if named else "its pods"


def _tail(g: Gathered, types: list[str | None]) -> str:
    """What the refusal means: a job none of whose pods runs or waits never runs (an
    initializer's pod that is done is no part of its world); one whose other replica types
    have pods running or pending (a Master at rendezvous, an MPI runtime's node pods) never
    reaches its world size, and those pods wait for the refused ones."""
    named = _names(types)
    live = [p for p in g.pods if (p.get("status") or {}).get("phase") in ("Running", "Pending")]
    others = sorted({str(t) for t in map(lambda p: _pod_type(g, p), live) if t} - set(types))
    every = f"every {named} pod" if named else "every pod"
    if not others:
        return f"{every} and retries: it never runs."
    return (
        f"{every} and retries: it never reaches its world size (its {' and '.join(others)} "
        "pods run or wait without them)."
    )
