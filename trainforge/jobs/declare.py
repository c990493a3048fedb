"""Declare the jobs listed under `trainforge:jobs` in stack config.

Called from `__main__.py`:

    check_jobs(config, raw_jobs)              # before any resource is declared
    platform = TrainingPlatform("platform", config)
    jobs = declare_jobs(platform, raw_jobs)

`check_jobs` parses every job and checks it against what the stack config alone decides (team,
pool, GPUs, EFA, quota), so one bad entry fails the preview before the first resource of the
platform is registered and nothing is half-applied. `declare_jobs` checks again against the
built platform (cheap) before declaring any job.
"""

from __future__ import annotations

from typing import Any

import pulumi

from trainforge.jobs import codeship
from trainforge.jobs.component import TrainingJob
from trainforge.jobs.spec import parse_jobs
from trainforge.jobs.wiring import _pick, resolve_job, target_from_platform

CONFIG_KEY = "trainforge:jobs"


def check_jobs(config: Any, raw_jobs: Any) -> None:
    """Raise JobConfigError for the first bad job, using only the platform config (no resources).

    `config` is the parsed `PlatformConfig`; pool facts come from the instance-type lookups
    (cached, so the platform's own lookups cost nothing more) and team facts from the services
    config.
    """
    from types import SimpleNamespace

    from trainforge.platform.services import team_facts
    from trainforge.platform.training_platform import pool_facts

    services = getattr(config, "services", None)
    view = SimpleNamespace(
        node_pools=pool_facts(config),
        teams=team_facts(services) if services is not None else {},
    )
    for i, spec in enumerate(parse_jobs(raw_jobs, CONFIG_KEY)):
        where = f"{CONFIG_KEY}[{i}]"
        resolve_job(spec, target_from_platform(view, spec.team, spec.pool, where), where)


def declare_jobs(
    platform: Any,
    raw_jobs: Any,
    opts: pulumi.ResourceOptions | None = None,
    *,
    provider: pulumi.ProviderResource | None = None,
    code: codeship.CodeBundle | None = None,
) -> list[TrainingJob]:
    """A TrainingJob per entry of `raw_jobs` (the `trainforge:jobs` list), wired to `platform`.

    `provider` defaults to the platform's Kubernetes provider (`k8s_provider` or `provider`
    attribute); `opts` are passed to every job (e.g. `depends_on` the training operator).
    """
    specs = parse_jobs(raw_jobs, CONFIG_KEY)
    planned = []
    for i, spec in enumerate(specs):
        where = f"{CONFIG_KEY}[{i}]"
        target = target_from_platform(platform, spec.team, spec.pool, where)
        resolve_job(spec, target, where)  # fail here, before anything is declared
        planned.append((spec, target))
    if any(s.code_source == "configmap" for s, _ in planned) and code is None:
        code = codeship.collect()
    if provider is None:
        provider = _pick(platform, "k8s_provider", "kubernetes_provider", "provider", default=None)
    return [
        TrainingJob(
            f"job-{spec.team}-{spec.name}",
            {},
            opts,
            target=target,
            provider=provider,
            code=code,
            spec=spec,
        )
        for spec, target in planned
    ]
