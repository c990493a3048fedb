"""The step loop's per-step work beyond the bare loop, cut without changing what it computes.

Why: bench/throughput.py measured the runtime at 0.77x the bare DDP loop on a 1.9 ms MLP step
(H200). These tests hold what the cuts must keep: the same samples for every step and rank,
no host->device copy of the batch's indices per step (a copy from pageable memory makes the
host wait for the GPU), and the checkpoint/preemption hooks still watched and still run on
every step.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainforge.training.data import Batches, ShardedOrder, TensorDataset


def _order(n: int, rank: int, world: int, batch: int, accum: int) -> ShardedOrder:
    return ShardedOrder(n, seed=3, rank=rank, world_size=world, batch_size=batch, grad_accum=accum)


@pytest.mark.parametrize(("world", "batch", "accum"), [(1, 8, 1), (2, 4, 2), (3, 2, 3)])
def test_batches_are_the_samples_the_order_names_for_every_step_and_rank(world, batch, accum):
    n = 100  # not a multiple of any global batch here: each epoch drops a tail
    ds = TensorDataset(torch.arange(n, dtype=torch.float32)[:, None], torch.arange(n))
    for rank in range(world):
        order = _order(n, rank, world, batch, accum)
        batches = Batches(ds, order, torch.device("cpu"))
        steps = 3 * order.steps_per_epoch + 2  # crosses epochs, and goes back (a resume)
        for step in [*range(steps), 1, 0, steps // 2]:
            for micro in range(accum):
                x, y = batches.get(step, micro)
                want = order.indices(step, micro)
                assert torch.equal(y, want), (rank, step, micro)
                assert torch.equal(x[:, 0].long(), want)
        with pytest.raises(IndexError, match="micro-step -1 outside"):
            batches.get(0, -1)
        with pytest.raises(IndexError, match=f"micro-step {accum} outside"):
            batches.get(0, accum)


class _Copies(TorchDispatchMode):
    """Counts the tensor copies (device moves) dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten._to_copy, torch.ops.aten.copy_):
            self.copies += 1
        return func(*args, **(kwargs or {}))


def test_a_dataset_on_a_device_gets_its_indices_there_once_per_epoch_not_per_step():
    """The meta device stands in for a GPU: moving the index of every step to it would show
    as one copy per step (what made every runtime step a host-device sync on CUDA)."""
    n, batch = 64, 8
    ds = TensorDataset(torch.randn(n, 4), torch.arange(n))
    order = _order(n, 0, 1, batch, 1)
    batches = Batches(ds, order, torch.device("meta"))
    assert batches.dataset.inputs.device.type == "meta"
    with _Copies() as mode:
        for step in range(3 * order.steps_per_epoch):  # three epochs
            x, y = batches.get(step, 0)
            assert x.device.type == "meta" and y.shape == (batch,)
    assert mode.copies == 3  # one index table per epoch


