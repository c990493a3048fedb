"""The plan's cost report: node choice, durations, unknown prices, the $/hour caps, the diff."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace

import pytest
from test_plan_stacks import ROOT, project_copy

from tests.conftest import full_report, prod_own_values, shipped_plan
from tests.jobs.helpers import GPU_POOL
from tests.plan.test_plan_checks import DEV_JOBS
from trainforge.core import versions
from trainforge.core.contract import DaemonSetLoad, NodeType, PoolFacts, TeamFacts
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import capacity, duration, packing
from trainforge.jobs.spec import parse_job
from trainforge.plan import cli, core, cost, price_facts
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check, estimates
from trainforge.plan.fleet import WorkerPlan
from trainforge.stack.policy import CostCapsError

G5 = PoolFacts(
    name="gpu",
    instance_types=("g5.12xlarge", "g5.48xlarge"),
    gpus_per_node=4,
    vcpus_per_node=48,
    memory_mib_per_node=196608,
    capacity_types=("on-demand", "spot"),
    node_types=(NodeType("g5.12xlarge", 48, 196608, 4), NodeType("g5.48xlarge", 192, 786432, 8)),
)


def _job(**kw):
    raw = {"name": "j", "team": "t", "pool": "gpu", "gpusPerWorker": 4, "cpu": "42"}
    raw |= {"memory": "160Gi", "workers": 2, **kw}
    return parse_job(raw, "job")


# --- the model ----------------------------------------------------------------------------------


def test_karpenter_pool_uses_the_cheapest_type_that_fits_every_pod():
    """Karpenter packs a batch's pods into in-flight NodeClaims (kubernetes-sigs/karpenter
    6e7eab7a0f48, scheduling/scheduler.go addToInflightNode, nodeclaim.go CanAdd): the second
    4-GPU pod joins the first's NodeClaim, which a g5.48xlarge still holds, so the launch is
    1 x g5.48xlarge ($16.288), not the cheaper 2 x g5.12xlarge ($5.672 each) the plan said."""
    choice = cost.choose_nodes(_job(), G5, "us-east-1")
    assert (choice.instance_type, choice.nodes, choice.pods_per_node) == ("g5.48xlarge", 1, 2)
    assert choice.hourly_on_demand == pytest.approx(16.288)
    assert "into 1 NodeClaim(s) of 2 pod(s) on g5.48xlarge (the types" in choice.reason
    assert choice.reason.endswith("launches the cheapest of each: g5.48xlarge x1 $16.29/h")
    # three pods: a full g5.48xlarge and the third alone, on the cheapest type that holds it
    three = cost.choose_nodes(_job(workers=3), G5, "us-east-1")
    assert three.nodes_words() == "g5.48xlarge x1 + g5.12xlarge x1"
    assert three.hourly_on_demand == pytest.approx(16.288 + 5.672)
    # one pod per node (a spread in the pod template): the cheaper type, once per pod
    spread = cost.choose_nodes(_job(), G5, "us-east-1", capacity.job_gang(_job(), G5, most=1))
    assert (spread.instance_type, spread.nodes) == ("g5.12xlarge", 2)
    said = f"g5.48xlarge** ({choice.describe().split()[-1]}), not the cheaper two g5.12xlarge "
    doc = " ".join((ROOT / "docs/cost.md").read_text().split())
    assert f"{said}({spread.describe().split()[-1]})" in doc  # docs/cost.md's $16.29, $11.34
    # an 8-GPU pod only fits the big type
    big = cost.choose_nodes(_job(gpusPerWorker=8, workers=1), G5, "us-east-1")
    assert (big.instance_type, big.nodes) == ("g5.48xlarge", 1)


def test_pods_per_node_is_the_scheduling_rehearsals_arithmetic():
    """The cost packs pods as the scheduling check does (trainforge.jobs.capacity: what a node
    leaves after the kubelet and the pool's DaemonSets), not by an estimate of its own: with a
    6-core DaemonSet a g5.12xlarge holds one 21-core pod, without it two."""
    g5 = NodeType("g5.12xlarge", 48, 196608, 4)
    pool = replace(GPU_POOL, node_types=(g5,))
    hog = replace(pool, daemonsets=(*pool.daemonsets, DaemonSetLoad("hog", 6000)))
    job = _job(gpusPerWorker=1, cpu="21", memory="40Gi", workers=4)
    (room,) = capacity.rooms(hog)
    assert capacity.fit(room, capacity.PodRequest.of("21", "40Gi", 1)).per_node == 1
    choice = cost.choose_nodes(job, hog, "us-east-1")
    assert (choice.pods_per_node, choice.nodes) == (1, 4)
    assert cost.choose_nodes(job, pool, "us-east-1").pods_per_node == 2


def test_node_group_uses_its_first_listed_type():
    group = PoolFacts(**{**G5.__dict__, "kind": "node-group"})
    choice = cost.choose_nodes(_job(workers=3), group, "us-east-1")
    assert (choice.instance_type, choice.nodes) == ("g5.12xlarge", 3)
    assert "order listed" in choice.reason


# A pool of two GPU models (g6.xlarge: L4, the cheaper in us-east-1; g5.xlarge: A10G): each
# type with its own GPU and bandwidth, as platform/published.py builds them.
MIXED = PoolFacts(
    name="gpu",
    instance_types=("g5.xlarge", "g6.xlarge"),
    gpus_per_node=1,
    gpu_models=("A10G", "L4"),
    gpu_memory_mib=22 * 1024,
    vcpus_per_node=4,
    memory_mib_per_node=16384,
    network_gbps=2.5,
    primary_network_gbps=2.5,
    capacity_types=("spot", "on-demand"),
    node_types=(
        NodeType("g5.xlarge", 4, 16384, 1, "A10G", 22888, 2.5, 2.5),
        NodeType("g6.xlarge", 4, 16384, 1, "L4", 22 * 1024, 2.5, 2.5),
    ),
)


def _od(instance_type: str) -> float:
    return price_facts.ec2_on_demand("us-east-1", instance_type).usd


def _gpt(**kw):
    raw = {"name": "g", "team": "t", "pool": "gpu", "preset": "fsdp", "workers": 1,
           "gpusPerWorker": 1, "cpu": "3", "memory": "12Gi", "model": "gpt", "layers": 12,
           "dModel": 768, "heads": 12, "seqLen": 1024, "vocabSize": 8192, "steps": 5000,
           "batchSize": 8}  # fmt: skip
    return parse_job({**raw, **kw}, "job")


def test_pods_per_node_and_the_packing_read_one_sizing_of_a_hand_built_type():
    """A contract with a node shape for one type and only the size of another: the packing
    sizes the second as `pods_per_node` does (`capacity.packing_pool`, one sizing), so an 8-GPU
    pod that only the g5.48xlarge holds launches on it (it used to be offered by
    `node_options` and never launched: no NodeClaim, no cost)."""
    (shape,) = capacity.pool_nodes(replace(G5, node_types=(), instance_types=("g5.12xlarge",)))
    pool = replace(G5, nodes=(shape,))
    job = _job(gpusPerWorker=8, workers=1, cpu="90", memory="300Gi")
    big = pool.node_types[1]
    assert capacity.pods_per_node(job, pool, big) == 1
    choice = cost.choose_nodes(job, pool, "us-east-1")
    assert choice is not None and (choice.instance_type, choice.nodes) == ("g5.48xlarge", 1)


def test_a_mixed_pool_runs_and_prices_the_type_karpenter_launches():
    """The run cost pairs one node: the duration is estimated on the type the $/h is for
    (Karpenter's cheapest, g6.xlarge: L4), not on the pool's slowest GPU (A10G; one rank, so
    the GPU's speed decides, not the bandwidth), and the
    dearer type the pool may launch instead is the worst case, in one line."""
    job = _gpt()
    jc = cost.job_cost(job, MIXED, "us-east-1", "t/PyTorchJob/g")
    assert jc.choice.instance_type == "g6.xlarge"
    assert jc.duration.hardware == "1 x L4" and "on 1 x L4" in jc.duration.detail
    pool_wide = duration.expected_duration(job, MIXED)  # the memory fit's figure: slowest GPU
    assert "A10G" in pool_wide.detail and jc.duration.seconds < pool_wide.seconds
    assert jc.run_cost == pytest.approx(_od("g6.xlarge") * jc.duration.seconds / 3600)
    # every figure of the plan reads the same per-type estimate
    assert cost.choose_nodes(job, MIXED, "us-east-1").duration == jc.duration
    assert jc.to_json()["durationSeconds"] == jc.duration.seconds
    worst = jc.worst
    assert (worst.instance_type, worst.duration.hardware) == ("g5.xlarge", "1 x A10G")
    assert worst.run_cost == pytest.approx(_od("g5.xlarge") * worst.duration.seconds / 3600)
    assert jc.to_json()["worstCase"]["instanceType"] == "g5.xlarge"
    line = jc.launch_line()
    assert line.startswith("likely g6.xlarge x1: ") and "on 1 x L4" in line
    assert "worst case g5.xlarge x1: " in line and "on 1 x A10G" in line
    # one type, or a node group (its first listed type): no worst case
    assert cost.job_cost(job, MIXED.only("g6.xlarge"), "us-east-1", "r").worst is None
    group = replace(MIXED, kind="node-group")
    assert cost.job_cost(job, group, "us-east-1", "r").worst is None


def _fleet_job(**kw):
    """`_gpt()` on a fleet of two workers, g6.xlarge in us-east-1 and g5.xlarge in us-west-2:
    the manager's row with one run per worker (as cost_check builds it)."""
    job = _gpt(**kw)
    runs = tuple(
        cost.WorkerRun(w, "gpu", region, c := cost.job_cost(job, MIXED.only(t), region, "r"),
                       c.choice.describe())
        for w, t, region in (("use1", "g6.xlarge", "us-east-1"), ("usw2", "g5.xlarge", "us-west-2"))
    )  # fmt: skip
    row = cost.JobCost("g", "t", "gpu", "t/PyTorchJob/g", None, False,
                       duration.Duration(None, "unknown", ""))  # fmt: skip
    return cost.fleet_job_cost(row, runs)


def test_a_fleet_managers_job_is_priced_on_its_workers_and_capped_at_the_dearest():
    """MultiKueue runs a manager's job on whichever worker admits it first, so its figures are
    its workers', and a cap or budget must hold on the dearest: a cap between the two
    workers' $/h is a finding naming the dearer worker."""
    j = _fleet_job()
    use1, usw2 = (r.cost for r in j.runs)
    assert use1.duration.hardware == "1 x L4" and usw2.duration.hardware == "1 x A10G"
    assert usw2.hourly == pytest.approx(price_facts.ec2_on_demand("us-west-2", "g5.xlarge").usd)
    assert j.hourly == max(use1.hourly, usw2.hourly) == usw2.hourly
    assert j.run_cost == max(use1.run_cost, usw2.run_cost)
    assert j.month_cost == max(use1.month_cost, usw2.month_cost)
    assert (j.choice.instance_type, j.dearest_run().worker) == ("g5.xlarge", "usw2")
    data = j.to_json()
    assert [w["worker"] for w in data["workers"]] == ["use1", "usw2"]
    assert data["workers"][1]["region"] == "us-west-2" and data["dearestWorker"] == "usw2"
    line = j.fleet_line()
    assert "first worker that admits it (use1, usw2), never on the manager's own pools" in line
    assert f"$/h usw2's {cost.usd(usw2.hourly)}" in line
    report = cost.CostReport("us-east-1", dt.date(2026, 11, 23), jobs=[j])
    report.teams = cost.team_costs({"t": TeamFacts("t", "t")}, [], report.jobs)
    between = (use1.hourly + usw2.hourly) / 2
    (f,) = cost_check.findings(report, cost_check.parse_caps({"jobPerHour": between}))
    assert (
        f.rule == "TF_COST_JOB_CAP" and "on worker usw2, the dearest that may run it" in f.message
    )
    caps = {"teams": {"t": {"teamPerMonth": (use1.run_cost + usw2.run_cost) / 2}}}
    (f,) = cost_check.findings(report, cost_check.parse_caps(caps, {"t"}))
    assert f.rule == "TF_COST_TEAM_BUDGET" and "each at its dearest worker" in f.message
    # a worker without a price: the cap cannot be checked, and the missing price is named
    runs = (j.runs[0], replace(j.runs[1], cost=cost.job_cost(_gpt(), MIXED.only("g5.xlarge"),
                                                             "sa-east-1", "r"), region="sa-east-1"))  # fmt: skip
    k = cost.fleet_job_cost(j, runs)
    assert k.hourly is None and k.missing_price("us-east-1") == "on-demand g5.xlarge in sa-east-1"
    report = cost.CostReport("us-east-1", dt.date(2026, 11, 23), jobs=[k])
    (f,) = cost_check.findings(report, cost_check.parse_caps({"jobPerHour": 100}))
    assert f.rule == "TF_COST_PRICE_MISSING"
    # no worker admits it: no cost, never the manager's own pools
    none = cost.fleet_job_cost(j, ())
    assert none.hourly is None and none.choice is None and "no worker" in none.fleet_line()


def test_docs_state_devs_likely_and_worst_case_as_the_plan_prints_them():
    """docs/cost.md's "One node, one run" example is dev's line, and every figure of dev's plan
    reads the likely type's run: the Cost table, the queue's `runs ~` and the estimates."""
    plan = shipped_plan("dev")
    cost_ = next(s for s in plan.sections if s.title == cost_check.SECTION_TITLE)
    printed = [ln.strip() for ln in cost_.lines]
    doc = (ROOT / "docs/cost.md").read_text()
    (line,) = [ln.strip() for ln in doc.splitlines() if ln.strip().startswith("likely ")]
    assert line in printed
    job = next(j for j in cost_.data["jobs"] if j["name"] == "gpt-small-fsdp")
    assert job["instanceType"] == "g4dn.xlarge" and "on 2 x T4" in job["durationDetail"]
    queue = next(s for s in plan.sections if s.title.startswith("Queue admission"))
    (runs,) = [ln for ln in queue.lines if "research/gpt-small-fsdp [" in ln]
    assert f"runs ~{duration.duration_text(job['durationSeconds'])}" in runs
    est = next(s for s in plan.sections if s.title.startswith("Memory per GPU"))
    (e,) = [d for d in est.data if d["job"] == "gpt-small-fsdp"]
    assert e["runOn"]["instanceType"] == "g4dn.xlarge"
    assert e["runOn"]["duration_seconds"] == job["durationSeconds"]


def test_duration_precedence_user_step_time_then_deadline_then_unknown():
    both = _job(expectedStepSeconds=0.5, steps=1000, runPolicy={"activeDeadlineSeconds": 9000})
    d = duration.expected_duration(both, G5)
    assert (d.seconds, d.source, d.ceiling) == (500.0, "expectedStepSeconds", False)
    d = duration.expected_duration(_job(runPolicy={"activeDeadlineSeconds": 9000}), G5)
    assert (d.seconds, d.source, d.ceiling) == (9000.0, "activeDeadlineSeconds", True)
    d = duration.expected_duration(_job(), G5)
    assert d.seconds is None and d.source == "unknown" and "expectedStepSeconds" in d.detail


def test_expected_step_seconds_is_validated():
    with pytest.raises(Exception, match=r"job.expectedStepSeconds: got -1.*> 0"):
        _job(expectedStepSeconds=-1)


def test_unknown_prices_stay_unknown():
    assert price_facts.ec2_on_demand("us-west-2", "g7e.2xlarge") is None  # no source prices it
    assert "g7e.2xlarge" in price_facts.MISSING["us-west-2"]
    assert price_facts.ec2_spot("us-east-1", "g5.xlarge") is None  # spot is never guessed
    assert price_facts.ec2_on_demand("us-east-1", "g5.xlarge").usd == 1.006
    choice = cost.choose_nodes(_job(), G5, "sa-east-1")
    assert choice.hourly_on_demand is None and "no price for" in choice.reason
    job = cost.JobCost(
        "j", "t", "gpu", "t/PyTorchJob/j", choice, True, duration.Duration(3600.0, "x", "")
    )
    assert job.hourly is None and job.run_cost is None


def test_a_nodeclaim_with_one_unpriced_type_says_which_type_and_that_its_price_is_unknown():
    """A NodeClaim whose only candidate has no price launches that type: only its price is
    unknown. The cost line said "so which one is unknown (first listed shown: ...)", as if
    several types competed (the fleet's usw2 worker: pool cpu is [m6i.2xlarge], which the
    us-west-2 price table lacks); with two unpriced candidates it still says so."""
    one = replace(G5, instance_types=("g5.12xlarge",), node_types=G5.node_types[:1])
    choice = cost.choose_nodes(_job(workers=1), one, "sa-east-1")  # no EC2 prices there
    assert choice.reason.endswith(
        "launches the cheapest of each: g5.12xlarge x1 at an unknown price (no price for "
        "g5.12xlarge in sa-east-1)"
    )
    two = cost.choose_nodes(_job(workers=1), G5, "sa-east-1")
    assert two.reason.endswith(
        "launches the cheapest of each: no price for g5.12xlarge, g5.48xlarge in sa-east-1, "
        "so which one is unknown (first listed shown: g5.12xlarge x1)"
    )


def test_a_node_groups_fixed_cost_says_which_price_it_lacks():
    """A node group's desiredSize nodes are always on: priced by its first type, or unknown
    with the price the table lacks (spot always); a launch template's capacity reservation
    and gp3 root volumes are read from the template."""
    from trainforge.plan.runner import Recorded

    ng = "aws:eks/nodeGroup:NodeGroup"
    template = {
        "blockDeviceMappings": [{"ebs": {"volumeSize": 100}}],
        "capacityReservationSpecification": {
            "capacityReservationTarget": {"capacityReservationId": "cr-1"}
        },
    }
    resources = [
        Recorded("lt", "aws:ec2/launchTemplate:LaunchTemplate", "lt", None, True, template),
        Recorded("a", ng, "a", None, True, {"scalingConfig": {"desiredSize": 2},
                 "instanceTypes": ["m5.large"]}, dependencies={"launchTemplate": ["lt"]}),
        Recorded("b", ng, "b", None, True, {"scalingConfig": {"desiredSize": 1},
                 "instanceTypes": ["g5.xlarge"], "capacityType": "SPOT"}),
        Recorded("c", ng, "c", None, True, {"scalingConfig": {"desiredSize": 0}}),
    ]  # fmt: skip
    a, b, ebs = cost.fixed_costs(resources, "us-east-2", dt.date(2026, 11, 29))
    assert a.hourly == pytest.approx(2 * price_facts.ec2_on_demand("us-east-2", "m5.large").usd)
    assert a.note.startswith("capacity reservation cr-1: billed for every reserved instance")
    assert (b.hourly, b.missing) == (None, "spot g5.xlarge in us-east-2")
    assert b.note == "no spot price for g5.xlarge in us-east-2"
    assert (ebs.quantity, ebs.note) == ("200 GB", "2 x 100 GB (a)")


def test_the_eks_support_calendar_is_the_projects_one():
    """The cost report's extended-support price reads the calendar the version pins and
    docs/upgrading.md use (core/versions), not a second copy in the price facts."""
    calendar = {v: d.isoformat() for v, d in price_facts.EKS_STANDARD_SUPPORT_END.items()}
    assert calendar == versions.EKS_STANDARD_SUPPORT_ENDS
    assert versions.KUBERNETES_VERSION in calendar


def test_eks_extended_support_costs_more_after_the_calendar_date():
    assert price_facts.eks_support("1.33", dt.date(2026, 7, 29)) == "standard"
    assert price_facts.eks_support("1.33", dt.date(2026, 7, 30)) == "extended"
    assert price_facts.eks_support("9.99", dt.date(2026, 7, 30)) is None


# --- the real stacks -----------------------------------------------------------------------------


def _report(stack: str, today=dt.date(2026, 11, 23), overrides=None):
    if overrides is None:  # the stack as committed: planned once per test process
        result = shipped_plan(stack)
    else:
        result = core.plan_project(ROOT, stack, standins=False, config_overrides=overrides)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=today)


@pytest.fixture(scope="module")
def prod():
    # prod with its `YOURS:` values (the p4d group's capacity reservation among them)
    return _report("prod", overrides=prod_own_values())


def _annotations(result, name):
    (obj,) = [o for o in result.objects if o.kind == "PyTorchJob" and o.obj_name == name]
    return obj.doc["metadata"]["annotations"]


def test_pods_packed_on_one_node_are_still_nccls_separate_hosts():
    """Karpenter puts prod's two 4-GPU pods on one g5.48xlarge, but NCCL tells hosts apart
    by hostname (the pod's own) and boot id, and its P2P/SHM transports connect only ranks of
    one host (NVIDIA/nccl v2.30.7-1 src/misc/utils.cc, src/transport/p2p.cc): the estimate
    keeps the pods' traffic on the network, unlike one pod with all eight GPUs."""
    from trainforge.jobs.estimate import estimate

    (dj,) = shipped_plan("prod").inventory.declared.jobs
    pool = dj.target.pool.only("g5.48xlarge")
    two = estimate(dj.spec, pool).timing
    whole = {"workers": 1, "gpus_per_worker": 8, "procs_per_worker": 8}
    one_pod = estimate(dj.spec.model_copy(update=whole), pool)
    one = one_pod.timing
    assert two is not None and one is not None and one_pod.world_size == 8
    assert two.comm_seconds > one.comm_seconds


def test_the_jobs_expected_duration_annotation_is_the_costs_run():
    """The annotation `trainforge status` reads for its ETA is the estimate the plan's Cost
    times the run on (`duration.launch_duration`: the per-type figure of the type the packing
    launches), not the pool-wide one (slowest GPU, least bandwidth: two different nodes).
    prod: one g5.48xlarge holds both pods, so the figure is exactly the Cost's (it was 33,881 s
    against the Cost's 33,782 s). dev's gpt-small-fsdp: g4dn.xlarge or g5.xlarge, which one
    only the prices decide, so the annotation states the range with the Cost's figure in it
    and records the longer (it was 3,825 s, a figure neither type gives). The cheaper type
    need not be the faster: the T4's fp32 step is longer than the A10G's network-bound one."""
    result, report = _report("prod")
    (job,) = report.jobs
    notes = _annotations(result, "gpt-350m-fsdp")
    assert notes[duration.EXPECTED_SECONDS] == f"{job.duration.seconds:.0f}"
    assert notes[duration.EXPECTED_BASIS] == job.duration.detail

    result, report = _report("dev")
    (job,) = [j for j in report.jobs if j.name == "gpt-small-fsdp"]
    notes = _annotations(result, "gpt-small-fsdp")
    assert job.worst is not None  # the pool may launch the dearer, slower type instead
    runs = [
        (job.choice.duration.seconds, job.choice.instance_type),
        (job.worst.duration.seconds, job.worst.instance_type),
    ]
    (short, short_type), (long, long_type) = sorted(runs)
    assert short < long
    assert notes[duration.EXPECTED_SECONDS] == f"{long:.0f}"
    basis = notes[duration.EXPECTED_BASIS]
    assert basis.startswith(
        f"{duration.duration_text(short)} on {short_type} to "
        f"{duration.duration_text(long)} on {long_type}: "
    )


def test_prod_cost_table_has_jobs_teams_and_the_platform(prod, tmp_path):
    result, report = prod
    (job,) = report.jobs
    # two 4-GPU pods: one NodeClaim that only a g5.48xlarge holds (trainforge.jobs.packing)
    assert (job.name, job.choice.instance_type, job.choice.nodes) == (
        "gpt-350m-fsdp",
        "g5.48xlarge",
        1,
    )
    assert job.hourly == pytest.approx(16.288)
    # the step-time model (trainforge.jobs.estimate) beats the 1-day deadline, a ceiling
    assert job.duration.source == "estimate" and not job.duration.ceiling
    assert job.duration.seconds < 86400
    assert job.run_cost == pytest.approx(16.288 * job.duration.seconds / 3600)
    teams = {t.name: t for t in report.teams}
    # a team's sum adds its jobs' figures as printed, to the cent
    assert teams["vision"].jobs_hourly == 16.29 and teams["llm"].jobs_hourly == 0
    # vision may hold its own 16 GPUs plus what it may borrow from its cohort (llm's 64 and
    # the cohort's 80 nobody is guaranteed: every GPU of the cluster, 160; prod sets no
    # borrowing limit), at the priciest $/GPU-hour of the stack (p5.48xlarge: 55.04 / 8), and
    # its CPU-only quota at the priciest $/vCPU-hour (m5.8xlarge: 1.536 / 32); the CPU that
    # comes with the GPUs is in the GPU nodes' price
    ceiling = teams["vision"].ceiling
    assert ceiling.detail.startswith("160 GPU x $6.880/GPU-h (p5.48xlarge) + ")
    vcpus = float(ceiling.detail.split(" + ")[1].split(" vCPU")[0])
    assert 0 < vcpus <= 1000  # the CPU pool's limit
    assert ceiling.hourly == pytest.approx(160 * 55.04 / 8 + vcpus * 1.536 / 32)
    fixed = {i.what: i for i in report.fixed}
    eks = fixed["EKS control plane 1.35"]
    assert eks.hourly == 0.10 and eks.note == "standard support until 2027-03-27"
    assert fixed["NAT gateways"].hourly == pytest.approx(3 * 0.045)
    p4d = fixed["node group trainforge-prod-p4d-reserved (p4d.24xlarge, on-demand)"]
    assert p4d.hourly == pytest.approx(2 * 21.957642) and "capacity reservation" in p4d.note
    fsx = fixed["FSx for Lustre PERSISTENT_2 250 MB/s/TiB"]
    assert fsx.hourly is None  # no dated price for this tier: unknown, not guessed
    assert "FSx for Lustre PERSISTENT_2 250 MB/s/TiB" in report.fixed_unknown

    # and `trainforge plan --stack prod` prints it, with the facts table's date
    out = full_report(result, tmp_path)
    section = out[out.index("\nCost:") :]
    assert f"price facts table of {price_facts.FACTS_DATE}" in section
    assert re.search(
        r"gpt-350m-fsdp +vision +at once +\$[\d,.]+ +[\d.]+ h +estimate +g5\.48xlarge +1 +\$16\.29",
        section,
    )
    assert f"  {duration.duration_text(job.duration.seconds)}" in section
    assert f"  {cost_check.usd(job.run_cost)}" in section and "<= " not in section
    assert "quota ceiling $/month" in section and "vision  $16.29" in section
    assert "[karpenter-1.14.1]" in section and "2026-07-06" in section


@pytest.mark.parametrize("pool_cpu", [None, "16"])
def test_quota_ceiling_without_kueue_reads_the_namespace_quota_and_the_pools(tmp_path, pool_cpu):
    """Without Kueue nothing counts quota per pool: a team's pods may hold its whole namespace
    quota's CPU (its ResourceQuota: quota.cpu plus the CPU that follows its GPUs) in the
    CPU-only pools, as far as those hold (the quota model's `pool_capacity`, the Scheduling
    rehearsal's 'holds for quota'). The ceiling reads both; it no longer subtracts an
    estimate of the GPUs' CPU (dev: 32 vCPU where the namespace may hold 46.4). With
    training-workloads' limits.cpu at 16 the pool's two c5.2xlarge bound it."""

    def change(config):
        config["trainforge:kueue"] = {**config.get("trainforge:kueue", {}), "enabled": False}
        if pool_cpu:
            pool = next(
                p for p in config["trainforge:nodePools"] if p["name"] == "training-workloads"
            )
            pool["limits"]["cpu"] = pool_cpu

    root = project_copy(tmp_path, "dev", change)
    result = core.plan_project(root, "dev", standins=False, echo_warnings=False)
    rq = next(o.doc for o in result.objects
              if o.doc["kind"] == "ResourceQuota" and o.doc["metadata"]["namespace"] == "research")  # fmt: skip
    namespace = float(parse_quantity(rq["spec"]["hard"]["requests.cpu"]))
    lines = [line for s in result.sections for line in s.lines]
    holds = [re.search(r"holds for quota: cpu ([\d.]+) cores", line) for line in lines]
    (pool,) = [float(m.group(1)) for m in holds if m]
    (ceiling,) = [line for line in lines if "research: quota ceiling =" in line]
    vcpus = float(re.search(r"\+ ([\d.]+) vCPU x", ceiling).group(1))
    assert vcpus == pytest.approx(min(namespace, pool), abs=0.01), (ceiling, namespace, pool)
    if pool_cpu:
        assert pool < namespace and "15.38 vCPU" in ceiling
    else:
        assert namespace < pool and "46.4 vCPU" in ceiling
        doc = " ".join((ROOT / "docs/cost.md").read_text().split())
        said = f"research {vcpus:g} vCPU, its ResourceQuota, where the pool holds {pool:g})"
        assert said in doc  # docs/cost.md, Quota ceiling


def test_dev_cost_table_has_dollars_for_jobs_pools_and_control_plane():
    result, report = _report("dev")
    assert {j.name for j in report.jobs} == set(DEV_JOBS)
    assert all(j.hourly is not None and j.hourly > 0 for j in report.jobs)  # us-west-2
    fixed = {i.what.split(" (")[0]: i for i in report.fixed}
    assert fixed["EKS control plane 1.35"].hourly == pytest.approx(0.10)  # the same everywhere
    assert fixed["node group trainforge-dev-system"].hourly == pytest.approx(2 * 0.096)
    assert report.teams[0].ceiling.hourly is not None
    lines = "\n".join(cost_check.render(report))
    assert re.search(r"mnist-ddp .* m5\.2xlarge +1 +\$0\.38", lines)  # 2 pods of 2 CPU, 8Gi
    assert re.search(r"gpt-small-fsdp .* g4dn\.xlarge +2 +\$1\.05", lines)
    # what is still unpriced is counted, never summed as $0.00
    total = next(ln for ln in lines.splitlines() if ln.strip().startswith("total:"))
    assert "total: at least $" in total and "item(s) unknown (" in total
    assert result.clean


def test_a_region_without_prices_says_at_least_never_zero():
    overrides = {"aws:region": "sa-east-1"}
    _, report = _report("dev", overrides=overrides)
    text = report.fixed_total()
    # the EKS control plane and the NAT gateway's public IPv4 address: the same everywhere
    assert text.startswith("at least $0.11/h") and "6 item(s) unknown (NAT gateways" in text
    assert all(j.hourly is None for j in report.jobs)


# --- caps ----------------------------------------------------------------------------------------


def test_job_cap_fails_then_a_waiver_with_a_reason_passes():
    caps = {"trainforge-policy:costCaps": {"jobPerHour": 10}}
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=caps)
    (v,) = [v for v in result.failing if v.rule == "TF_COST_JOB_CAP"]
    assert v.resource == "vision/PyTorchJob/gpt-350m-fsdp"
    assert (
        "costs $16.29/h on-demand (1 x g5.48xlarge at $16.29/h), over the $10.00/h cap" in v.message
    )
    waiver = {
        "resource": "gpt-350m-fsdp",
        "rule": "TF_COST_JOB_CAP",
        "reason": "approved by FinOps",
    }
    result = core.plan_project(
        ROOT,
        "prod",
        standins=False,
        config_overrides={**caps, "trainforge-policy:waivers": [*_prod_waivers(), waiver]},
    )
    assert result.clean
    assert [(w.rule, w.waived) for w in result.waived if w.rule.startswith("TF_COST")] == [
        ("TF_COST_JOB_CAP", "approved by FinOps")
    ]


def test_team_cap_counts_all_of_its_jobs_and_is_waivable_by_team(prod):
    _, report = prod
    caps = cost_check.parse_caps({"jobPerHour": 100, "teams": {"vision": {"teamPerHour": 5}}})
    (f,) = cost_check.findings(report, caps)
    assert (f.rule, f.resource) == ("TF_COST_TEAM_CAP", "team/vision")
    assert "team vision's jobs that run at once (gpt-350m-fsdp) cost $16.29/h" in f.message
    assert not cost_check.findings(report, cost_check.parse_caps({"teamPerHour": 17}))
    # and in a real plan, the team's name waives it
    overrides = {
        "trainforge-policy:costCaps": {"teams": {"vision": {"teamPerHour": 5}}},
        "trainforge-policy:waivers": [
            *_prod_waivers(),
            {"resource": "vision", "rule": "TF_COST_TEAM_CAP", "reason": "launch week"},
        ],
    }
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    assert result.clean
    assert [w.rule for w in result.waived if w.rule.startswith("TF_COST")] == ["TF_COST_TEAM_CAP"]


def _prod_waivers() -> list[dict]:
    """The shipped prod stack's own waivers: an override of the list replaces them."""
    import yaml

    config = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    return list(config.get("trainforge-policy:waivers") or [])


def test_a_cap_on_an_unknown_price_cannot_pass_silently():
    caps = {"trainforge-policy:costCaps": {"jobPerHour": 1000}, "aws:region": "sa-east-1"}
    result = core.plan_project(ROOT, "dev", standins=False, config_overrides=caps)
    rules = sorted(v.rule for v in result.failing)
    # every dev job: no sa-east-1 prices, and the finding blames the price table
    assert rules == ["TF_COST_PRICE_MISSING"] * len(DEV_JOBS)
    assert all("cannot be checked" in v.message for v in result.failing)
    assert all("in sa-east-1" in v.message and "price table" in v.fix for v in result.failing)


def test_a_team_cap_on_unknown_prices_is_a_finding_that_says_it_cannot_be_checked():
    """docs/cost.md: TF_COST_TEAM_CAP also when the team's jobs' price is unknown."""
    _, report = _report("dev", overrides={"aws:region": "sa-east-1"})  # no dated prices there
    (team,) = report.teams
    caps = cost_check.parse_caps({"teams": {"research": {"teamPerHour": 5}}}, {"research"})
    (f,) = cost_check.findings(report, caps)
    assert (f.rule, f.resource) == ("TF_COST_PRICE_MISSING", "team/research")
    assert f.message.startswith(
        f"team research cannot be checked against {cost_check.usd(5)}/h: the price table has no "
        "on-demand "
    )
    assert "in sa-east-1" in f.message and team.jobs
    assert "research" in f.names


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        ({"jobPerHour": "lots"}, "trainforge-policy:costCaps.jobPerHour: got 'lots'"),
        ({"perJob": 3}, "trainforge-policy:costCaps.perJob: unknown key"),
        (
            {"teams": {"nobody": {"teamPerHour": 1}}},
            "costCaps.teams.nobody: got 'nobody'; expected one of the teams: llm, vision",
        ),
        (
            {"teams": {"visoin": {"teamPerHour": 1}}},
            "one of the teams: llm, vision (did you mean 'vision'?)",
        ),
        ({"jobPerHour": True}, "costCaps.jobPerHour: got True; expected a number of USD per"),
        ({"teams": {"llm": {"teamPerHour": 0}}}, "costCaps.teams.llm.teamPerHour: got 0"),
        ("[1", "trainforge-policy:costCaps: got '[1'; expected a mapping"),
    ],
)
def test_bad_caps_name_the_key(caps, expected):
    with pytest.raises(CostCapsError) as e:
        cost_check.parse_caps(caps, {"llm", "vision"})
    assert expected in str(e.value)


