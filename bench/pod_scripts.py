"""The plan's pod-script rehearsal of a stack, one script after another vs two at a time.

    .venv/bin/python bench/pod_scripts.py [--stack prod] [--rounds 5]

Runs the stack's program once (the preview), then the pod-script check
(trainforge.plan.checks.pod_scripts) `--rounds` times each way, interleaved so that the
machine's load hits both alike: sequential as where the plan forks no child, and two at a time
as where it may use a second CPU (`registry.may_fork`). Prints the medians of wall time, the
plan process's CPU and its sandbox processes' CPU, and whether every run's report is the same.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import time

from trainforge.plan import check_types as T
from trainforge.plan import registry
from trainforge.plan.checks import pod_scripts
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.runner import run_project

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod", help="the stack whose plan is rehearsed (prod)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each way (5)")
    args = ap.parse_args()
    inv = run_project(ROOT, args.stack)
    objects = k8s_objects(inv)
    runs: dict[bool, list[tuple[float, float, float, list[str]]]] = {False: [], True: []}
    real = registry.may_fork
    try:
        for _ in range(args.rounds):
            for two in (False, True):
                registry.may_fork = lambda two=two: two
                ctx = T.PlanContext(inventory=inv, objects=objects, declared=inv.declared)
                here, kids = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                result = pod_scripts.check(ctx)
                wall = time.monotonic() - start
                here = _cpu(resource.RUSAGE_SELF) - here
                kids = _cpu(resource.RUSAGE_CHILDREN) - kids
                lines = [line for s in result.sections for line in s.lines]
                runs[two].append((wall, here, kids, lines))
    finally:
        registry.may_fork = real
    scripts = sum(1 for line in runs[False][0][3] if not line.startswith(" "))
    print(f"{args.stack}: {scripts - 1} scripts, load {os.getloadavg()[0]:.1f}")
    for two, label in ((False, "one after another"), (True, "two at a time")):
        walls = [r[0] for r in runs[two]]
        print(
            f"{label:<18} wall {statistics.median(walls):.2f} s "
            f"({', '.join(f'{w:.2f}' for w in walls)}), plan CPU "
            f"{statistics.median(r[1] for r in runs[two]):.2f} s, sandbox CPU "
            f"{statistics.median(r[2] for r in runs[two]):.2f} s"
        )
    same = all(r[3] == runs[False][0][3] for rs in runs.values() for r in rs)
    print(f"the same report every run: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
