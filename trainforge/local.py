"""`trainforge run-local`: run a training job on this machine through torchrun.

Same entry point (`python -m trainforge.training`) and flags as the pods; torchrun's standalone
rendezvous gives one process per worker (through `trainforge.training.launch`, torchrun with
the workers' exit reason as its exit code, like the pods). The training flags are validated here first, so a bad
flag fails before any process starts. Everything the workers print is streamed (rank 0 prints
progress; every rank prints checkpoint/preemption events); the exit status is the job's.

`run-local --stack STACK JOB` of a job with its own code (`entrypoint`) runs that code with the
job's contract instead (`trainforge.jobs.local.user_code_run`); arguments after JOB other than
run-local's own flags are appended to the job's args.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

USAGE = (
    "trainforge run-local [--workers N] [--max-restarts N] [training flags]\n"
    "       trainforge run-local --stack STACK JOB [overrides]\n"
    "       trainforge run-local --stack STACK JOB [--workers N] [--max-restarts N] "
    "[--volume CLAIM=DIR] [args for your code]"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainforge run-local",
        usage=USAGE,
        description="Launch `python -m trainforge.training` with torchrun on this machine "
        "(CPU: gloo; GPUs: NCCL, one worker per GPU). Every other flag is a training flag: "
        "see `python -m trainforge.training --help`.",
        add_help=False,
    )
    p.add_argument(
        "-h", "--help", action="store_true", help="show this help and the training flags"
    )
    p.add_argument(
        "--workers", type=int, default=1, help="processes (ranks) to start on this machine"
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        help="torchrun restarts of the whole worker group after a failure (resume from the "
        "latest checkpoint with --checkpoint-dir)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command instead of running it"
    )
    return p


def torchrun_command(workers: int, max_restarts: int, training_args: list[str]) -> list[str]:
    # trainforge.training.launch is torchrun that exits with the failed workers' reason code
    # (a hang: 201, a bug: 1, ...) instead of torchrun's 1, as the pods do (docs/reliability.md)
    return [
        sys.executable,
        "-m",
        "trainforge.training.launch",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(workers),
        "--max-restarts",
        str(max_restarts),
        "-m",
        "trainforge.training",
        *training_args,
    ]


def child_env(workers: int) -> dict[str, str]:
    """Split this machine's cores between the workers (torchrun would force 1 thread each)."""
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(workers, 1)))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def user_code_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainforge run-local --stack STACK JOB", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local processes (default: pods x processes per pod)",
    )
    p.add_argument(
        "--max-restarts", type=int, default=None, help="torchrun restarts (default: the job's)"
    )
    p.add_argument(
        "--volume",
        action="append",
        default=[],
        metavar="CLAIM=DIR",
        help="a local directory standing for one of the job's claims (default ./runs/JOB/volumes/CLAIM)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    return p


def run_user_code(stack: str, job_name: str, rest: list[str]) -> int:
    """`run-local --stack STACK JOB` for a job with an entrypoint (its own code)."""
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.local import find_job, launch, user_code_run

    parser = user_code_parser()
    ns, extra = parser.parse_known_args(rest)
    if ns.help:
        parser.print_help()
        print("\nOther arguments are appended to the job's entrypoint.args.")
        return 0
    volumes: dict[str, str] = {}
    for item in ns.volume:
        claim, sep, path = item.partition("=")
        if not sep or not claim or not path:
            print(
                f"trainforge run-local: error: --volume {item!r}: expected CLAIM=DIR",
                file=sys.stderr,
            )
            return 2
        volumes[claim] = path
    try:
        job = find_job(stack, job_name)
        run = user_code_run(
            job,
            ".",
            workers=ns.workers,
            max_restarts=ns.max_restarts,
            volumes=volumes,
            extra_args=extra,
            where=f"{stack}: {job_name}",
            prepare=not ns.dry_run,
        )
    except JobConfigError as e:
        print(f"trainforge run-local: error: {e}", file=sys.stderr)
        return 2
    if ns.dry_run:
        print(f"(cd {run.cwd} && {' '.join(run.command)})")
        return 0
    shipped = f"the shipped copy in {run.code_dir}" if run.code_dir else "this environment"
    print(f"run-local: {job.name}: {run.workers} process(es) running {shipped}", flush=True)
    return launch(run.command, run.env, run.cwd)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `--stack STACK JOB` expands to the job's own flags from Pulumi.<stack>.yaml (jobs area).
    if any(a == "--stack" or a.startswith("--stack=") for a in argv):
        from trainforge.core.errors import JobConfigError
        from trainforge.jobs.local import expand_stack_argv, find_job, split_stack_argv

        try:
            found = split_stack_argv(argv)
            if found is not None and find_job(found[0], found[1]).entrypoint is not None:
                return run_user_code(*found)
            argv = expand_stack_argv(argv)
        except JobConfigError as e:
            print(f"trainforge run-local: error: {e}", file=sys.stderr)
            return 2
    parser = build_parser()
    ns, training_args = parser.parse_known_args(argv)
    if ns.help:
        parser.print_help()
        print("\ntraining flags:\n")
        from trainforge.training.config import build_parser as training_parser

        training_parser("trainforge run-local").print_help()
        return 0
    if ns.workers < 1:
        parser.error(f"--workers must be >= 1, got {ns.workers}")
    if ns.max_restarts < 0:
        parser.error(f"--max-restarts must be >= 0, got {ns.max_restarts}")

    from trainforge.training.config import ConfigError, check_world, parse_args

    cfg = parse_args(training_args)  # exits 2 with a clear message on bad training flags
    try:
        check_world(cfg, ns.workers)
    except ConfigError as e:
        print(f"trainforge run-local: error: {e}", file=sys.stderr)
        return 2
    if cfg.run_name is None:  # one name for all ranks and all restart attempts
        name = f"{cfg.model}-{cfg.strategy}-{time.strftime('%Y%m%d-%H%M%S')}"
        training_args = [*training_args, "--run-name", name]
    cmd = torchrun_command(ns.workers, ns.max_restarts, training_args)
    if ns.dry_run:
        print(" ".join(cmd))
        return 0
    env = child_env(ns.workers)
    # checkpoint hook: torchrun SIGKILLs workers this long after relaying a SIGTERM (default
    # 30 s); give them the whole --grace-period to checkpoint, as the PyTorchJob pods do.
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(max(1, round(cfg.grace_period))))
    from trainforge.jobs.local import launch

    return launch(cmd, env)
