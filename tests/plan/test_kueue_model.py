"""The Kueue admission model (trainforge.plan.kueue) answers Kueue's own flavor-assigner cases
as Kueue does: each case of tests/plan/fixtures/kueue_flavorassigner.yaml is transcribed from
Kueue's Go tests (the file says which, at which commit) and run through the model. Plus the
toleration matcher against Kubernetes' ToleratesTaint rules. In memory, milliseconds each."""

from __future__ import annotations

import copy
import pathlib
import re
from fractions import Fraction

import pytest
import yaml

from trainforge.core import taints as T
from trainforge.core.quantity import parse_quantity
from trainforge.plan import kueue as K
from trainforge.plan.kueue import assign as A
from trainforge.plan.kueue import words as W

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "kueue_flavorassigner.yaml"
DATA = yaml.safe_load(FIXTURES.read_text())
MAIN, SECOND = "test-clusterqueue", "test-secondary-clusterqueue"


def _docs(case: dict) -> list[dict]:
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": name}, "spec": spec}
        for name, spec in DATA["flavors"].items()
    ]  # fmt: skip
    for name, key in ((MAIN, "clusterQueue"), (SECOND, "secondaryClusterQueue")):
        if key in case:
            docs.append(
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": name}, "spec": case[key]}
            )  # fmt: skip
    return docs


def _use(usage: dict | None) -> dict[str, dict[str, Fraction]]:
    return {f: {r: K.quantity(v) for r, v in per.items()} for f, per in (usage or {}).items()}


def _podset(p: dict) -> K.PodSet:
    return K.PodSet(
        name=p["name"],
        count=p["count"],
        requests={r: K.quantity(v) for r, v in p["requests"].items()},
        node_selector=p.get("nodeSelector") or {},
        affinity=tuple(tuple(t) for t in p.get("affinity") or ()),
        tolerations=tuple(p.get("tolerations") or ()),
        topology=bool(p.get("topology")),
    )


def _oracle(answers: dict):
    def oracle(q, f, r, val):  # Kueue's testOracle: Preempt, 0 unless the case says
        possibility, after = answers.get(f"{f}/{r}", ["Preempt", 0])
        return possibility, after

    return oracle


@pytest.mark.parametrize(
    "case", DATA["cases"], ids=[f"{c['test']}/{c['case']}" for c in DATA["cases"]]
)
def test_the_model_assigns_flavors_as_kueue_does(case):
    model = K.read(_docs(case))
    model.queues[MAIN].usage = _use(case.get("usage"))
    if SECOND in model.queues:
        model.queues[SECOND].usage = _use(case.get("secondaryUsage"))
    assigner = K.Assigner(
        K.Quotas(model.queues, model.shared), model.flavors, _oracle(case.get("oracle") or {})
    )
    got = assigner.assign(model.queues[MAIN], [_podset(p) for p in case["podSets"]])
    want = case["want"]
    assert got.mode == want["mode"], got.reasons
    flavors = {
        ps: {r: f"{c.flavor}/{c.mode}" for r, c in per.items()} for ps, per in got.podsets.items()
    }
    assert flavors == want["podSets"], got.reasons
    assert got.borrowing == want.get("borrowing", 0)


def _assign(case: dict) -> K.Assignment:
    model = K.read(_docs(case))
    model.queues[MAIN].usage = _use(case.get("usage"))
    if SECOND in model.queues:
        model.queues[SECOND].usage = _use(case.get("secondaryUsage"))
    assigner = K.Assigner(
        K.Quotas(model.queues, model.shared), model.flavors, _oracle(case.get("oracle") or {})
    )
    return assigner.assign(model.queues[MAIN], [_podset(p) for p in case["podSets"]])


WORDED = [c for c in DATA["cases"] if "reasons" in c]


@pytest.mark.parametrize("case", WORDED, ids=[c["case"] for c in WORDED])
def test_the_model_words_its_reasons_as_kueue_does(case):
    """Each reason the assigner writes is Kueue's own text, from the same data: the taint as
    Go prints a corev1.Taint, the amounts as Kueue's ResourceFormatter writes them."""
    assert sorted(_assign(case).reasons) == sorted(case["reasons"])


