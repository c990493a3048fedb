"""What Kueue counts for one pod of a workload: its requests after Kueue's own adjustments.

Why: a Job, CronJob or SDK TrainJob that a user writes often names no requests at all. Kueue
does not admit such a pod set as "nothing": when it builds the Workload it applies, in this
order, the RuntimeClass overhead, the namespace's LimitRange defaults (a container's missing
limits from `default`, missing requests from `defaultRequest`) and then a container's limits
as its missing requests (pkg/workload/resources.go `AdjustResources`, `handlePodLimitRange`,
`handleLimitsToRequests` at release-0.19 c90ed70, read 2026-11-29). The pod's total is the
sum over its containers, or its largest init container where that is larger, plus the
overhead (the scheduler's and Kueue's pod requests). The flavor assignment then sees the
team namespace's 500m CPU / 1Gi, not an empty request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from trainforge.plan.kueue.objects import quantity


def _limit_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> tuple[dict, dict]:
    """(default limits, default requests) for containers: the first LimitRange item of type
    Container that names a resource wins, as Kueue's `limitrange.Summarize` keeps the first."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            for k, v in (item.get("default") or {}).items():
                limits.setdefault(k, v)
            for k, v in (item.get("defaultRequest") or {}).items():
                requests.setdefault(k, v)
    return limits, requests


def _container_requests(
    c: Mapping[str, Any], d_limits: dict, d_requests: dict
) -> dict[str, Fraction]:
    res = c.get("resources") or {}
    limits = {**d_limits, **(res.get("limits") or {})}
    requests = {**d_requests, **(res.get("requests") or {})}
    requests = {**limits, **requests}  # a limit stands for its missing request
    return {k: quantity(v) for k, v in requests.items()}


def pod_requests(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """One pod's requests as Kueue counts them (see the module docstring); `limit_ranges` are
    the LimitRange documents of the workload's namespace."""
    d_limits, d_requests = _limit_defaults(limit_ranges)
    total: dict[str, Fraction] = {}
    for c in pod_spec.get("containers") or []:
        for k, v in _container_requests(c, d_limits, d_requests).items():
            total[k] = total.get(k, Fraction(0)) + v
    for c in pod_spec.get("initContainers") or []:
        for k, v in _container_requests(c, d_limits, d_requests).items():
            total[k] = max(total.get(k, Fraction(0)), v)
    for k, v in (pod_spec.get("overhead") or {}).items():
        total[k] = total.get(k, Fraction(0)) + quantity(v)
    return {k: v for k, v in total.items() if v}
