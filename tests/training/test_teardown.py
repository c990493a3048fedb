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


INFLIGHT_PROBE = str(ROOT / "tests" / "training" / "inflight_probe.py")


def test_a_failing_rank_ends_without_waiting_for_its_collectives(tmp_path) -> None:
    """A rank that raises with a collective of its own in flight (one its peer, blocked in
    the step's gradient all-reduce, never joins) ends by itself, with its exit line and
    record, and its peer fails with the closed connection (peer_lost). Before, the failing
    rank freed its process groups at exit, and a group's destructor waits for its work: it
    ended only when its peer had exited, or, with the peer alive (torchrun's stop comes
    later), when the group's collective timeout fired (tests/training/inflight_probe.py)."""
    from trainforge.training.checkpoint import scan_checkpoints
    from trainforge.training.timeouts import Timeouts

    hang_timeout = 60  # the least a job may declare: collectives time out after 240 s
    timeout = Timeouts.from_hang_timeout(hang_timeout).collective
    flags = [*BASE, "--steps", "6", "--hang-timeout", str(hang_timeout)]
    flags += ["--output-dir", str(tmp_path / "out"), "--checkpoint-dir", str(tmp_path / "ckpt")]
    flags += ["--checkpoint-every", "1", "--async-checkpoint"]  # step 2's write may be in flight
    results = run_ranks_raw(
        2,
        [str(tmp_path), *flags],
        timeout=timeout + 120,
        entry=(INFLIGHT_PROBE,),
        TRAINFORGE_TEST_FAULT="1:3:ERROR",
    )
    (code0, log0), (code1, log1) = results
    assert "inflight_probe: an all-reduce that no peer joins is in flight" in log1, log1[-3000:]
    assert code1 == 1, log1[-3000:]
    assert "trainforge exit: user_error code=1 (rank 1, step 3)" in log1, log1[-3000:]
    assert code0 == 202, log0[-3000:]
    assert "trainforge exit: peer_lost code=202 (rank 0, step 3)" in log0, log0[-3000:]
    assert "Connection closed by peer" in log0, log0[-3000:]
    record = tmp_path / "ckpt" / ".trainforge" / "exits" / "attempt_0000" / "rank_00001.json"
    assert json.loads(record.read_text())["reason"] == "user_error"
    # the saves of steps 1 and 2 finished (rank 1 joins a write in flight), none half-written
    saved = [(c.step, c.complete) for c in scan_checkpoints(tmp_path / "ckpt")]
    assert saved == [(1, True), (2, True)], saved
    # what ended rank 1: its own exit, while rank 0 still lived, before the all-reduce's
    # collective timeout could end its wait
    peer = json.loads((tmp_path / "peer.json").read_text())
    posted = float((tmp_path / "posted.1").read_text())
    assert peer["rank1_ended"], peer
    assert peer["ended_at"] - posted < timeout, (peer, posted)
