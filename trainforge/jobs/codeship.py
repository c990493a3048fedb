"""Ship code to pods in ConfigMaps, so a stock PyTorch image can run it.

Two bundles, each its own ConfigMap:

* the runtime (`collect`): `trainforge/__init__.py`, the stdlib-only core it imports
  (`trainforge/core/**/*.py` and its data files, the GPU/instance catalog among them) and every
  `trainforge/training/**/*.py`,
  mounted at CODE_MOUNT on PYTHONPATH: the bundled runtime, and the library user code imports
  (`from trainforge.training import CheckpointManager`);
* the user's code (`collect_dir`): a job's `entrypoint.codeDir` (a script's own directory by
  default), mounted read-only at USER_CODE_MOUNT, the container's working directory.

Each ConfigMap is immutable and named by a hash of its content: a code change creates a new
ConfigMap (and so a new PyTorchJob spec, which replaces the job), and a running job never sees
its code change under it. ConfigMap keys cannot contain '/', so each file gets a flat key and
the volume's `items` map keys back to paths below the mount. Files that are not UTF-8 text go
into `binaryData`.

Size: the API server refuses a ConfigMap whose `data` plus `binaryData` values exceed 1 MiB
(`MaxSecretSize`, counted in raw bytes), and etcd stores the whole object (metadata and keys
too) in one request of at most 1.5 MiB. The budget below keeps 64 KiB of headroom for keys and
metadata; a larger directory is refused at preview with its size and largest files, and the
fix (exclude what is not needed, or bake the code into an image).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from trainforge.core.errors import JobConfigError

# The API server rejects objects over 1 MiB (etcd's request limit); keep headroom for
# metadata and the managed-fields bookkeeping server-side apply adds.
CONFIGMAP_LIMIT = 1024 * 1024
CONFIGMAP_BUDGET = CONFIGMAP_LIMIT - 64 * 1024
CODE_MOUNT = "/opt/trainforge/src"
# The user's shipped directory: where seed-style jobs keep their code (the PyTorch images'
# working directory), read-only.
USER_CODE_MOUNT = "/workspace"
_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")

# Never shipped from a user's directory: version control, caches, virtual environments, build
# metadata, run-local's outputs, and every hidden file or directory (.env, .netrc, .aws/ may
# hold secrets, and a ConfigMap is readable by everyone who can read the namespace).
DEFAULT_EXCLUDES = (
    ".*",
    "__pycache__",
    "*.pyc",
    "*.pyo",
    "*.egg-info",
    "node_modules",
    "runs",
)


@dataclass(frozen=True)
class CodeBundle:
    """Sources to ship: `files` maps a relative path (trainforge/training/x.py) to its text;
    `binary` holds files that are not UTF-8 text; `executable` the paths shipped 0555."""

    files: tuple[tuple[str, str], ...]
    binary: tuple[tuple[str, bytes], ...] = ()
    executable: frozenset[str] = frozenset()

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for path, text in self.files:
            h.update(path.encode() + b"\0" + text.encode() + b"\0")
        for path, blob in self.binary:
            h.update(b"\1" + path.encode() + b"\0" + blob + b"\0")
        for path in sorted(self.executable):
            h.update(b"\2" + path.encode() + b"\0")
        return h.hexdigest()

    @property
    def size(self) -> int:
        return sum(len(path) + len(text.encode()) for path, text in self.files) + sum(
            len(path) + len(blob) for path, blob in self.binary
        )

    def sizes(self) -> list[tuple[str, int]]:
        """(path, bytes) of every file, largest first."""
        out = [(p, len(t.encode())) for p, t in self.files] + [(p, len(b)) for p, b in self.binary]
        return sorted(out, key=lambda x: (-x[1], x[0]))

    @property
    def paths(self) -> list[str]:
        return sorted([p for p, _ in self.files] + [p for p, _ in self.binary])

    def data(self) -> dict[str, str]:
        """ConfigMap data: flat key -> file text."""
        return {key_for(path): text for path, text in self.files}

    def binary_data(self) -> dict[str, str]:
        """ConfigMap binaryData: flat key -> base64 of the file's bytes."""
        return {key_for(p): base64.b64encode(b).decode("ascii") for p, b in self.binary}

    def items(self) -> list[dict[str, object]]:
        """Volume items: flat key -> relative path under the mount (sorted by path)."""
        out: list[dict[str, object]] = []
        for path in self.paths:
            item: dict[str, object] = {"key": key_for(path), "path": path}
            if path in self.executable:
                item["mode"] = 0o555
            out.append(item)
        return out

    def configmap_name(self, job_name: str, role: str = "code") -> str:
        return f"{job_name}-{role}-{self.digest[:10]}"

    def write_to(self, root: Path) -> None:
        """Materialise the files under `root` as the volume shows them: read-only."""
        for path, text in self.files:
            _write(root / path, text.encode(), path in self.executable)
        for path, blob in self.binary:
            _write(root / path, blob, path in self.executable)
        for d in sorted({p for p in root.rglob("*") if p.is_dir()}, reverse=True):
            d.chmod(0o555)
        root.chmod(0o555)


