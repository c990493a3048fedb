"""What a change means for each job, pool and team, in their own terms (docs/pr-review.md,
"Jobs"), every figure read from each side's plan sections (a side without them: the new value).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainforge.core.contract import GPU_RESOURCE
from trainforge.core.labels import INSTANCE_TYPE, KARPENTER_CAPACITY_TYPE
from trainforge.jobs.duration import duration_text
from trainforge.jobs.estimate import gib, memory_unit
from trainforge.plan import ckpt_compat as CC
from trainforge.plan.checks import cost_check, estimates, queues
from trainforge.plan.checks.estimates import step_text
from trainforge.plan.diff import argv_diff
from trainforge.plan.job_view import JobView
from trainforge.plan.kueue.objects import cluster_queue
from trainforge.plan.price_facts import usd as _usd
from trainforge.plan.verdict import admission


@dataclass
class JobChange:
    ident: str
    what: str  # added | removed | replaced | updated
    lines: list[str] = field(default_factory=list)
    compat: CC.Compat | None = None
    old: JobView | None = None
    new: JobView | None = None


def _row(sections: dict[str, Any] | None, title: str, view: JobView) -> dict:
    """The job's row in a side's section `title` (by team and name, else by name); {} if none."""
    data = (sections or {}).get(title)
    rows = data.get("jobs", []) if isinstance(data, dict) else data or []
    named = [
        r for r in rows if isinstance(r, dict) and (r.get("job") or r.get("name")) == view.name
    ]
    exact = [r for r in named if (r.get("team") or "") == view.namespace]
    return (exact or named or [{}])[0]


def _pair(old: str | None, new: str | None) -> str | None:
    """`old -> new`, `new` alone when there is no old, None when equal."""
    if old == new:
        return None
    return new if old is None else f"{old} → {new}"


def memory_text(row: dict) -> str | None:
    """The estimate's memory per GPU or process (`memory_unit`), in the estimates section's."""
    total, cap = row.get("memory_total_bytes"), row.get("memory_capacity_bytes")
    if total is None:
        return None
    gpu = f" {row['gpu']}" if row.get("gpu") else ""
    return f"{gib(total)} ({total / cap:.0%} of {gib(cap)}{gpu})" if cap else gib(total)


def flag_changes(old: JobView, new: JobView) -> list[str]:
    out = []
    for path, was, now in argv_diff(old.command[1:], new.command[1:], ""):
        flag = path.strip()
        if was is not None and now is not None:
            out.append(f"`{flag} {was} → {now}`")
            continue
        value = now if was is None else was
        shown = flag if value == "(set)" else f"{flag} {value}"
        out.append(f"`{shown}` {'added' if was is None else 'removed'}")
    return out


def job_change(
    old: JobView | None,
    new: JobView | None,
    base: dict[str, Any] | None,
    head: dict[str, Any] | None,
    replaced: bool,
) -> JobChange:
    """The job's diff in its own terms; `base`/`head`: each side's sections by title."""
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
    was, now = _figures(old, base), _figures(new, head)
    pair = {key: _pair(was.get(key), value) for key, value in now.items()}
    if pair["pods"]:
        ch.lines.append(f"pods: {pair['pods']}")
    if pair["GPUs"] and new.gpus_per_pod:
        ch.lines.append(f"GPUs: {pair['GPUs']}")
    if pair["memory"]:
        memory, unit = pair["memory"], now["memory_unit"]
        if was.get("memory") and was.get("memory_unit") != unit:  # a CPU pool's job moved
            memory = f"{was['memory']} per {was['memory_unit']} → {now['memory']}"
        ch.lines.append(f"memory per {unit} (estimate): {memory}")
    if pair["step"] or pair["duration"]:
        step, duration = pair["step"] or "unchanged", pair["duration"] or "unchanged"
        ch.lines.append(f"step time: {step}; duration: {duration}")
    if now["run"] is not None and (pair["hour"] or pair["run"]):
        ch.lines.append(
            f"cost: per run {pair['run'] or now['run']} (duration: {now['basis']}); "
            f"{pair['hour'] or now['hour']}/h on-demand"
        )
    if pair["queue"] or now["queue"]:
        ch.lines.append(f"queue: {pair['queue'] or now['queue'] + ' (unchanged)'}")
    return ch


def _figures(view: JobView | None, sections: dict[str, Any] | None) -> dict[str, str | None]:
    """One side's figures of a job as text, from its check sections; {} without the job."""
    if view is None:
        return {}
    est = _row(sections, estimates.TITLE, view)
    cost = _row(sections, cost_check.SECTION_TITLE, view)
    queue = _row(sections, queues.QUEUE_TITLE, view)
    # step and duration on the type the pool launches for the job (`runOn`), else the pool's
    run_on = est.get("runOn") or est
    d = run_on.get("duration_seconds")
    return {
        "pods": f"{view.pods} pods x {_res(view.per_pod)}",
        "GPUs": str(view.pods * view.gpus_per_pod),
        "memory": memory_text(est),
        "memory_unit": memory_unit(est.get("gpu")),
        "step": step_text(run_on["step_seconds"]) if run_on.get("step_seconds") else None,
        "duration": (duration_text(d) if isinstance(d, int | float) else "?") if est else None,
        "run": _usd(cost.get("runCost")) if cost else None,
        "hour": _usd(cost.get("onDemandPerHour")) if cost else None,
        "basis": cost.get("runCostBasis") or "unknown",
        "queue": admission(queue) if queue else None,
    }


