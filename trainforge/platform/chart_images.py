"""The images a pinned Helm chart runs by default, read from its own values.yaml.

Why: the plan names each image a chart installs and judges its registry
(TRAINFORGE_DOCKER_HUB); a reference typed next to the values we set drifts from the chart at
its pin. The values.yaml and Chart.yaml of each chart trainforge installs are vendored byte
for byte as package data (`data/charts/<chart>-<version>/`, SOURCE.txt says from where, with
the git blob ids tests/platform/test_chart_images.py re-hashes), and an image is
`<registry>/<repository>:<tag>[@<digest>]` from the chart's values at a value path, with the
tag the chart's templates fall back to when the value is empty (`ChartImage.tag_default`, e.g.
`image.tag | default .Chart.AppVersion`). This is the one place chart images come from: a
component either sets the image in its values from here (Grafana, OpenCost: through the
stack's cache) or routes the chart's own (`route`) so that the plan lists what its nodes
pull. `route` sets a chart's own image blocks so that its nodes pull each image through the
stack's ECR pull-through cache where the stack has a rule for its registry, and records what
those values make the chart run (tests/platform/test_chart_images.py re-derives it from the
values each release is given). The same files give tests/platform/test_chart_values.py the
keys each chart accepts.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainforge.core import image_routes

CHARTS = Path(__file__).resolve().parent / "data" / "charts"
# libyaml's loader where PyYAML was built with it: the same documents (every vendored chart
# loads equal with both; tests/platform/test_chart_images.py), ten times faster than the
# pure-Python one, which took ~0.5 s of each plan for the 22 vendored files.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_LOADER)  # noqa: S506 - a safe loader


@functools.cache
def _chart(chart: str, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = CHARTS / f"{chart}-{version}"
    if not folder.is_dir():
        raise FileNotFoundError(f"no vendored values of chart {chart} {version} (under {CHARTS})")
    meta = _load(folder / "Chart.yaml")
    if str(meta.get("version")) != version:
        raise ValueError(f"{folder}/Chart.yaml is version {meta.get('version')}, not {version}")
    return meta, _load(folder / "values.yaml")


@dataclass(frozen=True)
class ChartImage:
    """An image a chart's templates run: the value path of its image block, the tag they
    fall back to when the block's tag is empty, from Chart.yaml (`{appVersion}`,
    `v{appVersion}`, `v{version}`; "" none: the block's tag is used as it is), and `suffix`:
    (a boolean key of the block, what the templates append to the tag when it is true), e.g.
    prometheus-node-exporter's `("distroless", "-distroless")`."""

    path: str
    tag_default: str = ""
    suffix: tuple[str, str] | None = None


@dataclass(frozen=True)
class Subchart:
    """Where a subchart's values come from besides its own values.yaml: the parent chart's
    values under `key` (kube-prometheus-stack sets `prometheus-node-exporter.image.
    distroless: true`) and the parent's `global` (Helm hands it to every subchart)."""

    parent: str
    parent_version: str
    key: str


