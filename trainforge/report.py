"""`trainforge report RUN_DIR`: what a run left behind, for any code: a text summary and a PNG.

Why: "did it learn, how fast, what went wrong" should be answerable for every job, not only the
bundled runtime's. The report reads whatever the run left (each source optional):

* the run ledger (`<checkpoint dir>/.trainforge/run.json`, trainforge/training/ledger.py):
  attempts, how each ended, restarts and their causes. The runtime keeps it, and so does the
  launcher's wrapper for your own code (trainforge/training/usercode.py);
* the checkpoints in the contract's checkpoint directory (`step_<N>` folders or files);
* `metrics.jsonl` in RUN_DIR (one JSON object per log step, with at least `step`): what the
  runtime and `MetricsReporter` write, or one line of your own (docs/jobs.md);
* `summary.json` (the runtime's, when the run finished).

A panel without data is left out, and the text says which and why. Restarts are the run
ledger's (`Run.restarts`): a step that goes back in metrics.jsonl is a restart (the resumed
process logs steps again) or another run appended to the same folder (run-local twice), and
only the ledger tells them apart (a run after a finished one begins a fresh ledger,
ledger.begin_attempt). Without a ledger the metrics are all there is: each such step counts,
and the text says so. matplotlib is an optional extra (`trainforge[report]`);
without it the text summary is still written.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainforge.training.layout import other_entries, saved_checkpoints

INSTALL_HINT = "pip install 'trainforge[report]' (matplotlib==3.11.2)"


class ReportError(ValueError):
    """The run folder cannot be reported on (one-line message, exit 2)."""


@dataclass
class Attempt:
    """The log lines of one process's run (the first, or one after a restart)."""

    records: list[dict[str, float]] = field(default_factory=list)
    resumed_from: float | None = None  # checkpoint step it resumed at (None: the first)

    def series(self, key: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
        pts = [(r["step"], r[key] * scale) for r in self.records if _finite(r.get(key))]
        return [p[0] for p in pts], [p[1] for p in pts]


@dataclass
class Checkpoint:
    step: int
    name: str
    complete: bool  # a DCP folder without `.metadata` was cut short


@dataclass
class Run:
    path: Path
    attempts: list[Attempt]  # from metrics.jsonl (empty without it)
    summary: dict[str, Any] | None
    skipped_lines: int = 0
    checkpoint_dir: Path | None = None
    saved: list[Checkpoint] | None = None  # None: no checkpoint directory found
    ledger: dict[str, Any] | None = None  # run.json of the run ledger
    missing: list[str] = field(default_factory=list)  # "what: why" of each absent source

    @property
    def ledger_attempts(self) -> list[dict[str, Any]]:
        attempts = (self.ledger or {}).get("attempts") or (self.summary or {}).get("attempts")
        return [a for a in attempts or [] if isinstance(a, dict)]

    @property
    def records(self) -> list[dict[str, float]]:
        return [r for a in self.attempts for r in a.records]

    @property
    def name(self) -> str:
        return (self.summary or {}).get("run_name") or self.path.name

    @property
    def checkpoints(self) -> list[float]:
        """Steps a checkpoint was completed at, in order: the checkpoint directory's complete
        ones when it is here, else what the metrics recorded."""
        if self.saved:
            return sorted(float(c.step) for c in self.saved if c.complete)
        steps = {r["checkpoint_step"] for r in self.records if _finite(r.get("checkpoint_step"))}
        final = ((self.summary or {}).get("checkpoint") or {}).get("checkpoint_step")
        if _finite(final):
            steps.add(final)
        return sorted(steps)

    @property
    def restarts(self) -> int:
        """Restarts of the run: its ledger's attempts less one (run.json, else summary.json's
        copy of it), the one count that a second run appended to this folder does not raise.
        Without a ledger: the count the runtime logged from its ledger, else the steps that
        went back in metrics.jsonl (`appended_runs` is then unknown)."""
        if self.ledger_attempts:  # an attempt that continued a finished run is no restart
            return sum(1 for a in self.ledger_attempts[1:] if not _continued(a))
        counted = max((r.get("restarts", 0) for r in self.records), default=0)
        return max(len(self.attempts) - 1, int(counted) if _finite(counted) else 0)

    @property
    def appended_runs(self) -> int:
        """Earlier runs whose metrics this folder's metrics.jsonl holds before the ledger's
        run: the steps that went back that the ledger has no restart for (they come first:
        the ledger's run wrote last). 0 without a ledger (nothing tells them apart)."""
        if not self.ledger_attempts:
            return 0
        return max(0, len(self.attempts) - 1 - self.restarts)


@dataclass(frozen=True)
class Resume:
    """One restart as the report draws it: the step the new attempt resumed from (`at`,
    None when nothing recorded it), the last step the failed attempt logged (`after`: the
    step it reached only where the run logs every step), and the first step logged after the
    restart (`logged_from`)."""

    at: float | None
    after: float | None
    logged_from: float | None

    @property
    def redone(self) -> float | None:
        """Steps done twice: from the resumed step to the failed attempt's last logged step
        (a lower bound where steps after it ran unlogged)."""
        if self.at is None or self.after is None or self.after < self.at:
            return None
        return self.after - self.at


def resumes(run: Run) -> list[Resume]:
    """Every restart, the resumed step from the run ledger (rank 0 records the step restored:
    the runtime's Goodput.begin, CheckpointManager.restore for your own code), else from the
    metrics' `checkpoint_step` before the restart; never the first step logged after it,
    which is only where logging picked up again."""
    # the steps that went back before the ledger's run are other runs': no restart of it
    splits = list(zip(run.attempts, run.attempts[1:], strict=False))[run.appended_runs :]
    ledger = run.ledger_attempts
    if len(ledger) < 2:
        return [
            Resume(a.resumed_from, prev.records[-1]["step"], a.records[0]["step"])
            for prev, a in splits
        ]
    out = []
    k = 0  # the next metrics split (a step that went back) not yet matched to a restart
    one_to_one = len(ledger) - 1 == len(splits)
    for i in range(1, len(ledger)):
        if _continued(ledger[i]):
            continue  # no restart: it continued the finished run (no step went back)
        r = ledger[i].get("resumed_step")
        r = float(r) if _finite(r) else None
        last = ledger[i - 1].get("last_step")
        after = float(last) if _finite(last) else None
        split = None
        if k < len(splits):
            prev, a = splits[k]
            first, prev_last = a.records[0]["step"], prev.records[-1]["step"]
            if one_to_one or (r is not None and r < first and r <= prev_last):
                split, k = splits[k], k + 1
        if split is not None:
            prev, a = split
            after = max(after or -math.inf, prev.records[-1]["step"])
            if r is None:
                r = a.resumed_from
        if after is not None and r is not None and after < r:
            # the failed attempt wrote the checkpoint the next one resumed from, so it got
            # at least that far: a smaller last step is not where it got (your own code's
            # ledger notes only the step an attempt resumed from) and is not shown
            after = None
        out.append(Resume(r, after, split[1].records[0]["step"] if split else None))
    for prev, a in splits[k:]:  # steps that went back the matching above left unpaired
        out.append(Resume(a.resumed_from, prev.records[-1]["step"], a.records[0]["step"]))
    return out


def _continued(attempt: dict[str, Any]) -> bool:
    """Whether a ledger attempt continued a finished run (RunLedger.resumed)."""
    return _finite(attempt.get("continued_from"))


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def find_checkpoint_dir(run_dir: Path, summary: dict[str, Any] | None) -> Path | None:
    """The run's checkpoint directory: the runtime's --checkpoint-dir from summary.json,
    RUN_DIR/checkpoints (run-local), or the pod layout's sibling (`<fsx>/runs/<ns>/<job>` ->
    `<fsx>/checkpoints/<ns>/<job>`)."""
    candidates = []
    configured = ((summary or {}).get("config") or {}).get("checkpoint_dir")
    if configured:
        candidates.append(Path(configured))
    candidates.append(run_dir / "checkpoints")
    if run_dir.parent.parent.name == "runs":
        candidates.append(
            run_dir.parent.parent.parent / "checkpoints" / run_dir.parent.name / run_dir.name
        )
    return next((c for c in candidates if c.is_dir()), None)


def list_checkpoints(folder: Path) -> list[Checkpoint]:
    """The run's checkpoints, by the one naming rule (training/layout.saved_checkpoints)."""
    return [Checkpoint(c.step, c.name, c.complete) for c in saved_checkpoints(folder)]


def foreign_entries(folder: Path) -> list[str]:
    """Names in the checkpoint directory that `list_checkpoints` does not count (not step_<N>,
    not hidden: the ledger's .trainforge, a save's temporary file): a checkpoint of your own
    code under another name, which neither this report nor trainforge's restore reads."""
    return other_entries(folder)


def _read_metrics(metrics: Path) -> tuple[list[Attempt], int]:
    attempts: list[Attempt] = []
    skipped = 0
    last_step = -math.inf
    last_ckpt: float | None = None
    # a byte a crash left half-written is a skipped line, like a line cut short
    for line in metrics.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            skipped += 1  # e.g. a line cut short by a crash
            continue
        if not isinstance(rec, dict) or not _finite(rec.get("step")):
            skipped += 1
            continue
        if not attempts or rec["step"] <= last_step:
            attempts.append(Attempt(resumed_from=last_ckpt if attempts else None))
        attempts[-1].records.append(rec)
        last_step = rec["step"]
        if _finite(rec.get("checkpoint_step")):
            last_ckpt = rec["checkpoint_step"]
    return attempts, skipped


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _close_last_attempt(ledger: dict[str, Any], ckpt: Path) -> None:
    """The last attempt's end, from its ranks' exit records, when run.json has none: a run
    that stopped for good (a bug, exit 1-127) has no next attempt to write it there
    (RunLedger.begin_attempt does), so the report said only "the last not finished", as of a
    run still going. An attempt without exit records is left as it is (still running, or
    killed before any rank could record why)."""
    from trainforge.training.ledger import EXITS_DIR, LEDGER_DIR, RunLedger  # noqa: PLC0415

    attempts = [a for a in ledger.get("attempts") or [] if isinstance(a, dict)]
    if not attempts or attempts[-1].get("finished") or attempts[-1].get("exit"):
        return
    last = attempts[-1]
    n = last.get("attempt")
    if not isinstance(n, int) or not any(
        (ckpt / LEDGER_DIR / EXITS_DIR / f"attempt_{n:04d}").glob("rank_*.json")
    ):
        return
    # world_size 0: no rank is presumed missing (the report does not know the world size)
    exit_ = RunLedger(ckpt, rank=0, world_size=0, log=lambda m: None).collect_exits(n)
    if exit_.get("reason") != "node_lost":
        last["exit"] = exit_


def load_run(run_dir: Path, checkpoint_dir: Path | None = None) -> Run:
    if not run_dir.is_dir():
        raise ReportError(f"RUN_DIR {run_dir}: not a folder")
    from trainforge.training.ledger import LEDGER_DIR, RUN_FILE  # noqa: PLC0415 - no torch

    missing: list[str] = []
    summary = _read_json(run_dir / "summary.json")
    metrics = run_dir / "metrics.jsonl"
    attempts: list[Attempt] = []
    skipped = 0
    if metrics.is_file():
        attempts, skipped = _read_metrics(metrics)
        if not attempts:
            missing.append(f"metrics: {metrics} has no metrics lines (the run logged no step)")
    else:
        missing.append(
            f"metrics: no {metrics} (the runtime and MetricsReporter write it; your own code "
            "can append one JSON line per step, docs/jobs.md)"
        )
    if checkpoint_dir is not None and not checkpoint_dir.is_dir():
        raise ReportError(f"--checkpoint-dir {checkpoint_dir}: not a folder")
    ckpt = checkpoint_dir or find_checkpoint_dir(run_dir, summary)
    saved = list_checkpoints(ckpt) if ckpt is not None else None
    ledger = _read_json(ckpt / LEDGER_DIR / RUN_FILE) if ckpt is not None else None
    if ckpt is not None and ledger is not None:
        _close_last_attempt(ledger, ckpt)
    if ckpt is None:
        missing.append(
            f"checkpoints and run ledger: no checkpoint directory found (looked for "
            f"{run_dir / 'checkpoints'}; name it with --checkpoint-dir)"
        )
    elif ledger is None:
        missing.append(
            f"run ledger: no {ckpt / LEDGER_DIR / RUN_FILE} (kept by the runtime and by the "
            "launcher's wrapper of your code)"
        )
    if not attempts and not saved and ledger is None and summary is None:
        raise ReportError(
            f"RUN_DIR {run_dir}: nothing to report: no metrics.jsonl, summary.json, checkpoints "
            "or run ledger (RUN_DIR is a run's output directory; run-local prints where)"
        )
    return Run(run_dir, attempts, summary, skipped, ckpt, saved, ledger, missing)


# --- text -----------------------------------------------------------------------------------


def _rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def summary_text(run: Run) -> str:
    s = run.summary or {}
    recs = run.records
    lines = [_headline(run)]
    if recs:
        lines += _metric_lines(run)
    lines.append(_checkpoint_line(run))
    lines += _attempt_lines(run)
    if s.get("elapsed_seconds") is not None:
        # elapsed_seconds is the training loop only; the attempt also spent its set-up
        setup = s.get("setup_seconds")
        before = f"set-up {setup:,.1f}s, " if setup is not None else ""
        lines.append(f"last attempt: {before}training loop {s['elapsed_seconds']:,.1f}s")
    if run.skipped_lines:
        lines.append(f"note: skipped {run.skipped_lines} unreadable line(s) of metrics.jsonl")
    lines += [f"not shown: {m}" for m in [*run.missing, *missing_panels(run)]]
    return "\n".join(lines) + "\n"


def _headline(run: Run) -> str:
    s = run.summary or {}
    recs = run.records
    total = (recs[-1].get("total_steps") if recs else None) or (s.get("config") or {}).get("steps")
    done = s.get("steps", recs[-1]["step"] if recs else None)
    of = f" of {total:g}" if total else ""
    if done is None:
        head = f"run {run.name}"
    elif s:
        head = f"run {run.name}: {done:g}" + (f"/{total:g}" if total else "") + " steps"
    elif run.checkpoints and run.checkpoints[-1] > done:
        # without summary.json the last step logged is not the last step done: a checkpoint
        # of a later step (your own code's final save) says the run got there; both are said
        head = f"run {run.name}: step {run.checkpoints[-1]:g}{of} saved, logged up to step {done:g}"
    else:  # the last metrics line's step: every log_every steps, not the last step run
        head = f"run {run.name}: logged up to step {done:g}{of}"
    if s:
        return head + f", {s['world_size']} x {s['device']}, global batch {s['global_batch']}"
    # the last attempt says how the run ended (run-local records a job it ends, job_ended)
    if run.ledger_attempts and run.ledger_attempts[-1].get("finished"):
        return head + " (finished, per the run ledger)"
    ended = run.ledger_attempts[-1].get("exit") if run.ledger_attempts else None
    if ended:
        reason = ended.get("reason", "unknown")
        return head + f" (its last attempt ended with {reason}, per the run ledger)"
    return head + " (no summary.json: the run has not finished, or its code writes none)"


def _rate_windows(run: Run) -> tuple[list[dict[str, float]], str]:
    """The log windows the report's medians are taken over, and how to name them.

    Why: a start-up window (compilation, allocation) is slower than the rest, and the
    summary's headline leaves it out; a median over every window then disagrees with the
    steady state printed below it. With the summary's steady state: its windows (the last
    attempt's, steps from_step-to_step, start-up left out), the same ones it sums. Without a
    summary: every window not marked start-up. A runtime that marks none: all of them."""
    recs = run.records
    steady = (run.summary or {}).get("steady")
    if isinstance(steady, dict) and steady.get("windows") and run.attempts:
        lo, hi = steady.get("from_step"), steady.get("to_step")
        last = [r for r in run.attempts[-1].records if not r.get("startup_window")]
        if _finite(lo) and _finite(hi):
            last = [r for r in last if lo <= r["step"] <= hi]
        return last, f"the steady state's {len(last)} log windows (steps {lo}-{hi})"
    if any("startup_window" in r for r in recs):
        kept = [r for r in recs if not r.get("startup_window")]
        if kept:
            return kept, f"{len(kept)} log windows (start-up windows left out)"
        return recs, f"{len(recs)} log windows (all start-up)"
    return recs, ""


def _not_finite(run: Run, key: str) -> list[dict[str, Any]]:
    """The records whose `key` is a number that is not finite (NaN, +-inf: a diverged loss)."""
    return [
        r
        for r in run.records
        if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)
        and not math.isfinite(r[key])
    ]  # fmt: skip


