"""The components' argument types (TrainingPlatform, TrainingJob), generated from the stack
model.

Why: other Pulumi languages see the component's arguments through the schema the component
provider host infers from TypedDicts (their fields, types and the docstring below each
field). Hand-written copies of the stack model drifted from it and needed a test to catch
that; these are built from the pydantic models themselves (`generate`), so a key added to
the model is an argument, with the model's description, the next time the package loads.

The provider host reads field docstrings from the classes' source (`inspect.getsource`), so
the classes are generated as Python source, registered with `linecache` under a name of
their own, and executed: they are ordinary TypedDicts whose source can be read back.
Argument names are snake_case: the platform's are its stack keys' (`camel` turns them back),
a job's are the model's attribute names or its one-word keys (`by_attribute`: the job model
takes both). A
model key that is a block of its own at the top may be flattened (the endpoint's keys are
top-level arguments).
"""

from __future__ import annotations

import keyword
import linecache
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.alias_generators import to_snake
from pydantic.fields import FieldInfo

# argument names whose camelCase is not the plain one
SPECIAL = {"root_volume_gib": "rootVolumeGiB", "min_bus_bandwidth_g_bps": "minBusBandwidthGBps"}


def camel(key: str) -> str:
    """The stack key of an argument name."""
    if key in SPECIAL:
        return SPECIAL[key]
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def arg_name(attr: str, alias: str) -> str:
    """The argument name of a model field: the one whose camelCase is its stack key."""
    for name in (attr, to_snake(alias)):
        if camel(name) == alias:
            return name
    raise ValueError(f"no argument name for stack key {alias!r} (add it to SPECIAL)")


class _Source:
    """The classes generated so far, as source, dependencies first."""

    def __init__(self, names: Mapping[type[BaseModel], str], by_attribute: bool) -> None:
        self.names = dict(names)
        self.by_attribute = by_attribute
        self.done: set[str] = set()
        self.lines: list[str] = ["from typing import TypedDict", ""]

    def typed(
        self,
        model: type[BaseModel],
        name: str | None = None,
        doc: str | None = None,
        fields: Iterable[tuple[str, FieldInfo]] | None = None,
    ) -> str:
        name = name or self.names.get(model) or f"{model.__name__}Args"
        if name in self.done:
            return name
        self.done.add(name)
        body = []
        for arg, info in fields if fields is not None else _fields(model, self.by_attribute):
            body.append(f"    {arg}: {self.annotation(info.annotation, f'{name}.{arg}')}")
            if info.description:
                body.append(f"    {_docstring(info.description)}")
        head = [f"class {name}(TypedDict, total=False):"]
        if doc or model.__doc__:
            head.append(f"    {_docstring(doc or _first_paragraph(model.__doc__ or ''))}")
            head.append("")
        self.lines += [*head, *(body or ["    pass"]), "", ""]
        return name

    def annotation(self, ann: Any, where: str) -> str:
        origin = typing.get_origin(ann)
        args = typing.get_args(ann)
        if origin is typing.Annotated:
            return self.annotation(args[0], where)
        if origin in (typing.Union, types.UnionType):
            options = [a for a in args if a is not type(None)]
            if len(options) == 1:
                return self.annotation(options[0], where)
        elif origin is Literal:
            kinds = {type(v) for v in args}
            if len(kinds) == 1:
                return kinds.pop().__name__
        elif origin in (tuple, list, set, frozenset):
            items = [a for a in args if a is not Ellipsis]
            pair = typing.get_args(items[0]) if len(items) == 1 else ()
            if typing.get_origin(items[0]) is tuple and len(pair) == 2 and Ellipsis not in pair:
                return f"dict[str, {self.annotation(pair[1], where)}]"  # (key, value) pairs
            if len(items) == 1:
                return f"list[{self.annotation(items[0], where)}]"
        elif origin is dict:
            return f"dict[str, {self.annotation(args[1], where)}]"
        elif isinstance(ann, type) and issubclass(ann, BaseModel):
            return self.typed(ann)
        elif ann in (str, int, float, bool):
            return ann.__name__
        elif isinstance(ann, _Named):
            return ann.name
        raise TypeError(f"{where}: no argument type for {ann!r}")


class _Named:
    """An annotation by the name of a type written by hand (`generate`'s `given`)."""

    def __init__(self, name: str) -> None:
        self.name = name


def attribute_arg(attr: str, alias: str) -> str:
    """A job argument's name: its stack key when that is one snake_case word (`dir`), else
    the model's attribute (`keep_last`, `async_save`: `async` is a Python keyword)."""
    one_word = alias.isidentifier() and not keyword.iskeyword(alias) and to_snake(alias) == alias
    return alias if one_word else attr


def _name(attr: str, f: FieldInfo, by_attribute: bool) -> str:
    alias = f.alias or attr
    return attribute_arg(attr, alias) if by_attribute else arg_name(attr, alias)


def _fields(model: type[BaseModel], by_attribute: bool) -> list[tuple[str, FieldInfo]]:
    return [(_name(n, f, by_attribute), f) for n, f in model.model_fields.items()]


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def _docstring(text: str) -> str:
    return repr(" ".join(text.split()))


def generate(
    model: type[BaseModel],
    name: str,
    *,
    module: str,
    doc: str,
    names: Mapping[type[BaseModel], str],
    flatten: Iterable[str] = (),
    extra: Iterable[tuple[type[BaseModel], str]] = (),
    exclude: Iterable[str] = (),
    given: Mapping[str, tuple[str, type]] | None = None,
    by_attribute: bool = False,
) -> dict[str, type]:
    """TypedDicts for `model` (as `name`) and every model it nests (named by `names`, else
    `<Model>Args`), in a module `module` of their own: class name -> class. `flatten`: keys
    of `model` whose block's keys are top-level arguments; `extra`: (model, attribute) of
    further top-level arguments; `exclude`: attributes that are no argument; `given`:
    further top-level arguments of a type written by hand (argument -> (docstring, type))."""
    src = _Source(names, by_attribute)
    flat, left_out = set(flatten), set(exclude)
    fields: list[tuple[str, FieldInfo]] = []
    for n, f in model.model_fields.items():
        if n in left_out:
            continue
        if n in flat:
            nested = typing.get_args(f.annotation) or (f.annotation,)
            block = next(a for a in nested if isinstance(a, type) and issubclass(a, BaseModel))
            fields += _fields(block, by_attribute)
        else:
            fields.append((_name(n, f, by_attribute), f))
    for other, attr in extra:
        f = other.model_fields[attr]
        fields.append((arg_name(attr, f.alias or attr), f))
    hand = dict(given or {})
    for arg, (text, typ) in hand.items():  # annotated by the type's name, bound below
        fields.append((arg, FieldInfo(annotation=_Named(typ.__name__), description=text)))
    src.typed(model, name, doc, fields)
    text = "\n".join(src.lines)
    filename = f"<generated {module}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    mod = types.ModuleType(module, "Generated from the stack model (component_args.generate).")
    mod.__file__ = filename
    sys.modules[module] = mod
    mod.__dict__.update({typ.__name__: typ for _, typ in hand.values()})
    exec(compile(text, filename, "exec", dont_inherit=True), mod.__dict__)  # noqa: S102 - our own generated source
    return {n: getattr(mod, n) for n in src.done}
