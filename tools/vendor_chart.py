"""Derive what trainforge keeps of a Helm chart's values.yaml: its key list and its images.

Why: a chart's values.yaml at its pinned tag says which keys exist (a misspelt key is
silently ignored by Helm) and which images the chart runs (by tag and digest). Both are
facts of the pinned artifact, so they are derived from it, never typed:

* `tests/platform/chart_values/<chart>-<version>.keys`: every key path and the kind of its
  default (map, {}, [], null, scalar), read by tests/platform/test_chart_values.py;
* `trainforge/core/data/chart_images.json`: `<chart>@<version>` -> value path of each image
  block (`registry`, `repository`, `tag`) the chart's templates read, which the platform
  installs through the stack's image cache (trainforge.platform.opencost).

    python tools/vendor_chart.py VALUES.yaml --chart opencost --version 2.5.17 \\
        --source "github.com/opencost/opencost-helm-chart charts/opencost/values.yaml at tag \\
        opencost-2.5.17 (725bb93, 2026-04-28)" --read 2026-11-27 \\
        --image opencost.exporter.image --image opencost.ui.image
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEYS_DIR = ROOT / "tests" / "platform" / "chart_values"
IMAGES = ROOT / "trainforge" / "core" / "data" / "chart_images.json"


def kind(value: Any) -> str:
    if isinstance(value, dict):
        return "map" if value else "{}"
    if isinstance(value, list):
        return "[]"
    return "null" if value is None else "scalar"


def key_lines(values: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in values.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        out.append(f"{path}\t{kind(v)}")
        if isinstance(v, dict):
            out += key_lines(v, path)
    return out


def at(values: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        values = values[part]
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("values", type=pathlib.Path)
    ap.add_argument("--chart", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--source", required=True, help="where the values.yaml was read")
    ap.add_argument("--read", required=True, help="the day it was read, YYYY-MM-DD")
    ap.add_argument("--image", action="append", default=[], help="value path of an image block")
    args = ap.parse_args(argv)
    values = yaml.safe_load(args.values.read_text())
    header = [
        f"# The value keys of the {args.chart} chart {args.version}: every key path of its "
        "values.yaml and",
        "# the kind of its default (map, {}, [], null, scalar). Derived from "
        f"{args.source} by tools/vendor_chart.py,",
        f"# read {args.read}. Regenerate when the chart pin changes "
        "(tests/platform/test_chart_values.py).",
    ]
    keys = KEYS_DIR / f"{args.chart}-{args.version}.keys"
    keys.write_text("\n".join([*header, *key_lines(values)]) + "\n")
    data = json.loads(IMAGES.read_text()) if IMAGES.exists() else {}
    data[f"{args.chart}@{args.version}"] = {
        "source": f"{args.source}, read {args.read}",
        "images": {
            p: {k: at(values, p).get(k) for k in ("registry", "repository", "tag")}
            for p in args.image
        },
    }
    IMAGES.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {keys.relative_to(ROOT)} and {IMAGES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