def test_bad_caps_are_a_configuration_error(tmp_path, capsys):
    def change(config):
        config["trainforge-policy:costCaps"] = {"jobPerHour": "lots"}

    root = project_copy(tmp_path, "prod", change)
    assert cli.main(["--stack", "prod", "--project-dir", str(root), "--no-standins"]) == 2
    err = capsys.readouterr().err
    assert "trainforge-policy:costCaps.jobPerHour: got 'lots'; expected a number" in err
    assert "(1 problem(s))" in err and "Traceback" not in err


# --- the diff ------------------------------------------------------------------------------------


def test_diff_markdown_shows_the_cost_change_of_a_pr(tmp_path, capsys, shipped_plan_out):
    old = shipped_plan_out("prod")  # the base: prod as committed
    args = ["--stack", "prod", "--summary", "--no-standins"]

    def more_workers(config):
        config["trainforge:jobs"][0]["workers"] = 4

    head = project_copy(tmp_path, "prod", more_workers)
    md_file = tmp_path / "diff.md"
    capsys.readouterr()
    rc = cli.main(
        [*args, "--project-dir", str(head), "--diff", str(old), "--diff-md", str(md_file)]
    )
    assert rc == 0
    md = md_file.read_text()
    assert "### Cost (USD, on-demand list prices)" in md
    # the run cost follows the estimated duration, which more GPUs shorten
    row = next(ln for ln in md.splitlines() if ln.startswith("| `gpt-350m-fsdp` (vision)"))
    assert row.startswith("| `gpt-350m-fsdp` (vision) | changed | $")
    assert row.endswith("| estimate | at once | 2 x g5.48xlarge | $16.29 → $32.58 |")
    assert "/month" not in row  # a run's cost is not a monthly figure
    assert "| vision | $16.29 → $32.58 |" in md
    assert "Platform fixed cost" not in md  # unchanged
    assert md in capsys.readouterr().out


