"""Plan report: every job's restart budget (trainforge.jobs.restarts).

Why: what restarts a job after a lost node, and how often, depends on the backend, the
restartPolicy and elasticity; a user should read it before a failure, not after. The same
budget is what `trainforge run-local --stack STACK JOB` applies on a laptop.
"""

from __future__ import annotations

from typing import Any

from trainforge.jobs.restarts import budget, launch_line
from trainforge.plan.check_types import CheckResult, PlanContext, Section

RULES: dict[str, str] = {}  # a report: nothing to waive
TITLE = "Restart budget per job (trainforge.jobs.restarts)"


def check(ctx: PlanContext) -> CheckResult:
    declared = ctx.declared
    if declared is None or not declared.jobs:
        return CheckResult()
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for dj in declared.jobs:
        job = dj.spec
        b = budget(job)
        lines.append(f"{dj.target.namespace}/{job.name}: {launch_line(job)}")
        data.append(
            {
                "job": job.name,
                "pods": job.workers,
                "processes_per_pod": job.procs,
                "torchrun_max_restarts": b.in_pod,
                "pod_recreations": b.recreations,
                "recreated_on": b.on,
                "bound": b.bound,
                "run_local_recreations": b.local_recreations,
            }
        )
    return CheckResult(sections=[Section(TITLE, lines, data)])
