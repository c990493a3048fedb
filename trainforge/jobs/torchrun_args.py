"""torchrun's command line, read the way torchrun's own parser reads it.

Why: the plan (a job's world size, plan/job_view.py) and `trainforge import` (the processes per
worker of a torchrun command, jobs/importer.py) both read torchrun's options; each used to pick
them out by hand and they disagreed (`--nproc_per_node`, torchrun's other spelling, was read by
one only). This is the one reader.

The options are those of `torch.distributed.run.get_args_parser()` (torch 2.13.0, the wheel
pinned in the venv; tests/jobs/test_torchrun_args.py builds torch's parser and proves the table
and the reading equal on a table of argvs): argparse's rules, so `--opt value` and
`--opt=value`, `-rVALUE` for the one-letter options, the last of a repeated option wins, a
unique prefix stands for the option (Python 3.11's argparse: a prefix two spellings share is
ambiguous and refused), `--` or the first other word ends the options (the script, then its
arguments, untouched). An option torchrun's parser does not know, or one left without its
value, is `refused` (torchrun would exit with a usage error). Values are kept as written:
their types are not checked (a rendered `--node-rank=$(RANK)` is expanded by Kubernetes before
torchrun reads it). An option not given falls back,
as torchrun's `env` action does, to the `PET_<NAME>` environment variable.

Standard library only: plan and jobs read it, and torch is not imported.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Options that take a value: option string -> dest (argparse's name, PET_<DEST> in the env).
VALUE_OPTIONS: dict[str, str] = {
    "--nnodes": "nnodes",
    **{f"--{s}": d for d in (
        "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf",
        "max_restarts", "monitor_interval", "start_method", "event_log_handler", "log_dir",
        "local_ranks_filter", "duplicate_stdout_filters", "duplicate_stderr_filters",
        "node_rank", "master_addr", "master_port", "local_addr", "logs_specs", "numa_binding",
        "signals_to_handle", "shutdown_timeout",
    ) for s in (d.replace("_", "-"), d)},
    "--role": "role",
    "-r": "redirects",
    "--redirects": "redirects",
    "-t": "tee",
    "--tee": "tee",
}  # fmt: skip
# Switches (argparse nargs=0): option string -> dest.
SWITCHES: dict[str, str] = {
    "--standalone": "standalone",
    "-m": "module",
    "--module": "module",
    **{f"--{s}": d for d in ("no_python", "run_path", "virtual_local_rank")
       for s in (d.replace("_", "-"), d)},
}  # fmt: skip
# torch.distributed.launch (the deprecated launcher) adds one switch to the same parser.
LEGACY_SWITCHES: dict[str, str] = {"--use-env": "use_env", "--use_env": "use_env"}
HELP = ("-h", "--help")
# Value options whose default is not read from PET_<DEST> (plain argparse store actions).
NO_ENV = frozenset({"logs_specs", "numa_binding"})

# A program that runs torchrun's parser on the arguments after it.
_MODULES = ("torch.distributed.run", "torch.distributed.launch", "trainforge.training.launch")
_PYTHON = re.compile(r"^(?:/[\w./-]*/)?python(?:3(?:\.\d+)?)?$")
_PYTHON_SWITCHES = ("-u", "-B", "-O", "-OO", "-E", "-s")
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's negative-number look


@dataclass(frozen=True)
class TorchrunArgs:
    """What torchrun's parser makes of its arguments."""

    options: dict[str, str | bool] = field(default_factory=dict)  # dest -> value; switches True
    script: list[str] = field(default_factory=list)  # the script (or module) and its arguments
    refused: str = ""  # why torchrun's parser would exit instead ("" when it would not)

    def value(self, dest: str, env: Mapping[str, str] | None = None) -> str | None:
        """An option's value: given, else PET_<DEST> from `env` (torchrun's `env` action)."""
        given = self.options.get(dest)
        if isinstance(given, str):
            return given
        if dest in NO_ENV or env is None:
            return None
        return env.get(f"PET_{dest.upper()}")


def _launcher(argv: Sequence[str]) -> tuple[list[str], bool] | None:
    """(the arguments torchrun's parser reads, whether it is the legacy launcher's)."""
    if not argv:
        return None
    if posixpath.basename(argv[0]) == "torchrun":
        return list(argv[1:]), False
    if not _PYTHON.match(argv[0]):
        return None
    i = 1
    while i < len(argv) and argv[i] in _PYTHON_SWITCHES:
        i += 1
    if i + 1 < len(argv) and argv[i] == "-m" and argv[i + 1] in _MODULES:
        return list(argv[i + 2 :]), argv[i + 1] == "torch.distributed.launch"
    return None


def launcher_args(argv: Sequence[str]) -> list[str] | None:
    """The arguments torchrun's parser reads when `argv` starts torchrun (`torchrun ...`,
    `python -m torch.distributed.run ...` or `.launch ...`, trainforge's launcher `python -m
    trainforge.training.launch ...`); None for any other command."""
    found = _launcher(argv)
    return found[0] if found else None


def read(argv: Sequence[str]) -> TorchrunArgs | None:
    """A whole command's torchrun reading; None when the command does not start torchrun."""
    found = _launcher(argv)
    if found is None:
        return None
    return parse(found[0], LEGACY_SWITCHES if found[1] else {})


def _option(token: str, extra: Mapping[str, str]) -> tuple[str, str | None] | None:
    """(option string, attached value or None) for a token naming a known option, in the order
    Python 3.11's argparse (`_parse_optional`) tries: the whole token, `name=value`, a unique
    prefix (`--nnode`, or `-r3` for a one-letter option with its value); None when unknown or
    ambiguous."""
    known = {**VALUE_OPTIONS, **SWITCHES, **extra, **dict.fromkeys(HELP, "help")}
    if token in known:
        return token, None
    name, eq, attached = token.partition("=")
    if eq and name in known:
        return name, attached
    if token.startswith("--"):
        hits = [o for o in known if o.startswith("--") and o.startswith(name)]
        return (hits[0], attached if eq else None) if len(hits) == 1 else None
    if token[:2] in known and len(token) > 2:
        return token[:2], token[2:]
    return None


def _positional(token: str, extra: Mapping[str, str]) -> bool:
    """argparse reads this word as the script, not as an option."""
    if not token.startswith("-") or token == "-":
        return True
    if _option(token, extra) is not None:
        return False
    return bool(_NEGATIVE.match(token)) or " " in token


def parse(args: Sequence[str], extra: Mapping[str, str] | None = None) -> TorchrunArgs:
    """Read torchrun's arguments (the words after `torchrun`); `extra`: more switches
    (option string -> dest), as the legacy launcher's."""
    extra = extra or {}
    switches = {**SWITCHES, **extra}
    options: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return TorchrunArgs(options, list(args[i + 1 :]))
        if _positional(tok, extra):
            return TorchrunArgs(options, list(args[i:]))
        hit = _option(tok, extra)
        if hit is None:
            return TorchrunArgs(options, [], f"unrecognized or ambiguous option {tok}")
        opt, attached = hit
        if opt in HELP:
            return TorchrunArgs(options, [], f"{tok} prints the help and exits")
        if opt in switches:
            if attached is not None:
                return TorchrunArgs(options, [], f"{opt} takes no value")
            options[switches[opt]] = True
        elif attached is not None:
            options[VALUE_OPTIONS[opt]] = attached
        else:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is None or nxt == "--" or not _positional(nxt, extra):
                return TorchrunArgs(options, [], f"{tok} expects one value")
            options[VALUE_OPTIONS[opt]] = nxt
            i += 1
        i += 1
    return TorchrunArgs(options, [], "no training script")
