"""The API server's rule for a pod's requests and limits of a resource that cannot be
overcommitted, applied by `trainforge import` (trainforge.jobs.importer) to the file's pods.

Why: the importer read a GPU count from the limit; a pod asking `requests: {nvidia.com/gpu: 1}`
with `limits: {nvidia.com/gpu: 2}`, or a request with no limit, became an entry of 2 (or 1)
GPUs, while the API server refuses to create that pod, so the job never ran. Pulumi-free.

Kubernetes (kubernetes/kubernetes pkg/apis/core/validation/validation.go
`validateResourceRequirements`, at 8a84988b, the commit of CHANGELOG-1.35.md, read
2026-11-30): for each request, a resource that cannot be overcommitted must have a limit
equal to it (`field.Invalid(reqPath, ..., "must be equal to %s limit of %s")`), and a limit
(`field.Required(limPath, "Limit must be set for non overcommitable resources")`). Which
cannot: `core/pods.overcommit_allowed` (`IsOvercommitAllowed`): nvidia.com/gpu and
vpc.amazonaws.com/efa.
A limit alone is fine: the API server's defaulting copies it to the request
(core/pods.py `stored_pod_spec`).
"""

from __future__ import annotations

from typing import Any

from trainforge.core.pods import overcommit_allowed
from trainforge.core.quantity import parse_quantity
from trainforge.jobs.import_read import ImportProblem, Workload, get


def check_limits(w: Workload, file: str) -> None:
    """Refuse, in one line naming the field, both values and the API server's rule, a request
    of a resource that cannot be overcommitted with no limit or a different one; after
    `check_shapes` (the resources are mappings), for `w` and its other replicas' pods."""
    for pod in (w, *w.others):
        resources = pod.container.get(pod.resources_key)
        limits, requests = get(resources, "limits") or {}, get(resources, "requests") or {}
        for res, asked in requests.items():
            if overcommit_allowed(str(res)):
                continue
            key = f"[{res}]" if "/" in str(res) or "." in str(res) else f".{res}"
            at = f"{pod.resources_at}.requests{key}"
            if res not in limits:
                raise ImportProblem(
                    file,
                    at,
                    f"got {asked} and no limits{key}; the API server refuses such a pod "
                    '("Limit must be set for non overcommitable resources"): write '
                    f"limits{key}: {asked} (the request then defaults to it)",
                )
            limit = limits[res]
            if _quantity(asked, file, at) != _quantity(
                limit, file, f"{pod.resources_at}.limits{key}"
            ):
                raise ImportProblem(
                    file,
                    at,
                    f"got {asked}, limits{key} {limit}; the API server refuses such a pod "
                    f'("must be equal to {res} limit of {limit}": {res} cannot be '
                    "overcommitted): make the request equal to the limit, or write the limit alone",
                )


def _quantity(value: Any, file: str, at: str) -> Any:
    try:
        return parse_quantity(str(value))
    except ValueError:
        raise ImportProblem(
            file, at, f"got {value!r}; expected a quantity (1, 500m, 8Gi)"
        ) from None
