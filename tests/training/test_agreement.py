"""The final agreement check can fail: each rank's own replica (DDP) or local shard (FSDP)
is compared, and a disagreement ends the run with ranks_disagree (exit 5), not success."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from runtime_helpers import BASE, run_ranks_raw, summary

from trainforge.training import agreement, exits, faults


def test_a_digest_changes_with_any_value_and_only_with_it() -> None:
    t = torch.randn(5, 3)
    d = agreement.tensor_digest(t)
    assert agreement.tensor_digest(t.clone()) == d
    for i in range(t.numel()):
        u = t.clone()
        u.view(-1)[i] = torch.nextafter(u.view(-1)[i], torch.tensor(1e9))  # one ulp
        assert agreement.tensor_digest(u) != d, i
    swapped = t.clone()
    swapped[[0, 1]] = t[[1, 0]]  # same values, other places
    assert agreement.tensor_digest(swapped) != d
    assert agreement.tensor_digest(t.to(torch.bfloat16))[0] == "torch.bfloat16"


def test_shard_slices_follow_torch_chunk_with_empty_tails() -> None:
    full = torch.arange(5.0)
    assert [s.tolist() for s in agreement.shard_slices(full, 2)] == [[0, 1, 2], [3, 4]]
    assert [s.shape[0] for s in agreement.shard_slices(full, 4)] == [2, 2, 1, 0]
    assert [s.shape[0] for s in agreement.shard_slices(torch.zeros(2, 3), 4)] == [1, 1, 0, 0]


A = ("torch.float32", (2,), 1, 1)
B = ("torch.float32", (2,), 1, 2)


@pytest.mark.parametrize(
    ("gathered", "problems"),
    [
        ([({"w": A}, {}), ({"w": A}, {})], []),
        ([({"w": A}, {}), ({"w": B}, {})], ["w: rank 1's replica differs from rank 0's"]),
        ([({"w": A}, {"w": [A, B]}), ({"w": B}, {"w": [A, B]})], []),
        (
            [({"w": A}, {"w": [A, B]}), ({"w": A}, {"w": [A, B]})],
            ["w: rank 1's own shard differs from the copy its peers gathered"],
        ),
        (
            [({"w": A}, {"w": [A, B]}), ({"w": B}, {"w": [A, A]})],
            [
                "w: rank 1 gathered other values than rank 0",
            ],
        ),
    ],
    ids=["replicas-agree", "replica-differs", "shards-agree", "shard-differs", "views-differ"],
)
def test_compare_names_each_disagreement(gathered, problems) -> None:
    verdict = agreement.compare(gathered)
    assert verdict.problems == problems and verdict.agree is (not problems)


def test_corrupt_is_a_valid_fault_armed_only_on_its_rank() -> None:
    spec = {faults.FAULT_ENV: "1:0:CORRUPT"}
    assert faults.corrupt_hook(0, spec) is None
    hook = faults.corrupt_hook(1, spec)
    own = {"empty": torch.zeros(0), "w": torch.zeros(3)}
    hook(own)
    assert own["w"].tolist() == [1.0, 0.0, 0.0]
    assert faults.corrupt_hook(1, {**spec, "TORCHELASTIC_RESTART_COUNT": "1"}) is None


RUN = [*BASE, "--steps", "4", "--log-every", "2", "--batch-size", "8"]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_rank_whose_parameters_differ_fails_the_run(strategy: str, tmp_path: Path) -> None:
    """The mutation: rank 1's replica (DDP) or local shard (FSDP) changed. Before, FSDP
    compared data every rank had gathered (never different) and DDP exited 0 anyway."""
    args = [*RUN, "--strategy", strategy, "--output-dir", str(tmp_path / "bad")]
    results = run_ranks_raw(2, args, TRAINFORGE_TEST_FAULT="1:0:CORRUPT")
    for rank, (code, out) in enumerate(results):
        assert code == exits.RANKS_DISAGREE.code == 5, f"rank {rank}: {out[-3000:]}"
        assert "trainforge exit: ranks_disagree code=5" in out
    assert "rank 1's " in results[0][1]
    assert summary(tmp_path / "bad")["ranks_agree"] is False
    # and the same run without the fault agrees and succeeds
    args = [*RUN, "--strategy", strategy, "--output-dir", str(tmp_path / "good")]
    for code, out in run_ranks_raw(2, args):
        assert code == 0, out[-3000:]
    assert summary(tmp_path / "good")["ranks_agree"] is True
