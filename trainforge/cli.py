"""The `trainforge` command: one dispatcher, each subcommand in the module that owns it.

Subcommands are imported lazily so that `run-local` never pays for importing Pulumi and
`plan` never pays for importing torch.
"""

from __future__ import annotations

import importlib
import os
import sys

# name -> (module with a `main(argv) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run-local": ("trainforge.local", "run a training job on this machine through torchrun"),
    "plan": ("trainforge.plan.cli", "offline plan of a stack: resources, manifests, policy"),
    "report": (
        "trainforge.report",
        "what a run left: attempts, restarts and causes, checkpoints, metrics (text, PNG)",
    ),
    "import": (
        "trainforge.import_cli",
        "a PyTorchJob/TrainJob/indexed Job YAML -> a stack job entry, its files, what changed",
    ),
    "demo": ("trainforge.demo", "what `make demo` runs: short DDP and FSDP jobs and a plan"),
    "acceptance": (
        "trainforge.training.acceptance.cli",
        "judge a GPU pool's acceptance test output (all-reduce, DCGM): pass/fail + numbers",
    ),
    "schema": (
        "trainforge.schema",
        "JSON Schema of Pulumi.<stack>.yaml and the docs' key tables, from the stack model",
    ),
    "calibrate": (
        "trainforge.jobs.estimate.calibrate",
        "feed a GPU run's measured MFU back into the planner's facts",
    ),
    # live jobs, read from the cluster with your kubeconfig (trainforge.live)
    "status": ("trainforge.live.cli:status_main", "a live job: state, queue, pods, progress"),
    "why": ("trainforge.live.cli:why_main", "why a live job waits, restarts or failed"),
    "logs": ("trainforge.live.cli:logs_main", "a live job's pod log (rank 0 by default)"),
    "wait": ("trainforge.live.cli:wait_main", "wait until a job is admitted, running, finished"),
}


# third-party module -> the extra that installs it (pyproject.toml; tests/test_cli.py checks
# each against it), for a command run by an interpreter without it: one line, not a traceback
EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(
        ("pulumi", "pulumi_aws", "pulumi_docker_build", "pulumi_eks", "pulumi_kubernetes")
        + ("pulumi_policy", "pulumi_random", "yaml", "kubernetes_validate", "jsonschema")
        + ("moto", "docker"),
        "platform",
    ),
    "torch": "train",
    "numpy": "train",
    "kubernetes": "status",
    "matplotlib": "report",
    "boto3": "s3",
    "mlflow": "mlflow",
    "pydantic": "",  # a dependency of the package itself
}


def missing_module(command: str, e: ModuleNotFoundError) -> str | None:
    """The one line for a module of ours that is not installed; None for any other (a user
    program's own import keeps its traceback)."""
    top = (e.name or "").split(".")[0]
    if top not in EXTRA_OF_MODULE:
        return None
    extra = EXTRA_OF_MODULE[top]
    install = f"pip install 'trainforge[{extra}]'" if extra else "pip install trainforge"
    return (
        f"trainforge {command}: {top} is not installed for {sys.executable}: run `make venv` "
        f"and use .venv/bin/python (or {install})"
    )


def usage() -> str:
    lines = ["usage: trainforge COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `trainforge COMMAND --help` for a command's flags."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"trainforge: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    target, _, func = COMMANDS[name][0].partition(":")
    try:
        module = importlib.import_module(target)
        return int(getattr(module, func or "main")(rest) or 0)
    except ModuleNotFoundError as e:
        line = missing_module(name, e)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2


def run() -> int:
    """The `trainforge` process's entry (the console script, `python -m trainforge`): main's
    exit code, the heap frozen for a quick exit (trainforge/core/process.py)."""
    from trainforge.core.process import exit_code

    try:
        code = main()
        sys.stdout.flush()  # a reader that left is met here, not at the interpreter's exit
    except BrokenPipeError:
        # the reader of stdout left (`trainforge report RUN | head -3`): stop as a Unix tool
        # does, without a traceback; what was left to print goes nowhere (the recipe of
        # Python's signal module documentation, "Note on SIGPIPE": exit 1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    return exit_code(code)
