"""What `status`, `why` and `wait` read of a Workload Kueue has not admitted, against Kueue's
own expected QuotaReserved messages: each case below is copied from Kueue's tests at
kubernetes-sigs/kueue release-0.19 (c90ed700c1, read 2026-11-30), file:line named, with
what it says of the Workload's future (trainforge/plan/kueue/pending.py `outlook`).
"""

from __future__ import annotations

import pytest

from trainforge.plan import kueue as K

NEVER, HELD, MAY = "never", "held", ""

SCHED = "pkg/scheduler/scheduler_test.go"
FA = "pkg/scheduler/flavorassigner/flavorassigner_test.go"
TAS = "pkg/scheduler/scheduler_tas_test.go"
WC = "pkg/controller/core/workload_controller_test.go"
HEAD = "couldn't assign flavors to pod set "

UPSTREAM = [
    # the scheduler's flavor assignment (Assignment.Message)
    (f"{SCHED}:699", MAY, f"{HEAD}main: insufficient unused quota for cpu in flavor on-demand, 5 "
     "more needed, untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted"),
    (f"{SCHED}:760", NEVER, f"{HEAD}main: insufficient quota for cpu in flavor on-demand, "
     "previously considered podsets requests (0) + current podset request (10) > maximum "
     "capacity (5), untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted"),
    (f"{SCHED}:810", NEVER, f"{HEAD}main: untolerated taint {{key val NoSchedule <nil>}} in "
     "flavor spot-tainted, untolerated taint {key val2 NoSchedule <nil>} in flavor spot-tainted-2"),
    (f"{SCHED}:1521", MAY, f"{HEAD}main: insufficient unused quota for cpu in flavor on-demand, "
     "50 more needed, insufficient unused quota for cpu in flavor spot, 1 more needed"),
    (f"{SCHED}:2034", MAY, f"{HEAD}main: insufficient unused quota for cpu in flavor on-demand, "
     "20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. "
     "Pending the preemption of 2 workload(s)"),
    (f"{SCHED}:2235", NEVER, f"{HEAD}main: resource example.com/gpu unavailable in ClusterQueue"),
    (f"{SCHED}:2920", NEVER, f"{HEAD}three: insufficient quota for cpu in flavor default, "
     "previously considered podsets requests (50) + current podset request (15) > maximum "
     "capacity (50)"),
    (f"{SCHED}:6683", NEVER, f"{HEAD}ps2: insufficient quota for cpu in flavor default, "
     "previously considered podsets requests (1k) + current podset request (9223372036854775) "
     "> maximum capacity (10k)"),
    (f"{SCHED}:7295", MAY, f"{HEAD}main: insufficient quota for cpu in flavor spot, previously "
     "considered podsets requests (0) + current podset request (20) > maximum capacity (10), "
     "insufficient unused quota for cpu in flavor on-demand, 20 more needed"),
    (f"{TAS}:2053", NEVER, f'{HEAD}one: Flavor "tas-default" does not contain the requested level'),
    (f"{TAS}:2135", MAY, f'{HEAD}one: topology "tas-single-level" allows to fit only 1 out of 2 pod(s)'),
    (f"{TAS}:3505", MAY, f'{HEAD}one: topology "tas-three-level" doesn\'t allow to fit; 0/1 slice(s) '
     "fit on level cloud.provider.com/rack; 2/3 slice(s) fit on level kubernetes.io/hostname"),
    # the scheduler's nominate and ValidateAdmissibility
    (f"{SCHED}:1017", NEVER, "workload namespace doesn't match ClusterQueue selector"),
    (f"{SCHED}:4379", NEVER, "resources didn't satisfy LimitRange constraints: spec.podSets[0]."
     'template.spec.containers[0]: Invalid value: ["cpu"]: requests must not be above the '
     "limitRange max"),
    (f"{SCHED}:4440", NEVER, "resources validation failed: spec.podSets[0].template.spec."
     'containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits'),
    # the workload controller (getQueueBlocker)
    (f"{WC}:1130", HELD, "ClusterQueue cq is inactive"),
    (f"{WC}:1364", NEVER, "LocalQueue lq doesn't exist"),
    (f"{WC}:1540", NEVER, "LocalQueue  doesn't exist"),  # a Workload with no queue name
    (f"{WC}:1563", NEVER, "LocalQueue non-existent-lq doesn't exist"),
]  # fmt: skip

# flavorassigner_test.go's expected per-flavor reasons, each alone in one pod set's message
REASONS = [
    (f"{FA}:942", NEVER, "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"),
    (FA, NEVER, "flavor one doesn't match node affinity"),
    (FA, NEVER, "flavor deleted-flavor not found"),
    (FA, NEVER, "resource example.com/gpu unavailable in ClusterQueue"),
    (FA, NEVER, "insufficient quota for memory in flavor b_one, previously considered podsets "
     "requests (0) + current podset request (10Mi) > maximum capacity (1Mi)"),
    (FA, MAY, "insufficient unused quota for cpu in flavor one, 1 more needed"),
]  # fmt: skip

# release-0.19 pkg/controller/core/workload_controller.go reconcileOnLocalQueueActiveState,
# reconcileOnClusterQueueActiveState: a Workload whose quota was reserved, not yet admitted,
# loses it when its queue is stopped or goes (no test of Kueue's names these words)
CONTROLLER = [
    ("LocalQueue lq is terminating or missing", NEVER),
    ("ClusterQueue cq is terminating or missing", NEVER),
    ("LocalQueue lq is stopped", HELD),
    ("ClusterQueue cq is stopped", HELD),
]


def _pending(message: str) -> dict:
    cond = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
    return {"status": {"conditions": [cond]}}


@pytest.mark.parametrize(("where", "kind", "message"), UPSTREAM)
def test_kueue_s_own_messages_say_what_kueue_does(where, kind, message):
    assert K.outlook(_pending(message)) == (kind, message if kind else ""), where


@pytest.mark.parametrize(("where", "kind", "reason"), REASONS)
def test_each_flavor_reason_kueue_writes_is_read_as_kueue_means_it(where, kind, reason):
    message = f"{HEAD}main: {reason}"
    assert K.outlook(_pending(message))[0] == kind, where


@pytest.mark.parametrize(("message", "kind"), CONTROLLER)
def test_a_stopped_or_missing_queue_of_a_reserved_workload(message, kind):
    """These were read as "may admit": status printed an expected start for a Workload a
    stopped queue holds, and wait kept waiting on one whose queue is gone."""
    assert K.outlook(_pending(message)) == (kind, message)


def test_a_taint_is_read_only_in_kueue_s_words():
    """Kueue prints the corev1.Taint value ({key value effect <nil>}); a reason worded
    otherwise is not Kueue's and says nothing of the Workload's future."""
    ours = f"{HEAD}main: untolerated taint nvidia.com/gpu in flavor gpu"
    assert K.outlook(_pending(ours)) == ("", "")
    never = "untolerated taint {nvidia.com/gpu true NoSchedule <nil>} in flavor gpu"
    assert K.outlook(_pending(f"{HEAD}a: {never}; {HEAD}b: {never}"))[0] == NEVER
