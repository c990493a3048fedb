"""A first job as a new user writes it: their own stack in eu-west-1 with one g6.12xlarge
pool, one team with a 16-GPU quota, a 2-worker 1-GPU job. It is admitted at preview (sized
for its GPU, not the node; the team's GPUs bring their CPU and memory) and the platform is
priced; the node price is unknown because the pinned AWS price source lists no g6.12xlarge
in eu-west-1, and the plan says that."""

from __future__ import annotations

from tests.conftest import ROOT
from trainforge.plan.core import plan_project

OVERRIDES = {
    "aws:region": "eu-west-1",
    "trainforge:nodePools": [{"name": "gpu", "instanceTypes": ["g6.12xlarge"]}],
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
    assert job["sizing"].startswith("1 of 4 GPUs: 1/4 of what the smallest node (g6.12xlarge)")
    (cost,) = [s for s in result.sections if s.title.startswith("Cost")]
    text = "\n".join(cost.lines)
    assert "EKS control plane" in text and "$0.10" in text
    assert "$0.00/h" not in text
    # AWS's price list (through the pinned catalog) has no g6.12xlarge in eu-west-1: the plan
    # says so instead of a guess
    assert "[skypilot-catalog-v8] lists no offering in eu-west-1" in text
    assert not [f for f in result.failing if f.rule.startswith("TRAINFORGE_QUEUE")]
