"""`trainforge report RUN_DIR`: a PNG and a short text summary of a run's metrics file.

Why: a local run leaves a JSON-lines file nobody reads; a picture of loss, throughput and step
time with the checkpoints and restarts marked answers "did it learn, how fast, what went
wrong" at a glance. It reads what rank 0 of the runtime writes (trainforge/training/
metrics.py): `metrics.jsonl` (one line per log window, appended across restarts) and
`summary.json` (written when the run finishes).

Restarts are read from the file itself: a process resumed from a checkpoint logs steps again
that the crashed one had already logged, so the step goes back (a `restarts` gauge, when the
runtime writes one, counts them too). matplotlib is an optional extra (`trainforge[report]`);
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
class Run:
    path: Path
    attempts: list[Attempt]
    summary: dict[str, Any] | None
    skipped_lines: int = 0

    @property
    def records(self) -> list[dict[str, float]]:
        return [r for a in self.attempts for r in a.records]

    @property
    def name(self) -> str:
        return (self.summary or {}).get("run_name") or self.path.name

    @property
    def checkpoints(self) -> list[float]:
        """Steps a checkpoint was completed at, in order."""
        steps = {r["checkpoint_step"] for r in self.records if _finite(r.get("checkpoint_step"))}
        final = ((self.summary or {}).get("checkpoint") or {}).get("checkpoint_step")
        if _finite(final):
            steps.add(final)
        return sorted(steps)

    @property
    def restarts(self) -> int:
        counted = max((r.get("restarts", 0) for r in self.records), default=0)
        return max(len(self.attempts) - 1, int(counted) if _finite(counted) else 0)


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def load_run(run_dir: Path) -> Run:
    metrics = run_dir / "metrics.jsonl"
    if not run_dir.is_dir():
        raise ReportError(f"RUN_DIR {run_dir}: not a folder")
    if not metrics.is_file():
        raise ReportError(
            f"RUN_DIR {run_dir}: no metrics.jsonl (rank 0 writes it to --output-dir; "
            "run-local prints where)"
        )
    attempts: list[Attempt] = []
    skipped = 0
    last_step = -math.inf
    last_ckpt: float | None = None
    for line in metrics.read_text(encoding="utf-8").splitlines():
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
    if not attempts:
        raise ReportError(f"{metrics}: no metrics lines (the run logged no step)")
    summary = None
    path = run_dir / "summary.json"
    if path.is_file():
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            summary = None
    return Run(run_dir, attempts, summary, skipped)


# --- text -----------------------------------------------------------------------------------


def _rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def summary_text(run: Run) -> str:
    recs = run.records
    s = run.summary or {}
    first, last = recs[0], recs[-1]
    total = last.get("total_steps") or (s.get("config") or {}).get("steps")
    done = s.get("steps", last["step"])
    lines = [
        f"run {run.name}: {done:g}" + (f"/{total:g}" if total else "") + " steps"
        + (f", {s['world_size']} x {s['device']}, global batch {s['global_batch']}" if s else
           " (no summary.json: the run has not finished)")
    ]  # fmt: skip
    lines.append(
        f"loss: {first['loss']:.4f} at step {first['step']:g} -> {last['loss']:.4f} at step "
        f"{last['step']:g}"
        + (f" (lowest {min(r['loss'] for r in recs):.4f})" if len(recs) > 2 else "")
    )
    sps = [r["samples_per_second"] for r in recs if _finite(r.get("samples_per_second"))]
    tps = [r["tokens_per_second"] for r in recs if _finite(r.get("tokens_per_second"))]
    step_s = [r["step_seconds"] for r in recs if _finite(r.get("step_seconds"))]
    if sps:
        lines.append(
            f"throughput: median {_rate(statistics.median(sps))} samples/s, "
            f"{_rate(statistics.median(tps or [0]))} tokens/s over {len(sps)} log windows"
        )
    if step_s:
        lines.append(
            f"step time: median {statistics.median(step_s) * 1000:,.1f} ms "
            f"(min {min(step_s) * 1000:,.1f}, max {max(step_s) * 1000:,.1f})"
        )
    mfu = [r["mfu"] for r in recs if _finite(r.get("mfu"))]
    lines.append(f"MFU: median {100 * statistics.median(mfu):.1f}%" if mfu else "MFU: n/a (CPU)")
    ckpts = run.checkpoints
    blocked = [r["checkpoint_blocked_seconds"] for r in recs if _finite(r.get("checkpoint_blocked_seconds"))]  # fmt: skip
    lines.append(
        f"checkpoints: {len(ckpts)}"
        + (f" (steps {', '.join(f'{c:g}' for c in ckpts)})" if ckpts else "")
        + (f", training blocked up to {max(blocked):.2f}s by one" if blocked else "")
    )
    if run.restarts:
        parts = []
        for prev, a in zip(run.attempts, run.attempts[1:], strict=False):
            lost = prev.records[-1]["step"] - (a.resumed_from or 0)
            at = f"step {a.resumed_from:g}" if a.resumed_from is not None else "the start"
            parts.append(
                f"after step {prev.records[-1]['step']:g}, resumed at {at} ({lost:g} steps redone)"
            )
        lines.append(f"restarts: {run.restarts}: " + "; ".join(parts))
    else:
        lines.append("restarts: 0")
    if s.get("elapsed_seconds") is not None:
        lines.append(f"wall time of the last attempt: {s['elapsed_seconds']:,.1f}s")
    if run.skipped_lines:
        lines.append(f"note: skipped {run.skipped_lines} unreadable line(s) of metrics.jsonl")
    return "\n".join(lines) + "\n"


# --- plot ---------------------------------------------------------------------------------------


def plot(run: Run, path: Path) -> None:
    """Loss, throughput, step time and progress against the step, checkpoints and restarts
    marked; one line per attempt so redone steps after a restart stay visible."""
    import matplotlib  # noqa: PLC0415 - optional extra

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(2, 2, figsize=(14, 9), dpi=100, sharex=True)
    (ax_loss, ax_tput), (ax_step, ax_prog) = axes
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, a in enumerate(run.attempts):
        label = "first run" if i == 0 else f"after restart {i}"
        c = colors[i % len(colors)]
        ax_loss.plot(*a.series("loss"), marker=".", color=c, label=label)
        ax_tput.plot(
            *a.series("samples_per_second"), marker=".", color=c, label=f"samples/s ({label})"
        )
        ax_step.plot(*a.series("step_seconds", 1000), marker=".", color=c, label=label)
        ax_prog.plot(*a.series("progress", 100), marker=".", color=c, label=label)
    # tokens/s is samples/s times the tokens per sample: a second scale on the same line
    ratios = {
        round(r["tokens_per_second"] / r["samples_per_second"], 6)
        for r in run.records
        if _finite(r.get("tokens_per_second")) and r.get("samples_per_second")
    }
    if len(ratios) == 1 and (k := ratios.pop()) != 1:
        ax_tput.secondary_yaxis("right", functions=(lambda v: v * k, lambda v: v / k)).set_ylabel(
            f"tokens/s ({k:g} tokens per sample)"
        )
    for ax in axes.flat:
        for n, c in enumerate(run.checkpoints):
            ax.axvline(c, color="0.55", linestyle=":", linewidth=1.2,
                       label="checkpoint" if n == 0 else None)  # fmt: skip
        for n, (prev, a) in enumerate(zip(run.attempts, run.attempts[1:], strict=False)):
            x = a.records[0]["step"] if a.resumed_from is None else a.resumed_from
            ax.axvline(x, color="tab:red", linestyle="--", linewidth=1.5,
                       label="restart (resumed here)" if n == 0 else None)  # fmt: skip
            # the steps the crashed attempt had done past its last checkpoint: done twice
            ax.axvspan(x, prev.records[-1]["step"], color="tab:red", alpha=0.07,
                       label="steps redone" if n == 0 else None)  # fmt: skip
        ax.grid(True, alpha=0.3)
    ax_loss.set(title="Loss", ylabel="loss")
    ax_tput.set(title="Throughput", ylabel="samples/s")
    ax_step.set(title="Step time", ylabel="ms per step", xlabel="step")
    ax_prog.set(title="Progress", ylabel="% of steps", xlabel="step", ylim=(0, 105))
    ax_loss.legend(loc="upper right", fontsize=8)
    ax_step.legend(loc="upper right", fontsize=8)
    s = run.summary or {}
    where = f" | {s['world_size']} x {s['device']}" if s else ""
    fig.suptitle(
        f"{run.name}{where} | {len(run.checkpoints)} checkpoint(s), {run.restarts} restart(s)",
        fontsize=13,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


# --- command ------------------------------------------------------------------------------------


def write_report(run_dir: Path, png: Path | None = None, out=None) -> tuple[int, Path, Path | None]:
    """Write RUN_DIR/report.txt (always) and the PNG (when matplotlib is installed).
    Returns (exit code, text path, PNG path or None)."""
    out = out or sys.stdout
    run = load_run(run_dir)
    text = summary_text(run)
    txt_path = run_dir / "report.txt"
    txt_path.write_text(text, encoding="utf-8")
    png = png or run_dir / "report.png"
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
        description="Plot a run's metrics (loss, throughput, step time, progress; checkpoints "
        "and restarts marked) to RUN_DIR/report.png and write a text summary to "
        "RUN_DIR/report.txt. RUN_DIR is a run's --output-dir (metrics.jsonl, summary.json).",
    )
    ap.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    ap.add_argument("--png", type=Path, help="write the plot here instead of RUN_DIR/report.png")
    args = ap.parse_args(argv)
    try:
        code, txt, png = write_report(args.run_dir, args.png)
    except (ReportError, OSError) as e:
        print(f"trainforge report: {e}", file=sys.stderr)
        return 2
    print(txt.read_text(encoding="utf-8"), end="")
    print(f"wrote {txt}" + (f" and {png}" if png else ""))
    return code


if __name__ == "__main__":
    sys.exit(main())
