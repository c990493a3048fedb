"""What a Workload Kueue has not admitted says of its future: never as things stand, held (an
inactive queue), or nothing (it waits its turn or for quota).

At 0.19's default gates (UnadmittedWorkloadsObservability and UnadmittedWorkloadsExplicitStatus
beta and off, as the platform keeps them) the QuotaReserved False reason says little
("Pending", "Inadmissible"), so the message decides, as Kueue words it (kubernetes-sigs/kueue
release-0.19 c90ed700c1, read 2026-11-30):
- pkg/controller/core/workload_controller.go `getQueueBlocker`: "LocalQueue|ClusterQueue %s
  doesn't exist" (never; an empty name leaves two spaces, its test's case), "... is inactive"
  (held); `reconcileOn{Local,Cluster}QueueActiveState`: "... is terminating or missing"
  (never), "... is stopped" (held);
- pkg/scheduler/scheduler.go `nominate`: "ClusterQueue %s not found" (never), "... is inactive"
  (held), ValidateAdmissibility's errors (pkg/workload/resources.go: never; `refusal` computes
  the resource ones from the Workload itself);
- flavorassigner.go `Assignment.Message` (`words.message`): `assignFlavors` returns at the
  first pod set no flavor takes (:846-850), the last one named. It is never admitted when
  none of its reasons can change without a change of the queue, its flavors or the job
  (`_FOR_GOOD`), or of usage (`_over`: its own request over the flavor's maximum capacity).
  Over only with the "previously considered podsets" (:1350) is not never: which flavor each
  takes changes with usage (`shouldTryNextFlavor`), and the scan resumes where the last cycle
  stopped (FlavorFungibilityPreserveScanProgress, beta and on at 0.19). ". Pending the
  preemption of N workload(s)" (`markPreemptionOutcome`) is not never.
  Over with the "previously considered podsets" is never only where the queue's model says
  so (`never_fits`: no choice of flavors for the pod sets holds them all within each flavor's
  maximum capacity, `fitsResourceQuota`'s `potentialAvailable`, which no usage changes): the
  message alone names one flavor of one cycle, the model knows every flavor the pod sets may
  take (a TrainJob's initializers and trainer in one flavor of 14.4 CPUs: 12 + 3, never).
Tested with Kueue's own expected messages (tests/live/test_kueue_words.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from trainforge.core.pods import INVALID_RESOURCES, OUTSIDE_LIMIT_RANGE
from trainforge.core.quantity import parse_quantity
from trainforge.plan.kueue import words as W
from trainforge.plan.kueue.assign import PodSet, flavor_fits_podset, only_tas, requests_of
from trainforge.plan.kueue.objects import ClusterQueue, Flavor
from trainforge.plan.kueue.quota import Quotas
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

_F = "FLAVOR"  # a placeholder in Kueue's words, replaced by what it stands for


def _like(text: str, pattern: str) -> str:
    """Kueue's `text` (words.py) as a pattern: the placeholder `_F` matches `pattern`."""
    return re.escape(text).replace(_F, pattern)


_FOR_GOOD = re.compile(
    "|".join((
        _like(W.untolerated({}, _F), _NAME).replace(re.escape(W.taint({})), r"\{[^{}]*\}"),
        *(_like(say(_F), _NAME) for say in (W.no_affinity, W.not_found)),
        _like(W.unavailable(_F), r"[\w./-]+"),
        *(_like(say(_F), '[^"]*') for say in (W.no_tas, W.only_tas, W.no_level)),
    ))
)  # fmt: skip
# its groups: the pod set's own request, the maximum capacity (placeholders as `_F`)
_OVER = re.compile(
    _like(W.over_words("RESOURCE", _F, "BEFORE", "OWN", "MOST"), _NAME)
    .replace("RESOURCE", r"[\w./-]+")
    .replace("BEFORE", "[^)]*")
    .replace("OWN", "([^)]*)")
    .replace("MOST", "([^)]*)")
)


def _over(m: re.Match[str]) -> str:
    """ "" where the pod set's own request is over the maximum capacity (never)."""
    try:
        return "" if parse_quantity(m[1]) > parse_quantity(m[2]) else m[0]
    except ValueError:
        return m[0]


def _last_reasons(message: str) -> str | None:
    """The reasons of the last pod set a flavor-assignment message names (None: none named)."""
    if not message.startswith(W.POD_SET):
        return None
    _, sep, reasons = message.rpartition(f"; {W.POD_SET}")[2].partition(": ")
    return reasons if sep else None


def _fits_never(message: str) -> bool:
    """Whether the message says no flavor can ever hold the last pod set it names."""
    reasons = _last_reasons(message)
    return reasons is not None and not _FOR_GOOD.sub("", _OVER.sub(_over, reasons)).replace(
        ", ", ""
    )


