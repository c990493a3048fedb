"""What Kueue v0.19's CRDs (kueue.x-k8s.io/v1beta2) reject, for the offline plan.

Each object is validated against its CRD's openAPIV3Schema (the upstream CRDs are package data,
`trainforge.plan.crds`, the same files the tests read): fields, required keys, enums, list
bounds, quantity and name patterns. What a JSON schema cannot express is written out here: the
CRDs' CEL rules (`x-kubernetes-validations`) and the checks Kueue's webhooks add; the tests
show each rule catching what it names.
"""

from __future__ import annotations

import re
from typing import Any

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
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _cluster_queue(spec: dict) -> list[str]:
    errs = []
    pre = spec.get("preemption") or {}
    borrow = pre.get("borrowWithinCohort") or {}
    # CEL: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never
    if pre.get("reclaimWithinCohort") == "Never" and borrow.get("policy", "Never") != "Never":
        errs.append(
            "spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
        )
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
            # CEL: flavors must have the same number of resources as the coveredResources
            if len(resources) != len(covered):
                errs.append(f"{fw}: flavors must have the same number of resources as the "
                            "coveredResources")  # fmt: skip
            if [r.get("name") for r in resources] != list(covered):
                errs.append(f"{fw}: resources must be the coveredResources, in their order")
            for k, res in enumerate(resources):
                # CEL: borrowingLimit must be nil when cohort is empty
                if "borrowingLimit" in res and not spec.get("cohortName"):
                    errs.append(
                        f"{fw}.resources[{k}]: borrowingLimit must be nil when cohort is empty"
                    )
    return errs


def _flavor(spec: dict) -> list[str]:
    errs = []
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
    labels = [lv.get("nodeLabel") for lv in spec.get("levels") or []]
    errs = []
    if len(set(labels)) != len(labels):
        errs.append("spec.levels: must be unique")
    if "kubernetes.io/hostname" in labels and labels[-1] != "kubernetes.io/hostname":
        errs.append("spec.levels: kubernetes.io/hostname can only be the lowest level")
    return errs


def kueue_findings(doc: dict) -> list[str]:
    """Why the API server would refuse this Kueue object (empty: it would accept it)."""
    kind = doc.get("kind")
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    errs = []
    if not isinstance(name, str) or not DNS1123.match(name) or len(name) > 253:
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
        # its resourceGroups have the same CEL rules; a Cohort has no cohortName to check
        errs += _cluster_queue({**spec, "cohortName": "cohort"})
    elif kind == "ResourceFlavor":
        errs += _flavor(spec)
    elif kind == "Topology":
        errs += _topology(spec)
    elif kind == "MultiKueueCluster":
        # CEL: exactly one of the fields in [kubeConfig clusterProfileRef] must be set
        source = spec.get("clusterSource") or {}
        if (
            isinstance(source, dict)
            and sum(k in source for k in ("kubeConfig", "clusterProfileRef")) != 1
        ):
            errs.append(
                "spec.clusterSource: exactly one of the fields in [kubeConfig clusterProfileRef] "
                "must be set"
            )
    elif kind == "MultiKueueConfig":
        # CEL: spec.clusters must be unique
        clusters = spec.get("clusters") or []
        if isinstance(clusters, list) and len(set(map(str, clusters))) != len(clusters):
            errs.append("spec.clusters: must be unique")
    elif kind == "LocalQueue":
        if not spec.get("clusterQueue"):
            errs.append("spec.clusterQueue is required")
        if not meta.get("namespace"):
            errs.append("metadata.namespace is required (LocalQueue is namespaced)")
    return errs