def test_diff_markdown_without_a_change_or_a_base_report():
    from trainforge.plan.diff import cost_markdown

    data = {"factsDate": "2026-11-23", "jobs": [], "teams": [], "fixedPerMonthKnown": 10.0}
    assert "No cost change." in cost_markdown(data, data)
    assert "The base plan has no cost report" in "\n".join(cost_markdown(None, data))


def test_docs_cost_figures_are_what_the_prod_plan_prints(prod):
    _, report = prod
    printed = {ln.strip() for ln in cost_check.render(report)}
    doc = (ROOT / "docs/cost.md").read_text()
    block = doc.split("```\nCost:\n", 1)[1].split("```", 1)[0]
    lines = [ln.strip() for ln in block.splitlines() if ln.strip() and "..." not in ln]
    assert len(lines) > 10
    missing = [ln for ln in lines if ln not in printed]
    assert not missing, f"docs/cost.md lines the plan no longer prints: {missing}"


def test_a_volume_inside_secret_chart_values_is_still_priced(prod):
    """prod's kube-prometheus-stack values hold a secret (the alert receivers), so the
    inventory masks them: the Prometheus volume must still be counted, as in dev."""
    _, report = prod
    ebs = next(i for i in report.fixed if i.what == "EBS gp3 volumes")
    assert "50 GB (kube-prometheus-stack)" in ebs.note, ebs.note
    assert ebs.quantity == "1250 GB", ebs.quantity