def _write(target: Path, blob: bytes, executable: bool) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(blob)
    target.chmod(0o555 if executable else 0o444)


def key_for(path: str) -> str:
    """A valid ConfigMap key ([-._a-zA-Z0-9]+) for a relative file path."""
    return path.replace("/", "--")


def collect(package_root: Path | None = None) -> CodeBundle:
    """Bundle the runtime from `package_root` (the `trainforge` package directory)."""
    root = package_root or Path(__file__).resolve().parent.parent
    runtime = root / "training"
    if not runtime.is_dir():
        raise JobConfigError(
            "codeSource",
            str(runtime),
            "the bundled runtime (trainforge/training) is missing from this install; "
            "reinstall trainforge or use codeSource: image",
        )
    # core: the stdlib-only layer the runtime imports (the GPU/instance catalog and its data
    # file, the contract's names); nothing else of the package goes to pods.
    core = root / "core"
    core_files = [*core.rglob("*.py"), *core.glob("data/*.json")] if core.is_dir() else []
    paths = [root / "__init__.py", *sorted(core_files), *sorted(runtime.rglob("*.py"))]
    files = tuple(
        (f"{root.name}/{p.relative_to(root).as_posix()}", p.read_text(encoding="utf-8"))
        for p in paths
        if "__pycache__" not in p.parts
    )
    bundle = CodeBundle(files=files)
    check_size(bundle)
    return bundle


def _excluded(rel: str, name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in patterns)


def collect_dir(
    directory: Path,
    where: str,
    exclude: tuple[str, ...] = (),
    value: str | None = None,
    keep: str | None = None,
) -> CodeBundle:
    """Bundle a user's code directory (sorted, so the hash is stable), or raise naming `where`
    and `value` (the key's value as set: a script ships its directory); `keep`: the path of the
    entry script in it, which a size fix must never exclude.

    Skips DEFAULT_EXCLUDES, the `exclude` patterns (matched against a file's or directory's
    name and its path relative to `directory`) and any directory holding a `pyvenv.cfg`
    (a virtual environment by any name). Symbolic links to directories are not followed.
    """
    if not directory.is_dir():
        raise JobConfigError(
            where, str(directory), "no such directory (paths are relative to the project directory)"
        )
    patterns = DEFAULT_EXCLUDES + tuple(exclude)
    files: list[tuple[str, str]] = []
    binary: list[tuple[str, bytes]] = []
    executable: set[str] = set()
    for current, dirs, names in os.walk(directory):
        base = Path(current)
        rel_base = base.relative_to(directory).as_posix()
        rel_base = "" if rel_base == "." else rel_base + "/"
        dirs[:] = sorted(
            d
            for d in dirs
            if not _excluded(rel_base + d, d, patterns) and not (base / d / "pyvenv.cfg").exists()
        )
        for name in sorted(names):
            rel = rel_base + name
            if _excluded(rel, name, patterns):
                continue
            path = base / name
            if not path.is_file():
                continue  # sockets, fifos, broken links
            key = key_for(rel)
            if not _KEY_RE.match(key) or len(key) > 253:
                raise JobConfigError(
                    where,
                    rel,
                    "this file name cannot be a ConfigMap key (letters, digits, '-', '_', '.' "
                    "only, at most 253 with its path); rename it or add it to entrypoint.exclude",
                )
            blob = path.read_bytes()
            try:
                files.append((rel, blob.decode("utf-8")))
            except UnicodeDecodeError:
                binary.append((rel, blob))
            if os.access(path, os.X_OK):
                executable.add(rel)
    keys: dict[str, str] = {}
    for rel in sorted([p for p, _ in files] + [p for p, _ in binary]):
        if key_for(rel) in keys:
            raise JobConfigError(
                where, rel, f"maps to the same ConfigMap key as {keys[key_for(rel)]}; rename one"
            )
        keys[key_for(rel)] = rel
    if not keys:
        raise JobConfigError(where, str(directory), "nothing to ship: the directory is empty")
    bundle = CodeBundle(tuple(files), tuple(binary), frozenset(executable))
    if bundle.size > CONFIGMAP_BUDGET:
        largest = ", ".join(f"{p} ({_human(n)})" for p, n in bundle.sizes()[:3])
        shipped = "" if value is None else f"the directory it ships, {directory}, holds "
        raise JobConfigError(
            where,
            str(directory) if value is None else value,
            f"{shipped}{_human(bundle.size)} in {len(keys)} files: more than a ConfigMap can "
            f"ship ({_human(CONFIGMAP_BUDGET)}: the API server's limit is "
            f"{_human(CONFIGMAP_LIMIT)} per object, less room for its keys and metadata); "
            f"largest: {largest}. {_size_fix(bundle, tuple(exclude), keep)}",
        )
    return bundle