MESSAGED = [c for c in DATA["cases"] if "message" in c]


@pytest.mark.parametrize("case", MESSAGED, ids=[c["case"] for c in MESSAGED])
def test_the_model_writes_kueue_s_message(case):
    """The QuotaReserved message Kueue writes of the assignment, two- and three-pod-set ones
    among them: only a pod set whose best flavor needs preemption, or that no flavor takes,
    is named, and none after the first that no flavor takes."""
    assert _assign(case).message == case["message"]


def _case(name: str) -> dict:
    return copy.deepcopy(next(c for c in DATA["cases"] if c["case"].startswith(name)))


def test_the_model_stops_at_the_first_pod_set_no_flavor_takes():
    """assignFlavors returns at the first pod set no flavor takes (release-0.19 c90ed70
    flavorassigner.go:846-850): Kueue's :3494 case with its pod sets in the other order, the
    fitting one selecting flavor two. It is neither tried nor named, though tried it would
    fit (and name flavor one's node affinity); the model tried and named it."""
    case = _case("multi-podset, one fits and another fails")
    fitting, blocking = case["podSets"]
    case["podSets"] = [blocking, {**fitting, "nodeSelector": {"type": "two"}}]
    got = _assign(case)
    assert (got.mode, got.podsets) == ("NoFit", {"blocking-podset": {}})
    over = "previously considered podsets requests (0) + current podset request (5) > maximum"
    assert got.message == (
        f"{W.POD_SET}blocking-podset: insufficient quota for cpu in flavor one, {over} "
        f"capacity (2), insufficient quota for cpu in flavor two, {over} capacity (2)"
    )
    assert got.reasons == [
        f"insufficient quota for cpu in flavor {f}, {over} capacity (2)" for f in ("one", "two")
    ]


def test_every_resource_of_a_flavor_is_worded_past_one_that_does_not_fit():
    """Kueue checks each resource of a flavor in a requests.ForEach whose callback returns
    once the flavor does not fit (flavorassigner.go:1149-1152): that ends one resource's
    turn, not the loop, so the next resources are checked and worded too. The model broke
    off at the first."""
    case = _case("multiple resources in a group, doesn't fit")
    case["clusterQueue"]["resourceGroups"][0]["flavors"] = [
        {"name": "one", "resources": [{"name": "cpu", "nominalQuota": "2"},
                                      {"name": "memory", "nominalQuota": "1Mi"}]}
    ]  # fmt: skip
    over = "previously considered podsets requests (0) + current podset request"
    assert _assign(case).message == (
        f"{W.POD_SET}main: insufficient quota for cpu in flavor one, {over} (3) > maximum "
        f"capacity (2), insufficient quota for memory in flavor one, {over} (10Mi) > maximum "
        "capacity (1Mi)"
    )


def _more_reasons() -> list[str]:
    """Reasons no fixture case words: a missing flavor, taints without a value or with a
    timeAdded, a topology mismatch, amounts in binary and decimal suffixes."""
    taints = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {
            "key": "spot",
            "value": "true",
            "effect": "NoExecute",
            "timeAdded": "2026-11-30T09:00:00Z",
        },
    ]
    flavors = {
        "a": K.Flavor("a", {}, taints[:1], None),
        "b": K.Flavor("b", {}, taints[1:], None),
        "t": K.Flavor("t", {}, [], "topo"),
    }
    ps = K.PodSet("main", 3, {"cpu": Fraction(3, 2), "memory": Fraction(2 * 2**30)})
    out = [A.flavor_fits_podset(ps, flavors.get(f), False, f) for f in ("gone", "a", "b", "t")]
    out.append(A.flavor_fits_podset(K.PodSet("m", 1, {}, topology=True), flavors["a"], False, "a"))
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "d", "resources": [{"name": "cpu", "nominalQuota": "4500m"},
                                        {"name": "memory", "nominalQuota": "8Gi"}]}]}]},
    }  # fmt: skip
    m = K.read([doc])
    m.queues["q"].usage = {"d": {"cpu": Fraction(1, 2)}}
    got = K.Assigner(K.Quotas(m.queues, m.shared), {"d": K.Flavor("d", {}, [], None)})
    out += got.assign(m.queues["q"], [ps]).reasons
    big = K.PodSet("main", 1, {"memory": Fraction(9 * 2**30), "cpu": Fraction(1)})
    out += got.assign(m.queues["q"], [big]).reasons
    return [r for r in out if r]


