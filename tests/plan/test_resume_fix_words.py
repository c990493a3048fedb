"""TF_CKPT_CANNOT_RESUME's fix names a directory that is what it says: `checkpoints/<namespace>/
<job>-v2` lands beside the job's default checkpoint directory, and a bare `v2` at the mount's
root (a newcomer's review: "set checkpoint.dir to a new directory" and `dir: v2` put the job's
checkpoints at /fsx/v2, shared by any job naming v2)."""

from __future__ import annotations

from tests.jobs.helpers import GPU_POOL, target
from trainforge.jobs.entrypoint import checkpoint_dir
from trainforge.jobs.spec import parse_job
from trainforge.plan.checks import resume


def test_the_fix_s_directories_land_where_it_says():
    t = target(GPU_POOL)
    default = checkpoint_dir(
        parse_job({"name": "j", "team": "research", "pool": "gpu-workloads"}, "job"), t
    )
    fix = resume.RULES[resume.RULE]
    assert "checkpoints/<namespace>/<job>-v2 sits beside the default" in fix
    beside = f"checkpoints/{t.namespace}/j-v2"
    spec = parse_job({"name": "j", "team": "research", "pool": "gpu-workloads",
                      "checkpoint": {"dir": beside}}, "job")  # fmt: skip
    assert checkpoint_dir(spec, t) == default + "-v2"
    bare = parse_job({"name": "j", "team": "research", "pool": "gpu-workloads",
                      "checkpoint": {"dir": "v2"}}, "job")  # fmt: skip
    assert "a bare v2 is <mount>/v2" in fix and checkpoint_dir(bare, t) == f"{t.fsx_mount_path}/v2"