def _metric_lines(run: Run) -> list[str]:
    lines = []
    losses = [r for r in run.records if _finite(r.get("loss"))]
    if losses:
        first, last = losses[0], losses[-1]
        lines.append(
            f"loss: {first['loss']:.4f} at step {first['step']:g} -> {last['loss']:.4f} at "
            f"step {last['step']:g}"
            + (f" (lowest {min(r['loss'] for r in losses):.4f})" if len(losses) > 2 else "")
        )
    if bad := _not_finite(run, "loss"):  # a diverged run: its loss line would leave it out
        logged = sum(1 for r in run.records if "loss" in r)
        lines.append(
            f"loss not finite: {bad[0]['loss']} at step {bad[0]['step']:g}, "
            f"{len(bad)} of the {logged} logged loss value(s)"
        )
    recs, over = _rate_windows(run)
    sps = [r["samples_per_second"] for r in recs if _finite(r.get("samples_per_second"))]
    tps = [r["tokens_per_second"] for r in recs if _finite(r.get("tokens_per_second"))]
    step_s = [r["step_seconds"] for r in recs if _finite(r.get("step_seconds"))]
    rates = [f"{_rate(statistics.median(v))} {unit}/s" for v, unit in ((sps, "samples"), (tps, "tokens")) if v]  # fmt: skip
    if rates:  # only the units the run logs: a CNN that logs no tokens shows no tokens/s
        over = over or f"{max(len(sps), len(tps))} log windows"
        lines.append(f"throughput: median {', '.join(rates)} over {over}")
    if step_s:
        lines.append(
            f"step time: median {statistics.median(step_s) * 1000:,.1f} ms "
            f"(min {min(step_s) * 1000:,.1f}, max {max(step_s) * 1000:,.1f})"
        )
    mfu = [r["mfu"] for r in recs if _finite(r.get("mfu"))]
    if mfu:
        lines.append(f"MFU: median {100 * statistics.median(mfu):.1f}%")
    elif sps:
        lines.append("MFU: n/a (CPU)")
    lines += _rate_lines(run.summary or {})
    return lines


