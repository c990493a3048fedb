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
from pathlib import Path
from typing import Any, NoReturn

USAGE = (
    "trainforge run-local [--workers N] [--max-restarts N] [training flags]\n"
    "       trainforge run-local (SCRIPT | -m MODULE | pkg.mod:func) [--workers N] "
    "[--max-restarts N] [--pod-restarts N] [--dry-run] [-- ARGS]\n"
    "       trainforge run-local --stack STACK [--program FILE] JOB [overrides]\n"
    "       trainforge run-local --stack STACK JOB [--workers N] [--max-restarts N] "
    "[--volume CLAIM=DIR] [args for your code]"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainforge run-local",
        usage=USAGE,
        description="Launch `python -m trainforge.training` with torchrun on this machine "
        "(CPU: gloo; GPUs: NCCL, each worker on its own GPU). Every other flag is a training flag: "
        "see `python -m trainforge.training --help`.",
        add_help=False,
    )
    p.add_argument(
        "-h", "--help", action="store_true", help="show this help and the training flags"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes (ranks) to start on this machine (default 1; on GPUs at most one per GPU)",
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        help="torchrun restarts of the whole worker group after a failure (resume from the "
        "latest checkpoint with --checkpoint-dir)",
    )
    p.add_argument(
        "--pod-restarts",
        type=int,
        default=0,
        help="re-create the local pod up to N times, as the cluster re-creates a job's pods: "
        "after a retryable exit (>= 128; a --stack job: the exits its backend's controller "
        "re-creates a pod for, by its restartPolicy: OnFailure any failure, Never none) "
        "(default 0; with --stack the job's budget)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command instead of running it"
    )
    return p


def torchrun_command(workers: int, max_restarts: int, training_args: list[str]) -> list[str]:
    from trainforge.jobs.local import launcher

    return [*launcher(workers, max_restarts), "-m", "trainforge.training", *training_args]


def child_env(workers: int) -> dict[str, str]:
    """Split this machine's cores between the workers (torchrun would force 1 thread each);
    mark the processes as run-local's (contract.RUN_LOCAL)."""
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(workers, 1)))
    env.setdefault("PYTHONUNBUFFERED", "1")
    from trainforge.training.contract import RUN_LOCAL

    env[RUN_LOCAL] = "1"  # the pods' stand-in: CPU where CUDA sees no GPU, even on a GPU box
    return env


# The warnings each job of the last program run logged about itself (its memory estimate
# near the GPU's, ...), by job name: run-local shows the chosen job's (show_job_warnings).
_JOB_WARNINGS: dict[str, list[str]] = {}
# The program runs' Inventory (what `trainforge plan` reads), by (project, stack, program),
# for `internet_notes`.
_PLANNED: dict[tuple[str, str, str | None], Any] = {}


def program_jobs(stack: str, project_dir: Any = ".", program: str | None = None) -> list[Any]:
    """The jobs a Python program declares (resolved on the platform's contract), by running
    it as `trainforge plan` does (offline, mocks). [] for a project without a Pulumi program
    when no `program` is named.

    The program's warnings are not echoed: most are the platform's (alert receivers, team
    quotas), which mean nothing to a run on this machine; each job's own (the lines its
    TrainingJob logs, DeclaredJob.warnings) are kept for `show_job_warnings`."""
    root = Path(project_dir).resolve()
    if program is None and not (
        (root / "__main__.py").is_file() and (root / "Pulumi.yaml").is_file()
    ):
        return []

    from trainforge.core.errors import JobConfigError
    from trainforge.plan.runner import ProjectError, run_project, tune_gc

    tune_gc()  # the program's run is a plan's: its objects live to its end, as in `plan`

    if program is not None:
        from trainforge.jobs.spec import project_relative

        if not (root / project_relative(program, "--program", "a Python file")).is_file():
            raise JobConfigError("--program", program, f"no such file in the project {root}")
    try:
        inv = run_project(root, stack, program=program, echo_warnings=False)
    except ProjectError as e:
        raise JobConfigError("--stack", stack, str(e)) from None
    except Exception as e:  # noqa: BLE001 - a config error the program raised, as plan reads it
        from trainforge.plan.runner import find_config_error

        err = find_config_error(e)
        if err is None:
            raise
        raise JobConfigError("--stack", stack, str(err)) from None
    _JOB_WARNINGS.clear()
    _PLANNED[(str(root), stack, program)] = inv
    for dj in inv.declared.jobs:  # the plan's lines of the job, as its component logged them
        _JOB_WARNINGS[dj.spec.name] = list(dj.warnings)
    return [dj.spec for dj in inv.declared.jobs]


