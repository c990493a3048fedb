"""`trainforge run-local --stack dev JOB`: the run-local arguments for a job in stack config.

Reads `Pulumi.<stack>.yaml` with PyYAML only (no Pulumi import, no cloud access) and turns
the job's declaration into the same training flags its pods get, adapted to this machine:
every process of every pod becomes a local worker (CPU, gloo), checkpoints and outputs go
under ./runs/<job>, and the S3 mirror and metrics endpoint are off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainforge.jobs.errors import JobConfigError
from trainforge.jobs.spec import JobSpec, parse_job

CONFIG_KEY = "trainforge:jobs"


def load_stack_jobs(stack: str, project_dir: Path | str = ".") -> list[Any]:
    """The raw `trainforge:jobs` list of Pulumi.<stack>.yaml."""
    import yaml

    path = Path(project_dir) / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise JobConfigError(
            "--stack", stack, f"no stack file {path}; stacks here: {_stacks(Path(project_dir))}"
        )
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    config = doc.get("config") or {}
    jobs = config.get(CONFIG_KEY)
    if isinstance(jobs, dict) and "value" in jobs:  # `pulumi config set --path` object form
        jobs = jobs["value"]
    if jobs is None:
        raise JobConfigError(f"{path}: {CONFIG_KEY}", None, "this stack declares no jobs")
    if not isinstance(jobs, list):
        raise JobConfigError(f"{path}: {CONFIG_KEY}", jobs, "expected a list of jobs")
    return jobs


def _stacks(project_dir: Path) -> str:
    names = sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml")
    )
    return ", ".join(names) or "(none)"


def find_job(stack: str, job_name: str, project_dir: Path | str = ".") -> JobSpec:
    raw = load_stack_jobs(stack, project_dir)
    names = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        names.append(str(name))
        if name == job_name:
            return parse_job(item, f"{CONFIG_KEY}[{i}]")
    raise JobConfigError(
        "JOB", job_name, f"stack {stack!r} declares: {', '.join(names) or '(none)'}"
    )


def local_processes(job: JobSpec) -> int:
    """Pods x processes per pod. Without the pool's facts, an unset gpusPerWorker counts as 1."""
    return job.workers * job.procs


def local_training_flags(job: JobSpec, run_dir: str) -> list[str]:
    """The pod's training flags with local paths; the S3 mirror and metrics are off."""
    from trainforge.jobs.contract import JobTarget, PoolFacts, TeamFacts
    from trainforge.jobs.pytorchjob import training_args

    # A stand-in target: paths are rewritten below, nothing else of it reaches the flags.
    target = JobTarget(team=TeamFacts(name=job.team, namespace="local"), pool=PoolFacts(job.pool))
    args = [str(a) for a in training_args(job, target)]
    replace = {
        "--output-dir": run_dir,
        "--checkpoint-dir": f"{run_dir}/checkpoints",
        "--metrics-port": "0",
    }
    if job.training.data_path:  # a relative data path stays relative to this directory
        replace["--data-path"] = job.training.data_path
    out: list[str] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in replace:
            out += [flag, replace[flag]]
            i += 2
            continue
        if flag == "--compile":  # GPU throughput only; on CPU it just costs compile time
            i += 1
            continue
        out.append(flag)
        i += 1
    return out


def local_argv_for_job(stack: str, job_name: str, project_dir: Path | str = ".") -> list[str]:
    """run-local arguments for JOB of STACK: `--workers N [--max-restarts R] <training flags>`.

    Arguments the user adds after these on the command line win (argparse keeps the last).
    """
    job = find_job(stack, job_name, project_dir)
    argv = ["--workers", str(local_processes(job))]
    if job.elastic is not None:
        argv += ["--max-restarts", str(job.elastic.max_restarts)]
    return argv + local_training_flags(job, f"./runs/{job.name}")


def expand_stack_argv(argv: list[str], project_dir: Path | str = ".") -> list[str]:
    """Replace `--stack STACK JOB` (or `--stack=STACK JOB`) in run-local's argv with the
    job's arguments; the other arguments stay after them so they override. An argv without
    `--stack` is returned unchanged.

    run-local's `main(argv)` calls `argv = expand_stack_argv(argv)` before parsing.
    """
    for i, arg in enumerate(argv):
        if arg == "--stack" or arg.startswith("--stack="):
            if arg == "--stack":
                if len(argv) < i + 3:
                    raise JobConfigError(
                        "--stack", None, "usage: run-local --stack STACK JOB [flags]"
                    )
                stack, job, rest = argv[i + 1], argv[i + 2], argv[:i] + argv[i + 3 :]
            else:
                if len(argv) < i + 2:
                    raise JobConfigError(
                        "--stack", None, "usage: run-local --stack STACK JOB [flags]"
                    )
                stack, job, rest = arg.split("=", 1)[1], argv[i + 1], argv[:i] + argv[i + 2 :]
            if job.startswith("-"):
                raise JobConfigError("JOB", job, "usage: run-local --stack STACK JOB [flags]")
            return local_argv_for_job(stack, job, project_dir) + rest
    return list(argv)