def _rate_lines(s: dict[str, Any]) -> list[str]:
    """The summary's headline rates (the steady state), the whole loop's, and start-up."""
    steady, whole, startup = s.get("steady"), s.get("whole_run"), s.get("startup")
    if not (isinstance(steady, dict) and isinstance(whole, dict) and isinstance(startup, dict)):
        return []

    def rate(r: dict[str, Any]) -> str:
        mfu = f", MFU {100 * r['mfu']:.1f}%" if _finite(r.get("mfu")) else ""
        # tokens/s only for a model with tokens: the runtime writes null for one without
        tps = r.get("tokens_per_second")
        tokens = f", {_rate(tps)} tokens/s" if _finite(tps) else ""
        return f"{_rate(r['samples_per_second'])} samples/s{tokens}{mfu}"

    if steady.get("windows"):
        head = (f"steady state: {rate(steady)} (steps {steady['from_step']}-{steady['to_step']}, "
                f"{steady['windows']} log windows; the summary's headline)")  # fmt: skip
    else:
        head = "steady state: none (every log window held one of the first steps)"
    start = f"start-up: setup {s.get('setup_seconds', 0.0):,.1f}s"
    if startup.get("windows"):
        first, last = startup["windows"][0][0], startup["windows"][-1][1]
        start += f", steps {first}-{last} {startup['seconds']:,.1f}s (left out of the steady state)"
    return [head, f"whole loop: {rate(whole)} (start-up included)", start]


