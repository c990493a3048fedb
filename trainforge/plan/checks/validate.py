"""Validate Kubernetes objects as the API server and its admission webhooks would, so a wrong
object fails the plan instead of a 40-minute apply. Core kinds: kubernetes-validate's bundled
strict schemas; custom resources: their vendored CRD's schema and CEL rules (`plan.crds`,
docs/rehearsals.md "The upstream CRDs"). What neither says is written out per kind below, each
with its upstream: the operators' webhooks, the API server's Job validation, this platform's own.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainforge.core import names, pods, versions
from trainforge.core.pods import EACH, Path, containers, get
from trainforge.jobs import trainjob
from trainforge.plan import crds, kueue_validate
from trainforge.plan.check_types import CheckResult, Finding, PlanContext
from trainforge.plan.checks.job_backends import runtime_docs

DEFAULT_K8S_VERSION = "1.31"

SCHEMA_RULE = "K8S_SCHEMA"
PYTORCHJOB_RULE = "PYTORCHJOB_WEBHOOK"
NODEPOOL_RULE = "KARPENTER_NODEPOOL"
NODECLASS_RULE = "KARPENTER_EC2NODECLASS"
MONITOR_RULE = "PROMETHEUS_MONITOR"
TRAINJOB_RULE = "TRAINJOB_WEBHOOK"
RUNTIME_RULE = "TRAININGRUNTIME_WEBHOOK"
JOB_RULE = "K8S_JOB_VALIDATION"
KUEUE_RULE = "KUEUE_CRD"

RULES = {
    SCHEMA_RULE: "fix the field named in the message (strict schema: unknown fields are errors)",
    PYTORCHJOB_RULE: "fix the PyTorchJob spec: the training operator's webhook would reject it",
    NODEPOOL_RULE: "fix the NodePool spec: Karpenter's CRD validation would reject it",
    NODECLASS_RULE: "fix the EC2NodeClass spec: Karpenter's CRD validation would reject it",
    MONITOR_RULE: "fix the monitor spec: the Prometheus operator's CRD would reject it",
    TRAINJOB_RULE: "fix the TrainJob: Kubeflow Trainer v2's webhook or controller would reject it",
    RUNTIME_RULE: "fix the training runtime: Kubeflow Trainer v2's webhook would reject it",
    JOB_RULE: "fix the Job spec: the API server's Job validation would reject it",
    KUEUE_RULE: "fix the Kueue object: Kueue v0.19's CRD (schema or CEL rules) would reject it",
}


@functools.cache
def _schema_json(path: str) -> Any:
    import importlib.resources

    ref = importlib.resources.files("kubernetes_validate").joinpath(path)
    return json.loads(ref.read_text())


@functools.cache
def _validator(schema_dir: str, kind: str, api_version: str):
    """A strict validator per (schema version, kind, apiVersion), built once (kubernetes-validate
    re-parses its schema files on every call, ~20 ms per object)."""
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
def _schema_dir(version: str) -> str:
    """The bundled strict schemas of the newest version at or below `version` (of
    DEFAULT_K8S_VERSION when `version` is older than every bundled one)."""
    from kubernetes_validate import utils

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:2])

    candidates = [v for v in utils.all_versions() if key(v) <= key(version)]
    return f"v{candidates[-1]}-local-strict" if candidates else _schema_dir(DEFAULT_K8S_VERSION)


@functools.cache
def builtin_groups() -> frozenset[str]:
    """The API groups the API server serves itself (any other needs a CRD): every group of the
    cluster version's bundled schemas."""
    schema_dir = _schema_dir(versions.KUBERNETES_VERSION)
    defs = _schema_json(f"kubernetes-json-schema/{schema_dir}/_definitions.json")
    return frozenset(
        g["group"]
        for d in defs["$defs"].values()
        for g in d.get("x-kubernetes-group-version-kind", [])
    )


