"""Declare the jobs listed under `trainforge:jobs` in stack config.

Called from `__main__.py`:

    check_jobs(contract_from_config(config), raw_jobs)  # before any resource is declared
    platform = TrainingPlatform("platform", config)
    jobs = declare_jobs(platform.contract, raw_jobs)

`check_jobs` parses every job and checks it against the contract the stack config alone
describes (teams, pools, GPUs, EFA, quota), so one bad entry fails the preview before the
first resource of the platform is registered and nothing is half-applied. `declare_jobs`
checks again against the live contract (cheap) before declaring any job.
"""

from __future__ import annotations

from typing import Any

import pulumi

from trainforge.core.contract import PlatformContract
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship, entrypoint
from trainforge.jobs.component import TrainingJob
from trainforge.jobs.spec import JobsError, parse_jobs, validate_jobs
from trainforge.jobs.wiring import resolve_job
from trainforge.stack.base import one_of, problem

CONFIG_KEY = "trainforge:jobs"


def check_jobs(contract: PlatformContract, raw_jobs: Any) -> None:
    """Raise JobsError with every problem of every job, on a contract built before any
    resource: the declarations, each job's team and pool names (with a "did you mean"), then
    each valid job's fit on its pool and its own code.

    The program passes `platform.published.contract_from_config(config)`: the stack config
    alone, with pool facts from the (cached) instance-type lookups. Taking the contract rather
    than the config keeps jobs below platform (docs/architecture.md, "Layers").
    """
    errors: list[str] = []
    specs = validate_jobs(raw_jobs, CONFIG_KEY, errors)
    for i, spec in enumerate(specs):
        where = f"{CONFIG_KEY}[{i}]"
        # the team and pool names, also of a job whose other keys are wrong
        raw = {"team": spec.team, "pool": spec.pool} if spec is not None else raw_jobs[i]
        known = spec is not None
        for key, names, what in (
            ("team", contract.teams, "teams"),
            ("pool", contract.pools, "node pools"),
        ):
            value = raw.get(key) if isinstance(raw, dict) else None
            if isinstance(value, str) and value not in names:
                errors.append(problem(f"{where}.{key}", value, one_of(value, names, what)))
                known = False
        if not known or spec is None:
            continue
        try:
            target = contract.target(spec.team, spec.pool, where)
            job = resolve_job(spec, target, where)
            # the job's own code: the files exist, fit a ConfigMap, the script parses
            bundle = entrypoint.user_code(job, ".", where)
            entrypoint.refuse_missing_pieces(job, target, bundle, where)
        except JobConfigError as e:
            errors.extend(getattr(e, "errors", None) or [str(e)])
    if errors:
        raise JobsError(errors)


def declare_jobs(
    contract: PlatformContract,
    raw_jobs: Any,
    opts: pulumi.ResourceOptions | None = None,
    *,
    code: codeship.CodeBundle | None = None,
) -> list[TrainingJob]:
    """A TrainingJob per entry of `raw_jobs` (the `trainforge:jobs` list) on `contract`.

    Jobs are declared with the contract's Kubernetes provider and wait for what the contract
    says they need (the backend's controller, the team's storage setup); `opts` are merged in.
    """
    specs = parse_jobs(raw_jobs, CONFIG_KEY)
    planned = []
    for i, spec in enumerate(specs):
        where = f"{CONFIG_KEY}[{i}]"
        job = resolve_job(spec, contract.target(spec.team, spec.pool, where), where)  # fail first
        planned.append((spec, entrypoint.user_code(job, ".", where)))
    if any(s.code_source == "configmap" for s, _ in planned) and code is None:
        code = codeship.collect()
    return [
        TrainingJob(
            f"job-{spec.team}-{spec.name}",
            {},
            opts,
            contract=contract,
            code=code,
            spec=spec,
            user_code=user_code,
        )
        for spec, user_code in planned
    ]
