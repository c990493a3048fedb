"""Upstream CRD schemas (kubeflow.org PyTorchJob v1, monitoring.coreos.com PodMonitor v1,
trainer.kubeflow.org TrainJob and ClusterTrainingRuntime v1alpha1 from Kubeflow Trainer v2.2.1,
Kueue v0.19), turned into strict JSON schemas like the API server. The files are the plan's
package data (`trainforge.plan.crds.crd_files`): the tests and the plan read the same CRDs, and
judge an object the same way (`crd_errors` is the plan's: the schema after its defaults, then
the CRD's CEL rules)."""

from __future__ import annotations

import functools

import jsonschema
import yaml

from trainforge.plan import crds
from trainforge.plan.crds import crd_files
from trainforge.plan.crds import strict as _strict

__all__ = ["_strict", "crd_errors", "validator"]


@functools.cache
def validator(kind: str) -> jsonschema.Draft7Validator:
    for path in crd_files():
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if crd["spec"]["names"]["kind"] == kind:
            served = [v for v in crd["spec"]["versions"] if v.get("served", True)]
            schema = next((v for v in served if v.get("storage")), served[0])["schema"][
                "openAPIV3Schema"
            ]
            return jsonschema.Draft7Validator(_strict(schema))
    raise LookupError(kind)


def crd_errors(doc: dict) -> list[str] | None:
    """The plan's judgement of `doc` against its CRD (None when no vendored CRD serves it)."""
    return crds.crd_errors(doc)