def test_reasons_beyond_the_fixtures_in_kueue_s_words():
    """Worded as flavorassigner.go:1220, :1243 (Go's %v of a corev1.Taint value: an empty value
    leaves two spaces, a *metav1.Time prints as time.Time.String), tas_flavorassigner.go:182,
    and :1350/:1368 with resource_formatter.go's amounts (cpu in milli, memory BinarySI)."""
    assert _more_reasons() == [
        "flavor gone not found",
        "untolerated taint {nvidia.com/gpu  NoSchedule <nil>} in flavor a",
        "untolerated taint {spot true NoExecute 2026-11-30 09:00:00 +0000 UTC} in flavor b",
        'Flavor "t" supports only TopologyAwareScheduling',
        'Flavor "a" does not support TopologyAwareScheduling',
        "insufficient unused quota for cpu in flavor d, 500m more needed",
        "insufficient quota for memory in flavor d, previously considered podsets requests (0) "
        "+ current podset request (9Gi) > maximum capacity (8Gi)",
    ]


@pytest.mark.parametrize(
    ("added", "go"),
    [
        ("2026-11-30T09:00:00Z", "2026-11-30 09:00:00 +0000 UTC"),
        ("2026-11-30T09:00:00.500Z", "2026-11-30 09:00:00.5 +0000 UTC"),
        ("2026-11-30T10:00:00.1234567891+01:00", "2026-11-30 09:00:00.123456789 +0000 UTC"),
        ("2026-11-30T09:00:00.000Z", "2026-11-30 09:00:00 +0000 UTC"),
        ("2026-11-30 09:00:00", "2026-11-30 09:00:00"),  # not RFC 3339: Kueue cannot decode it
    ],
)
def test_a_taint_s_time_added_as_go_prints_a_metav1_time(added, go):
    """time.Time.String of the parsed time in the manager's zone (UTC): the fraction of a
    second as Go keeps it (9 digits, trailing zeros dropped), an offset moved to UTC. The
    fraction was dropped, and a stamp that is not RFC 3339 read as local time or raised."""
    t = {"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": added}
    assert W.taint(t) == f"{{k v NoExecute {go}}}"


@pytest.mark.parametrize(
    ("resource", "value", "kueue"),
    [
        # Kueue's own expected amounts (flavorassigner_test.go:703, scheduler_test.go:6683)
        ("memory", Fraction(10 * 2**20), "10Mi"),
        ("cpu", Fraction(1000), "1k"),
        ("cpu", Fraction(10000), "10k"),
        ("cpu", Fraction(9223372036854775), "9223372036854775"),
        ("cpu", Fraction(0), "0"),
        # apimachinery's canonical forms: milli, binary only where exact, decimal under 1024
        ("cpu", Fraction(3, 2), "1500m"),
        ("memory", Fraction(1000), "1k"),
        ("memory", Fraction(1536), "1536"),
        ("memory", Fraction(2_000_000), "2M"),
        ("memory", Fraction(3 * 2**30), "3Gi"),
        ("nvidia.com/gpu", Fraction(16), "16"),
        ("pods", Fraction(3000), "3k"),
    ],
)
def test_amounts_as_kueue_s_resource_formatter_writes_them(resource, value, kueue):
    assert W.quantity(resource, value) == kueue


