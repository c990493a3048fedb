"""The memory model's allowance for what PyTorch's allocator does not count: the CUDA
context, NCCL's buffers (more than one rank) and the caching allocator's fragmentation
(a fraction of the allocated peak); on CPU, the process itself and the checkpoint staging."""

from __future__ import annotations

import pytest

from trainforge.jobs.estimate import facts
from trainforge.jobs.estimate.memory import estimate_memory, regime, states
from trainforge.jobs.estimate.shape import shape_of
from trainforge.jobs.spec import parse_job


@pytest.fixture(scope="module")
def shape():
    job = parse_job({"name": "j", "team": "t", "pool": "p", "model": "gpt", "workers": 2}, "j")
    return shape_of(job)


def _mem(shape, world: int, device: str, async_checkpoint: bool = False):
    r = regime(shape, "fsdp", world, device)
    return estimate_memory(
        shape, r, capacity=None, procs_per_pod=1, async_checkpoint=async_checkpoint
    )


def test_one_gpu_rank_adds_the_cuda_context_and_fragmentation(shape):
    m = _mem(shape, 1, "cuda")
    assert m.allowance == facts.CUDA_CONTEXT_BYTES + int(facts.FRAGMENTATION * m.peak)
    assert m.total == m.peak + m.allowance


def test_more_gpu_ranks_add_nccls_buffers(shape):
    one, two = _mem(shape, 1, "cuda"), _mem(shape, 2, "cuda")
    assert two.allowance == (
        facts.CUDA_CONTEXT_BYTES + int(facts.FRAGMENTATION * two.peak) + facts.NCCL_BYTES
    )
    assert two.allowance - int(facts.FRAGMENTATION * two.peak) == (
        one.allowance - int(facts.FRAGMENTATION * one.peak) + facts.NCCL_BYTES
    )


def test_fragmentation_grows_with_the_peak(shape, monkeypatch):
    base, before = _mem(shape, 1, "cuda"), facts.FRAGMENTATION
    monkeypatch.setattr(facts, "FRAGMENTATION", before + 0.15)
    more = _mem(shape, 1, "cuda")
    assert more.peak == base.peak
    assert more.allowance - base.allowance == int((before + 0.15) * more.peak) - int(
        before * base.peak
    )
    assert more.allowance > base.allowance


def test_on_cpu_the_allowance_is_the_process_and_its_staging_copy(shape):
    plain = _mem(shape, 2, "cpu")
    assert plain.allowance == facts.CPU_PROCESS_BYTES
    staged = _mem(shape, 2, "cpu", async_checkpoint=True)
    assert staged.allowance > facts.CPU_PROCESS_BYTES
    assert staged.host_per_pod == staged.peak + staged.allowance


def test_dcp_s_checkpoint_process_counts_on_the_host_of_async_runs_only(shape):
    """Each rank of an async run runs DCP's checkpoint process for the whole run
    (training/checkpoint.py `_WriterStart`; one rank too: the runtime always has a process
    group): on CPU it is part of the process's allowance (checked against the pod's memory),
    on a GPU part of the pod's host memory, beside the staging copy (12 bytes a parameter of
    the rank's shard)."""
    for world in (1, 2):
        staging = 12 * (states(shape, regime(shape, "fsdp", world, "cpu"))["parameters"] // 4)
        cpu, cpu_async = _mem(shape, world, "cpu"), _mem(shape, world, "cpu", True)
        assert cpu.allowance == facts.CPU_PROCESS_BYTES  # sync: no staging, no process
        assert cpu_async.allowance - cpu.allowance == staging + facts.CHECKPOINT_PROCESS_BYTES
        gpu, gpu_async = _mem(shape, world, "cuda"), _mem(shape, world, "cuda", True)
        assert gpu_async.host_per_pod - gpu.host_per_pod == (
            staging + facts.CHECKPOINT_PROCESS_BYTES
        )
        assert gpu_async.allowance == gpu.allowance  # not GPU memory: no CUDA context in it