def _checkpoint_line(run: Run) -> str:
    blocked = [r["checkpoint_blocked_seconds"] for r in run.records if _finite(r.get("checkpoint_blocked_seconds"))]  # fmt: skip
    ckpts = run.checkpoints
    where = ""
    if run.saved is not None:
        where = f" in {run.checkpoint_dir}"
        cut = [c.name for c in run.saved if not c.complete]
        if cut:
            where += f" ({len(cut)} incomplete: {', '.join(cut)})"
        if run.checkpoint_dir is not None and (other := foreign_entries(run.checkpoint_dir)):
            shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
            where += (
                f"; not counted: {len(other)} other entr{'y' if len(other) == 1 else 'ies'} "
                f"there ({shown}): a checkpoint is named step_<N> (a step_<N>.pt file, as "
                "examples/plain saves and resumes from, or the step_NNNNNN folder trainforge's "
                "CheckpointManager writes and its restore resumes from): name yours so, as "
                "the wrapper your code runs under reads its progress from them (a newer one "
                "resets its no_progress count), and your code resumes only from the files it "
                "loads itself"
            )
    elif ckpts:
        where = " (recorded in metrics.jsonl; the checkpoint directory is not here)"
    return (
        f"checkpoints: {len(ckpts)}"
        + (f" (steps {', '.join(f'{c:g}' for c in ckpts)})" if ckpts else "")
        + where
        + (f", training blocked up to {max(blocked):.2f}s by one" if blocked else "")
    )


