"""A checkpoint never ends a job: a failed async save falls back (or is skipped, said once,
loudly), a failed sync save is retried, then exits `checkpoint_failed` (204, restartable).

Why: on torch 2.11 the second async save raised `KeyError: <class 'type'>` inside DCP's
`StateDictStager`; the runtime reported `user_error` ("permanent: fix the error in the
traceback") and the job stopped. Each test runs the real loop in this process (one gloo rank)
with one DCP call made to fail the way it did.
"""

from __future__ import annotations

import pytest

from trainforge.training import checkpoint as ckpt_mod
from trainforge.training import exits
from trainforge.training.__main__ import main
from trainforge.training.layout import CheckpointError, CheckpointSaveError, inspect_checkpoint

ARGS = ["--model", "mlp", "--dataset-size", "256", "--batch-size", "8", "--warmup-steps", "1"]
ARGS += ["--steps", "8", "--checkpoint-every", "2", "--log-every", "2", "--keep-last", "0"]


def _run(tmp_path, *extra: str) -> int:
    return main([*ARGS, "--checkpoint-dir", str(tmp_path / "ckpt"), "--output-dir",
                 str(tmp_path / "out"), *extra])  # fmt: skip


def _fail_on_call(n: int, exc: BaseException, real):
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise exc
        return real(*args, **kwargs)

    return wrapper, calls


@pytest.fixture(autouse=True)
def _thread_writer(monkeypatch):
    # DCP's checkpoint process would re-import pytest's __main__; its thread stages the same
    monkeypatch.setattr(ckpt_mod, "WRITER_PROCESS", False)
    monkeypatch.setattr(ckpt_mod, "RETRY_DELAY_S", 0.0)