def _size_fix(bundle: CodeBundle, exclude: tuple[str, ...], keep: str | None) -> str:
    """The fix for a bundle over budget, checked: the exclude list that drops the fewest of its
    largest files (never `keep`, the entry script) to fit, with what it leaves as the same
    matcher (`_excluded`) computes it; else what excluding the three largest still leaves."""
    picked: list[str] = []
    for path, _ in bundle.sizes()[:3]:
        if path == keep:
            continue
        picked.append(path)  # shipped names are plain ([-._a-zA-Z0-9/]): each matches itself
        patterns = (*exclude, *picked)
        left = _size_after(bundle, DEFAULT_EXCLUDES + patterns)
        if left <= CONFIGMAP_BUDGET and (keep is None or not _excluded_path(keep, patterns)):
            listed = ", ".join(f'"{p}"' for p in patterns)
            return (
                f"If the job does not need {'it' if len(picked) == 1 else 'them'}, set "
                f"entrypoint.exclude: [{listed}] ({_human(left)} left to ship); else keep "
                "data on a volume, or bake the code into an image (image: ..., "
                "entrypoint.module or entrypoint.command)"
            )
    left = _size_after(bundle, DEFAULT_EXCLUDES + exclude + tuple(picked))
    return (
        f"Excluding even its largest files ({', '.join(picked) or 'none but the script'}) "
        f"leaves {_human(left)}: keep data on a volume, exclude whole directories the job "
        "does not need (entrypoint.exclude), or bake the code into an image (image: ..., "
        "entrypoint.module or entrypoint.command)"
    )


def _excluded_path(rel: str, patterns: tuple[str, ...]) -> bool:
    """Whether `collect_dir`'s walk skips `rel`: the file, or a directory above it, matches."""
    parts = rel.split("/")
    return any(_excluded("/".join(parts[: i + 1]), parts[i], patterns) for i in range(len(parts)))


def _size_after(bundle: CodeBundle, patterns: tuple[str, ...]) -> int:
    """The bundle's size (as `CodeBundle.size` counts it) less the files `patterns` skip."""
    sized = [(p, len(t.encode())) for p, t in bundle.files] + [
        (p, len(b)) for p, b in bundle.binary
    ]
    return sum(len(p) + n for p, n in sized if not _excluded_path(p, patterns))


def _human(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.2f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"


def check_size(bundle: CodeBundle) -> None:
    if bundle.size > CONFIGMAP_BUDGET:
        biggest = max(bundle.files, key=lambda f: len(f[1]))[0]
        raise JobConfigError(
            "codeSource",
            "configmap",
            f"the runtime is {bundle.size} bytes, over the {CONFIGMAP_BUDGET}-byte budget of a "
            f"ConfigMap (the API server's limit is {CONFIGMAP_LIMIT}); the largest file is "
            f"{biggest}. Build an image containing trainforge and set codeSource: image",
        )


def configmap_manifest(
    bundle: CodeBundle, job_name: str, namespace: str, labels: dict[str, str], role: str = "code"
) -> dict:
    out = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bundle.configmap_name(job_name, role),
            "namespace": namespace,
            "labels": labels,
        },
        "immutable": True,
        "data": bundle.data(),
    }
    if bundle.binary:
        out["binaryData"] = bundle.binary_data()
    return out
