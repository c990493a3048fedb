"""What this process's image can do for the features its job configured, said out loud.

Why: the platform can turn on MLflow, an S3 checkpoint mirror and EFA for a job, but each one
needs a piece of the image (mlflow, boto3, libfabric with the aws-ofi-nccl plugin). On an
image without the piece the feature does nothing, and a reviewer who read "MLflow: on" in the
plan never learns it. So the runtime's first lines state each feature as on or off with the
reason, and `python -m trainforge.training --self-check` prints the same lines and exits 1
when a configured feature cannot work (a pod's first command, an image build's last step).

Standard library only, and nothing here imports mlflow, boto3 or torch: the pieces are looked
up (`importlib.util.find_spec`, library files), so the check is cheap and cannot crash on a
broken optional package.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainforge.training import contract as c
from trainforge.training import versions

# Features the image must carry, by name (`--self-check mlflow,s3,efa`): checked as if the job
# had configured them, without a tracking URI, a bucket or EFA devices (an image build has none).
FEATURES = ("mlflow", "s3", "efa")

# Where the EFA installer and the AWS Deep Learning Containers put libfabric and the
# aws-ofi-nccl plugin (NCCL loads `libnccl-net*.so` from the library path).
LIBFABRIC_DIRS = ("/opt/amazon/efa/lib", "/opt/amazon/efa/lib64")
OFI_NCCL_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/aws-ofi-nccl/lib")
EFA_DEVICES = "/dev/infiniband/uverbs*"


@dataclass(frozen=True)
class Feature:
    """One line: `<name>: on <detail>` or `<name>: off (<why>)`; `ok` False when the job
    configured the feature and it cannot work."""

    name: str
    on: bool
    detail: str
    ok: bool = True
    # What "on"/"off" are called for this feature (NCCL net: AWS Libfabric / Socket).
    labels: tuple[str, str] = ("on", "off")

    def line(self) -> str:
        on, off = self.labels
        state = f"{on} {self.detail}" if self.on else f"{off} ({self.detail})"
        return f"{self.name}: {state}" + ("" if self.ok else " <- configured, cannot work")


def _installed(module: str) -> str | None:
    """The distribution version of an importable module, '' when importable without metadata,
    None when it is not installed."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):
        return None
    dist = {"mlflow": "mlflow-skinny"}.get(module, module)
    for name in (dist, module):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def _find(dirs: Sequence[str], pattern: str, env: Mapping[str, str]) -> str | None:
    extra = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    for d in (*extra, *dirs):
        hits = sorted(glob.glob(os.path.join(d, pattern)))
        if hits:
            return hits[0]
    return None


def mlflow_feature(env: Mapping[str, str], forced: bool = False) -> Feature:
    uri = env.get(c.MLFLOW_TRACKING_URI)
    version = _installed("mlflow")
    if not uri and not forced:
        return Feature("MLflow", False, f"{c.MLFLOW_TRACKING_URI} not set")
    if version is None:
        return Feature("MLflow", False, "mlflow not installed", ok=False)
    where = uri or "(no tracking URI here)"
    return Feature("MLflow", True, f"{where} (mlflow {version or 'installed'})")


def s3_feature(uri: str | None, forced: bool = False) -> Feature:
    version = _installed("boto3")
    if not uri and not forced:
        return Feature("S3 mirror", False, f"no --checkpoint-s3 / {c.CHECKPOINT_S3}")
    if version is None:
        return Feature("S3 mirror", False, "boto3 not installed", ok=False)
    return Feature(
        "S3 mirror", True, f"{uri or '(no bucket here)'} (boto3 {version or 'installed'})"
    )


def nccl_feature(env: Mapping[str, str], forced: bool = False) -> Feature:
    """Which network NCCL will use between nodes: the aws-ofi-nccl plugin over libfabric (EFA)
    when the plugin, libfabric and EFA devices are all there, else its TCP sockets."""
    wants_efa = env.get("FI_PROVIDER") == "efa"
    plugin = _find(OFI_NCCL_DIRS, "libnccl-net*.so*", env)
    fabric = _find(LIBFABRIC_DIRS, "libfabric.so*", env)
    devices = sorted(glob.glob(EFA_DEVICES))
    labels = ("AWS Libfabric", "Socket")
    missing = [
        what for what, have in (("aws-ofi-nccl plugin", plugin), ("libfabric", fabric)) if not have
    ]
    if missing:
        why = f"the image has no {' and no '.join(missing)}"
        return Feature("NCCL net", False, why, ok=not (wants_efa or forced), labels=labels)
    if forced and not wants_efa:
        return Feature("NCCL net", True, f"available ({plugin}, {fabric})", labels=labels)
    if not devices:
        why = "no EFA devices in /dev/infiniband: the pod requests no vpc.amazonaws.com/efa"
        return Feature("NCCL net", False, why, ok=not wants_efa, labels=labels)
    return Feature(
        "NCCL net",
        True,
        f"({plugin}, {fabric}, {len(devices)} EFA device(s))",
        labels=labels,
    )


def features(
    s3_uri: str | None,
    env: Mapping[str, str] | None = None,
    forced: Sequence[str] = (),
) -> list[Feature]:
    """Every feature's state for this process (`forced`: check as if configured)."""
    env = os.environ if env is None else env
    return [
        mlflow_feature(env, "mlflow" in forced),
        s3_feature(s3_uri, "s3" in forced),
        nccl_feature(env, "efa" in forced),
    ]


def header() -> str:
    torch = versions.torch_version()
    return (
        f"trainforge runtime: Python {platform.python_version()}, "
        f"torch {torch if torch else 'not installed'}"
    )


def startup_lines(s3_uri: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """The runtime's first log lines (rank 0): the header, then one line per feature."""
    return [header(), *(f.line() for f in features(s3_uri, env))]


def _feature_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in FEATURES]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown feature(s) {', '.join(bad)}; valid: {', '.join(FEATURES)}"
        )
    return names


def main(argv: Sequence[str]) -> int:
    """`--self-check [mlflow,s3,efa]`: print the feature lines; exit 1 if one cannot work."""
    p = argparse.ArgumentParser(prog="python -m trainforge.training --self-check")
    p.add_argument("--self-check", nargs="?", const=[], type=_feature_list, default=[])
    p.add_argument("--checkpoint-s3", default=None)
    ns, _ = p.parse_known_args(list(argv))
    s3_uri = ns.checkpoint_s3 or os.environ.get(c.CHECKPOINT_S3) or None
    found = features(s3_uri, forced=ns.self_check)
    print(header(), flush=True)
    torch_problem = versions.problem(versions.torch_version())
    print(versions.describe(versions.torch_version()), flush=True)
    for f in found:
        print(f.line(), flush=True)
    bad = [f for f in found if not f.ok]
    if torch_problem:
        print(f"self-check: FAILED: {torch_problem}", file=sys.stderr, flush=True)
        return 1
    if bad:
        print(
            f"self-check: FAILED: {', '.join(f.name for f in bad)} configured but not usable "
            "with this image; use the trainforge runtime image (docs/images.md) or add the "
            "piece to yours",
            file=sys.stderr,
            flush=True,
        )
        return 1
    print("self-check: ok", flush=True)
    return 0
