"""`make demo`: the dev stack's jobs on this machine's CPU, then the offline plan of the stack.

It runs what an ML engineer would run before paying for GPUs: the `mnist-ddp` job declared in
`Pulumi.dev.yaml` (DDP, 2 local workers, checkpoints) and a shrunken `gpt-small-fsdp` (FSDP2,
2 workers), both through `trainforge run-local --stack dev JOB`; then `trainforge plan --stack
dev`, which renders and checks every Kubernetes object the stack would apply. It ends with
`trainforge report` of both runs: a PNG of loss, throughput and step time per run.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import shutil
import sys
import time

OUT = pathlib.Path("build/demo")

# (title, job in Pulumi.dev.yaml, overrides so that each run takes about a minute on 2 CPU
# cores: the whole demo, plan included, 156 s on the shared 2-core dev VM, 2026-11-29)
RUNS = [
    ("DDP  mnist-ddp (MLP, 2 workers)", "mnist-ddp", ["--steps", "300", "--log-every", "50"]),
    (
        "FSDP gpt-small-fsdp (GPT shrunk for CPU, 2 workers)",
        "gpt-small-fsdp",
        ["--layers", "2", "--d-model", "128", "--heads", "4", "--seq-len", "64"]
        + ["--vocab-size", "512", "--batch-size", "8", "--steps", "60", "--log-every", "10"]
        + ["--checkpoint-every", "30"],
    ),
]


def job_argv(job: str, overrides: list[str]) -> list[str]:
    """`run-local`'s arguments for one demo run: the one list the demo prints and runs."""
    out = OUT / job
    argv = ["--stack", "dev", job, *overrides, "--run-name", f"demo-{job}"]
    return argv + ["--output-dir", str(out), "--checkpoint-dir", str(out / "checkpoints")]


PLAN_ARGV = ["--stack", "dev", "--out", str(OUT / "plan-dev"), "--json", str(OUT / "plan-dev.json")]


def _command(sub: str, argv: list[str]) -> str:
    """What a user types to run the same: printed before it runs (what it prints is what it
    runs: the demo's overrides were hidden behind `trainforge run-local --stack dev JOB`)."""
    return f"python -m trainforge {sub} {shlex.join(argv)}"


def _run_job(job: str, overrides: list[str]) -> tuple[int, pathlib.Path]:
    from trainforge import local

    out = OUT / job
    shutil.rmtree(out, ignore_errors=True)  # a demo starts fresh, never resumes an old run
    return local.main(job_argv(job, overrides)), out


def _summary(out: pathlib.Path) -> str:
    path = out / "summary.json"
    if not path.exists():
        return "(no summary.json)"
    s = json.loads(path.read_text())
    losses = s.get("losses") or [[0, float("nan")]]
    return (
        f"{s['steps']} steps, loss {losses[0][1]:.3f} (step {losses[0][0]}) -> "
        f"{s['final_loss']:.3f}, {s['samples_per_second']:.0f} samples/s, "
        f"ranks agree: {s['ranks_agree']}"
    )


def _plots(outs: list[pathlib.Path]) -> dict[pathlib.Path, pathlib.Path]:
    """`trainforge report` of each run: RUN/report.png and RUN/report.txt."""
    from trainforge import report

    print("\n=== plots: trainforge report RUN_DIR ===", flush=True)
    written = {}
    for out in outs:
        try:
            _, txt, png = report.write_report(out)
        except report.ReportError as e:  # a run that logged nothing: say so, keep going
            print(f"trainforge report: {e}", file=sys.stderr)
            continue
        print(f"{out}: wrote {txt}" + (f" and {png}" if png else ""))
        if png:
            written[out] = png
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trainforge demo", description=__doc__)
    parser.add_argument(
        "--skip-plan", action="store_true", help="run and plot the two jobs, without the plan"
    )
    args = parser.parse_args(argv)

    results = []
    for title, job, overrides in RUNS:
        print(f"\n=== {title} ===\n$ {_command('run-local', job_argv(job, overrides))}", flush=True)
        t0 = time.perf_counter()
        rc, out = _run_job(job, overrides)
        results.append((title, rc, out, time.perf_counter() - t0))
        if rc != 0:
            print(f"demo: {job} exited with status {rc}", file=sys.stderr)
            return rc

    plan_rc = None
    if not args.skip_plan:
        from trainforge.plan import cli as plan_cli

        print(f"\n=== offline plan ===\n$ {_command('plan', PLAN_ARGV)}", flush=True)
        plan_rc = plan_cli.main(list(PLAN_ARGV))

    plots = _plots([out for _, _, out, _ in results])

    print("\n=== demo finished ===")
    for title, _, out, secs in results:
        print(f"{title}: {secs:.0f}s\n    outputs:     {out}/ (summary.json, checkpoints/)")
        print(f"    summary:     {_summary(out)}")
        print(f"    plot:        {plots.get(out) or '(not written: see above)'}")
    if plan_rc is not None:
        print(f"Offline plan (exit {plan_rc}): manifests in {OUT / 'plan-dev'}/")
        print(f"    inventory:   {OUT / 'plan-dev.json'}")
    print("Next: `pulumi stack select dev && pulumi up` deploys the same stack (see README).")
    return plan_rc or 0
