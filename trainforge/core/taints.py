"""The one taint/toleration matcher of the project (Kubernetes' own rules), and the one
node selector requirement matcher (`node_expression`).

Why one: Kueue's flavor assigner (trainforge.plan.kueue), the plan's scheduling rules and the
platform's DaemonSet placement must agree on whether a pod tolerates a taint; three
hand-written copies disagreed on a toleration without `value`.
The rules are those of k8s.io/api core/v1 `Toleration.ToleratesTaint` (toleration.go, read
2026-11-29 at kubernetes/api master; unchanged since v1.2x apart from the alpha comparison
operators `Lt`/`Gt`, which no object here uses and which match nothing here):

- a toleration with an `effect` matches only taints with that effect; without one, any effect;
- a toleration with a `key` matches only taints with that key; without one (only valid with
  `Exists`), any key;
- operator `Exists` matches any value; `Equal` (the default when the operator is missing)
  matches only an equal value, and a missing value is the empty string (so a toleration
  without a value does not tolerate a taint with value "true").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Taint = Mapping[str, Any]
Toleration = Mapping[str, Any]

# a taint's effect as Kubernetes names it -> as EKS's node group API does (the platform writes
# these; the plan's rules read them back)
EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint (ToleratesTaint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def untolerated(
    taints: Iterable[Taint],
    tolerations: Iterable[Toleration],
    only: Callable[[Taint], bool] = lambda t: True,
) -> Taint | None:
    """The first taint `only` selects that no toleration tolerates, or None
    (component-helpers FindMatchingUntoleratedTaint)."""
    tols = list(tolerations)
    for taint in taints:
        if only(taint) and not any(tolerates(t, taint) for t in tols):
            return taint
    return None


def schedules(taint: Taint) -> bool:
    """Taints that keep pods off a node (what Kueue checks a flavor's nodeTaints for)."""
    return taint.get("effect") in ("NoSchedule", "NoExecute")


def node_expression(e: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against a node's labels (k8s.io/component-helpers
    nodeaffinity): In, NotIn, Exists, DoesNotExist, and Gt/Lt on one integer value; any
    other operator matches nothing."""
    key, op = e.get("key"), e.get("operator")
    values = [str(v) for v in e.get("values") or ()]
    have = labels.get(key) if key is not None else None
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and len(values) == 1:
        try:
            mine, theirs = int(have), int(values[0])
        except ValueError:
            return False
        return mine > theirs if op == "Gt" else mine < theirs
    return False
