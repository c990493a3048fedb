"""What Kueue reads of a workload (its pods' requests after Kueue's own adjustments, its pod
set) and where it takes it (`admit`, the model's one admission entry).

Why the adjustments: a Job, CronJob or SDK TrainJob that a user writes often names no requests at all. Kueue
does not admit such a pod set as "nothing": when it builds the Workload it applies, in this
order, the RuntimeClass overhead, the namespace's LimitRange defaults (a container's missing
limits from `default`, missing requests from `defaultRequest`, as the API server stores the
LimitRange; the pod's own `resources` from a LimitRange of type Pod) and then limits as
missing requests (pkg/workload/resources.go `AdjustResources`, `handlePodLimitRange`,
`handleLimitsToRequests` at release-0.19 c90ed70, read 2026-11-29). The pod's total is the
sum over its containers and sidecars (init containers with restartPolicy Always), or its
largest init container (with the sidecars started before it) where that is larger, with the
pod's own requests of CPU, memory and hugepages in place of that sum where it writes them,
plus the overhead (the scheduler's and Kueue's pod requests: the Kubernetes `PodRequests`,
which Kueue's pkg/workload/workload.go `totalRequestsFromPodSets` calls). The flavor assignment then sees the
team namespace's 500m CPU / 1Gi, not an empty request. That arithmetic is the API server's and
the scheduler's too, so it lives below the plan (trainforge.core.pods.pod_requests), where
Karpenter's packing of a gang reads it as well (trainforge.jobs.capacity.gang).
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
from trainforge.plan.kueue.objects import GPU, RESOURCES, ClusterQueue, Kueue, quantity
from trainforge.plan.kueue.quota import Quotas
from trainforge.platform.queues import DEFAULT_LOCAL_QUEUE


def workload_podsets(
    wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> list[PodSet]:
    """A Workload object's pod sets as Kueue reads them, in the quota's resources: each pod as
    `pod_requests` counts it (Kueue reads the Workload's pod templates, adjusts them in memory
    with `AdjustResources` and totals each with the Kubernetes `PodRequests` times the pod
    set's count: pkg/workload/workload.go `totalRequestsFromPodSets` at release-0.19
    c90ed70), its selector, tolerations and topology request. `limit_ranges` are the
    LimitRange documents of the Workload's namespace (without them, a container with neither
    requests nor limits asks nothing)."""
    limit_ranges = list(limit_ranges)
    out = []
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        tmpl = ps.get("template") or {}
        pod = pod_requests(tmpl.get("spec") or {}, limit_ranges)
        per_pod = {r: v for r, v in pod.items() if r in RESOURCES}
        got = podset(tmpl, per_pod, int(ps.get("count", 1)), limit_ranges)
        out.append(replace(got, name=str(ps.get("name", got.name))))
    return out


def workload_invalid(wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()) -> str:
    """Kueue's error for a Workload object it refuses for its pods' resources once its
    namespace's `limit_ranges` defaulted them (`refusal`), "" when it does not."""
    return refusal(workload_podsets(wl, limit_ranges))


def refusal(ps: Iterable[PodSet]) -> str:
    """The error of Kueue's ValidateAdmissibility for these pod sets, in order: a container
    requesting more than it limits (`ValidateResources`), else a container or pod outside the
    namespace's LimitRange min/max (`ValidateLimitRange`); "" when neither (pkg/workload/
    resources.go at release-0.19 c90ed70)."""
    ps = list(ps)
    return invalid_resources(p.over_limits for p in ps) or limit_range_refusal(
        p.outside_limit_range for p in ps
    )


def workload_need(
    wl: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Fraction]:
    """What a Workload object asks in all (every pod of every pod set, `workload_podsets`
    with its namespace's `limit_ranges`), in the quota's resources."""
    total: dict[str, Fraction] = {}
    for ps in workload_podsets(wl, limit_ranges):
        for res, amount in ps.total().items():
            total[res] = total.get(res, Fraction(0)) + amount
    return total


