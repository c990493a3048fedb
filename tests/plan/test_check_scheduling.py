"""The scheduling rehearsal as a plan check: a section with the numbers, findings for jobs
that can never run (e.g. declared by a program that skipped resolve_job)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import shipped_plan
from tests.jobs.helpers import EFA_POOL, GPU_POOL, target
from trainforge.core.contract import Declared, DeclaredJob, TeamQuota
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan import check_types as T
from trainforge.plan import core
from trainforge.plan import registry as C
from trainforge.plan.checks import scheduling
from trainforge.plan.runner import Inventory


def _ctx(*jobs: DeclaredJob) -> T.PlanContext:
    inv = Inventory(project="p", stack="s", resources=[])
    return T.PlanContext(
        inventory=inv, objects=[], declared=Declared(contracts=[], jobs=list(jobs))
    )


def _declared(spec, tgt) -> DeclaredJob:
    return DeclaredJob(spec=spec, target=tgt, emitted=None, resource_name=f"job-x-{spec.name}")


def test_registered_and_waivable():
    assert scheduling.check in [c.run for c in C.CHECKS]
    assert scheduling.RULE in core.known_rule_ids()


@pytest.fixture(scope="module")
def dev():
    return shipped_plan("dev")


def test_dev_plan_is_clean_and_shows_the_numbers(dev):
    assert not [v for v in dev.failing if v.rule == scheduling.RULE]
    (section,) = [s for s in dev.sections if s.title == "Scheduling rehearsal"]
    text = "\n".join(section.lines)
    # the number: a 4-vCPU node has 3920m allocatable, 3600m after the DaemonSets
    # (3610m before the EKS node monitoring agent's 10m joined them: docs/reliability.md)
    assert "g4dn.xlarge: allocatable 3920m / 14481Mi / 29 pods -> left for jobs 3600m" in text
    assert "research/gpt-small-fsdp on gpu-workloads: 2 pod(s)" in text
    job = {j["job"]: j for j in section.data["jobs"]}["research/gpt-small-fsdp"]
    assert job["podsPerNode"] == {"g4dn.xlarge": 1, "g5.xlarge": 1}
    assert job["nodesNeeded"] == 2 and not job["problems"]


def test_a_job_that_skipped_resolve_job_is_a_finding():
    tgt = target(replace(EFA_POOL, max_nodes=4), quota=TeamQuota())
    ok = resolve_job(
        parse_job({"name": "big", "team": "research", "pool": "efa-p5", "efa": False}, "j"),
        tgt,
        "j",
    )
    too_many = ok.model_copy(update={"workers": 8})  # what resolve_job would have refused
    result = scheduling.check(_ctx(_declared(too_many, tgt)))
    (finding,) = result.findings
    assert finding.rule == scheduling.RULE
    assert finding.resource == "job team-research/big"
    assert "need 8 nodes, but managed node group 'efa-p5' has maxSize 4" in finding.message
    assert "job-x-big" in finding.names
    (section,) = result.sections
    assert any(line.startswith("  CANNOT RUN: 8 pod(s) must run at once") for line in section.lines)


def test_a_pod_bigger_than_what_the_node_leaves_is_a_finding():
    tgt = target(GPU_POOL)
    ok = resolve_job(parse_job({"name": "j", "team": "research", "pool": "x"}, "j"), tgt, "j")
    result = scheduling.check(_ctx(_declared(ok.model_copy(update={"cpu": "48"}), tgt)))
    (finding,) = result.findings
    assert "needs cpu 48000m, g5.12xlarge: 48 vCPU - 190m kubelet reservation" in finding.message


def test_a_job_over_the_team_quota_is_a_finding():
    tgt = target(GPU_POOL, quota=TeamQuota(gpus="4"))
    ok = resolve_job(parse_job({"name": "j", "team": "research", "pool": "x"}, "j"), tgt, "j")
    result = scheduling.check(_ctx(_declared(ok.model_copy(update={"workers": 2}), tgt)))
    assert [f.message.split(": ", 1)[1] for f in result.findings] == [
        "2 pod(s) need gpus 8 but the team quota is 4"
    ]


def test_a_job_on_nodes_of_unknown_size_is_a_finding_not_a_pass():
    unknown = replace(GPU_POOL, instance_types=("x9.mystery",), nodes=(), vcpus_per_node=None)
    tgt = target(GPU_POOL)
    ok = resolve_job(parse_job({"name": "j", "team": "research", "pool": "x"}, "j"), tgt, "j")
    result = scheduling.check(_ctx(_declared(ok, replace(tgt, pool=unknown))))
    (finding,) = result.findings
    assert finding.rule == scheduling.UNREHEARSED
    assert finding.resource == "job team-research/j"
    assert (
        "pool 'gpu-workloads': the pool's node sizes are unknown (instance types "
        in finding.message
    )
    assert "x9.mystery), so whether 1 pod(s) of cpu " in finding.message
    assert finding.message.endswith("fit was not rehearsed")
    (section,) = result.sections
    assert "  node sizes unknown: nothing to rehearse against" in section.lines
    assert any(line.startswith("  NOT REHEARSED: job team-research/j") for line in section.lines)
    assert scheduling.UNREHEARSED in core.known_rule_ids()


def test_a_contract_without_jobs_still_shows_its_pools_with_their_bounds():
    from trainforge.core.contract import PlatformContract, PoolLimits

    karpenter = replace(GPU_POOL, limits=PoolLimits(gpus=8))
    unbounded = replace(GPU_POOL, name="open")
    contract = PlatformContract(
        pools={"efa-p5": EFA_POOL, "gpu-workloads": karpenter, "open": unbounded}, teams={}
    )
    inv = Inventory(project="p", stack="s", resources=[])
    ctx = T.PlanContext(inventory=inv, objects=[], declared=Declared(contracts=[contract], jobs=[]))
    (section,) = scheduling.check(ctx).sections
    heads = [line.split(":")[0] for line in section.lines if line.startswith("pool ")]
    assert heads == [
        "pool efa-p5 (node-group; maxSize 16)",
        "pool gpu-workloads (karpenter; limits nvidia.com/gpu 8)",
        "pool open (karpenter; limits none)",
    ]
    assert section.data["jobs"] == []


def test_quota_lines_show_fractions_of_a_cpu_and_whole_numbers():
    tgt = target(GPU_POOL)
    ok = resolve_job(parse_job({"name": "j", "team": "research", "pool": "x"}, "j"), tgt, "j")
    result = scheduling.check(
        _ctx(_declared(ok.model_copy(update={"cpu": "500m", "workers": 3}), tgt))
    )
    (quota,) = [line for line in result.sections[0].lines if "quota:" in line]
    assert quota.startswith("  team research quota: gpus 12 of 64, cpu 1.5 of 1000 cores, memory ")


def test_a_cpu_job_asks_for_no_gpu_and_an_unset_quota_shows_a_dash():
    from tests.jobs.helpers import CPU_POOL

    tgt = target(CPU_POOL, quota=TeamQuota(cpu="100"))
    job = resolve_job(
        parse_job(
            {"name": "c", "team": "research", "pool": "cpu", "cpu": "2", "memory": "4Gi"}, "c"
        ),
        tgt,
        "c",
    )
    result = scheduling.check(_ctx(_declared(job, tgt)))
    assert not result.findings
    lines = result.sections[0].lines
    assert "team-research/c on training-workloads: 1 pod(s) x (cpu 2, memory 4Gi)" in lines
    (quota,) = [line for line in lines if "quota:" in line]
    assert quota == (
        "  team research quota: gpus 0 (no limit), cpu 2 of 100 cores, memory 4Gi (no limit), "
        "pods 1 (no limit)"
    )
    (team,) = [line for line in lines if line.startswith("team research, all its jobs")]
    assert team == (
        "team research, all its jobs at once (informational): gpus 0 (no limit), cpu 2 of 100 "
        "cores, memory 4Gi (no limit), pods 1 (no limit)"
    )
    assert result.sections[0].data["jobs"][0]["request"]["gpus"] == 0
    assert any(line.startswith("  c5.4xlarge: allocatable ") for line in lines)
    assert any(line.startswith("  m5.4xlarge: allocatable ") for line in lines)
    assert (
        "  pods per node: c5.4xlarge 6, m5.4xlarge 7; all at once: 1 NodeClaim(s) of 1 pod(s) on "
        "c5.4xlarge or m5.4xlarge; "
        in next(line for line in lines if line.startswith("  pods per node"))
    )


def test_a_job_exactly_at_the_team_quota_fits():
    tgt = target(GPU_POOL, quota=TeamQuota(gpus="4"))
    ok = resolve_job(parse_job({"name": "j", "team": "research", "pool": "x"}, "j"), tgt, "j")
    result = scheduling.check(_ctx(_declared(ok, tgt)))  # 1 pod x 4 GPUs: all of it
    assert not result.findings
    assert "  team research quota: gpus 4 of 4" in "\n".join(result.sections[0].lines)


def test_nothing_declared_is_no_section():
    inv = Inventory(project="p", stack="s", resources=[])
    ctx = T.PlanContext(inventory=inv, objects=[], declared=None)
    assert scheduling.check(ctx) == T.CheckResult()


def test_every_pool_is_listed_once_whatever_repeats_before_it():
    gpu_t, efa_t = target(GPU_POOL), target(EFA_POOL)
    gpu_job = resolve_job(
        parse_job({"name": "g", "team": "research", "pool": "x"}, "g"), gpu_t, "g"
    )
    efa_job = resolve_job(
        parse_job({"name": "e", "team": "research", "pool": "efa-p5", "efa": False}, "e"),
        efa_t,
        "e",
    )
    again = gpu_job.model_copy(update={"name": "g2"})
    jobs = (_declared(gpu_job, gpu_t), _declared(again, gpu_t), _declared(efa_job, efa_t))
    result = scheduling.check(_ctx(*jobs))  # gpu-workloads twice, then efa-p5
    heads = [line for line in result.sections[0].lines if line.startswith("pool ")]
    assert [h.split(" (")[0] for h in heads] == ["pool gpu-workloads", "pool efa-p5"]


def test_quota_figures_never_print_in_exponent_form():
    """prod's vision team may hold 29,020Gi: the line said "2.902e+04Gi"."""
    from fractions import Fraction

    from trainforge.plan.checks.scheduling import _of

    line = _of("memory", Fraction(3379 * 2**30, 10), "29020Gi")
    assert line == "memory 337.9Gi of 29,020Gi", line
    assert _of("memory", Fraction(16 * 2**30), "311.1Gi").endswith("of 311.1Gi")