def test_the_cost_names_the_object_a_job_became_whatever_its_backend(monkeypatch):
    """A job's cost row names the object the job became, found by its trainforge.io/job
    label (queues.workload_object, the queue's own lookup) on an object whose backend declares
    its kind a job's workload (`Shape.job`), not by a list of known kinds: a backend of a new
    kind is named too."""
    from types import SimpleNamespace

    from tests.jobs.helpers import target
    from trainforge.core import pods
    from trainforge.jobs import backends
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory

    shape = pods.Shape(templates=(("spec", "pod"),), replicas=(("size",),), job=True)
    monkeypatch.setitem(backends.SHAPES, "ToyGang", shape)
    t = target(GPU_POOL)
    doc = {
        "apiVersion": "toy.example.com/v1", "kind": "ToyGang",
        "metadata": {"name": "toy-run", "namespace": t.namespace,
                     "labels": {"trainforge.io/job": "toy"}},
        "spec": {"size": 2, "pod": {"spec": {"containers": [{"name": "train"}]}}},
    }  # fmt: skip
    obj = K8sObject(
        urn="urn:toy", name="toy", type="kubernetes:toy.example.com/v1:ToyGang", doc=doc
    )
    job = _job(name="toy", team=t.team.name, pool=GPU_POOL.name)
    declared = SimpleNamespace(contracts=[], jobs=[SimpleNamespace(spec=job, target=t)])
    ctx = PlanContext(Inventory(project="p", stack="s", resources=[]), [obj], declared)
    (row,) = cost_check.build_report(ctx, dt.date(2026, 11, 29)).jobs
    assert row.resource == f"{t.namespace}/ToyGang/toy-run"


