"""The container images a vendored kustomize overlay runs, read from its own files.

Why: the plan must name the images the cluster will pull, and judge their registries
(TRAINFORGE_DOCKER_HUB), before anything is deployed. A constant typed next to the overlay
drifted: the training operator's was `docker.io/kubeflow/training-operator` while the pinned
overlay runs `ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489`, so every stack
without a Docker Hub credential got a finding for an image no node pulls. The overlay is
vendored as package data (`data/training-operator-<version>/`, SOURCE.txt says from where) and
its images are read from it here, with the kustomize rules that decide them:

* `resources:` entries are files (YAML documents) or directories with a `kustomization.yaml`
  (bases), read depth first;
* the containers and init containers of every pod template (Deployment, StatefulSet,
  DaemonSet, Job: `spec.template`; CronJob: `spec.jobTemplate.spec.template`; Pod: `spec`);
* each level's `images:` transformer rewrites the images of what that level accumulated
  (a base's first, then the overlay's): an entry matches an image whose name (without tag or
  digest) equals its `name`, and sets `newName`, `newTag` or `digest`.

Anything else kustomize does (patches, generators, components, remote bases) is not applied
here: a patch that may target a workload, or a field not known to leave images alone, raises; `kubectl kustomize` of the same files is the proof (tests/platform/
test_operator_overlay.py renders it and compares), and a kustomization that uses an unknown
field that could change images raises instead of guessing. No kubectl is needed at run time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainforge.jobs.backends import pod_templates

DATA = Path(__file__).resolve().parent / "data"
# kustomization fields that cannot change a container image (read or not)
_NEUTRAL = {
    "apiVersion", "kind", "namespace", "resources", "images", "secretGenerator",
    "configMapGenerator", "generatorOptions", "patches", "configurations", "labels",
    "commonLabels", "commonAnnotations",
    "namePrefix", "nameSuffix", "crds", "openapi", "sortOptions",
}  # fmt: skip
_KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "ReplicaSet"}


@dataclass(frozen=True)
class OverlayImage:
    kind: str
    name: str  # the workload's metadata.name
    container: str
    image: str


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOP_KIND = re.compile(r"^kind:\s*[\"']?(\w+)", re.M)


def _may_hold_workloads(text: str) -> bool:
    """False only for a block-style YAML file whose every top-level `kind:` is not a workload
    (the operator's six CRDs, 3.7 MB, are not parsed: a plan stays fast)."""
    kinds = _TOP_KIND.findall(text)
    if not kinds or text.lstrip().startswith(("{", "[")):
        return True
    return any(k in _WORKLOADS for k in kinds)


def _split(image: str) -> tuple[str, str]:
    """(name, the tag or digest suffix with its separator)."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _transform(image: str, rules: list[dict[str, Any]]) -> str:
    name, suffix = _split(image)
    for rule in rules:
        if rule.get("name") != name:
            continue
        new_name = rule.get("newName") or name
        if rule.get("digest"):
            suffix = "@" + str(rule["digest"])
        elif rule.get("newTag") is not None:
            suffix = ":" + str(rule["newTag"])
        return new_name + suffix
    return image


def _kustomization(directory: Path) -> dict[str, Any]:
    for name in _KUSTOMIZATION_FILES:
        path = directory / name
        if path.is_file():
            data = yaml.safe_load(path.read_text()) or {}
            unknown = set(data) - _NEUTRAL
            if unknown:
                raise ValueError(
                    f"{path}: fields {sorted(unknown)} are not understood by this reader; "
                    "render it with `kubectl kustomize` and extend trainforge.platform."
                    "overlay_images"
                )
            for patch in data.get("patches") or []:
                kind = (patch.get("target") or {}).get("kind")
                if kind is None or kind in _WORKLOADS:
                    raise ValueError(
                        f"{path}: a patch that may target a workload ({kind or 'any kind'}) "
                        "can change its images; this reader does not apply patches"
                    )
            return data
    raise FileNotFoundError(f"{directory}: no kustomization.yaml")


def _collect(directory: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(workload document, its pod specs) of everything a kustomization accumulates, with the
    `images:` transformers of this level and its bases applied."""
    k = _kustomization(directory)
    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for entry in k.get("resources") or []:
        if "://" in str(entry) or str(entry).startswith("github.com/"):
            raise ValueError(f"{directory}: remote resource {entry!r} is not vendored")
        path = (directory / entry).resolve()
        if path.is_dir():
            out += _collect(path)
            continue
        text = path.read_text()
        if not _may_hold_workloads(text):
            continue
        for doc in yaml.load_all(text, Loader=_LOADER):
            if isinstance(doc, dict):
                specs = [t.spec for t in pod_templates(doc, build=False)]
                if specs:
                    out.append((doc, specs))
    rules = k.get("images") or []
    if rules:
        for _, specs in out:
            for pod in specs:
                for key in ("initContainers", "containers"):
                    for c in pod.get(key) or []:
                        if c.get("image"):
                            c["image"] = _transform(c["image"], rules)
    return out


def images(overlay: Path) -> list[OverlayImage]:
    """Every container image the overlay's pod templates run, in document order."""
    return list(_images(overlay.resolve(), _stamp(overlay)))


def _stamp(overlay: Path) -> float:
    """The newest modification time below the overlay's parent (a cache key: an edited copy
    is read again)."""
    return max(p.stat().st_mtime for p in overlay.parent.parent.rglob("*") if p.is_file())


@functools.cache
def _images(overlay: Path, _stamp: float) -> tuple[OverlayImage, ...]:
    result = []
    for doc, specs in _collect(overlay):
        for pod in specs:
            for key in ("initContainers", "containers"):
                for c in pod.get(key) or []:
                    result.append(
                        OverlayImage(
                            doc.get("kind", ""),
                            (doc.get("metadata") or {}).get("name", ""),
                            c.get("name", ""),
                            c.get("image", ""),
                        )
                    )
    return tuple(result)


def training_operator_overlay(version: str) -> Path:
    """The vendored `manifests/overlays/standalone` of kubeflow/trainer at `version`."""
    path = DATA / f"training-operator-{version}" / "manifests" / "overlays" / "standalone"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no vendored training operator overlay for {version} (under {DATA}); vendor "
            "manifests/overlays/standalone and manifests/base at that tag"
        )
    return path