def show_job_warnings(job_name: str) -> None:
    """Print (once) the warnings the program logged about JOB, as Pulumi would show them."""
    for warning in _JOB_WARNINGS.pop(job_name, []):
        print(warning, file=sys.stderr, flush=True)


def planned_context(stack: str, project_dir: Any = ".", program: str | None = None) -> Any:
    """What `trainforge plan` judges (its PlanContext) of the stack's program run offline,
    from the run `program_jobs` already made in this process if it made one; None for a
    project without a Pulumi program. run-local's and `trainforge import`'s egress reading."""
    key = (str(Path(project_dir).resolve()), stack, program)
    if key not in _PLANNED:
        program_jobs(stack, project_dir, program)
    inv = _PLANNED.get(key)
    if inv is None:
        return None
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.manifests import k8s_objects

    return PlanContext(inventory=inv, objects=k8s_objects(inv), declared=inv.declared)


def internet_notes(stack: str, job: Any, program: str | None = None) -> list[str]:
    """One line per download JOB's code makes from the internet where its namespace's
    NetworkPolicies block it, read as `trainforge plan` reads it (TRAINFORGE_INTERNET_FETCH:
    plan/checks/fetches.internet_fetches, submitted.open_egress) from the stack's program run
    offline: this machine may reach the internet, its pods do not. [] without a program.

    The code is read first (`jobs.local.job_fetches`, every download, no volume counted): the
    program runs (seconds) only when it downloads, and not again when run-local ran it."""
    from trainforge.jobs.local import job_fetches

    if not job_fetches(job, ".", f"{stack}: {job.name}", staged=False):
        return []
    ctx = planned_context(stack, ".", program)
    if ctx is None:
        return []
    from dataclasses import replace

    from trainforge.jobs.entrypoint import USER_CODE_MOUNT
    from trainforge.jobs.fetches import cluster_note
    from trainforge.plan.checks.fetches import internet_fetches, s3_refusal
    from trainforge.plan.checks.submitted import open_egress

    jobs = ctx.declared.jobs
    spaces = {dj.target.team.namespace for dj in jobs if dj.spec.name == job.name}
    code_dir = job.entrypoint.code_dir if job.entrypoint is not None else None
    out = []
    for o in ctx.objects:
        if o.namespace not in spaces or o.obj_name != job.name:
            continue
        found = internet_fetches(ctx, o)[0]
        if not found or open_egress(ctx, o.namespace) is not None:
            continue
        for f in found:
            where = f.where
            if code_dir and where.startswith(USER_CODE_MOUNT + "/"):  # the project's file
                where = f"{code_dir.rstrip('/')}/{where[len(USER_CODE_MOUNT) + 1 :]}"
            s3 = s3_refusal(ctx, f) if f.bucket else None
            out.append(cluster_note(job.name, replace(f, where=where), o.namespace, s3))
    return list(dict.fromkeys(out))


def is_resolved(job: Any) -> bool:
    """Whether the pool-dependent defaults (GPUs and processes per pod, restartPolicy,
    backend) are filled in, as `wiring.resolve_job` does for the emitters."""
    return (
        job.gpus_per_worker is not None
        and job.procs_per_worker is not None
        and job.restart_policy is not None
        and job.backend is not None
    )


