"""Plan check: what decides each training job's resume (ckpt_compat: the bundled runtime's state
layout, or own code's state fingerprint), recorded so `plan --diff` can compare base and head
(docs/pr-review.md, "Will a replaced job resume?").
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pathlib
import sys
from typing import Any

from trainforge.jobs import trainjob
from trainforge.plan import ckpt_compat as CC
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.data_safety import stack_of
from trainforge.plan.job_view import job_views
from trainforge.training.config import FRESH_BY_DIR, FRESH_BY_RENAME, FRESH_BY_RESUME

TITLE = "Checkpoint state (what a replacement resumes from)"
RULE = "TF_CKPT_CANNOT_RESUME"
# a change the resumed run does not apply (--lr, --weight-decay: training/checkpoint.py restores
# the optimizer's param groups and the scheduler's base_lrs)
NOT_APPLIED = "TF_CKPT_CHANGE_NOT_APPLIED"
# a replacement that finds none of the old job's checkpoints (ckpt_compat.LOST)
LOST = "TF_CKPT_LOST"
RULES = {
    RULE: f"decide: {FRESH_BY_RENAME}, {FRESH_BY_DIR} (relative paths are on the team's FSx "
    "mount: checkpoints/<namespace>/<job>-v2 sits beside the default; a bare v2 is <mount>/v2, "
    f"which any job naming v2 shares), {FRESH_BY_RESUME}, or waive TF_CKPT_CANNOT_RESUME for "
    "the job with the reason",
    LOST: "decide: keep the old checkpoints where the new job looks (the volume its checkpoint "
    "directory was on, or checkpoint.s3Mirror on: the runtime downloads the newest checkpoint "
    "from the mirror when the directory has none), or accept that it starts at step 0: waive "
    "TF_CKPT_LOST for the job with the reason (docs/pr-review.md)",
    NOT_APPLIED: "decide: to train with the new value, start fresh: set checkpoint.dir to a new "
    "directory (or rename the job), or checkpoint.resume: never; to keep resuming with the "
    "checkpoint's value (the change is for later fresh runs), waive TF_CKPT_CHANGE_NOT_APPLIED "
    "for the job with the reason (docs/pr-review.md)",
}


def digest(value: Any) -> str:
    """12 hex digits naming a JSON-able value (a layout's tensors, a fingerprint)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def call_fingerprint(root: pathlib.Path | None, spec: Any) -> tuple[Any, str | None]:
    """(value, error) of a job's declared `checkpoint.fingerprint` for its own arguments."""
    source, ep = spec.checkpoint.fingerprint, spec.entrypoint
    code_dir = ep.code_dir or "."  # a script's own directory unless set (the job spec's rule)
    folder = str(((root or pathlib.Path.cwd()) / code_dir).resolve())
    mod_name, _, fn_name = source.partition(":")
    sys.path.insert(0, folder)
    try:
        sys.modules.pop(mod_name, None)
        fn = getattr(importlib.import_module(mod_name), fn_name)
        value = fn(list(ep.args))
        return json.loads(json.dumps(value, default=str)), None
    except Exception as e:  # noqa: BLE001 - the user's code: reported, never raised
        return None, f"{source} in {code_dir} failed: {type(e).__name__}: {e}"
    finally:
        sys.path.remove(folder)
        sys.modules.pop(mod_name, None)


def job_state(view: Any, sections: dict[str, Any] | None) -> CC.JobState:
    """A diff side's JobState: the job's flags and this check's record in that side's sections
    (a layout, stored once per digest; an own-code fingerprint)."""
    data = (sections or {}).get(TITLE)
    data = data if isinstance(data, dict) else {}
    rec = next((r for r in data.get("jobs") or [] if r.get("ident") == view.ident), {})
    layout = (data.get("layouts") or {}).get(rec.get("digest"))
    return CC.JobState(
        args=view.runtime_args,
        world_size=view.world_size,
        checkpoint_dir=view.checkpoint_dir,
        resume=view.resume,
        fingerprint=rec.get("fingerprint"),
        fingerprint_source=rec.get("fingerprintSource"),
        layout=CC.Layout(**layout) if layout else None,
    )


def check(ctx: PlanContext) -> CheckResult:
    views = job_views({o.ident: o.doc for o in ctx.objects})
    if not views:
        return CheckResult()
    jobs = ctx.declared.jobs if ctx.declared is not None else []
    declared = {(dj.target.namespace, dj.spec.name): dj.spec for dj in jobs}
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    layouts: dict[str, Any] = {}  # digest -> layout: jobs of one shape share one entry
    for ident, v in sorted(views.items()):
        rec: dict[str, Any] = {"ident": ident, "checkpointDir": v.checkpoint_dir}
        data.append(rec)
        spec = declared.get((v.namespace, v.name))
        source = spec.checkpoint.fingerprint if spec is not None else None
        if v.runtime_args is not None:
            try:
                layout = CC.layout_for_args(v.runtime_args)
            except CC.LayoutError as e:
                lines.append(f"{ident}: no state layout ({e})")
                rec["error"] = str(e)
                continue
            rec["digest"] = key = digest(layout.tensors)
            layouts[key] = layout._asdict()
            n_model = sum(1 for k in layout.tensors if k.startswith("model."))
            lines.append(
                f"{ident}: {len(layout.tensors)} tensors ({n_model} model, "
                f"{len(layout.tensors) - n_model} optimizer), layout {key}, "
                f"in {v.checkpoint_dir or 'no checkpoint directory'}"
            )
        elif not source:
            lines.append(
                f"{ident}: own code without a state fingerprint: a replacement's resume is "
                "not checked (checkpoint.fingerprint: module:function)"
            )
        else:
            value, err = call_fingerprint(ctx.root, spec)
            rec["fingerprintSource"] = source
            if err:
                lines.append(f"{ident}: own code; state fingerprint {err}")
                rec["error"] = err
            else:
                rec["fingerprint"] = value
                lines.append(f"{ident}: own code; state fingerprint {source} = {digest(value)}")
    return CheckResult(sections=[Section(TITLE, lines, {"jobs": data, "layouts": layouts})])


def diff_check(ctx: Any) -> CheckResult:
    """Will each job the diff replaces resume from the old one's checkpoints?
    (review.DiffContext in, findings out)"""
    findings = []
    b, h = stack_of(ctx.base.records), stack_of(ctx.head.records)  # plan folders name theirs
    other = (b, h) if b and h and b != h else None  # each stack has its own bucket
    for ident, ch in ctx.jobs.items():
        if ch.what != "replaced" or ch.old is None or ch.new is None:
            continue
        old, new = job_state(ch.old, ctx.base.sections), job_state(ch.new, ctx.head.sections)
        for state, view, side in ((old, ch.old, ctx.base), (new, ch.new, ctx.head)):
            doc = side.objects.get(view.ident)  # where its checkpoints live: the pod volumes
            runtimes = trainjob.runtimes_in(side.objects.values())  # a TrainJob's pod's
            state.store = CC.store(doc, state.checkpoint_dir, view.checkpoint_s3, runtimes)
        ch.compat = CC.classify(old, new, other)
        if ch.compat.blocking:
            rule = RULE
            message = (
                f"replaced, and the new job {ch.compat.verdict} from "
                f"{new.checkpoint_dir}: {ch.compat.detail}"
            )
        elif ch.compat.verdict == CC.LOST:
            rule = LOST
            message = f"replaced, and the new job {CC.LOST}: {ch.compat.detail}"
        elif ch.compat.caveats:
            rule = NOT_APPLIED
            flags = ", ".join(c.split(" is NOT applied")[0] for c in ch.compat.caveats)
            message = (
                f"replaced, and the new job resumes from {new.checkpoint_dir} without the "
                f"change: {flags} is NOT applied (the restored optimizer and LR scheduler "
                "keep the checkpoint's values)"
            )
        else:
            continue
        names = frozenset({ident, ch.new.name})
        findings.append(Finding(ident, rule, message, RULES[rule], names=names))
    return CheckResult(findings=findings)
