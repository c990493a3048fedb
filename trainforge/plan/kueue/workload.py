"""What Kueue reads of a workload (its pod sets, their requests after Kueue's adjustments) and
where it takes it (`admit`, the model's one admission entry).

A user's Job or SDK TrainJob often names no requests: Kueue applies the RuntimeClass overhead,
the namespace's LimitRange defaults and limits as missing requests (pkg/workload/resources.go
`AdjustResources` at release-0.19 c90ed70, read 2026-11-29) and totals each pod with the
Kubernetes `PodRequests` (pkg/workload/workload.go `totalRequestsFromPodSets`), so the flavor
assignment sees the namespace's 500m CPU / 1Gi, not nothing. That arithmetic is the API
server's and the scheduler's too: trainforge.core.pods.pod_requests, which Karpenter's packing
reads as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from trainforge.core.pods import (
    QUEUE_LABEL,
    adjusted_pod_spec,
    invalid_resources,
    limit_range_refusal,
    outside_limit_range,
    pod_requests,
    requests_over_limits,
)
from trainforge.jobs import backends, trainjob
from trainforge.jobs.tenancy import PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY, UNCONSTRAINED_TOPOLOGY
from trainforge.plan.kueue.assign import Assigner, Assignment, PodSet
from trainforge.plan.kueue.objects import GPU, RESOURCES, ClusterQueue, Kueue, quantity, summed
from trainforge.plan.kueue.quota import Quotas
from trainforge.platform.queues import DEFAULT_LOCAL_QUEUE


def workload_podsets(
    wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> list[PodSet]:
    """A Workload object's pod sets as Kueue reads them, in the quota's resources.
    `limit_ranges`: its namespace's (without them a container naming neither asks nothing)."""
    lrs, sets = list(limit_ranges), (wl.get("spec") or {}).get("podSets") or []
    return [
        counted_podset(p.get("template") or {}, int(p.get("count", 1)), lrs, p.get("name", "main"))
        for p in sets
    ]


def counted_podset(tmpl: Mapping[str, Any], count: int, lrs: list[Any], name: Any) -> PodSet:
    """`podset` `name` of `count` pods of `tmpl`, its requests as Kueue counts them."""
    asks = pod_requests(tmpl.get("spec") or {}, lrs)
    per_pod = {r: v for r, v in asks.items() if r in RESOURCES}
    return replace(podset(tmpl, per_pod, count, lrs), name=str(name))


def workload_invalid(wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()) -> str:
    """Kueue's `refusal` of a Workload object's pods ("" when none)."""
    return refusal(workload_podsets(wl, limit_ranges))


def refusal(ps: Iterable[PodSet]) -> str:
    """ValidateAdmissibility's error for these pod sets ("" when none): ValidateResources
    (requests over limits), else ValidateLimitRange (pkg/workload/resources.go, release-0.19
    c90ed70)."""
    ps = list(ps)
    return invalid_resources(p.over_limits for p in ps) or limit_range_refusal(
        p.outside_limit_range for p in ps
    )