def core_errors(doc: dict, version: str) -> list[str] | None:
    """Strict schema errors for a core kind (as kubernetes-validate reports them); None when
    the kind has no bundled schema. Cached: a PyTorchJob's replicas often repeat a template."""
    import jsonschema

    if not isinstance(doc.get("apiVersion"), str) or not doc.get("kind"):
        return None
    schema_dir = _schema_dir(version)
    validator = _validator(schema_dir, str(doc["kind"]), doc["apiVersion"])
    if validator is None:
        return None
    try:
        key = (schema_dir, json.dumps(doc))
    except (TypeError, ValueError):
        key = None
    if key not in _CORE_ERRORS:
        err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
        out = []
        if err is not None:
            path = ".".join(str(p) for p in err.path)
            out = [f"{path}: {err.message}" if path else str(err.message)]
        if key is None:
            return out
        if len(_CORE_ERRORS) >= 256:
            _CORE_ERRORS.clear()
        _CORE_ERRORS[key] = out
    return list(_CORE_ERRORS[key])


# (schema dir, the document as JSON) -> core_errors' answer (~3 ms for a pod template)
_CORE_ERRORS: dict[tuple[str, str] | None, list[str]] = {}


def _name_errors(doc: dict) -> list[str]:
    """An operator's object name is a DNS-1035 label (its pods and services are named after it)."""
    name = (doc.get("metadata") or {}).get("name") or ""
    if not names.is_dns1035_label(name):
        return [f"metadata.name {name!r} is not a DNS-1035 label (a-z, 0-9, '-', <= 63)"]
    return []


def _shadow_pod_errors(template: Any, version: str, where: str) -> list[str]:
    """A pod template's errors as a core PodTemplate's at the cluster's version."""
    shadow = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "shadow"},
        "template": template,  # read only: validation does not change it
    }
    return [f"{where}: {m}" for m in core_errors(shadow, version) or []]


# --- PyTorchJob (kubeflow.org/v1): the training operator v1 validating webhook. Its CRD's
# schema (kubeflow.org_pytorchjobs.yaml, package data) leaves these enums to the webhook.
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All")


def crd_outline_errors(doc: dict) -> list[str]:
    """The CRD schema's errors for an object without its pod templates (the caller checks each
    as a core PodTemplate at the cluster's version)."""
    from trainforge.jobs.backends import pod_templates  # noqa: PLC0415 - its kind's shape

    outline = copy.deepcopy(doc)
    for t in pod_templates(outline, build=False):
        t.template.clear()
    return crds.crd_errors(outline) or []


def pytorchjob_findings(doc: dict, version: str) -> list[str]:
    errs = _name_errors(doc)
    errs += crd_outline_errors(doc)
    spec = doc.get("spec") or {}
    specs = spec.get("pytorchReplicaSpecs") or {}
    if not specs:
        errs.append("spec.pytorchReplicaSpecs is empty")
    for rtype, rspec in specs.items():
        where = f"spec.pytorchReplicaSpecs.{rtype}"
        if rtype not in ("Master", "Worker"):
            errs.append(f"{where}: replica type must be Master or Worker")
        rspec = rspec or {}
        containers = get(rspec, "template", "spec", "containers") or []
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(f"{where}: no container named 'pytorch' (the operator looks for it)")
        for c in containers:
            if not c.get("image"):
                errs.append(f"{where}: container {c.get('name')!r} has no image")
        policy = rspec.get("restartPolicy")
        if policy is not None and policy not in RESTART_POLICIES:
            errs.append(f"{where}.restartPolicy {policy!r} is not one of {RESTART_POLICIES}")
        replicas = rspec.get("replicas", 1)
        if isinstance(replicas, int) and replicas < 0:  # the CRD refuses a non-integer
            errs.append(f"{where}.replicas {replicas!r} must be a non-negative integer")
        if rspec.get("template") is not None:
            errs += _shadow_pod_errors(rspec["template"], version, f"{where}.template")
    if "Master" in specs and (specs["Master"] or {}).get("replicas", 1) != 1:
        errs.append("spec.pytorchReplicaSpecs.Master.replicas must be exactly 1")
    elastic = spec.get("elasticPolicy")
    if elastic is None and "Master" not in specs:
        errs.append("spec.pytorchReplicaSpecs needs a Master (exactly one) unless elastic")
    workers = (specs.get("Worker") or {}).get("replicas", 1)
    if elastic is None and "Worker" in specs and isinstance(workers, int) and workers < 1:
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


