"""The import graph of `trainforge/` has no cycle and follows the layers of docs/architecture.md.

Why: modules that import each other can only be understood, tested and moved together, and a
lazy import inside a function hides such a loop until a refactor turns it into an ImportError
at run time. So every import counts here: module level, inside functions, under
TYPE_CHECKING, and `importlib.import_module` of a literal (or of a registry string such as
`"trainforge.live.cli:status_main"` in a module that calls `import_module`).

Layers, lowest first (a package may import only those to its left):

    core  <-  training  <-  jobs  <-  platform  <-  plan, live, local, cli, demo, report, ...

`core` is stdlib only. `training` is shipped into pods with `core` alone (jobs/codeship.py
bundles `trainforge/__init__.py`, `trainforge/core/` with its data files and
`trainforge/training/`), so it imports core and no other trainforge package.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]

# package -> the trainforge packages it may import (besides itself and the import-free root)
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "training": {"core"},
    "stack": {"core", "training"},
    "jobs": {"core", "training", "stack"},
    "platform": {"core", "training", "stack", "jobs"},
}
_REGISTRY = re.compile(r"^trainforge(\.\w+)+(:\w+)?$")


def module_files(root: pathlib.Path, package: str = "trainforge") -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py under `root/package`."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: pathlib.Path, package: str = "trainforge") -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, for imports of `package` anywhere in a file."""
    files = module_files(root, package)

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        edges: dict[str, int] = {}
        source = path.read_text()
        tree = ast.parse(source, str(path))
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]

        def add(target: str | None, line: int, mod: str = mod, edges: dict = edges) -> None:
            if target and target != mod:
                edges.setdefault(target, line)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        add(resolve(alias.name), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                if name.split(".")[0] != package:
                    continue
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    full = f"{name}.{alias.name}"
                    add(full if full in files else resolve(name), node.lineno)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "import_module" in source
                and _REGISTRY.match(node.value)
            ):
                add(resolve(node.value.partition(":")[0]), node.lineno)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]] | dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def package_of(module: str) -> str:
    """`trainforge.jobs.estimate.facts` -> `jobs`; a top-level module is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for mod, edges in graph.items():
        for target in edges:
            a, b = package_of(mod), package_of(target)
            if a != b and b:
                out[a].add(b)
    return dict(out)


GRAPH = import_graph(ROOT)


def test_no_module_is_in_an_import_cycle():
    assert cycles(GRAPH) == [], "modules that import each other (move the shared part down)"


def test_no_package_is_in_an_import_cycle():
    assert cycles(package_graph(GRAPH)) == []


def test_packages_import_only_the_layers_below():
    wrong = [
        f"{GRAPH_FILES[mod].relative_to(ROOT)}:{line} imports {target}"
        for mod, edges in sorted(GRAPH.items())
        for target, line in sorted(edges.items())
        if package_of(mod) in LAYERS
        and package_of(target) not in LAYERS[package_of(mod)] | {package_of(mod), ""}
    ]
    assert wrong == [], "see the layers in docs/architecture.md"


def third_party_imports(package: str, allowed: set[str]) -> list[str]:
    """`file:line imports name` for each import in `package` of neither the standard library,
    trainforge nor `allowed`."""
    found = []
    for mod, path in GRAPH_FILES.items():
        if package_of(mod) != package:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {"trainforge", *allowed}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    return found


def test_core_imports_the_standard_library_only():
    assert third_party_imports("core", set()) == []


GRAPH_FILES = module_files(ROOT)


def test_the_stack_model_imports_pydantic_and_core_only():
    """The schema command and the docs generator read the model without Pulumi or AWS (the
    stack file reader, stack/file.py, adds PyYAML)."""
    assert third_party_imports("stack", {"pydantic", "yaml"}) == []


def test_the_check_sees_a_cycle_through_an_import_inside_a_function(tmp_path):
    """The checker itself: a loop closed only by a lazy, relative import is still a loop."""
    pkg = tmp_path / "trainforge"
    (pkg / "jobs").mkdir(parents=True)
    (pkg / "platform").mkdir()
    for d in (pkg, pkg / "jobs", pkg / "platform"):
        (d / "__init__.py").write_text("")
    (pkg / "jobs" / "a.py").write_text("from trainforge.jobs import b\n")
    (pkg / "jobs" / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "platform" / "p.py").write_text("import trainforge.jobs.a\n")
    (pkg / "jobs" / "c.py").write_text(
        "import importlib\nT = 'trainforge.platform.p:main'\nimportlib.import_module(T)\n"
    )
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["trainforge.jobs.a", "trainforge.jobs.b"]]
    assert graph["trainforge.jobs.c"] == {"trainforge.platform.p": 2}
    assert cycles(package_graph(graph)) == [["jobs", "platform"]]