def over_beside(wl: Mapping[str, Any] | None) -> bool:
    """Whether Kueue's QuotaReserved False message says of its last pod set that it is over a
    flavor's maximum capacity only with the pod sets considered before it (`_over` finds it
    not over alone): the case `never_fits` decides."""
    c = _condition(wl, "QuotaReserved")
    reasons = _last_reasons(str(c.get("message") or "")) if c.get("status") == "False" else None
    return any(_over(m) for m in _OVER.finditer(reasons or ""))


def never_fits(
    q: ClusterQueue, podsets: list[PodSet], quotas: Quotas, flavors: Mapping[str, Flavor]
) -> bool:
    """Whether no choice of flavors holds every pod set of a Workload in ClusterQueue `q`,
    whatever the usage: each pod set's resource group takes one flavor the pod set may take
    (`flavor_fits_podset`), and each flavor's sum over the pod sets must be within its
    maximum capacity (`Quotas.potential`, `fitsResourceQuota`'s bound). Every choice is
    tried (pod sets and flavors are few), so a True is never whichever flavor Kueue tries
    first in a cycle."""
    all_tas = only_tas(q, flavors)
    slots: list[tuple[dict[str, Fraction], list[str]]] = []  # (requests, flavors it may take)
    for ps in podsets:
        requests = requests_of(q, ps)
        seen: set[tuple[str, ...]] = set()
        for r in requests:
            group = q.group_of(r)
            if group is None:
                return True  # no flavor of the queue covers the resource
            if group[0] in seen:
                continue
            seen.add(group[0])
            covered = {x: v for x, v in requests.items() if x in group[0]}
            ok = [f for f in group[1] if flavor_fits_podset(ps, flavors.get(f), all_tas, f) is None]
            if not ok:
                return True
            slots.append((covered, ok))

    def fits(i: int, held: dict[tuple[str, str], Fraction]) -> bool:
        if i == len(slots):
            return True
        covered, ok = slots[i]
        for f in ok:
            after = dict(held)
            for r, v in covered.items():
                after[(f, r)] = after.get((f, r), Fraction(0)) + v
            within = all(after[(f, r)] <= quotas.potential(q, f, r) for r in covered)
            if within and fits(i + 1, after):
                return True
        return False

    return not fits(0, {})


def _condition(wl: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any]:
    conds = ((wl or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == kind), {})


def outlook(wl: Mapping[str, Any] | None, never: bool = False) -> tuple[str, str]:
    """(NEVER, HELD or "", Kueue's message) of a QuotaReserved False condition; else ("", "").
    `never`: the queue's model found that no choice of flavors ever holds its pod sets
    (`never_fits`), which decides a flavor-assignment message the words alone cannot."""
    c = _condition(wl, "QuotaReserved")
    if c.get("status") != "False":
        return "", ""
    message = str(c.get("message") or "")
    if (
        any(p.match(message) for p in _NEVER_MESSAGES)
        or _fits_never(message)
        or (never and message.startswith(W.POD_SET))
    ):
        return NEVER, message
    if _HELD.match(message):
        return HELD, message
    return "", ""


def deactivated(wl: Mapping[str, Any] | None) -> bool:
    """spec.active false: Kueue queues only an active Workload (release-0.19 c90ed700c1
    pkg/workload/workload.go `IsAdmissible` -> `IsActive`, asked by pkg/cache/queue/
    manager.go); set by a person, or by Kueue past a backoffLimitCount (the platform sets none)."""
    return ((wl or {}).get("spec") or {}).get("active") is False


def refused(
    wl: Mapping[str, Any] | None,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
    never: bool = False,
) -> str:
    """What `status`, `why` and `wait` say of a Workload Kueue never admits as things stand
    ("" when it may): its condition where `outlook` says never (`never`: as its queue's model
    found, `never_fits`), else the model's `refusal` with the namespace's `limit_ranges`
    (what the scheduler writes at its next try)."""
    if wl is None:
        return ""
    if deactivated(wl):
        ev = _condition(wl, "Evicted")
        said = (
            f"; Evicted, reason {ev.get('reason')}: {ev.get('message')}"
            if ev.get("status") == "True"
            else ""
        )
        return (
            f"Kueue never admits it while it is deactivated (its spec.active is false{said}): "
            "Kueue queues it again only once its spec.active is true"
        )
    kind, message = outlook(wl, never)
    if kind == NEVER:
        why = _condition(wl, "QuotaReserved").get("reason") or ""
        return f"Kueue never admits it (QuotaReserved False, reason {why}): {message}"
    invalid = workload_invalid(wl, limit_ranges)
    return f"{NEVER_ADMITS} {invalid}" if invalid else ""


def held(wl: Mapping[str, Any] | None) -> str:
    """Kueue's message for a Workload an inactive queue holds ("" when none does)."""
    kind, message = outlook(wl)
    if kind != HELD:
        return ""
    return f"Kueue holds it: {message}; it is requeued once that queue is active again"


def for_resources(text: str) -> bool:
    """Whether a `refused` text is about the pods' resources (only the job or the LimitRange
    can change it)."""
    return text.partition("): ")[2].startswith((INVALID_RESOURCES, OUTSIDE_LIMIT_RANGE))
