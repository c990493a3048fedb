"""Images a chart runs come from its vendored values.yaml at the pinned version.

Grafana's images (docker.io/grafana/grafana at the chart's appVersion, and its curl helper)
are what the plan reports under "Images" and judges as Docker Hub images; they are read from
grafana chart 12.11.1's values.yaml and Chart.yaml (package data), not typed.
"""

from __future__ import annotations

import hashlib
import shutil

import pytest

from trainforge.core import versions
from trainforge.platform import chart_images

GRAFANA = chart_images.CHARTS / f"grafana-{versions.GRAFANA_CHART_VERSION}"


def test_vendored_chart_files_are_the_tags_bytes():
    for line in (GRAFANA / "SOURCE.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            blob, name = line.split()
            data = (GRAFANA / name).read_bytes()
            assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name


def test_grafana_images_from_the_chart_values():
    v = versions.GRAFANA_CHART_VERSION
    assert chart_images.default_image("grafana", v, "image", app_version_tag=True) == (
        "docker.io/grafana/grafana:13.2.0"  # values image.tag "" -> Chart.yaml appVersion
    )
    assert chart_images.default_image("grafana", v, "downloadDashboardsImage") == (
        "docker.io/curlimages/curl:8.21.0"
    )


def test_an_edited_values_file_changes_the_image(tmp_path, monkeypatch):
    """Break it: the values name another registry; the reader follows the file, not a constant."""
    copy = tmp_path / GRAFANA.name
    shutil.copytree(GRAFANA, copy)
    values = copy / "values.yaml"
    values.write_text(
        values.read_text().replace("repository: grafana/grafana", "repository: x/y", 1)
    )
    monkeypatch.setattr(chart_images, "CHARTS", tmp_path)
    chart_images._chart.cache_clear()
    try:
        image = chart_images.default_image("grafana", versions.GRAFANA_CHART_VERSION, "image")
        assert image == "docker.io/x/y"
        with pytest.raises(FileNotFoundError, match="no vendored values"):
            chart_images.default_image("grafana", "0.0.1", "image")
    finally:
        chart_images._chart.cache_clear()


def test_credential_free_copies_keep_the_tag():
    assert chart_images.credential_free("docker.io/curlimages/curl:8.21.0") == (
        "quay.io/curl/curl:8.21.0"
    )
    assert chart_images.credential_free("docker.io/grafana/grafana:13.2.0") == (
        "docker.io/grafana/grafana:13.2.0"  # no such copy: Docker Hub only
    )
