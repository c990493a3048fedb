"""Lazy star-imports for the Pulumi SDKs' generated service packages, for the offline plan.

`pulumi_aws.ec2/__init__.py` (pulumi_aws 7.51.1) is ~180 `from .x import *` lines, one per
resource or function module; `pulumi_kubernetes.core.v1` is ~50. prod reads 15 of ec2's, yet
importing the package executes them all (docs/performance.md, "Wave 19, plan prod").
`install()` loads such packages with the same `__init__` minus those lines, and resolves a
name the first time it is read (PEP 562 module `__getattr__`) by importing the one module
that star-import would have taken it from (the last one whose `__all__` names it). Any other
line of `__init__` (e.g. `from . import outputs`) runs as written. A package whose modules'
`__all__` cannot be read is loaded as usual, whole.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pathlib
import re
import sys
import types
from collections.abc import Sequence
from typing import Any

ROOTS = ("pulumi_aws.", "pulumi_kubernetes.")
_STAR = re.compile(r"^from \.(\w+) import \*$", re.M)
_ALL = re.compile(r"^__all__ = \[(.*?)\]", re.M | re.S)
_NAME = re.compile(r"'(\w+)'")


def _all(path: pathlib.Path) -> list[str] | None:
    """The names in the module's literal `__all__` (near its top: read until it closes)."""
    text = ""
    with path.open(encoding="utf-8") as f:
        while block := f.read(1 << 16):
            text += block
            if found := _ALL.search(text):
                return _NAME.findall(found.group(1))
    return None


def _exports(folder: pathlib.Path, modules: list[str]) -> dict[str, str] | None:
    """Each name the star-imports bind -> the module it comes from (the last one wins, as in
    the eager `__init__`); None when a module has no literal `__all__` to read."""
    owner: dict[str, str] = {}
    for mod in modules:
        path = folder / f"{mod}.py"
        names = _all(path) if path.is_file() else None
        if names is None:
            return None
        owner.update(dict.fromkeys(names, mod))
    return owner


class _Package(types.ModuleType):
    """A lazy package: the import system's binding of a submodule (`import pkg.get_vpc`)
    never hides the name the module exports (`get_vpc`, a function), as after the eager
    `__init__`, whose star-imports ran after every such binding."""

    _lazy_exports: dict[str, str]

    def __setattr__(self, name: str, value: Any) -> None:
        if not (isinstance(value, types.ModuleType) and name in self._lazy_exports):
            super().__setattr__(name, value)


class _Loader(importlib.abc.Loader):
    """Runs a generated `__init__` without its star-imports; a module `__getattr__` does them
    one module at a time, on first use. Read when the package is executed, not when found:
    pulumi's own `lazy_import` finds every subpackage up front."""

    def __init__(self, origin: str, eager: importlib.abc.Loader) -> None:
        self.origin, self.eager = origin, eager

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        source = pathlib.Path(self.origin).read_text(encoding="utf-8")
        modules = _STAR.findall(source)
        owner = _exports(pathlib.Path(self.origin).parent, modules) if modules else None
        if owner is None:
            self.eager.exec_module(module)
            return
        package = module.__name__

        def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562
            mod = owner.get(name)
            if mod is None:
                if name in modules:  # a submodule, bound by its own eager import
                    return importlib.import_module(f"{package}.{name}")
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            sub = importlib.import_module(f"{package}.{mod}")
            for exported, src in owner.items():
                if src == mod:
                    setattr(module, exported, getattr(sub, exported))
            return module.__dict__[name]

        module.__dict__.update(_lazy_exports=owner, __getattr__=__getattr__)
        module.__class__ = _Package
        body = _STAR.sub("", source)
        exec(compile(body, self.origin, "exec"), module.__dict__)  # noqa: S102 - the package's own code


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(ROOTS):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not str(spec.origin).endswith("__init__.py"):
            return spec
        spec.loader = _Loader(str(spec.origin), spec.loader)
        return spec


def install() -> None:
    """Put the lazy loader first on `sys.meta_path` (once); packages already imported stay."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