def _cause(exit_: dict[str, Any] | None) -> str:
    from trainforge.training.exits import describe_exit  # noqa: PLC0415 - no torch

    return describe_exit(exit_)


def _logs_every_step(run: Run) -> bool:
    """Whether the metrics have a line for every step: the runtime's --log-every 1 (summary's
    config), else consecutive steps in every attempt's lines."""
    every = ((run.summary or {}).get("config") or {}).get("log_every")
    if isinstance(every, int) and not isinstance(every, bool):
        return every == 1
    gaps = [
        b["step"] - a["step"]
        for at in run.attempts
        for a, b in zip(at.records, at.records[1:], strict=False)
    ]
    return bool(gaps) and all(g == 1 for g in gaps)


def _attempt_lines(run: Run) -> list[str]:
    ledger = run.ledger_attempts
    lines = []
    if ledger:
        source = "run ledger" if run.ledger else "summary.json"
        state = "finished" if ledger[-1].get("finished") else "not finished"
        if not ledger[-1].get("finished") and ledger[-1].get("exit"):
            state = f"ended with {_cause(ledger[-1].get('exit'))}"
        went_on = [
            f"attempt {i + 1} continued the finished run from step {a['continued_from']:g}"
            for i, a in enumerate(ledger)
            if _continued(a)
        ]
        lines.append(f"attempts: {len(ledger)} ({'; '.join([source, *went_on])}; the last {state})")
    n = run.restarts
    if run.appended_runs:
        k = run.appended_runs
        lines.append(
            f"runs in this folder: {k + 1}: metrics.jsonl's steps went back {k} time(s) more "
            "than the run ledger has restarts (another run wrote to this output directory "
            "before; the ledger and the restarts below are the last run's)"
        )
    if not n:
        lines.append("restarts: 0")
        return lines
    parts = []
    found = resumes(run)
    # the attempts a restart followed (one that continued a finished run follows none)
    failed = [ledger[i - 1] for i in range(1, len(ledger)) if not _continued(ledger[i])]
    # Where a failed attempt got is its last metrics line: the step it died at only where the
    # run logs every step; else a later step may have run (and been redone) unlogged.
    each = _logs_every_step(run)
    for i in range(n):
        bits = []
        r = found[i] if i < len(found) else None
        # ... or where it is the ledger's last step of an attempt that recorded its own end
        # (the ledger is written then; a killed one's last step is its last flush's)
        rec = failed[i] if i < len(failed) else {}
        own_end = (rec.get("exit") or {}).get("reason") not in (None, "node_lost")
        last_step = rec.get("last_step")
        exact = each or (
            own_end and r is not None and _finite(last_step) and r.after == float(last_step)
        )
        last, least = ("step", "") if exact else ("logged step", "at least ")
        if r is not None and r.at is not None:
            where = f"after {last} {r.after:g}, " if r.after is not None else ""
            redone = f" ({least}{r.redone:g} steps redone)" if r.redone is not None else ""
            bits.append(f"{where}resumed at step {r.at:g}{redone}")
        elif r is not None and r.logged_from is not None:  # nothing says which checkpoint
            where = f"after {last} {r.after:g}, " if r.after is not None else ""
            bits.append(
                f"{where}logging again from step {r.logged_from:g} (the resumed step is not "
                "recorded)"
            )
        if i < len(failed):
            bits.append(
                f"attempt {failed[i].get('attempt', i)} ended with {_cause(failed[i].get('exit'))}"
            )
        else:
            bits.append("cause not recorded (no run ledger)")
        parts.append(", ".join(bits))
    lines.append(f"restarts: {n}: " + "; ".join(parts))
    return lines


