"""A Pulumi program that declares its jobs in Python instead of stack config.

Use it as a project's `__main__.py`, or name it: `trainforge plan --stack dev --program
examples/python_jobs/program.py` and `trainforge run-local --stack dev --program
examples/python_jobs/program.py fn-hello` find its jobs as they find `trainforge:jobs` entries
(docs/jobs.md, "Jobs declared in Python").
"""

import os

import pulumi

from trainforge.jobs.component import TrainingJob
from trainforge.jobs.declare import declare_jobs
from trainforge.platform.config import load_config
from trainforge.platform.training_platform import TrainingPlatform


def hello(steps: int = 3) -> None:
    """Every rank adds its rank; rank 0 writes what the group saw."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank())])
    for _ in range(steps):
        dist.all_reduce(total)
    if dist.get_rank() == 0:
        out = os.environ["TRAINFORGE_OUTPUT_DIR"]
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "hello.txt"), "w") as f:
            f.write(f"world={dist.get_world_size()} steps={steps} total={total.item():g}\n")
    dist.destroy_process_group()


platform = TrainingPlatform("platform", load_config())
# the stack's own `trainforge:jobs` too: a program that replaces __main__.py declares them
# itself, or `pulumi up` would not create them (the plan warns when a program leaves them out)
stack_jobs = declare_jobs(platform.contract, pulumi.Config("trainforge").get_object("jobs"))
job = TrainingJob.function(
    "fn-hello",
    hello,
    {"team": "research", "pool": "training-workloads", "workers": 2},
    function_args={"steps": 2},
    contract=platform.contract,
)
pulumi.export("jobs", [j.job_name for j in stack_jobs] + [job.job_name])