class _Sharded(torch.nn.Module):
    """Records what `accumulation` asks of an FSDP2 module."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bool] = []

    def set_requires_gradient_sync(self, on: bool) -> None:
        self.calls.append(on)


def test_fsdp_gradient_sync_is_switched_off_for_non_final_micro_steps_and_back_on():
    from trainforge.training.parallel import accumulation

    m = _Sharded()
    for _ in range(2):  # two steps of 3 micro-steps
        for micro in range(3):
            with accumulation(m, micro == 2):
                pass
    assert m.calls == [False, True, False, True]  # off before micro 0, on for the last
    m = _Sharded()
    for _ in range(3):  # no accumulation: sync stays on, the module walk is skipped
        with accumulation(m, True):
            pass
    assert m.calls == []


def _tiny(tmp_path, *extra: str):
    from trainforge.training.config import parse_args

    args = ["--model", "mlp", "--dataset-size", "64", "--batch-size", "8", "--steps", "3"]
    args += ["--log-every", "1", "--output-dir", str(tmp_path / "out"), *extra]
    return parse_args(args)


@pytest.mark.parametrize("with_dir", [True, False])
def test_the_checkpoint_hook_runs_every_step_watched_where_it_can_block(
    tmp_path, monkeypatch, with_dir
):
    """With a checkpoint directory (preemption agreement, saves) the hook is watched by the
    hang watchdog every step; without one it cannot block, so it runs unwatched -- but it
    still runs every step (the KILL/TERM test hooks live in it)."""
    from trainforge.training import checkpoint as ckpt_mod
    from trainforge.training import loop

    watched: list[tuple[str, int | None]] = []
    hooked: list[int] = []
    real_watched, real_after = loop._watched, ckpt_mod.Checkpointing.after_step

    def spy_watched(watchdog, name, step=None):
        watched.append((name, step))
        return real_watched(watchdog, name, step)

    def spy_after(self, step, *a, **k):
        hooked.append(step)
        return real_after(self, step, *a, **k)

    monkeypatch.setattr(loop, "_watched", spy_watched)
    monkeypatch.setattr(ckpt_mod.Checkpointing, "after_step", spy_after)
    extra = ["--checkpoint-dir", str(tmp_path / "ckpt")] if with_dir else []
    assert loop.train(_tiny(tmp_path, *extra)) == 0
    assert hooked == [1, 2, 3]
    per_step = [w for w in watched if w[0] == "checkpoint"]
    assert per_step == (
        [("checkpoint", 1), ("checkpoint", 2), ("checkpoint", 3)] if with_dir else []
    )


class _HostSyncs(TorchDispatchMode):
    """Every host read of a tensor's value during the step loop, by step and call site.

    A read of a CUDA tensor's value (``.item()``, ``float()``, ``bool()``, ``.tolist()``,
    ``.cpu()``, ``.numpy()``) waits for the GPU to finish everything queued before it: the host
    can no longer run ahead, and a small model's step pays the GPU's latency in full.
    ``torch.cuda.set_sync_debug_mode`` counts those on a GPU only; here every value read
    dispatches ``aten._local_scalar_dense`` (the scalar reads) or goes through the patched
    Tensor methods, whatever the device, so a CPU run counts the same calls the GPU run makes.
    The step is `exits.context.step`, which the loop sets at the start of each step."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int | None, str, str]] = []  # (step, kind, site)
        self.active = False  # inside the step loop (the patched methods are global)

    def record(self, kind: str) -> None:
        import traceback

        if not self.active:
            return
        from trainforge.training import exits

        frames = traceback.extract_stack()[:-2]
        # the innermost trainforge frame: the runtime's line that asked (torch's own below it)
        ours = [f for f in frames if "/trainforge/training/" in f.filename]
        where = f"{ours[-1].filename.rsplit('/', 1)[-1]}:{ours[-1].name}" if ours else "?"
        inner = "torch/optim" if any("/torch/optim/" in f.filename for f in frames) else ""
        self.reads.append((exits.context.step, kind, f"{where}{'>' + inner if inner else ''}"))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten._local_scalar_dense:
            self.record("item")
        return func(*args, **(kwargs or {}))


# Value reads that are not host-device syncs, each for a stated reason:
HOST_ONLY = {
    # the SIGTERM agreement: a CPU int32 flag all-reduced on its own gloo group, a step late
    # (preemption.py): a host tensor on every device
    "preemption.py:should_stop",
    # foreach AdamW on the CPU reads its step counters (CPU tensors); on CUDA the runtime's
    # AdamW is fused (build_optimizer) and keeps them on the device, read by the kernel
    "loop.py:_loop>torch/optim",
}