# --- plot ---------------------------------------------------------------------------------------


# (metrics key, title, y label, scale) of every panel the plot can have
PANELS = (
    ("loss", "Loss", "loss", 1.0),
    ("samples_per_second", "Throughput", "samples/s", 1.0),
    ("step_seconds", "Step time", "ms per step", 1000.0),
    ("progress", "Progress", "% of steps", 100.0),
)


def plotted_panels(run: Run) -> list[tuple[str, str, str, float]]:
    """The panels with data; the others are left out (and named by `missing_panels`)."""
    return [p for p in PANELS if any(_finite(r.get(p[0])) for r in run.records)]


def missing_panels(run: Run) -> list[str]:
    if not run.records:
        return []
    out = []
    for p in PANELS:
        if p in plotted_panels(run):
            continue
        bad = _not_finite(run, p[0])
        why = (
            f"no finite '{p[0]}' ({bad[0][p[0]]} at step {bad[0]['step']:g})"
            if bad
            else f"no '{p[0]}'"
        )
        out.append(f"{p[1].lower()} panel: {why} in metrics.jsonl")
    return out


def _once(drawn: set[str], label: str) -> str | None:
    """A legend label the first time it is drawn on an axis, None after."""
    new = label not in drawn
    drawn.add(label)
    return label if new else None


