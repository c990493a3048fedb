"""The vendored CRDs' CEL rules (`x-kubernetes-validations`), evaluated on create as the API
server does, by a real CEL implementation: the one model of them, read through
`crds.crd_errors` (docs/rehearsals.md, "The upstream CRDs").

cel-expr-python 0.1.3 (the CEL project's cel-cpp; pinned in pyproject.toml, requirements.lock,
policy/requirements.txt), not cel-python 0.5: it ships cel-go's `ext.Strings`, which
Kubernetes enables, so only Kubernetes' `find` is written here. A rule needing another
Kubernetes library (quantity, url, ...) does not compile and fails
`test_every_rule_of_every_vendored_crd_compiles`; it never passes.

Semantics: k8s.io/apiextensions-apiserver v0.35.7 (`versions.KUBERNETES_VERSION` 1.35), read
2026-11-30, cited at each function. Not modelled (no vendored rule needs them on create): the
cost budget, `date-time`/`duration` as CEL types, `x-kubernetes-list-type: map` correlation.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from typing import Any

# pkg/registry/customresource/strategy.go: added when a blocking schema error stopped the rules
NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
# apiextensions.FieldValueErrorReason -> field.ErrorType.String() (apimachinery field/errors.go)
REASONS = {
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
}


class RuleError(Exception):
    """A rule the evaluator cannot compile (or does not support): never passed silently."""


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str = ""
    field_path: str = ""
    optional_old_self: bool = False

    @property
    def error_string(self) -> str:
        """validation.go ruleErrorString: the message, else the rule, trimmed."""
        return (self.message or self.rule).strip()


@dataclass
class Node:
    """A schema node with CEL rules or defaults in it or under it."""

    type: str = ""
    rules: tuple[Rule, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)  # property -> default
    nullable: dict[str, bool] = field(default_factory=dict)  # defaulted property -> nullable
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None
    all_of: tuple[Node, ...] = ()
    number: bool = False  # type: number (an integer is a double in CEL)


_RULE_KEYS = {"rule": "rule", "message": "message", "messageExpression": "message_expression",
              "reason": "reason", "fieldPath": "field_path"}  # fmt: skip


def _rules(schema: dict) -> tuple[Rule, ...]:
    return tuple(
        Rule(
            **{attr: str(v.get(key) or "") for key, attr in _RULE_KEYS.items()},
            optional_old_self=bool(v.get("optionalOldSelf")),
        )
        for v in schema.get("x-kubernetes-validations") or []
    )


def build(schema: Any) -> Node | None:
    """The schema's CEL rules and defaults as a tree (None where a subtree has neither)."""
    if not isinstance(schema, dict):
        return None
    props = {k: build(v) for k, v in (schema.get("properties") or {}).items()}
    node = Node(
        type=str(schema.get("type") or ""),
        rules=_rules(schema),
        defaults={
            k: v["default"]
            for k, v in (schema.get("properties") or {}).items()
            if isinstance(v, dict) and "default" in v
        },
        properties={k: v for k, v in props.items() if v is not None},
        items=build(schema.get("items")),
        additional=build(schema.get("additionalProperties")),
        all_of=tuple(n for n in map(build, schema.get("allOf") or []) if n is not None),
        number=schema.get("type") == "number",
    )
    node.nullable = {k: bool(schema["properties"][k].get("nullable")) for k in node.defaults}
    useful = (
        node.rules or node.defaults or node.properties or node.items or node.additional
        or node.all_of or node.number
    )  # fmt: skip
    return node if useful else None


def default(value: Any, node: Node | None) -> Any:
    """defaulting/algorithm.go Default: the schema's defaults set in place (deep-copied) for
    absent properties and non-nullable null ones."""
    if node is None:
        return value
    if isinstance(value, dict):
        for k, d in node.defaults.items():
            if k not in value or (value[k] is None and not node.nullable.get(k)):
                value[k] = copy.deepcopy(d)
        for k in value:
            if k in node.properties:
                default(value[k], node.properties[k])
            elif node.additional is not None and k not in node.defaults:
                default(value[k], node.additional)
    elif isinstance(value, list) and node.items is not None:
        for v in value:
            default(v, node.items)
    return value


def _find(text: str, pattern: str) -> Any:
    """k8s.io/apiserver pkg/cel/library/regex.go (v0.35.7) `<string>.find(<string>)`: Go's
    regexp.Compile(pattern).FindString(text): the leftmost first match, "" when none; an
    uncompilable pattern is "Illegal regex: ...". Go's RE2 and Python's `re` agree on the
    vendored rules' patterns (tests/plan/test_crd_cel.py)."""
    try:
        m = re.search(pattern, text)
    except re.error as e:
        raise ValueError(f"Illegal regex: {e}") from e
    return m.group(0) if m else ""


