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
stack's cache) or records the chart's own (`record`) so that the plan lists what its nodes
pull. The same files give tests/platform/test_chart_values.py the keys each chart accepts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainforge.core import image_routes

CHARTS = Path(__file__).resolve().parent / "data" / "charts"


@functools.cache
def _chart(chart: str, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = CHARTS / f"{chart}-{version}"
    if not folder.is_dir():
        raise FileNotFoundError(f"no vendored values of chart {chart} {version} (under {CHARTS})")
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    if str(meta.get("version")) != version:
        raise ValueError(f"{folder}/Chart.yaml is version {meta.get('version')}, not {version}")
    return meta, yaml.safe_load((folder / "values.yaml").read_text())


@dataclass(frozen=True)
class ChartImage:
    """An image a chart's templates run: the value path of its image block, and the tag they
    fall back to when the block's tag is empty, from Chart.yaml (`{appVersion}`,
    `v{appVersion}`, `v{version}`; "" none: the block's tag is used as it is)."""

    path: str
    tag_default: str = ""


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
    node: Any = values
    for key in path.split("."):
        node = node[key]
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


def chart_runs(chart: str, version: str, images: tuple[ChartImage, ...]) -> list[str]:
    """The references of `images` as the pinned chart's values name them."""
    return [default_image(chart, version, i.path, tag_default=i.tag_default) for i in images]


def record(component: str, chart: str, version: str, images: tuple[ChartImage, ...]) -> None:
    """Record the images the chart runs with its own values (trainforge sets none of them) for
    the plan's image check: pulled as the chart names them, from their registry."""
    for ref in chart_runs(chart, version, images):
        image_routes.as_named(component, ref)


# Docker Hub images with an official copy on a registry that needs no credential: same tags.
# source: github.com/curl/curl-container README ("the Official curl docker images available
# from quay.io/curl/curl and docker.io/curlimages/curl"); quay.io/curl/curl:8.21.0 (grafana
# 12.11.1's downloadDashboardsImage tag) is pinned by digest in public Dockerfiles, checked
# 2026-11-27
CREDENTIAL_FREE_COPIES = {"docker.io/curlimages/curl": "quay.io/curl/curl"}


def credential_free(image: str) -> str:
    """`image` from its credential-free copy when one is known, else unchanged."""
    for hub, copy in CREDENTIAL_FREE_COPIES.items():
        if image == hub or image.startswith((hub + ":", hub + "@")):
            return copy + image[len(hub) :]
    return image
