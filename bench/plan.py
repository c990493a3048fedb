"""Offline plan time for a stack with N jobs (default: prod with 10, 100 and 1000 jobs).

    .venv/bin/python bench/plan.py [--stack prod] [--sizes 10,100,1000] [--project-dir .]

Jobs are synthesised into the stack config `trainforge:jobs` by copying the stack's first job
(renamed job-0001, job-0002, ...), or, when the stack declares none, a small job on the first
team and node pool of the stack config. Each size is timed in phases: running the program
under mocks (preview); validation, policy rules and the plan checks (rehearsals, queues,
estimates, cost), including the stand-in pass (the program again with invented ids/ARNs, which
the IAM rehearsal and the rules on policy documents need); writing the manifests. Imports and the first run are
paid once before timing (a warm-up plan of the stack as it is) and reported separately.
Target: 100 jobs within 10 s on the 2-core dev machine, time growing linearly.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def stack_config(root: pathlib.Path, stack: str) -> dict[str, Any]:
    from trainforge.stack.file import read_stack  # noqa: PLC0415 - after the sys.path insert

    return read_stack(root, stack).config


def _first_name(value: Any) -> str | None:
    if isinstance(value, list) and value:
        first = value[0]
        return first.get("name") if isinstance(first, dict) else str(first)
    if isinstance(value, dict) and value:
        return next(iter(value))
    return None


def job_template(cfg: dict[str, Any]) -> dict[str, Any]:
    """The stack's first job, else a 2-pod DDP GPT job on its first team's GPU pool."""
    jobs = cfg.get("trainforge:jobs") or []
    if jobs:
        return copy.deepcopy(jobs[0])
    team = _first_name(cfg.get("trainforge:teams")) or "research"
    pools = [p.get("name") for p in cfg.get("trainforge:nodePools") or [] if isinstance(p, dict)]
    pool = "gpu-workloads" if "gpu-workloads" in pools else (pools[0] if pools else "gpu-workloads")
    return {
        "name": "bench",
        "team": team,
        "pool": pool,
        "preset": "ddp",
        "workers": 2,
        "model": "gpt",
    }


def synth_jobs(template: dict[str, Any], n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        job = copy.deepcopy(template)
        job["name"] = f"job-{i:04d}"
        out.append(job)
    return out


def measure(root: pathlib.Path, stack: str, jobs: list[dict] | None) -> dict[str, float]:
    """What `trainforge plan --out` does, phase by phase (see trainforge.plan.core)."""
    from trainforge.plan import core
    from trainforge.plan.manifests import write_manifests
    from trainforge.plan.runner import run_project

    overrides = {"trainforge:jobs": jobs} if jobs is not None else None
    c0 = time.process_time()
    t0 = time.perf_counter()
    inv = run_project(root, stack, config_overrides=overrides)
    t1 = time.perf_counter()
    standin = core.standin_pass(root, stack, overrides)
    result = core.evaluate(inv, core.waivers_from(inv), root=root, standin=standin)
    if standin is not None:
        core.add_standin_findings(result, standin())  # already run by the IAM rehearsal
    t3 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_manifests(result.objects, pathlib.Path(tmp) / "out")
    t4 = time.perf_counter()
    return {
        "resources": len(inv.resources),
        "objects": len(result.objects),
        "violations": len(result.failing),
        "program": t1 - t0,
        "evaluate": t3 - t1,
        "write": t4 - t3,
        "total": t4 - t0,
        "cpu": time.process_time() - c0,  # less sensitive than wall time to a busy machine
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod", help="stack whose config is used (default prod)")
    ap.add_argument("--sizes", default="10,100,1000", help="comma-separated job counts")
    ap.add_argument("--project-dir", type=pathlib.Path, default=ROOT, help="project folder")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]

    cfg = stack_config(args.project_dir, args.stack)
    template = job_template(cfg)
    root = args.project_dir
    print(f"program: {root / '__main__.py'}")
    t = time.perf_counter()
    warm = measure(root, args.stack, None)
    print(
        f"warm-up (imports + stack as configured): {time.perf_counter() - t:.2f} s, "
        f"{warm['resources']} resources"
    )
    print(f"job template: {template}")
    print(
        f"{'jobs':>6} {'resources':>9} {'k8s objs':>8} {'program s':>9} {'checks s':>8} "
        f"{'write s':>7} {'total s':>7} {'cpu s':>6} {'ms/job':>7}"
    )
    for n in sizes:
        r = measure(root, args.stack, synth_jobs(template, n))
        print(
            f"{n:>6} {r['resources']:>9} {r['objects']:>8} {r['program']:>9.2f} "
            f"{r['evaluate']:>8.2f} {r['write']:>7.2f} {r['total']:>7.2f} {r['cpu']:>6.2f} "
            f"{1000 * r['total'] / n:>7.1f}"
        )
        if r["violations"]:
            print(f"       ({r['violations']} violations in this plan)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
