"""The one reader of `Pulumi.<stack>.yaml`: the plan, the mocks, run-local and the policy pack
all read stack files here, so they agree on where the file is, what a key without a namespace
means and how values reach the program.

Pulumi hands a program every config value as a string: scalars as their text, structured
values as JSON (`config_value`); the program decodes them back (`decode_value`). Secure values
(`{secure: ...}`) cannot be decrypted offline; they read as "[secret]".

PyYAML and the standard library only: nothing here needs Pulumi.
"""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainforge.stack import pulumi_yaml

SECRET = "[secret]"
DEFAULT_PROJECT = "trainforge"


class StackFileError(ValueError):
    """The stack file is missing, not YAML, or not a mapping with a `config:` mapping."""


def config_value(value: Any) -> str:
    """A value as the engine hands it to a program: scalars as text, structures as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def decode_value(value: Any) -> Any:
    """A config value as the engine hands it over, decoded: JSON text becomes its structure;
    text that is not JSON stays text (a cluster name); anything else is returned as is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def full_key(key: str, project: str = DEFAULT_PROJECT) -> str:
    """`cluster` -> `trainforge:cluster`: a key without a namespace belongs to the project."""
    return key if ":" in key else f"{project}:{key}"


def engine_config(raw: Mapping[str, Any], project: str = DEFAULT_PROJECT) -> dict[str, str]:
    """A `config:` mapping as the engine hands it to a program (namespaced keys, text values)."""
    return {full_key(str(k), project): config_value(v) for k, v in (raw or {}).items()}


def namespace(config: Mapping[str, Any], ns: str) -> dict[str, Any]:
    """The keys of one namespace without their prefix, values decoded (`trainforge:` ->
    {"cluster": ..., "nodePools": [...]}); works on engine config and on stack files alike."""
    prefix = f"{ns}:"
    return {k[len(prefix) :]: decode_value(v) for k, v in config.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class StackFile:
    """One `Pulumi.<stack>.yaml`: its `config:` block with full keys, secrets masked."""

    path: pathlib.Path
    stack: str
    project: str
    config: dict[str, Any]  # full key -> value as written (secure values as SECRET)
    secret_keys: list[str] = field(default_factory=list)

    def engine(self) -> dict[str, str]:
        """The config as `pulumi up` hands it to the program."""
        return engine_config(self.config, self.project)

    def namespace(self, ns: str) -> dict[str, Any]:
        """The keys of `ns` without their prefix (`trainforge`, `trainforge-policy`, `aws`)."""
        return namespace(self.config, ns)

    def get(self, key: str, default: Any = None) -> Any:
        return self.config.get(full_key(key, self.project), default)


def stack_path(root: pathlib.Path | str, stack: str) -> pathlib.Path:
    return pathlib.Path(root) / f"Pulumi.{stack}.yaml"


# "Stack names may only contain alphanumeric characters, hyphens, underscores, or periods."
# (pulumi.com/docs/iac/concepts/stacks, "Create a stack", read 2026-11-29); the file of an
# `org/stack` name is still Pulumi.<stack>.yaml, so a slash never names one here.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def stacks_in(root: pathlib.Path | str) -> list[str]:
    """The stack names with a file in `root`."""
    return sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in pathlib.Path(root).glob("Pulumi.*.yaml")
    )


def project_name(root: pathlib.Path | str, default: str | None = DEFAULT_PROJECT) -> str:
    """The `name` of the project's Pulumi.yaml (`default` when there is no such file)."""
    path = pathlib.Path(root) / "Pulumi.yaml"
    if not path.is_file() and default is not None:
        return default
    data = _load(path)
    name = data.get("name") if isinstance(data, dict) else None
    if not name:
        raise StackFileError(f"{path}: no `name`")
    return str(name)


