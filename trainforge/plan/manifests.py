"""Recorded pulumi-kubernetes resources as the Kubernetes objects they apply: the provider
sends an object's fields under their wire names, so an object is its inputs, plus what the
provider adds at apply: a generated name when metadata.name is unset (here a stable hash, so
plans compare) and the default namespace for namespaced kinds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pathlib
import re
import shutil
from dataclasses import dataclass
from typing import Any

import yaml

from trainforge.plan.crds import crd
from trainforge.plan.runner import SECRET, UNKNOWN, Inventory, ProjectError, Recorded

MARKER = ".trainforge-plan"
CHECKOV_DIR = "_checkov"
CLUSTER_DIR = "_cluster"
DEFAULT_NAMESPACE = "default"

# Components that expand into objects only inside the provider: inventory, not manifests.
NOT_OBJECTS = re.compile(r"^kubernetes:(helm\.sh/v\d+|kustomize(/v\d+)?|yaml(/v\d+)?):")
# Built-in kinds without a namespace (a custom resource's scope is its CRD's).
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "StorageClass", "PriorityClass", "RuntimeClass", "IngressClass",
    "CSIDriver", "CSINode", "VolumeAttachment", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "APIService", "FlowSchema", "PriorityLevelConfiguration",
})  # fmt: skip


def cluster_scoped(api_version: str, kind: str) -> bool:
    """A built-in kind of CLUSTER_SCOPED, or a custom resource its vendored CRD says is."""
    if kind in CLUSTER_SCOPED:
        return True
    c = crd(api_version, kind)
    return c is not None and c["spec"].get("scope") == "Cluster"


# Fields whose schema demands an AWS id pattern (Karpenter's selector terms): an unknown id is
# "<prefix>-unknown", which the CRD accepts and a reader still reads as unknown.
ID_STANDINS = {
    "securityGroupSelectorTerms": "sg",
    "subnetSelectorTerms": "subnet",
    "amiSelectorTerms": "ami",
    "capacityReservationSelectorTerms": "cr",
}
UNKNOWN_NOTE = (
    "# trainforge plan: values shown as <unknown> (or sg-unknown, subnet-unknown, ...) are only\n"
    "# known once the cloud creates the resources they come from.\n"
)


# A Secret's data is wrapped whole as a secret (unknown at preview when it holds a generated
# password): one masked entry, so the object keeps its shape.
SECRET_MAPS = ("data", "stringData")


def _standins(node: Any, key: str | None = None) -> Any:
    if key in SECRET_MAPS and node == SECRET:
        return {SECRET: SECRET}
    if isinstance(node, dict):
        return {k: _standins(v, k) for k, v in node.items()}
    if isinstance(node, list):
        prefix = ID_STANDINS.get(key or "")
        if prefix:
            return [
                {**t, "id": f"{prefix}-unknown"}
                if isinstance(t, dict) and t.get("id") == UNKNOWN
                else _standins(t)
                for t in node
            ]
        return [_standins(v) for v in node]
    return node


def has_unknown(node: Any) -> bool:
    """Whether a value the cloud assigns at apply time (UNKNOWN) is anywhere in `node`."""
    if isinstance(node, dict):
        return any(has_unknown(v) for v in node.values())
    if isinstance(node, list):
        return any(has_unknown(v) for v in node)
    return node == UNKNOWN


def ident(doc: Any) -> str | None:
    """namespace/Kind/name (or _cluster/Kind/name): how the plan, its diff and its sides name a
    Kubernetes object; None when `doc` has no kind or name (not an object)."""
    meta = (doc.get("metadata") or {}) if isinstance(doc, dict) else {}
    if not meta.get("name") or not doc.get("kind"):
        return None
    return f"{meta.get('namespace') or CLUSTER_DIR}/{doc['kind']}/{meta['name']}"


@dataclass
class K8sObject:
    """A Kubernetes object and the Pulumi resource that declares it."""

    urn: str
    name: str  # Pulumi logical name
    type: str
    doc: dict[str, Any]
    autonamed: bool = False

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind"))

    @property
    def namespace(self) -> str | None:
        return (self.doc.get("metadata") or {}).get("namespace")

    @property
    def obj_name(self) -> str:
        return str((self.doc.get("metadata") or {}).get("name"))

    @property
    def ident(self) -> str:
        """`ident` of the object (to_object always gives it a kind and a name)."""
        return str(ident(self.doc))

    @property
    def label(self) -> str:
        """How a finding on the object names it: `ident (Pulumi name)`."""
        return f"{self.ident} ({self.name})"

    @property
    def names(self) -> frozenset[str]:
        """The names a finding on the object answers to (--ignore, the verdict)."""
        return frozenset({self.name, self.ident})

    @property
    def relpath(self) -> str:
        folder = _safe(self.namespace or CLUSTER_DIR)
        return f"{folder}/{_safe(self.kind.lower())}-{_safe(self.obj_name)}.yaml"


def _safe(part: str) -> str:
    """A path component: unknown or odd names (e.g. "<unknown>") must not escape DIR."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", part).lstrip(".") or "_"


