"""The shipped files a job's entry actually runs: its entry file and what it imports,
transitively, within the bundle.

Why: a fact such as "the code starts trainforge's Watchdog" or "runs its S3 mirror" is about
the code the pods execute, not about every file that happens to sit in the shipped folder. A
Pulumi program beside the script (it imports trainforge.jobs) is shipped too but never runs
in a pod; reading it silenced the hangTimeout and s3Mirror warnings for a script that never
imports trainforge (review, wave 20).

Imports are read from the source (ast, never run) and resolved as Python would find them in
the pod: the script's own folder (sys.path[0]) and the shipped root (the working directory,
first on PYTHONPATH), packages through their `__init__.py`, relative imports from the file's
package. Imports inside functions or `try` blocks count (they may run); a dynamic import
(importlib, __import__) cannot be read and is not followed.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterable

from trainforge.stack.jobs import EntrypointSpec


def _module_files(dotted: str, roots: Iterable[str], have: set[str]) -> list[str]:
    """The shipped files `import dotted` executes, from the first root that holds its top
    module (as sys.path is searched): each package's __init__.py along the way and the
    module itself. None where it is not shipped (the standard library, an installed one)."""
    parts = dotted.split(".")
    for root in roots:
        top = posixpath.join(root, parts[0])
        if f"{top}.py" not in have and not any(p.startswith(f"{top}/") for p in have):
            continue
        found: list[str] = []
        for i in range(1, len(parts) + 1):
            base = posixpath.join(root, *parts[:i])
            if f"{base}/__init__.py" in have:
                found.append(f"{base}/__init__.py")
            elif f"{base}.py" in have:
                found.append(f"{base}.py")
                break
            elif not any(p.startswith(f"{base}/") for p in have):
                break  # not shipped below here (an attribute, or a namespace package's end)
        return found
    return []


def _imported(path: str, text: str, roots: list[str], have: set[str]) -> list[str]:
    """The shipped files one file's imports reach directly."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out += _module_files(a.name, roots, have)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's package, `level` folders up
                base = posixpath.dirname(path)
                for _ in range(node.level - 1):
                    base = posixpath.dirname(base)
                dotted = [*base.split("/"), *(node.module or "").split(".")]
                dotted = [d for d in dotted if d]
                search = [""]
            else:
                dotted, search = (node.module or "").split("."), roots
            if not dotted:
                continue
            module = ".".join(dotted)
            out += _module_files(module, search, have)
            for a in node.names:  # `from pkg import sub` imports the submodule sub
                out += _module_files(f"{module}.{a.name}", search, have)
    return out


def entry_files(
    entry: EntrypointSpec | None, files: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """(path, text) of the shipped `files` the entry runs: the entry file (a script's or a
    function's, a module's own file and its packages) and every shipped file it imports,
    transitively. All of `files` where no entry file can be named (a `command`, or an entry
    the files do not hold): nothing is known to be unused there."""
    files = list(files)
    texts = dict(files)
    have = set(texts)
    if entry is None:
        return files
    if entry.kind in ("script", "function") and entry.entry_file in have:
        start = [entry.entry_file]
        roots = list(dict.fromkeys([posixpath.dirname(entry.entry_file), ""]))
    elif entry.kind == "module" and entry.module:
        start = _module_files(entry.module, [""], have)
        main = f"{entry.module.replace('.', '/')}/__main__.py"
        start += [main] if main in have else []
        roots = [""]
    else:
        return files
    if not start:
        return files
    seen: list[str] = []
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in seen or path not in have:
            continue
        seen.append(path)
        todo += _imported(path, texts[path], roots, have)
    return [(p, texts[p]) for p in sorted(seen)]
