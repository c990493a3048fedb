"""jobs/torchrun_args reads torchrun's command line as torchrun's own parser does: the option
table is torch.distributed.run.get_args_parser()'s, and on a table of argvs the reading (the
options given, the script, a refusal) equals what that parser makes of them. The plan cannot
import torch; this test does."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from trainforge.jobs import torchrun_args as T

run = pytest.importorskip("torch.distributed.run")


def _torch_parser() -> argparse.ArgumentParser:
    return run.get_args_parser()


def test_the_option_table_is_torchruns():
    values, switches = {}, {}
    for a in _torch_parser()._actions:
        if not a.option_strings or a.dest == "help":
            continue
        for o in a.option_strings:
            (switches if a.nargs == 0 else values)[o] = a.dest
    assert values == T.VALUE_OPTIONS and switches == T.SWITCHES
    no_env = {a.dest for a in _torch_parser()._actions if type(a).__name__ == "_StoreAction"}
    assert no_env - {"training_script", "training_script_args"} == T.NO_ENV


ARGVS = [
    ["--nnodes=2", "--nproc-per-node=8", "train.py", "--lr", "3"],
    ["--nnodes", "2", "--nproc_per_node", "4", "train.py"],
    ["--nproc_per_node=4", "train.py"],
    ["--nproc-per-node", "2", "--nproc_per_node", "6", "train.py"],  # the last wins
    ["--standalone", "--nnodes=1", "--nproc-per-node=8", "-m", "pkg.train", "--x"],
    ["--nnode", "3", "train.py"],  # a unique prefix
    ["--nproc", "4", "train.py"],  # a prefix both spellings share: ambiguous
    ["--nnodes=1:4", "--max-restarts=3", "--rdzv-backend=c10d", "train.py"],
    ["-r3", "-t", "2", "train.py"],
    ["-r=3", "train.py"],
    ["--bogus", "1", "train.py"],
    ["--nnodes", "train.py"],  # the script taken as the value; then no script
    ["--nnodes"],
    ["--nnodes", "--standalone", "train.py"],
    ["--standalone=1", "train.py"],
    ["--", "train.py", "--nnodes", "9"],
    ["train.py", "--nproc-per-node", "9"],  # the script's own flag, not torchrun's
    ["--node-rank=1", "--master-addr=10.0.0.1", "--master-port", "29500", "train.py"],
    ["-h"],
    ["--rdzv-conf", "-1", "train.py"],
    [],
]


def _torch_reading(args: list[str], env: dict[str, str]) -> tuple[dict, list[str]] | None:
    """torch's parser on `args` (None when it exits): every option's value, the script."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        parser = _torch_parser()
        try:
            with (
                contextlib.redirect_stderr(io.StringIO()),
                contextlib.redirect_stdout(io.StringIO()),
            ):
                ns = parser.parse_args(args)
        except SystemExit:
            return None
    opts = {  # as text: the reader keeps values as written (types are torch's business)
        k: v if isinstance(v, bool) or v is None else str(v)
        for k, v in vars(ns).items()
        if not k.startswith("training_script")
    }
    return opts, [ns.training_script, *ns.training_script_args]


@pytest.mark.parametrize("args", ARGVS, ids=[" ".join(a) or "(none)" for a in ARGVS])
@pytest.mark.parametrize("env", [{}, {"PET_NNODES": "5", "PET_NPROC_PER_NODE": "3"}])
def test_the_reading_is_torchruns(args, env):
    want = _torch_reading(args, env)
    got = T.parse(args)
    assert (want is None) is bool(got.refused), got.refused
    if want is None:
        return
    opts, script = want
    assert got.script == script
    for dest, value in got.options.items():
        assert opts[dest] == value
    for dest in ("nnodes", "nproc_per_node", "rdzv_backend", "max_restarts"):
        assert got.value(dest, env) in (opts[dest], None)
        if got.value(dest, env) is None:
            assert dest not in got.options and f"PET_{dest.upper()}" not in env


@pytest.mark.parametrize(
    ("argv", "args"),
    [
        (["torchrun", "--nnodes=2", "t.py"], ["--nnodes=2", "t.py"]),
        (["/usr/bin/torchrun", "t.py"], ["t.py"]),
        (["python", "-u", "-m", "torch.distributed.run", "t.py"], ["t.py"]),
        (["python3", "-m", "trainforge.training.launch", "--nnodes=1"], ["--nnodes=1"]),
        (["python", "-m", "pkg.train"], None),
        (["python", "t.py"], None),
        (["bash", "-c", "torchrun t.py"], None),
        ([], None),
    ],
)
def test_launcher_args(argv, args):
    assert T.launcher_args(argv) == args


def test_the_legacy_launcher_adds_its_use_env_switch():
    from torch.distributed import launch

    args = ["--use_env", "--nproc_per_node=2", "t.py"]
    ns = launch.parse_args(args)
    got = T.read(["python", "-m", "torch.distributed.launch", *args])
    assert got is not None and not got.refused and got.options["use_env"] is ns.use_env
    assert got.value("nproc_per_node") == ns.nproc_per_node and got.script == ["t.py"]
    assert T.read(["torchrun", *args]).refused  # torchrun itself has no --use_env