def test_the_cost_reads_what_stops_packing_from_the_jobs_object():
    """A required pod anti-affinity on the hostname in the job's emitted pod templates keeps
    its pods on separate nodes (Karpenter's topology check), so the launch is one
    g5.12xlarge per pod, not the g5.48xlarge that holds both: the cost reads the object
    (`packing.spread_limit`), not an assumption about it."""
    import copy

    result = shipped_plan("prod")
    objects = []
    for o in result.objects:
        if o.kind == "PyTorchJob" and o.obj_name == "gpt-350m-fsdp":
            o = replace(o, doc=copy.deepcopy(o.doc))
            for spec in o.doc["spec"]["pytorchReplicaSpecs"].values():
                term = {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"trainforge.io/job": "gpt-350m-fsdp"}}}  # fmt: skip
                anti = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                spec["template"]["spec"]["affinity"] = {"podAntiAffinity": anti}
        objects.append(o)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=objects, declared=inv.declared, root=ROOT)
    (job,) = cost_check.build_report(ctx, today=dt.date(2026, 11, 23)).jobs
    assert (job.choice.instance_type, job.choice.nodes) == ("g5.12xlarge", 2)
    assert job.hourly == pytest.approx(2 * 5.672)
    assert "at most 1 per node (its pod template)" in job.choice.reason
    # the estimates section times the run on the same nodes as the Cost
    estimated = estimates.check(ctx).sections[0].lines
    assert any("step and duration on g5.12xlarge (8 x A10G)" in line for line in estimated)
    (plain,) = cost_check.build_report(
        PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT),
        today=dt.date(2026, 11, 23),
    ).jobs
    assert (plain.choice.instance_type, plain.choice.nodes) == ("g5.48xlarge", 1)


