"""What a Workload Kueue has not admitted says of its future: never, as things stand (its
queue or namespace, its resources, or no flavor of its ClusterQueue can ever hold it), held
(its queue is inactive), or nothing (it waits its turn or for quota).

Kueue writes why it does not admit a Workload as its QuotaReserved False condition, and at
0.19's default feature gates (UnadmittedWorkloadsObservability and
UnadmittedWorkloadsExplicitStatus beta and off, which the platform keeps) the reason says
little: the scheduler writes "Pending" (`requeueAndUpdate`: UnadmittedWorkloadReasonWithFallback),
the workload controller "Inadmissible" for a queue that is missing or inactive
(`resolveLegacyUnadmittedQuotaReservedCondition`). So the message decides, as Kueue words it
(kubernetes-sigs/kueue release-0.19 c90ed700c1, read 2026-11-30):
- pkg/controller/core/workload_controller.go `getQueueBlocker`: "LocalQueue %s doesn't
  exist", "ClusterQueue %s doesn't exist" (never; an empty name leaves two spaces, its own
  test's case), "LocalQueue %s is inactive" (its stopPolicy), "ClusterQueue %s is
  inactive" (held: Kueue requeues it once the queue is active again); for one whose quota
  it reserved, not yet admitted, `reconcileOn{Local,Cluster}QueueActiveState`: "... is
  terminating or missing" (never), "... is stopped" (held);
- pkg/scheduler/scheduler.go `nominate`: "ClusterQueue %s not found" (never), "ClusterQueue
  %s is inactive" (held), and ValidateAdmissibility's errors (pkg/workload/resources.go):
  ErrNamespaceMismatch, ErrInvalidWLResources, ErrLimitRangeConstraintsUnsatisfiedResources
  (never: `refusal` computes the last two from the Workload itself);
- pkg/scheduler/flavorassigner/flavorassigner.go `Assignment.Message`: "couldn't assign
  flavors to pod set %s: " and its reasons, sorted and joined by ", ", for each pod set with
  any, joined by "; " (`words.message`). `assignFlavors` returns at the first pod set no
  flavor takes (:846-850), so that pod set is the last one named; one named before it took
  flavors and says why it needs preemption. The last pod set is never admitted when none of
  its reasons can change without a change of the ClusterQueue, its flavors or the job
  (`_FOR_GOOD`: an untolerated taint, a corev1.Taint value as Go's %s prints it; a node
  affinity the flavor does not match; a flavor or resource the queue does not have; a
  topology the flavor does not offer), or of the usage (`_over`: the pod set's own request
  over the flavor's maximum capacity, nominal plus what the cohort may lend). Where earlier
  pod sets' requests (the "previously considered podsets", :1350) put it over while its own
  is within, it is not never from the message: they took that flavor this cycle, and which
  flavor each takes changes with the queue's usage (a flavor that needs preemption or
  borrowing is passed for the next, `shouldTryNextFlavor`); nor does the message show that
  they had no other, since the scan of flavors resumes where the last cycle stopped
  (FlavorFungibilityPreserveScanProgress, beta and on at 0.19), so a pod set need not name
  every flavor of its group. The scheduler may add ". Pending the preemption of N
  workload(s)" (`markPreemptionOutcome`): not never.
Tested with Kueue's own expected messages (tests/live/test_kueue_words.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainforge.core.pods import INVALID_RESOURCES, OUTSIDE_LIMIT_RANGE
from trainforge.core.quantity import parse_quantity
from trainforge.plan.kueue import words as W
from trainforge.plan.kueue.workload import NEVER_ADMITS, workload_invalid

NEVER, HELD = "never", "held"

_NEVER_MESSAGES = (
    re.compile(r"(LocalQueue|ClusterQueue) \S* (doesn't exist|is terminating or missing)$"),
    re.compile(r"ClusterQueue \S+ not found$"),
    re.compile(r"workload namespace doesn't match ClusterQueue selector$"),
    re.compile(r"resources validation failed: "),
    re.compile(r"resources didn't satisfy LimitRange constraints: "),
)
_HELD = re.compile(r"(LocalQueue|ClusterQueue) \S+ is (inactive|stopped)$")

_NAME = r"[\w.-]+"
_FOR_GOOD = re.compile(
    "|".join(
        (
            rf"untolerated taint \{{[^{{}}]*\}} in flavor {_NAME}",
            rf"flavor {_NAME} doesn't match node affinity",
            rf"flavor {_NAME} not found",
            r"resource [\w./-]+ unavailable in ClusterQueue",
            r'Flavor "[^"]*" (?:does not support TopologyAwareScheduling|supports only '
            r"TopologyAwareScheduling|does not contain the requested level)",
        )
    )
)
_OVER = re.compile(
    rf"insufficient quota for [\w./-]+ in flavor {_NAME}, previously considered podsets "
    r"requests \([^)]*\) \+ current podset request \(([^)]*)\) > maximum capacity \(([^)]*)\)"
)


def _over(m: re.Match[str]) -> str:
    """An over-capacity reason, removed ("") where the pod set's own request is over the
    maximum capacity: never, whatever the other pod sets take."""
    try:
        return "" if parse_quantity(m[1]) > parse_quantity(m[2]) else m[0]
    except ValueError:
        return m[0]


def _fits_never(message: str) -> bool:
    """Whether Kueue's flavor assignment message says no flavor can ever hold the pod set it
    stopped at (the last one it names)."""
    if not message.startswith(W.POD_SET):
        return False
    _, sep, reasons = message.rpartition(f"; {W.POD_SET}")[2].partition(": ")
    if not sep:
        return False
    return _FOR_GOOD.sub("", _OVER.sub(_over, reasons)).replace(", ", "") == ""


def outlook(wl: Mapping[str, Any] | None) -> tuple[str, str]:
    """(NEVER, HELD or "", Kueue's message) from the Workload's QuotaReserved False condition;
    ("", "") when it is admitted, has none, or waits its turn or for quota."""
    conds = ((wl or {}).get("status") or {}).get("conditions") or []
    c = next((c for c in conds if c.get("type") == "QuotaReserved"), None)
    if c is None or c.get("status") != "False":
        return "", ""
    message = str(c.get("message") or "")
    if any(p.match(message) for p in _NEVER_MESSAGES) or _fits_never(message):
        return NEVER, message
    if _HELD.match(message):
        return HELD, message
    return "", ""


def reason(wl: Mapping[str, Any] | None) -> str:
    """The reason of the Workload's QuotaReserved condition ("" without one)."""
    conds = ((wl or {}).get("status") or {}).get("conditions") or []
    c = next((c for c in conds if c.get("type") == "QuotaReserved"), None)
    return str((c or {}).get("reason") or "")


def deactivated(wl: Mapping[str, Any] | None) -> bool:
    """Whether the Workload's spec.active is false: Kueue queues only an active one until it
    is set true again (release-0.19 c90ed700c1 pkg/workload/workload.go `IsAdmissible` ->
    `IsActive`, which pkg/cache/queue/manager.go asks before it queues a Workload): a person
    set it so, or Kueue past a requeuing backoffLimitCount (the platform sets none)."""
    return ((wl or {}).get("spec") or {}).get("active") is False


def refused(wl: Mapping[str, Any] | None, limit_ranges: Iterable[Mapping[str, Any]] = ()) -> str:
    """What `status`, `why` and `wait` say of a Workload Kueue never admits as things stand,
    "" when it may: Kueue's own condition where `outlook` says never (with its reason), else
    the model's refusal of its resources with the namespace's `limit_ranges` (`refusal`:
    what the scheduler writes at its next try). Without the LimitRanges the model misses
    only what their defaults and bounds add; it refuses nothing Kueue admits."""
    if wl is None:
        return ""
    if deactivated(wl):
        conds = (wl.get("status") or {}).get("conditions") or []
        ev = next(
            (c for c in conds if c.get("type") == "Evicted" and c.get("status") == "True"), {}
        )
        said = f"; Evicted, reason {ev.get('reason')}: {ev.get('message')}" if ev else ""
        return (
            f"Kueue never admits it while it is deactivated (its spec.active is false{said}): "
            "Kueue queues it again only once its spec.active is true"
        )
    kind, message = outlook(wl)
    if kind == NEVER:
        return f"Kueue never admits it (QuotaReserved False, reason {reason(wl)}): {message}"
    invalid = workload_invalid(wl, limit_ranges)
    return f"{NEVER_ADMITS} {invalid}" if invalid else ""


def held(wl: Mapping[str, Any] | None) -> str:
    """Kueue's message for a Workload its inactive LocalQueue or ClusterQueue holds, with what
    happens next; "" when none does."""
    kind, message = outlook(wl)
    if kind != HELD:
        return ""
    return f"Kueue holds it: {message}; it is requeued once that queue is active again"


def for_resources(text: str) -> bool:
    """Whether a `refused` text is Kueue's refusal of the pods' resources (ValidateResources,
    ValidateLimitRange), which only a change of the job or the LimitRange helps."""
    return text.partition("): ")[2].startswith((INVALID_RESOURCES, OUTSIDE_LIMIT_RANGE))
