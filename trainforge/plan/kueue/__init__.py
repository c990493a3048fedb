"""The one model of Kueue admission in the plan: Kueue's objects (`objects`), its quota
arithmetic (`quota`), its flavor assignment (`assign`) and the taint/toleration matcher
(`taints`). The queue section, the cost report's admission, the SDK/kubectl placement
rehearsal and `trainforge status/why/wait` all read it (trainforge.plan.checks.queues runs
the queue over time on top of it). Tested against Kueue's own cases
(tests/plan/test_kueue_model.py)."""

from trainforge.plan.kueue.assign import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    POSSIBLE,
    PREEMPT,
    RECLAIM,
    Assigner,
    Assignment,
    Choice,
    PodSet,
    flavor_fits_podset,
    no_candidates,
)
from trainforge.plan.kueue.objects import (
    GPU,
    MAY_STOP,
    RESOURCES,
    TRY_NEXT,
    ClusterQueue,
    Flavor,
    Fungibility,
    Kueue,
    cluster_queue,
    quantity,
    read,
)
from trainforge.plan.kueue.quota import Quotas
from trainforge.plan.kueue.taints import schedules, tolerates, untolerated

__all__ = [
    "FIT", "NO_CANDIDATES", "POSSIBLE", "RECLAIM", "GPU", "MAY_STOP", "NO_FIT", "PREEMPT", "RESOURCES", "TRY_NEXT", "Assigner",
    "Assignment", "Choice", "ClusterQueue", "Flavor", "Fungibility", "Kueue", "PodSet", "Quotas",
    "cluster_queue", "flavor_fits_podset", "no_candidates", "quantity", "read", "schedules",
    "tolerates", "untolerated",
]  # fmt: skip