def test_a_launch_of_several_types_is_timed_on_the_slowest():
    """A last, part-full NodeClaim may launch another type than the full ones: every rank
    waits for the slowest GPU, so the run (the cost and the estimates section's step line)
    is that type's; an unknown run could be the slowest."""
    fast = cost.NodeChoice("g5.48xlarge", 1, 2, None, None, "", duration.Duration(3600.0, "e", ""))
    slow = replace(fast, instance_type="g4dn.12xlarge", duration=duration.Duration(7200.0, "e", ""))
    assert replace(fast, more=(slow,)).timed_on == "g4dn.12xlarge"
    assert replace(slow, more=(fast,)).timed_on == "g4dn.12xlarge"
    unknown = replace(slow, instance_type="x", duration=None)
    assert replace(fast, more=(slow, unknown)).timed_on == "x"
    opts = [fast, slow]
    pk = packing.Packing(claims=[packing.Claim((0, 1), ("g5.48xlarge",)),
                                 packing.Claim((2,), ("g4dn.12xlarge",))])  # fmt: skip
    launch = cost._launch(opts, pk, pk.launched(cost.launch_prices("us-east-1")))
    assert launch.nodes_words() == "g5.48xlarge x1 + g4dn.12xlarge x1"
    assert launch.duration.seconds == 7200.0


