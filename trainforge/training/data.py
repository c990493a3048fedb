"""Datasets held as tensors and a data order that is a pure function of the step.

Why no DataLoader: the samples already live in memory (synthetic) or in the page cache
(memory-mapped token file), so a batch is one ``index_select`` -- per-sample ``__getitem__``
calls, collation and worker processes would only add latency.

Order (``ShardedOrder``): like ``DistributedSampler`` with ``set_epoch``, every rank draws the
same permutation of the dataset for epoch ``e`` from ``(seed, e)``; optimizer step ``s`` uses
the ``s``-th block of ``global_batch`` indices in it, and micro-step ``m`` of rank ``r`` takes
slice ``m * world_size + r`` of that block. So:

* the samples of a global step do not depend on world size or gradient accumulation (2
  workers x 16 and 1 worker x 32 train on the same 32 samples), and
* the batch of any step is computable directly: a resumed run continues at any step with no
  loader state beyond the step number (``position_for_step``).
"""

from __future__ import annotations

import dataclasses
import os

import torch

from trainforge.training.config import ConfigError, TrainConfig

Batch = tuple[torch.Tensor, torch.Tensor]
_DATA_SEED_OFFSET = 1_000_003  # data and model init draw from different streams


class TensorDataset:
    """Inputs and targets as two tensors with the sample on dim 0."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        assert len(inputs) == len(targets)
        self.inputs, self.targets = inputs, targets

    def __len__(self) -> int:
        return len(self.inputs)

    def batch(self, idx: torch.Tensor) -> Batch:
        return self.inputs.index_select(0, idx), self.targets.index_select(0, idx)

    def to(self, device: torch.device) -> TensorDataset:
        return TensorDataset(self.inputs.to(device), self.targets.to(device))


def synthetic_classification(
    n: int, seed: int, features: int = 784, classes: int = 10
) -> TensorDataset:
    """Gaussian inputs labelled by a fixed random linear teacher: learnable, deterministic."""
    g = torch.Generator().manual_seed(seed + _DATA_SEED_OFFSET)
    x = torch.randn(n, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    y = (x @ teacher).argmax(dim=1)
    return TensorDataset(x, y)


def synthetic_tokens(n: int, seed: int, seq_len: int, vocab: int) -> TensorDataset:
    """Sequences from a fixed random bigram chain (next = perm[cur], 10% random tokens):
    the loss falls from ln(vocab) towards the noise floor as the model learns the chain."""
    g = torch.Generator().manual_seed(seed + _DATA_SEED_OFFSET)
    perm = torch.randperm(vocab, generator=g)
    first = torch.randint(vocab, (n,), generator=g)
    # Drawn in the same order and shapes as ever (the same tokens for a seed), then held
    # time-major, so that each of the chain's seq_len steps reads and writes contiguous rows
    # rather than a column of every sample (the set-up's dataset phase: 0.45 -> 0.37 CPU s
    # for the 1.3B check's 4096 x 2048 here, one thread, median of 3, 2026-11-29).
    noise = (torch.rand(n, seq_len, generator=g) < 0.1).t().contiguous()
    rand_tok = torch.randint(vocab, (n, seq_len), generator=g).t().contiguous()
    seq = torch.empty(seq_len + 1, n, dtype=torch.long)
    seq[0] = first
    for t in range(seq_len):
        torch.where(noise[t], rand_tok[t], perm[seq[t]], out=seq[t + 1])
    return TensorDataset(seq[:-1].t().contiguous(), seq[1:].t().contiguous())


class TokenFileDataset:
    """A flat little-endian uint16 token file, memory-mapped (pages load on first touch).

    Sample ``i`` is tokens ``[i*seq_len, (i+1)*seq_len + 1)``: input the first ``seq_len``,
    target the same shifted by one. Non-overlapping windows, so an epoch sees each token once.
    """

    def __init__(self, path: str, seq_len: int, vocab_size: int) -> None:
        if not os.path.isfile(path):
            raise ConfigError(f"--data-path {path}: no such file")
        size = os.path.getsize(path)
        if size % 2:
            raise ConfigError(
                f"--data-path {path}: {size} bytes is not a whole number of uint16 tokens"
            )
        self.n_tokens = size // 2
        self.seq_len = seq_len
        self.path = path
        if self.n_tokens < seq_len + 1:
            raise ConfigError(
                f"--data-path {path} holds {self.n_tokens} tokens, fewer than one sample of "
                f"--seq-len {seq_len} + 1; use a longer file or a smaller --seq-len"
            )
        # shared=False: a private (copy-on-write) mapping; the file is never written.
        self.tokens = torch.from_file(path, shared=False, size=self.n_tokens, dtype=torch.uint16)
        self._offsets = torch.arange(seq_len + 1)
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return (self.n_tokens - 1) // self.seq_len

    def batch(self, idx: torch.Tensor) -> Batch:
        windows = (idx.cpu()[:, None] * self.seq_len + self._offsets).reshape(-1)
        seq = self.tokens[windows].to(torch.long).view(len(idx), self.seq_len + 1)
        return seq[:, :-1], seq[:, 1:]

    def check_vocab(self) -> None:
        """Ids >= --vocab-size would index past the embedding: fail before training."""
        top = int(self.tokens.to(torch.int32).max()) if self.n_tokens <= 50_000_000 else None
        if top is not None and top >= self.vocab_size:
            raise ConfigError(
                f"--data-path {self.path} contains token id {top}, not below --vocab-size "
                f"{self.vocab_size}; raise --vocab-size to at least {top + 1}"
            )


def build_dataset(cfg: TrainConfig) -> TensorDataset | TokenFileDataset:
    if cfg.dataset == "tokens":
        assert cfg.data_path is not None
        ds = TokenFileDataset(cfg.data_path, cfg.seq_len, cfg.vocab_size)
        ds.check_vocab()
        return ds
    if cfg.model == "gpt":
        return synthetic_tokens(cfg.dataset_size, cfg.seed, cfg.seq_len, cfg.vocab_size)
    return synthetic_classification(cfg.dataset_size, cfg.seed)


@dataclasses.dataclass(frozen=True)
class Position:
    """Where global step ``step`` reads: epoch and offset (in global batches) inside it."""

    epoch: int
    batch_in_epoch: int


class ShardedOrder:
    """DistributedSampler-equivalent order whose batches are a pure function of the step."""

    def __init__(
        self,
        dataset_len: int,
        *,
        seed: int,
        rank: int,
        world_size: int,
        batch_size: int,
        grad_accum: int,
        shuffle: bool = True,
    ) -> None:
        self.n = dataset_len
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.batch_size, self.grad_accum = batch_size, grad_accum
        self.global_batch = batch_size * world_size * grad_accum
        if self.n < self.global_batch:
            raise ConfigError(
                f"dataset of {self.n} samples is smaller than one global batch of "
                f"{self.global_batch}"
            )
        # drop_last semantics: the tail that does not fill a global batch is skipped this epoch
        self.steps_per_epoch = self.n // self.global_batch
        self.shuffle = shuffle
        self.epoch = 0
        self._perm_epoch: int | None = None
        self._perm: torch.Tensor | None = None

    def set_epoch(self, epoch: int) -> None:
        """Same meaning as DistributedSampler.set_epoch: selects the epoch's permutation."""
        self.epoch = epoch

    def position_for_step(self, step: int) -> Position:
        return Position(step // self.steps_per_epoch, step % self.steps_per_epoch)

    def permutation(self, epoch: int) -> torch.Tensor:
        if self._perm_epoch != epoch:
            if self.shuffle:
                g = torch.Generator().manual_seed(self.seed * 1_000_033 + epoch)
                self._perm = torch.randperm(self.n, generator=g)
            else:
                self._perm = torch.arange(self.n)
            self._perm_epoch = epoch
        assert self._perm is not None
        return self._perm

    def step_indices(self, step: int) -> torch.Tensor:
        """All ``global_batch`` sample indices of optimizer step ``step`` (every rank agrees)."""
        pos = self.position_for_step(step)
        self.set_epoch(pos.epoch)
        start = pos.batch_in_epoch * self.global_batch
        return self.permutation(pos.epoch)[start : start + self.global_batch]

    def rank_table(self, epoch: int) -> torch.Tensor:
        """This rank's indices for every step of ``epoch``: ``[b, m]`` is micro-step ``m`` of
        the epoch's ``b``-th step, exactly ``indices(epoch * steps_per_epoch + b, m)``. A view
        of the cached permutation (no copy): each ``[b, m]`` row is contiguous in it."""
        used = self.permutation(epoch)[: self.steps_per_epoch * self.global_batch]
        table = used.view(self.steps_per_epoch, self.grad_accum, self.world_size, self.batch_size)
        return table[:, :, self.rank]

    def indices(self, step: int, micro: int) -> torch.Tensor:
        """This rank's ``batch_size`` indices for micro-step ``micro`` of step ``step``."""
        if not 0 <= micro < self.grad_accum:
            raise IndexError(f"micro-step {micro} outside 0..{self.grad_accum - 1}")
        part = micro * self.world_size + self.rank
        block = self.step_indices(step)
        return block[part * self.batch_size : (part + 1) * self.batch_size]


class Batches:
    """Dataset + order + device placement: ``get(step, micro)`` is the loop's only data call.

    Per step it does no host work beyond one ``select`` and the ``index_select`` of the batch:
    this rank's indices of a whole epoch (``ShardedOrder.rank_table``) are built once per epoch
    and, for a dataset held on the accelerator, copied there once per epoch (pinned,
    non-blocking). Indexing a GPU dataset with a host index tensor would copy it to the device
    every step, and that copy synchronizes the host with the GPU: the host then cannot run
    ahead of the device, which costs a small model a large share of its step time. (PyTorch's
    ``copy_kernel_cuda`` in aten/src/ATen/native/cuda/Copy.cu calls ``memcpy_and_sync``,
    ``cudaMemcpyAsync`` then ``cudaStreamSynchronize``, for a host<->device copy without
    ``non_blocking``; read 2026-11-27 in PyTorch's source and torch 2.13's
    c10/cuda/CUDAFunctions.h.)
    """

    def __init__(
        self, dataset: TensorDataset | TokenFileDataset, order: ShardedOrder, device: torch.device
    ) -> None:
        self.order = order
        self.device = device
        # Small in-memory datasets move to the accelerator once: no per-step host->device copy.
        if isinstance(dataset, TensorDataset) and device.type != "cpu":
            dataset = dataset.to(device)
        self.dataset = dataset
        # where the index table lives: with the samples it indexes (a token file stays on the
        # host: its batches are gathered there, then copied)
        self._index_device = (
            dataset.inputs.device if isinstance(dataset, TensorDataset) else torch.device("cpu")
        )
        self._epoch: int | None = None
        self._table: torch.Tensor | None = None

    def table(self, epoch: int) -> torch.Tensor:
        """This rank's index table of ``epoch`` on the dataset's device (cached per epoch)."""
        if self._epoch != epoch or self._table is None:
            self.order.set_epoch(epoch)
            table = self.order.rank_table(epoch)
            if self._index_device.type == "cuda":
                # contiguous first: the rank's rows only, and a dense pinned source for the copy
                table = table.contiguous().pin_memory().to(self._index_device, non_blocking=True)
            elif self._index_device != table.device:
                table = table.contiguous().to(self._index_device)
            self._table, self._epoch = table, epoch
        return self._table

    def get(self, step: int, micro: int) -> Batch:
        order = self.order
        if not 0 <= micro < order.grad_accum:
            raise IndexError(f"micro-step {micro} outside 0..{order.grad_accum - 1}")
        epoch, b = divmod(step, order.steps_per_epoch)
        idx = self.table(epoch)[b, micro]
        if isinstance(self.dataset, TensorDataset):
            return self.dataset.batch(idx)
        x, y = self.dataset.batch(idx)
        if self.device.type == "cuda":
            x = x.pin_memory().to(self.device, non_blocking=True)
            y = y.pin_memory().to(self.device, non_blocking=True)
        return x, y
