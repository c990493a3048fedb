"""Scheduling rehearsal arithmetic: the AMI's kubelet reservations and fitting pods on nodes."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from tests.jobs.helpers import CPU_POOL, EFA_POOL, GPU_POOL
from trainforge.core.contract import PoolLimits
from trainforge.jobs import capacity, node_facts


@pytest.mark.parametrize(
    ("vcpus", "millis"),
    # 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% above (nodeadm, Karpenter)
    [(1, 60), (2, 70), (4, 80), (8, 90), (48, 190), (96, 310), (192, 550)],
)
def test_kube_reserved_cpu_follows_nodeadm(vcpus, millis):
    assert node_facts.kube_reserved_cpu_millis(vcpus) == millis


@pytest.mark.parametrize(
    ("instance_type", "max_pods"),
    # nodeadm's ENI values (the same numbers eni-max-pods.txt has carried for years)
    [("g4dn.xlarge", 29), ("c5.2xlarge", 58), ("c5.9xlarge", 234), ("p4d.24xlarge", 737)],
)
def test_eni_max_pods_matches_nodeadm(instance_type, max_pods):
    enis, ips = node_facts.ENIS_PER_CARD[instance_type]
    assert node_facts.eni_max_pods(enis, ips) == max_pods


def test_multi_card_types_count_the_default_card_only():
    # p5.48xlarge: 64 ENIs over 32 network cards; the VPC CNI uses card 0 (2 ENIs)
    assert node_facts.enis_per_card("p5.xx-unknown", 64, 32) == 2
    assert node_facts.enis_per_card("p5.48xlarge", 64, 32) == 2
    assert node_facts.eni_max_pods(2, 50) == 100
    # Karpenter loses one ENI to the efa-only interface we put on card 0
    assert node_facts.karpenter_max_pods(2, 50, efa_only_on_card0=1) == 51
    # managed node groups cap at 110 below 30 vCPUs and 250 above
    assert node_facts.managed_node_group_max_pods(737, 96) == 250
    assert node_facts.managed_node_group_max_pods(737, 8) == 110
    assert node_facts.managed_node_group_max_pods(29, 4) == 29


def test_allocatable_of_a_g4dn_xlarge():
    n = node_facts.node_shape("g4dn.xlarge", 4, 16384, eni_pods=29, gpus=1)
    assert n.allocatable_cpu_m == 3920  # "only ~3.92 allocatable"
    # 16384 - ceil(7.5%) = 15155; - (11 x 29 + 255) - 100 = 14481
    assert (n.capacity_memory_mib, n.kube_reserved_memory_mib) == (15155, 574)
    assert n.allocatable_memory_mib == 14481


def test_daemonsets_take_their_requests_and_pod_slots():
    (room,) = capacity.rooms(GPU_POOL)
    assert (room.ds_cpu_m, room.ds_memory_mib, room.ds_pods) == (310, 352, 8)
    assert room.cpu_m == 47810 - 310 and room.pods == 737 - 8


def test_pods_per_node_is_the_tightest_resource():
    req = capacity.PodRequest.of("10", "40Gi", gpus=1)
    (f,) = [capacity.fit(r, req) for r in capacity.rooms(GPU_POOL)]
    assert f.per_node == 4  # cpu 47500m // 10000m = 4, memory 4, GPUs 4
    req = capacity.PodRequest.of("20", "40Gi", gpus=1)
    assert capacity.fit(capacity.rooms(GPU_POOL)[0], req).per_node == 2  # cpu-bound


def test_karpenter_needs_one_fitting_type_a_node_group_every_type():
    big = capacity.PodRequest.of("1", "40Gi")
    # m5.4xlarge (64 GiB) holds it, c5.4xlarge (32 GiB) does not: Karpenter picks m5
    ok = capacity.rehearse(big, 2, CPU_POOL)
    assert ok.ok and [f.per_node for f in ok.fits] == [0, 1]
    # a managed node group launches either type, so a pod that fits only one never runs
    group = replace(CPU_POOL, kind="node-group", max_nodes=10)
    bad = capacity.rehearse(big, 2, group)
    (problem,) = bad.problems
    assert problem.key == "memory"
    assert "managed node group 'training-workloads' launches any of its types" in problem.message
    assert "c5.4xlarge: 32768Mi" in problem.message


def test_mixed_types_give_a_lower_bound_on_karpenter_capacity():
    """Now exact: Karpenter's count of its NodeClaims (trainforge.jobs.packing), not a lower
    bound over the types."""
    pool = replace(CPU_POOL, limits=PoolLimits(cpu="40"))
    req = capacity.PodRequest.of("15", "10Gi")
    r = capacity.rehearse(req, 2, pool)  # one pod per node on either type: 2 x 16 vCPU
    assert ("cpu", "32", "40") in r.pool_usage and r.ok
    r = capacity.rehearse(req, 3, pool)
    assert ("cpu", "48", "40") in r.pool_usage
    assert r.problems[0].key == "workers"


def test_exact_usage_for_a_single_type_pool():
    req = capacity.PodRequest.of("11", "40Gi", gpus=1)
    r = capacity.rehearse(req, 5, GPU_POOL)  # 4 per node -> 2 nodes
    assert r.nodes_needed == 2
    assert ("nvidia.com/gpu", "8", "unlimited") in r.pool_usage


def test_efa_devices_and_node_group_size():
    req = capacity.PodRequest.of("100", "1000Gi", gpus=8, efa=32)
    r = capacity.rehearse(req, 16, EFA_POOL)
    assert r.ok and r.nodes_needed == 16 and ("nodes", "16", "16") in r.pool_usage
    r = capacity.rehearse(req, 17, EFA_POOL)
    assert r.problems and "maxSize 16" in r.problems[0].message
    # fewer workers fit: the message says how many, and that many pass
    assert "Use fewer workers (its 16 nodes hold 16 of these pods at once)" in r.problems[0].message


def test_defaults_fit_every_type_and_share_a_node_evenly():
    cpu, mem = capacity.default_size(GPU_POOL, Fraction(1, 4))
    req = capacity.PodRequest.of(cpu, mem, gpus=1)
    assert capacity.fit(capacity.rooms(GPU_POOL)[0], req).per_node == 4
    cpu, mem = capacity.default_size(CPU_POOL, Fraction(1))
    req = capacity.PodRequest.of(cpu, mem)
    assert all(capacity.fit(r, req).per_node == 1 for r in capacity.rooms(CPU_POOL))


# --- the verdicts at their edges (cases a mutation run found untested, docs/rehearsals.md) ---


def _one(pool, req):
    (room,) = capacity.rooms(pool)
    return capacity.fit(room, req)


def test_a_pod_exactly_the_size_of_the_room_fits_and_one_unit_more_does_not():
    room = capacity.rooms(GPU_POOL)[0]  # 47500m, 173048Mi, 4 GPUs, 729 pod slots
    exact = capacity.fit(room, capacity.PodRequest.of("47500m", "173048Mi", gpus=4))
    assert (exact.per_node, exact.short) == (1, ())
    over = capacity.fit(room, capacity.PodRequest.of("1", "173049Mi", gpus=5))
    assert over.per_node == 0
    assert [r for r, _ in over.short] == ["memory", "gpus"]
    assert over.short[1][1] == "needs 5 GPUs, g5.12xlarge has 4"


def test_gpus_and_efa_devices_can_be_the_binding_limit():
    f = _one(GPU_POOL, capacity.PodRequest.of("1", "1Gi", gpus=3))
    assert (f.per_node, f.short) == (1, ())  # 4 // 3, and 3 of 4 GPUs is no shortage
    f = _one(EFA_POOL, capacity.PodRequest.of("1", "1Gi", efa=11))  # 32 // 11
    assert (f.per_node, f.short) == (2, ())
    assert _one(EFA_POOL, capacity.PodRequest.of("1", "1Gi", efa=32)).short == ()
    f = _one(EFA_POOL, capacity.PodRequest.of("1", "1Gi", efa=33))
    assert f.per_node == 0 and f.short == (("efa", "needs 33 EFA devices, p5.48xlarge has 32"),)


@pytest.mark.parametrize(("daemonsets", "per_node"), [(8, 1), (9, 0)])
def test_a_node_whose_daemonsets_take_every_pod_slot(daemonsets, per_node):
    from trainforge.core.contract import DaemonSetLoad, PoolFacts
    from trainforge.jobs.node_facts import node_shape

    node = node_shape("t3.small", 2, 2048, eni_pods=9)
    pool = PoolFacts(name="tiny", nodes=(node,),
                     daemonsets=tuple(DaemonSetLoad(f"d{i}") for i in range(daemonsets)))  # fmt: skip
    f = _one(pool, capacity.PodRequest.of("10m", "1Mi"))
    assert f.per_node == per_node
    assert f.short == (
        ()
        if per_node
        else (("pods", "t3.small runs at most 9 pods and its 9 DaemonSet pods take them all"),)
    )


def _two_types(kind="node-group"):
    from trainforge.core.contract import PoolFacts
    from trainforge.jobs.node_facts import node_shape

    return PoolFacts(
        name="mixed", kind=kind, max_nodes=10,
        nodes=(node_shape("a.bigmem", 4, 65536, eni_pods=29),  # 3920m, 59946Mi
               node_shape("b.bigcpu", 16, 8192, eni_pods=29)),  # 15890m, 6903Mi
    )  # fmt: skip


def _size(message):
    """The size a refusal says fits (`cpu at most 3920m and memory at most 6903Mi`)."""
    import re

    got = dict(re.findall(r"(cpu|memory) at most (\d+(?:m|Mi))", message))
    gpus = re.search(r"at most (\d+) GPUs", message)
    return got, int(gpus[1]) if gpus else None


def test_the_problem_names_every_shortfall_of_every_type_and_a_size_that_fits():
    """a.bigmem lacks cpu, b.bigcpu memory: both are named, and the size the refusal gives fits
    every type (before, only a.bigmem's cpu was named; asking for that met b.bigcpu's memory)."""
    pool = _two_types()
    r = capacity.rehearse(capacity.PodRequest.of("8", "16Gi"), 1, pool)
    (problem,) = r.problems
    assert problem.key == "cpu"  # a.bigmem, the first failing type, lacks cpu first
    assert problem.message.startswith(
        "no instance type of pool 'mixed' (a.bigmem, b.bigcpu) can hold one pod: needs cpu "
        "8000m, a.bigmem: 4 vCPU"
    )
    assert "; needs memory 16Gi, b.bigcpu: 8192Mi" in problem.message
    assert "One pod fits every type of the pool with cpu at most 3920m and memory at most " \
        "6903Mi." in problem.message  # fmt: skip
    size, _ = _size(problem.message)
    assert capacity.rehearse(capacity.PodRequest.of(size["cpu"], size["memory"]), 1, pool).ok
    both = capacity.rehearse(capacity.PodRequest.of("20", "1Gi"), 1, pool)
    (problem,) = both.problems
    assert problem.message.count("needs cpu 20000m") == 2  # both types' reasons


def test_karpenter_is_told_the_one_type_that_fits_with_the_least_given_up():
    """No type holds 20 CPUs and 100Gi; Karpenter needs one: b.bigcpu gives up less of the
    request (20% of the cpu, 93% of the memory) than a.bigmem (80% and 41%)."""
    pool = _two_types("karpenter")
    (problem,) = capacity.rehearse(capacity.PodRequest.of("20", "100Gi"), 1, pool).problems
    assert problem.message.count("needs ") == 4  # cpu and memory on both types
    assert "One pod fits a b.bigcpu node with cpu at most 15890m and memory at most 6903Mi." \
        in problem.message  # fmt: skip
    size, _ = _size(problem.message)
    assert capacity.rehearse(capacity.PodRequest.of(size["cpu"], size["memory"]), 1, pool).ok


def test_the_first_short_resource_of_the_first_failing_type_is_the_key():
    from trainforge.core.contract import PoolFacts
    from trainforge.jobs.node_facts import node_shape

    r = capacity.rehearse(capacity.PodRequest.of("1", "200Gi", gpus=5), 1, GPU_POOL)
    (problem,) = r.problems
    assert problem.key == "memory"  # memory is short before the GPUs, and both are named
    assert "needs 5 GPUs, g5.12xlarge has 4" in problem.message
    size, gpus = _size(problem.message)
    fixed = capacity.PodRequest.of("1", size["memory"], gpus=gpus)
    assert (size, gpus) == ({"memory": "173048Mi"}, 4) and capacity.rehearse(fixed, 1, GPU_POOL).ok
    pool = PoolFacts(
        name="mixed", kind="node-group", max_nodes=10,
        nodes=(node_shape("b.bigcpu", 16, 8192, eni_pods=29),  # memory short only
               node_shape("a.bigmem", 4, 65536, eni_pods=29)),  # cpu and memory short
    )  # fmt: skip
    (problem,) = capacity.rehearse(capacity.PodRequest.of("8", "64Gi"), 1, pool).problems
    assert problem.key == "memory" and problem.message.count("needs memory 64Gi") == 2
    assert "needs cpu 8000m, a.bigmem" in problem.message


def test_shortfalls_past_a_few_are_counted_and_the_size_still_covers_them():
    """Six types each short of cpu and memory: four are listed, "and 8 more"; the size is what
    the smallest leaves, so that it fits all six."""
    from trainforge.core.contract import PoolFacts
    from trainforge.jobs.node_facts import node_shape

    pool = PoolFacts(name="six", kind="node-group", max_nodes=10,
                     nodes=tuple(node_shape(f"t{i}.x", 4 + i, 8192 + 1024 * i, eni_pods=29)
                                 for i in range(6)))  # fmt: skip
    (problem,) = capacity.rehearse(capacity.PodRequest.of("64", "64Gi"), 1, pool).problems
    assert problem.message.count("needs ") == capacity.MOST_SHORTS == 4
    assert "; and 8 more. One pod fits every type of the pool with cpu at most" in problem.message
    size, _ = _size(problem.message)
    assert capacity.rehearse(capacity.PodRequest.of(size["cpu"], size["memory"]), 1, pool).ok


def test_no_size_is_offered_where_asking_for_less_fits_no_node():
    """DaemonSets that take every pod slot leave nothing to ask for: the refusal names them and
    offers no size."""
    from trainforge.core.contract import DaemonSetLoad, PoolFacts
    from trainforge.jobs.node_facts import node_shape

    pool = PoolFacts(name="tiny", nodes=(node_shape("t3.small", 2, 2048, eni_pods=9),),
                     daemonsets=tuple(DaemonSetLoad(f"d{i}") for i in range(9)))  # fmt: skip
    (problem,) = capacity.rehearse(capacity.PodRequest.of("10", "1Mi"), 1, pool).problems
    assert "DaemonSet pods take them all" in problem.message and "needs cpu" in problem.message
    assert "One pod fits" not in problem.message


def test_nodes_needed_rounds_up_per_pool_kind():
    req = capacity.PodRequest.of("1", "1Gi", gpus=4)  # 2 per p5 node
    r = capacity.rehearse(req, 3, EFA_POOL)
    assert r.nodes_needed == 2 and ("nodes", "2", "16") in r.pool_usage
    # Karpenter: the type that needs the fewest nodes (b.bigcpu holds 3 pods of 2Gi, a 29)
    r = capacity.rehearse(capacity.PodRequest.of("100m", "2Gi"), 40, _two_types("karpenter"))
    assert r.nodes_needed == 2


def test_karpenter_memory_usage_is_the_nodes_capacity():
    pool = replace(GPU_POOL, limits=PoolLimits(memory="1Ti"))
    r = capacity.rehearse(capacity.PodRequest.of("11", "40Gi", gpus=1), 5, pool)  # 2 nodes
    assert ("memory", "363724Mi", "1Ti") in r.pool_usage  # 2 x 181862Mi


def test_daemonsets_bigger_than_the_node_leave_no_room_at_all():
    from trainforge.core.contract import DaemonSetLoad, PoolFacts
    from trainforge.jobs.node_facts import node_shape

    node = node_shape("t3.small", 2, 2048, eni_pods=11)
    pool = PoolFacts(name="tiny", nodes=(node,), daemonsets=(DaemonSetLoad("hog", 5000),))
    r = capacity.rehearse(capacity.PodRequest.of("10m", "1Mi"), 1, pool)
    assert r.fits[0].per_node == 0 and [p.key for p in r.problems] == ["cpu"]


def test_mixed_types_lower_bound_with_several_pods_per_node_and_a_limit_just_met():
    pool = replace(CPU_POOL, limits=PoolLimits(cpu="16"))
    r = capacity.rehearse(capacity.PodRequest.of("5", "1Gi"), 3, pool)  # 3 per node: 16/3 each
    assert ("cpu", "16", "16") in r.pool_usage and r.ok
    # a fourth pod needs a second NodeClaim, which the limit has no room for: Karpenter counts
    # whole nodes (it was "at least 21.3333", a third of a node per pod)
    r = capacity.rehearse(capacity.PodRequest.of("5", "1Gi"), 4, pool)
    assert ("cpu", "32", "16") in r.pool_usage and not r.ok


@pytest.mark.parametrize(
    ("pods", "vcpus", "per_node", "nodes"),
    [
        (8, (4, 5), (3, 4), 2),  # 3 nodes of 3 or 2 of 4: pods // per_node ties at 2
        (9, (6, 10), (5, 9), 1),  # 2 nodes of 5 or 1 of 9: // ties at 1, >> at 0
    ],
)
def test_karpenter_picks_the_type_needing_fewest_nodes_rounded_up(pods, vcpus, per_node, nodes):
    """Rounding down (or shifting) ties two types that need different node counts; the
    first listed would win the tie and the rehearsal would report one node too many."""
    from trainforge.core.contract import PoolFacts
    from trainforge.jobs.node_facts import node_shape

    pool = PoolFacts(
        name="tie", kind="karpenter", max_nodes=10,
        nodes=tuple(node_shape(f"t.{v}x", v, 262144, eni_pods=110) for v in vcpus),
    )  # fmt: skip
    r = capacity.rehearse(capacity.PodRequest.of("1", "1Gi"), pods, pool)
    assert tuple(f.per_node for f in r.fits) == per_node
    assert r.ok and r.nodes_needed == nodes


def test_a_pod_is_packed_as_the_scheduler_counts_it():
    """capacity.pod_request: Karpenter packs a pod by the Kubernetes PodRequests of the pod the
    API server stored (karpenter 6e7eab7a0f48 RequestsForPods -> Ceiling -> PodRequests): a
    limit stands for a missing request (GPUs and EFA devices given as limits only), the
    namespace's LimitRange fills what neither names, the largest init container counts where
    it is larger than the containers, a sidecar adds to both, and the overhead adds on top."""
    pod = {
        "initContainers": [
            {"name": "fetch", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}},
            {"name": "proxy", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        ],
        "containers": [
            {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "4",
                                                      "vpc.amazonaws.com/efa": "2"}}},
            {"name": "bare"},
        ],
        "overhead": {"cpu": "250m", "memory": "128Mi"},
    }  # fmt: skip
    lr = {"kind": "LimitRange", "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "2Gi"}}]}}  # fmt: skip
    got = capacity.pod_request(pod, [lr])
    # containers 4 + 0.5 (bare, LimitRange) + 1 (sidecar) = 5.5 CPU, under the init container's
    # 6 (it starts alone, no sidecar yet): 6; memory 2Gi + 2Gi (LimitRange) + 1Gi sidecar = 5Gi
    assert got == capacity.PodRequest(6250, Fraction(5 * 1024 + 128), gpus=4, efa=2)
    # without the LimitRange `main` asks no memory and `bare` nothing: 1 (sidecar) + 0
    assert capacity.pod_request(pod).memory_mib == 1024 + 128
    # a gang: each template's replicas x its pod's request, in order
    from trainforge.core.pods import PodTemplate

    one = capacity.pod_request({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}, [lr])
    assert one == capacity.PodRequest(1000, Fraction(2048))  # its memory: the LimitRange
    tmpl = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    g = capacity.gang(
        [PodTemplate("a", "Master", {"spec": pod}), PodTemplate("b", "W", tmpl, 3)], [lr]
    )
    assert g.pods == (got, one, one, one) and g.most is None


def _limit_set(problem: capacity.Problem) -> PoolLimits:
    """The pool limits after the problem's printed fix ("Set limits.<r> to at least <v>")."""
    fix = problem.message.rsplit("Set ", 1)[1]
    kw = {}
    for change in fix.split(" and "):
        key, value = change.split(" to at least ")
        r = key.removeprefix("limits.")
        kw[r] = int(value) if r == "gpus" else value
    return PoolLimits(**kw)


