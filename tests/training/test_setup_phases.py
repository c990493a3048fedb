"""The set-up before the first step: its phases, the imports it needs, the CUDA context's thread.

Why: the H200 run (2026-11-29) put 6.15 s of the bf16 1.3B's 6.92 s set-up in one `model_s`
phase, and 5.05 s of the FP8 run's in `fp8_check_s`: the imports (torch.compile's compiler,
FSDP2, torchao) and the CUDA context landed wherever the first run needed them, so the split
could only be guessed. Now the imports are their own phase, and the CUDA context is created on
a thread while the set-up that needs no GPU goes on (distributed.DeviceContext): the main
thread's wait for it is `cuda_init_s`, the thread's own seconds `cuda_context_s` (beside the
phases, not added). No GPU here: a CPU device stands in for the thread's first allocation,
and the tests check the order of events, not a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from trainforge.training import data, distributed, fp8, loop, parallel
from trainforge.training.config import ConfigError, parse_args

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len", "16",
        "--vocab-size", "64", "--dataset-size", "64", "--batch-size", "4", "--steps", "2",
        "--log-every", "1"]  # fmt: skip


def _inside(phases: dict[str, float]) -> float:
    return sum(v for k, v in phases.items() if k in loop.SETUP_PHASES)


def test_the_context_is_created_on_a_thread_while_the_set_up_goes_on(monkeypatch, tmp_path):
    """The thread's first allocation is still in flight while the main thread builds the
    dataset (the allocation waits for it: a set-up that did not go on would never release
    it), and the weights are allocated only after the main thread waited for the context."""
    events: list[str] = []
    dataset_built = threading.Event()
    contexts: list[distributed.DeviceContext] = []

    def first_allocation(device: torch.device) -> None:
        events.append(f"context started on {threading.current_thread().name}")
        assert dataset_built.wait(60), "the set-up did not go on while the context was made"
        events.append("context made")

    def start(device: torch.device) -> distributed.DeviceContext:
        contexts.append(distributed.DeviceContext(device, first_allocation).start())
        return contexts[-1]

    build_dataset, materialize = loop.build_dataset, parallel.materialize

    def dataset(cfg):
        events.append("dataset")
        dataset_built.set()
        return build_dataset(cfg)

    def weights(*args, **kwargs):
        events.append("weights allocated")
        return materialize(*args, **kwargs)

    monkeypatch.setattr(loop, "cuda_context", start)
    monkeypatch.setattr(loop, "build_dataset", dataset)
    monkeypatch.setattr(parallel, "materialize", weights)
    assert loop.train(parse_args([*TINY, "--output-dir", str(tmp_path)])) == 0
    assert events == [
        "context started on trainforge-cuda-context",
        "dataset",
        "context made",
        "weights allocated",
    ]
    s = json.loads((tmp_path / "summary.json").read_text())
    phases = s["setup_phases"]
    want = {"imports_s", "dataset_s", "model_s", "cuda_init_s", "weights_s", "cuda_context_s"}
    assert want <= set(phases)
    assert phases["cuda_context_s"] == contexts[0].seconds > 0
    # the phases add up to the set-up; the thread's seconds ran beside them, not in the sum
    assert "cuda_context_s" not in loop.SETUP_PHASES
    assert _inside(phases) == pytest.approx(s["setup_seconds"], abs=1e-6)


def test_an_error_creating_the_context_stops_the_run_before_any_weight(monkeypatch, tmp_path):
    """The thread's error is raised on the main thread where it waits, as the first
    allocation would have raised it (exits.diagnose then names it as it always has)."""
    allocated: list[bool] = []

    def busy(device: torch.device) -> None:
        raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")

    monkeypatch.setattr(loop, "cuda_context", lambda d: distributed.DeviceContext(d, busy).start())
    monkeypatch.setattr(parallel, "materialize", lambda *a, **k: allocated.append(True))
    with pytest.raises(RuntimeError, match="busy or unavailable"):
        loop.train(parse_args([*TINY, "--output-dir", str(tmp_path)]))
    assert allocated == []


def test_a_run_that_stops_before_the_gpu_lets_the_thread_end(monkeypatch, tmp_path):
    """A config error before the weights (here: a dataset smaller than one batch) still joins
    the context's thread: none is left running, whatever the thread's own outcome."""
    release = threading.Event()
    contexts: list[distributed.DeviceContext] = []

    def slow(device: torch.device) -> None:
        release.wait(60)
        raise RuntimeError("never seen: the run already failed")

    def start(device: torch.device) -> distributed.DeviceContext:
        contexts.append(distributed.DeviceContext(device, slow).start())
        return contexts[-1]

    build_dataset = loop.build_dataset

    def dataset(cfg):
        release.set()  # the thread ends only once the main thread is here
        return build_dataset(cfg)

    monkeypatch.setattr(loop, "cuda_context", start)
    monkeypatch.setattr(loop, "build_dataset", dataset)
    args = [*TINY, "--dataset-size", "2", "--output-dir", str(tmp_path)]  # the last one wins
    with pytest.raises(ConfigError, match="--dataset-size 2 is smaller than one global batch"):
        loop.train(parse_args(args))
    assert not contexts[0]._thread.is_alive()


def test_no_thread_and_no_cuda_phase_off_cuda():
    assert distributed.cuda_context(torch.device("cpu")) is None


def test_the_thread_allocates_on_the_run_s_device_by_its_index(monkeypatch):
    """A new thread's current CUDA device is 0 whatever the main thread set: the allocation
    names the run's device (cuda:3 for local rank 3), or rank 3 would put a context on GPU 0."""
    seen: list[tuple[torch.device, str]] = []

    def empty(*size, device=None, **kwargs):
        seen.append((device, threading.current_thread().name))
        return torch.zeros(0)

    monkeypatch.setattr(distributed.torch, "empty", empty)
    ctx = distributed.DeviceContext(torch.device("cuda", 3)).start()
    ctx.wait()
    assert seen == [(torch.device("cuda", 3), "trainforge-cuda-context")]
    assert ctx.seconds is not None and ctx.seconds >= 0