def _res(per_pod: dict[str, str]) -> str:
    names = {GPU_RESOURCE: "GPU", "cpu": "cpu", "memory": "memory"}
    return ", ".join(f"{per_pod[k]} {n}" for k, n in names.items() if k in per_pod) or "?"


def _spec(doc: dict, key: str) -> Any:
    return (doc.get("spec") or {}).get(key) or {}


def _reqs(doc: dict, key: str) -> list[str]:
    reqs = (_spec(doc, "template").get("spec") or {}).get("requirements") or []
    return sorted(v for r in reqs if r.get("key") == key for v in r.get("values") or [])


def pool_lines(old: dict, new: dict) -> list[str]:
    """A Karpenter NodePool's change: instance types and capacity types added/removed, limits."""
    out = []
    for key, label in (
        (INSTANCE_TYPE, "instance types"),
        (KARPENTER_CAPACITY_TYPE, "capacity types"),
    ):
        a, b = set(_reqs(old, key)), set(_reqs(new, key))
        if a != b:
            parts = [f"+{x}" for x in sorted(b - a)] + [f"-{x}" for x in sorted(a - b)]
            out.append(f"{label}: {' '.join(parts)} (now {', '.join(sorted(b)) or 'any'})")
    return out + _changed("limit", _spec(old, "limits"), _spec(new, "limits"))


def quota_lines(old: dict, new: dict) -> list[str]:
    """A team's ResourceQuota (`hard`) or ClusterQueue (nominal quota per flavor, as the Kueue
    model reads it: kueue.objects.cluster_queue) change."""
    if new.get("kind") == "ResourceQuota":
        return _changed("quota", _spec(old, "hard"), _spec(new, "hard"))

    def nominal(doc: dict) -> dict[str, str]:
        quotas = cluster_queue(doc).nominal.items()
        return {f"{f}/{r}": queues.amount(r, v) for f, rs in quotas for r, v in rs.items()}

    return _changed("nominal quota", nominal(old), nominal(new))


def _changed(label: str, old: dict, new: dict) -> list[str]:
    """`label key: old → new` for every key whose value differs ('none' where absent)."""
    return [
        f"{label} {k}: {old.get(k, 'none')} → {new.get(k, 'none')}"
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    ]