def test_pending_reads_every_reason_the_assigner_writes():
    """`pending.outlook` reads the plan's own reasons as it reads Kueue's: each alone in a pod
    set's message is never, but a shortfall of unused quota, which waiting cures, and a
    maximum capacity the pod set's own request is within (earlier pod sets filled it)."""
    head = "couldn't assign flavors to pod set main: "
    reasons = [r for c in DATA["cases"] for r in _assign(c).reasons] + _more_reasons()
    kinds = ("untolerated taint {", "insufficient quota ", "insufficient unused ", "flavor ")
    kinds += ("resource ", 'Flavor "')
    assert all(any(r.startswith(k) for r in reasons) for k in kinds)
    seen = set()
    for r in reasons:
        own = re.search(r"current podset request \((\S+)\) > maximum capacity \((\S+)\)", r)
        filled = bool(own and parse_quantity(own[1]) <= parse_quantity(own[2]))
        seen.add(filled)
        wait = r.startswith("insufficient unused quota for ") or filled
        assert K.outlook(_pending(head + r)) == (("", "") if wait else ("never", head + r)), r
        if wait:
            assert filled or re.fullmatch(
                r"insufficient unused quota for \S+ in flavor \S+, \S+ more needed", r
            )
    assert seen == {True, False}  # both kinds of maximum capacity are read


def _pending(message: str) -> dict:
    c = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
    return {"status": {"conditions": [c]}}


def test_the_fixtures_cover_the_families_the_brief_names():
    names = " ".join(c["case"] for c in DATA["cases"])
    for family in ("taint", "node selector", "affinity", "borrow", "preempt", "TAS",
                   "not listed", "lend", "TryNextFlavor", "MayStopSearch"):  # fmt: skip
        assert family in names, family
    assert len(DATA["cases"]) >= 15


# Kubernetes' ToleratesTaint (k8s.io/api core/v1 toleration.go): effect, key, operator, value
TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, True),
        ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, True),  # Equal
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # no key: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, False),  # another effect
        ({"key": "nvidia.com/gpu"}, False),  # Equal, missing value "" != "true"
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Lt", "value": "1"}, False),
    ],
)
def test_one_toleration_matcher_with_kubernetes_rules(toleration, tolerated):
    assert T.tolerates(toleration, TAINT) is tolerated


def test_a_missing_value_tolerates_only_a_taint_without_value():
    assert T.tolerates({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"})


def _tas_pool_queue() -> K.Kueue:
    rf = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": name}, "spec": spec}
        for name, spec in (
            ("cpu", {"nodeLabels": {"trainforge.io/pool": "cpu"}}),
            ("p4d", {"nodeLabels": {"trainforge.io/pool": "p4d"}, "topologyName": "aws-network"}),
        )
    ]  # fmt: skip
    flavor = [
        {"name": f, "resources": [{"name": K.GPU, "nominalQuota": "8"}]} for f in ("cpu", "p4d")
    ]
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "t"},
          "spec": {"resourceGroups": [{"coveredResources": [K.GPU], "flavors": flavor}]}}  # fmt: skip
    return K.read([*rf, cq])


@pytest.mark.parametrize("mode", ["none", "preferred", "layer-2"])
def test_every_topology_mode_of_a_job_on_a_topology_pool_reaches_its_flavor(mode):
    """A job pinned to an EFA node group (a topology flavor) whose pod set asks no topology is
    never admitted (the flavor "supports only TopologyAwareScheduling"): `topology: none`
    must still ask it, unconstrained."""
    from types import SimpleNamespace

    from trainforge.jobs import tenancy

    job = SimpleNamespace(name="llm", topology=mode)
    target = SimpleNamespace(
        pool=SimpleNamespace(topology_aware=True), team=SimpleNamespace(queue="q")
    )
    notes = tenancy.topology_annotations(job, target)
    tmpl = {"metadata": {"annotations": notes},
            "spec": {"containers": [], "nodeSelector": {"trainforge.io/pool": "p4d"}}}  # fmt: skip
    m = _tas_pool_queue()
    ps = K.podset(tmpl, {K.GPU: Fraction(8)}, 1)
    got = K.Assigner(K.Quotas(m.queues, m.shared), m.flavors).assign(m.queues["t"], [ps])
    assert (got.mode, got.flavor) == (K.FIT, "p4d"), got.reasons
    bare = K.podset({"spec": tmpl["spec"]}, {K.GPU: Fraction(8)}, 1)
    got = K.Assigner(K.Quotas(m.queues, m.shared), m.flavors).assign(m.queues["t"], [bare])
    assert (
        got.mode == K.NO_FIT and 'Flavor "p4d" supports only TopologyAwareScheduling' in got.reasons
    )


