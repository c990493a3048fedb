"""The Karpenter launch model (trainforge.jobs.packing) against Karpenter's own tests.

Upstream: kubernetes-sigs/karpenter at 6e7eab7a0f48 (what karpenter-provider-aws v1.14.1's
go.mod builds with), read 2026-11-29:
- pkg/controllers/provisioning/scheduling/suite_test.go: the cases in UPSTREAM, by name;
- pkg/cloudprovider/fake/cloudprovider.go `GetInstanceTypes` and fake/instancetype.go
  `NewInstanceType`/`InstanceTypes`/`PriceFromResources`: the fake instance types (default
  4 CPU, 4Gi, 5 pods; 100m CPU and 10Mi kube-reserved; price 0.1/CPU + 0.1/GB + 1 per
  vendor GPU) and the fake cloud provider's `Create`, which launches the cheapest type left.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.jobs.helpers import CPU_POOL
from trainforge.core.contract import NodeShape, PoolFacts, PoolLimits
from trainforge.jobs import capacity, packing
from trainforge.jobs.node_facts import node_shape

SUITE = "pkg/controllers/provisioning/scheduling/suite_test.go"


def _fake(name: str, cpu: int = 4, mem_gi: int = 4, pods: int = 5, gpus: int = 0):
    """fake.NewInstanceType: capacity as given, allocatable less 100m CPU and 10Mi."""
    shape = NodeShape(name, cpu, mem_gi * 1024, mem_gi * 1024, pods, 100, 10, 0, gpus=gpus)
    price = 0.1 * cpu + 0.1 * mem_gi * 2**30 / 1e9 + (1.0 if gpus else 0.0)
    return shape, price


# fake.CloudProvider's default types; arm-instance-type only where the test's pods do not
# select amd64
DEFAULT = [
    _fake("default-instance-type"),
    _fake("small-instance-type", cpu=2, mem_gi=2),
    _fake("gpu-vendor-instance-type", gpus=2),
    _fake("gpu-vendor-b-instance-type", gpus=2),
    _fake("single-pod-instance-type", pods=1),
]
ARM = _fake("arm-instance-type", cpu=16, mem_gi=128)
FIVE = [_fake(f"fake-it-{i}", cpu=i + 1, mem_gi=(i + 1) * 2, pods=(i + 1) * 10) for i in range(5)]


def _run(types, pods):
    rooms = [capacity.NodeRoom(s, s.allocatable_cpu_m, s.allocatable_memory_mib, s.max_pods,
                               0, 0, 0) for s, _ in types]  # fmt: skip
    prices = {s.instance_type: p for s, p in types}
    out = packing.pack_rooms(rooms, pods)
    return out, out.launched(prices.get)


def _pods(n, cpu="0", memory="0"):
    return [capacity.PodRequest.of(cpu, memory)] * n


UPSTREAM = [
    # (suite_test.go It(...), types, pods, NodeClaims, the types they launch)
    ("should schedule multiple small pods on the smallest possible instance type",
     [*DEFAULT, ARM], _pods(5, memory="10M"), 1, {"small-instance-type"}),
    ("should create new nodes when a node is at capacity",
     DEFAULT, _pods(40, memory="1.8G"), 20, {"default-instance-type"}),
    ("should pack small and large pods together",
     DEFAULT, _pods(40, memory="1.8G") + _pods(20, memory="400M"), 20, {"default-instance-type"}),
    ("should create new nodes when a node is at capacity due to pod limits per node",
     DEFAULT, _pods(25, cpu="1m", memory="1m"), 5, {"small-instance-type"}),
    ("should pack nodes tightly",
     FIVE, [capacity.PodRequest.of("4.5", "0"), capacity.PodRequest.of("1", "0")], 2,
     {"fake-it-4", "fake-it-1"}),
]  # fmt: skip


@pytest.mark.parametrize(("test", "types", "pods", "claims", "launched"), UPSTREAM,
                         ids=[u[0] for u in UPSTREAM])  # fmt: skip
def test_karpenters_own_cases(test, types, pods, claims, launched):
    out, types_launched = _run(types, pods)
    assert not out.unplaced, f"{SUITE} It({test!r})"
    assert len(out.claims) == claims, f"{SUITE} It({test!r})"
    assert set(types_launched) == launched, f"{SUITE} It({test!r})"


def test_should_pack_nodes_tightly_gives_the_small_pod_a_smaller_node():
    """suite_test.go It("should pack nodes tightly"): 'the first pod consumes nearly all CPU
    of the largest instance type ... the second pod ... should get a smaller node'."""
    out, launched = _run(
        FIVE, [capacity.PodRequest.of("1", "0"), capacity.PodRequest.of("4.5", "0")]
    )
    # the queue sorts by CPU: the 4.5-CPU pod (listed second) opens the first NodeClaim
    assert [c.pods for c in out.claims] == [(1,), (0,)]
    assert launched == ["fake-it-4", "fake-it-1"]