# --- batch/v1 Job: what the API server validates beyond the OpenAPI schema (pkg/apis/batch/validation)


def job_spec_findings(
    spec: dict, where: str = "spec", sized_later: bool = False, to_pod: Path = ("template",)
) -> list[str]:
    """Pod failure policy and indexed-Job rules of the Job API (Kubernetes 1.33).
    `sized_later`: a template whose completions the Trainer sets (from numNodes). `to_pod`:
    where the spec keeps its pod template (a runtime's Job: `trainjob.RUNTIME_SHAPE.levels`)."""
    errs: list[str] = []
    pod = get(spec, *to_pod, "spec") or {}
    pod_at = ".".join(to_pod)
    restart = pod.get("restartPolicy")
    if restart not in (None, "Never", "OnFailure"):
        errs.append(
            f"{where}.{pod_at}.spec.restartPolicy {restart!r}: a Job needs Never or OnFailure"
        )
    indexed = spec.get("completionMode") == "Indexed"
    per_index = spec.get("backoffLimitPerIndex")
    if indexed and spec.get("completions") is None and not sized_later:
        errs.append(f"{where}.completions is required with completionMode Indexed")
    if per_index is not None and not indexed:
        errs.append(f"{where}.backoffLimitPerIndex needs completionMode Indexed")
    if spec.get("maxFailedIndexes") is not None and per_index is None:
        errs.append(f"{where}.maxFailedIndexes needs backoffLimitPerIndex")
    policy = spec.get("podFailurePolicy")
    if policy is not None:
        if restart != "Never":
            errs.append(f"{where}.podFailurePolicy needs {pod_at}.spec.restartPolicy Never")
        if spec.get("podReplacementPolicy") not in (None, "Failed"):
            errs.append(f"{where}.podReplacementPolicy must be Failed with a podFailurePolicy")
        names = {c.get("name") for c in pod.get("containers") or []}
        for i, rule in enumerate(policy.get("rules") or []):
            at = f"{where}.podFailurePolicy.rules[{i}]"
            action = rule.get("action")
            if action not in ("FailJob", "FailIndex", "Ignore", "Count"):
                errs.append(f"{at}.action {action!r} is not FailJob, FailIndex, Ignore or Count")
            if action == "FailIndex" and per_index is None:
                errs.append(f"{at}: action FailIndex needs backoffLimitPerIndex")
            codes = rule.get("onExitCodes")
            if (codes is None) == (rule.get("onPodConditions") is None):
                errs.append(f"{at}: exactly one of onExitCodes and onPodConditions")
            if codes is not None:
                values = codes.get("values") or []
                if not values or len(values) > 255:
                    errs.append(f"{at}.onExitCodes.values: 1 to 255 values")
                if values != sorted(set(values)):
                    errs.append(f"{at}.onExitCodes.values must be sorted and unique")
                if codes.get("operator") == "In" and 0 in values:
                    errs.append(f"{at}.onExitCodes.values: 0 is not allowed with operator In")
                name = codes.get("containerName")
                if name is not None and name not in names:
                    errs.append(f"{at}.onExitCodes.containerName {name!r} is not a container")
    return errs


