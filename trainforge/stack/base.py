"""The stack model's foundation: one base class, one error format, one "did you mean".

Why: every `trainforge:` key of `Pulumi.<stack>.yaml` is declared once, as a field of a model
in this package (type, default, bounds, a one-line description). The readers of each area
validate through these models, the JSON Schema for editors and docs/configuration.md's tables
are generated from them, and every problem of a stack comes back in one run, in one format:

    trainforge:jobs[1].pool: got 'p5-nowhere'; expected one of the node pools: cpu, gpu

Pulumi hands config values over as strings when they were set on the command line
(`pulumi config set trainforge:x 3`); pydantic's lax mode turns "3" into 3 and "true" into True
for int and bool fields, so no field needs its own coercion.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from trainforge.core import image_routes, names
from trainforge.core.quantity import NONNEGATIVE_PATTERN, parse_quantity

NS = "trainforge"
M = TypeVar("M", bound=BaseModel)


class StackModel(BaseModel):
    """Base of every stack section: camelCase keys, unknown keys refused, immutable.

    Attribute names are snake_case (what the code reads); the keys users write are their
    camelCase aliases (what the stack file holds). `populate_by_name` lets Python callers and
    tests construct a section with the attribute names. A field's one-line description is its
    `Field(description=...)` or the docstring right below it; it feeds the JSON Schema (editor
    hover) and the docs tables.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        str_strip_whitespace=False,
        use_enum_values=True,
        use_attribute_docstrings=True,
    )

    @model_validator(mode="wrap")
    @classmethod
    def _rules_on_what_parsed(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        """The rules across fields (the subclasses' `after`/`wrap` model validators) also run
        when a field is wrong: pydantic skips them then, and their problems came a run later.

        Defined here, this validator is the innermost of every model's after/wrap validators:
        `handler` validates the fields only. On a field error, the rules run on the entry with
        those fields UNPARSED (partial_rules); their problems join the fields' in one error."""
        try:
            return handler(data)
        except ValidationError as exc:
            extra = partial_rules(cls, data, handler, exc, info)
            if not extra:
                raise
            try:
                combined = [*_line_errors(exc), *extra]
                error = ValidationError.from_exception_data(exc.title, combined)
            except (TypeError, ValueError, KeyError):  # an error pydantic cannot rebuild
                raise exc from None
            raise error from None


class Unparsed(Exception):  # noqa: N818 - not an error of the user's: a rule that cannot run
    """Raised by UNPARSED on any use: a rule that reads a field which failed is skipped."""


class _Unparsed:
    """A failed field's value while the rules run on the rest of its entry (partial_rules):
    comparing, testing, iterating or reading it raises Unparsed, so a rule that needs it is
    skipped, never judged on a value the user did not write."""

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise Unparsed

    __getattr__ = __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __hash__ = __iter__ = __len__ = __contains__ = __getitem__ = __str__ = __format__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __mod__ = __int__ = __float__ = __index__ = __call__ = _refuse

    def __repr__(self) -> str:
        return "UNPARSED"


UNPARSED: Any = _Unparsed()


def unless_unparsed() -> contextlib.suppress:
    """One check of a rule that checks several things (a job's): it stops where it reads a
    wrong key (UNPARSED), and the rule's other checks still run. Inert on a valid entry."""
    return contextlib.suppress(Unparsed)


def partial_rules(
    cls: type[BaseModel], data: Any, handler: Any, exc: ValidationError, info: ValidationInfo
) -> list[dict[str, Any]]:
    """The problems `cls`'s rules across fields find in `data` whose fields `exc` refused.

    The fields that failed are left out and validated again (their defaults stand in, so the
    others' field validators run as before), then set to UNPARSED, and every after/wrap model
    validator of `cls` runs on that entry in pydantic's order: a rule that reads an UNPARSED
    field is skipped (it runs once the field is fixed); the others report as usual. Unknown keys
    are left out too. Nothing is found (those rules run once the entry's fields are fixed) when
    the entry is not a mapping, an error has no field, or a required field failed (nothing can
    stand in for it)."""
    if not isinstance(data, Mapping):
        return []
    by_key = {f.alias or n: n for n, f in cls.model_fields.items()} | {
        n: n for n in cls.model_fields
    }
    failed: set[str] = set()
    keys: set[Any] = set()  # left out: the failed fields' keys and unknown keys
    entry, found = None, exc
    for _ in range(4):  # a field validator may read a field left out: leave it out too
        for e in found.errors(include_url=False):
            key = e["loc"][0] if e["loc"] else None
            name = by_key.get(str(key))
            if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
                keys.add(key)  # a misspelt key, reported as such: not a field
            elif name is None or cls.model_fields[name].is_required():
                return []  # no field, or nothing can stand in for it
            else:
                failed.add(name)
                keys |= {k for k, n in by_key.items() if n == name}
        try:
            entry = handler({k: v for k, v in data.items() if k not in keys})
            break
        except ValidationError as again:
            found = again
    if entry is None:
        return []
    for name in failed:
        entry.__dict__[name] = UNPARSED
    entry.__pydantic_fields_set__.update(failed)
    out: list[dict[str, Any]] = []
    for dec in cls.__pydantic_decorators__.model_validators.values():
        if dec.info.mode == "before" or dec.cls_var_name == "_rules_on_what_parsed":
            continue
        takes_info = len(inspect.signature(dec.func).parameters) == (
            3 if dec.info.mode == "wrap" else 2
        )
        args = (info,) if takes_info else ()
        try:
            if dec.info.mode == "wrap":
                entry = dec.func(data, lambda _, e=entry: e, *args)
            else:
                entry = dec.func(entry, *args) or entry
        except ValidationError as broken:
            out.extend(_line_errors(broken))
        except (ValueError, AssertionError) as broken:
            kind = "assertion_error" if isinstance(broken, AssertionError) else "value_error"
            out.append({"type": kind, "loc": (), "input": data, "ctx": {"error": broken}})
        except Exception:  # noqa: BLE001, S112 - Unparsed, or a rule that needs a failed field
            continue
    wrong = {k for k, n in by_key.items() if n in failed}
    return [kept for e in out if (kept := _on_parsed(e, wrong)) is not None]


def _on_parsed(error: dict[str, Any], wrong: set[Any]) -> dict[str, Any] | None:
    """`error` without what it says at a wrong key or of an UNPARSED value (that key's own
    error stands; a rule that did not read it has nothing to add there); None when nothing is
    left."""

    def stands(loc: tuple[Any, ...], value: Any) -> bool:
        return value is not UNPARSED and not (loc and loc[0] in wrong)

    found = (error.get("ctx") or {}).get("error")
    if isinstance(found, Problems):
        items = [(loc, v, x) for loc, v, x in found.items if stands((*error["loc"], *loc), v)]
        return {**error, "ctx": {"error": Problems(items)}} if items else None
    return error if stands(tuple(error["loc"]), error["input"]) else None


def _line_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """`exc`'s errors as `ValidationError.from_exception_data` takes them again."""
    keep = ("type", "loc", "input", "ctx")
    return [{k: e[k] for k in keep if k in e} for e in exc.errors(include_url=False)]


class Section(StackModel):
    """A block of keys (a platform section, a block of a job): a key set to null (`labels:`
    and nothing) is unset.

    A field with `validate_default=True` (a rule across fields, or a default computed from
    another field) gets its default as if given, so that its problems are named by the key
    (pydantic names a validated default by its attribute)."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = {k: v for k, v in data.items() if v is not None}
        for name, field in cls.model_fields.items():
            if field.validate_default and name not in data:
                default = field.default
                data.setdefault(field.alias or name, list(default) if default == () else default)
        return data


class StackError(ValueError):
    """Every problem of a stack's configuration, one line each (`errors`)."""

    def __init__(self, errors: Iterable[str]):
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"invalid stack configuration ({len(self.errors)} problem(s)):\n{lines}")


