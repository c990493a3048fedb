"""Memory per GPU (per process) of one training step of the bundled runtime, by component.

Derived from what OUR runtime keeps alive, not from a generic formula; each constant was
checked against allocations measured on CPU (tests/jobs/test_estimate_measured.py runs the
runtime's own step under PyTorch's profiler and compares every component, within 10%).

Notation: b micro-batch per rank, s sequence, h d_model, a heads, V vocabulary, L layers,
P parameters, N ranks; e_c bytes of the compute dtype (2 bf16, 4 fp32), e_r bytes of the
residual stream (fp32 under DDP's bf16 autocast, where embeddings and residual adds stay
fp32; else e_c).

Activations per block, saved for backward by our GPT (models/gpt.py) without recomputation:
  ln1 output as the qkv input (e_c sbh), qkv output = q, k, v (3 e_c sbh), SDPA output, also
  the proj input since flash/CPU SDPA return it in (b, s, a, d/a) order so the reshape is a
  view (e_c sbh), the residual sum ln2 saves (e_r sbh), ln2 output as fc input (e_c sbh), fc
  output gelu saves (4 e_c sbh), gelu output `out` saves (4 e_c sbh), the block's output
  (the next block's input, e_r sbh); plus fp32 statistics: two LayerNorms' mean and rstd
  (16 sb) and SDPA's log-sum-exp (4 a s b).
  = (14 e_c + 2 e_r) sbh + 16 sb + 4 abs bytes: 32 sbh in bf16 under FSDP2, 36 sbh under
  DDP autocast, 64 sbh in fp32. Korthikanti et al.'s 34 sbh + 5 a s^2 b counts dropout masks
  (we have none) and the s x s attention matrix, which fused SDPA never materialises; they
  do not count the second copy of the qkv output that SDPA's backward keeps.
With activation checkpointing a block keeps only its input (e_r sbh) and one block's full
set is recomputed at a time in backward.

The loss: `loss_from_logits` casts the logits to fp32 and cross_entropy keeps the fp32
log-softmax (4 sbV); its backward holds that, the incoming gradient and the result at once:
12 sbV bytes at the peak, which is usually the step's peak moment (V >> h).

Parameters, gradients, optimizer: DDP holds fp32 weights (4P), fp32 gradients in its
all-reduce buckets (4P; `gradient_as_bucket_view`, so no second copy) and AdamW's two fp32
moments (8P) plus a 4-byte step per tensor. FSDP2 holds the same per rank on its shard:
dim 0 of each tensor split in N, padded (ceil). It gathers the root (embeddings, head) and
the current block in the compute dtype, keeps the last block gathered from forward into
backward (parallel.py: reshard_after_forward=False) and, during forward, the flat all-gather
output of the block it just gathered (implicit prefetching; released when the root's forward
ends); in backward it prefetches one block, keeps
the root's unsharded gradients until the end and reduces each block's gradient through a fp32
reduce-scatter input of the block's size once that block's activations are freed.
Under DDP bf16, autocast caches a bf16 copy of every Linear weight for the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainforge.jobs.estimate import facts
from trainforge.jobs.estimate.shape import ModelShape, Shapes
from trainforge.training import flops

# torch.utils.checkpoint keeps each block's CPU RNG state (a 5056-byte tensor, measured) to
# replay dropout identically; on a GPU that copy lives in host memory, not on the device.
CHECKPOINT_RNG_BYTES = {"cpu": 5056, "cuda": 0}


@dataclass(frozen=True)
class Regime:
    """How a job's tensors are laid out: device, strategy, ranks and dtypes."""

    device: str  # "cuda" | "cpu"
    strategy: str  # "ddp" | "fsdp"
    world: int
    compute_bytes: int  # e_c
    residual_bytes: int  # e_r
    autocast: bool  # DDP with bf16: fp32 weights, bf16 matmuls


