"""The upstream CRDs custom resources are validated against, strictly as `kubectl apply
--validate=strict` (kubernetes-validate bundles built-in kinds only): data/crds/<group>_<plural>
.yaml and the vendored training operator's PyTorchJob (docs/rehearsals.md, "The upstream
CRDs"). Read on first use, never at import.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from trainforge.core import versions
from trainforge.plan import crd_cel

CRD_DIR = "data/crds"
# trainforge.platform's package data: the training operator's own CRD (one copy)
PYTORCHJOB_CRD = (
    f"data/training-operator-{versions.TRAINING_OPERATOR_VERSION}/manifests/base/crds/"
    "kubeflow.org_pytorchjobs.yaml"
)


def strict(node: Any) -> Any:
    """An openAPIV3Schema as a strict JSON schema: unknown fields are errors (as `kubectl apply
    --validate=strict`), int-or-string is either."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: strict(v) for k, v in node.items()}
    pattern = node.get("pattern")
    if isinstance(pattern, str) and "(?i)" in pattern[1:]:
        # RE2 takes a flag group anywhere (AdmissionCheck's parameters.kind `^(?i)[a-z]...`);
        # Python's re only at the start, where it means the same here
        node["pattern"] = "(?i)" + pattern.replace("(?i)", "")
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


def crd_files() -> list[Any]:
    """Every vendored CRD file (importlib.resources Traversables), sorted by name."""
    plan = resources.files("trainforge.plan").joinpath(CRD_DIR).iterdir()
    pytorchjob = resources.files("trainforge.platform").joinpath(PYTORCHJOB_CRD)
    return sorted(
        (f for f in [*plan, pytorchjob] if f.name.endswith(".yaml")), key=lambda f: f.name
    )


@functools.cache
def _crds_of_group(group: str) -> tuple[dict, ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(
        yaml.load(f.read_text("utf-8"), Loader=loader)
        for f in crd_files()
        if f.name.removesuffix(".yaml").split("_", 1)[0] == group
    )


def crd(api_version: str, kind: str) -> dict | None:
    """The CRD that defines `kind` in `api_version`'s group, or None."""
    group = api_version.rpartition("/")[0]
    for c in _crds_of_group(group):
        if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == kind:
            return c
    return None


@functools.cache
def schema(api_version: str, kind: str) -> dict | None:
    """The openAPIV3Schema of `kind` at `api_version` (None when no vendored CRD serves it)."""
    c = crd(api_version, kind)
    if c is None:
        return None
    version = api_version.rpartition("/")[2]
    for v in c["spec"]["versions"]:
        if v["name"] == version and v.get("served", True):
            return v["schema"]["openAPIV3Schema"]
    return None


@functools.cache
def validator(api_version: str, kind: str) -> Any:
    """A strict Draft 7 validator for the kind (None when no vendored CRD serves it)."""
    import jsonschema  # noqa: PLC0415 - only when a custom resource is validated

    s = schema(api_version, kind)
    return None if s is None else jsonschema.Draft7Validator(strict(s))


# The schema errors after which the API server runs no CEL rule (apiextensions-apiserver
# v0.35.7 pkg/registry/customresource/strategy.go hasBlockingErr: Unsupported value, Required,
# Too long, Too many, wrong type), as jsonschema names their keywords; and an unknown field,
# which `kubectl apply`'s strict field validation refuses before validation runs at all.
BLOCKING = frozenset(
    {"enum", "required", "maxLength", "maxItems", "maxProperties", "type", "additionalProperties"}
)


@functools.cache
def cel_tree(api_version: str, kind: str) -> crd_cel.Node | None:
    """The CEL rules and defaults of `kind`'s served version, built once (None: neither)."""
    s = schema(api_version, kind)
    return None if s is None else crd_cel.build(s)


def crd_errors(doc: dict) -> list[str] | None:
    """What the CRD refuses in `doc` defaulted as the API server decodes it (`doc` unchanged):
    schema errors as sorted "path: message" lines ("spec.x: unknown field"), then the CEL rules'
    (`crd_cel`), which run only when no schema error blocks them (else NOT_CHECKED says so);
    None when no vendored CRD serves its apiVersion and kind."""
    v = validator(str(doc.get("apiVersion") or ""), str(doc.get("kind") or ""))
    if v is None:
        return None
    tree = cel_tree(str(doc["apiVersion"]), str(doc["kind"]))
    doc = crd_cel.defaulted(doc, tree)  # the API server defaults a request before validating
    out, blocked = [], False
    for e in v.iter_errors(doc):
        blocked = blocked or e.validator in BLOCKING
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = set(e.schema.get("properties") or {})
            for key in sorted(k for k in e.instance if k not in known):
                out.append((crd_cel.field_path([*e.absolute_path, key], "(root)"), "unknown field"))
        else:
            out.append((crd_cel.field_path(e.absolute_path, "(root)"), _message(e)))
    schema_lines = [f"{path}: {msg}" for path, msg in sorted(out)]
    if blocked:  # the API server's celValidator exists when the CRD has any rule
        return [*schema_lines, crd_cel.NOT_CHECKED] if crd_cel.rules(tree) else schema_lines
    return [*schema_lines, *crd_cel.cel_errors(doc, tree)]


def _message(error: Any) -> str:
    """jsonschema's message, without the whole offending list for a list-length bound."""
    if error.validator == "maxItems":
        return f"at most {error.validator_value} items (got {len(error.instance)})"
    if error.validator == "minItems":
        return f"at least {error.validator_value} item(s) (got {len(error.instance)})"
    return error.message