def merged(base: Any, over: Any) -> Any:
    """`over` deep-merged onto `base` the way Helm merges values (maps key by key; anything
    else replaced). Neither is modified."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if key in out else copy.deepcopy(value)
    return out


def merge_into(values: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` (plain data) merged into `values` in place, map by map; returns `values`. For a
    release's values, which may hold Pulumi Outputs that must not be copied."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            merge_into(values[key], value)
        else:
            values[key] = copy.deepcopy(value)
    return values


def effective_values(
    chart: str, version: str, release: dict[str, Any] | None = None, sub: Subchart | None = None
) -> dict[str, Any]:
    """The values the chart's templates see: its vendored values.yaml, under a parent the
    parent's values for it and the parent's `global`, then `release` (the values passed to
    the release: the parent's for a subchart)."""
    _, values = _chart(chart, version)
    release = release or {}
    if sub is None:
        return merged(values, release)
    _, parent = _chart(sub.parent, sub.parent_version)
    out = merged(merged(values, parent.get(sub.key) or {}), release.get(sub.key) or {})
    out["global"] = merged(
        merged(values.get("global") or {}, parent.get("global") or {}),
        release.get("global") or {},
    )
    return out


def _block(values: dict[str, Any], path: str) -> dict[str, Any]:
    node: Any = values
    for key in path.split("."):
        node = node[key]
    return node


def reference(values: dict[str, Any], meta: dict[str, Any], image: ChartImage) -> str:
    """The image reference the chart's templates make of `values` for `image`:
    `<registry>/<repository>:<tag>[@<digest>]`, `global.imageRegistry` in place of the block's
    registry when set (kube-prometheus-stack, kube-state-metrics, prometheus-node-exporter and
    grafana's image helpers), a block without `registry` naming its host in `repository`
    (karpenter's), the tag default and suffix of `image`, the digest from `sha` (bare hex) or
    `digest` (`sha256:...`)."""
    node = _block(values, image.path)
    tag = str(node.get("tag") or "")
    if not tag and image.tag_default:
        tag = image.tag_default.format(appVersion=meta.get("appVersion"), version=meta["version"])
    if image.suffix is not None and node.get(image.suffix[0]):
        tag += image.suffix[1]
    registry = ""
    if "registry" in node:
        registry = str((values.get("global") or {}).get("imageRegistry") or node["registry"] or "")
    ref = "/".join(p for p in (registry, str(node["repository"])) if p)
    if tag:
        ref = f"{ref}:{tag}"
    digest = str(node.get("digest") or node.get("sha") or "")
    if digest:
        ref += f"@{digest}" if digest.startswith("sha256:") else f"@sha256:{digest}"
    return ref


def image_values(
    chart: str, version: str, path: str, *, app_version_tag: bool = False, tag_default: str = ""
) -> dict[str, str]:
    """`{registry, repository, tag[, digest]}` of the image block the chart's values name at
    `path` (dotted: `image`, `opencost.exporter.image`), the tag as the chart's templates
    resolve it: `tag_default` (see ChartImage; `app_version_tag` is `{appVersion}`) when the
    value is empty, a tag may carry its `@sha256:` digest (opencost's do). A block without a
    `registry` names the host in its `repository` (karpenter's). `digest` from the block's
    `sha` (a bare hex digest, kube-prometheus-stack's) or `digest` (`sha256:...`)."""
    meta, values = _chart(chart, version)
    node = _block(values, path)
    tag = str(node.get("tag") or "")
    default = tag_default or ("{appVersion}" if app_version_tag else "")
    if not tag and default:
        tag = default.format(appVersion=meta.get("appVersion"), version=meta["version"])
    out = {"registry": str(node.get("registry") or ""), "repository": str(node["repository"])}
    if tag:
        out["tag"] = tag
    digest = str(node.get("digest") or node.get("sha") or "")
    if digest:
        out["digest"] = digest if digest.startswith("sha256:") else f"sha256:{digest}"
    return out


def default_image(
    chart: str, version: str, path: str, *, app_version_tag: bool = False, tag_default: str = ""
) -> str:
    """The image reference the chart's values name at `path` (see `image_values`)."""
    block = image_values(
        chart, version, path, app_version_tag=app_version_tag, tag_default=tag_default
    )
    ref = "/".join(p for p in (block["registry"], block["repository"]) if p)
    if "tag" in block:
        ref = f"{ref}:{block['tag']}"
    return f"{ref}@{block['digest']}" if "digest" in block else ref


def dependency_version(chart: str, version: str, dependency: str) -> str:
    """The version of a subchart the pinned chart depends on (its Chart.yaml `dependencies`)."""
    meta, _ = _chart(chart, version)
    for dep in meta.get("dependencies") or []:
        if dep.get("name") == dependency:
            return str(dep["version"])
    raise KeyError(f"chart {chart} {version} has no dependency {dependency}")


def chart_runs(
    chart: str,
    version: str,
    images: tuple[ChartImage, ...],
    release: dict[str, Any] | None = None,
    sub: Subchart | None = None,
) -> list[str]:
    """The references of `images` the pinned chart runs with `release`'s values (none: as
    its own values, and a parent's for a subchart, name them)."""
    meta, _ = _chart(chart, version)
    values = effective_values(chart, version, release, sub)
    return [reference(values, meta, i) for i in images]


def _set(tree: dict[str, Any], path: str, value: dict[str, Any]) -> None:
    *head, last = path.split(".")
    for key in head:
        tree = tree.setdefault(key, {})
    tree[last] = {**tree.get(last, {}), **value}


def route(
    component: str,
    chart: str,
    version: str,
    images: tuple[ChartImage, ...],
    sub: Subchart | None = None,
) -> dict[str, Any]:
    """Release values that make the chart pull each of `images` through the stack's cache
    where it has a rule for the image's registry (the block's `registry` and `repository`, or
    for a block that names its host in `repository`, that; the chart's tag and digest kept),
    and record each image for the plan with what those values make the chart pull (the
    cached reference, or the image as named where no rule covers its registry: nvcr.io,
    another account's ECR, ghcr.io without a GitHub credential; and a digest-pinned image,
    Karpenter's, which the cache would not fetch: image_routes.digest_pinned). Under a parent (`sub`) the
    values are keyed by the subchart's key, to merge into the parent release's values."""
    meta, _ = _chart(chart, version)
    named = chart_runs(chart, version, images, sub=sub)
    own: dict[str, Any] = {}
    for image, ref in zip(images, named, strict=True):
        target = image_routes.cached(ref)
        if target == ref:
            continue  # no rule for its registry, or pinned by digest (the cache leaves it)
        host, repo, _, _ = image_routes.parts(target)
        has_registry = "registry" in _block(effective_values(chart, version, sub=sub), image.path)
        block = (
            {"registry": host, "repository": repo}
            if has_registry
            else {"repository": f"{host}/{repo}"}
        )
        _set(own, image.path, block)
    out = {sub.key: own} if sub is not None and own else own
    pulled = chart_runs(chart, version, images, out, sub)
    for ref, pull in zip(named, pulled, strict=True):
        image_routes.pulled_as(component, ref, pull)
    return out


# Docker Hub images with an official copy on a registry that needs no credential: same tags.
# source: github.com/curl/curl-container README ("the Official curl docker images available
# from quay.io/curl/curl and docker.io/curlimages/curl"); quay.io/curl/curl:8.21.0 (grafana
# 12.11.1's downloadDashboardsImage tag) is pinned by digest in public Dockerfiles, checked
# 2026-11-27
CREDENTIAL_FREE_COPIES = {"docker.io/curlimages/curl": "quay.io/curl/curl"}


def credential_free(image: str) -> str:
    """`image` from its credential-free copy when one is known, else unchanged."""
    for hub, free in CREDENTIAL_FREE_COPIES.items():
        if image == hub or image.startswith((hub + ":", hub + "@")):
            return free + image[len(hub) :]
    return image