def test_a_job_the_pools_limits_stop_names_the_limit_as_the_scheduling_rehearsal_does():
    """Karpenter counts each NodeClaim at its largest candidate type against the pool's
    limits: at nvidia.com/gpu 2 neither 4-GPU g5.12xlarge nor 8-GPU g5.48xlarge may start, at
    4 only one g5.12xlarge. The cost table said "none fits" (and "no instance type fits a
    pod") while the scheduling rehearsal named the limit; both now say it in one sentence
    (capacity.launch_stopped)."""
    from trainforge.core.contract import PoolLimits
    from trainforge.plan.checks import queues

    job = _job()
    for gpus, placed in ((2, 0), (4, 1)):
        pool = replace(G5, limits=PoolLimits(gpus=gpus))
        rehearsal = capacity.rehearse(
            capacity.job_request(job, pool), job.workers, capacity.packing_pool(pool)
        )
        (problem,) = rehearsal.problems
        words = capacity.launch_stopped(pool, capacity.job_gang(job, pool))
        assert words and words in problem.message
        if placed:  # the two pods' one NodeClaim may be a g5.48xlarge: it counts 8 GPUs
            over = "have nvidia.com/gpu 8 of capacity but Karpenter pool 'gpu' is limited to "
            assert f"{over}nvidia.com/gpu {gpus}," in words
        else:  # not even one pod: the pool's limit is what is wrong, and by how much
            assert problem.key == "limits.gpus" and words.endswith("Set limits.gpus to at least 4")
        c = cost.job_cost(job, pool, "us-east-1", "t/Job/j")
        if placed:  # one pod runs, the other is left: the reason names the limit
            assert c.choice.nodes_words() == "g5.12xlarge x1"
            assert c.choice.reason.endswith(f"; 1 pod(s) get no node: {words}")
            continue
        assert c.choice is None and c.no_node == words
        row = cost_check._row(c, c, [])
        assert "none: pool limits" in row and "none fits" not in row
        (head, _) = cost_check._run_lines(c, "j: pool gpu", "")
        assert head == f"  j: pool gpu; no pod gets a node: {words}"
        # and every other line that says why no node runs it: the section's data, the cap
        # findings, a fleet worker's run (they said "no instance type ... fits one pod")
        why = f"no pod gets a node: {words}"
        assert c.to_json()["nodeChoice"] == why
        assert cost_check._unpriced_job(c, 5.0).endswith(f"but {why}, so the cap cannot be checked")
        assert cost_check._unpriced_team("t", 5.0, [c]).endswith(f"but job j: {why}")
        worker = WorkerPlan("w", "fleet-w", "us-east-1")
        assert queues._run(job, None, worker, "gpu", pool).why == f"cost unknown: {why}"
    # not the limits: a pod no type holds is still "none fits"
    big = cost.job_cost(_job(gpusPerWorker=16, workers=1), G5, "us-east-1", "t/Job/j")
    assert big.no_node == "" and "none fits" in cost_check._row(big, big, [])
    assert big.to_json()["nodeChoice"] == "no instance type of gpu fits a pod"
    assert capacity.launch_stopped(G5, capacity.job_gang(_job(), G5)) is None