G5 = PoolFacts(
    name="gpu",
    instance_types=("g5.12xlarge", "g5.48xlarge"),
    gpus_per_node=4,
    nodes=(
        node_shape("g5.12xlarge", 48, 196608, eni_pods=737, gpus=4),
        node_shape("g5.48xlarge", 192, 786432, eni_pods=345, gpus=8),
    ),
)
PRICE = {"g5.12xlarge": 5.672, "g5.48xlarge": 16.288}.get  # us-east-1 on-demand (price_facts)


def test_two_four_gpu_pods_make_one_g5_48xlarge_not_two_g5_12xlarge():
    """The pod that comes second joins the first pod's in-flight NodeClaim: a g5.48xlarge
    still holds both, so its types narrow to that one (nodeclaim.go CanAdd/Add), although
    two g5.12xlarge cost less."""
    out = capacity.pack(G5, [capacity.PodRequest.of("42", "160Gi", 4)] * 2)
    assert [(c.pods, c.candidates) for c in out.claims] == [((0, 1), ("g5.48xlarge",))]
    assert out.launched(PRICE) == ["g5.48xlarge"]
    # three pods: a full g5.48xlarge, and the third alone, on the cheaper type that holds it
    out = capacity.pack(G5, [capacity.PodRequest.of("42", "160Gi", 4)] * 3)
    assert [c.candidates for c in out.claims] == [("g5.48xlarge",), ("g5.12xlarge", "g5.48xlarge")]
    assert out.launched(PRICE) == ["g5.48xlarge", "g5.12xlarge"]
    # one 4-GPU pod: both types hold it, the cheaper launches
    assert capacity.pack(G5, [capacity.PodRequest.of("42", "160Gi", 4)]).launched(PRICE) == [
        "g5.12xlarge"
    ]


def test_the_launch_ranks_a_type_without_a_price_after_every_priced_one():
    """packing.launch, the one rule every reader takes the launched type from: the
    candidates in price order, one without a price last (cloudprovider/types.go OrderByPrice
    sorts a type with no available offering at math.MaxFloat64), ties in the order given.
    An unpriced candidate is one the plan's table lacks and Karpenter prices (its Pricing
    API, else its static table): it could be cheaper, so it is `unranked`. The rule this
    replaced gave no type at all when any candidate was unpriced."""
    price = {"g5.12xlarge": 5.672, "g5.48xlarge": 16.288}.get
    assert packing.launch(("g5.48xlarge", "g5.12xlarge"), price) == packing.Launch("g5.12xlarge")
    assert packing.launch(("p5e.48xlarge", "g5.48xlarge", "g5.12xlarge"), price) == (
        packing.Launch("g5.12xlarge", ("p5e.48xlarge",))
    )
    # none priced: the first listed stands in, every other could launch instead
    assert packing.launch(("p5e.48xlarge", "g7e.48xlarge"), price) == (
        packing.Launch("p5e.48xlarge", ("g7e.48xlarge",))
    )
    # one candidate launches, priced or not: nothing to rank it against
    assert packing.launch(("p5e.48xlarge",), price) == packing.Launch("p5e.48xlarge")
    # a tie keeps the order given
    same = {"a.x": 1.0, "b.x": 1.0}.get
    assert packing.launch(("b.x", "a.x"), same) == packing.Launch("b.x")
    with pytest.raises(ValueError, match="at least one candidate"):
        packing.launch((), price)


def test_a_spread_limit_stops_packing():
    pods = [capacity.PodRequest.of("42", "160Gi", 4)] * 2
    out = capacity.pack(G5, pods, most=1)
    assert len(out.claims) == 2 and out.launched(PRICE) == ["g5.12xlarge"] * 2