def test_the_fp8_check_leaves_torchao_to_the_imports_phase(monkeypatch):
    """The device check imports nothing (torchao's import is seconds: the imports phase's),
    and a missing torchao is still refused there, in one line, before any model exists."""
    imported: list[str] = []
    monkeypatch.setattr(fp8, "torchao_problem", lambda: imported.append("torchao") or None)
    assert fp8.problem("cuda", (9, 0), "NVIDIA H200", torchao=False) is None
    assert imported == []
    cfg = parse_args([*TINY, "--precision", "fp8"])
    assert parallel.load_wrappers(cfg) is None and imported == ["torchao"]
    monkeypatch.setattr(fp8, "torchao_problem", lambda: "--precision fp8 needs torchao, ...")
    assert parallel.load_wrappers(cfg) == "--precision fp8 needs torchao, ..."


def test_the_fp8_run_refuses_a_missing_torchao_in_the_imports_phase(monkeypatch, tmp_path):
    from trainforge.training import exits

    monkeypatch.setenv(loop.FP8_ON_CPU_ENV, "1")
    monkeypatch.setitem(sys.modules, "torchao.float8", None)  # import fails as if absent
    built: list[bool] = []
    monkeypatch.setattr(loop, "build_dataset", lambda cfg: built.append(True))
    cfg = parse_args([*TINY, "--precision", "fp8", "--output-dir", str(tmp_path)])
    with pytest.raises(exits.RunFailure) as e:
        loop.train(cfg)
    assert e.value.reason == exits.CONFIG_ERROR and "needs torchao" in e.value.detail
    assert "\n" not in e.value.detail and built == []


PROBE = """
import sys, torch
from trainforge.training.config import parse_args
from trainforge.training.distributed import init_distributed
from trainforge.training.models import build_model
from trainforge.training.parallel import load_wrappers, parallelize
cfg = parse_args(["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2",
                  "--seq-len", "16", "--vocab-size", "64", *sys.argv[1:]])
env = init_distributed()
before = set(sys.modules)
assert load_wrappers(cfg) is None
loaded = set(sys.modules)
parallelize(build_model(cfg, device="meta"), cfg, env, torch.float32)
print(len(loaded - before), len(set(sys.modules) - loaded))
"""


