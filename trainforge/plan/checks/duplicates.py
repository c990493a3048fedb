"""Plan check: two Kubernetes objects the program declares as one object of the cluster.

Why: an object is its API group, kind, namespace and name; the API server keeps one object
per such key, so two Pulumi resources declaring it fight over it (the second create fails
with AlreadyExists, or with server-side apply each overwrites the other's fields at every
`pulumi up`) and `plan --out` writes one file for both. It is what happened when a team took
a platform name (a team `trainforge-acceptance`: two Namespaces, two ClusterQueues of that
name, the team's Role beside the acceptance CronJobs); team names are refused at config
(core.platform_names), and this check finds any such pair, whatever made it. The version of
an API group is not part of the key (`batch/v1` and `batch/v1beta1` name one object).
"""

from __future__ import annotations

from collections import defaultdict

from trainforge.plan.check_types import CheckResult, Finding, PlanContext
from trainforge.plan.manifests import K8sObject
from trainforge.plan.runner import UNKNOWN

RULE = "TRAINFORGE_DUPLICATE_OBJECT"
FIX = (
    "give each object its own name (a team named like a platform namespace or ClusterQueue "
    "is refused at config; another stack resource or program object declaring the same kind, "
    "namespace and name is the other one): the cluster keeps one object per kind, namespace "
    "and name"
)
RULES = {RULE: FIX}


def object_key(obj: K8sObject) -> tuple[str, str, str, str] | None:
    """(API group, kind, namespace or "", name): what the API server keys an object by; None
    when the name is not known at preview (a value the cloud assigns)."""
    name = obj.obj_name
    if UNKNOWN in name:
        return None
    group = str(obj.doc.get("apiVersion", "")).rpartition("/")[0]
    return group, obj.kind, obj.namespace or "", name


def check(ctx: PlanContext) -> CheckResult:
    by_key: dict[tuple[str, str, str, str], list[K8sObject]] = defaultdict(list)
    for obj in ctx.objects:
        if (key := object_key(obj)) is not None:
            by_key[key].append(obj)
    findings = []
    for same in (s for s in by_key.values() if len(s) > 1):
        first = same[0]
        declared = ", ".join(o.name for o in same)
        msg = (
            f"{first.ident} is declared {len(same)} times (Pulumi resources {declared}): the "
            "cluster holds one object of that kind, namespace and name, so one create fails "
            "or each overwrites the other, and plan --out writes one file for them"
        )
        names = frozenset().union(*(o.names for o in same))
        findings.append(Finding(first.ident, RULE, msg, FIX, urn=first.urn, names=names))
    return CheckResult(findings, [])