def test_limits_filter_new_nodeclaims_by_the_largest_candidate():
    """scheduler.go addToNewNodeClaim: a new NodeClaim only uses types within what the
    limits have left, and subtractMax takes its largest candidate's capacity off them."""
    pool = PoolFacts(**{**CPU_POOL.__dict__, "limits": PoolLimits(cpu="16")})
    three = capacity.pack(pool, [capacity.PodRequest.of("5", "1Gi")] * 3)
    assert len(three.claims) == 1 and not three.unplaced and three.counted["cpu"] == 16
    four = capacity.pack(pool, [capacity.PodRequest.of("5", "1Gi")] * 4)
    assert four.unplaced == [3] and "exceed limits" in four.why
    # 8 GPUs left: one 4-GPU pod's NodeClaim may be a g5.48xlarge, so it counts 8
    gpus = capacity.pack(
        PoolFacts(**{**G5.__dict__, "limits": PoolLimits(gpus=8)}),
        [capacity.PodRequest.of("42", "160Gi", 4)] * 3,
    )
    assert gpus.counted["nvidia.com/gpu"] == Fraction(8) and gpus.unplaced == [2]


@pytest.mark.parametrize(
    ("spec", "most"),
    [
        ({}, None),
        ({"containers": [{"ports": [{"containerPort": 80, "hostPort": 8080}]}]}, 1),
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
             "labelSelector": {"matchLabels": {"job": "a"}}}]}}}, 1),
        # anti-affinity to another job's pods does not limit this job's packing
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
             "labelSelector": {"matchLabels": {"job": "b"}}}]}}}, None),
        ({"topologySpreadConstraints": [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 2,
          "labelSelector": {"matchExpressions": [{"key": "job", "operator": "Exists"}]}}]}, 2),
        ({"topologySpreadConstraints": [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 1,
          "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"job": "a"}}}]},
         None),
        ({"topologySpreadConstraints": [{"topologyKey": "topology.kubernetes.io/zone",
          "maxSkew": 1, "labelSelector": {"matchLabels": {"job": "a"}}}]}, None),
    ],
)  # fmt: skip
def test_spread_limit_reads_the_pod_template(spec, most):
    got, why = packing.spread_limit({"metadata": {"labels": {"job": "a"}}, "spec": spec})
    assert got == most and bool(why) == (most is not None)


def test_karpenter_sums_exact_cpu_and_the_scheduler_binds_whole_millicores_per_pod():
    """Karpenter v1.14.1 (6e7eab7a0f48) packs a NodeClaim by its pods' exact requests
    (pkg/utils/resources/resources.go `RequestsForPods`/`Merge`: Quantity.Add; `Fits`: Cmp);
    the kube-scheduler binds by whole millicores rounded up per pod (`Resource.Add`:
    MilliValue; quantity.counted). 7 pods of 557.1m: 3,899.7m exactly, which one 3,900m node
    holds for Karpenter; 7 x 558m = 3,906m for the scheduler, so one of them stays Pending."""
    big = _fake("big", cpu=4, mem_gi=4, pods=110)
    pods = _pods(7, cpu="557100u")
    assert pods[0].cpu_m == 558 and pods[0].cpu_exact == Fraction(5571, 10000)
    out, launched = _run([big], pods)
    assert [len(c.pods) for c in out.claims] == [7] and launched == ["big"]
    assert out.claims[0].unbound == ("big",)
    # whole millicores: the two agree
    even, _ = _run([big], _pods(7, cpu="557m"))
    assert [(len(c.pods), c.unbound) for c in even.claims] == [(7, ())]


def test_the_rehearsal_refuses_pods_karpenter_places_where_the_scheduler_cannot_bind_them():
    # CPU_POOL's nodes leave 15,680m: 3 x 5,226.6m = 15,679.8m exactly, 3 x 5,227m rounded
    req = capacity.PodRequest.of("5226600u", "1Gi")
    r = capacity.rehearse(req, 3, CPU_POOL)
    assert r.nodes_needed == 1  # what Karpenter launches
    (p,) = [p for p in r.problems if p.key == "cpu"]
    assert "15,680m" not in p.message and "15680m left" in p.message
    assert (
        "5227m per pod (15681m)" in p.message
        and "cpu: 5226m (all on one node) or 5227m" in p.message
    )
    assert capacity.rehearse(capacity.PodRequest.of("5226m", "1Gi"), 3, CPU_POOL).ok


def test_a_job_of_such_pods_is_refused_in_one_line_naming_its_cpu():
    from tests.jobs.helpers import target
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.spec import parse_job
    from trainforge.jobs.wiring import resolve_job

    job = {"name": "x", "team": "research", "pool": "training-workloads", "workers": 3,
           "memory": "1Gi"}  # fmt: skip
    with pytest.raises(JobConfigError) as e:
        resolve_job(parse_job({**job, "cpu": "5226600u"}), target(CPU_POOL))
    assert str(e.value).startswith("job.cpu: got '5226600u'; ") and "\n" not in str(e.value)
    resolve_job(parse_job({**job, "cpu": "5226m"}), target(CPU_POOL))
