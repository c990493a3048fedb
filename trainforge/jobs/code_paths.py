"""The absolute paths a job's shipped code names, and which of them it writes: a static reader.

Why: an imported job's code keeps the paths of the pod it came from. Where the import drops
the volume mounted there (a PersistentVolumeClaim at /checkpoints that the entry does not
declare), the code still opens `/checkpoints/done` for writing, and in the platform's pod
that path is on the container's read-only root file system: the write fails
(FileNotFoundError, or EROFS where the image has the folder) after the job was admitted and
its GPUs paid for. The importer names the uses under each mount it drops (file:line) and
under the code mount it moves to /workspace (the code's own `/code/cfg.yaml`), run-local
names the code's literal pod paths on the volumes it stands in for (it rewrites arguments and
env values only: jobs/local.py pod_only_paths), and the plan flags a write that lies on no
writable volume of the pod (plan/checks/pod_scripts.py): all with this one reader.

Python is read with `ast` (never run): a string literal, `os.path.join`/`posixpath.join` of
literals, `pathlib.Path(literal) / "x"`, the literal head of an f-string, and a name the file
binds exactly once to one of these. A write is such a path given to `open(..., "w"/"a"/"x"/
"+")`, `Path.write_text/write_bytes/touch/mkdir/open("w")`, `os.makedirs`/`os.mkdir`,
`shutil.copy*`/`move`'s destination, `torch.save`'s file. Shell text (`.sh`, or a `#!` line
naming a shell) counts a path after `>`/`>>`, and `mkdir`, `touch`, `tee`'s operands as
written. Anything else is a use (a read, or unknown); a computed path is not guessed at.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class PathUse:
    """One absolute path the code names: where (file:line), the path, whether it writes."""

    where: str
    path: str
    writes: bool

    def describe(self) -> str:
        return f"{self.where} {'writes' if self.writes else 'uses'} {self.path}"


def under(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it."""
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def path_uses(files: Iterable[tuple[str, str]]) -> list[PathUse]:
    """Every absolute path the shipped `files` ((path, text)) name, in file and line order,
    each (file, line, path) once, a write winning over a use."""
    out: list[PathUse] = []
    for name, text in files:
        if name.endswith(".py"):
            found = _python(name, text)
        elif name.endswith(".sh") or re.match(r"#!.*\b(ba|da|z)?sh\b", text):
            found = _shell(name, text)
        else:
            continue
        seen: dict[tuple[str, str], PathUse] = {}
        for u in found:
            key = (u.where, u.path)
            if key not in seen or (u.writes and not seen[key].writes):
                seen[key] = u
        out += sorted(seen.values(), key=lambda u: (int(u.where.rsplit(":", 1)[1]), u.path))
    return out


_JOIN = {"os.path.join", "posixpath.join", "path.join"}
_PATH = {"Path", "pathlib.Path", "PosixPath", "pathlib.PosixPath"}
_WRITE_METHODS = {"write_text", "write_bytes", "touch", "mkdir"}
_WRITE_FIRST = {"os.makedirs", "os.mkdir", "makedirs", "mkdir"}
_WRITE_SECOND = {
    "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
    "torch.save", "save",
}  # fmt: skip


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _python(name: str, text: str) -> list[PathUse]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    # names bound exactly once, to a literal path (module-level or local alike)
    binds: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                binds.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            binds.setdefault(node.target.id, []).append(node.value or node)
    once = {k: v[0] for k, v in binds.items() if len(v) == 1}

    def value(node: ast.AST | None, depth: int = 0) -> str | None:
        """The path `node` evaluates to, where it is literal; None otherwise."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in once:
            return value(once[node.id], depth + 1)
        if isinstance(node, ast.JoinedStr) and node.values:  # f"/ckpt/{step}": its head
            head = node.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                return posixpath.dirname(head.value) if "/" in head.value else None
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = value(node.left, depth + 1), value(node.right, depth + 1)
            return posixpath.join(left, right) if left is not None and right is not None else None
        if isinstance(node, ast.Call):
            fn = _dotted(node.func)
            if fn in _JOIN and node.args and not node.keywords:
                parts = [value(a, depth + 1) for a in node.args]
                return posixpath.join(*parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
            if fn in _PATH and len(node.args) == 1:
                return value(node.args[0], depth + 1)
        return None

    def absolute(node: ast.AST | None) -> str | None:
        v = value(node)
        if v is None or not v.startswith("/") or v.startswith("//"):
            return None
        return posixpath.normpath(v)

    found: list[PathUse] = []
    inner: set[int] = set()  # nodes inside a path already counted (the "/ckpt" of a join)

    def add(node: ast.AST, path: str, writes: bool) -> None:
        found.append(PathUse(f"{name}:{getattr(node, 'lineno', 0)}", path, writes))
        inner.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = _dotted(node.func)
        target: ast.AST | None = None
        if fn in ("open", "io.open", "builtins.open") and node.args:
            mode = node.args[1] if len(node.args) > 1 else None
            mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
            if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
                target = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS:
            target = node.func.value
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "open":
            mode = node.args[0] if node.args else None
            mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
            if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
                target = node.func.value
        elif fn in _WRITE_FIRST and node.args:
            target = node.args[0]
        elif fn in _WRITE_SECOND and len(node.args) > 1:
            target = node.args[1]
        if target is not None and (path := absolute(target)) is not None:
            add(target, path, True)
    # a literal that is a piece of a computed string (`root + "/x"`, an f-string's part) is
    # no path of its own
    pieces = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr | ast.FormattedValue)
        or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod))
        for child in ast.iter_child_nodes(node)
    }
    for node in ast.walk(tree):
        if id(node) in inner or id(node) in pieces or not isinstance(node, ast.expr):
            continue
        if isinstance(node, ast.Name):
            continue  # its literal is counted where it is bound
        if (path := absolute(node)) is not None:
            add(node, path, False)
    return found


_SHELL_PATH = re.compile(r"""(?<![\w$.-])(/[\w.@+-]+(?:/[\w.@+-]*)*)""")
_SHELL_WRITE = re.compile(r"""(?:>>?|\b(?:mkdir|touch|tee)(?:\s+-[\w-]+)*)\s*["']?(/[\w.@+/-]*)""")


def _shell(name: str, text: str) -> list[PathUse]:
    found: list[PathUse] = []
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        writes = {posixpath.normpath(m.group(1)) for m in _SHELL_WRITE.finditer(code)}
        for m in _SHELL_PATH.finditer(code):
            path = posixpath.normpath(m.group(1))
            found.append(PathUse(f"{name}:{i}", path, path in writes))
    return found