@pytest.mark.parametrize("where", ["launch", "staging"])
def test_an_async_save_that_raises_on_its_second_call_leaves_the_job_finishing_with_exit_0(
    tmp_path, monkeypatch, capsys, where
) -> None:
    import torch.distributed.checkpoint as dcp

    if where == "launch":
        fake, calls = _fail_on_call(2, KeyError(type), dcp.async_save)
        monkeypatch.setattr(dcp, "async_save", fake)
    else:  # the stager's copy raises (torch 2.11's DefaultStager did, on its second copy)
        fake, calls = _fail_on_call(2, KeyError(type), ckpt_mod._RunStager.stage)
        monkeypatch.setattr(ckpt_mod._RunStager, "stage", fake)
    assert _run(tmp_path, "--async-checkpoint") == 0
    out = capsys.readouterr()
    ckpt = tmp_path / "ckpt"
    # the failed step was saved synchronously; the final checkpoint is there
    for step in (2, 4, 6, 8):
        assert inspect_checkpoint(ckpt / f"step_{step:06d}").complete, step
    assert calls["n"] == 2  # async again after the failure: never
    warnings = [line for line in out.out.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert "async save of step 4 failed before writing (KeyError: <class 'type'>)" in warnings[0]
    assert "saving step 4 synchronously instead" in warnings[0]
    assert "trainforge exit: success code=0" in out.out
    assert "user_error" not in out.out + out.err


def test_an_async_save_that_fails_while_writing_is_skipped_and_said_once(
    tmp_path, monkeypatch, capsys
) -> None:
    from trainforge.training.dcp_writer import TrainforgeWriter

    fake, _ = _fail_on_call(2, OSError(28, "No space left on device"), TrainforgeWriter.finish)
    monkeypatch.setattr(TrainforgeWriter, "finish", fake)
    assert _run(tmp_path, "--async-checkpoint") == 0
    out = capsys.readouterr().out
    ckpt = tmp_path / "ckpt"
    assert not inspect_checkpoint(ckpt / "step_000004").complete  # skipped
    for step in (2, 6, 8):
        assert inspect_checkpoint(ckpt / f"step_{step:06d}").complete, step
    warnings = [line for line in out.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert "async save of step 4 failed while writing" in warnings[0]
    assert "No space left on device" in warnings[0]
    assert "step 4 is NOT saved (the previous checkpoint, step 2, stays the newest)" in warnings[0]


def test_a_failed_sync_save_is_retried_and_training_goes_on(tmp_path, monkeypatch, capsys) -> None:
    import torch.distributed.checkpoint as dcp

    fake, calls = _fail_on_call(2, OSError(5, "Input/output error"), dcp.save)
    monkeypatch.setattr(dcp, "save", fake)
    assert _run(tmp_path) == 0
    out = capsys.readouterr().out
    assert "saving step 4 failed (attempt 1 of 3: OSError: [Errno 5] Input/output error); " \
        "retrying in 0s" in out  # fmt: skip
    assert inspect_checkpoint(tmp_path / "ckpt" / "step_000004").complete
    assert inspect_checkpoint(tmp_path / "ckpt" / "step_000008").complete


def test_a_sync_save_that_keeps_failing_exits_checkpoint_failed_restartable(
    tmp_path, monkeypatch, capsys
) -> None:
    import torch.distributed.checkpoint as dcp

    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(dcp, "save", broken)
    code = _run(tmp_path)
    err = capsys.readouterr().err
    assert code == exits.CHECKPOINT_FAILED.code == 204
    assert exits.CHECKPOINT_FAILED.retryable
    line = err.strip().splitlines()[-1]
    assert line.startswith("trainforge exit: checkpoint_failed code=204 (rank 0, step 2): ")
    assert "failed 3 times; the last: OSError: [Errno 5] Input/output error" in line
    assert "the job restarts" in line and "user_error" not in err


def test_a_save_failure_is_the_platform_s_whatever_it_wraps() -> None:
    """DCP's own CheckpointError (a config error when loading) inside a failed save is still
    the platform's: the save's error is looked at first."""
    try:
        try:
            raise CheckpointError("checkpoint step_000004 did not complete")
        except CheckpointError as inner:
            raise CheckpointSaveError("failed 3 times") from inner
    except CheckpointSaveError as e:
        assert exits.classify(e) is exits.CHECKPOINT_FAILED
    assert exits.classify(CheckpointError("bad --resume")) is exits.CONFIG_ERROR


def test_two_ranks_one_of_whose_staging_fails_both_save_that_step_synchronously(tmp_path):
    """Real 2-rank gloo job (DCP's checkpoint process writes): rank 1's staging copy of step
    4 fails (the test hook STAGE). The ranks agree before any write starts, so neither waits
    for the other in the write's collectives: both save step 4 synchronously, exit 0."""
    from runtime_helpers import BASE, run_ranks_raw

    args = [*BASE, "--steps", "8", "--checkpoint-every", "2", "--log-every", "2", "--keep-last",
            "0", "--async-checkpoint", "--checkpoint-dir", str(tmp_path / "ckpt"),
            "--output-dir", str(tmp_path / "out")]  # fmt: skip
    results = run_ranks_raw(2, args, timeout=300, TRAINFORGE_TEST_FAULT="1:4:STAGE")
    for rank, (code, out) in enumerate(results):
        assert code == 0, f"rank {rank} exited {code}:\n{out[-3000:]}"
    for step in (2, 4, 6, 8):
        assert inspect_checkpoint(tmp_path / "ckpt" / f"step_{step:06d}").complete, step
    own = [ln for ln in results[1][1].splitlines() if "WARNING" in ln]
    assert len(own) == 1 and "failed before writing (KeyError: <class 'type'>)" in own[0]
    peer = [ln for ln in results[0][1].splitlines() if "WARNING" in ln]
    assert len(peer) == 1 and "another rank could not stage its state" in peer[0]
    assert "saving step 4 synchronously instead" in peer[0]


def test_async_saves_stay_async_under_torch_2_11s_self_closing_stager(
    tmp_path, monkeypatch, capsys
) -> None:
    """torch 2.11.0's `DefaultStager._stage` closes its `StateDictStager` after every copy
    (staging.py in the 2.11.0 wheel: `self._state_dict_stager.close()` before returning), so a
    reused one raised `KeyError: <class 'type'>` on its second copy: on an H200 every async save
    after the first fell back to a synchronous one. That behaviour, put back on this torch, must
    leave every save async (the runtime's stager does not close between saves)."""
    from torch.distributed.checkpoint.staging import DefaultStager

    real = DefaultStager._stage

    def stage_then_close_like_torch_2_11(self, state_dict, **kwargs):
        staged = real(self, state_dict, **kwargs)
        self._state_dict_stager.close()
        return staged

    monkeypatch.setattr(DefaultStager, "_stage", stage_then_close_like_torch_2_11)
    from torch.distributed.checkpoint._state_dict_stager import StateDictStager

    closes = {"n": 0}
    real_close = StateDictStager.close

    def counted_close(self):
        closes["n"] += 1
        return real_close(self)

    monkeypatch.setattr(StateDictStager, "close", counted_close)
    assert _run(tmp_path, "--async-checkpoint") == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out, out
    assert "synchronously" not in out
    for step in (2, 4, 6, 8):
        assert inspect_checkpoint(tmp_path / "ckpt" / f"step_{step:06d}").complete, step
    assert closes["n"] == 1  # once, at the end of the run
