"""The one taint/toleration matcher of the project (Kubernetes' own rules), and the one
node selector matcher (`node_expression`, `node_selector_terms`, `required_node_affinity`).

Why one: Kueue's flavor assigner (trainforge.plan.kueue), the plan's scheduling rules and the
platform's DaemonSet placement must agree on whether a pod tolerates a taint; three
hand-written copies disagreed on a toleration without `value`.
The rules are those of k8s.io/api core/v1 `Toleration.ToleratesTaint` (toleration.go at
v0.35.7, the pinned Kubernetes minor, read 2026-11-30; the comparison operators `Lt`/`Gt` are
alpha there, behind the TaintTolerationComparisonOperators gate that is off by default, and
match nothing here as they match nothing with the gate off):

- a toleration with an `effect` matches only taints with that effect; without one, any effect;
- a toleration with a `key` matches only taints with that key; without one (only valid with
  `Exists`), any key;
- operator `Exists` matches any value; `Equal` (the default when the operator is missing)
  matches only an equal value, and a missing value is the empty string (so a toleration
  without a value does not tolerate a taint with value "true").

Upstream's own test cases of both matchers run through them
(tests/fixtures/upstream/scheduling.yaml).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainforge.core import names

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


# --- node selectors: nodeSelectorTerms, their requirements, a pod's required node affinity -------
# The rules of component-helpers scheduling/corev1/nodeaffinity (nodeaffinity.go at v0.35.7, the
# pinned Kubernetes minor) and the label requirements they build (apimachinery pkg/labels
# selector.go `NewRequirement`/`Matches`, label key and value grammar of
# pkg/api/validate/content/kube.go), proven against their own test cases
# (tests/fixtures/upstream/scheduling.yaml):
# - a pod's nodeSelector (every label equal) and its required node affinity must both match;
# - nodeSelectorTerms are ORed; an empty term (no matchExpressions, no matchFields) and an empty
#   list select nothing; a term with an invalid requirement matches nothing;
# - within a term, matchExpressions (labels) and matchFields (only metadata.name, and only
#   when the node has a name) are ANDed;
# - In/NotIn need values, Exists/DoesNotExist none, Gt/Lt exactly one int64; the key must be
#   a label key, each value a label value; any other operator is invalid.

_INT64 = re.compile(r"^[+-]?[0-9]+$")  # strconv.ParseInt(s, 10, 64), range checked below


def _int64(v: str) -> int | None:
    if not _INT64.match(v):
        return None
    n = int(v)
    return n if -(2**63) <= n < 2**63 else None


def _label_key(key: Any) -> bool:
    """content.IsLabelKey (core/names: an optional DNS-subdomain prefix and '/', then a name)."""
    return isinstance(key, str) and names.is_label_key(key)


def requirement_errors(e: Mapping[str, Any], fields: bool = False) -> list[str]:
    """Why one NodeSelectorRequirement is invalid ([] when valid), as the fields upstream names
    ("key", "operator", "values", "values[0]"): a label requirement (NewRequirement), or with
    `fields` a field requirement (nodeSelectorRequirementsAsFieldSelector: In or NotIn with
    exactly one value)."""
    op = e.get("operator")
    values = [str(v) for v in e.get("values") or ()]
    if fields:
        if op not in ("In", "NotIn"):
            return ["operator"]
        return [] if len(values) == 1 else ["values"]
    if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
        return ["operator"]
    errs = [] if _label_key(e.get("key")) else ["key"]
    if op in ("In", "NotIn") and not values:
        errs.append("values")
    if op in ("Exists", "DoesNotExist") and values:
        errs.append("values")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append("values")
        errs += [f"values[{i}]" for i, v in enumerate(values) if _int64(v) is None]
    return errs + [f"values[{i}]" for i, v in enumerate(values) if not names.is_label_value(v)]


def node_expression(e: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against a node's labels (apimachinery Requirement.Matches):
    In, NotIn, Exists, DoesNotExist, and Gt/Lt on one int64 value; an invalid requirement
    (`requirement_errors`) matches nothing."""
    if requirement_errors(e):
        return False
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
    mine = _int64(have) if have is not None else None
    if mine is None:
        return False
    theirs = _int64(values[0])
    return mine > theirs if op == "Gt" else mine < theirs  # type: ignore[operator]


def _field(e: Mapping[str, Any], name: str) -> bool:
    """One field requirement against a node's fields (only metadata.name is one)."""
    have = name if e.get("key") == "metadata.name" else ""
    return (have == str(e["values"][0])) == (e.get("operator") == "In")


def node_selector_errors(terms: Any) -> list[str]:
    """The invalid requirements of nodeSelectorTerms, as upstream's field paths
    ("nodeSelectorTerms[2].matchExpressions[0].key"): NewNodeSelector's parse errors."""
    errs = []
    for i, t in enumerate(terms or ()):
        for kind, fields in (("matchExpressions", False), ("matchFields", True)):
            for j, e in enumerate((t or {}).get(kind) or ()):
                where = f"nodeSelectorTerms[{i}].{kind}[{j}]"
                errs += [f"{where}.{f}" for f in requirement_errors(e, fields)]
    return errs


def node_selector_terms(terms: Any, labels: Mapping[str, str], name: str = "") -> bool:
    """Whether nodeSelectorTerms select a node with `labels` (and `name`, "" when unnamed):
    the terms ORed (LazyErrorNodeSelector.Match); empty terms and invalid terms select
    nothing, a term's matchExpressions and matchFields are ANDed."""
    for t in terms or ():
        exprs, fields = (t or {}).get("matchExpressions") or [], (t or {}).get("matchFields") or []
        if not exprs and not fields:
            continue  # an empty term selects nothing
        if any(requirement_errors(e) for e in exprs) or any(
            requirement_errors(e, True) for e in fields
        ):
            continue
        if exprs and not all(node_expression(e, labels) for e in exprs):
            continue
        if fields and name and not all(_field(e, name) for e in fields):
            continue
        return True
    return False


def required_node_affinity(
    pod_spec: Mapping[str, Any], labels: Mapping[str, str], name: str = ""
) -> bool:
    """Whether a pod may land on a node with `labels` (and `name`) by its nodeSelector and its
    required node affinity (GetRequiredNodeAffinity(pod).Match): every nodeSelector label
    equal, and the required nodeSelectorTerms, where the pod has them, select the node."""
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return node_selector_terms(required.get("nodeSelectorTerms"), labels, name)
