"""`trainforge schema`: the JSON Schema of `Pulumi.<stack>.yaml` and the key tables of
docs/configuration.md, both generated from the stack model (trainforge/stack/).

Why: the model declares every key once; editors (VS Code's YAML extension and any other
yaml-language-server client) complete and check stack files from the schema, and the docs
tables say what the code accepts because they are made from the same declarations. Both are
committed (schema/stack.schema.json, docs/configuration.md) and a test keeps them equal to
what this module generates:

    python -m trainforge schema --out schema/stack.schema.json
    python -m trainforge schema --docs docs/configuration.md
    python -m trainforge schema --check     # exit 1 when either committed file is stale

The schema describes the stack file as the Pulumi CLI writes it: a value set with
`pulumi config set trainforge:x 3` is stored as the string "3", and any value may be a secret
(`{secure: ...}`), so numbers and booleans also accept their text and every leaf a secret.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import typing
from collections.abc import Mapping, MutableMapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, create_model
from pydantic.json_schema import models_json_schema
from pydantic_core import PydanticUndefined

from trainforge.stack.base import StackModel
from trainforge.stack.model import NAMESPACES

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCHEMA_PATH = "schema/stack.schema.json"
DOCS_PATH = "docs/configuration.md"
SCHEMA_ID = "https://trainforge.dev/schema/stack.schema.json"

# Keys of other namespaces that trainforge reads: (schema, default as documented, meaning)
PROVIDER_KEYS: dict[str, tuple[dict[str, Any], str, str]] = {
    "aws:region": (
        {"type": "string", "pattern": r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$"},
        "(required by the AWS provider)",
        "Region of everything.",
    ),
}
# What a Pulumi stack file may hold besides `config:`
STACK_FILE_KEYS = ("encryptionsalt", "secretsprovider", "encryptedkey")

# what stack.base.Bool takes as text: Pulumi's "true"/"false" in any case, not "yes" or "1"
_BOOL_TEXT = ["true", "false", "True", "False", "TRUE", "FALSE"]
_SECURE = {
    "type": "object",
    "description": "A secret, encrypted by `pulumi config set --secret`.",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


# --- the JSON Schema ------------------------------------------------------------------------


def stack_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a `Pulumi.<stack>.yaml` file."""
    models = list(NAMESPACES.items())
    tops, doc = models_json_schema(
        [(model, "validation") for _, model in models],
        by_alias=True,
        ref_template="#/$defs/{model}",
    )
    defs: dict[str, Any] = doc.get("$defs", {})
    properties: dict[str, Any] = {}
    declared: list[str] = []
    for ns, model in models:
        ref = tops[(model, "validation")]["$ref"].rsplit("/", 1)[-1]
        top = defs.pop(ref)
        for key, prop in top.get("properties", {}).items():
            properties[f"{ns}:{key}"] = prop
            declared.append(f"{ns}:{key}")
    for key, (schema, _, meaning) in PROVIDER_KEYS.items():
        properties[key] = {**schema, "description": meaning}
    pulumi_values = {k: _as_pulumi_writes(v) for k, v in properties.items()}
    # [a-z-]: no escaping (editors' regexes are ECMA-262); a namespace whose model declares
    # nothing yet stays open rather than refusing every key the program accepts
    owned = "|".join(ns for ns, model in models if model.model_fields)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Pulumi.<stack>.yaml of a trainforge project",
        "description": "Generated from trainforge/stack/ by `python -m trainforge schema`; "
        "keys and meanings: docs/configuration.md.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "description": "Stack settings: trainforge:<key>, trainforge-policy:<key>, "
                "aws:region; other namespaces are the providers' own.",
                "properties": pulumi_values,
                # a key of trainforge's namespaces that no area declares is an error (as in the
                # program); keys of other namespaces are not ours to judge
                "propertyNames": {
                    "anyOf": [
                        {"enum": sorted(properties)},
                        {"not": {"pattern": f"^({owned}):"}},
                    ]
                },
            },
            **{k: {"type": "string"} for k in STACK_FILE_KEYS},
        },
        "additionalProperties": False,
        "$defs": {k: _as_pulumi_writes(v) for k, v in sorted(defs.items())} | {"Secure": _SECURE},
    }


