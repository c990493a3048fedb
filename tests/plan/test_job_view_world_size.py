"""A job's world size is read from its command line as torchrun reads it (jobs/torchrun_args):
on a table of argvs the plan's world size equals nnodes (a range's largest) x nproc-per-node
from torch.distributed.run's own parser. The plan does not import torch; this test does."""

from __future__ import annotations

import contextlib
import io

import pytest

from trainforge.plan.job_view import JobView

run = pytest.importorskip("torch.distributed.run")

PODS, PROCS = 3, 4  # what the operator would set (PET_NNODES, PET_NPROC_PER_NODE)


def view(command: list[str], env: dict[str, str] | None = None) -> JobView:
    return JobView(
        ident="ns/PyTorchJob/j", kind="PyTorchJob", namespace="ns", name="j", image="img",
        command=command, pods=PODS, procs_per_pod=PROCS, env=env or {},
    )  # fmt: skip


def torchrun_world_size(args: list[str], env: dict[str, str]) -> int | None:
    """torch's parser, with the operator's PET_* under the container's own env."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"PET_NNODES": str(PODS), "PET_NPROC_PER_NODE": str(PROCS), **env}.items():
            mp.setenv(k, v)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                ns = run.get_args_parser().parse_args(args)
        except SystemExit:
            return None
    try:
        return int(ns.nnodes.split(":")[-1]) * int(ns.nproc_per_node)
    except ValueError:
        return None


TABLE = [
    (["--nnodes=2", "--nproc-per-node=8", "t.py"], {}),
    (["--nnodes=2", "--nproc_per_node=8", "t.py"], {}),  # torchrun's other spelling
    (["--nnodes", "2", "--nproc_per_node", "8", "t.py"], {}),
    (["--nproc-per-node=2", "--nproc_per_node=6", "t.py"], {}),  # the last one wins
    (["--nnodes=1:4", "--nproc-per-node=8", "t.py"], {}),
    (["--standalone", "--nnodes=1", "--nproc-per-node=8", "-m", "pkg.train"], {}),
    (["t.py", "--nproc-per-node=9"], {}),  # the script's flag: the operator's count
    (["--nnode", "5", "t.py"], {}),  # a unique prefix
    (["--nproc", "4", "t.py"], {}),  # ambiguous: torchrun refuses
    (["--nproc-per-node=auto", "t.py"], {}),
    (["t.py"], {"PET_NPROC_PER_NODE": "2"}),  # the container's own env
]


@pytest.mark.parametrize(("args", "env"), TABLE, ids=[" ".join(a) for a, _ in TABLE])
@pytest.mark.parametrize(
    "launcher",
    [["torchrun"], ["python", "-m", "torch.distributed.run"],
     ["python", "-m", "trainforge.training.launch"]],
)  # fmt: skip
def test_world_size_is_torchruns(args, env, launcher):
    assert view([*launcher, *args], env).world_size == torchrun_world_size(args, env)


def test_a_command_without_torchrun_is_the_pods_times_their_processes():
    assert view(["python", "train.py", "--nnodes=9"]).world_size == PODS * PROCS