@functools.cache
def _env(with_old_self: bool) -> Any:
    """CEL's standard library, cel-go's strings extension and Kubernetes' `find`."""
    try:
        from cel_expr_python import cel  # noqa: PLC0415 - only when a rule is compiled
        from cel_expr_python.ext import ext_strings  # noqa: PLC0415
    except ImportError as e:
        raise RuleError(
            f"no CEL evaluator to run the rule ({e}; trainforge[platform] pins cel-expr-python)"
        ) from e

    variables = {"self": cel.Type.DYN}
    if with_old_self:
        variables["oldSelf"] = cel.Type.DYN
    find = cel.FunctionDecl(
        "find",
        [
            cel.Overload(
                "string_find_string",
                cel.Type.STRING,
                [cel.Type.STRING, cel.Type.STRING],
                is_member=True,
                impl=_find,
            )
        ],
    )
    return cel.NewEnv(variables=variables, extensions=[ext_strings.ExtStrings()], functions=[find])


@dataclass(frozen=True)
class Compiled:
    program: Any
    message_program: Any
    uses_old_self: bool


def _compile(text: str, with_old_self: bool, what: str = "rule") -> Any:
    env = _env(with_old_self)  # RuleError when cel-expr-python is not installed
    try:
        return env.compile(text)
    except Exception as e:  # noqa: BLE001 - cel-cpp raises a bare error with the reason
        raise RuleError(f"{what} compile error: {e}") from e


@functools.cache
def compile_rule(rule: Rule) -> Compiled:
    """The rule compiled once per process (RuleError when it does not). One that compiles only
    with `oldSelf` declared is a transition rule (validation.go's UsesOldSelf)."""
    if rule.optional_old_self:
        raise RuleError(f"optionalOldSelf is not supported by the plan's evaluator: {rule.rule}")
    try:
        program, old = _compile(rule.rule, False), False
    except RuleError as first:  # the checker names an undeclared `oldSelf` (or `oldSelf.x`)
        if not re.search(r"undeclared reference to 'oldSelf['.]", str(first)):
            raise
        program, old = _compile(rule.rule, True), True
    expr = rule.message_expression
    return Compiled(program, _compile(expr, old, "messageExpression") if expr else None, old)


def rules(node: Node | None) -> list[Rule]:
    """Every rule in the tree."""
    if node is None:
        return []
    subs = [*node.properties.values(), node.items, node.additional, *node.all_of]
    return [*node.rules, *(r for sub in subs for r in rules(sub))]


def _cel_value(value: Any, node: Node | None) -> Any:
    """The unstructured value as Kubernetes binds it (UnstructuredToVal): an integer under a
    `number` schema is a double."""
    if node is None:
        return value
    if node.number and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return {
            k: _cel_value(v, node.properties.get(k) if k in node.properties else node.additional)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_cel_value(v, node.items) for v in value]
    return value


def go_quote(text: str) -> str:
    """Go's strconv.Quote (the `%q` of field.Error for a string value)."""
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
             "\v": "\\v", '"': '\\"', "\\": "\\\\"}  # fmt: skip
    out = (
        named.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch)
        for ch in text
    )
    return '"' + "".join(out) + '"'


def _bad_value(value: Any) -> str:
    """field.Error's value: %v for numbers and booleans, %q for a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else go_quote(str(value))


def _error_text(value: Any) -> str:
    """cel-cpp's error as cel-go words it where validation.go reads the words."""
    text = str(value)
    m = re.search(r'Key not found in map\s*:\s*"?(.*?)"?$', text)
    if m:
        return f"no such key: {m.group(1)}"
    m = re.search(r"Index error: index=(-?\d+)", text)
    if m:
        return f"index out of bounds: {m.group(1)}"
    if "No matching overloads" in text:
        return f"no such overload: {re.sub(r'^[A-Z_]+: ', '', text)}"
    return re.sub(r"^[A-Z_]+: ", "", text)


class Key(str):
    """A map key in a field path, printed `[key]` (field.Path.Key)."""


