"""The runtime frees its process group when training ends: gloo's threads stop in `train`.

Before, the group outlived `destroy_process_group` (held by torch.distributed.nn.functional's
default arguments, by DTensor's caches through FSDP2's mesh, by FSDP2's reference cycles), and
its threads ran on into the interpreter's finalization (trainforge/core/process.py)."""

from __future__ import annotations

import json

import pytest

from tests.training.runtime_helpers import BASE, ROOT, run_ranks_raw

PROBE = str(ROOT / "tests" / "training" / "teardown_probe.py")
ALLREDUCE_PROBE = str(ROOT / "tests" / "training" / "allreduce_probe.py")


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_no_group_thread_outlives_train(strategy: str, tmp_path) -> None:
    prefix = tmp_path / "threads"
    flags = [*BASE, "--steps", "3", "--global-batch-size", "32", "--strategy", strategy]
    results = run_ranks_raw(
        2, [str(prefix), *flags, "--output-dir", str(tmp_path / "out")], timeout=300, entry=(PROBE,)
    )
    for rank, (code, log) in enumerate(results):
        assert code == 0, f"rank {rank}:\n{log[-3000:]}"
        got = json.loads((tmp_path / f"threads.{rank}.json").read_text())
        assert got["code"] == 0, (rank, got)
        # the count can fail: while the group is up its threads are there by these names
        assert "pt_gloo_runloop" in got["during"] and "gloo_tcp_loop" in got["during"], got
        assert got["after"] == [], (rank, got)


def test_the_allreduce_acceptance_test_frees_its_group(tmp_path) -> None:
    """`acceptance.allreduce` tears down with the runtime's `distributed.cleanup` (it called
    `destroy_process_group` itself): once its `main` returns, no gloo or store thread runs."""
    prefix = tmp_path / "threads"
    flags = ["--min-bytes", "1024", "--max-bytes", "4096", "--warmup", "1", "--iters", "2"]
    results = run_ranks_raw(
        2, [str(prefix), *flags, "--timeout", "60"], timeout=120, entry=(ALLREDUCE_PROBE,)
    )
    for rank, (code, log) in enumerate(results):
        assert code == 0, f"rank {rank}:\n{log[-3000:]}"
        got = json.loads((tmp_path / f"threads.{rank}.json").read_text())
        assert got["code"] == 0, (rank, got)
        assert "pt_gloo_runloop" in got["during"] and "gloo_tcp_loop" in got["during"], got
        assert got["after"] == [], (rank, got)
    assert "PASS allreduce" in results[0][1], results[0][1][-3000:]


def test_a_torch_without_a_dtensor_cache_module_skips_it(monkeypatch):
    """The caches are torch's private modules: one a torch version lacks (its import fails) is
    skipped, not an ImportError at the end of a run that has finished."""
    import sys

    import torch.distributed.tensor  # noqa: F401 - the package whose private modules are read

    from trainforge.training import distributed

    monkeypatch.setitem(sys.modules, "torch.distributed.tensor._collective_utils", None)
    monkeypatch.setitem(sys.modules, "torch.distributed.tensor._redistribute", None)
    distributed._clear_dtensor_caches()  # raised ModuleNotFoundError before
