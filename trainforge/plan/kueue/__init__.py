"""The one model of Kueue admission (docs/architecture.md): objects, quota arithmetic, flavor
assignment, workloads and `admit`, the one admission entry; checks.queues runs the queue over
time on it. Tested on Kueue's own cases (tests/plan/test_kueue_model.py)."""

from trainforge.plan.kueue.assign import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    POSSIBLE,
    RECLAIM,
    Assigner,
    Assignment,
    PodSet,
    flavor_fits_podset,
    only_tas,
)
from trainforge.plan.kueue.objects import (
    GPU,
    RESOURCES,
    ClusterQueue,
    Flavor,
    Kueue,
    cluster_queue,
    quantity,
    read,
    summed,
)
from trainforge.plan.kueue.pending import (
    NEVER,
    deactivated,
    for_resources,
    held,
    never_fits,
    outlook,
    over_beside,
    refused,
)
from trainforge.plan.kueue.quota import Quotas
from trainforge.plan.kueue.workload import (
    NEVER_ADMITS,
    admit,
    counted_podset,
    pod_need,
    pod_requests,
    podset,
    refusal,
    trainjob_podsets,
    workload_invalid,
    workload_need,
    workload_podsets,
)

__all__ = [
    "FIT", "GPU", "NEVER", "NEVER_ADMITS", "NO_CANDIDATES", "NO_FIT", "POSSIBLE", "RECLAIM", "RESOURCES",
    "Assigner", "Assignment", "ClusterQueue", "Flavor", "Kueue", "PodSet", "Quotas", "admit",
    "deactivated", "for_resources", "held", "never_fits", "outlook", "over_beside", "refused",
    "cluster_queue", "flavor_fits_podset", "only_tas", "pod_need", "pod_requests", "podset",
    "quantity", "read", "refusal", "summed", "counted_podset", "trainjob_podsets", "workload_invalid", "workload_need", "workload_podsets",
]  # fmt: skip