def _count_syncs(monkeypatch, tmp_path, *extra: str) -> tuple[dict[int, list[str]], int]:
    from trainforge.training import loop

    mode = _HostSyncs()
    for name in ("tolist", "cpu", "numpy"):
        real = getattr(torch.Tensor, name)

        def spy(self, *a, _real=real, _name=name, **k):
            mode.record(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, spy)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: mode.record("synchronize"))
    real_loop = loop._loop

    def watched_loop(*a, **k):
        mode.active = True
        try:
            with mode:
                return real_loop(*a, **k)
        finally:
            mode.active = False

    monkeypatch.setattr(loop, "_loop", watched_loop)
    cfg = _tiny(tmp_path, *extra)
    assert loop.train(cfg) == 0
    per_step: dict[int, list[str]] = {}
    for step, kind, site in mode.reads:
        if site not in HOST_ONLY:
            per_step.setdefault(step, []).append(f"{kind} in {site}")
    return per_step, cfg.steps


@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_one_host_sync_per_log_window_and_none_in_other_steps(monkeypatch, tmp_path, model):
    """Six steps logged every three: steps 3 and 6 read the loss (the one sync each), the
    other four steps read nothing. A `.item()` (or `.cpu()`, `.tolist()`, a
    `torch.cuda.synchronize`) added anywhere in the step shows up here with its site."""
    gpt = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len",
           "8", "--vocab-size", "64"] if model == "gpt" else []  # fmt: skip
    per_step, steps = _count_syncs(monkeypatch, tmp_path, "--steps", "6", "--log-every", "3",
                                   *gpt)  # fmt: skip
    assert steps == 6
    assert per_step == {3: ["item in loop.py:_loop"], 6: ["item in loop.py:_loop"]}


def test_checkpoints_sync_only_on_their_own_steps(monkeypatch, tmp_path):
    """With a checkpoint directory (the preemption agreement runs every step), saves every
    2 steps: the saves read values (DCP's plan, the ranks' agreement) on steps 2, 4, 6 only."""
    per_step, _ = _count_syncs(monkeypatch, tmp_path, "--steps", "6", "--log-every", "6",
                               "--checkpoint-dir", str(tmp_path / "ckpt"),
                               "--checkpoint-every", "2")  # fmt: skip
    for step in (1, 3, 5):
        assert step not in per_step, per_step.get(step)
    for step in (2, 4):
        assert per_step[step] and all("checkpoint.py" in s for s in per_step[step]), step
    assert "item in loop.py:_loop" in per_step[6]


def test_the_cuda_optimizer_is_fused_so_its_step_counters_are_never_read_on_the_host():
    """Why HOST_ONLY may skip the optimizer's reads: on CUDA the runtime asks for the fused
    AdamW, whose step counters live on the device (torch 2.13 torch/optim/adam.py, which AdamW
    subclasses: "Deliberately host `step` on CPU if both capturable and fused are off"; on the
    parameter's device when fused) and read by the kernel; foreach on CPU reads them."""
    from trainforge.training.config import TrainConfig
    from trainforge.training.loop import build_optimizer

    model = torch.nn.Linear(4, 4)
    cuda = build_optimizer(model, TrainConfig(), torch.device("cuda"))
    assert all(g["fused"] for g in cuda.param_groups)
    cpu = build_optimizer(model, TrainConfig(), torch.device("cpu"))
    assert all(g["foreach"] and not g["fused"] for g in cpu.param_groups)


def test_weight_decay_is_applied_as_its_help_says():
    """--weight-decay's help said "on matrices (not on biases/norms)" for every model while the
    default MLP decays every parameter (as the seed did); the help now says both, as here."""
    from trainforge.training.config import TrainConfig, build_parser
    from trainforge.training.loop import build_optimizer
    from trainforge.training.models import build_model

    def decayed(model_name: str) -> tuple[int, int]:
        cfg = TrainConfig(model=model_name, layers=1, d_model=32, heads=2, seq_len=8)
        opt = build_optimizer(build_model(cfg, "cpu"), cfg, torch.device("cpu"))
        on = [p for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]]
        off = [p for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]]
        assert all(p.dim() >= 2 for p in on) or model_name == "mlp"
        return len(on), len(off)

    assert decayed("mlp")[1] == 0  # biases decayed too
    assert decayed("gpt")[1] > 0  # biases and norms not decayed
    actions = build_parser()._actions
    help_text = next(a.help for a in actions if "--weight-decay" in a.option_strings)
    assert "gpt: matrices only, not biases/norms; mlp: every parameter" in help_text