# --- Kubeflow Trainer v2.3 (trainer.kubeflow.org/v1alpha1; pkg/webhooks is the same at v2.2.1,
# the pinned Trainer, and the torch plugin's Validate differs only by 2.3's envInjection, which
# trainforge does not use; read 2026-11-29): pkg/webhooks and the plugins' Validate (torch:
# reserved PET_* env; jobset: runtime patches), what the CRDs' schemas and CEL rules
# (`crds.crd_errors`) leave to them. A runtime patch may set the Trainer's PodSpecPatch and
# ContainerPatch fields (`trainjob.KUEUE_*_PATCH_FIELDS`) and v2.3's terminationGracePeriodSeconds.
POD_PATCH_FIELDS = trainjob.KUEUE_POD_PATCH_FIELDS | {"terminationGracePeriodSeconds"}
CONTAINER_PATCH_FIELDS = trainjob.KUEUE_CONTAINER_PATCH_FIELDS
NO_PATCHED_ENV = {trainjob.CONTAINER, "dataset-initializer", "model-initializer"}
ANCESTOR_CONTAINERS = {
    trainjob.ANCESTOR_TRAINER: trainjob.CONTAINER,
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}
# A domain-prefixed path (k8s.io/apimachinery IsDomainPrefixedPath): DNS-1123 subdomain "/" path.
DOMAIN_PREFIXED_PATH = re.compile(
    "^" + names.DNS1123_SUBDOMAIN + r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+\Z"
)


def _split(level: Path) -> tuple[Path, Path]:
    """A level's path (a `Shape.levels` entry) before and after its EACH."""
    i = level.index(EACH)
    return level[:i], level[i + 1 :]


def _rjobs_at() -> Path:
    """Where a runtime keeps its replicated jobs (read when called: RUNTIME_SHAPE is the fact)."""
    to_jobset, to_job, _ = trainjob.RUNTIME_SHAPE.levels
    return to_jobset + _split(to_job)[0]


def _job_of(rjob: Any, shape: pods.Shape) -> Any:
    """A replicated job's (or its patch's) Job template."""
    return get(rjob, *_split(shape.levels[1])[1])


def _pod_of(rjob: Any, shape: pods.Shape) -> Any:
    return get(_job_of(rjob, shape), *shape.levels[2])


def _containers_of(rjob: dict) -> set[str]:
    pod = get(_pod_of(rjob, trainjob.RUNTIME_SHAPE), "spec") or {}
    return {c.get("name") for c in containers(pod)}