def plot(run: Run, path: Path) -> None:
    """Loss, throughput, step time and progress against the step, checkpoints and restarts
    marked; one line per attempt so redone steps after a restart stay visible."""
    import matplotlib  # noqa: PLC0415 - optional extra

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt  # noqa: PLC0415

    panels = plotted_panels(run)
    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + 1) // 2
    fig, grid = plt.subplots(rows, cols, figsize=(14, 4.5 * rows), dpi=100, sharex=True,
                             squeeze=False)  # fmt: skip
    axes = grid.flat
    for ax in list(axes)[len(panels) :]:
        ax.remove()
    by_key = dict(zip((p[0] for p in panels), grid.flat, strict=False))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    before = run.appended_runs  # metrics of earlier runs in this folder come first
    for i, a in enumerate(run.attempts):
        if i == 0:
            label = "first run"
        elif i <= before:
            label = f"run {i + 1} in this folder"
        else:
            label = f"after restart {i - before}"
        c = colors[i % len(colors)]
        for key, _title, _ylabel, scale in panels:
            lab = f"samples/s ({label})" if key == "samples_per_second" else label
            by_key[key].plot(*a.series(key, scale), marker=".", color=c, label=lab)
    axes = [by_key[p[0]] for p in panels]
    ax_tput = by_key.get("samples_per_second")
    # tokens/s is samples/s times the tokens per sample: a second scale on the same line
    ratios = {
        round(r["tokens_per_second"] / r["samples_per_second"], 6)
        for r in run.records
        if _finite(r.get("tokens_per_second")) and r.get("samples_per_second")
    }
    if ax_tput is not None:
        _plot_rates(ax_tput, run)
    if ax_tput is not None and len(ratios) == 1 and (k := ratios.pop()) != 1:
        ax_tput.secondary_yaxis("right", functions=(lambda v: v * k, lambda v: v / k)).set_ylabel(
            f"tokens/s ({k:g} tokens per sample)"
        )
    for ax in axes:
        for n, c in enumerate(run.checkpoints):
            ax.axvline(c, color="0.55", linestyle=":", linewidth=1.2,
                       label="checkpoint" if n == 0 else None)  # fmt: skip
        drawn: set[str] = set()
        for r in resumes(run):
            if r.at is None:  # where logging resumed, said as such; no redone steps guessed
                if r.logged_from is not None:
                    ax.axvline(r.logged_from, color="tab:red", linestyle=":", linewidth=1.5,
                               label=_once(drawn, "restart (resumed step not recorded)"))  # fmt: skip
                continue
            ax.axvline(r.at, color="tab:red", linestyle="--", linewidth=1.5,
                       label=_once(drawn, "restart (resumed here)"))  # fmt: skip
            # the steps the failed attempt had done past the checkpoint resumed: done twice
            if r.redone:
                ax.axvspan(r.at, r.after, color="tab:red", alpha=0.07,
                           label=_once(drawn, "steps redone"))  # fmt: skip
        ax.grid(True, alpha=0.3)
    for (key, title, ylabel, _), ax in zip(panels, axes, strict=True):
        ax.set(title=title, ylabel=ylabel)
        if key == "progress":
            ax.set_ylim(0, 105)
    for ax in axes[-cols:]:
        ax.set_xlabel("step")
    axes[0].legend(loc="upper right", fontsize=8)
    s = run.summary or {}
    where = f" | {s['world_size']} x {s['device']}" if s else ""
    fig.suptitle(
        f"{run.name}{where} | {len(run.checkpoints)} checkpoint(s), {run.restarts} restart(s)",
        fontsize=13,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")  # at `path` as given: no suffix appended to it
    plt.close(fig)


def _plot_rates(ax: Any, run: Run) -> None:
    """The throughput panel's two summary rates as lines (steady: the headline; whole loop:
    start-up included), and the start-up windows circled: what the steady state leaves out."""
    s = run.summary or {}
    steady, whole = s.get("steady"), s.get("whole_run")
    if isinstance(steady, dict) and steady.get("windows"):
        ax.axhline(steady["samples_per_second"], color="tab:green", linewidth=1.8,
                   label=f"steady state (summary) {_rate(steady['samples_per_second'])}")  # fmt: skip
    if isinstance(whole, dict) and _finite(whole.get("samples_per_second")):
        ax.axhline(whole["samples_per_second"], color="0.25", linestyle="--", linewidth=1.2,
                   label=f"whole loop {_rate(whole['samples_per_second'])}")  # fmt: skip
    start = [r for r in run.records if r.get("startup_window") == 1.0]
    if start:
        ax.scatter([r["step"] for r in start], [r["samples_per_second"] for r in start],
                   s=90, facecolors="none", edgecolors="tab:green", linewidths=1.5,
                   label="start-up window (left out)", zorder=3)  # fmt: skip
    ax.legend(loc="lower right", fontsize=8)


# --- command ------------------------------------------------------------------------------------


def write_report(
    run_dir: Path, png: Path | None = None, out=None, checkpoint_dir: Path | None = None
) -> tuple[int, Path, Path | None]:
    """Write RUN_DIR/report.txt (always) and the PNG (when matplotlib is installed and the
    metrics have something to draw). Returns (exit code, text path, PNG path or None)."""
    out = out or sys.stdout
    run = load_run(run_dir, checkpoint_dir)
    text = summary_text(run)
    txt_path = run_dir / "report.txt"
    txt_path.write_text(text, encoding="utf-8")
    png = png or run_dir / "report.png"
    if not plotted_panels(run):
        what = "nothing in metrics.jsonl"
        if not (run_dir / "metrics.jsonl").is_file():  # the summary's "not shown" says why
            what = "no metrics.jsonl"
        print(
            f"trainforge report: no plot: {what} to draw (wrote the text summary to {txt_path})",
            file=out,
        )
        return 0, txt_path, None
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        print(
            f"trainforge report: matplotlib is not installed, so no plot was written; "
            f"install it with {INSTALL_HINT} (wrote the text summary to {txt_path})",
            file=sys.stderr,
        )
        return 1, txt_path, None
    plot(run, png)
    return 0, txt_path, png


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="trainforge report",
        description="Summarise a run from what it left: the run ledger (attempts, restarts "
        "and their causes), the checkpoints, metrics.jsonl and summary.json; write RUN_DIR/"
        "report.txt and, when there are metrics, RUN_DIR/report.png (loss, throughput, step "
        "time, progress; checkpoints and restarts marked). RUN_DIR is a run's output directory "
        "(TRAINFORGE_OUTPUT_DIR, --output-dir; run-local: ./runs/JOB).",
    )
    ap.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    ap.add_argument(
        "--checkpoint-dir",
        type=Path,
        help="the run's checkpoint directory (default: summary.json's, RUN_DIR/checkpoints, "
        "or <fsx>/checkpoints/<ns>/<job> next to <fsx>/runs/<ns>/<job>)",
    )
    ap.add_argument("--png", type=Path, help="write the plot here instead of RUN_DIR/report.png")
    args = ap.parse_args(argv)
    if args.png is not None:  # before report.txt is written: no half-done run
        above = next((p for p in args.png.parents if p.exists()), None)
        why = "a folder; expected a file to write the plot to" if args.png.is_dir() else None
        if why is None and above is not None and not above.is_dir():
            why = f"{above} is a file, not a folder"
        if why:
            print(f"trainforge report: --png {args.png}: {why}", file=sys.stderr)
            return 2
    try:
        code, txt, png = write_report(args.run_dir, args.png, checkpoint_dir=args.checkpoint_dir)
    except (ReportError, OSError) as e:
        print(f"trainforge report: {e}", file=sys.stderr)
        return 2
    print(txt.read_text(encoding="utf-8"), end="")
    print(f"wrote {txt}" + (f" and {png}" if png else ""))
    return code


if __name__ == "__main__":
    sys.exit(main())
