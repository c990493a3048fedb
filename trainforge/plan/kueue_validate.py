"""What Kueue v0.19 (kueue.x-k8s.io/v1beta2) rejects, for the offline plan: each object against
its CRD's schema and CEL rules (`plan.crds`, `plan.crd_cel`), plus what neither says, each with
its source: Kueue's Go webhooks, the API server's name rule and this platform's own.
"""

from __future__ import annotations

from typing import Any

from trainforge.core import names
from trainforge.plan import crds

API_VERSION = "kueue.x-k8s.io/v1beta2"
# the last three: a fleet manager's MultiKueue objects (platform/fleet.py)
KINDS = ("ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "Topology",
         "WorkloadPriorityClass", "AdmissionCheck", "MultiKueueCluster", "MultiKueueConfig")  # fmt: skip


def _cluster_queue(spec: dict) -> list[str]:
    """Kueue v0.19's ClusterQueue/Cohort webhook (pkg/webhooks/clusterqueue_webhook.go
    validateResourceGroups, validateFlavorQuotas): a flavor in one group only, its resources
    the coveredResources in order."""
    errs = []
    seen_flavors: set[str] = set()
    for i, group in enumerate(spec.get("resourceGroups") or []):
        covered = list(group.get("coveredResources") or [])
        for j, fl in enumerate(group.get("flavors") or []):
            fw = f"spec.resourceGroups[{i}].flavors[{j}]"
            name = fl.get("name")
            if name in seen_flavors:
                errs.append(f"{fw}.name {name!r} appears in more than one flavor list")
            seen_flavors.add(str(name))
            if [r.get("name") for r in fl.get("resources") or []] != covered:
                errs.append(f"{fw}: resources must be the coveredResources, in their order")
    return errs


def _flavor(spec: dict) -> list[str]:
    """Kueue v0.19's ResourceFlavor webhook (pkg/webhooks/resourceflavor_webhook.go
    validateNodeTaints): a taint's key is a label name, so not empty."""
    return [
        f"spec.nodeTaints[{i}].key: a taint key is required (Kueue's webhook: ValidateLabelName)"
        for i, t in enumerate(spec.get("nodeTaints") or [])
        if not t.get("key")
    ]


def kueue_findings(doc: dict) -> list[str]:
    kind = doc.get("kind")
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    errs = []
    # the API server's own: a custom resource's name is a DNS-1123 subdomain
    # (apiextensions-apiserver v0.35.7 pkg/registry/customresource/validator.go, NameIsDNSSubdomain)
    if not isinstance(name, str) or not names.is_dns1123_subdomain(name):
        errs.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    schema_errors = crds.crd_errors(doc)
    if schema_errors is None:
        return [*errs, f"no Kueue CRD serves {doc.get('apiVersion')} {kind}"]
    errs += schema_errors
    spec: Any = doc.get("spec") or {}
    if not isinstance(spec, dict):
        return errs
    if kind in ("ClusterQueue", "Cohort"):  # one webhook validates both resourceGroups
        errs += _cluster_queue(spec)
    elif kind == "ResourceFlavor":
        errs += _flavor(spec)
    elif kind == "LocalQueue":  # this platform's own: a LocalQueue names its ClusterQueue
        if not spec.get("clusterQueue"):
            errs.append("spec.clusterQueue is required")
        if not meta.get("namespace"):
            errs.append("metadata.namespace is required (LocalQueue is namespaced)")
    return errs