def trainjob_findings(
    doc: dict, version: str, runtimes: Mapping[str, dict] | None = None
) -> list[str]:
    """`runtimes`: those a TrainJob may name (`trainjob.runtimes_in`; None: the platform's own,
    which every platform with the trainjob backend installs), found by `trainjob.runtime_of`."""
    errs = crds.crd_errors(doc) or []  # its CEL rules check the name (RFC 1035, <= 63)
    spec = doc.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    if not ref.get("name"):
        errs.append("spec.runtimeRef.name is required")
    kind = ref.get("kind", trainjob.RUNTIME_KIND)
    if kind not in (trainjob.RUNTIME_KIND, "TrainingRuntime"):
        errs.append(f"spec.runtimeRef.kind {kind!r}: ClusterTrainingRuntime or TrainingRuntime")
    if ref.get("apiGroup", trainjob.GROUP) != trainjob.GROUP:
        errs.append(f"spec.runtimeRef.apiGroup {ref.get('apiGroup')!r}: unsupported runtime")
    trainer = spec.get("trainer") or {}
    for key in ("numNodes", "numProcPerNode"):
        value = trainer.get(key)  # the CRD refuses a non-integer
        if isinstance(value, int) and value < 1:
            errs.append(f"spec.trainer.{key} {value!r} must be an integer >= 1")
    env_names = [e.get("name") for e in trainer.get("env") or []]
    reserved = sorted(set(trainjob.TORCH_RESERVED_ENV) & set(env_names))
    if reserved:
        errs.append(f"spec.trainer.env must not have the torch plugin's reserved envs {reserved}")
    dupes = sorted({n for n in env_names if env_names.count(n) > 1})
    if dupes:
        errs.append(f"spec.trainer.env sets {dupes} more than once")
    shape = trainjob.SHAPE  # where its levels put the patches, their JobSet, its replicated jobs
    to_patches, to_jobset = _split(shape.levels[0])
    to_rjobs = _split(shape.levels[1])[0]
    patches = get(doc, *to_patches) or []
    managers = [p.get("manager") for p in patches]
    if len(set(managers)) != len(managers):
        errs.append(f"{'.'.join(to_patches)}: managers must be unique")
    runtime = trainjob.runtime_of(doc, runtimes)
    rjobs = get(runtime, *_rjobs_at()) or []
    known = {r.get("name"): _containers_of(r) for r in rjobs} if runtime else None
    for i, patch in enumerate(patches):
        at = f"{'.'.join(to_patches)}[{i}]"
        if not DOMAIN_PREFIXED_PATH.match(str(patch.get("manager"))):  # a non-string never matches
            errs.append(f"{at}.manager {patch.get('manager')!r} is not a domain-prefixed path")
        for rj in get(patch, *to_jobset, *to_rjobs) or []:
            rat = f"{at}.{to_rjobs[-1]}[{rj.get('name')}]"
            if known is not None and rj.get("name") not in known:
                errs.append(f"{rat}: no such replicated job in runtime {ref.get('name')!r}")
            pod = get(_pod_of(rj, shape), "spec") or {}
            errs += [
                f"{rat}: pod field {k!r} cannot be patched"
                for k in pod
                if k not in POD_PATCH_FIELDS
            ]
            for key in ("containers", "initContainers"):
                for c in pod.get(key) or []:
                    cname = c.get("name")
                    errs += [
                        f"{rat}: container field {k!r} cannot be patched"
                        for k in c
                        if k not in CONTAINER_PATCH_FIELDS
                    ]
                    if known is not None and cname not in known.get(rj.get("name"), set()):
                        errs.append(f"{rat}: container {cname!r} is not in the runtime's job")
                    if key == "containers" and c.get("env") and cname in NO_PATCHED_ENV:
                        errs.append(f"{rat}: container {cname!r} takes env from spec.trainer.env")
    if runtime is not None and not errs:
        try:  # a runtime the pod builder cannot use
            pod = trainjob.effective_pod(doc, dict(runtime))
        except (KeyError, TypeError, AttributeError, StopIteration) as e:
            why = f"{type(e).__name__}: {e}"
            return [f"the Trainer cannot build its pod from runtime {ref.get('name')!r} ({why})"]
        errs += _shadow_pod_errors(pod, version, "pod the Trainer builds")
    return errs


def runtime_findings(doc: dict, version: str) -> list[str]:
    """A ClusterTrainingRuntime or TrainingRuntime, as the Trainer webhook and CRD check it
    (its pod templates as core PodTemplates)."""
    errs = crd_outline_errors(doc)  # its CEL rules: one mlPolicy, ...
    shape = trainjob.RUNTIME_SHAPE
    rjobs, where = get(doc, *_rjobs_at()) or [], ".".join(_rjobs_at())
    if not rjobs:
        errs.append(f"{where} is empty")
    given = [r.get("name") for r in rjobs]
    if len(set(given)) != len(given):
        errs.append(f"{where}: names must be unique")
    to_spec, to_pod = shape.levels[2][:1], shape.levels[2][1:]
    job_at = ".".join(_split(shape.levels[1])[1] + to_spec)
    for i, rjob in enumerate(rjobs):
        at = f"{where}[{i}]"
        # JobSet v0.12.0 names each Job <trainjob>-<name>-<index> (placement.GenJobName), a
        # DNS-1035 label the TrainJob's own name starts, and labels it with the name
        # (jobset.sigs.k8s.io/replicatedjob-name): a DNS-1123 label; "1node" is fine there
        if not isinstance(rjob.get("name"), str) or not names.is_dns1123_label(rjob["name"]):
            errs.append(f"{at}.name {rjob.get('name')!r} is not a DNS-1123 label")
        job = _job_of(rjob, shape)
        labels = get(job, "metadata", "labels") or {}
        ancestor = labels.get(trainjob.ANCESTOR_LABEL)
        if ancestor in ANCESTOR_CONTAINERS:
            if rjob.get("replicas", 1) != 1:
                errs.append(f"{at}.replicas always must be 1 (ancestor {ancestor})")
            if ANCESTOR_CONTAINERS[ancestor] not in _containers_of(rjob):
                errs.append(
                    f"{at}: must contain the container {ANCESTOR_CONTAINERS[ancestor]!r} for "
                    f"the ancestor {ancestor}"
                )
        errs += job_spec_findings(
            get(job, *to_spec) or {},
            f"{at}.{job_at}",
            sized_later=ancestor == trainjob.ANCESTOR_TRAINER,
            to_pod=to_pod,
        )
        errs += _shadow_pod_errors(_pod_of(rjob, shape), version, f"{at} pod template")
    return errs