def is_k8s_object_type(type_: str) -> bool:
    if not type_.startswith("kubernetes:") or NOT_OBJECTS.match(type_):
        return False
    kind = type_.rsplit(":", 1)[-1]
    return not (kind.endswith("Patch") or kind.endswith("List"))


def _autoname(rec: Recorded) -> str:
    """The provider appends a random suffix; ours is stable so that two plans compare."""
    base = re.sub(r"[^a-z0-9-]", "-", rec.name.lower()).strip("-")[:50] or "object"
    return f"{base}-{hashlib.sha256(rec.urn.encode()).hexdigest()[:8]}"


def to_object(rec: Recorded) -> K8sObject:
    inputs = copy.deepcopy(rec.inputs)
    group_version, kind = rec.type[len("kubernetes:") :].rsplit(":", 1)
    doc: dict[str, Any] = {
        "apiVersion": inputs.pop("apiVersion", group_version.removeprefix("core/")),
        "kind": inputs.pop("kind", kind),
    }
    meta = dict(inputs.pop("metadata", None) or {})
    autonamed = not meta.get("name")
    if autonamed:
        meta["name"] = _autoname(rec)
    if cluster_scoped(str(doc["apiVersion"]), str(doc["kind"])):
        meta.pop("namespace", None)
    elif not meta.get("namespace"):
        meta["namespace"] = DEFAULT_NAMESPACE
    doc["metadata"] = meta
    doc.update(inputs)
    doc = _standins(doc)
    return K8sObject(urn=rec.urn, name=rec.name, type=rec.type, doc=doc, autonamed=autonamed)


def k8s_objects(inv: Inventory) -> list[K8sObject]:
    return [to_object(r) for r in inv.resources if r.custom and is_k8s_object_type(r.type)]


def helm_like(inv: Inventory) -> list[dict[str, Any]]:
    """Helm releases, charts and kustomize/yaml components: what they install, not objects."""
    out = []
    for r in inv.resources:
        if not NOT_OBJECTS.match(r.type):
            continue
        i = r.inputs
        repo = (i.get("repositoryOpts") or {}).get("repo") or i.get("repo")
        got = {k: i.get(k) for k in ("chart", "version", "repo", "namespace", "directory")}
        more = {k: i.get(k) for k in ("files", "values")}
        out.append({"type": r.type, "name": r.name, **got, "repo": repo, **more})
    return out


def prepare_dir(out: pathlib.Path) -> None:
    """Empty DIR for a new plan; refuse to wipe a folder a plan did not write."""
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise ProjectError(
                f"--out {out}: folder exists, is not empty and was not written by a plan; "
                "choose an empty or new folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("written by `trainforge plan`; emptied on every plan\n")


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ~10x faster on big ConfigMaps


def dump_yaml(doc: Any) -> str:
    return yaml.dump(doc, Dumper=_DUMPER, sort_keys=False, default_flow_style=False, width=100)


def pod_template_jobs(
    obj: K8sObject, runtimes: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Each pod template of a job backend's custom-resource workload (jobs/backends.py
    pod_templates; a TrainJob's from its runtime in `runtimes`) wrapped as a batch/v1 Job, for
    scanners that skip custom resources (docs/pr-review.md, "The offline plan", 2)."""
    from trainforge.core.pods import KUBERNETES  # noqa: PLC0415 - plain data, no Pulumi
    from trainforge.jobs.backends import job_shape, pod_templates  # noqa: PLC0415

    if obj.kind in KUBERNETES or job_shape(obj.doc) is None:
        return []
    out = []
    for t in pod_templates(obj.doc, runtimes=runtimes):
        rtype = t.name or "Node"  # a TrainJob's one pod: the Trainer's replicated job `node`
        tmpl = copy.deepcopy(t.template)
        pod = tmpl.setdefault("spec", {})
        if pod.get("restartPolicy") not in ("OnFailure", "Never"):
            pod["restartPolicy"] = "Never"  # a Job requires one of these; irrelevant to scans
        name = f"{obj.obj_name}-{rtype.lower()}"[:63]
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": obj.namespace or DEFAULT_NAMESPACE,
                "annotations": {"trainforge.io/wraps": f"{obj.kind}/{obj.obj_name} {rtype}"},
            },
            "spec": {"template": tmpl},
        }
        out.append((f"{obj.namespace or DEFAULT_NAMESPACE}/job-{name}.yaml", job))
    return out


def write_manifests(objects: list[K8sObject], out: pathlib.Path, checkov: bool = True) -> int:
    """One YAML file per object under out/<namespace or _cluster>/; returns files written."""
    from trainforge.jobs.trainjob import runtimes_in  # noqa: PLC0415 - plain data, no Pulumi

    prepare_dir(out)
    runtimes = runtimes_in(o.doc for o in objects)
    for obj in objects:
        path = out / obj.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        note = UNKNOWN_NOTE if has_unknown(obj.doc) or "-unknown" in str(obj.doc) else ""
        path.write_text(note + dump_yaml(obj.doc))
        if checkov:
            for rel, job in pod_template_jobs(obj, runtimes):
                p = out / CHECKOV_DIR / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(dump_yaml(job))
    return len(objects)


def write_inventory(inv: Inventory, path: pathlib.Path, extra: dict[str, Any]) -> None:
    data = inv.to_json()
    data.update(extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
