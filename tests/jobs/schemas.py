"""Upstream CRD schemas vendored into tests/jobs/crds (kubeflow.org PyTorchJob v1,
monitoring.coreos.com PodMonitor v1, trainer.kubeflow.org TrainJob and ClusterTrainingRuntime
v1alpha1 from Kubeflow Trainer v2.3.0), turned into strict JSON schemas like the API server."""

from __future__ import annotations

import functools
import pathlib

import jsonschema
import yaml

CRDS = pathlib.Path(__file__).parent / "crds"


def _strict(node):
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strict(v) for k, v in node.items()}
    if node.pop("x-kubernetes-int-or-string", False):
        node.pop("type", None)
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    preserve = node.pop("x-kubernetes-preserve-unknown-fields", False)
    embedded = node.pop("x-kubernetes-embedded-resource", False)
    for key in [k for k in node if k.startswith("x-kubernetes-")]:
        node.pop(key)
    if (
        node.get("type") == "object"
        and "properties" in node
        and "additionalProperties" not in node
        and not preserve
    ):
        if embedded:
            node["properties"].setdefault("apiVersion", {"type": "string"})
            node["properties"].setdefault("kind", {"type": "string"})
            node["properties"].setdefault("metadata", {"type": "object"})
        node["additionalProperties"] = False
    return node


@functools.cache
def validator(kind: str) -> jsonschema.Draft7Validator:
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if crd["spec"]["names"]["kind"] == kind:
            served = [v for v in crd["spec"]["versions"] if v.get("served", True)]
            schema = next((v for v in served if v.get("storage")), served[0])["schema"][
                "openAPIV3Schema"
            ]
            return jsonschema.Draft7Validator(_strict(schema))
    raise LookupError(kind)


def crd_errors(doc: dict) -> list[str]:
    v = validator(doc["kind"])
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in v.iter_errors(doc)
    ]
