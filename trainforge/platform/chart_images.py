"""The images a pinned Helm chart runs by default, read from its own values.yaml.

Why: the plan names each image a chart installs and judges its registry
(TRAINFORGE_DOCKER_HUB); a reference typed next to the values we set drifts from the chart at
its pin. The values.yaml and Chart.yaml of each chart whose images trainforge reports are
vendored as package data (`data/charts/<chart>-<version>/`, SOURCE.txt says from where), and
an image is `<registry>/<repository>:<tag>` from the chart's values at `path`, with the tag
the chart's templates fall back to (`image.tag | default .Chart.AppVersion` for the main
image) when the value is empty.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

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


def default_image(chart: str, version: str, path: str, *, app_version_tag: bool = False) -> str:
    """The image the chart's values name at `path` (dotted: `image`, `downloadDashboardsImage`).
    `app_version_tag`: an empty tag means the chart's appVersion (the main image's rule)."""
    meta, values = _chart(chart, version)
    node: Any = values
    for key in path.split("."):
        node = node[key]
    tag = str(node.get("tag") or "")
    if not tag and app_version_tag:
        tag = str(meta["appVersion"])
    ref = f"{node['registry']}/{node['repository']}"
    return f"{ref}:{tag}" if tag else ref


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
