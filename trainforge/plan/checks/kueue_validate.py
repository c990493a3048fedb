"""What Kueue v0.19's CRDs (kueue.x-k8s.io/v1beta2) reject, written out for the offline plan.

The plan ships no CRD schemas (it must not read them at run time), so, as for Karpenter and
the Kubeflow operators, the rules that would refuse a Kueue object at apply time are written
here: the fields each kind has, required fields, enums, quantities, and the CRDs' CEL
(`x-kubernetes-validations`) rules. The tests validate the same objects against the vendored
upstream CRDs (tests/platform/crds), which is what keeps this list honest.
"""

from __future__ import annotations

import re
from typing import Any

API_VERSION = "kueue.x-k8s.io/v1beta2"
KINDS = ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[mkMGTPE])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

CLUSTER_QUEUE_FIELDS = {
    "admissionChecksStrategy",
    "admissionScope",
    "cohortName",
    "concurrentAdmissionPolicy",
    "fairSharing",
    "flavorFungibility",
    "namespaceSelector",
    "preemption",
    "queueingStrategy",
    "resourceGroups",
    "stopPolicy",
}
PREEMPTION = {
    "withinClusterQueue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
    "reclaimWithinCohort": ("Never", "LowerPriority", "Any"),
}
BORROW_POLICIES = ("Never", "LowerPriority")
QUEUEING = ("StrictFIFO", "BestEffortFIFO")
FLAVOR_FIELDS = {"nodeLabels", "nodeTaints", "tolerations", "topologyName"}
LOCAL_QUEUE_FIELDS = {"clusterQueue", "fairSharing", "stopPolicy"}


def _quantity(v: Any) -> bool:
    return isinstance(v, int) or (isinstance(v, str) and bool(QUANTITY.match(v)))


def _cluster_queue(spec: dict) -> list[str]:
    errs = [f"spec.{k}: unknown field" for k in spec if k not in CLUSTER_QUEUE_FIELDS]
    if spec.get("queueingStrategy", "BestEffortFIFO") not in QUEUEING:
        errs.append(f"spec.queueingStrategy {spec['queueingStrategy']!r} not one of {QUEUEING}")
    pre = spec.get("preemption") or {}
    for key, allowed in PREEMPTION.items():
        if key in pre and pre[key] not in allowed:
            errs.append(f"spec.preemption.{key} {pre[key]!r} not one of {allowed}")
    borrow = pre.get("borrowWithinCohort") or {}
    if borrow and borrow.get("policy") not in BORROW_POLICIES:
        errs.append(f"spec.preemption.borrowWithinCohort.policy {borrow.get('policy')!r} invalid")
    if "maxPriorityThreshold" in borrow and not isinstance(borrow["maxPriorityThreshold"], int):
        errs.append("spec.preemption.borrowWithinCohort.maxPriorityThreshold must be an integer")
    # CEL: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never
    if pre.get("reclaimWithinCohort") == "Never" and borrow.get("policy", "Never") != "Never":
        errs.append(
            "spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
        )
    groups = spec.get("resourceGroups") or []
    if len(groups) > 16:
        errs.append("spec.resourceGroups: at most 16 groups")
    seen_flavors: set[str] = set()
    for i, group in enumerate(groups):
        where = f"spec.resourceGroups[{i}]"
        covered = group.get("coveredResources") or []
        flavors = group.get("flavors") or []
        if not covered:
            errs.append(f"{where}.coveredResources is required")
        if not flavors:
            errs.append(f"{where}.flavors is required")
        if len(flavors) > 64:
            errs.append(f"{where}.flavors: at most 64")
        for j, fl in enumerate(flavors):
            fw = f"{where}.flavors[{j}]"
            name = fl.get("name")
            if not isinstance(name, str) or not DNS1123.match(name):
                errs.append(f"{fw}.name {name!r} is not a DNS-1123 subdomain")
            if name in seen_flavors:
                errs.append(f"{fw}.name {name!r} appears in more than one flavor list")
            seen_flavors.add(str(name))
            resources = fl.get("resources") or []
            # CEL: flavors must have the same number of resources as the coveredResources
            if len(resources) != len(covered):
                errs.append(f"{fw}: flavors must have the same number of resources as the "
                            "coveredResources")  # fmt: skip
            if [r.get("name") for r in resources] != list(covered):
                errs.append(f"{fw}: resources must be the coveredResources, in their order")
            for k, res in enumerate(resources):
                rw = f"{fw}.resources[{k}]"
                if not _quantity(res.get("nominalQuota")):
                    errs.append(f"{rw}.nominalQuota {res.get('nominalQuota')!r} is required "
                                "and must be a quantity")  # fmt: skip
                for key in ("borrowingLimit", "lendingLimit"):
                    if key in res and not _quantity(res[key]):
                        errs.append(f"{rw}.{key} {res[key]!r} is not a quantity")
                # CEL: borrowingLimit must be nil when cohort is empty
                if "borrowingLimit" in res and not spec.get("cohortName"):
                    errs.append(f"{rw}: borrowingLimit must be nil when cohort is empty")
    return errs