def field_path(parts: Any, root: str = "<nil>") -> str:
    """field.Path.String() (apimachinery field/path.go): `spec.x[0][key]`; `root` for no parts:
    `<nil>` (a nil root) in the CEL rules' errors, "(root)" in crds' schema lines."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, (int, Key)) else (f".{p}" if out else str(p))
    return out or root


def _eval_rules(node: Node, value: Any, parts: list[str | int], root: bool) -> list[str]:
    """validation.go: the node's rules with `self` bound to the value (at the root, `metadata`
    holds only name and generateName: model.WithTypeAndObjectMeta); a transition rule
    (`oldSelf`) does not run on create. An evaluation error is `<path>: Invalid value:
    "<type>": <error> evaluating rule: <message or rule>`."""
    if not node.rules:
        return []
    errs = []
    where = field_path(parts)
    bound = value
    if root and isinstance(value, dict):
        meta = value.get("metadata") or {}
        bound = {**value, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}
    data = {"self": _cel_value(bound, node)}
    for rule in node.rules:
        if not rule.rule.strip():
            continue  # validation.go: an empty rule has no program
        try:
            compiled = compile_rule(rule)
        except RuleError as e:
            errs.append(f"{where}: Invalid value: {go_quote(node.type)}: {e}")
            continue
        if compiled.uses_old_self:
            continue  # a transition rule: only on update
        result = compiled.program.eval(data=data)
        if result.type().name() == "ERROR":
            text = _error_text(result.value())
            if text.startswith("no such overload"):
                detail = (
                    f"'{text}': call arguments did not match a supported operator, function or "
                    f"macro signature for rule: {rule.error_string}"
                )
            else:
                detail = f"{text} evaluating rule: {rule.error_string}"
            errs.append(f"{where}: Invalid value: {go_quote(node.type)}: {detail}")
            continue
        if result.value() is True:
            continue
        detail = ""
        if compiled.message_program is not None:
            # evalMessageExpression: a string, trimmed, not empty, one line, at most 5 KiB
            # (celconfig.MaxEvaluatedMessageExpressionSizeBytes); else the message is used
            out = compiled.message_program.eval(data=data)
            msg = out.value() if out.type().name() == "STRING" else ""
            msg = msg.strip() if isinstance(msg, str) else ""
            if msg and "\n" not in msg and len(msg.encode()) <= 5 * 1024:
                detail = msg
        if not detail:
            detail = rule.message.strip() or f"failed rule: {rule.rule.strip()}"
        at = where if not rule.field_path else field_path([*parts, rule.field_path.lstrip(".")])
        errs.append(_field_error(at, rule.reason, node.type, value, detail))
    return errs


def _field_error(at: str, reason: str, type_: str, value: Any, detail: str) -> str:
    """validation.go fieldErrorForReason, as field.Error prints it: Forbidden and Required
    carry no value, Duplicate no detail, and an object's or array's value is omitted."""
    kind = REASONS.get(reason, "Invalid value")
    if kind in ("Forbidden", "Required value"):
        return f"{at}: {kind}: {detail}"
    shown = (
        f"{at}: {kind}" if type_ in ("object", "array") else f"{at}: {kind}: {_bad_value(value)}"
    )
    return shown if kind == "Duplicate value" else f"{shown}: {detail}"


def _validate(node: Node, value: Any, parts: list[str | int], root: bool = False) -> list[str]:
    """validation.go validate: where the value is present and not null, the node's rules, its
    allOf's, then its elements' (`path[i]`) and values' (`path[key]`)."""
    if value is None:
        return []
    errs = _eval_rules(node, value, parts, root)
    for sub in node.all_of:
        errs += _validate(sub, value, parts, root)
    if isinstance(value, list) and node.items is not None:
        for i, v in enumerate(value):
            errs += _validate(node.items, v, [*parts, i])
    elif isinstance(value, dict):
        if node.additional is not None:
            for k, v in value.items():
                errs += _validate(node.additional, v, [*parts, Key(k)])
        for k, v in value.items():
            if k in node.properties:
                errs += _validate(node.properties[k], v, [*parts, k])
    return errs


def defaulted(doc: dict, node: Node | None) -> dict:
    """A copy of `doc` with the schema's defaults, as the API server decodes a request (the
    schema and the CEL rules both judge this); `doc` itself when the schema has none."""
    return doc if node is None else default(copy.deepcopy(doc), node)


def cel_errors(doc: dict, node: Node | None) -> list[str]:
    """What the CEL rules of `node` (`build` of the CRD's schema: `crds.cel_tree`) refuse in
    the `defaulted` document on create, each as the API server prints it, in its order."""
    return [] if node is None else _validate(node, doc, [], root=True)
