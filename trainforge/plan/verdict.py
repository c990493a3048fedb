"""The plan's first screen: the verdict, in at most 40 lines; everything else is in the report.
What it holds and why, and its markdown twin at the head of the PR comment: docs/pr-review.md
("Verdict first").
"""

from __future__ import annotations

import textwrap
from fractions import Fraction
from typing import Any

from trainforge.core.contract import GPU_RESOURCE
from trainforge.jobs.duration import DEADLINE
from trainforge.plan.checks.cost_check import DEAREST, OWN_NODES, waiting_line
from trainforge.plan.checks.cost_check import SECTION_TITLE as COST_TITLE
from trainforge.plan.checks.queues import QUEUE_TITLE, amount, preempt_words, start_text
from trainforge.plan.cost import row_groups, row_totals
from trainforge.plan.diff import change_text, unknown_text
from trainforge.plan.price_facts import usd as _usd
from trainforge.plan.waivers import stale_note

MAX_LINES = 40
WIDTH = 100  # the verdict's lines wrap here (whole words), for a terminal or a CI log
MAX_FINDINGS = 5  # shown with why/fix; the rest are counted and listed in the report


def section_data(result: Any, title: str) -> Any:
    """The JSON data of the result's section with this title (None without one)."""
    return next((s.data for s in result.sections if s.title == title), None)


def _priced(job: dict[str, Any], key: str) -> bool:
    return isinstance(job.get(key), int | float)


def cost_totals(cost: Any) -> dict[str, Any] | None:
    """The cost section's data with the verdict's sums: what the jobs that run at once add per
    hour (waiting ones are listed, not counted; nodes a node group keeps up anyway are in the
    platform's figure, not again here) and what the runs of the jobs admitted at all cost."""
    if not isinstance(cost, dict):
        return None
    jobs = cost.get("jobs", [])
    # the cost model's split and sums of the rows (a base report's too): one reading of which
    # jobs run at once and which are paid, for the figures and the jobs named beside them
    groups = row_groups(jobs)
    sums = row_totals(jobs)
    return {
        **cost,
        **sums,
        **groups._asdict(),
        "jobsPerHour": sums["runningPerHour"] - sums["runningInFixedPerHour"],
        "unpricedRates": [j for j in groups.running if not _priced(j, "onDemandPerHour")],
        "unpricedRuns": [j for j in groups.counted if not _priced(j, "runCost")],
    }


def _unpriced(jobs: list[dict[str, Any]]) -> str:
    """`1 job without a price: team/a and 1 job without a run length: team/b` (the report's
    warnings say which price the table lacks)."""
    groups: dict[str, list[str]] = {}
    for j in jobs:
        why = "without a run length" if _priced(j, "onDemandPerHour") else "without a price"
        groups.setdefault(why, []).append(f"{j.get('team')}/{j.get('name')}")
    return " and ".join(
        f"{len(names)} job{'s' if len(names) > 1 else ''} {why}: {', '.join(names)}"
        for why, names in groups.items()
    )


def cost_lines(result: Any, base_sections: dict[str, Any] | None) -> list[str]:
    new = cost_totals(section_data(result, COST_TITLE))
    if new is None:
        return ["Cost: no cost report for this stack"]
    old = cost_totals((base_sections or {}).get(COST_TITLE)) if base_sections else None
    unknown = unknown_text(new.get("fixedUnknown"))

    def change(key: str) -> str:
        """Against the base, in the diff's words (diff.change_text): the priced figures' change
        and the unpriced items (platform parts, jobs) it removes or adds."""
        if not old:
            return ""
        lacking = {"fixedPerMonthKnown": lambda t: t.get("fixedUnknown") or [],
                   "jobsPerHour": lambda t: [f"{j.get('team')}/{j.get('name')}"
                                             for j in t["unpricedRates"]],
                   "runCosts": lambda t: [f"{j.get('team')}/{j.get('name')}"
                                          for j in t["unpricedRuns"]]}[key]  # fmt: skip
        was, now = lacking(old), lacking(new)
        was += [u for u in now if u not in was]  # the new ones are named once, after the figure
        return f" ({change_text(old.get(key), new.get(key), was, now)})"

    fixed = (
        f"Cost: platform {_usd(new.get('fixedPerHourKnown'))}/h = "
        f"{_usd(new.get('fixedPerMonthKnown'))}/month{change('fixedPerMonthKnown')}{unknown}"
    )
    if not new["jobs"]:
        return [fixed]
    unpriced = new["unpricedRates"]
    running, priced = len(new["running"]), len(new["running"]) - len(unpriced)
    if priced or not running:
        rate = f"{_usd(new['jobsPerHour'])}/h while running{change('jobsPerHour')}"
    else:
        rate = "cost per hour unknown"
    if in_fixed := new.get("runningInFixedPerHour"):
        rate += f" (their {_usd(in_fixed)}/h on node groups' always-on nodes is in the platform's)"
    if unpriced:
        rate += f" + unknown for {_unpriced(unpriced)}" if priced else f" ({_unpriced(unpriced)})"
    if priced:
        rate += f", {OWN_NODES}" + (
            DEAREST if any(j.get("workers") is not None for j in new["jobs"]) else ""
        )
    lacking = new["unpricedRuns"]
    # a run timed by its activeDeadlineSeconds costs at most its figure (the report's "<=")
    at_most = "at most " if any(j.get("runCostBasis") == DEADLINE for j in new["counted"]) else ""
    if not lacking:
        runs = f"run costs {at_most}{_usd(new['runCosts'])} in all{change('runCosts')}"
    elif len(lacking) < len(new["counted"]):
        runs = (
            f"run costs {at_most}{_usd(new['runCosts'])} for the priced jobs + unknown for "
            f"{_unpriced(lacking)}"
        )
    else:
        runs = f"run cost unknown ({_unpriced(lacking)})"
    if paid := new.get("runCostInFixed"):  # each job's own share, not a bill on top
        runs += f" (of which {_usd(paid)} on node groups' always-on nodes, paid in the platform's)"
    out = [fixed, f"      + jobs: {running} of {len(new['jobs'])} run at once, {rate}; {runs}"]
    if len(new["waiting"]) > 3:
        return [*out, f"      {len(new['waiting'])} jobs wait or are never admitted (full report)"]
    return out + [f"      {waiting_line(j)}" for j in new["waiting"]]