@pytest.mark.parametrize(
    ("pool", "limits", "key", "value", "types"),
    [
        # the review's case: memory "1024" (bytes) on a CPU pool, one 2-core pod
        (CPU_POOL, PoolLimits(memory="1024"), "limits.memory", "1024", "c5.4xlarge, m5.4xlarge"),
        # 2 GPUs on a pool of 4-GPU nodes: no node ever counts under it
        (GPU_POOL, PoolLimits(gpus=2), "limits.gpus", 2, "g5.12xlarge"),
        (CPU_POOL, PoolLimits(cpu="8", memory="1Ti"), "limits.cpu", "8", "c5.4xlarge, m5.4xlarge"),
    ],
)  # fmt: skip
def test_a_limit_too_small_for_one_pod_is_the_pool_s_fault_and_its_fix_fixes_it(
    pool, limits, key, value, types
):
    """One worker is the fewest there are: when even one pod's node is over a limit, the
    problem is that limit (its key, its value, what one node counts), not `workers`; the
    printed fix applied to the pool lets the pod run."""
    req = capacity.PodRequest.of("2", "4Gi", gpus=1 if pool is GPU_POOL else 0)
    r = capacity.rehearse(req, 1, replace(pool, limits=limits))
    [problem] = r.problems
    assert (problem.key, problem.value) == (key, value)
    assert "fewer workers" not in problem.message
    assert f"({types})" in problem.message
    fixed = capacity.rehearse(req, 1, replace(pool, limits=_limit_set(problem)))
    assert fixed.problems == []
    # several pods: the same limit is still the pool's, never `workers`
    assert [p.key for p in capacity.rehearse(req, 3, replace(pool, limits=limits)).problems] == [
        key
    ]