def workload_need(
    wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """What a Workload object asks in all, in the quota's resources."""
    return summed(ps.total() for ps in workload_podsets(wl, limit_ranges))


def trainjob_podsets(
    doc: dict[str, Any],
    runtimes: Mapping[str, Mapping[str, Any]] | None,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
) -> list[PodSet] | None:
    """Kueue's pod sets of TrainJob `doc`: one per replicatedJob of the JobSet the Trainer
    builds from its runtime, in order (Kueue release-0.19 pkg/controller/jobs/trainjob
    `podSets` -> jobset `JobSet.PodSets`; Trainer v2.2.1 pkg/runtime/framework/plugins/jobset/
    builder.go keeps every replicatedJob; read 2026-11-30), the trainer's pod as
    `trainjob.built_pod` builds it, the others as written (runtimePatches not applied), each
    pod's requests as Kueue counts them (`pod_requests`). None
    when the runtime is unknown or the job too malformed to build (validation reports it)."""
    try:
        node = trainjob.built_pod(doc, runtimes)
    except (KeyError, TypeError, AttributeError, StopIteration):
        return None
    runtime = trainjob.runtime_of(doc, runtimes)
    if node is None or runtime is None:
        return None
    main, lrs = trainjob.REPLICATED_JOB, list(limit_ranges)
    return [
        counted_podset(node if t.name == main else t.template, t.replicas, lrs, t.name)
        for t in backends.pod_templates(dict(runtime))
    ]


def pod_need(spec: Any) -> dict[str, Fraction]:
    """One worker pod of a JobSpec: its CPU, memory and GPUs."""
    return {
        "cpu": quantity(spec.cpu or 0),
        "memory": quantity(spec.memory or 0),
        GPU: Fraction(spec.gpus_per_worker or 0),
    }


def podset(
    tmpl: Mapping[str, Any],
    per_pod: Mapping[str, Fraction],
    count: int,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
) -> PodSet:
    """What Kueue reads of `count` pods of one pod template ({metadata, spec}) each asking
    `per_pod`: selector, required affinity, tolerations, topology request (annotation), and
    what ValidateResources/ValidateLimitRange refuse of it once `limit_ranges` defaulted it."""
    pod, limit_ranges = tmpl.get("spec") or {}, list(limit_ranges)
    adjusted = adjusted_pod_spec(pod, limit_ranges)
    over = tuple((where, tuple(names)) for where, names in requests_over_limits(adjusted))
    outside = tuple((w, tuple(n), d) for w, n, d in outside_limit_range(adjusted, limit_ranges))
    notes = (tmpl.get("metadata") or {}).get("annotations") or {}
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return PodSet(
        name="main",
        count=count,
        requests=dict(per_pod),
        node_selector=dict(pod.get("nodeSelector") or {}),
        affinity=tuple(
            tuple(t.get("matchExpressions") or ()) for t in affinity.get("nodeSelectorTerms") or []
        ),
        tolerations=tuple(pod.get("tolerations") or ()),
        topology=any(
            k in notes for k in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, UNCONSTRAINED_TOPOLOGY)
        ),
        over_limits=over,
        outside_limit_range=outside,
    )


@dataclass
class Admission:
    """Where Kueue takes one workload on idle queues (`admit`); `reason`: why it never gets
    as far as the flavor assignment (the one wording the findings and rehearsals print)."""

    local_queue: str | None  # None: no queue label and no LocalQueue `default`
    queue: ClusterQueue | None = None
    priority: int = 0
    assignment: Assignment | None = None
    reason: str = ""
    invalid: str = ""  # Kueue's ValidateAdmissibility error (`refusal`), where that is the reason


# Kueue's QuotaReserved False condition for a refused pod set: reason "Pending" at 0.19's default
# gates, which the platform keeps (Misconfigured only with UnadmittedWorkloadsObservability, beta,
# off: pkg/features/kube_features.go, pkg/scheduler/scheduler.go `requeueAndUpdate` ->
# UnadmittedWorkloadReasonWithFallback at release-0.19 c90ed70, read 2026-11-30)
NEVER_ADMITS = "Kueue never admits it (QuotaReserved False, reason Pending):"


def admit(
    m: Kueue,
    namespace: str,
    queue_label: str | None,
    priority_class: str,
    ps: list[PodSet],
    validated: list[PodSet] | None = None,
) -> Admission:
    """The one admission entry: the LocalQueue the label names (none: the namespace's
    `default`, LocalQueue defaulting), its ClusterQueue (its namespaceSelector), the priority
    class, ValidateAdmissibility (`refusal`) and the flavor assignment of pod sets `ps` on the
    queues as they are now. `validated`: the pod sets Kueue validates where not `ps` (a
    TrainJob's, `trainjob_podsets`)."""
    lq = queue_label
    if lq is None and (namespace, DEFAULT_LOCAL_QUEUE) in m.local:
        lq = DEFAULT_LOCAL_QUEUE
    if lq is None:
        return Admission(
            None,
            reason=f"its object has no {QUEUE_LABEL} label and namespace {namespace} has no "
            f"LocalQueue {DEFAULT_LOCAL_QUEUE!r}: Kueue never admits it",
        )
    q = m.queues.get(m.local.get((namespace, lq), ""))
    if q is None:
        return Admission(lq, reason=f"no LocalQueue {lq!r} (with a ClusterQueue) in {namespace}")
    if not q.admits(namespace):
        return Admission(
            lq, q, reason=f"ClusterQueue {q.name} does not admit namespace {namespace}"
        )
    if priority_class and priority_class not in m.priorities:
        return Admission(lq, q, reason=f"no WorkloadPriorityClass {priority_class!r}")
    # ValidateAdmissibility, after the namespace selector
    invalid = refusal(ps if validated is None else validated)
    if invalid:
        return Admission(lq, q, reason=f"{NEVER_ADMITS} {invalid}", invalid=invalid)
    got = Assigner(Quotas(m.queues, m.shared), m.flavors).assign(q, list(ps))
    return Admission(lq, q, m.priorities.get(priority_class, 0), got)
