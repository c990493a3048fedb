"""The job model: what to run, where and how big, independent of any Kubernetes object.

`JobSpec` is what a user declares (in Python or under `trainforge:jobs` in stack config). Its
keys, types, defaults, bounds and cross-key rules are declared once, in the stack model
(`trainforge.stack.jobs.JobModel`, which `JobSpec` is). Emitters, one per backend
(`pytorchjob.py`: Kubeflow v1 PyTorchJob, `trainjob.py`: Kubeflow Trainer v2 TrainJob,
`indexed_job.py`: a plain indexed batch/v1 Job), turn a *resolved* spec plus the platform wiring
(`contract.JobTarget`) into objects; `backend` only picks the emitter.

`parse_job(raw, where)` accepts the stack-config dict (camelCase keys; the snake_case attribute
names also, so Python callers can pass keyword-style dicts) and raises `JobsError` (a
`StackError` and a `JobConfigError`) with every problem, one line each, naming `where.<key>`,
the bad value and what is valid. Unknown keys are errors with a "did you mean": a typo such as
`gpuPerWorker` must not silently fall back to a default at GPU prices.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, get_args

from trainforge.core.errors import JobConfigError
from trainforge.stack.base import problem, validate
from trainforge.stack.jobs import (
    CheckpointSpec,
    ElasticSpec,
    EntrypointSpec,
    JobModel,
    JobsError,
    ModelFlags,
    Priority,
    RunPolicySpec,
    Topology,
    duplicate_names,
    project_relative,
)

JobSpec = JobModel
PRIORITIES = get_args(Priority)
TOPOLOGY_MODES = get_args(Topology)

__all__ = [
    "CheckpointSpec",
    "ElasticSpec",
    "EntrypointSpec",
    "JobSpec",
    "JobsError",
    "ModelFlags",
    "RunPolicySpec",
    "parse_job",
    "parse_jobs",
    "project_relative",
    "validate_jobs",
]


def _with_function(raw: Any, where: str, errors: list[str]) -> Any:
    """A Python function entrypoint (the Python API only) as the program it ships."""
    entry = raw.get("entrypoint") if isinstance(raw, dict) else None
    if not isinstance(entry, dict) or not callable(entry.get("function")):
        return raw
    from trainforge.jobs.pyfunction import ship_function

    entry = dict(entry)
    fn = entry.pop("function")
    try:
        filename, source = ship_function(
            fn, entry.pop("function_args", None), f"{where}.entrypoint.function"
        )
    except JobConfigError as e:
        errors.append(str(e))
        return None
    entry["function"] = {"name": fn.__name__, "files": ((filename, source),)}
    return {**raw, "entrypoint": entry}


def _job(raw: Any, where: str, errors: list[str]) -> JobSpec | None:
    """One job validated, each of its problems appended to `errors` (None when any)."""
    if raw is None:
        # a stray `-` in the YAML list: refused, never dropped (the plan would be CLEAN
        # without the job the user meant to declare)
        errors.append(
            f"{where}: got null (a `-` with nothing after it); expected a job (a mapping "
            "with name, team, pool, ...): delete the stray `-` or fill in the job"
        )
        return None
    raw = _with_function(raw, where, errors)
    if raw is None:
        return None
    job = validate(JobModel, raw, where, errors)
    if job is not None and job.image_facts is not None:
        from trainforge.jobs.image_facts import declared

        job = job.model_copy(update={"image_facts": declared(job.image_facts)})
    return job


def parse_job(raw: Any, where: str = "job") -> JobSpec:
    """Parse one job declaration; raises JobsError with every problem, each naming
    `where.<key>`."""
    errors: list[str] = []
    job = _job(raw, where, errors)
    if job is None:
        raise JobsError(errors)
    return job


def validate_jobs(raw: Any, where: str, errors: list[str]) -> list[JobSpec | None]:
    """Every job of the `trainforge:jobs` list (None where it is bad), each problem appended
    to `errors`: one bad job does not hide the problems of the others."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(problem(where, raw, "a list of jobs"))
        return []
    jobs = [_job(item, f"{where}[{i}]", errors) for i, item in enumerate(raw)]
    # names as written also for a job with other problems: its duplicate name is reported in
    # the same run, not once the rest is fixed
    named = [
        (i, j if j is not None else _as_written(item))
        for i, (j, item) in enumerate(zip(jobs, raw, strict=True))
    ]
    valid = [(i, j) for i, j in named if j is not None]
    for i, name, expected in duplicate_names(valid, where):
        errors.append(problem(f"{where}[{i}].name", name, expected))
    return jobs


def _as_written(item: Any) -> Any:
    """A bad job's team and name as written (None when either is not a string)."""
    if not isinstance(item, dict):
        return None
    team, name = item.get("team"), item.get("name")
    if isinstance(team, str) and isinstance(name, str):
        return SimpleNamespace(team=team, name=name)
    return None


def parse_jobs(raw: Any, where: str = "trainforge:jobs") -> list[JobSpec]:
    """Parse the `trainforge:jobs` list; names must be unique per team (one namespace).
    Raises JobsError with the problems of every job."""
    errors: list[str] = []
    jobs = validate_jobs(raw, where, errors)
    if errors:
        raise JobsError(errors)
    return [j for j in jobs if j is not None]


# --- a Python function as the program ------------------------------------------------------


def function_job(
    name: str,
    fn: Any,
    team: str,
    pool: str,
    *,
    function_args: dict[str, Any] | None = None,
    **kwargs: Any,
) -> JobSpec:
    """A job that calls `fn(**function_args)` in every process, as the Kubeflow SDK's
    `CustomTrainer(func=...)` does: its source and what it uses are shipped (see
    `trainforge.jobs.pyfunction`), the distributed environment is set (RANK, WORLD_SIZE,
    MASTER_ADDR, ... and the trainforge contract), and the function initialises its process
    group itself (or calls `trainforge.training.init_distributed()`)."""
    entry = {"function": fn, "function_args": function_args}
    return parse_job(
        {"name": name, "team": team, "pool": pool, "entrypoint": entry, **kwargs}, name
    )