# --- Karpenter v1 NodePool and EC2NodeClass: their CRDs' schemas and CEL rules
# (`crds.crd_errors`; karpenter.sh_nodepools.yaml, karpenter.k8s.aws_ec2nodeclasses.yaml at
# v1.14.1), then this platform's own rules.


def nodepool_findings(doc: dict) -> list[str]:
    errs: list[str] = crds.crd_errors(doc) or []
    tspec = get(doc, "spec", "template", "spec") or {}
    for i, req in enumerate(tspec.get("requirements") or []):
        op = req.get("operator")
        # this platform's own: Kubernetes' rule for a pod's node selector (core/v1 validation,
        # ValidateNodeSelectorRequirement); Karpenter v1.14.1's CRD and its ValidateRequirement
        # accept values here and ignore them
        if op in ("Exists", "DoesNotExist") and req.get("values"):
            errs.append(f"spec.template.spec.requirements[{i}]: operator {op} takes no values")
    return errs


def ec2nodeclass_findings(doc: dict) -> list[str]:
    errs: list[str] = crds.crd_errors(doc) or []
    for i, term in enumerate(get(doc, "spec", "amiSelectorTerms") or []):
        alias = term.get("alias") if isinstance(term, dict) else None
        # this platform's own: the CRD takes `family@latest`; a pinned AMI keeps nodes from
        # changing under running jobs (versions.KARPENTER_AMI_ALIAS)
        if isinstance(alias, str) and alias.endswith("@latest"):
            errs.append(
                f"spec.amiSelectorTerms[{i}].alias {alias!r}: pin an AMI version, not "
                "@latest (nodes would change under running jobs)"
            )
    return errs


# --- Prometheus operator (monitoring.coreos.com/v1): its CRDs, package data


def prometheus_rule_findings(doc: dict) -> list[str]:
    """A PrometheusRule against its CRD's schema (prometheus-operator v0.93.0), group names
    unique (the API server's `x-kubernetes-list-type: map` on `name`) and each rule an `alert`
    or a `record`, not both (the operator's webhook: `OneOf=Record,Alert`). Each `expr` is
    promtool's job (tests/platform/test_alerts*.py)."""
    errs = crds.crd_errors(doc) or []
    names: list[Any] = []
    for g, group in enumerate((doc.get("spec") or {}).get("groups") or []):
        if not isinstance(group, dict):
            continue
        if group.get("name") in names:
            errs.append(f"spec.groups[{g}].name {group['name']!r} is used by another group")
        names.append(group.get("name"))
        for r, rule in enumerate(group.get("rules") or []):
            if isinstance(rule, dict) and ("alert" in rule) == ("record" in rule):
                errs.append(
                    f"spec.groups[{g}].rules[{r}]: exactly one of alert or record is required"
                )
    return errs