def _as_pulumi_writes(node: Any) -> Any:
    """Numbers and booleans also as their text ("3", "true"); every leaf may be a secret."""
    if isinstance(node, list):
        return [_as_pulumi_writes(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_pulumi_writes(v) if k not in ("default", "enum", "const") else v
           for k, v in node.items()}  # fmt: skip
    kind = out.get("type")
    out.pop("title", None)  # pydantic's "Jobperhour": the description says more
    keep = {k: out.pop(k) for k in ("description", "default") if k in out}
    if kind in ("integer", "number", "boolean"):
        text: dict[str, Any] = (
            {"type": "string", "enum": _BOOL_TEXT}
            if kind == "boolean"
            else {"type": "string", "pattern": r"^-?[0-9]+$" if kind == "integer"
                  else r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"}
        )  # fmt: skip
        return {**keep, "anyOf": [out, text, {"$ref": "#/$defs/Secure"}]}
    if kind == "string" or "enum" in out or "const" in out:
        return {**keep, "anyOf": [out, {"$ref": "#/$defs/Secure"}]}
    return {**keep, **out}


# --- the docs tables ------------------------------------------------------------------------

# <!-- generated from the model: SPEC --> ... <!-- end of generated table -->
BEGIN = re.compile(r"^<!-- generated from the model: (?P<spec>.+?) -->$")
END = "<!-- end of generated table -->"


def _field_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """(the model inside `annotation`, "[]" when it is a list of them / "" otherwise)."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return _field_model(args[0])
    if origin in (list, tuple, set, frozenset) and args:
        inner, _ = _field_model(args[0])
        return inner, "[]"
    if origin in (dict, Mapping, MutableMapping):  # one row: its keys are names, not keys
        return None, ""
    if args and origin is not None:
        for a in args:  # Optional[Model], Model | bool
            inner, suffix = _field_model(a)
            if inner is not None:
                return inner, suffix
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    return None, ""


def _resolve(spec: str) -> type[BaseModel] | None:
    """The model a table shows: `trainforge:nodePools[].acceptanceTest` (the model at that
    path), `trainforge-policy:` (a namespace), `trainforge:*PlatformKeys` (one area's keys of a
    namespace). None when the model has no such field yet (an area that has not declared it)."""
    ns, _, path = spec.partition(":")
    model = NAMESPACES.get(ns)
    if path.startswith("*"):
        area = next((c for c in model.__mro__ if c.__name__ == path[1:]), None) if model else None
        return area if area is not None and area.model_fields else None
    if path.startswith("{") and model is not None:  # some top-level keys: {jobBackend,jobBackends}
        keys = [k.strip() for k in path.strip("{}").split(",")]
        fields = {n: f for n, f in model.model_fields.items() if (f.alias or n) in keys}
        if len(fields) != len(keys):
            return None
        return create_model(f"Keys_{'_'.join(keys)}", __base__=StackModel, **{
            n: (f.annotation, f) for n, f in fields.items()})  # fmt: skip
    for part in filter(None, path.split(".")):
        if model is None:
            return None
        name = part.removesuffix("[]")
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == name), None)
        if field is None:
            return None
        model, _ = _field_model(field.annotation)
    return model if model is not None and model.model_fields else None


def _default(field: Any) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "docDefault" in extra:
        return str(extra["docDefault"])
    if field.is_required():
        return "(required)"
    value = field.default
    if value is PydanticUndefined and field.default_factory is not None:
        value = field.default_factory()
    if isinstance(value, BaseModel):
        return "see below" if type(value).model_fields else "`{}`"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple | set | frozenset):
        if not value and _written_as_mapping(field.annotation):  # tags: pairs, a mapping to users
            return "`{}`"
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{json.dumps(value)}`"
    return f"`{value}`"


def _written_as_mapping(annotation: Any) -> bool:
    """Whether users write the field as a mapping (its JSON Schema), whatever the code holds."""
    try:
        found = TypeAdapter(annotation).json_schema(by_alias=True)
    except Exception:  # noqa: BLE001 - a type without a schema is not a mapping
        return False
    return found.get("type") == "object"


def _rows(
    model: type[BaseModel], prefix: str, own_tables: set[type[BaseModel]]
) -> list[tuple[str, str, str]]:
    """(key, default, meaning) of every field, nested models flattened (`limits.cpu`,
    `receivers[].type`) unless they have a table of their own (one row then)."""
    rows = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        inner, suffix = _field_model(field.annotation)
        meaning = (field.description or "").replace("|", "\\|").replace("\n", " ")
        if inner is not None and inner not in own_tables and inner.model_fields:
            rows += _rows(inner, f"{prefix}{key}{suffix}.", own_tables)
        else:
            rows.append((f"{prefix}{key}", _default(field), meaning))
    return rows


def _spec(spec: str) -> tuple[str, list[str]]:
    main, *extra = [s.strip() for s in spec.split("+")]
    return main, extra


def table(spec: str, own_tables: set[type[BaseModel]]) -> list[str] | None:
    """The markdown table of `spec` (see _resolve), keys relative to a path or full for a
    namespace; `+ aws:region` adds rows for keys of other namespaces first."""
    main, extra = _spec(spec)
    model = _resolve(main)
    if model is None:
        return None
    ns, _, path = main.partition(":")
    prefix = f"{ns}:" if not path or path[0] in "*{" else ""
    lines = ["| Key | Default | Meaning |", "|---|---|---|"]
    for key in extra:
        _, default, meaning = PROVIDER_KEYS[key]
        lines.append(f"| `{key}` | {default} | {meaning} |")
    for key, default, meaning in _rows(model, prefix, own_tables - {model}):
        lines.append(f"| `{key}` | {default} | {meaning} |")
    return lines


def render_docs(text: str) -> tuple[str, list[str]]:
    """`text` with every generated table replaced; and the specs the model does not have yet
    (their tables are left as they are)."""
    lines = text.splitlines()
    specs = [m.group("spec") for line in lines if (m := BEGIN.match(line))]
    paths = [_spec(s)[0] for s in specs]  # tables of one model (not a namespace or an area)
    own = {m for p in paths if p.partition(":")[2][:1] not in ("", "*", "{") and (m := _resolve(p))}
    out: list[str] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = BEGIN.match(line)
        i += 1
        if not m:
            continue
        end = next((j for j in range(i, len(lines)) if lines[j] == END), None)
        if end is None:
            raise ValueError(f"{line}: no {END} after it")
        new = table(m.group("spec"), own)
        if new is None:
            pending.append(m.group("spec"))
            out += lines[i:end]
        else:
            out += new
        out.append(END)
        i = end + 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), pending


# --- the command ----------------------------------------------------------------------------


def schema_text() -> str:
    return json.dumps(stack_schema(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="trainforge schema",
        description="The JSON Schema of Pulumi.<stack>.yaml and the key tables of "
        "docs/configuration.md, generated from the stack model.",
    )
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        help="write the schema here (default: stdout, or nowhere with --docs)",
    )
    ap.add_argument(
        "--docs", type=pathlib.Path, help="rewrite the generated tables of this markdown file"
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 when {SCHEMA_PATH} or {DOCS_PATH} differ from what the model generates "
        "(writes nothing; not with --out or --docs)",
    )
    args = ap.parse_args(argv)
    if args.check and (given := [f for f, v in (("--out", args.out), ("--docs", args.docs)) if v]):
        # --check reads the committed files only and writes nothing: refused, not ignored
        return _refuse(
            f"{' and '.join(given)} with --check: --check compares the committed {SCHEMA_PATH} "
            f"and {DOCS_PATH} and writes nothing; drop {' and '.join(given)} to check, or "
            "--check to write"
        )
    if args.check:
        stale = stale_files(ROOT)
        for path in stale:
            print(
                f"trainforge schema: {path} is stale; regenerate it (see --help)", file=sys.stderr
            )
        return 1 if stale else 0
    if args.out is not None and (why := _unwritable(args.out)):
        return _refuse(f"--out {args.out}: {why}; expected a file to write the schema to")
    if args.docs:
        try:
            original = args.docs.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else e.strerror
            return _refuse(f"--docs {args.docs}: {why}; expected a markdown file to rewrite")
        if not any(BEGIN.match(line) for line in original.splitlines()):
            # nothing to rewrite: said, not a silent success that wrote nothing
            return _refuse(
                f"--docs {args.docs}: no generated table in it (no line "
                "'<!-- generated from the model: KEY -->'); expected a markdown file with "
                f"them, such as {DOCS_PATH}"
            )
        try:
            text, pending = render_docs(original)
        except ValueError as e:
            return _refuse(f"--docs {args.docs}: {e}; expected each table closed by that line")
        try:
            args.docs.write_text(text, encoding="utf-8")
        except OSError as e:
            return _refuse(f"--docs {args.docs}: {e.strerror}; expected a file it can rewrite")
        for spec in pending:
            print(
                f"{args.docs}: {spec}: not in the model yet; table left as written", file=sys.stderr
            )
        if not args.out:
            return 0
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(schema_text(), encoding="utf-8")
        except OSError as e:
            return _refuse(
                f"--out {args.out}: {e.strerror}; expected a file to write the schema to"
            )
    else:
        sys.stdout.write(schema_text())
    return 0


def _unwritable(out: pathlib.Path) -> str | None:
    """Why `out` cannot be the schema's file, checked before anything is written: a folder,
    or a folder of its path that is a file (mkdir would fail half-way)."""
    if out.is_dir():
        return "a folder"
    for parent in out.parents:
        if parent.exists():
            return None if parent.is_dir() else f"{parent} is a file, not a folder"
    return None


def _refuse(message: str) -> int:
    print(f"trainforge schema: {message}", file=sys.stderr)
    return 2


def stale_files(root: pathlib.Path) -> list[str]:
    """The committed generated files that differ from what the model generates now."""
    stale = []
    if (root / SCHEMA_PATH).read_text() != schema_text():
        stale.append(SCHEMA_PATH)
    docs = (root / DOCS_PATH).read_text()
    if render_docs(docs)[0] != docs:
        stale.append(DOCS_PATH)
    return stale