def test_the_fix_names_the_smallest_type_that_holds_a_pod():
    """c5.4xlarge has half the memory of m5.4xlarge: the fix asks for what a c5 counts."""
    req = capacity.PodRequest.of("2", "4Gi")
    [problem] = capacity.rehearse(
        req, 1, replace(CPU_POOL, limits=PoolLimits(memory="1Gi"))
    ).problems
    assert "less than one c5.4xlarge node counts" in problem.message
    smaller = _limit_set(problem).memory
    # a limit one Mi under the printed value still refuses the pod
    under = f"{int(smaller.removesuffix('Mi')) - 1}Mi"
    assert capacity.rehearse(req, 1, replace(CPU_POOL, limits=PoolLimits(memory=under))).problems


def test_fewer_workers_only_when_fewer_fit():
    """A limit that holds some pods: `workers`, with how many the limits hold at once."""
    req = capacity.PodRequest.of("2", "4Gi", gpus=4)
    [problem] = capacity.rehearse(req, 3, replace(GPU_POOL, limits=PoolLimits(gpus=8))).problems
    assert problem.key == "workers"
    assert "Use fewer workers (the limits hold 2 of these pods at once)" in problem.message
    assert capacity.rehearse(req, 2, replace(GPU_POOL, limits=PoolLimits(gpus=8))).problems == []


def test_an_efa_shortfall_is_told_the_devices_that_fit_or_none():
    r = capacity.rehearse(capacity.PodRequest.of("1", "1Gi", efa=33), 1, EFA_POOL)
    assert "with at most 32 EFA devices." in r.problems[0].message
    assert capacity.rehearse(capacity.PodRequest.of("1", "1Gi", efa=32), 1, EFA_POOL).ok
    r = capacity.rehearse(capacity.PodRequest.of("1", "1Gi", gpus=1, efa=4), 1, GPU_POOL)
    assert "with no EFA devices (efa: false)." in r.problems[0].message