class Problems(ValueError):
    """Raised by a validator whose rule relates several fields or items (unique team ids, a
    quota naming an undeclared pool): each `(loc, value, expected)` becomes its own line at
    its own key path, `loc` being relative to what the validator validates. `value` MISSING
    reads `missing`."""

    def __init__(self, items: Iterable[tuple[tuple[Any, ...], Any, str]]):
        self.items = list(items)
        super().__init__("; ".join(expected for _, _, expected in self.items))

    @classmethod
    def raise_any(cls, items: Iterable[tuple[tuple[Any, ...], Any, str]]) -> None:
        """Raise when `items` holds a problem."""
        found = list(items)
        if found:
            raise cls(found)


def refuse(title: str, problems: Iterable[tuple[tuple[str | int, ...], Any, str]]) -> None:
    """Raise every `(key path, value, what is valid)` as a validation error at that key (a rule
    across fields names the key that breaks it, not the section that holds it)."""
    details: list[Any] = [
        {"type": "value_error", "loc": loc, "input": value, "ctx": {"error": ValueError(expected)}}
        for loc, value, expected in problems
    ]
    if details:
        raise ValidationError.from_exception_data(title, details)


def matching(pattern: str, expected: str, max_length: int = 0) -> Any:
    """A string matching `pattern` whole (at most `max_length` long); the JSON Schema carries
    the same pattern for editors."""
    rx = re.compile(pattern)

    def valid(value: Any) -> str:
        # before pydantic's own str check, so that `stalledAfter: 15` is told what is valid
        # ("a Prometheus duration such as 30s, 15m or 2h"), not only "expected a string"
        if not isinstance(value, str) or not rx.fullmatch(value):
            raise ValueError(expected)
        if max_length and len(value) > max_length:
            raise ValueError(expected)
        return value

    schema: dict[str, Any] = {"type": "string", "pattern": f"^(?:{pattern})$"}
    schema.update({"maxLength": max_length} if max_length else {})
    return Annotated[str, BeforeValidator(valid), WithJsonSchema(schema)]


