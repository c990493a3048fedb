"""Compare two plans: objects added, changed and removed, with field-level differences.

Both plans are read from folders a plan wrote (`--out`): the Kubernetes objects by their
namespace/Kind/name, and the cloud resources by URN from the folder's inventory.json. The
output is markdown, short enough for a pull-request comment: long lists are cut with a count.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from trainforge.plan.manifests import CHECKOV_DIR

INVENTORY_FILE = "inventory.json"
MAX_FIELDS = 12  # per object in the markdown
MAX_OBJECTS = 40  # per section
MAX_VALUE = 80  # characters of a value shown


@dataclass
class Change:
    key: str
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)  # (path, old, new)


@dataclass
class PlanDiff:
    added: list[str]
    removed: list[str]
    changed: list[Change]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


_MISSING = object()


def field_diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Dotted paths whose values differ; list items by index, or by `name` when they have one."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            sub = f"{path}.{k}" if path else str(k)
            out += field_diff(old.get(k, _MISSING), new.get(k, _MISSING), sub)
        return out
    if isinstance(old, list) and isinstance(new, list):
        if _named(old) and _named(new):
            return field_diff({i["name"]: i for i in old}, {i["name"]: i for i in new}, path)
        out = []
        for i in range(max(len(old), len(new))):
            o = old[i] if i < len(old) else _MISSING
            n = new[i] if i < len(new) else _MISSING
            out += field_diff(o, n, f"{path}[{i}]")
        return out
    if old == new:
        return []
    return [(path, None if old is _MISSING else old, None if new is _MISSING else new)]


def _named(items: list) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return (
        len(names) == len(items)
        and all(isinstance(n, str) for n in names)
        and len(set(names)) == len(names)
    )


def load_objects(folder: pathlib.Path) -> dict[str, dict]:
    """namespace/Kind/name -> object, for every manifest in a plan folder."""
    out = {}
    for f in sorted(folder.rglob("*.yaml")):
        if CHECKOV_DIR in f.relative_to(folder).parts:
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind"):
                meta = doc.get("metadata") or {}
                out[f"{meta.get('namespace') or '_cluster'}/{doc['kind']}/{meta.get('name')}"] = doc
    return out


def load_resources(folder: pathlib.Path) -> dict[str, dict]:
    """URN -> inputs of every non-Kubernetes resource, from the folder's inventory.json."""
    path = folder / INVENTORY_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {
        r["urn"]: r.get("inputs") or {}
        for r in data.get("resources", [])
        if not str(r.get("type", "")).startswith("kubernetes:")
    }


def _short_urn(urn: str) -> str:
    parts = urn.split("::")
    return f"{parts[-2].split('$')[-1]}::{parts[-1]}" if len(parts) >= 2 else urn


def diff_maps(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    added = sorted(k for k in new if k not in old)
    removed = sorted(k for k in old if k not in new)
    changed = []
    for k in sorted(k for k in new if k in old):
        fields = field_diff(old[k], new[k])
        if fields:
            changed.append(Change(k, fields))
    return PlanDiff(added, removed, changed)


def diff_plans(old_dir: pathlib.Path, new_dir: pathlib.Path) -> tuple[PlanDiff, PlanDiff]:
    """(Kubernetes objects diff, cloud resources diff)."""
    objects = diff_maps(load_objects(old_dir), load_objects(new_dir))
    old_res = {_short_urn(k): v for k, v in load_resources(old_dir).items()}
    new_res = {_short_urn(k): v for k, v in load_resources(new_dir).items()}
    return objects, diff_maps(old_res, new_res)


def _fmt(v: Any) -> str:
    if v is None:
        return "∅"
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= MAX_VALUE else s[: MAX_VALUE - 1] + "…"


def _section(title: str, d: PlanDiff) -> list[str]:
    lines = [
        f"### {title}: {len(d.added)} added, {len(d.changed)} changed, {len(d.removed)} removed"
    ]
    if d.empty:
        return [*lines, "", "No changes.", ""]
    lines.append("")
    for sign, keys in (("+", d.added), ("-", d.removed)):
        for k in keys[:MAX_OBJECTS]:
            lines.append(f"- `{sign} {k}`")
        if len(keys) > MAX_OBJECTS:
            lines.append(f"- … and {len(keys) - MAX_OBJECTS} more ({sign})")
    for c in d.changed[:MAX_OBJECTS]:
        lines.append(f"- `~ {c.key}`")
        for path, o, n in c.fields[:MAX_FIELDS]:
            lines.append(f"  - `{path}`: `{_fmt(o)}` → `{_fmt(n)}`")
        if len(c.fields) > MAX_FIELDS:
            lines.append(f"  - … and {len(c.fields) - MAX_FIELDS} more fields")
    if len(d.changed) > MAX_OBJECTS:
        lines.append(f"- … and {len(d.changed) - MAX_OBJECTS} more changed")
    lines.append("")
    return lines


def render_markdown(
    objects: PlanDiff, resources: PlanDiff, replaced: set[str] | None = None
) -> str:
    """A PR-comment-sized summary. `replaced` names objects Pulumi replaces instead of updating."""
    lines = ["## trainforge plan diff", ""]
    lines += _section("Kubernetes objects", objects)
    if replaced:
        hit = [c.key for c in objects.changed if c.key in replaced]
        if hit:
            lines += [
                "Replaced (deleted before the new one is created): "
                + ", ".join(f"`{k}`" for k in hit),
                "",
            ]
    lines += _section("Cloud resources", resources)
    return "\n".join(lines)