@pytest.mark.parametrize("flags", [["--strategy", "fsdp", "--compile"], ["--strategy", "ddp"]])
def test_the_imports_phase_holds_every_import_the_wrapping_needs(flags):
    """After `load_wrappers`, `parallelize` (compile wrappers, FSDP2 or DDP, the weights)
    imports nothing more: those seconds are `imports_s`, not hidden in `model_s` (a fresh
    interpreter: this one imported them long ago). Module counts, not seconds."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *flags], capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    by_phase, after = (int(n) for n in p.stdout.split()[-2:])
    assert by_phase > 500 and after == 0, (by_phase, after)


def test_the_gpu_check_row_names_the_wait_and_the_thread_apart():
    """The table says which seconds are in the set-up (the wait) and which ran beside it."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_check  # noqa: PLC0415

    phases = {"process_start_s": 2.9, "process_group_s": 0.2, "imports_s": 3.0,
              "dataset_s": 0.5, "model_s": 1.5, "cuda_init_s": 0.25, "cuda_context_s": 2.0,
              "weights_s": 0.75, "restore_and_other_s": 0.3, "loop_start_s": 0.0}  # fmt: skip
    assert gpu_check._phases(phases) == (
        " (imports (dynamo, compile, FSDP2, torchao) 3.00 s, dataset 0.50 s, model 1.50 s, "
        "waiting for the CUDA context 0.25 s, weights (allocate, draw) 0.75 s, rest 0.30 s, "
        "first barrier 0.00 s; beside them: CUDA context + first allocation, on a thread "
        "2.00 s; before it: process start + imports 2.90 s, process group 0.20 s)"
    )


def _former_synthetic_tokens(n: int, seed: int, seq_len: int, vocab: int):
    """data.synthetic_tokens as it was at b9d77e5 (sample-major: a column per step)."""
    g = torch.Generator().manual_seed(seed + data._DATA_SEED_OFFSET)
    perm = torch.randperm(vocab, generator=g)
    seq = torch.empty(n, seq_len + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(vocab, (n,), generator=g)
    noise = torch.rand(n, seq_len, generator=g) < 0.1
    rand_tok = torch.randint(vocab, (n, seq_len), generator=g)
    for t in range(seq_len):
        seq[:, t + 1] = torch.where(noise[:, t], rand_tok[:, t], perm[seq[:, t]])
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


@pytest.mark.parametrize(("n", "seed", "seq_len", "vocab"), [(37, 0, 50, 97), (8, 5, 300, 64)])
def test_the_synthetic_tokens_are_the_same_tokens_as_before(n, seed, seq_len, vocab):
    """Time-major generation draws the same tokens: every seed's data (and so every resumed
    run, every recorded loss) is unchanged."""
    ds = data.synthetic_tokens(n, seed, seq_len, vocab)
    inputs, targets = _former_synthetic_tokens(n, seed, seq_len, vocab)
    assert torch.equal(ds.inputs, inputs) and torch.equal(ds.targets, targets)
    assert ds.inputs.is_contiguous() and ds.targets.is_contiguous()


def _strided_ops(seq_len: int) -> int:
    """How many ATen ops touch a non-contiguous tensor while the dataset is built."""
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415

    count = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
            count[0] += any(not t.is_contiguous() for t in tensors)
            return func(*args, **(kwargs or {}))

    with Count():
        data.synthetic_tokens(64, 0, seq_len, 128)
    return count[0]


def test_the_dataset_chain_reads_and_writes_contiguous_rows():
    """The cost the time-major layout removed: ops on a strided column of every sample, 3 per
    step of the chain before (a column of the noise, of the random tokens, of the sequence);
    now a constant few (the final transposes), whatever the sequence length."""
    assert _strided_ops(256) == _strided_ops(64) <= 4