def test_kueue_counts_limitrange_defaults_and_limits_for_missing_requests():
    """pkg/workload/resources.go AdjustResources at release-0.19: LimitRange defaults fill a
    container's missing limits/requests, then limits stand for missing requests; init
    containers count by their largest, overhead is added. A pod naming no requests in a team
    namespace is therefore not an empty pod set."""
    from fractions import Fraction

    from trainforge.core.pods import pod_requests

    lr = {
        "kind": "LimitRange",
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "2", "memory": "4Gi"},
                    "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
                }
            ]
        },
    }
    bare = {"containers": [{"name": "t"}]}
    assert pod_requests(bare) == {}
    assert pod_requests(bare, [lr]) == {"cpu": Fraction(1, 2), "memory": Fraction(2**30)}
    limits_only = {"containers": [{"name": "t", "resources": {"limits": {"cpu": "3"}}}]}
    # Kueue fills defaultRequest before it turns limits into missing requests
    assert pod_requests(limits_only, [lr])["cpu"] == Fraction(1, 2)
    assert pod_requests(limits_only)["cpu"] == 3  # no LimitRange: the limit
    two = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}] * 2,
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "5"}}}],
        "overhead": {"cpu": "250m"},
    }
    assert pod_requests(two)["cpu"] == Fraction(21, 4)


def test_kueue_counts_a_sidecar_beside_the_containers_and_the_init_containers_after_it():
    """Kueue totals a pod with the Kubernetes PodRequests (pkg/workload/workload.go
    `totalRequestsFromPodSets` at release-0.19 c90ed70), where a sidecar (an init container
    with restartPolicy Always) runs beside the containers and the init containers after it:
    Kueue's own pkg/workload/resources_test.go ("pod doesn't satisfy LimitRange constraints")
    counts a 300m container and a 300m sidecar as 600m, over a 500m Pod maximum."""
    from fractions import Fraction

    from trainforge.core.pods import pod_requests

    def c(cpu: str, **kw) -> dict:
        return {"name": "c", "resources": {"requests": {"cpu": cpu}}, **kw}

    assert pod_requests(
        {"containers": [c("300m")], "initContainers": [c("300m", restartPolicy="Always")]}
    )["cpu"] == Fraction(3, 5)
    # init containers: [plain 1, sidecar 2, plain 3] -> max(1, 2, 3 + 2) = 5 over the
    # containers' 1 + sidecar 2
    pod = {
        "containers": [c("1")],
        "initContainers": [c("1"), c("2", restartPolicy="Always"), c("3")],
    }
    assert pod_requests(pod)["cpu"] == 5
    pod["initContainers"] = [c("1"), c("2", restartPolicy="Always")]
    assert pod_requests(pod)["cpu"] == 3  # the containers and the sidecar, running together


def test_flavor_selector_reads_an_invalid_requirement_as_selecting_nothing():
    """Kueue's flavorSelector keeps the affinity terms' expressions on the flavor's label
    keys and matches them with component-helpers' RequiredNodeAffinity, where a term with an
    invalid requirement (NotIn with no values: apimachinery NewRequirement) selects nothing
    (tests/fixtures/upstream/scheduling.yaml); an emptied term still matches any flavor."""
    flavor = K.Flavor("one", {"type": "one"}, [], None)
    bad = ({"key": "type", "operator": "NotIn", "values": []},)
    ps = K.PodSet("main", 1, {"cpu": Fraction(1)}, affinity=(bad,))
    assert not A.selector_matches(ps, flavor)
    good = ({"key": "type", "operator": "NotIn", "values": ["two"]},)
    assert A.selector_matches(K.PodSet("main", 1, {}, affinity=(bad, good)), flavor)
    other = ({"key": "zone", "operator": "In", "values": ["a"]},)  # not a key of the flavor
    assert A.selector_matches(K.PodSet("main", 1, {}, affinity=(bad, other)), flavor)


