"""What Kueue v0.19's CRDs (kueue.x-k8s.io/v1beta2) reject, for the offline plan.

Each object is validated against its CRD (the upstream CRDs are package data,
`trainforge.plan.crds`, the same files the tests read): its openAPIV3Schema (fields, required
keys, enums, list bounds, quantity and name patterns) and its CEL rules
(`x-kubernetes-validations`, evaluated by `trainforge.plan.crd_cel`, messages as the API server
prints them). What neither says is written out here, each with its source: the checks Kueue's
webhooks add in Go, the API server's object name rule and this platform's own; the tests show
each rule catching what it names.
"""

from __future__ import annotations

from typing import Any

from trainforge.core import names
from trainforge.plan import crds

API_VERSION = "kueue.x-k8s.io/v1beta2"
KINDS = (
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "ResourceFlavor",
    "Topology",
    "WorkloadPriorityClass",
    # a fleet manager's MultiKueue objects (platform/fleet.py)
    "AdmissionCheck",
    "MultiKueueCluster",
    "MultiKueueConfig",
)


def _cluster_queue(spec: dict) -> list[str]:
    """Kueue v0.19's ClusterQueue/Cohort webhook (pkg/webhooks/clusterqueue_webhook.go,
    validateResourceGroups and validateFlavorQuotas, Go): a flavor in one resource group only,
    each flavor's resources the coveredResources in their order."""
    errs = []
    seen_flavors: set[str] = set()
    for i, group in enumerate(spec.get("resourceGroups") or []):
        where = f"spec.resourceGroups[{i}]"
        covered = group.get("coveredResources") or []
        for j, fl in enumerate(group.get("flavors") or []):
            fw = f"{where}.flavors[{j}]"
            name = fl.get("name")
            if name in seen_flavors:
                errs.append(f"{fw}.name {name!r} appears in more than one flavor list")
            seen_flavors.add(str(name))
            resources = fl.get("resources") or []
            if [r.get("name") for r in resources] != list(covered):
                errs.append(f"{fw}: resources must be the coveredResources, in their order")
    return errs


def _flavor(spec: dict) -> list[str]:
    """Kueue v0.19's ResourceFlavor webhook (pkg/webhooks/resourceflavor_webhook.go
    validateNodeTaints, Go): a taint's key is a label name, so not empty (the CRD requires
    the field; its CEL rules check the effects and the tolerations)."""
    return [
        f"spec.nodeTaints[{i}].key: a taint key is required (Kueue's webhook: ValidateLabelName)"
        for i, t in enumerate(spec.get("nodeTaints") or [])
        if not t.get("key")
    ]


def kueue_findings(doc: dict) -> list[str]:
    """Why the API server would refuse this Kueue object (empty: it would accept it)."""
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
    if kind == "ClusterQueue":
        errs += _cluster_queue(spec)
    elif kind == "Cohort":
        errs += _cluster_queue(spec)  # the same webhook validates a Cohort's resourceGroups
    elif kind == "ResourceFlavor":
        errs += _flavor(spec)
    elif kind == "LocalQueue":  # this platform's own: a LocalQueue names its ClusterQueue
        if not spec.get("clusterQueue"):
            errs.append("spec.clusterQueue is required")
        if not meta.get("namespace"):
            errs.append("metadata.namespace is required (LocalQueue is namespaced)")
    return errs
