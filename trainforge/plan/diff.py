"""Two sides of a plan (sides.py) compared: Kubernetes objects by namespace/Kind/name, cloud
resources by URN, field by field, as markdown short enough for a PR comment; the PR's cost table.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

import yaml

from trainforge.jobs.duration import DEADLINE
from trainforge.plan.checks.cost_check import RUNNING_HEADER, STARTS
from trainforge.plan.ckpt_compat import argv_fields
from trainforge.plan.manifests import CHECKOV_DIR, ident
from trainforge.plan.price_facts import usd as _usd

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
        if path.rsplit(".", 1)[-1] in ARGV_KEYS and all(isinstance(i, str) for i in old + new):
            return argv_diff(old, new, path)
        if _named(old) and _named(new):
            return field_diff({i["name"]: i for i in old}, {i["name"]: i for i in new}, path)
        pairs = enumerate(zip_longest(old, new, fillvalue=_MISSING))
        return [d for i, (o, n) in pairs for d in field_diff(o, n, f"{path}[{i}]")]
    if old == new:
        return []
    return [(path, None if old is _MISSING else old, None if new is _MISSING else new)]


ARGV_KEYS = ("command", "args")  # a container's argv: diffed by flag name, not position


def argv_diff(old: list[str], new: list[str], path: str) -> list[tuple[str, Any, Any]]:
    """(`path --flag`, old, new) per flag that differs: a switch is "(set)", an absent flag None."""
    a, b = argv_fields(old), argv_fields(new)
    out = []
    for k in [*a, *[k for k in b if k not in a]]:
        va = "(set)" if k in a and a[k] is None else a.get(k)
        vb = "(set)" if k in b and b[k] is None else b.get(k)
        if va != vb:
            out.append((f"{path} {k}" if not k.startswith("[") else f"{path}{k}", va, vb))
    return out


def _named(items: list) -> bool:
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    return all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def load_objects(folder: pathlib.Path) -> dict[str, dict]:
    """namespace/Kind/name -> object, for every manifest in a plan folder."""
    out = {}
    for f in sorted(folder.rglob("*.yaml")):
        if CHECKOV_DIR in f.relative_to(folder).parts:
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            key = ident(doc)
            if key is not None:
                out[key] = doc
    return out


def diff_maps(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    added = sorted(k for k in new if k not in old)
    removed = sorted(k for k in old if k not in new)
    changed = [
        Change(k, f)
        for k in sorted(k for k in new if k in old)
        if (f := field_diff(old[k], new[k]))
    ]
    return PlanDiff(added, removed, changed)


def _fmt(v: Any) -> str:
    s = "∅" if v is None else json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= MAX_VALUE else s[: MAX_VALUE - 1] + "…"


def _section(title: str, d: PlanDiff) -> list[str]:
    lines = [
        f"### {title}: {len(d.added)} added, {len(d.changed)} changed, {len(d.removed)} removed"
    ]
    if not (d.added or d.removed or d.changed):
        return [*lines, "", "No changes.", ""]
    lines.append("")
    for sign, keys in (("+", d.added), ("-", d.removed)):
        lines += [f"- `{sign} {k}`" for k in keys[:MAX_OBJECTS]]
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
    lines = _section("Kubernetes objects", objects)
    hit = [c.key for c in objects.changed if c.key in (replaced or ())]
    if hit:
        lines += [
            "Replaced (deleted before the new one is created): " + ", ".join(f"`{k}`" for k in hit),
            "",
        ]
    lines += _section("Cloud resources", resources)
    return "\n".join(lines)


# --- cost ------------------------------------------------------------------------------------


def delta(old: Any, new: Any) -> str:
    """`+$1.50`, `-$0.20`, `no change`, or `unknown` where a side has no figure; the change of
    the figures as printed, to the cent (`cost.cents`)."""
    if not isinstance(old, int | float) or not isinstance(new, int | float):
        return "unknown"
    d = round(new, 2) - round(old, 2)
    return "no change" if abs(d) < 0.005 else f"{'+' if d > 0 else '-'}${abs(d):,.2f}"


def unknown_text(items: list[str] | None) -> str:
    """` + unknown (a, b)`: what a figure that leaves unpriced items out says after it, in the
    verdict's words; '' when nothing is left out."""
    return f" + unknown ({', '.join(items)})" if items else ""


def change_text(
    old: Any, new: Any, old_unknown: list[str] | None = None, new_unknown: list[str] | None = None
) -> str:
    """`delta` of the priced figures, then the unpriced items the change removes or adds (a
    change of the known sums alone hides them): `-$21.90; unknown removed: FSx ...`."""
    was, now = old_unknown or [], new_unknown or []
    gone, came = [u for u in was if u not in now], [u for u in now if u not in was]
    parts = [delta(old, new)]
    parts += [f"unknown removed: {', '.join(gone)}"] if gone else []
    parts += [f"unknown added: {', '.join(came)}"] if came else []
    return "; ".join(parts)