# (apiVersion, kind) -> (rule, judge): a judge takes the document, and the cluster's version
# where it checks pod templates (`JUDGED_WITH_VERSION`), and the plan's runtimes (TrainJobs)
CUSTOM_CHECKS: dict[tuple[str, str], tuple[str, Callable[..., list[str] | None]]] = {
    ("monitoring.coreos.com/v1", "PrometheusRule"): (MONITOR_RULE, prometheus_rule_findings),
    ("kubeflow.org/v1", "PyTorchJob"): (PYTORCHJOB_RULE, pytorchjob_findings),
    ("karpenter.sh/v1", "NodePool"): (NODEPOOL_RULE, nodepool_findings),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): (NODECLASS_RULE, ec2nodeclass_findings),
    # prometheus-operator v0.93.0: their CRDs' schemas say all
    ("monitoring.coreos.com/v1", "PodMonitor"): (MONITOR_RULE, crds.crd_errors),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (MONITOR_RULE, crds.crd_errors),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): (TRAINJOB_RULE, trainjob_findings),
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): (RUNTIME_RULE, runtime_findings),
    ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"): (RUNTIME_RULE, runtime_findings),
    **{
        ("kueue.x-k8s.io/v1beta2", kind): (KUEUE_RULE, kueue_validate.kueue_findings)
        for kind in kueue_validate.KINDS
    },
}
JUDGED_WITH_VERSION = (PYTORCHJOB_RULE, RUNTIME_RULE)


def validate_object(
    doc: dict, version: str | None = None, runtimes: Mapping[str, dict] | None = None
) -> tuple[str, list[Finding]]:
    """('pass' | 'fail' | 'unchecked', findings) for one Kubernetes object. `runtimes`: the
    runtimes a TrainJob may name (`trainjob_findings`)."""
    version = version or versions.KUBERNETES_VERSION
    key = (doc.get("apiVersion"), doc.get("kind"))
    rule, judge = CUSTOM_CHECKS.get(key, ("", None))  # type: ignore[arg-type]
    if rule == TRAINJOB_RULE:
        msgs = trainjob_findings(doc, version, runtimes)
    elif rule in JUDGED_WITH_VERSION:
        msgs = judge(doc, version)
    elif judge is not None:
        msgs = judge(doc) or []
    else:
        errs = core_errors(doc, version)
        if errs is None:
            return "unchecked", []
        found = [_finding(SCHEMA_RULE, m) for m in errs]
        if key == ("batch/v1", "Job") and not errs:
            found += [_finding(JOB_RULE, m) for m in job_spec_findings(doc.get("spec") or {})]
        return ("fail" if found else "pass"), found
    return ("fail" if msgs else "pass"), [_finding(rule, m) for m in msgs]


def _finding(rule: str, message: str) -> Finding:
    """A finding about an object not yet named (`validation` names it)."""
    return Finding("", rule, message, RULES[rule])


@dataclass
class Validation:
    """Every Kubernetes object of a plan judged once: the count per status, the objects without
    a schema, and the findings."""

    counts: Counter = field(default_factory=Counter)
    unchecked: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def validation(ctx: PlanContext) -> Validation:
    """The plan's validation, once per plan (the check reports its findings, the engine its
    counts); TrainJobs against the plan's own training runtimes."""
    if "validation" in ctx.memo:
        return ctx.memo["validation"]
    out = Validation()
    runtimes = runtime_docs(ctx)
    for obj in ctx.objects:
        status, found = validate_object(obj.doc, None, runtimes)
        out.counts[status] += 1
        if status == "unchecked":
            out.unchecked.append(obj.ident)
        out.findings += [
            replace(f, resource=obj.label, urn=obj.urn, names=obj.names) for f in found
        ]
    ctx.memo["validation"] = out
    return out


def check(ctx: PlanContext) -> CheckResult:
    """Each Kubernetes object as the API server and its webhooks would judge it."""
    return CheckResult(findings=list(validation(ctx).findings))