def pinned_image(value: str) -> str:
    """An image reference (core/image_routes.REFERENCE) with a version tag or a digest."""
    m = image_routes.REFERENCE.match(value)
    if m is None:
        raise ValueError(
            "an image reference such as pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime or "
            "registry/repo@sha256:<64 hex digits>"
        )
    if not m.group("digest") and (not m.group("tag") or m.group("tag") == "latest"):
        raise ValueError(
            "an image pinned with a version tag (not 'latest') or a sha256 digest, so that a "
            "restarted pod runs the same code"
        )
    return value


# A pinned image as a stack key; the schema's pattern is the reference grammar, unnamed
PinnedImage = Annotated[
    str,
    AfterValidator(pinned_image),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^(?:"
            + re.sub(r"\(\?P<\w+>", "(", image_routes.REFERENCE.pattern.removesuffix(r"\Z"))
            + ")$",
        }
    ),
]


# A namespace (and a name that becomes one): Kubernetes' rule, core/names.py.
Namespace = matching(
    names.DNS1123_LABEL,
    "a DNS-1123 label (lowercase letters, digits, '-')",
    names.DNS1123_LABEL_MAX,
)


# Kubernetes resource.Quantity, not negative: core/quantity.parse_quantity (apimachinery's
# ParseQuantity) decides; the JSON schema's pattern is core's NONNEGATIVE_PATTERN, proven equal
# to this on apimachinery's cases (tests/stack/test_stack_quantity.py).


def _quantity(value: Any) -> str:
    text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    try:
        ok = (
            isinstance(text, str)
            and text == text.strip()
            and not text.startswith("-")
            and parse_quantity(text) >= 0
        )
    except ValueError:
        ok = False
    if not ok:
        raise ValueError("a Kubernetes quantity such as 8, 500m, 64Gi or 1.5")
    return text


# A YAML number or string, kept as the string Kubernetes gets.
_NUMBER_OR = {"anyOf": [{"type": "string", "pattern": NONNEGATIVE_PATTERN}, {"type": "number"}]}
Quantity = Annotated[str, BeforeValidator(_quantity), WithJsonSchema(_NUMBER_OR)]

# Memory of a team or a pool: a quantity without a unit is bytes (valid Kubernetes syntax), but
# no team or pool of GPU/CPU nodes means `memory: "256"` as 256 bytes; refused below 1Mi (0 is
# "none") with the unit most likely meant.
MEMORY_FLOOR = 2**20


def memory_floor(zero: bool = True) -> Callable[[str], str]:
    """The floor's validator; `zero`: 0 ("none") is valid where the key's own type allows it
    (a job's memory is positive: its message must not offer 0)."""

    def check(text: str) -> str:
        value = parse_quantity(text)
        if 0 < value < MEMORY_FLOOR:
            plain = re.fullmatch(r"[0-9]+(\.[0-9]+)?", text)
            raise ValueError(
                f"memory of at least 1Mi{' (or 0)' if zero else ''}, such as 64Gi or 512Mi: a "
                "number without a unit is bytes" + (f" (did you mean {text}Gi?)" if plain else "")
            )
        return text

    return check


