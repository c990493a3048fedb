"""Ship the training runtime to pods in a ConfigMap, so a stock PyTorch image can run it.

The ConfigMap holds `trainforge/__init__.py` and every `trainforge/training/**/*.py`. It is
immutable and named by a hash of its content: a code change creates a new ConfigMap (and
so a new PyTorchJob spec, which replaces the job), and a running job never sees its code
change under it. ConfigMap keys cannot contain '/', so each file gets a flat key and the
volume's `items` map keys back to paths below the mount, which goes on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from trainforge.jobs.errors import JobConfigError

# The API server rejects objects over 1 MiB (etcd's request limit); keep headroom for
# metadata and the managed-fields bookkeeping server-side apply adds.
CONFIGMAP_LIMIT = 1024 * 1024
CONFIGMAP_BUDGET = CONFIGMAP_LIMIT - 64 * 1024
CODE_MOUNT = "/opt/trainforge/src"


@dataclass(frozen=True)
class CodeBundle:
    """Runtime sources: `files` maps a relative path (trainforge/training/x.py) to its text."""

    files: tuple[tuple[str, str], ...]

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for path, text in self.files:
            h.update(path.encode() + b"\0" + text.encode() + b"\0")
        return h.hexdigest()

    @property
    def size(self) -> int:
        return sum(len(path) + len(text.encode()) for path, text in self.files)

    def data(self) -> dict[str, str]:
        """ConfigMap data: flat key -> file text."""
        return {key_for(path): text for path, text in self.files}

    def items(self) -> list[dict[str, str]]:
        """Volume items: flat key -> relative path under the mount."""
        return [{"key": key_for(path), "path": path} for path, _ in self.files]

    def configmap_name(self, job_name: str) -> str:
        return f"{job_name}-code-{self.digest[:10]}"


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
    paths = [root / "__init__.py", *sorted(runtime.rglob("*.py"))]
    files = tuple(
        (f"{root.name}/{p.relative_to(root).as_posix()}", p.read_text(encoding="utf-8"))
        for p in paths
        if "__pycache__" not in p.parts
    )
    bundle = CodeBundle(files=files)
    check_size(bundle)
    return bundle


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
    bundle: CodeBundle, job_name: str, namespace: str, labels: dict[str, str]
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bundle.configmap_name(job_name),
            "namespace": namespace,
            "labels": labels,
        },
        "immutable": True,
        "data": bundle.data(),
    }