def trainjob_podsets(
    doc: dict[str, Any],
    runtimes: Mapping[str, Mapping[str, Any]] | None,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
) -> list[PodSet] | None:
    """Kueue's pod sets of TrainJob `doc` as it validates them: one per replicatedJob of the
    JobSet the Trainer builds from the runtime the job names, in order (Kueue release-0.19
    pkg/controller/jobs/trainjob `podSets` -> pkg/controller/jobs/jobset `JobSet.PodSets`;
    Trainer v2.2.1 pkg/runtime/framework/plugins/jobset/builder.go keeps every replicatedJob
    of the runtime; read 2026-11-30), the trainer's pod as the Trainer builds it
    (`trainjob.built_pod`), the others as the runtime writes them (a TrainJob's
    runtimePatches of those are not applied here). None when the runtime is not known or the
    job too malformed to build (validation reports it)."""
    try:
        node = trainjob.built_pod(doc, runtimes)
    except (KeyError, TypeError, AttributeError, StopIteration):
        return None
    runtime = trainjob.runtime_of(doc, runtimes)
    if node is None or runtime is None:
        return None
    limit_ranges = list(limit_ranges)
    return [
        replace(
            podset(
                node if t.name == trainjob.REPLICATED_JOB else t.template,
                {},
                t.replicas,
                limit_ranges,
            ),
            name=t.name,
        )  # fmt: skip
        for t in backends.pod_templates(dict(runtime))
    ]


_TOPOLOGY = (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, UNCONSTRAINED_TOPOLOGY)


def pod_need(spec: Any) -> dict[str, Fraction]:
    """What one pod of a job spec (trainforge.jobs.spec.JobSpec) asks: its worker's CPU,
    memory and GPUs."""
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
    `per_pod`: its nodeSelector, required node affinity and tolerations, whether it asks
    for topology-aware scheduling (a podset topology annotation), what its containers
    request over their limits once the namespace's `limit_ranges` defaulted them, and where
    they or the pod fall outside those LimitRanges' min and max (Kueue's ValidateResources and
    ValidateLimitRange of the adjusted template: `admit` refuses such a pod set)."""
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
        topology=any(k in notes for k in _TOPOLOGY),
        over_limits=over,
        outside_limit_range=outside,
    )


@dataclass
class Admission:
    """Where Kueue takes one workload on idle queues (`admit`): its LocalQueue (None: no
    queue label and no LocalQueue `default`), ClusterQueue, priority and flavor assignment;
    `reason` says why it never gets one before the flavor assignment is tried (the one
    wording of each such fact, which the plan's findings and rehearsals print)."""

    local_queue: str | None
    queue: ClusterQueue | None = None
    priority: int = 0
    assignment: Assignment | None = None
    reason: str = ""
    invalid: str = ""  # Kueue's ValidateAdmissibility error (`refusal`), where that is the reason


# how the plan introduces Kueue's own message for a pod set it refuses (`Admission.invalid`):
# the scheduler writes it as the Workload's QuotaReserved False condition, with reason
# "Pending" at Kueue 0.19's default feature gates, which the platform keeps (Misconfigured only
# with UnadmittedWorkloadsObservability, beta and off by default: pkg/features/kube_features.go,
# pkg/scheduler/scheduler.go `requeueAndUpdate` -> UnadmittedWorkloadReasonWithFallback at
# release-0.19 c90ed70, read 2026-11-30)
NEVER_ADMITS = "Kueue never admits it (QuotaReserved False, reason Pending):"


def admit(
    m: Kueue,
    namespace: str,
    queue_label: str | None,
    priority_class: str,
    ps: list[PodSet],
    validated: list[PodSet] | None = None,
) -> Admission:
    """The one admission entry: the LocalQueue the label names (without one, the namespace's
    LocalQueue `default`: manageJobsWithoutQueueName and LocalQueue defaulting), its
    ClusterQueue (whose namespaceSelector must select the namespace), the priority class,
    and Kueue's flavor assignment of its pod sets `ps` (one per pod template) on the queues as
    they are now. Pod sets Kueue refuses for their resources (`refusal`) are its `invalid`
    (pkg/workload/resources.go `ValidateAdmissibility` at release-0.19); `validated`: the pod
    sets of Kueue's Workload where they are not `ps`, in its order (a TrainJob's, one per
    replicatedJob of the JobSet its runtime builds)."""
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
    # ValidateAdmissibility, after the namespace selector: the scheduler marks the Workload
    # QuotaReserved False (reason Pending at the default gates) with this error, no flavors
    invalid = refusal(ps if validated is None else validated)
    if invalid:
        return Admission(lq, q, reason=f"{NEVER_ADMITS} {invalid}", invalid=invalid)
    got = Assigner(Quotas(m.queues, m.shared), m.flavors).assign(q, list(ps))
    return Admission(lq, q, m.priorities.get(priority_class, 0), got)
