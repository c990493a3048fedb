"""A first job as a new user writes it: their own stack in eu-west-1 with one 4-GPU pool, one
team with a 16-GPU quota, a 2-worker 1-GPU job. It is admitted at preview (sized for its GPU,
not the node; the team's GPUs bring their CPU and memory) and priced in dollars.

The issue's user asked for g6.12xlarge, which EC2 does not offer in eu-west-1 (moto 5.2.5's
copy of DescribeInstanceTypeOfferings lists no g6 or g6e there, and neither the SkyPilot
catalog v8 @00148f2a nor instances.vantage.sh's price data has an eu-west-1 row for it): the
preview says so at the pool, with types of the same GPU count that are offered there, and the
first job runs on one of them (g5.12xlarge, 4 x A10G)."""

from __future__ import annotations

from importlib.metadata import version

import pulumi
import pytest

from tests.conftest import ROOT
from trainforge.plan.core import plan_project

OVERRIDES = {
    "aws:region": "eu-west-1",
    "trainforge:nodePools": [{"name": "gpu", "instanceTypes": ["g5.12xlarge"]}],
    "trainforge:teams": [{"name": "vision", "quota": {"gpus": "16"}}],
    "trainforge:jobs": [
        {"name": "first", "team": "vision", "pool": "gpu", "workers": 2, "gpusPerWorker": 1,
         "model": "mlp", "steps": 100, "expectedStepSeconds": 0.5},
    ],
}  # fmt: skip


def test_a_first_gpu_job_is_admitted_and_its_platform_priced():
    result = plan_project(ROOT, "dev", standins=False, config_overrides=OVERRIDES)
    (queues,) = [s for s in result.sections if s.title.startswith("Queue admission")]
    assert queues.lines[0] == "all 1 job(s) are admitted at once"
    (job,) = queues.data
    assert job["state"] == "runs" and not job["borrowing"]
    assert job["sizing"].startswith(
        "1 GPU per pod: g5.12xlarge 1 of 4 (4 pods per node); cpu and memory: 1/4 of what the "
        "smallest node leaves"
    )
    (cost,) = [s for s in result.sections if s.title.startswith("Cost")]
    text = "\n".join(cost.lines)
    assert "EKS control plane" in text and "$0.10" in text
    assert "$0.00/h" not in text
    # the node's on-demand price in eu-west-1 (SkyPilot catalog v8, AWS Price List), in dollars
    (row,) = [ln.split() for ln in cost.lines if ln.strip().startswith("first ")]
    at = row.index("g5.12xlarge")
    assert row[:4] == ["first", "vision", "at", "once"] and row[at + 1 : at + 3] == ["1", "$6.33"]
    assert "16 GPU x $1.583/GPU-h (g5.12xlarge)" in text
    assert not [f for f in result.failing if f.rule.startswith("TRAINFORGE_QUEUE")]


def test_a_type_not_offered_in_the_region_is_an_error_at_the_pool_with_alternatives():
    overrides = {
        **OVERRIDES,
        "trainforge:nodePools": [{"name": "gpu", "instanceTypes": ["g6.12xlarge"]}],
    }
    with pytest.raises(pulumi.RunError) as e:
        plan_project(ROOT, "dev", standins=False, config_overrides=overrides)
    (line,) = [ln for ln in str(e.value).splitlines() if "nodePools" in ln]
    assert line.strip() == (
        "- trainforge:nodePools[0].instanceTypes[0]: got 'g6.12xlarge'; expected an instance "
        "type offered in eu-west-1 (g6.12xlarge is not offered in eu-west-1: moto "
        f"{version('moto')}'s bundled EC2 catalog's instance-type offerings), such as g4dn.12xlarge (4 x T4), g5.12xlarge (4 x A10G), or a region that "
        f"offers g6.12xlarge ({_elsewhere('g6.12xlarge', 'eu-west-1')})"
    )


def _pool_error(pool: dict) -> str:
    """The plan's one error line for `trainforge:nodePools[0]` set to `pool`."""
    overrides = {**OVERRIDES, "trainforge:nodePools": [pool]}
    with pytest.raises(pulumi.RunError) as e:
        plan_project(ROOT, "dev", standins=False, config_overrides=overrides)
    (line,) = [ln for ln in str(e.value).splitlines() if "nodePools" in ln]
    return line.strip()


def test_an_amd_gpu_type_in_a_gpu_pool_is_refused_for_the_catalogs_reason():
    """g4ad (AMD Radeon, no nvidia.com/gpu) in a pool meant for GPUs: the GPU catalog's reason,
    before any offering lookup, never "not offered" (moto has no g4ad at all)."""
    line = _pool_error({"name": "gpu", "instanceTypes": ["g4ad.4xlarge"], "limits": {"gpus": 4}})
    assert line.startswith(
        "- trainforge:nodePools[0].instanceTypes[0]: got 'g4ad.4xlarge'; expected an NVIDIA GPU "
        "type of the GPU catalog for a GPU pool (gpu: true or limits.gpus): the catalog lists no "
        "g4ad family as NVIDIA GPU capacity, so its nodes offer no nvidia.com/gpu to a job"
    ), line
    assert "not offered" not in line and "did not answer" not in line


def test_a_type_the_offline_data_lacks_is_said_to_be_missing_there_not_in_ec2():
    """A CPU pool on a type EC2's own model names but moto's bundled catalog has no facts for:
    the line names the data and its version, not EC2's offerings."""
    line = _pool_error({"name": "cpu", "instanceTypes": ["g4ad.4xlarge"]})
    assert line == (
        "- trainforge:nodePools[0].instanceTypes[0]: got 'g4ad.4xlarge'; expected an instance "
        f"type the offline plan's EC2 data has (moto {version('moto')}'s bundled EC2 catalog has "
        "no g4ad.4xlarge: the plan cannot read its GPUs, vCPUs and memory offline, and cannot "
        "tell whether eu-west-1 offers it; `pulumi up` asks EC2)"
    )


def _elsewhere(instance_type: str, home: str) -> str:
    """The regions of the line, read straight from moto's region tables (the mocks' answer to
    DescribeInstanceTypeOfferings in each region; a region without one is named as one the
    offline data has no table for, not as one that did not answer)."""
    from trainforge.plan.mocks import _region_offerings
    from trainforge.platform.regions import partition_regions

    others = [r for r in partition_regions(home) if r != home]
    offered = [r for r in others if instance_type in (_region_offerings(r) or ())]
    silent = [r for r in others if _region_offerings(r) is None]
    assert offered and len(silent) < len(others) // 4  # moto holds most regions' tables
    data = f"moto {version('moto')}'s bundled EC2 catalog"
    return (
        f"offered in: {', '.join(offered)}; {len(silent)} region(s) {data} has no table for: "
        + (", ".join(silent))
    )