@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_backward_runs_outside_autocast_as_in_the_bare_loop(monkeypatch, tmp_path, model):
    """Autocast wraps the forward and the loss only (PyTorch's AMP guide; the bare loop of
    bench/throughput.py does the same). A ``backward()`` inside the region ran every backward
    op under autocast too (autograd runs backward with the caller's thread-local state): on
    CUDA, whose fp32 list has ``sum``, the bias gradients' reductions then come out fp32 and
    are cast back, kernels the bare loop never launches. A gradient hook on every parameter
    sees the autocast state its backward ops run under (CPU autocast with --precision bf16)."""
    from trainforge.training import loop

    seen: list[bool] = []
    params: list[int] = []
    real_build = loop.build_optimizer

    def build_optimizer(m, cfg, device):
        for p in m.parameters():
            params.append(p.numel())
            p.register_hook(lambda g: seen.append(torch.is_autocast_enabled("cpu")) or g)
        return real_build(m, cfg, device)

    monkeypatch.setattr(loop, "build_optimizer", build_optimizer)
    gpt = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len",
           "8", "--vocab-size", "64"] if model == "gpt" else []  # fmt: skip
    cfg = _tiny(tmp_path, "--precision", "bf16", *gpt)
    assert loop.train(cfg) == 0
    assert len(seen) == len(params) * cfg.steps > 0  # every parameter, every step
    assert not any(seen)  # no backward op under autocast


# what a steady runtime step dispatches beyond the bare loop's: the batch gathered from the
# epoch's index table (inputs and targets) and the loss summed on the device for the log
RUNTIME_EXTRA_OPS = {"index_select": 2, "detach": 1, "add_": 1}


@pytest.mark.parametrize(
    ("model", "precision"), [("mlp", "fp32"), ("mlp", "bf16"), ("gpt", "fp32"), ("gpt", "bf16")]
)
def test_a_steady_step_dispatches_the_bare_loop_s_ops_plus_the_batch_gather_and_loss_sum(
    tmp_path, model, precision
):
    """Counted, not timed: every aten op of a steady step (forward, backward, the all-reduce,
    the optimizer) of the runtime and of bench/throughput.py's bare loop, on the same model,
    precision and optimizer (what bench/throughput.py prints as "aten ops per steady step"
    and gpu_check's loops row reports from the GPU). An op added to the step -- a clip, a
    cast, a metric, a copy -- fails here with its name; so does one the runtime stops doing."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import throughput

    from trainforge.training.config import TrainConfig, validate
    from trainforge.training.data import build_dataset
    from trainforge.training.distributed import cleanup, init_distributed

    gpt = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len",
           "8", "--vocab-size", "64", "--batch-size", "4", "--dataset-size", "128"]  # fmt: skip
    a = throughput.parse(["--precision", precision, *(gpt if model == "gpt" else [])])
    cfg = validate(
        TrainConfig(model=a.model, layers=a.layers, d_model=a.d_model, heads=a.heads,
                    seq_len=a.seq_len, vocab_size=a.vocab_size, dataset_size=a.dataset_size,
                    batch_size=a.batch_size, lr=1e-3, warmup_steps=0, precision=a.precision)
    )  # fmt: skip
    env = init_distributed()
    try:
        ops = throughput.ops_per_step(a, cfg, build_dataset(cfg), env, tmp_path / "run")
    finally:
        cleanup()
    assert "error" not in ops, ops
    assert ops["extra"] == RUNTIME_EXTRA_OPS
    assert ops["runtime"] - ops["floor"] == 4
    assert ops["floor"] > 50  # a whole step was counted: forward, backward, all-reduce, AdamW
    assert ops["floor_ops"]["allreduce_"] == ops["runtime_ops"]["allreduce_"] == 1
    if precision == "bf16":  # the casts of autocast, in both loops
        assert ops["runtime_ops"]["_to_copy"] == ops["floor_ops"]["_to_copy"] > 0