def _money(row: dict[str, Any], key: str) -> str:
    """A figure of one side's cost row; '-' where that side has no row; `<= ` before a
    ceiling (a run timed by its deadline, a team's month that holds one), as the report."""
    if not row:
        return "-"
    ceiling = {"runCost": row.get("runCostBasis") == DEADLINE,
               "monthEstimate": row.get("monthAtMost")}.get(key)  # fmt: skip
    return ("<= " if ceiling and row.get(key) is not None else "") + _usd(row.get(key))


def cost_markdown(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """What the PR changes in money: per job, per team and the platform's fixed cost."""
    lines = ["### Cost (USD, on-demand list prices)", ""]
    if new is None:
        return [*lines, "This plan has no cost report.", ""]
    if old is None:
        lines += ["The base plan has no cost report; every figure below is new.", ""]
        old = {}
    if old.get("factsDate") and old.get("factsDate") != new.get("factsDate"):
        lines += [f"Price facts: {old['factsDate']} → {new.get('factsDate')}", ""]
    rows: list[str] = []
    old_jobs = {(j["team"], j["name"]): j for j in old.get("jobs", [])}
    new_jobs = {(j["team"], j["name"]): j for j in new.get("jobs", [])}
    for key in sorted(set(old_jobs) | set(new_jobs)):
        o, n = old_jobs.get(key, {}), new_jobs.get(key, {})
        fields = ("onDemandPerHour", "runCost", "instanceType", "nodes", "admission")
        if o and n and all(o.get(f) == n.get(f) for f in fields):
            continue
        what = "added" if not o else "removed" if not n else "changed"
        nodes = (n.get("launch") or f"{n.get('nodes')} x {n.get('instanceType')}") if n else "-"
        basis = n.get("runCostBasis") or (o.get("runCostBasis") if o else None) or "-"
        starts = STARTS.get(n.get("admission", "runs") if n else "", "-")
        rows.append(
            f"| `{key[1]}` ({key[0]}) | {what} | {_money(o, 'runCost')} → {_money(n, 'runCost')} | "
            f"{delta(o.get('runCost') if o else 0.0, n.get('runCost') if n else 0.0)} | "
            f"{basis} | {starts} | {nodes} | "
            f"{_money(o, 'onDemandPerHour')} → {_money(n, 'onDemandPerHour')} |"
        )
    if rows:
        lines += [
            "Per job, the cost of one run ($/h x expected run; no monthly figure for a run):",
            "",
            "| job | | run cost | change | duration basis | starts | nodes | $/h |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    team_rows: list[str] = []
    changed: set[str] = set()
    old_teams = {t["name"]: t for t in old.get("teams", [])}
    keys = ("jobsOnDemandPerHour", "monthEstimate", "quotaCeilingPerMonth")
    for t in new.get("teams", []):
        o = old_teams.get(t["name"], {})
        if o and all(o.get(k) == t.get(k) for k in keys):
            continue
        now = [_money(t, k) for k in keys]
        if t.get("quotaUnlimited"):
            now[2] = "unlimited"
        cells = [f"{_money(o, k)} → {n}" for k, n in zip(keys, now, strict=True)]
        team_rows.append(f"| {t['name']} | {' | '.join(cells)} |")
        changed.add(t["name"])
    for name in sorted(set(old_teams) - {t["name"] for t in new.get("teams", [])}):
        team_rows.append(f"| {name} | removed | removed | removed |")
    if team_rows:
        # an unknown ceiling says why (the report's footnote: cost.TeamCost's ceiling detail)
        whys = [
            f"Quota ceiling of {t['name']} = {t.get('quotaCeiling')}"
            for t in new.get("teams", [])
            if t["name"] in changed
            and t.get("quotaCeilingPerMonth") is None
            and not t.get("quotaUnlimited")
        ]
        lines += [
            f"| team | {RUNNING_HEADER} | declared jobs, each run once | quota ceiling $/month |",
            "|---|---|---|---|",
            *team_rows,
            "",
            *([*whys, ""] if whys else []),
        ]
    o_fixed, n_fixed = old.get("fixedPerMonthKnown"), new.get("fixedPerMonthKnown")
    o_unknown, n_unknown = old.get("fixedUnknown") or [], new.get("fixedUnknown") or []
    if old and (o_fixed != n_fixed or o_unknown != n_unknown):
        lines += [
            f"Platform fixed cost (always on): {_usd(o_fixed)}/month{unknown_text(o_unknown)} → "
            f"{_usd(n_fixed)}/month{unknown_text(n_unknown)} "
            f"({change_text(o_fixed, n_fixed, o_unknown, n_unknown)})",
            "",
        ]
    elif not old:
        lines += [
            f"Platform fixed cost (always on): {_usd(n_fixed)}/month{unknown_text(n_unknown)}",
            "",
        ]
    if len(lines) == 2:
        lines += ["No cost change.", ""]
    return lines