def read_stack(root: pathlib.Path | str, stack: str, project: str | None = None) -> StackFile:
    """`root/Pulumi.<stack>.yaml`, read as the Pulumi CLI does (keys without a namespace belong
    to the project; secure values masked). Raises StackFileError with what is wrong."""
    root = pathlib.Path(root)
    if not STACK_NAME.fullmatch(stack):
        raise StackFileError(
            f"stack {stack!r}: not a stack name; expected letters, digits, hyphens, underscores "
            f"or periods, as Pulumi allows (stacks here: {', '.join(stacks_in(root)) or 'none'})"
        )
    path = stack_path(root, stack)
    if path.is_dir():
        raise StackFileError(f"stack {stack!r}: {path.name} in {root} is a folder, not a file")
    if not path.is_file():
        raise StackFileError(
            f"stack {stack!r}: no {path.name} in {root} "
            f"(stacks here: {', '.join(stacks_in(root)) or 'none'})"
        )
    return read_stack_file(path, project or project_name(root), stack)


def read_stack_file(
    path: pathlib.Path | str, project: str = DEFAULT_PROJECT, stack: str | None = None
) -> StackFile:
    """A stack file at any path (tests, the policy pack's $TRAINFORGE_STACK_CONFIG)."""
    path = pathlib.Path(path)
    data = _load(path) or {}
    if not isinstance(data, dict):
        raise StackFileError(
            f"{path.name}: got {type(data).__name__} {data!r:.60}; expected a mapping with a "
            "`config:` mapping of keys such as trainforge:cluster"
        )
    raw = data.get("config") or {}
    if not isinstance(raw, dict):
        raise StackFileError(f"{path.name}: `config` must be a mapping, got {type(raw).__name__}")
    config: dict[str, Any] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        full = full_key(str(key), project)
        if _contains_secure(value):
            secret_keys.append(full)
        config[full] = _mask_secure(value)
    name = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return StackFile(path, name, project, config, secret_keys)


