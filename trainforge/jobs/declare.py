"""Declare the jobs listed under `trainforge:jobs` in stack config.

Called from `__main__.py` after the platform is built:

    from trainforge.jobs import declare_jobs
    jobs = declare_jobs(platform, config.get_object("jobs") or [])

Every job is parsed and checked against the platform (team, pool, GPUs, EFA, quota) before
the first one is declared, so one bad entry fails the preview and declares none.
"""

from __future__ import annotations

from typing import Any

import pulumi

from trainforge.jobs import codeship
from trainforge.jobs.component import TrainingJob
from trainforge.jobs.spec import parse_jobs
from trainforge.jobs.wiring import _pick, resolve_job, target_from_platform

CONFIG_KEY = "trainforge:jobs"


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
