"""One side of a diff: a plan folder (`--out`), a `pulumi stack export` (Kubernetes objects
rebuilt from `kubernetes:*` inputs) or a `pulumi preview --json` (plus its op per resource);
secrets compare as `[secret]` (docs/pr-review.md, "Diff against the deployed state").
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import zlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from trainforge.plan.diff import INVENTORY_FILE, load_objects
from trainforge.plan.manifests import ident
from trainforge.plan.runner import SECRET

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's special-value signature key
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"  # ... whose value marks a secret
EXPORT_VERSIONS = (3,)
# `--diff /dev/null`: no base (a first deploy, a base branch with no plan): everything is new
NO_BASE = pathlib.Path(os.devnull)
VALID_BASES = (
    "a plan folder written by `trainforge plan --out` (it holds inventory.json), "
    "`pulumi stack export` (version 3) or `pulumi preview --json` output, or /dev/null for "
    "no base (everything is new)"
)


class SideError(ValueError):
    """A --diff base that is neither a plan folder nor a readable stack export/preview."""


@dataclass
class Side:
    label: str  # what the reader is told this side is
    objects: dict[str, dict]  # namespace/Kind/name -> object
    resources: dict[str, dict]  # type::name (urn_type_name) -> inputs (cloud, not kubernetes:*)
    sections: dict[str, Any] | None = None  # plan check title -> data (plan folders only)
    ops: dict[str, str] = field(default_factory=dict)  # URN -> preview op (preview only)
    # plan folders only: inventory.json's resources (checks/data_safety.py base_records)
    records: list[Any] | None = None
    no_base: bool = False  # `--diff /dev/null`
    path: pathlib.Path | None = None  # where load_side read it


def urn_type_name(urn: str) -> str:
    """A URN as type::name: `urn:pulumi:dev::trainforge::pkg:C$aws:iam/role:Role::node-role` ->
    `aws:iam/role:Role::node-role`."""
    parts = urn.split("::")
    return f"{parts[-2].split('$')[-1]}::{parts[-1]}" if len(parts) >= 2 else urn


def _unsecret(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == SECRET_VALUE:
            return SECRET
        return {k: _unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsecret(v) for v in value]
    return value


def _from_states(states: list[dict[str, Any]], label: str) -> Side:
    objects, resources = {}, {}
    for r in states:
        t = str(r.get("type", ""))
        if r.get("delete") or t.startswith("pulumi:"):
            continue
        inputs = _unsecret(r.get("inputs") or {})
        if t.startswith("kubernetes:"):
            key = ident(inputs)
            if key is not None:
                objects[key] = inputs
            continue
        resources[urn_type_name(r.get("urn", ""))] = inputs
    return Side(label, objects, resources)


def _read_json(path: pathlib.Path) -> Any:
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except (EOFError, zlib.error) as e:  # a gzip cut short or corrupt
        why = f"a damaged gzip file ({e})"
    except OSError as e:  # unreadable, or a gzip header on a file that is not gzip
        why = f"cannot read it ({e.strerror or e})"
    except ValueError as e:
        why = f"not JSON ({e})"
    raise SideError(f"--diff {path}: {why}; expected {VALID_BASES}")


def load_side(path: pathlib.Path) -> Side:
    """A plan folder, a stack export or a preview, by what `path` holds; /dev/null is no base.
    Anything else raises SideError naming the path and what is valid."""
    try:
        side = _load_side(path)
    except (KeyError, TypeError, AttributeError) as e:  # JSON of the right kind, wrong shape
        what = f"{type(e).__name__}: {e}"
        raise SideError(
            f"--diff {path}: its resources are not of the expected shape ({what}); "
            f"expected {VALID_BASES}"
        ) from None
    side.path = path
    return side


def _load_side(path: pathlib.Path) -> Side:
    if path.exists() and path.resolve() == NO_BASE.resolve():
        return Side(f"{path} (no base: everything is new)", {}, {}, no_base=True)
    if path.is_dir():
        if not (path / INVENTORY_FILE).is_file():
            raise SideError(
                f"--diff {path}: a folder without {INVENTORY_FILE}, so not a plan folder; "
                f"expected {VALID_BASES}"
            )
        inv = _read_json(path / INVENTORY_FILE)
        if not isinstance(inv, dict) or not isinstance(inv.get("resources"), list):
            raise SideError(
                f"--diff {path}: its {INVENTORY_FILE} is not a plan's inventory (no resources "
                f"list); expected {VALID_BASES}"
            )
        sections = {
            s.get("title"): s.get("data") for s in (inv.get("plan") or {}).get("sections") or []
        }
        resources = {  # the cloud resources; the Kubernetes objects are its manifests
            urn_type_name(r["urn"]): r.get("inputs") or {}
            for r in inv["resources"]
            if not str(r.get("type", "")).startswith("kubernetes:")
        }
        try:
            objects = load_objects(path)
        except (OSError, yaml.YAMLError) as e:
            why = (str(e).splitlines() or [type(e).__name__])[0]
            raise SideError(f"--diff {path}: a manifest there cannot be read ({why})") from None
        return Side(f"plan folder {path}", objects, resources, sections, records=inv["resources"])
    if not path.is_file():
        raise SideError(f"--diff {path}: no such folder or file; expected {VALID_BASES}")
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("deployment"), dict):
        version = data.get("version")
        if version not in EXPORT_VERSIONS:
            raise SideError(
                f"--diff {path}: stack export version {version!r}; supported: "
                f"{', '.join(map(str, EXPORT_VERSIONS))} (`pulumi stack export` of Pulumi 3)"
            )
        states = data["deployment"].get("resources") or []
        return _from_states(states, f"deployed state {path.name} (pulumi stack export)")
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        olds = [s["oldState"] for s in data["steps"] if isinstance(s.get("oldState"), dict)]
        side = _from_states(olds, f"deployed state {path.name} (pulumi preview --json)")
        side.ops = {s.get("urn", ""): s.get("op", "") for s in data["steps"]}
        return side
    raise SideError(
        f"--diff {path}: neither a plan folder, a `pulumi stack export` (version 3) nor a "
        "`pulumi preview --json` file; expected " + VALID_BASES
    )
