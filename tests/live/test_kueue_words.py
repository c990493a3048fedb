"""What `status`, `why` and `wait` read of a Workload Kueue has not admitted, against Kueue's
own expected QuotaReserved messages: each case below is copied from Kueue's tests at
kubernetes-sigs/kueue release-0.19 (c90ed700c1, read 2026-11-30), file:line named, with
what it says of the Workload's future (trainforge/plan/kueue/pending.py `outlook`).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from trainforge.plan import kueue as K
from trainforge.plan.kueue import words as W

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
    # pod set three's own 15 fits the 50: the pod sets before it filled the flavor, and from
    # the message alone they may take another flavor another time (pending.py; see
    # test_a_flavor_earlier_pod_sets_filled_is_not_never)
    (f"{SCHED}:2920", MAY, f"{HEAD}three: insufficient quota for cpu in flavor default, "
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
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    never = W.message({"main": [W.untolerated(taint, "gpu")]})
    assert K.outlook(_pending(never)) == (NEVER, never)


# two pod sets on one ClusterQueue: flavor one (4 cpu, 3 used) and flavor "tainted" (10 cpu,
# 3 used; taint instance=spot), flavorassigner_test.go:1662's case (Preempt: its launcher
# needs preemption in one, its workers in tainted, both named)
FLAVORS = {
    "one": K.Flavor("one", {}, [], None),
    "tainted": K.Flavor("tainted", {}, [{"key": "instance", "value": "spot", "effect": "NoSchedule"}], None),
}  # fmt: skip
SPOT = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


def _assign(podsets: list[K.PodSet], quota: dict[str, str], usage: dict[str, int]):
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": f, "resources": [{"name": "cpu", "nominalQuota": n}]} for f, n in quota.items()
        ]}]},
    }  # fmt: skip
    m = K.read([doc])
    m.queues["q"].usage = {f: {"cpu": Fraction(n)} for f, n in usage.items()}
    flavors = {f: FLAVORS.get(f) or K.Flavor(f, {}, [], None) for f in quota}
    # Kueue's testOracle: a workload using the quota may be preempted
    assigner = K.Assigner(K.Quotas(m.queues, m.shared), flavors, lambda *_: (K.POSSIBLE, 0))
    return assigner.assign(m.queues["q"], podsets)


def test_the_pod_set_kueue_stopped_at_decides():
    """Kueue names a pod set that took flavors when it needs preemption, then the pod set no
    flavor takes, where it stops: the last decides. Read as a whole, the first one's
    shortfall hid that the workers are never admitted (their own 10 cpu over flavor one's 4,
    the other flavor's taint untolerated)."""
    launcher = K.PodSet("launcher", 1, {"cpu": Fraction(2)})
    workers = K.PodSet("workers", 10, {"cpu": Fraction(1)}, tolerations=(SPOT,))
    quota, usage = {"one": "4", "tainted": "10"}, {"one": 3, "tainted": 3}
    may = _assign([launcher, workers], quota, usage)
    assert (may.mode, may.message) == ("Preempt", FLAVORASSIGNER_1662)
    assert K.outlook(_pending(may.message)) == (MAY, "")
    never = _assign([launcher, dataclasses.replace(workers, tolerations=())], quota, usage)
    assert never.mode == "NoFit" and never.message == (
        FLAVORASSIGNER_1662.rpartition(", insufficient unused")[0]
        + ", untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"
    )
    assert K.outlook(_pending(never.message)) == (NEVER, never.message)


FLAVORASSIGNER_1662 = (  # its Status (:1701-1703, :1729-1731) as Assignment.Message writes it
    f"{HEAD}launcher: insufficient unused quota for cpu in flavor one, 1 more needed, "
    "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted; "
    f"{HEAD}workers: insufficient quota for cpu in flavor one, previously considered podsets "
    "requests (2) + current podset request (10) > maximum capacity (4), insufficient unused "
    "quota for cpu in flavor tainted, 3 more needed"
)


def test_a_flavor_earlier_pod_sets_filled_is_not_never():
    """Over the maximum capacity only with what the pod sets before it took ("previously
    considered podsets" above 0, its own request within): not never. Flavors a and b of 10
    cpu each, pod sets of 3, 3, 7 and 7 cpu. On an idle queue the first two take a, the
    third b, and the fourth fits neither; with 6 cpu of a used by another workload the second
    passes a (preemption needed, whenCanPreempt TryNextFlavor) for b, and the workload is
    admitted once that workload is preempted."""
    podsets = [K.PodSet(f"p{i}", 1, {"cpu": Fraction(n)}) for i, n in enumerate((3, 3, 7, 7))]
    idle = _assign(podsets, {"a": "10", "b": "10"}, {})
    over = "insufficient quota for cpu in flavor {}, previously considered podsets requests ({})"
    assert idle.mode == "NoFit" and idle.message == (
        f"{HEAD}p3: {over.format('a', 6)} + current podset request (7) > maximum capacity "
        f"(10), {over.format('b', 7)} + current podset request (7) > maximum capacity (10)"
    )
    assert K.outlook(_pending(idle.message)) == (MAY, "")
    busy = _assign(podsets, {"a": "10", "b": "10"}, {"a": 6})
    assert busy.mode == "Preempt"
    assert {ps: c["cpu"].flavor for ps, c in busy.podsets.items()} == {
        "p0": "a",
        "p1": "b",
        "p2": "b",
        "p3": "a",
    }


def test_the_live_reader_reads_the_over_capacity_words_as_words_py_writes_them(monkeypatch):
    """pending.py's pattern for "over the maximum capacity" is built from words.py (wave 18's
    `_FOR_GOOD` likewise): Kueue's words changed there are read alike, with no copy to edit."""
    import importlib

    from trainforge.plan.kueue import pending

    def reworded(r: str, f: str, assumed: str, request: str, most: str) -> str:
        return f"{r} over in {f}: ({assumed}) before, ({request}) asked, ({most}) at most"

    monkeypatch.setattr(W, "over_words", reworded)
    try:
        changed = importlib.reload(pending)
        own = W.message({"main": [W.over_capacity("cpu", "a", 0, 12, 10)]})
        earlier = W.message({"main": [W.over_capacity("cpu", "a", 6, 3, 8)]})
        assert "cpu over in a: (0) before, (12) asked, (10) at most" in own
        assert changed.outlook(_pending(own)) == (NEVER, own)
        assert changed.outlook(_pending(earlier)) == (MAY, "")
    finally:
        monkeypatch.undo()
        importlib.reload(pending)