def admission(row: dict[str, Any]) -> str:
    """A job's admission from its queue-section row (trainforge.plan.checks.queues), as the
    verdict and the PR's job lines say it: never admitted or waits (why, and the expected
    start), admitted within its nominal quota, or what it borrows and who may reclaim it."""
    reason = row.get("reason") or ""
    if row.get("state") == "never":
        return f"never admitted ({reason})"
    if row.get("state") != "runs":
        text = reason if reason.startswith("waits") else f"waits ({reason})" if reason else "waits"
        start = row.get("expectedStartSeconds")
        if start is None:
            return f"{text}; expected start unknown"
        stop = row.get("preemptedStopSeconds") or 0.0
        preempts = [(n, stop) for n in row.get("preempts") or []]
        return f"{text}; {start_text(start, bool(row.get('expectedStartIsBound')), preempts)}"
    lent = row.get("borrowing")
    stop = row.get("preemptedStopSeconds") or 0.0
    then = "; " + preempt_words((n, stop) for n in row["preempts"]) if row.get("preempts") else ""
    if not lent:
        return f"admitted on {row.get('flavor')} within its nominal quota{then}"
    shown = {k: v for k, v in lent.items() if k == GPU_RESOURCE} or lent
    what = ", ".join(amount(k, Fraction(v)) for k, v in sorted(shown.items()))
    who = row.get("reclaimers") or []
    back = (
        f"team {' or '.join(who)} may reclaim it (preempts it)"
        if who
        else "nobody reclaims it (the cohort's own share)"
    )
    return (
        f"borrows {what} in pool {row.get('flavor')} from cohort {row.get('cohort')}; {back}{then}"
    )


def _queue_lines(result: Any, pick: Any) -> list[str]:
    rows = [r for r in section_data(result, QUEUE_TITLE) or [] if isinstance(r, dict)]
    return [f"{r.get('team')}/{r.get('job')}: {admission(r)}" for r in rows if pick(r)]


def not_admitted(result: Any) -> list[str]:
    """`team/job: admission` of each job that does not start at once."""
    return _queue_lines(result, lambda r: r.get("state") != "runs")


def borrowing(result: Any) -> list[str]:
    """`team/job: admission` of each job that runs at once only by borrowing from its cohort."""
    return _queue_lines(result, lambda r: r.get("state") == "runs" and r.get("borrowing"))


def breaking(review: Any) -> list[str]:
    if review is None:
        return []
    out = []
    for ident, ch in review.jobs.items():
        if ch.what == "replaced":
            verdict = ch.compat.short() if ch.compat else "resume not checked"
            out.append(f"{ident}: replaced (running pods stop); {verdict}")
        elif ch.what == "removed":
            out.append(f"{ident}: removed (running pods stop)")
    if others := [k for k in review.replaced if k not in review.jobs]:
        out.append(f"{len(others)} other objects replaced: {', '.join(sorted(others)[:3])}")
    if n_removed := len(review.objects.removed) + len(review.resources.removed):
        out.append(f"{n_removed} objects/resources removed (see the report)")
    return out