def test_prod_scheduling_names_the_instance_type_of_each_figure_as_the_cost_table_does(
    repo_root,
):
    """prod's gpu-workloads pool has g5.12xlarge (1 pod of 4 GPUs a node) and g5.48xlarge (2):
    the rehearsal said "all at once: 1 node(s)" (a g5.48xlarge) beside "cpu at least 96" (two
    g5.12xlarge) while the cost table said g5.12xlarge x2. Both now read Karpenter's packing:
    one NodeClaim of both pods, on g5.48xlarge."""
    prod = shipped_plan("prod")
    (section,) = [s for s in prod.sections if s.title == "Scheduling rehearsal"]
    i = section.lines.index(
        next(ln for ln in section.lines if ln.startswith("vision/gpt-350m-fsdp on"))
    )
    line = section.lines[i + 1]
    # one model (trainforge.jobs.packing): the NodeClaim Karpenter makes, which the cost prices
    assert "all at once: 1 NodeClaim(s) of 2 pod(s) on g5.48xlarge; " in line, line
    assert "cpu 192 of unlimited" in line and "nvidia.com/gpu 8 of 64" in line, line
    assert "node(s)" not in line and "at least" not in line
    cost = next(
        ln for s in prod.sections for ln in s.lines if "gpt-350m-fsdp: pool gpu-workloads" in ln
    )
    job = {j["job"]: j for j in section.data["jobs"]}["vision/gpt-350m-fsdp"]
    assert job["nodeClaims"] == [{"pods": 2, "types": ["g5.48xlarge"]}]
    assert "1 NodeClaim(s) of 2 pod(s) on g5.48xlarge" in cost and "g5.48xlarge x1 $" in cost