def resolved_job(job: Any, stack: str, program: str | None = None) -> Any:
    """JOB as the stack's program resolves it against its pool and team (the spec the
    emitters render): an unset gpusPerWorker takes the pool's GPUs per node, processes per
    pod follow, restartPolicy and the backend get the platform's defaults. run-local starts
    exactly those ranks with that restart budget (trainforge.jobs.restarts.launch_line).

    The program runs under the plan's mocks (offline, a few seconds). Without a program
    (a stack file alone), the job stays as declared and a note says what is assumed."""
    if is_resolved(job):
        show_job_warnings(job.name)
        return job
    for spec in program_jobs(stack, ".", program):
        if spec.name == job.name:
            show_job_warnings(job.name)
            return spec
    print(
        f"run-local: {job.name}: no Pulumi program here (__main__.py, or --program FILE) to "
        "resolve the job against its pool: an unset gpusPerWorker counts as 1 process per pod",
        file=sys.stderr,
        flush=True,
    )
    return job


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
        "--pod-restarts",
        type=int,
        default=None,
        help="re-creations of the local pod after an exit the job's controller re-creates a "
        "pod for (default: the job's budget)",
    )
    p.add_argument(
        "--volume",
        action="append",
        default=[],
        metavar="CLAIM=DIR",
        help="a local directory standing for one of the job's claims (default "
        "./runs/JOB/volumes/CLAIM) or the team's FSx, fsx-TEAM (default ./runs/JOB/fsx)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    return p


def pop_program(argv: list[str]) -> tuple[str | None, list[str]]:
    """(`--program FILE`, the other arguments): the Python program that declares the job
    when it is not in stack config (default: the project's __main__.py)."""
    from trainforge.core.errors import JobConfigError

    for i, arg in enumerate(argv):
        if arg == "--program":
            if i + 1 >= len(argv):
                raise JobConfigError("--program", None, "expected a Python file of the project")
            return argv[i + 1], argv[:i] + argv[i + 2 :]
        if arg.startswith("--program="):
            return arg.split("=", 1)[1], argv[:i] + argv[i + 1 :]
    return None, list(argv)


def run_user_code(stack: str, job_name: str, rest: list[str], job: Any = None) -> int:
    """`run-local --stack STACK JOB` for a job with an entrypoint (its own code)."""
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.local import find_job, success_ranks, user_code_run

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
        job = job or find_job(stack, job_name, declared=program_jobs)
        show_job_warnings(job.name)
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
    from trainforge.jobs.restarts import launch_line, local_budget

    b = local_budget(job, max_restarts=ns.max_restarts, pod_restarts=ns.pod_restarts)
    line = launch_line(job, b)
    gpus = job.gpus_per_worker or 0
    return _launch_user_code(
        job.name, f"{run.workers} process(es)", line, run, b, gpus, image=job.image, job=job,
        success=success_ranks(job, run.workers),
    )  # fmt: skip


def _launch_user_code(
    what: str,
    processes: str,
    line: str,
    run: Any,
    budget: Any,
    gpus: int = 0,
    image: str | None = None,
    job: Any = None,
    success: int = 0,
) -> int:
    """Say what runs where, with its launch line (`budget`'s: the plan's for a stack's job,
    restarts.adhoc_line for an ad-hoc target), then launch it: the one ending of both
    user-code paths. `job`: a stack's job, whose backend's controller decides which exits
    re-create its pod (restarts.outcome); an ad-hoc target has none."""
    from trainforge.jobs.local import (
        code_snapshot,
        code_writes,
        cpu_pool_no_gpu,
        from_here_line,
        launch,
        pod_only_line,
        read_only_line,
        record_read_only,
    )

    shipped = f"the shipped copy in {run.code_dir}" if run.code_dir else "this environment"
    print(f"run-local: {what}: {processes} running {shipped}", flush=True)
    print(f"run-local: {what}: {line}", flush=True)
    _where_things_go(run.env)
    if run.from_here:
        print(from_here_line(run.from_here, image), file=sys.stderr, flush=True)
    if run.pod_only:
        print(pod_only_line(run.pod_only), file=sys.stderr, flush=True)
    before = code_snapshot(run.code_dir) if run.code_dir else None
    started = time.time()
    code = launch(
        run.command,
        run.env,
        run.cwd,
        recreations=budget.local_recreations,
        on=budget.on,
        gpus=gpus,
        outcome=_outcome_of(job),
        capped=budget.capped,
        cpu_pool=cpu_pool_no_gpu(job) if job is not None else None,
        success_ranks=success,
        job=job,
    )
    # A write in the working directory fails in the pods (a read-only mount), so a run that
    # made one is not the pods' run: said, and a success becomes the pods' exit 1.
    writes = code_writes(run.code_dir, before) if before is not None else []
    if writes:
        print(read_only_line(writes, code), file=sys.stderr, flush=True)
        record_read_only(run.env, started, writes)  # the pods' end, for `report` too
        return code or 1
    return code


def _outcome_of(job: Any) -> Any:
    """What `job`'s controller does after an exit code (restarts.outcome), for the local
    pod's re-creation loop; None for no job (an ad-hoc run: the operator's rule)."""
    if job is None:
        return None
    from trainforge.jobs.restarts import outcome

    return lambda code: outcome(job, code)


def _where_things_go(env: dict[str, str]) -> None:
    """Say where the contract's directories are, and how to get a report (docs/jobs.md)."""
    from trainforge.training import contract as c

    out = env.get(c.OUTPUT_DIR, "")
    print(
        f"run-local: checkpoints in {env.get(c.CHECKPOINT_DIR)}, outputs in {out}; "
        f"metrics: append JSON lines to {out}/metrics.jsonl (MetricsReporter does); "
        f"afterwards: python -m trainforge report {out}",
        flush=True,
    )


_OWN_VALUED = ("--workers", "--max-restarts", "--pod-restarts")


def split_adhoc_argv(argv: list[str]) -> tuple[str, bool, list[str], list[str]] | None:
    """(target, is a module, run-local's own flags, the program's args) of `run-local SCRIPT
    | -m MODULE | pkg.mod:func ...`; None for the bundled runtime's flags or `--stack`.

    run-local's own flags (--workers, --max-restarts, --pod-restarts, --dry-run) may come
    before or after the target; every other argument, and all after `--`, is the program's."""
    own: list[str] = []
    rest: list[str] = []
    target: str | None = None
    module = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            if target is None:
                return None
            rest += argv[i + 1 :]
            break
        if arg in _OWN_VALUED and i + 1 < len(argv):
            own += argv[i : i + 2]
            i += 2
            continue
        if arg.split("=", 1)[0] in _OWN_VALUED or arg == "--dry-run":
            own.append(arg)
        elif target is None:
            if arg == "--stack" or arg.startswith("--stack="):
                return None
            if arg == "-m" and i + 1 < len(argv):
                target, module = argv[i + 1], True
                i += 2
                continue
            if arg.startswith("-"):
                return None  # a training flag: the bundled runtime
            target = arg
        else:
            rest.append(arg)
        i += 1
    return None if target is None else (target, module, own, rest)


def run_adhoc(target: str, module: bool, own: list[str], args: list[str]) -> int:
    """`run-local SCRIPT | -m MODULE | pkg.mod:func` without a stack file: the same launcher,
    contract variables, run ledger and report as a job's own code (jobs.local.adhoc_job)."""
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.fetches import cluster_note, without_stack
    from trainforge.jobs.local import (
        adhoc_job,
        adhoc_target,
        check_run_dir,
        claim_run_dir,
        job_fetches,
        success_ranks,
        user_code_run,
    )

    p = argparse.ArgumentParser(prog="trainforge run-local SCRIPT", add_help=False)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--max-restarts", type=int, default=0)
    p.add_argument("--pod-restarts", type=int, default=0)
    p.add_argument("--dry-run", action="store_true")
    ns = p.parse_args(own)
    for flag, value in (("--max-restarts", ns.max_restarts), ("--pod-restarts", ns.pod_restarts)):
        if value < 0:
            print(
                f"trainforge run-local: error: {flag}: got {value}; expected >= 0", file=sys.stderr
            )
            return 2
    try:
        job, project = adhoc_job(target, module=module, workers=ns.workers, project_dir=".")
        run_dir, owner = project / "runs" / job.name, adhoc_target(target, module, project)
        check_run_dir(run_dir, owner)  # another script's folder: refused before any write
        run = user_code_run(
            job,
            project,
            workers=ns.workers,
            max_restarts=ns.max_restarts,
            extra_args=args,
            where="run-local",
            prepare=not ns.dry_run,
            controller=False,  # no stack, no controller: its processes are told nothing
        )
        # what its code downloads, which a team namespace's pods cannot (no stack: the
        # platform's own policies), said before it runs as `--stack` says it
        fetched = without_stack(job_fetches(job, project, "run-local"))
        if not ns.dry_run:
            claim_run_dir(run_dir, owner)
    except JobConfigError as e:
        print(f"trainforge run-local: error: {e}", file=sys.stderr)
        return 2
    what = f"-m {target}" if module else target
    for f in fetched:
        print(cluster_note(what, f), file=sys.stderr, flush=True)
    if ns.dry_run:
        print(f"(cd {run.cwd} && {' '.join(run.command)})")
        return 0
    from trainforge.jobs.restarts import adhoc_budget, adhoc_line

    # one local torchrun of every rank, with this run's own budget (no stack: no pods)
    b = adhoc_budget(ns.max_restarts, ns.pod_restarts)
    line = adhoc_line(run.workers, b)
    world = f"{run.workers} process(es) (world {run.workers})"
    # no stack, no controller: rank 0's process ends the run (`success_ranks(None)`), said so
    return _launch_user_code(what, world, line, run, b, success=success_ranks(None, run.workers))


def training_config(training_args: list[str], workers: int) -> Any:
    """The runtime's config from run-local's training flags, or a ValueError naming the bad
    flag in one line (not the runtime's 15-line usage under another program's name)."""
    from trainforge.training.config import (
        ConfigError,
        build_parser,
        check_world,
        config_from_namespace,
        validate,
    )

    parser = build_parser("trainforge run-local")

    def refuse(message: str) -> NoReturn:
        if "unrecognized arguments" in message and "--volume" in training_args:
            message += " (--volume CLAIM=DIR is for a --stack job that runs your own code)"
        raise ConfigError(f"{message}; see `trainforge run-local --help`")

    parser.error = refuse  # type: ignore[method-assign]
    cfg = validate(config_from_namespace(parser.parse_args(training_args)))
    check_world(cfg, workers)
    return cfg


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    adhoc = split_adhoc_argv(argv)
    if adhoc is not None:  # your own code, no stack file
        return run_adhoc(*adhoc)
    on = "retryable"  # which exits re-create the local pod (a job's budget with --stack)
    stack_job = None  # the job of `--stack STACK JOB` (the bundled runtime), to print its line
    # `--stack STACK JOB` expands to the job's own flags from Pulumi.<stack>.yaml (jobs area).
    if any(a == "--stack" or a.startswith("--stack=") for a in argv):
        from trainforge.core.errors import JobConfigError
        from trainforge.jobs.local import find_job, local_argv_for_job, split_stack_argv

        try:
            program, argv = pop_program(argv)
            found = split_stack_argv(argv)
            if found is not None:
                job = find_job(found[0], found[1], ".", program, declared=program_jobs)
                job = resolved_job(job, found[0], program)
                for note in internet_notes(found[0], job, program):
                    print(note, file=sys.stderr, flush=True)
                if job.entrypoint is not None:
                    return run_user_code(*found, job=job)
                argv = local_argv_for_job(found[0], found[1], ".", job) + found[2]
                stack_job = job
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
    if ns.pod_restarts < 0:
        parser.error(f"--pod-restarts must be >= 0, got {ns.pod_restarts}")
    if stack_job is not None:  # after the flags: one the user adds wins, and the line says so
        from trainforge.jobs.restarts import launch_line, local_budget

        b = local_budget(stack_job, max_restarts=ns.max_restarts, pod_restarts=ns.pod_restarts)
        print(f"run-local: {stack_job.name}: {launch_line(stack_job, b)}", flush=True)
        on = b.on

    try:
        cfg = training_config(training_args, ns.workers)
    except ValueError as e:
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
    if stack_job is not None:  # told what its controller does after an exit, as its pods are
        from trainforge.jobs.restarts import on_exit
        from trainforge.training.contract import ON_EXIT

        env[ON_EXIT] = on_exit(stack_job)
    # torchrun as the job's pods run it (trainforge.training.torchrun_env): the whole
    # --grace-period to checkpoint after a SIGTERM, a fresh store per restart
    from trainforge.training.torchrun_env import torchrun_env

    for name, value in torchrun_env(cfg.checkpoint.grace_period).items():
        env.setdefault(name, value)
    from trainforge.jobs.local import launch, success_ranks

    capped = stack_job is not None and b.capped  # run-local's own cap, not the cluster's
    # the job ends by its backend's rule, as a job of your own code does (no stack: rank 0's)
    return launch(
        cmd, env, recreations=ns.pod_restarts, on=on, outcome=_outcome_of(stack_job),
        capped=capped, success_ranks=success_ranks(stack_job, ns.workers), job=stack_job,
    )  # fmt: skip