AVAILABLE = yaml.safe_load((FIXTURES.parent / "kueue_available.yaml").read_text())["cases"]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c["case"],
            marks=[pytest.mark.xfail(reason=c["modelled_less"], strict=True)]
            if "modelled_less" in c
            else [],
        )
        for c in AVAILABLE
    ],
)
def test_quota_arithmetic_as_kueue_test_available(case: dict) -> None:
    """Kueue's TestAvailable (tests/plan/fixtures/kueue_available.yaml says where): each
    ClusterQueue's available and potentially available quota per flavor, before its usage
    is added, with it, and after it is removed, as the Go test checks."""
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind,
         "metadata": {"name": name}, "spec": spec}
        for kind, key in (("ClusterQueue", "clusterQueues"), ("Cohort", "cohorts"))
        for name, spec in (case.get(key) or {}).items()
    ]  # fmt: skip
    model = K.read(docs)
    quotas = K.Quotas(model.queues, model.shared)

    def got(kind: str) -> dict:
        fn = quotas.available if kind == "available" else quotas.potential
        return {
            name: {f: {r: fn(q, f, r) for r in per} for f, per in q.nominal.items()}
            for name, q in model.queues.items()
        }

    def want(key: str) -> dict:
        return {
            name: {f: {r: K.quantity(v) for r, v in per.items()} for f, per in fr.items()}
            for name, fr in case[key].items()
        }

    potential = want("wantPotentiallyAvailable")
    assert (got("available"), got("potential")) == (potential, potential)  # before usage
    for name, per in (case.get("usage") or {}).items():
        model.queues[name].usage = _use(per)
    assert (got("available"), got("potential")) == (want("wantAvailable"), potential)
    for q in model.queues.values():
        q.usage = {}
    assert (got("available"), got("potential")) == (potential, potential)  # removed


# Kueue's TestIsPreferred (pkg/scheduler/flavorassigner/flavorassigner_test.go, release-0.19 at
# c90ed700c1b64e6db76b766d8337a63ca439d2dd, read 2026-11-29 from the local mirror), every case:
# (preemption mode, borrowing level) of a and b, flavorFungibility.preference, a preferred.
_NO_FIT, _NO_CANDIDATES, _PREEMPT, _FIT = A._NO_FIT, A._NO_CANDIDATES, A._PREEMPT, A._FIT
BORROWING, PREEMPTION = "BorrowingOverPreemption", "PreemptionOverBorrowing"


@pytest.mark.parametrize(
    ("a", "b", "preference", "preferred"),
    [
        ((_FIT, 0), (_PREEMPT, 0), None, True),  # feature gate disabled prioritises preemption
        ((_PREEMPT, 1), (_FIT, 2), BORROWING, False),
        ((_PREEMPT, 1), (_FIT, 2), PREEMPTION, True),  # prioritises lower preemption
        ((_PREEMPT, 1), (_FIT, 1), PREEMPTION, False),  # breaks borrowing ties with preemption
        ((_NO_CANDIDATES, 1), (_FIT, 2), PREEMPTION, False),
        ((_FIT, 2), (_NO_CANDIDATES, 1), PREEMPTION, True),
        ((_NO_CANDIDATES, 1), (_NO_FIT, 0), None, True),
        ((_NO_FIT, 0), (_NO_CANDIDATES, 1), None, False),
        ((_NO_CANDIDATES, 1), (_NO_CANDIDATES, 2), PREEMPTION, True),
        ((_NO_CANDIDATES, 2), (_NO_CANDIDATES, 1), PREEMPTION, False),
    ],
)
def test_flavor_preference_is_kueues_is_preferred(a, b, preference, preferred):
    assert A._preferred(a, b, preference) is preferred


