"""What a change means for each job, pool and team, in their own terms (docs/pr-review.md,
"Jobs"): flags by name, pods, memory, step time, cost and queue admission, every figure read
from each side's plan sections (the checks' own); a side without them shows the new value only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainforge.plan import ckpt_compat as CC
from trainforge.plan.checks import cost_check, estimates, queues
from trainforge.plan.checks.cost_check import usd as _usd
from trainforge.plan.job_view import JobView


@dataclass
class JobChange:
    ident: str
    what: str  # added | removed | replaced | updated
    lines: list[str] = field(default_factory=list)
    compat: CC.Compat | None = None
    old: JobView | None = None
    new: JobView | None = None


def _row(sections: dict[str, Any] | None, title: str, view: JobView | None) -> dict:
    """The job's row in a side's section `title` (by team and name, else by name); {} if none."""
    if view is None:
        return {}
    data = (sections or {}).get(title)
    rows = data.get("jobs", []) if isinstance(data, dict) else data or []
    named = [
        r for r in rows if isinstance(r, dict) and (r.get("job") or r.get("name")) == view.name
    ]
    exact = [r for r in named if (r.get("team") or "") == view.namespace]
    return (exact or named or [{}])[0]


def _gib(b: Any) -> str:
    return f"{b / 2**30:.1f} GiB" if isinstance(b, int | float) else "?"


def _hours(s: Any) -> str:
    if not isinstance(s, int | float):
        return "?"
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def _pair(old: str | None, new: str | None) -> str | None:
    """`old -> new`, `new` alone when there is no old, None when equal."""
    if old == new:
        return None
    return new if old is None else f"{old} → {new}"


def memory_text(row: dict) -> str | None:
    if not row or "memory_total_bytes" not in row:
        return None
    total, cap = row.get("memory_total_bytes"), row.get("memory_capacity_bytes")
    pct = f" ({total / cap:.0%} of {_gib(cap)} {row.get('gpu') or ''})".rstrip() if cap else ""
    return f"{_gib(total)}{pct.replace(' )', ')')}"


def flag_changes(old: JobView, new: JobView) -> list[str]:
    a, b = old.flags, new.flags
    out = []
    for k in [*a, *[k for k in b if k not in a]]:
        if a.get(k) == b.get(k):
            continue
        if k not in b:
            out.append(f"`{k} {a[k] or ''}`".replace(" `", "`") + " removed")
        elif k not in a:
            out.append(f"`{k} {b[k] or ''}`".replace(" `", "`") + " added")
        else:
            out.append(f"`{k} {a[k]} → {b[k]}`")
    return out


def _queue_text(row: dict) -> str | None:
    if not row:
        return None
    state = row.get("state")
    if state != "runs":
        return f"**{'never admitted' if state == 'never' else 'waits'}**: {row.get('reason')}"
    borrowing = row.get("borrowing") or {}
    if not borrowing:
        return f"admitted on {row.get('flavor')} within its nominal quota"
    lent = ", ".join(f"{_qty(v)} {r}" for r, v in sorted(borrowing.items()))
    # the queue check's own answer (kueue Quotas.reclaimers), recorded in its row
    owners = sorted({f"team {name}" for name in row.get("reclaimers") or []})
    who = f"; reclaimable by {', '.join(owners)}" if owners else ""
    return f"admitted on {row.get('flavor')}, borrowing {lent}{who}"


def _qty(v: Any) -> str:
    text = str(v)
    if "/" in text:
        n, d = text.split("/", 1)
        return f"{int(n) / int(d):.1f}"
    if text.isdigit() and int(text) >= 2**30:
        return f"{int(text) / 2**30:.1f}Gi"
    return text


def job_change(
    old: JobView | None,
    new: JobView | None,
    base: dict[str, Any] | None,
    head: dict[str, Any] | None,
    replaced: bool,
) -> JobChange:
    """The job's diff in its own terms; `base`/`head` are each side's sections by title."""
    view = new or old
    assert view is not None
    what = "replaced" if replaced else "updated"
    if old is None or new is None:
        what = "added" if old is None else "removed"
    ch = JobChange(view.ident, what, old=old, new=new)
    if new is None:
        return ch
    if old is not None:
        flags = flag_changes(old, new)
        if flags:
            ch.lines.append("flags: " + ", ".join(flags))
        if old.image != new.image:
            ch.lines.append(f"image: `{old.image}` → `{new.image}`")
        if old.kind != new.kind:
            ch.lines.append(f"backend: {old.kind} → {new.kind}")
    pods = _pair(
        f"{old.pods} pods x {_res(old.per_pod)}" if old else None,
        f"{new.pods} pods x {_res(new.per_pod)}",
    )
    if pods:
        ch.lines.append(f"pods: {pods}")
    gpus = _pair(
        str(old.pods * old.gpus_per_pod) if old else None, str(new.pods * new.gpus_per_pod)
    )
    if gpus and new.gpus_per_pod:
        ch.lines.append(f"GPUs: {gpus}")
    e_old, e_new = _row(base, estimates.TITLE, old), _row(head, estimates.TITLE, new)
    mem = _pair(memory_text(e_old), memory_text(e_new))
    if mem:
        ch.lines.append(f"memory per GPU (estimate): {mem}")
    step = _pair(
        f"{e_old['step_seconds']:.2f} s" if e_old.get("step_seconds") else None,
        f"{e_new['step_seconds']:.2f} s" if e_new.get("step_seconds") else None,
    )
    dur = _pair(
        _hours(e_old.get("duration_seconds")) if e_old else None,
        _hours(e_new.get("duration_seconds")) if e_new else None,
    )
    if step or dur:
        ch.lines.append(
            "step time: " + (step or "unchanged") + "; duration: " + (dur or "unchanged")
        )
    title = cost_check.SECTION_TITLE
    c_old, c_new = _row(base, title, old), _row(head, title, new)
    per_h = _pair(
        _usd(c_old.get("onDemandPerHour")) if c_old else None, _usd(c_new.get("onDemandPerHour"))
    )
    run = _pair(_usd(c_old.get("runCost")) if c_old else None, _usd(c_new.get("runCost")))
    if c_new and (per_h or run):
        basis = c_new.get("runCostBasis") or "unknown"
        ch.lines.append(
            f"cost: per run {run or _usd(c_new.get('runCost'))} (duration: {basis}); "
            f"{per_h or _usd(c_new.get('onDemandPerHour'))}/h on-demand"
        )
    q_old, q_new = _row(base, queues.QUEUE_TITLE, old), _row(head, queues.QUEUE_TITLE, new)
    q_text = _queue_text(q_new)
    q = _pair(_queue_text(q_old), q_text)
    if q or q_text:
        ch.lines.append(f"queue: {q or f'{q_text} (unchanged)'}")
    return ch


def _res(per_pod: dict[str, str]) -> str:
    keys = ("nvidia.com/gpu", "cpu", "memory")
    names = {"nvidia.com/gpu": "GPU"}
    return ", ".join(f"{per_pod[k]} {names.get(k, k)}" for k in keys if k in per_pod) or "?"


# --------------------------------------------------------------------------- pools and teams


def _spec(doc: dict, key: str) -> Any:
    return (doc.get("spec") or {}).get(key) or {}


def _reqs(doc: dict, key: str) -> list[str]:
    reqs = (_spec(doc, "template").get("spec") or {}).get("requirements") or []
    return sorted(v for r in reqs if r.get("key") == key for v in r.get("values") or [])


def pool_lines(old: dict | None, new: dict | None) -> list[str]:
    """A Karpenter NodePool's change: instance types and capacity types added/removed, limits."""
    if new is None or old is None:
        return []
    out = []
    for key, label in (
        ("node.kubernetes.io/instance-type", "instance types"),
        ("karpenter.sh/capacity-type", "capacity types"),
    ):
        a, b = set(_reqs(old, key)), set(_reqs(new, key))
        if a != b:
            parts = [f"+{x}" for x in sorted(b - a)] + [f"-{x}" for x in sorted(a - b)]
            out.append(f"{label}: {' '.join(parts)} (now {', '.join(sorted(b)) or 'any'})")
    return out + _changed("limit", _spec(old, "limits"), _spec(new, "limits"))


def quota_lines(old: dict | None, new: dict | None) -> list[str]:
    """A team's ResourceQuota (`hard`) or ClusterQueue (nominal quota per flavor) change."""
    if new is None or old is None:
        return []
    if new.get("kind") == "ResourceQuota":
        return _changed("quota", _spec(old, "hard"), _spec(new, "hard"))

    def nominal(doc: dict) -> dict[str, str]:
        got = {}
        for g in _spec(doc, "resourceGroups"):
            for fl in g.get("flavors") or []:
                for r in fl.get("resources") or []:
                    got[f"{fl.get('name')}/{r.get('name')}"] = str(r.get("nominalQuota"))
        return got

    return _changed("nominal quota", nominal(old), nominal(new))


def _changed(label: str, a: dict, b: dict) -> list[str]:
    """`label key: old → new` for every key whose value differs ('none' where absent)."""
    return [
        f"{label} {k}: {a.get(k, 'none')} → {b.get(k, 'none')}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
