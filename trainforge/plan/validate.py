"""Validate Kubernetes objects the way the API server and its admission webhooks would.

Core kinds go through kubernetes-validate (strict: unknown fields are errors, like kubectl).
Custom resources have no bundled schema here, so the rules that reject them at apply time are
written out: the Kubeflow training operator v1 webhook for PyTorchJobs (whose pod templates are
also checked as core PodTemplates), and what Karpenter v1's CRD validation enforces for
NodePools and EC2NodeClasses. A wrong object fails the plan instead of a 40-minute apply.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[mkMGTPE])?$")
DEFAULT_K8S_VERSION = "1.31"

SCHEMA_RULE = "K8S_SCHEMA"
PYTORCHJOB_RULE = "PYTORCHJOB_WEBHOOK"
NODEPOOL_RULE = "KARPENTER_NODEPOOL"
NODECLASS_RULE = "KARPENTER_EC2NODECLASS"
MONITOR_RULE = "PROMETHEUS_MONITOR"

FIX = {
    SCHEMA_RULE: "fix the field named in the message (strict schema: unknown fields are errors)",
    PYTORCHJOB_RULE: "fix the PyTorchJob spec: the training operator's webhook would reject it",
    NODEPOOL_RULE: "fix the NodePool spec: Karpenter's CRD validation would reject it",
    NODECLASS_RULE: "fix the EC2NodeClass spec: Karpenter's CRD validation would reject it",
    MONITOR_RULE: "fix the monitor spec: the Prometheus operator's CRD would reject it",
}


@dataclass
class Finding:
    rule: str
    message: str


def k8s_version() -> str:
    """The cluster's Kubernetes version from the platform's versions module, when present."""
    try:
        from trainforge.platform import versions  # noqa: PLC0415 - optional, owned by platform
    except ImportError:
        return DEFAULT_K8S_VERSION
    for name in ("KUBERNETES_VERSION", "K8S_VERSION", "EKS_VERSION", "CLUSTER_VERSION"):
        v = getattr(versions, name, None)
        if isinstance(v, str) and re.match(r"^\d+\.\d+", v):
            return v
    return DEFAULT_K8S_VERSION


@functools.cache
def _schema_json(path: str) -> Any:
    import importlib.resources
    import json

    ref = importlib.resources.files("kubernetes_validate").joinpath(path)
    return json.loads(ref.read_text())


@functools.cache
def _validator(schema_dir: str, kind: str, api_version: str):
    """A strict validator per (schema version, kind, apiVersion), built once.

    kubernetes-validate re-reads and re-parses the schema files on every call (about 20 ms per
    object); the plan validates thousands of objects, so the same schemas are cached here.
    """
    import jsonschema
    from referencing import Registry, Resource

    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = _schema_json(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group}.json")
    except FileNotFoundError:
        return None
    defs = _schema_json(f"kubernetes-json-schema/{schema_dir}/_definitions.json")
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.cache
def _schema_dir(version: str) -> str | None:
    from kubernetes_validate import utils

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:2])

    candidates = [v for v in utils.all_versions() if key(v) <= key(version)]
    return f"v{candidates[-1]}-local-strict" if candidates else None


def core_errors(doc: dict, version: str) -> list[str] | None:
    """Strict schema errors for a core kind (as kubernetes-validate reports them); None when
    the kind has no bundled schema."""
    import jsonschema

    schema_dir = _schema_dir(version) or _schema_dir(DEFAULT_K8S_VERSION)
    if not schema_dir or not isinstance(doc.get("apiVersion"), str) or not doc.get("kind"):
        return None
    validator = _validator(schema_dir, str(doc["kind"]), doc["apiVersion"])
    if validator is None:
        return None
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is None:
        return []
    path = ".".join(str(p) for p in err.path)
    return [f"{path}: {err.message}" if path else str(err.message)]


# ---------------------------------------------------------------------------------------------
# PyTorchJob (kubeflow.org/v1): the training operator v1 validating webhook

PYTORCHJOB_SPEC_FIELDS = {"pytorchReplicaSpecs", "runPolicy", "elasticPolicy", "nprocPerNode"}
REPLICA_FIELDS = {"replicas", "template", "restartPolicy"}
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All")


def pytorchjob_findings(doc: dict, version: str) -> list[str]:
    errs: list[str] = []
    name = (doc.get("metadata") or {}).get("name") or ""
    if not DNS1035.match(name) or len(name) > 63:
        errs.append(f"metadata.name {name!r} is not a DNS-1035 label (a-z, 0-9, '-', <= 63)")
    spec = doc.get("spec") or {}
    errs += [f"spec.{k}: unknown field" for k in spec if k not in PYTORCHJOB_SPEC_FIELDS]
    specs = spec.get("pytorchReplicaSpecs") or {}
    if not specs:
        errs.append("spec.pytorchReplicaSpecs is empty")
    for rtype, rspec in specs.items():
        where = f"spec.pytorchReplicaSpecs.{rtype}"
        if rtype not in ("Master", "Worker"):
            errs.append(f"{where}: replica type must be Master or Worker")
        rspec = rspec or {}
        errs += [f"{where}.{k}: unknown field" for k in rspec if k not in REPLICA_FIELDS]
        containers = ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(f"{where}: no container named 'pytorch' (the operator looks for it)")
        for c in containers:
            if not c.get("image"):
                errs.append(f"{where}: container {c.get('name')!r} has no image")
        policy = rspec.get("restartPolicy")
        if policy is not None and policy not in RESTART_POLICIES:
            errs.append(f"{where}.restartPolicy {policy!r} is not one of {RESTART_POLICIES}")
        replicas = rspec.get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 0:
            errs.append(f"{where}.replicas {replicas!r} must be a non-negative integer")
        tmpl = rspec.get("template")
        if tmpl is not None:
            shadow = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "shadow"},
                "template": copy.deepcopy(tmpl),
            }
            errs += [f"{where}.template: {m}" for m in core_errors(shadow, version) or []]
    if "Master" in specs and (specs["Master"] or {}).get("replicas", 1) != 1:
        errs.append("spec.pytorchReplicaSpecs.Master.replicas must be exactly 1")
    elastic = spec.get("elasticPolicy")
    worker = specs.get("Worker")
    if elastic is None and "Master" not in specs:
        errs.append("spec.pytorchReplicaSpecs needs a Master (exactly one) unless elastic")
    if "Worker" in specs and (worker or {}).get("replicas", 1) < 1 and elastic is None:
        errs.append("spec.pytorchReplicaSpecs.Worker.replicas must be at least 1")
    if elastic is not None:
        if "Worker" not in specs:
            errs.append("spec.elasticPolicy needs a Worker replica spec")
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errs.append("spec.elasticPolicy.nProcPerNode and spec.nprocPerNode are both set")
        lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            errs.append(f"spec.elasticPolicy.minReplicas {lo} > maxReplicas {hi}")
    clean = (spec.get("runPolicy") or {}).get("cleanPodPolicy")
    if clean is not None and clean not in CLEAN_POD_POLICIES:
        errs.append(f"spec.runPolicy.cleanPodPolicy {clean!r} is not one of {CLEAN_POD_POLICIES}")
    return errs


# ---------------------------------------------------------------------------------------------
# Karpenter v1 (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass)

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
CONSOLIDATION = ("WhenEmpty", "WhenEmptyOrUnderutilized")
NODEPOOL_SPEC_FIELDS = {"template", "disruption", "limits", "weight", "replicas"}
NODEPOOL_TEMPLATE_SPEC_FIELDS = {
    "expireAfter",
    "nodeClassRef",
    "requirements",
    "startupTaints",
    "taints",
    "terminationGracePeriod",
}
DISRUPTION_FIELDS = {"budgets", "consolidateAfter", "consolidationPolicy"}
EC2NODECLASS_SPEC_FIELDS = {
    "amiFamily",
    "amiSelectorTerms",
    "associatePublicIPAddress",
    "blockDeviceMappings",
    "capacityReservationSelectorTerms",
    "connectionTracking",
    "context",
    "cpuOptions",
    "detailedMonitoring",
    "instanceProfile",
    "instanceStorePolicy",
    "ipPrefixCount",
    "kubelet",
    "metadataOptions",
    "networkInterfaces",
    "placementGroupSelector",
    "role",
    "securityGroupSelectorTerms",
    "subnetSelectorTerms",
    "tags",
    "userData",
}
METADATA_OPTIONS_FIELDS = {
    "httpEndpoint",
    "httpProtocolIPv6",
    "httpPutResponseHopLimit",
    "httpTokens",
}
DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")


def _quantity_ok(v: Any) -> bool:
    return isinstance(v, int | float) or (isinstance(v, str) and bool(QUANTITY.match(v)))


def nodepool_findings(doc: dict) -> list[str]:
    errs: list[str] = []
    spec = doc.get("spec") or {}
    errs += [f"spec.{k}: unknown field" for k in spec if k not in NODEPOOL_SPEC_FIELDS]
    tspec = (spec.get("template") or {}).get("spec") or {}
    errs += [
        f"spec.template.spec.{k}: unknown field"
        for k in tspec
        if k not in NODEPOOL_TEMPLATE_SPEC_FIELDS
    ]
    if "requirements" not in tspec:
        errs.append("spec.template.spec.requirements is required")
    ref = tspec.get("nodeClassRef") or {}
    for key in ("group", "kind", "name"):
        if not ref.get(key):
            errs.append(f"spec.template.spec.nodeClassRef.{key} is required")
    for i, req in enumerate(tspec.get("requirements") or []):
        where = f"spec.template.spec.requirements[{i}]"
        op = req.get("operator")
        if not req.get("key"):
            errs.append(f"{where}.key is required")
        if op not in OPERATORS:
            errs.append(f"{where}.operator {op!r} is not one of {OPERATORS}")
        values = req.get("values") or []
        if op in ("In",) and not values:
            errs.append(f"{where}: operator In needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            errs.append(f"{where}: operator {op} takes no values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not str(values[0]).isdigit()):
            errs.append(f"{where}: operator {op} needs exactly one integer value")
    for i, taint in enumerate(tspec.get("taints") or []):
        if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            errs.append(f"spec.template.spec.taints[{i}].effect {taint.get('effect')!r} invalid")
    disruption = spec.get("disruption") or {}
    errs += [
        f"spec.disruption.{k}: unknown field" for k in disruption if k not in DISRUPTION_FIELDS
    ]
    policy = disruption.get("consolidationPolicy")
    if policy is not None and policy not in CONSOLIDATION:
        errs.append(f"spec.disruption.consolidationPolicy {policy!r} is not one of {CONSOLIDATION}")
    after = disruption.get("consolidateAfter")
    if after is not None and not DURATION.match(str(after)):
        errs.append(
            f"spec.disruption.consolidateAfter {after!r} is not a duration like 5m or Never"
        )
    expire = tspec.get("expireAfter")
    if expire is not None and not DURATION.match(str(expire)):
        errs.append(f"spec.template.spec.expireAfter {expire!r} is not a duration or Never")
    for i, budget in enumerate(disruption.get("budgets") or []):
        nodes = str(budget.get("nodes", ""))
        if not re.match(r"^((100|[0-9]{1,2})%|[0-9]+)$", nodes):
            errs.append(f"spec.disruption.budgets[{i}].nodes {nodes!r} is not a count or percent")
    for key, value in (spec.get("limits") or {}).items():
        if not _quantity_ok(value):
            errs.append(f"spec.limits.{key} {value!r} is not a Kubernetes quantity")
    return errs


def ec2nodeclass_findings(doc: dict) -> list[str]:
    errs: list[str] = []
    spec = doc.get("spec") or {}
    errs += [f"spec.{k}: unknown field" for k in spec if k not in EC2NODECLASS_SPEC_FIELDS]
    terms = spec.get("amiSelectorTerms")
    if not terms:
        errs.append("spec.amiSelectorTerms is required")
    for i, term in enumerate(terms or []):
        alias = term.get("alias")
        if alias is not None:
            if not re.match(r"^[a-z0-9]+@.+$", str(alias)):
                errs.append(f"spec.amiSelectorTerms[{i}].alias {alias!r} is not family@version")
            elif str(alias).endswith("@latest"):
                errs.append(
                    f"spec.amiSelectorTerms[{i}].alias {alias!r}: pin an AMI version, not "
                    "@latest (nodes would change under running jobs)"
                )
            if len(terms) > 1:
                errs.append("spec.amiSelectorTerms: an alias term must be the only term")
    if not spec.get("role") and not spec.get("instanceProfile"):
        errs.append("spec: one of role or instanceProfile is required")
    if spec.get("role") and spec.get("instanceProfile"):
        errs.append("spec: role and instanceProfile are mutually exclusive")
    for key in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
        if not spec.get(key):
            errs.append(f"spec.{key} is required")
    meta = spec.get("metadataOptions")
    if meta is not None:
        errs += [
            f"spec.metadataOptions.{k}: unknown field"
            for k in meta
            if k not in METADATA_OPTIONS_FIELDS
        ]
        if meta.get("httpTokens") not in (None, "required", "optional"):
            errs.append(f"spec.metadataOptions.httpTokens {meta.get('httpTokens')!r} invalid")
        if meta.get("httpEndpoint") not in (None, "enabled", "disabled"):
            errs.append(f"spec.metadataOptions.httpEndpoint {meta.get('httpEndpoint')!r} invalid")
        hops = meta.get("httpPutResponseHopLimit")
        if hops is not None and not (isinstance(hops, int) and 1 <= hops <= 64):
            errs.append(f"spec.metadataOptions.httpPutResponseHopLimit {hops!r} not in 1..64")
    return errs


# ---------------------------------------------------------------------------------------------
# Prometheus operator (monitoring.coreos.com/v1 PodMonitor, ServiceMonitor)

ENDPOINT_FIELDS = {
    "authorization",
    "basicAuth",
    "bearerTokenSecret",
    "enableHttp2",
    "filterRunning",
    "followRedirects",
    "honorLabels",
    "honorTimestamps",
    "interval",
    "metricRelabelings",
    "noProxy",
    "oauth2",
    "params",
    "path",
    "port",
    "portNumber",
    "proxyConnectHeader",
    "proxyFromEnvironment",
    "proxyUrl",
    "relabelings",
    "scheme",
    "scrapeTimeout",
    "targetPort",
    "tlsConfig",
    "trackTimestampsStaleness",
    "bearerTokenFile",
}


def monitor_findings(doc: dict) -> list[str]:
    """The parts of the PodMonitor/ServiceMonitor CRDs a scrape depends on."""
    errs: list[str] = []
    spec = doc.get("spec") or {}
    if not isinstance(spec.get("selector"), dict):
        errs.append("spec.selector is required (a label selector; {} selects every pod)")
    key = "podMetricsEndpoints" if doc.get("kind") == "PodMonitor" else "endpoints"
    endpoints = spec.get(key)
    if doc.get("kind") == "ServiceMonitor" and not endpoints:
        errs.append("spec.endpoints is required")
    for i, ep in enumerate(endpoints or []):
        errs += [f"spec.{key}[{i}].{k}: unknown field" for k in ep if k not in ENDPOINT_FIELDS]
        if ep.get("interval") is not None and not re.match(
            r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
            str(ep["interval"]),
        ):
            errs.append(f"spec.{key}[{i}].interval {ep['interval']!r} is not a duration like 30s")
    return errs


# ---------------------------------------------------------------------------------------------


CUSTOM_CHECKS = {
    ("kubeflow.org/v1", "PyTorchJob"): PYTORCHJOB_RULE,
    ("karpenter.sh/v1", "NodePool"): NODEPOOL_RULE,
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): NODECLASS_RULE,
    ("monitoring.coreos.com/v1", "PodMonitor"): MONITOR_RULE,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): MONITOR_RULE,
}


def validate_object(doc: dict, version: str | None = None) -> tuple[str, list[Finding]]:
    """('pass' | 'fail' | 'unchecked', findings) for one Kubernetes object."""
    version = version or k8s_version()
    key = (doc.get("apiVersion"), doc.get("kind"))
    rule = CUSTOM_CHECKS.get(key)  # type: ignore[arg-type]
    if rule == PYTORCHJOB_RULE:
        msgs = pytorchjob_findings(doc, version)
    elif rule == NODEPOOL_RULE:
        msgs = nodepool_findings(doc)
    elif rule == NODECLASS_RULE:
        msgs = ec2nodeclass_findings(doc)
    elif rule == MONITOR_RULE:
        msgs = monitor_findings(doc)
    else:
        errs = core_errors(doc, version)
        if errs is None:
            return "unchecked", []
        return ("fail" if errs else "pass"), [Finding(SCHEMA_RULE, m) for m in errs]
    return ("fail" if msgs else "pass"), [Finding(rule, m) for m in msgs]


def iter_findings(docs: list[dict], version: str | None = None) -> Iterator[tuple[int, Finding]]:
    for i, doc in enumerate(docs):
        for f in validate_object(doc, version)[1]:
            yield i, f