def _load(path: pathlib.Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:  # the Pulumi CLI reads stack files as UTF-8 too
        line = e.object[: e.start].count(b"\n") + 1
        raise StackFileError(
            f"{path.name}:{line}: not UTF-8 text (byte {e.object[e.start]:#04x}); save the "
            "file as UTF-8"
        ) from None
    try:
        return load_yaml(text, path.name, pulumi=True)
    except DuplicateKeyError as e:
        raise StackFileError(str(e)) from None


class DuplicateKeyError(ValueError):
    """A YAML mapping names one key twice: `name:line:col: key ... appears twice ...`."""

    def __init__(self, message: str, line: int, what: str) -> None:
        super().__init__(message)
        self.line, self.what = line, what


def load_yaml(text: str, name: str, *, all_documents: bool = False, pulumi: bool = False) -> Any:
    """`text` as YAML with its mistakes refused in one line naming `name`, line and column.

    Why not `yaml.safe_load`: YAML 1.1 as PyYAML reads it keeps the last of two equal keys in a
    mapping without a word, so a stack file that sets `trainforge:jobs` twice (or a job that
    says `workers:` twice) silently loses the first; Kubernetes' own YAML reader refuses such a
    file (sigs.k8s.io/yaml, strict decoding), and so does this one. Merge keys (`<<:`) are
    YAML's way to override on purpose and stay allowed.

    libyaml's parser when built in (a stack with a hundred jobs: ~10x faster) with the same
    constructors, so the same data; a syntax error is reported by the Python parser, whose
    messages name the line and column as users have always seen them.

    `pulumi`: plain scalars as `pulumi up` reads them (Go's yaml.v3, trainforge.stack.pulumi_yaml:
    `3e-5` a number, `yes` a string), for stack and project files; Kubernetes manifests
    (`trainforge import`) keep PyYAML's reading."""
    import yaml  # noqa: PLC0415 - only readers of files need it

    def loader_for(base: type) -> type:
        if pulumi:
            base = pulumi_yaml.with_pulumi_scalars(base)

        class _Unique(base):  # type: ignore[misc, valid-type]
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                seen: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.get(key)
                    except TypeError:  # an unhashable key: the constructor says so below
                        continue
                    mark = key_node.start_mark
                    if first is not None:
                        what = (
                            f"key `{key}` appears twice in one mapping (first at line "
                            f"{first.line + 1}); YAML would keep only the last: expected each "
                            "key once (merge the two entries)"
                        )
                        where = f"{name}:{mark.line + 1}:{mark.column + 1}"
                        raise DuplicateKeyError(f"{where}: {what}", mark.line + 1, what)
                    seen[key] = mark
                return super().construct_mapping(node, deep=deep)

        return _Unique

    fast = loader_for(getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    slow = loader_for(yaml.SafeLoader)

    def load(loader: type) -> Any:
        if all_documents:
            return list(yaml.load_all(text, Loader=loader))  # noqa: S506 - a SafeLoader
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader

    try:
        try:
            return load(fast)
        except yaml.YAMLError:
            try:
                return load(slow)
            except yaml.YAMLError as e:
                raise StackFileError(_yaml_error(name, e)) from e
    except pulumi_yaml.NotForPulumi as e:
        raise StackFileError(f"{name}: {e}") from None


def _yaml_error(name: str, e: Any) -> str:
    """One line in plain words: `Pulumi.dev.yaml:3:1: not valid YAML: a tab ...; expected ...`.

    Why: PyYAML's message spans several lines quoting the source with a caret, calls the file
    "<unicode string>" and speaks the parser's words (`expected <block end>, but found
    '<block mapping start>'`); the user needs the file, the line and the column, what is
    wrong there in their words and what YAML expected instead. Its marks are 0-based;
    editors count from 1. A problem without a plain reading keeps the parser's words."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if mark is None or not problem:
        return f"{name}: not valid YAML: {' '.join(str(e).split())}"
    context, at = getattr(e, "context", None), getattr(e, "context_mark", None)
    opened = f"line {at.line + 1}, column {at.column + 1}" if at is not None else "above"
    plain = _plain_yaml(str(problem), str(context or ""), opened)
    line = f"{name}:{mark.line + 1}:{mark.column + 1}: not valid YAML: "
    if plain:
        return line + plain
    line += str(problem)
    if context and at is not None and (at.line, at.column) != (mark.line, mark.column):
        line += f" ({context} at {opened})"
    elif context:
        line += f" ({context})"
    return line


def _plain_yaml(problem: str, context: str, opened: str) -> str | None:
    """PyYAML's problem (and the construct it was reading, opened at `opened`) in plain
    words with what was expected; None for one without a plain reading."""
    if problem.startswith("found character '\\t'"):
        return "a tab character; expected spaces (YAML indents with spaces only): replace it"
    if problem.startswith("found character") and "cannot start any token" in problem:
        char = problem.split("'")[1] if "'" in problem else "this character"
        return (
            f"a value cannot start with {char!r}; expected a plain value or a quoted one: "
            f"put the value in quotes"
        )
    if problem.startswith("expected <block end>"):
        return (
            f"this line's indentation does not match the block that starts at {opened}; "
            "expected it lined up with the keys (or the `-` items) it belongs with"
        )
    if problem == "mapping values are not allowed here":
        return (
            "a `key:` where only a value can be; expected a space after each `key:` on the "
            "line above or here (`key: value`), or quotes around a value that holds ': '"
        )
    for opener, closer, what in (("[", "]", "list"), ("{", "}", "mapping")):
        if problem.startswith(f"expected ',' or '{closer}'"):
            return (
                f"the {what} `{opener}` opened at {opened} is not closed; expected `{closer}` "
                f"after its last item (items separated by `, `)"
            )
    if problem.startswith("found unexpected end of stream") and "quoted scalar" in context:
        return f"the quote opened at {opened} is never closed; expected a closing quote"
    if problem.startswith("found undefined alias"):
        return (
            "a value starting with `*` names a YAML anchor that is not defined; expected "
            "quotes around a value that starts with `*`"
        )
    if problem.startswith("could not find expected ':'"):
        return f"a key without its `:` (the key starts at {opened}); expected `key: value`"
    return None


def _contains_secure(value: Any) -> bool:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return True
        return any(_contains_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_secure(v) for v in value)
    return False


def _mask_secure(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET
        return {k: _mask_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secure(v) for v in value]
    return value
