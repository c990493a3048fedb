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


@pytest.mark.parametrize(
    "t",
    [
        torch.tensor([True, False, True]),
        torch.tensor([1, 2, 3], dtype=torch.uint8),
        torch.tensor([1, 2, 3], dtype=torch.int16),
        torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
        torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16),
    ],
    ids=str,
)
def test_every_width_of_dtype_is_digested_bit_for_bit(t) -> None:
    d = agreement.tensor_digest(t)
    assert d[0] == str(t.dtype) and d[1] == (3,)
    u = t.clone()
    u[1] = ~u[1] if t.dtype == torch.bool else u[1] + 1
    assert agreement.tensor_digest(u) != d
    assert agreement.tensor_digest(t.clone()) == d


class _Shard:
    def __init__(self, dim: int, shard: bool = True) -> None:
        self.dim, self._shard = dim, shard

    def is_shard(self) -> bool:
        return self._shard


class _Mesh:
    def __init__(self, n: int) -> None:
        self.n = n

    def size(self) -> int:
        return self.n


class _DTensorLike:
    def __init__(self, placements, mesh) -> None:
        self.placements, self.device_mesh = placements, mesh


@pytest.mark.parametrize(
    ("t", "sharded"),
    [
        (_DTensorLike((_Shard(0),), _Mesh(2)), True),
        (_DTensorLike((_Shard(1),), _Mesh(2)), False),  # other dim: slices unknown
        (_DTensorLike((_Shard(-1),), _Mesh(2)), False),
        (_DTensorLike((_Shard(0, shard=False),), _Mesh(2)), False),  # replicated
        (_DTensorLike((_Shard(0), _Shard(0)), _Mesh(2)), False),  # 2-D mesh
        (_DTensorLike((_Shard(0),), _Mesh(1)), False),  # not the whole world
        (_DTensorLike((_Shard(0),), _Mesh(4)), False),
        (_DTensorLike((), _Mesh(2)), False),
        (_DTensorLike((_Shard(0),), None), False),
        (torch.zeros(2), False),  # a plain tensor
    ],
)
def test_only_a_dim_0_shard_over_the_world_is_sliced(t, sharded) -> None:
    assert agreement._sharded_over_world(t, 2) is sharded


def test_a_one_value_tensor_and_swaps_anywhere_change_the_digest() -> None:
    assert agreement.tensor_digest(torch.tensor([1.0])) != agreement.tensor_digest(
        torch.tensor([2.0])
    )
    t = torch.randn(200)
    d = agreement.tensor_digest(t)
    for i, j in ((0, 2), (1, 3), (100, 150), (0, 199)):  # same parity, far apart
        u = t.clone()
        u[[i, j]] = t[[j, i]]
        assert agreement.tensor_digest(u) != d, (i, j)


def test_shard_slices_follow_torch_chunk_with_empty_tails() -> None:
    full = torch.arange(5.0)
    assert [s.tolist() for s in agreement.shard_slices(full, 2)] == [[0, 1, 2], [3, 4]]
    assert [s.shape[0] for s in agreement.shard_slices(full, 4)] == [2, 2, 1, 0]
    assert [s.shape[0] for s in agreement.shard_slices(torch.arange(4.0), 2)] == [2, 2]
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
        # a DTensor not sliced per rank (one whole view): only the views are compared
        ([({"w": A}, {"w": [B]}), ({"w": B}, {"w": [B]})], []),
        # each inequality with the other order of the two digests (A sorts before B), and
        # equal digests that are distinct objects (as all_gather_object delivers them)
        ([({"w": B}, {}), ({"w": A}, {})], ["w: rank 1's replica differs from rank 0's"]),
        ([({"w": A}, {}), ({"w": tuple(list(A))}, {})], []),
        (
            [({"w": A}, {"w": [A, A]}), ({"w": B}, {"w": [A, A]})],
            ["w: rank 1's own shard differs from the copy its peers gathered"],
        ),
        ([({"w": A}, {"w": [A, B]}), ({"w": tuple(list(B))}, {"w": [A, B]})], []),
        (
            [({"w": A}, {"w": [A, A]}), ({"w": A}, {"w": [A, B]})],
            ["w: rank 1 gathered other values than rank 0"],
        ),
    ],
    ids=[
        "replicas-agree",
        "replica-differs",
        "shards-agree",
        "shard-differs",
        "views-differ",
        "whole-view",
        "replica-differs-lower",
        "replicas-equal-copies",
        "shard-differs-higher",
        "shards-equal-copies",
        "views-differ-higher",
    ],
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


def test_check_in_process_sees_a_local_shard_change_under_fsdp(one_rank_group) -> None:
    """fully_shard over a 1-rank world: the gathered slice and the own shard are read at
    two moments; a change in between is a disagreement, named per parameter."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    fully_shard(model)
    ok = agreement.check(model, 0, 1)
    assert (ok.agree, ok.problems, ok.checked) == (True, [], 4)
    bad = agreement.check(model, 0, 1, faults.corrupt_hook(0, {faults.FAULT_ENV: "0:0:CORRUPT"}))
    assert bad.problems == ["0.weight: rank 0's own shard differs from the copy its peers gathered"]
    assert bad.detail == f"ranks disagree on the final parameters: {bad.problems[0]}"


def test_check_counts_buffers_as_replicas(one_rank_group) -> None:
    model = torch.nn.BatchNorm1d(3)  # weight, bias; buffers running_mean/var, batches
    verdict = agreement.check(model, 0, 1)
    assert verdict.agree and verdict.checked == 5


def test_detail_names_three_problems_and_counts_the_rest() -> None:
    v = agreement.Agreement(False, [f"p{i}" for i in range(5)], 5)
    assert v.detail == "ranks disagree on the final parameters: p0; p1; p2 (and 2 more)"
    three = agreement.Agreement(False, ["p0", "p1", "p2"], 3)
    assert three.detail == "ranks disagree on the final parameters: p0; p1; p2"
    four = agreement.Agreement(False, ["p0", "p1", "p2", "p3"], 4)
    assert four.detail == "ranks disagree on the final parameters: p0; p1; p2 (and 1 more)"
    six = agreement.Agreement(False, [f"p{i}" for i in range(6)], 6)
    assert six.detail == "ranks disagree on the final parameters: p0; p1; p2 (and 3 more)"