def test_a_workload_requesting_over_its_limit_is_kueues_invalid_and_never_admitted():
    """Kueue's ValidateAdmissibility (release-0.19 pkg/workload/resources.go) on the
    adjusted pod sets: a LimitRange `default` below a container's own request is its limit,
    so the Workload is refused with Kueue's message (`workload_invalid`, and `admit` before
    any flavor is tried); within the limit it is valid."""
    from fractions import Fraction

    lr = {
        "kind": "LimitRange",
        "metadata": {"namespace": "t"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
    }

    def wl(cpu: str) -> dict:
        c = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        return {
            "spec": {
                "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [c]}}}]
            }
        }

    assert K.workload_invalid(wl("2")) == ""  # no LimitRange: no limit to exceed
    want = (
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid "
        'value: ["cpu"]: requests must not exceed its limits'
    )
    assert K.workload_invalid(wl("2"), [lr]) == want
    assert K.workload_invalid(wl("1"), [lr]) == ""
    m = _tas_pool_queue()
    m.local[("t", "t")] = "t"  # LocalQueue t of namespace t -> ClusterQueue t
    (ps,) = K.workload_podsets(wl("2"), [lr])
    got = K.admit(m, "t", "t", "", [ps])
    assert got.invalid == want and got.assignment is None
    assert got.reason == f"{K.NEVER_ADMITS} {want}"
    assert ps.requests == {"cpu": Fraction(2)}  # what it asks is still what Kueue counts


def test_a_workload_outside_the_namespace_limit_range_is_refused():
    """Kueue's ValidateLimitRange (after ValidateResources): a pod set whose container asks
    more than the LimitRange's Container `max`, or whose pod asks less than its Pod `min`, is
    refused for good with Kueue's message, before any flavor is tried; within them it is
    valid (release-0.19 pkg/workload/resources.go, pkg/util/limitrange)."""
    lr = {
        "spec": {
            "limits": [
                {"type": "Container", "max": {"cpu": "4"}},
                {"type": "Pod", "min": {"memory": "1Gi"}},
            ]
        }
    }

    def wl(cpu: str, memory: str) -> dict:
        res = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu}}
        c = {"name": "c", "resources": res}
        return {
            "spec": {
                "podSets": [
                    {"name": "launcher", "count": 1, "template": {"spec": {"containers": [c]}}},
                    {"name": "worker", "count": 2, "template": {"spec": {"containers": [c]}}},
                ]
            }
        }

    assert K.workload_invalid(wl("8", "512Mi")) == ""  # no LimitRange: no bound
    assert K.workload_invalid(wl("4", "1Gi"), [lr]) == ""
    want = (
        "resources didn't satisfy LimitRange constraints: ["
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must '
        "not be above the limitRange max, "
        'spec.podSets[0].template.spec: Invalid value: ["memory"]: requests must not be below '
        "the limitRange min, "
        'spec.podSets[1].template.spec.containers[0]: Invalid value: ["cpu"]: requests must '
        "not be above the limitRange max, "
        'spec.podSets[1].template.spec: Invalid value: ["memory"]: requests must not be below '
        "the limitRange min]"
    )
    assert K.workload_invalid(wl("8", "512Mi"), [lr]) == want
    m = _tas_pool_queue()
    m.local[("t", "t")] = "t"
    got = K.admit(m, "t", "t", "", K.workload_podsets(wl("8", "512Mi"), [lr]))
    assert got.invalid == want and got.assignment is None
    assert got.reason == f"{K.NEVER_ADMITS} {want}"
    # ValidateResources first: a request over its own limit is the message, not the range
    over = wl("8", "512Mi")
    over["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "cpu": "1"
    }
    assert K.workload_invalid(over, [lr]).startswith("resources validation failed: ")


