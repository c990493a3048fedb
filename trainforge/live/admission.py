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
from trainforge.live.gather import Gathered
from trainforge.plan.checks.pod_security import RULE, judge

_VIOLATES = re.compile(r'violates PodSecurity "([^":]+):([^"]+)"')
_NEVER = datetime.min.replace(tzinfo=UTC)  # an event without a time sorts first
SEE = "See docs/troubleshooting.md#a-job-that-never-leaves-created"


def refused_event(g: Gathered) -> dict[str, Any] | None:
    """The latest event about the job (or the Jobs its JobSet made) carrying Pod Security's
    refusal of a Pod create, None when there is none. Only this job's: an event of an earlier
    object of the same name (deleted and re-created; events outlive their object: kube-apiserver
    --event-ttl, 1h by default) does not count, told by its object's uid where the event is on the job itself,
    else by its time: last seen before the job was created is an earlier object's."""
    found = [
        e for e in g.events if _VIOLATES.search(str(e.get("message") or "")) and _this_jobs(g, e)
    ]
    return max(found, key=lambda e: _when(e) or _NEVER) if found else None


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


def lines(g: Gathered) -> list[str]:
    """What `why` says of a job whose pods Pod Security refuses ([] when no event says so):
    the policy and where it was read, each refused pod template's checks and the plan's fix."""
    e = refused_event(g)
    if e is None:
        return []
    message = str(e.get("message") or "").strip()
    if g.namespace_labels is not None:
        pol = pod_security.policy(g.namespace_labels)
        source = f"namespace {g.namespace}'s labels"
    else:
        pol = event_policy(message) or pod_security.policy({})
        source = f"the policy the refusal names ({g.namespace_unread or 'namespace not read'})"
    doc = _templates_doc(g)
    found = judge(doc, pol)[1] if doc is not None else []
    out = [
        f"Pod Security refuses its pods: namespace {g.namespace} enforces {pol}; "
        f"{_controller(e)} is refused every pod and retries: it never runs.",
        f"  the API server: {message}",
    ]
    if not found:
        what = "its JobSet was not read" if doc is None else "they pass it now"
        return out + [
            f"  its pod templates were not judged at {pol} from {source}: {what}; "
            f"`trainforge plan` names the check, the field and the fix ({RULE})",
            SEE,
        ]
    for j in found:
        out.append(f"  {j.where}: {j.checks}")
        out.append(f"  fix: {j.fix}")
    out.append(
        f"  judged: the live pod templates at {pol} from {source}, by the model the plan's "
        f"{RULE} check reads (the same finding before `pulumi up`)"
    )
    return out + [SEE]