def regime(
    shape: ModelShape, strategy: str, world: int, device: str, native_bf16: bool = True
) -> Regime:
    """The runtime's choices (parallel.resolve_precision / autocast) for this job.

    ``native_bf16``: the GPU has bf16 units (the catalog's ``nativeBf16``; False on a T4).
    The runtime's ``auto`` asks torch the same question (``is_bf16_supported(
    including_emulation=False)``): bf16 there, fp32 on a GPU without bf16 units and on CPU."""
    precision = shape.precision
    if precision == "auto":
        precision = "bf16" if device == "cuda" and native_bf16 else "fp32"
    # fp8: bf16 compute around float8 Linear matmuls (training/fp8.py); planned as bf16 (the
    # float8 copies torchao keeps for backward are not modelled)
    e_c = 2 if precision in ("bf16", "fp8") else 4
    autocast = e_c == 2 and strategy == "ddp"
    return Regime(device, strategy, world, e_c, 4 if autocast else e_c, autocast)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per process at the estimated peak of a training step."""

    components: dict[str, int]  # what is allocated at the peak moment, by component
    phase: str  # the moment: "loss backward", "block backward" or "setup (FSDP sharding)"
    allowance: int  # CUDA context, NCCL, fragmentation: memory PyTorch does not count
    capacity: int | None  # GPU memory (or this process's share of the pod's, on CPU)
    host_per_pod: int  # host RAM the pod's processes need (init, checkpoint staging)
    notes: tuple[str, ...] = field(default=())
    phases: dict[str, dict[str, int]] = field(default_factory=dict)  # every candidate moment

    @property
    def peak(self) -> int:
        return sum(self.components.values())

    @property
    def total(self) -> int:
        return self.peak + self.allowance


def _shard(shape: tuple[int, ...], world: int) -> int:
    """Elements of rank 0's FSDP2 shard (dim 0 split in `world`, padded up)."""
    if world <= 1 or not shape:
        return flops.numel(shape)
    rows = -(-shape[0] // world)
    return rows * flops.numel(shape[1:])


def _numel(shapes: Shapes) -> int:
    return sum(flops.numel(s) for s in shapes)


def _padded(shapes: Shapes, world: int) -> int:
    """Elements of a group's unsharded (padded) all-gather output."""
    return sum(_shard(s, world) for s in shapes) * max(world, 1)


def states(shape: ModelShape, r: Regime) -> dict[str, int]:
    """Parameters, gradients and optimizer state as the strategy holds them (per rank)."""
    all_shapes = [s for b in (*shape.blocks, shape.root) for s in b]
    if r.strategy == "fsdp":
        local = sum(_shard(s, r.world) for s in all_shapes)
    else:
        local = shape.parameters
    return {
        "parameters": 4 * local,
        "gradients": 4 * local,
        "optimizer": 8 * local + 4 * len(all_shapes),
    }


def _per_layer(shape: ModelShape, r: Regime) -> int:
    b, s, h = shape.batch_size, shape.seq_len, shape.d_model
    sbh, sb = b * s * h, b * s
    return (14 * r.compute_bytes + 2 * r.residual_bytes) * sbh + 16 * sb + 4 * shape.heads * sb


def activations(shape: ModelShape, r: Regime) -> dict[str, int]:
    """Saved activations after forward (`held`), one block's recomputation (`recompute`),
    the final norm's saved output, the loss path's peak (`logits`) and the activation-gradient
    temporaries of a block's backward (`grad_temps`)."""
    b = shape.batch_size
    if shape.kind == "declared":  # what the user stated (or calibrate measured) per sample
        held = shape.declared_activation_bytes * b
        return {"x0": 0, "held": held, "recompute": 0, "final_norm": 0, "logits": 0,
                "grad_temps": 0}  # fmt: skip
    if shape.kind == "mlp":
        hidden = sum(flops.MLP_SIZES[1:-1])
        classes = flops.MLP_SIZES[-1]
        return {
            "x0": 0,
            "held": r.compute_bytes * b * hidden,
            "recompute": 0,
            "final_norm": 0,
            "logits": 12 * b * classes,
            "grad_temps": r.compute_bytes * b * max(flops.MLP_SIZES[1:]),
        }
    s, h = shape.seq_len, shape.d_model
    sbh, sb = b * s * h, b * s
    full = _per_layer(shape, r)
    rng = CHECKPOINT_RNG_BYTES.get(r.device, 0)
    held = r.residual_bytes * sbh + rng if shape.activation_checkpointing else full
    x0 = r.residual_bytes * sbh + 8 * s  # embedding output (block 1's input) + positions
    return {
        "x0": x0,
        "held": x0 + shape.layers * held,
        # recomputation rebuilds what the block saves; its output is dropped at once
        "recompute": full - r.residual_bytes * sbh if shape.activation_checkpointing else 0,
        "final_norm": r.compute_bytes * sbh + 8 * sb,
        "logits": 12 * sb * shape.vocab_size,
        # the gradient of the 4h-wide MLP activation, while the next one is computed from it
        "grad_temps": 4 * r.compute_bytes * sbh,
    }


def batch_bytes(shape: ModelShape) -> int:
    """The micro-batch on the device: token ids and targets (int64), or MLP inputs."""
    b = shape.batch_size
    if shape.kind == "declared":
        return 0  # unknown: counted in the declared activation bytes
    if shape.kind == "mlp":
        return b * (4 * flops.MLP_SIZES[0] + 8)
    return 2 * 8 * b * shape.seq_len


def _mlp_backward(shape: ModelShape, r: Regime) -> tuple[int, int]:
    """(activations, buffers) at the worst Linear's backward of the MLP: the outputs earlier
    blocks saved, the gradients in and out of this one and its weight's fresh fp32 gradient
    (before DDP copies it into its bucket). The first Linear (784x256) usually wins."""
    sizes, b, e = flops.MLP_SIZES, shape.batch_size, r.compute_bytes
    best = (0, 0)
    for i in range(len(sizes) - 1):
        held = e * b * sum(sizes[1 : i + 1])
        grads = e * b * (sizes[i + 1] + (sizes[i] if i else 0))  # no gradient for the input
        fresh = 4 * (sizes[i] * sizes[i + 1] + sizes[i + 1])
        if held + grads + fresh > sum(best):
            best = (held + grads, fresh)
    return best


def phases(shape: ModelShape, r: Regime) -> dict[str, dict[str, int]]:
    """Components allocated at each candidate peak moment of a step (states included)."""
    st = states(shape, r)
    act = activations(shape, r)
    e_c = r.compute_bytes
    fsdp = r.strategy == "fsdp"
    base = {**st, "batch": batch_bytes(shape)}
    if r.autocast:
        base["autocast copies"] = 2 * shape.matmul_parameters
    if fsdp and shape.blocks:
        biggest = max(shape.blocks, key=_numel)
        block = e_c * _padded(biggest, r.world)
        kept = e_c * (_padded(shape.root, r.world) + _padded(shape.blocks[-1], r.world))
    else:
        biggest, block, kept = (), 0, 0

    # The loss's backward: everything forward saved, plus the loss path (usually the peak).
    loss = dict(base)
    if fsdp:
        # root and last block stay gathered (the last flat all-gather output is released
        # when the root's forward ends)
        loss["gathered parameters"] = kept
    loss["activations"] = act["held"] + act["final_norm"]
    loss["logits"] = act["logits"]

    # The last block's backward: its recomputed activations (with activation checkpointing),
    # gradient temporaries and the strategy's buffers.
    bwd = dict(base)
    if fsdp:
        # + the block prefetched for the next backward (its flat all-gather output is freed
        # right after the copy-out in backward)
        bwd["gathered parameters"] = kept + block
        # the block's unsharded gradients (compute dtype) as backward produces them, and the
        # root's, which wait for the root's reduce-scatter at the end of backward (the head's
        # weight gradient is there from the start). Each block's fp32 reduce-scatter input
        # comes after its activations are freed, so it does not add to this moment.
        head = shape.vocab_size * shape.d_model if shape.kind != "mlp" else 0
        bwd["buffers"] = block + e_c * head
    elif shape.kind == "mlp":
        bwd["activations"], bwd["buffers"] = _mlp_backward(shape, r)
    else:
        in_blocks = [flops.numel(s) for b in shape.blocks for s in b]
        # a block weight's fresh gradient before DDP copies it into its bucket
        bwd["buffers"] = (4 + (2 if r.autocast else 0)) * max(in_blocks, default=0)
    if shape.kind != "mlp":
        bwd["activations"] = act["held"] + act["recompute"] + act["grad_temps"]

    out = {"loss backward": loss, "block backward": bwd}
    if fsdp:
        # fully_shard moves one group (a block, then the root) to the device in fp32 and
        # shards it there: the largest group whole, plus every shard
        groups = [_numel(g) for g in (*shape.blocks, shape.root)]
        out["setup (FSDP sharding)"] = {"parameters": 4 * max(groups) + st["parameters"]}
    return out


def estimate_memory(
    shape: ModelShape,
    r: Regime,
    *,
    capacity: int | None,
    procs_per_pod: int,
    async_checkpoint: bool,
) -> MemoryEstimate:
    """``async_checkpoint``: each rank stages its state in host memory and runs DCP's
    checkpoint process beside it (`facts.CHECKPOINT_PROCESS_BYTES`), both host memory of the
    pod."""
    candidates = phases(shape, r)
    phase = max(candidates, key=lambda k: sum(candidates[k].values()))
    components = {k: v for k, v in candidates[phase].items() if v}
    peak = sum(components.values())
    notes: list[str] = []
    local = states(shape, r)["parameters"] // 4
    # DCP's async save stages the rank's state (weights + two moments) in host memory
    staging = 12 * local if async_checkpoint else 0
    writer = facts.CHECKPOINT_PROCESS_BYTES if async_checkpoint else 0
    if r.device == "cuda":
        allowance = facts.CUDA_CONTEXT_BYTES + int(facts.FRAGMENTATION * peak)
        if r.world > 1:
            allowance += facts.NCCL_BYTES
        # The bundled runtime builds on the meta device and draws each rank's part on its
        # GPU (training/models/init.py): no copy of the model on the host. Own code is
        # assumed to build the fp32 model on the CPU before it moves to the GPU.
        on_host = 0 if shape.kind in ("gpt", "mlp") else 4 * shape.parameters
        per_proc = facts.HOST_PROCESS_BYTES + on_host + staging + writer
    else:
        # on CPU the "device" is the host: the process itself, the staging copy and DCP's
        # checkpoint process count
        allowance = facts.CPU_PROCESS_BYTES + staging + writer
        per_proc = peak + allowance
    if shape.compile:
        notes.append("torch.compile usually saves fewer activations than eager; eager assumed")
    return MemoryEstimate(
        components=components,
        phase=phase,
        allowance=allowance,
        capacity=capacity,
        host_per_pod=procs_per_pod * per_proc,
        notes=tuple(notes),
        phases=candidates,
    )