Memory = Annotated[Quantity, AfterValidator(memory_floor())]


MISSING: Any = type("Missing", (), {"__repr__": lambda self: "missing"})()


def _bool(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic's lax mode would read True as 1
        raise ValueError("a number, not true or false")
    return value


# Pulumi's values: "true"/"false" as Pulumi gives them, but not pydantic's lax "yes", "on", 1;
# numbers (also "3" as Pulumi gives them), but not true/false.
Bool = Annotated[bool, BeforeValidator(_bool)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]


def aliases(model: type[BaseModel]) -> set[str]:
    """The keys a model accepts, as users write them (camelCase aliases)."""
    return {f.alias or name for name, f in model.model_fields.items()}


def own_keys(model: type[BaseModel], raw: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the flat `trainforge:` mapping that `model` (an area's keys) declares.

    Stack keys are flat (`trainforge:nodePools`, `trainforge:teams`, `trainforge:jobs`): each
    area validates its own; the root model (model.py) refuses a key no area declares.
    """
    keys = aliases(model)
    return {k: v for k, v in raw.items() if k in keys}


def problem(path: str, value: Any, expected: str) -> str:
    """The one error line: `<path>: got <value>; expected <what is valid>`."""
    return f"{path}: got {_show(value)}; expected {expected}"


def suggest(value: Any, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when `value` is close to one of `choices`, else ``."""
    if not isinstance(value, str):
        return ""
    names = list(choices)
    match = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    if not match:  # a name with a suffix or prefix too many: 'p5-nowhere' -> 'p5'
        match = sorted(
            (n for n in names if len(n) >= 2 and (value.startswith(n) or n.startswith(value))),
            key=len,
            reverse=True,
        )
    return f" (did you mean {match[0]!r}?)" if match and match[0] != value else ""


def _squash(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _meaning(model: type[BaseModel] | None, key: str) -> str:
    """` (did you mean 'entrypoint.args'?)` for a key another tool spells that way, from the
    model's `KEY_MEANINGS` (key as written elsewhere -> (the key here, a note)), else ``.

    Why: a newcomer brings the words of a PyTorchJob or a torchrun command line (`args`,
    `replicas`, `nproc_per_node`); spelling distance suggests `layers` for `args`. The
    meaning is what they need; the spelling is compared without case, `_` or `-`."""
    meanings: Mapping[str, tuple[str, str]] = getattr(model, "KEY_MEANINGS", {}) if model else {}
    meant = {_squash(k): v for k, v in meanings.items()}.get(_squash(key))
    if not meant:
        return ""
    right, note = meant
    return f" (did you mean {right!r}?{f' {note}' if note else ''})"


def one_of(value: Any, choices: Iterable[str], what: str = "") -> str:
    """`one of <what>: a, b, c (did you mean 'b'?)`: the expected text for a name reference."""
    names = sorted(choices)
    # with none declared the fix is to declare one, not to pick from an empty list
    listed = ", ".join(names) if names else f"(none declared: declare {value!r} first)"
    head = f"one of the {what}: " if what else "one of: "
    return f"{head}{listed}{suggest(value, names)}"


def validate(
    model: type[M], raw: Any, path: str, errors: list[str], context: dict | None = None
) -> M | None:
    """`model` validated from `raw`; each problem appended to `errors` (None when any).

    `path` is where `raw` sits, written as users see it (`trainforge:jobs[1]`), and prefixes
    every line. Validate each independent part separately (each job, each pool) so that one
    bad part does not hide the problems of the others. `context` reaches the validators
    (`info.context`): what a rule needs from another area, such as the declared pool names.
    """
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        errors.extend(format_errors(exc, model, path))
        return None


def validate_as(annotation: Any, raw: Any, path: str, errors: list[str]) -> Any:
    """Like `validate`, for any annotation (`list[PoolModel]`, `dict[str, str]`, ...)."""
    try:
        return TypeAdapter(annotation).validate_python(raw)
    except ValidationError as exc:
        errors.extend(format_errors(exc, annotation, path))
        return None


def format_errors(exc: ValidationError, root: Any, path: str) -> list[str]:
    """One line per pydantic error, in the stack's format, with did-you-mean for keys."""
    out = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        where = _join(path, loc)
        kind = err["type"]
        found = (err.get("ctx") or {}).get("error")
        if isinstance(found, Problems):
            out.extend(problem_lines(where, found))
        elif kind == "extra_forbidden":
            model = _model_at(root, loc[:-1])
            known = aliases(model) if model is not None else set()
            key = str(loc[-1])
            hint = _meaning(model, key) or suggest(key, known)
            out.append(f"{where}: unknown key{hint}; known keys: {', '.join(sorted(known))}")
        elif kind == "missing":
            out.append(f"{where}: missing; expected {_describe(root, loc)}")
        elif kind in ("model_type", "model_attributes_type") and (m := _model_at(root, loc)):
            # a scalar where a block of keys goes (`borrowingLimit: "8"`): name the keys
            keys = ", ".join(sorted(aliases(m)))
            out.append(problem(where, err.get("input"), f"a mapping with keys {keys}"))
        else:
            out.append(problem(where, err.get("input"), _expected(err)))
    return out


def problem_lines(path: str, problems: Problems) -> list[str]:
    """One line per item of `problems`, each at `path` + its own loc."""
    out = []
    for loc, value, expected in problems.items:
        where = _join(path, loc)
        out.append(
            f"{where}: missing; expected {expected}"
            if value is MISSING
            else problem(where, value, expected)
        )
    return out


# ---------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _join(path: str, loc: tuple[Any, ...]) -> str:
    out = path
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before", "function-wrap", "tagged-union"):
            continue
        elif not out or out.endswith(":"):
            out += str(part)
        else:
            out += f".{part}"
    return out


def _expected(err: Mapping[str, Any]) -> str:
    """What is valid, from a pydantic error: our own messages verbatim, pydantic's reworded."""
    msg = str(err.get("msg", ""))
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    if kind == "value_error":
        # validators raise ValueError("<what is valid>")
        return msg.removeprefix("Value error, ")
    if kind == "assertion_error":
        return msg.removeprefix("Assertion failed, ")
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<="}
    if kind in bounds or kind == "less_than":
        limit = next(iter(ctx.values()), "?")
        return f"a value {bounds.get(kind, '<')} {limit}"
    if kind == "literal_error":
        return "one of " + str(ctx.get("expected", msg)).replace(" or ", ", ")
    if kind.startswith("int_"):
        return "an integer"
    if kind.startswith("bool_"):
        return "true or false"
    if kind.startswith("float_"):
        return "a number"
    if kind.startswith("string_pattern"):
        return f"a string matching {ctx.get('pattern')!r}"
    if kind in ("string_type",):
        return "a string"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "a mapping"
    if kind in ("list_type", "tuple_type"):
        return "a list"
    text = msg.removeprefix("Input should be ").removeprefix("Value error, ")
    return text[:1].lower() + text[1:]


def _describe(root: Any, loc: tuple[Any, ...]) -> str:
    model = _model_at(root, loc[:-1])
    if model is not None:
        for name, f in model.model_fields.items():
            if (f.alias or name) == loc[-1] or name == loc[-1]:
                return f.description or "a value"
    return "a value"


def _model_at(root: Any, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Follow `loc` (keys and list indexes) through the annotations from `root` to a model."""
    current: Any = root
    for part in loc:
        current = _unwrap(current, isinstance(part, int))
        if isinstance(part, int):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next(
                (
                    f
                    for name, f in current.model_fields.items()
                    if (f.alias or name) == part or name == part
                ),
                None,
            )
            if field is None:
                return None
            current = field.annotation
        elif typing.get_origin(current) in (dict, Mapping):
            current = typing.get_args(current)[1]
    current = _unwrap(current, False)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, index: bool) -> Any:
    """Optional[X] -> X, Annotated[X, ...] -> X; with `index`, list/tuple[X] -> X."""
    while True:
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Annotated:
            annotation = args[0]
        elif origin in (typing.Union, types.UnionType):
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else args[0]
        elif index and origin in (list, tuple, frozenset, set):
            annotation = args[0]
            index = False
        else:
            return annotation