def _wrap(text: str, first: str, rest: str | None = None) -> list[str]:
    """`text` after `first` in lines of at most WIDTH, continued under `rest` (default: spaces
    as wide as `first`); a word (a path, a URL) is never split."""
    return textwrap.wrap(
        " ".join(text.split()),
        width=WIDTH,
        initial_indent=first,
        subsequent_indent=" " * len(first) if rest is None else rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def warnings(result: Any) -> list[tuple[str, str]]:
    """(section title, text) of each warning the verdict counts: a section's `warning:` lines,
    and the queue section's `quota:` line (a quota the pools cannot hold)."""
    return [
        (s.title, line.strip().removeprefix("warning: "))
        for s in result.sections
        for line in s.lines
        if line.strip().startswith("warning:")
        or (s.title == QUEUE_TITLE and line.startswith("quota: "))
    ]


def _listed(items: list[Any], most: int, lines: Any = None) -> list[str]:
    """The first `most` items (each as `lines(item)`, default: wrapped under two spaces) and
    `… and N more (full report)` for the rest: a list the verdict counts shows what it drops."""
    lines = lines or (lambda b: _wrap(b, "  ", "    "))
    more = [f"  … and {len(items) - most} more (full report)"] if len(items) > most else []
    return [line for b in items[:most] for line in lines(b)] + more


def verdict_lines(
    result: Any, review: Any = None, report: str | None = None, stack: str = ""
) -> list[str]:
    """The first screen. Long items wrap (whole words); the report holds every detail."""
    failing, waived = result.failing, result.waived
    admit, brk, lent = not_admitted(result), breaking(review), borrowing(result)
    status = "CLEAN" if not failing else f"{len(failing)} finding(s) need a fix or a decision"
    base = f" vs {review.base.label}" if review is not None else ""
    lines = [f"trainforge plan --stack {stack}{base}: {status}"]
    if failing:
        lines.append(f"Violations ({len(failing)}):")
        lines += _listed(failing, MAX_FINDINGS, lambda f: [f"  [{f.rule}] {f.resource}",
                         *_wrap(f.message, "      why: "), *_wrap(f.fix, "      fix: ")])  # fmt: skip
    if brk:
        lines += ["Breaking changes:", *_listed(brk, 6)]
    if warns := [f"{title.split(' (')[0]}: {text}" for title, text in warnings(result)]:
        lines += [f"Warnings ({len(warns)}):", *_listed(warns, 3)]
    lines += cost_lines(result, review.base.sections if review is not None else None)
    lines.append(
        "Jobs not admitted (all declared jobs submitted at once): "
        + ("none" if not admit else f"{len(admit)}")
    )
    lines += _listed(admit, 4)
    if lent:
        lines += [f"Jobs that run only by borrowing ({len(lent)}):", *_listed(lent, 3)]
    if waived:
        lines.append(f"Waived ({len(waived)}): " + "; ".join(
            f"[{w.rule}] {w.resource}{f' ({w.image})' if w.image else ''}: {w.waived}"
            for w in waived[:3]
        ))  # fmt: skip
    lines += [f"Note: {stale_note(w)}" for w in result.unused_waivers[:2]]
    v = result.validation
    lines.append(
        f"{result.inventory.to_create} resources to create, {len(result.objects)} "
        f"Kubernetes objects (validated: {v['pass']} pass, {v['fail']} fail, "
        f"{v['unchecked']} without a schema)"
    )
    if not failing:
        lines.append("Policy and validation: clean")
    if report:
        lines.append(f"Full report: {report}")
    if len(lines) > MAX_LINES:  # never push the pointer off the first screen
        lines = [*lines[: MAX_LINES - 2], "… (verdict clipped; see the full report)", lines[-1]]
    return lines


def verdict_markdown(result: Any, review: Any = None, stack: str = "") -> list[str]:
    """The same verdict as the head of the PR comment."""
    failing = result.failing
    status = "✅ clean" if not failing else f"❌ {len(failing)} finding(s) need a fix or a decision"
    lines = [f"## trainforge plan --stack {stack}: {status}", ""]
    for f in failing[:MAX_FINDINGS]:
        lines += [f"- **[{f.rule}]** `{f.resource}`: {f.message}", f"  - fix: {f.fix}"]
    if len(failing) > MAX_FINDINGS:
        lines.append(f"- … and {len(failing) - MAX_FINDINGS} more")
    if brk := breaking(review):
        lines += ["", "**Breaking changes**", ""] + [f"- {b}" for b in brk]
    cost = cost_lines(result, review.base.sections if review else None)
    admit = not_admitted(result)
    lines += ["", *[f"{c.strip()}  " for c in cost], "",
              "**Jobs not admitted** (all declared jobs submitted at once): "
              + ("none" if not admit else str(len(admit))), *[f"- {a}" for a in admit]]  # fmt: skip
    if lent := borrowing(result):
        lines += [f"**Jobs that run only by borrowing**: {len(lent)}", *[f"- {b}" for b in lent]]
    return [*lines, ""]