# --- a node group's always-on nodes are paid once ---------------------------------------------


@pytest.fixture(scope="module")
def on_reserved():
    """prod with its job moved onto the p4d-reserved group, which keeps 2 nodes (desiredSize)
    up, in the platform's fixed cost: the job runs on those 2 nodes. (result, report)"""
    import json

    from trainforge.stack.file import read_stack_file

    overrides = prod_own_values()
    jobs = json.loads(read_stack_file(ROOT / "Pulumi.prod.yaml").engine()["trainforge:jobs"])
    jobs[0]["pool"] = "p4d-reserved"
    overrides["trainforge:jobs"] = json.dumps(jobs)
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=dt.date(2026, 11, 30))


def test_a_job_on_a_node_groups_desired_nodes_adds_nothing_to_the_verdicts_hourly_figure(
    on_reserved,
):
    """Its $/h is not summed a second time; its run cost is its own share, said to be paid."""
    from trainforge.plan import verdict

    result, _ = on_reserved
    (job,) = verdict.section_data(result, verdict.COST_TITLE)["jobs"]
    assert (job["pool"], job["nodes"], job["instanceType"]) == ("p4d-reserved", 2, "p4d.24xlarge")
    two_nodes, run = f"${job['onDemandPerHour']:,.2f}", f"${job['runCost']:,.2f}"
    platform, jobs_line = verdict.cost_lines(result, None)[:2]
    assert platform.startswith("Cost: platform $45.12/h")  # the 2 p4d nodes are in it
    assert jobs_line == (
        f"      + jobs: 1 of 1 run at once, $0.00/h while running (their {two_nodes}/h on node "
        "groups' always-on nodes is in the platform's), each job on its own nodes; run costs "
        f"{run} in all (of which {run} on node groups' always-on nodes, paid in the platform's)"
    )
    # docs/cost.md's example figures are these
    doc = " ".join((ROOT / "docs/cost.md").read_text().split())
    assert (two_nodes, run) == ("$43.92", "$61.76")
    assert (
        f"`$0.00/h while running (their {two_nodes}/h on node groups' always-on nodes is in "
        "the platform's)`" in doc
    )
    assert (
        f"`run costs {run} in all (of which {run} on node groups' always-on nodes, paid in "
        "the platform's)`" in doc
    )


def test_the_reports_running_line_counts_a_node_groups_desired_nodes_once(on_reserved):
    _, report = on_reserved
    (job,) = report.jobs
    lines = cost_check.render(report)
    (running,) = [line for line in lines if line.startswith("  running at once:")]
    doc = " ".join((ROOT / "docs/cost.md").read_text().split())
    beyond = f"$0.00/h beyond the platform's (their ${job.hourly:,.2f}/h on node groups'"
    assert f"`{beyond} always-on nodes is in it)`" in doc  # docs/cost.md's example is this
    assert running.startswith(
        f"  running at once: 1 of 1 job(s), $0.00/h beyond the platform's (their "
        f"${job.hourly:,.2f}/h on node groups' always-on nodes is in it) with each job on its "
        "own nodes"
    )


def test_the_cluster_budget_counts_a_node_groups_desired_nodes_once(on_reserved):
    """The platform's month pays the 2 p4d nodes for every hour: the job's run on them adds
    nothing to the cluster's month (its team's month still carries its own share)."""
    _, report = on_reserved
    fixed = report.fixed
    report.fixed = [i for i in fixed if i.hourly is not None]  # FSx at 250 MB/s/TiB: unpriced
    try:
        platform = report.fixed_monthly_known
        (job,) = report.jobs
        (vision,) = [t for t in report.teams if t.month]
        assert vision.month == round(job.run_cost, 2) and job.run_cost > 50  # as printed
        assert cost_check.cluster_month(report) == pytest.approx(platform)
        ok = cost_check.parse_caps({"clusterPerMonth": platform + 1})
        assert not cost_check.findings(report, ok)
        tight = cost_check.parse_caps({"clusterPerMonth": platform - 1})
        (f,) = cost_check.findings(report, tight)
    finally:
        report.fixed = fixed
    assert f.rule == "TF_COST_CLUSTER_BUDGET"
    less = f"less their ${job.run_cost:,.2f} on node groups' always-on nodes, in the platform's"
    assert f"`{less}`" in " ".join((ROOT / "docs/cost.md").read_text().split())  # its example
    assert f.message == (
        f"the cluster costs ${platform:,.2f} in a month (platform ${platform:,.2f}/month + every "
        f"declared job run once, less their ${job.run_cost:,.2f} on node groups' always-on "
        f"nodes, in the platform's), over its ${platform - 1:,.2f}/month budget"
    )


def test_only_the_nodes_beyond_a_node_groups_desired_size_add_to_the_running_figure():
    group = cost.FixedItem("node group g", "2 nodes", 2 * 10.0, pool="g", instance_type="t",
                           nodes=2)  # fmt: skip
    choice = cost.NodeChoice("t", 2, 1, price_facts.Price(10.0, "hour", "x"), None, "")
    unknown = duration.Duration(None, "unknown", "")

    def job(name, nodes, pool="g", admission="runs"):
        return cost.JobCost(name, "a", pool, name, replace(choice, nodes=nodes), False, unknown,
                            admission=admission)  # fmt: skip

    report = cost.CostReport("r", dt.date(2026, 11, 30), fixed=[group])
    report.jobs = [job("a", 1), job("b", 2), job("c", 4, admission="waits"), job("d", 1, "k")]
    assert report.running_hourly == 40.0  # a, b, d: 4 nodes
    assert report.running_in_fixed == 20.0  # a and b share the group's 2 desired nodes
    assert report.in_fixed_hourly == [10.0, 10.0, 0.0, 0.0]  # taken in order, per job
    assert report.run_in_fixed() == 0.0  # runs of unknown length
    two_hours = duration.Duration(7200, "estimate", "")
    report.jobs = [replace(job("a", 1), duration=two_hours)]
    assert report.running_in_fixed == 10.0  # one of the two: the other runs idle anyway
    assert report.run_in_fixed() == 20.0 and report.run_in_fixed(most_hours=1) == 10.0
    report.fixed = [replace(group, hourly=None)]
    assert report.running_in_fixed == 0.0  # an unpriced group is counted nowhere