def _flavor(spec: dict) -> list[str]:
    errs = [f"spec.{k}: unknown field" for k in spec if k not in FLAVOR_FIELDS]
    for i, t in enumerate(spec.get("nodeTaints") or []):
        if not t.get("key") or t.get("effect") not in TAINT_EFFECTS:
            errs.append(f"spec.nodeTaints[{i}]: key and a supported effect are required")
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator", "Equal")
        if op not in ("Equal", "Exists"):
            errs.append(f"spec.tolerations[{i}].operator {op!r}: supported Equal, Exists")
        if not t.get("key") and op != "Exists":
            errs.append(f"spec.tolerations[{i}]: operator must be Exists when key is empty")
        if op == "Exists" and "value" in t:
            errs.append(f"spec.tolerations[{i}]: a value must be empty when operator is Exists")
    # CEL: at least one nodeLabel is required when topology is set
    if spec.get("topologyName") and not spec.get("nodeLabels"):
        errs.append("spec: at least one nodeLabel is required when topologyName is set")
    return errs


def _topology(spec: dict) -> list[str]:
    levels = spec.get("levels") or []
    labels = [lv.get("nodeLabel") for lv in levels]
    errs = []
    if not 1 <= len(levels) <= 16:
        errs.append("spec.levels: 1 to 16 levels")
    if len(set(labels)) != len(labels):
        errs.append("spec.levels: must be unique")
    if "kubernetes.io/hostname" in labels and labels[-1] != "kubernetes.io/hostname":
        errs.append("spec.levels: kubernetes.io/hostname can only be the lowest level")
    return errs


def kueue_findings(doc: dict) -> list[str]:
    """Why the API server would refuse this Kueue object (empty: it would accept it)."""
    kind = doc.get("kind")
    name = (doc.get("metadata") or {}).get("name")
    errs = []
    if not isinstance(name, str) or not DNS1123.match(name) or len(name) > 253:
        errs.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    spec = doc.get("spec") or {}
    if kind == "ClusterQueue":
        errs += _cluster_queue(spec)
    elif kind == "ResourceFlavor":
        errs += _flavor(spec)
    elif kind == "Topology":
        errs += _topology(spec)
    elif kind == "LocalQueue":
        errs += [f"spec.{k}: unknown field" for k in spec if k not in LOCAL_QUEUE_FIELDS]
        if not spec.get("clusterQueue"):
            errs.append("spec.clusterQueue is required")
        if not (doc.get("metadata") or {}).get("namespace"):
            errs.append("metadata.namespace is required (LocalQueue is namespaced)")
    elif kind == "WorkloadPriorityClass":
        extra = set(doc) - {"apiVersion", "kind", "metadata", "value", "description"}
        errs += [f"{k}: unknown field" for k in sorted(extra)]
        if not isinstance(doc.get("value"), int) or isinstance(doc.get("value"), bool):
            errs.append("value is required and must be an integer")
    return errs
