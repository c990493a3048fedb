"""A PR's job line names the memory estimate in the job's own unit, the estimates section's.

The `plan --diff` markdown showed mnist-ddp, a CPU job, as "memory per GPU (estimate): 711
MiB (9% of 8.0 GiB)" while the report said "memory per process": both now take the wording
from `jobs.estimate.memory_unit`.
"""

from __future__ import annotations

from tests.jobs.helpers import target
from tests.jobs.test_estimate import A10G, CPU, GPT_350M
from trainforge.jobs.estimate import estimate
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.checks import estimates
from trainforge.plan.job_diff import job_change
from trainforge.plan.job_view import JobView

MLP = {"name": "m", "team": "t", "pool": "cpu", "model": "mlp", "procsPerWorker": 2,
       "memory": "4Gi"}  # fmt: skip


def _line(e, view: JobView) -> tuple[str, str]:
    """(the estimates section's memory line, the PR's) of one estimate, the PR's new side."""
    row = {**estimates._data(e), "job": view.name}
    section = next(x for x in estimates.lines_for(e, view.ident) if "memory per" in x)
    (pr,) = [x for x in job_change(None, view, None, {estimates.TITLE: [row]}, False).lines
             if x.startswith("memory per")]  # fmt: skip
    return section.strip(), pr


def _view(name: str) -> JobView:
    return JobView(f"t/PyTorchJob/{name}", "PyTorchJob", "t", name, "img", ["torchrun"], 1)


def test_a_cpu_jobs_memory_is_per_process_in_the_report_and_the_pr():
    e = estimate(parse_job(MLP), CPU)
    assert e.gpu is None
    section, pr = _line(e, _view("m"))
    assert section.startswith("memory per process: est. ")
    assert pr.startswith("memory per process (estimate): ")


def test_a_gpu_jobs_memory_is_per_gpu_in_both():
    job = resolve_job(parse_job(GPT_350M), target(A10G))
    section, pr = _line(estimate(job, A10G), _view(job.name))
    assert section.startswith("memory per GPU: est. ")
    assert pr.startswith("memory per GPU (estimate): ") and "A10G)" in pr


def test_a_job_that_moves_from_a_cpu_pool_to_a_gpu_pool_says_both_units():
    view = _view("m")
    cpu = {**estimates._data(estimate(parse_job(MLP), CPU)), "job": "m"}
    gpu = {**cpu, "gpu": "A10G", "memory_capacity_bytes": 24 * 2**30}
    lines = job_change(view, view, {estimates.TITLE: [cpu]}, {estimates.TITLE: [gpu]}, False).lines
    (line,) = [x for x in lines if x.startswith("memory per")]
    assert line.startswith("memory per GPU (estimate): ") and " per process → " in line