def test_kueues_message_of_a_pod_set_no_flavor_can_ever_hold():
    """pkg/scheduler/flavorassigner at release-0.19: Assignment.Message joins each pod set's
    sorted reasons; never only when every reason of every pod set is one no wait changes."""

    def wl(message: str) -> dict:
        c = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
        return {"status": {"conditions": [c]}}

    cap = (
        "insufficient quota for cpu in flavor a, previously considered podsets requests (0) + "
        "current podset request (9) > maximum capacity (8)"
    )
    wait = "insufficient unused quota for cpu in flavor b, 1 more needed"
    head = "couldn't assign flavors to pod set "
    assert K.outlook(wl(f"{head}main: {cap}")) == ("never", f"{head}main: {cap}")
    both = f"{head}launcher: {cap}; {head}worker: flavor b doesn't match node affinity, {cap}"
    assert K.outlook(wl(both))[0] == "never"
    assert K.outlook(wl(f"{head}launcher: {cap}; {head}worker: {wait}")) == ("", "")
    assert K.outlook(wl(f"{head}main: {cap}, {wait}")) == ("", "")
    assert K.outlook(wl(f"{head}main: {cap}. Pending the preemption of 1 workload(s)")) == ("", "")
    assert K.outlook(wl("ClusterQueue q is inactive")) == ("held", "ClusterQueue q is inactive")
    admitted = wl("")
    admitted["status"]["conditions"][0]["status"] = "True"
    assert K.outlook(admitted) == ("", "")


def test_a_pod_set_that_requests_nothing_is_fit_as_kueue_says():
    """Kueue's "zero resource request not in clusterQueue should succeed" (flavorassigner_test
    .go:1781, release-0.19 c90ed70) without its cpu request: assignFlavors skips the zero
    request of a resource the queue does not cover (:802-806), so the pod set gets no flavor
    and no Status, and PodSetAssignment.RepresentativeMode says Fit (:386-388; IsFit: no
    reasons); the pod set after it is assigned as usual. The model said NoFit."""
    case = _case("zero resource request not in clusterQueue")
    empty = {**case["podSets"][0], "requests": {"example.com/gpu": "0"}}
    case["podSets"] = [empty]
    got = _assign(case)
    assert (got.mode, got.podsets, got.message) == ("Fit", {"main": {}}, "")
    case["podSets"] = [empty, {"name": "next", "count": 1, "requests": {"cpu": "1"}}]
    got = _assign(case)
    assert (got.mode, got.podsets["next"]) == ("Fit", {"cpu": A.Choice("default", "Fit")})


LQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
      "metadata": {"name": "default", "namespace": "ns"}, "spec": {"clusterQueue": MAIN}}  # fmt: skip
SAID = "no flavor of ClusterQueue test-clusterqueue fits; on idle queues Kueue would say: "


@pytest.mark.parametrize(
    "name", ["multi-podset, one fits and another fails", "prevent integer overflow"]
)
def test_the_queue_findings_quote_the_message_kueue_writes(name):
    """What the plan prints where no flavor takes a pod set (a fleet worker's refusal, here
    for Kueue's own idle-queue cases) quotes the QuotaReserved message Kueue's test wants,
    which `pending.outlook` reads back as never; it joined every reason of every pod set."""
    from types import SimpleNamespace

    from trainforge.plan.checks import queues as Q

    case = _case(name)
    sets = [_podset(p) for p in case["podSets"]]
    wl = SimpleNamespace(queue=None, priority_class="", checked=None, sets=sets, main=sets[0])
    flavor, why = Q._worker_flavor(K.read([*_docs(case), LQ]), "ns", wl)
    assert (flavor, why) == (None, SAID + case["message"])
    assert K.outlook(_pending(case["message"])) == ("never", case["message"])


def test_a_rehearsed_object_no_flavor_takes_is_refused_in_kueue_s_message():
    """`admit_object` (the SDK placement rehearsal) of Kueue's "multiple flavors, doesn't fit
    node affinity" (flavorassigner_test.go:1260,1266): the reasons its test wants, as
    Assignment.Message writes them (:228, Status.Message: sorted, joined by ", ")."""
    from trainforge.plan.checks import queues as Q

    case = _case("multiple flavors, doesn't fit node affinity")
    terms = [{"matchExpressions": t} for t in case["podSets"][0]["affinity"]]
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}}  # fmt: skip
    got = Q.admit_object([*_docs(case), LQ], "ns", {}, pod, {"cpu": Fraction(1)})
    message = f"{W.POD_SET}main: " + ", ".join(sorted(case["reasons"]))
    assert (got.workload.state, got.workload.reason) == ("never", SAID + message)
    assert K.outlook(_pending(message)) == ("never", message)
