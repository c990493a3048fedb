"""The runtime end to end: real 2-rank gloo jobs (DDP and FSDP2) and single-process runs.

Single-process runs call the entry point in this process (a 1-rank process group), which keeps
the file fast; 2-rank jobs are separate processes, as torchrun would start them.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runtime_helpers import BASE, ROOT, env, losses, run_ranks, summary

from trainforge.training.__main__ import main


@pytest.fixture(autouse=True)
def one_thread():
    """In-process runs get one intra-op thread, like each worker of a 2-worker job on 2 cores
    (an oversubscribed OpenMP pool spins and runs many times slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


DDP_ARGS = [*BASE, "--steps", "40", "--log-every", "10", "--global-batch-size", "32"]


def _close(a: list[float], b: list[float], rel: float = 1e-4) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=rel, abs_tol=1e-6) for x, y in zip(a, b, strict=True)
    )


def _params_close(s1: dict, s2: dict, rel: float = 1e-4) -> None:
    assert s1["param_stats"].keys() == s2["param_stats"].keys()
    for name, (sum1, sq1) in s1["param_stats"].items():
        sum2, sq2 = s2["param_stats"][name]
        assert math.isclose(sq1, sq2, rel_tol=rel), (name, sq1, sq2)
        assert math.isclose(sum1, sum2, rel_tol=1e-3, abs_tol=1e-3 * math.sqrt(sq1)), (
            name,
            sum1,
            sum2,
        )


@pytest.fixture(scope="module")
def ddp_two(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ddp2")
    logs = run_ranks(2, [*DDP_ARGS, "--output-dir", str(out)])
    assert "summary: steps 40" in logs[0]
    assert "summary:" not in logs[1]  # progress is rank 0's alone
    return summary(out)


def test_ddp_two_workers_loss_falls_and_ranks_agree(ddp_two: dict) -> None:
    ls = losses(ddp_two)
    assert len(ls) == 4
    assert ls[-1] < 0.85 * ls[0], ls
    assert ddp_two["ranks_agree"] is True
    assert ddp_two["world_size"] == 2 and ddp_two["global_batch"] == 32
    assert ddp_two["config"]["batch_size"] == 16  # derived from --global-batch-size


def test_ddp_two_workers_match_one_worker_on_the_same_global_batch(
    ddp_two: dict, tmp_path: Path
) -> None:
    assert main([*DDP_ARGS, "--output-dir", str(tmp_path / "one")]) == 0
    one = summary(tmp_path / "one")
    assert one["world_size"] == 1 and one["global_batch"] == 32
    assert _close(losses(one), losses(ddp_two)), (losses(one), losses(ddp_two))
    _params_close(one, ddp_two)
    # and gradient accumulation (2 micro-steps of 16) is the same optimisation again
    assert main([*DDP_ARGS, "--grad-accum", "2", "--output-dir", str(tmp_path / "acc")]) == 0
    acc = summary(tmp_path / "acc")
    assert acc["config"]["batch_size"] == 16
    assert _close(losses(acc), losses(one))
    _params_close(acc, one)


def test_two_worker_run_is_reproducible(ddp_two: dict, tmp_path: Path) -> None:
    run_ranks(2, [*DDP_ARGS, "--output-dir", str(tmp_path)])
    again = summary(tmp_path)
    assert losses(again) == losses(ddp_two)  # exact: same flags, same bits
    assert again["param_stats"] == ddp_two["param_stats"]


def test_ddp_gradient_accumulation_on_two_workers_matches(ddp_two: dict, tmp_path: Path) -> None:
    """no_sync on the first micro-step, all-reduce on the last: same optimisation."""
    run_ranks(2, [*DDP_ARGS, "--grad-accum", "2", "--output-dir", str(tmp_path)])
    acc = summary(tmp_path)
    assert acc["config"]["batch_size"] == 8 and acc["global_batch"] == 32
    assert _close(losses(acc), losses(ddp_two)), (losses(acc), losses(ddp_two))
    _params_close(acc, ddp_two)
    assert acc["ranks_agree"] is True


def test_single_process_is_reproducible_and_seed_matters(tmp_path: Path) -> None:
    args = [*BASE, "--steps", "12", "--log-every", "4", "--batch-size", "16"]
    runs = []
    for i, seed in enumerate(("1", "1", "2")):
        out = tmp_path / str(i)
        assert main([*args, "--seed", seed, "--output-dir", str(out)]) == 0
        runs.append(summary(out))
    assert losses(runs[0]) == losses(runs[1])
    assert runs[0]["param_stats"] == runs[1]["param_stats"]
    assert losses(runs[0]) != losses(runs[2])


def test_fsdp_gpt_two_workers_through_run_local(tmp_path: Path) -> None:
    """run-local -> torchrun -> 2 ranks of FSDP2 (a block per shard unit) on the GPT model,
    with gradient accumulation (gradient sync only on the last micro-step) and recompute."""
    cmd = [
        sys.executable, "-m", "trainforge", "run-local", "--workers", "2",
        "--strategy", "fsdp", "--model", "gpt", "--layers", "2", "--d-model", "32",
        "--heads", "2", "--seq-len", "16", "--vocab-size", "64", "--dataset-size", "512",
        "--batch-size", "4", "--grad-accum", "2", "--steps", "30", "--log-every", "10", "--lr", "1e-2",
        "--warmup-steps", "3", "--activation-checkpointing", "--output-dir", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "fsdp gpt on 2 x cpu" in proc.stdout and "tokens/s" in proc.stdout
    s = summary(tmp_path)
    ls = losses(s)
    assert ls[-1] < 0.8 * ls[0], ls
    assert s["ranks_agree"] is True
    assert s["tokens_per_second"] == pytest.approx(16 * s["samples_per_second"])


def test_token_file_dataset_trains(tmp_path: Path) -> None:
    from array import array

    period = list(range(64))
    tokens = array("H", (period * 200)[: 64 * 200])  # a learnable repeating stream
    path = tmp_path / "tokens.bin"
    path.write_bytes(tokens.tobytes())
    args = [
        "--model", "gpt", "--dataset", "tokens", "--data-path", str(path), "--layers", "1",
        "--d-model", "32", "--heads", "2", "--seq-len", "16", "--vocab-size", "64",
        "--batch-size", "8", "--steps", "20", "--log-every", "5", "--lr", "1e-2",
        "--warmup-steps", "2", "--output-dir", str(tmp_path / "out"),
    ]  # fmt: skip
    assert main(args) == 0
    ls = losses(summary(tmp_path / "out"))
    assert ls[-1] < 0.5 * ls[0], ls


def test_too_short_token_file_fails_clearly(tmp_path: Path, capsys) -> None:
    from array import array

    path = tmp_path / "short.bin"
    path.write_bytes(array("H", range(100)).tobytes())  # 6 sequences of 16+1
    common = ["--model", "gpt", "--dataset", "tokens", "--data-path", str(path), "--seq-len", "16"]
    assert main([*common, "--batch-size", "8", "--vocab-size", "128"]) == 2
    err = capsys.readouterr().err
    assert "token file" in err and "smaller than one global batch of 8" in err
    assert main([*common, "--seq-len", "200", "--vocab-size", "128"]) == 2
    assert "holds 100 tokens, fewer than one sample of --seq-len 200" in capsys.readouterr().err
    assert main([*common, "--batch-size", "2", "--vocab-size", "50"]) == 2
    assert "contains token id 99, not below --vocab-size 50" in capsys.readouterr().err
