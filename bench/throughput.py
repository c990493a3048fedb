"""Training throughput, side by side on identical work: the runtime vs the seed's loop vs the floor.

Three loops train the same model with the same per-rank batch, dataset size, optimizer and number
of steps, in ONE job of N workers (one process tree, one process group): the rounds interleave
the three loops so that any background load hits all of them alike, and each loop is timed from
a barrier before its first step to a host sync after its last.

  runtime  trainforge's own loop (`trainforge.training.loop`, exactly what
           `python -m trainforge.training` runs): tensors batched by index, loss synced every
           --log-every steps, DDP gradient_as_bucket_view (or FSDP2 with --strategy fsdp)
  seed     the seed document's loop as its script is written (bench/seed_loop.py, copied from
           the seed with its origin): DataLoader(num_workers=2) + DistributedSampler,
           optim.Adam, `.item()` every step, fp32
  seed_bf16  the same with torch.autocast(bf16), as a user would add it (GPU only)
  floor    the barest correct DDP loop: batches preloaded per rank, forward (autocast where
           the runtime's precision is bf16), backward (DDP's bucketed gradient all-reduce
           overlapped with it), the runtime's optimizer step; nothing else

Every loop is timed in its steady state: floor and seed after WARMUP untimed steps, the
runtime by its summary's steady rate (its start-up windows left out: compilation, first steps).
The table's last column is the median over rounds of each round's own ratio to the floor: on a
shared machine, load drifts between rounds and the per-round ratio cancels most of it.

After the rounds, the ops of one steady step of the floor and of the runtime are counted
(``ops_per_step``: every aten op dispatched, on the host and in the backward pass, collectives
included) and the runtime's extra ops named: a count, where a small model's timing is noise.

Default (CPU, 2 workers, gloo, MLP): `python bench/throughput.py` (about a minute).
GPU: `python bench/throughput.py --device cuda --workers 1 --model gpt --strategy fsdp --compile`
with a size that fills the GPU (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # seed_loop.py
MODES = ("floor", "runtime", "seed", "seed_bf16")
WARMUP = 2  # untimed first steps of floor and seed (the runtime leaves out its start-up windows)


def modes(device: str) -> tuple[str, ...]:
    """bf16 autocast of the seed's loop is a GPU comparison (CPU runs the runtime in fp32)."""
    return MODES if device == "cuda" else tuple(m for m in MODES if m != "seed_bf16")


# ------------------------------------------------------------------------------ the parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], workers: int, threads: int) -> list[str]:
    """Start `workers` ranks of `cmd` with the environment torchrun would give them."""
    port = str(_free_port())
    procs = []
    for rank in range(workers):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            RANK=str(rank),
            WORLD_SIZE=str(workers),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(workers),
            OMP_NUM_THREADS=str(threads),
            PYTHONPATH=str(ROOT),
        )
        procs.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outs = [p.communicate()[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs, strict=True)):
        if p.returncode != 0:
            raise SystemExit(f"rank {rank} failed ({p.returncode}):\n{out[-3000:]}")
    return outs


def main_parent(a: argparse.Namespace) -> int:
    threads = a.threads or max(1, (os.cpu_count() or 1) // a.workers)
    print(
        f"throughput bench: {a.model} {a.strategy} on {a.workers} x {a.device}, batch "
        f"{a.batch_size}/rank, {a.dataset_size} samples, {a.steps} steps per loop, "
        f"{threads} thread(s)/worker, {a.rounds} interleaved rounds",
        flush=True,
    )
    cmd = [sys.executable, __file__, "--worker", *sys.argv[1:]]
    outs = launch(cmd, a.workers, threads)
    for line in outs[0].splitlines():
        if line.startswith("  round"):
            print(line)
    result = json.loads(next(ln for ln in outs[0].splitlines() if ln.startswith("RESULT "))[7:])
    times: dict[str, list[float]] = result["times"]
    samples = a.batch_size * a.workers
    # tokens only for the GPT: the MLP's samples are feature vectors (no tokens/s for it)
    tokens = samples * a.seq_len if a.model == "gpt" else None
    best = {m: min(t) for m, t in times.items()}
    med = {m: statistics.median(t) for m, t in times.items()}
    print()
    print(
        "| loop | steps/s (median) | steps/s (best) | samples/s (median) | vs seed | vs floor "
        "| vs floor (median of rounds) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = {}
    for m in modes(a.device):
        sps = a.steps / med[m]
        rows[m] = {
            "steps_per_s_median": sps,
            "steps_per_s_best": a.steps / best[m],
            "samples_per_s": sps * samples,
            "tokens_per_s": sps * tokens if tokens is not None else None,
            "vs_seed": med["seed"] / med[m],
            "vs_floor": med["floor"] / med[m],
            # each round's loops ran back to back: their ratio cancels load that drifts
            # between rounds (a shared machine), so its median is the steadier comparison
            "vs_floor_paired": statistics.median(
                f / t for f, t in zip(times["floor"], times[m], strict=True)
            ),
        }
        r = rows[m]
        print(
            f"| {m} | {sps:.1f} | {r['steps_per_s_best']:.1f} | {r['samples_per_s']:,.0f} | "
            f"{r['vs_seed']:.2f}x | {100 * r['vs_floor']:.0f}% | "
            f"{r['vs_floor_paired']:.3f}x |"
        )
    print(f"\n{ops_line(result.get('ops_per_step'))}")
    if result.get("mfu") is not None:
        tps = rows["runtime"]["tokens_per_s"]
        print(
            f"\nruntime MFU {100 * result['mfu']:.1f}%" + (f", {tps:,.0f} tokens/s" if tps else "")
        )
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "rows": rows, **result}, indent=2))
    return 0


# ------------------------------------------------------------------------------ the workers


def main_worker(a: argparse.Namespace) -> int:
    from trainforge.core.process import frozen_imports

    # as a runtime rank imports them (training/__main__.py): the loop measured is the runtime's
    with frozen_imports(own_process=__name__ == "__main__"):
        import torch
        import torch.distributed as dist

        from trainforge.training.config import TrainConfig, validate
        from trainforge.training.data import build_dataset
        from trainforge.training.distributed import init_distributed
        from trainforge.training.loop import _train

    env = init_distributed()
    cfg = validate(
        TrainConfig(
            strategy=a.strategy, model=a.model, layers=a.layers, d_model=a.d_model, heads=a.heads,
            seq_len=a.seq_len, vocab_size=a.vocab_size, dataset_size=a.dataset_size,
            steps=a.steps, batch_size=a.batch_size, lr=1e-3, warmup_steps=0, seed=0,
            log_every=a.log_every, compile=a.compile, precision=a.precision,
        )
    )  # fmt: skip
    ds = build_dataset(cfg)
    out = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    times: dict[str, list[float]] = {m: [] for m in modes(a.device)}
    mfu = None
    for r in range(a.rounds):
        for mode in modes(a.device):
            if mode == "runtime":
                run_cfg = TrainConfig(**{**cfg.__dict__, "output_dir": str(out / f"{r}")})
                assert _train(run_cfg, env) == 0
                # on the rank's own device: NCCL moves device tensors only
                seconds = torch.tensor([0.0], device=env.device, dtype=torch.float64)
                if env.rank == 0:
                    s = json.loads((out / f"{r}" / "summary.json").read_text())
                    # the steady rate (or the whole loop's when the run has no steady window)
                    seconds[0], mfu = a.steps / s["steps_per_second"], s.get("mfu")
                dist.broadcast(seconds, 0)
                seconds = float(seconds[0].item())
            elif mode.startswith("seed"):
                seconds = run_seed(a, cfg, ds, env, bf16=mode == "seed_bf16")
            else:
                seconds = floor_loop(a, cfg, ds, env)
            times[mode].append(seconds)
            if env.rank == 0:
                print(f"  round {r + 1}: {mode:<8} {a.steps / seconds:8.1f} steps/s", flush=True)
    ops = ops_per_step(a, cfg, ds, env, out / "ops")
    if env.rank == 0:
        print("RESULT " + json.dumps({"times": times, "mfu": mfu, "ops_per_step": ops}), flush=True)
    dist.destroy_process_group()
    return 0


def _model_and_amp(a, cfg, env):
    import torch

    from trainforge.training.models import build_model
    from trainforge.training.parallel import resolve_precision

    model = build_model(cfg).to(env.device)
    cuda = env.device.type == "cuda"
    # the runtime's precision (bf16 where it autocasts: auto on a bf16 GPU, or --precision
    # bf16 on any device), so that both loops do the same arithmetic
    bf16 = resolve_precision(cfg, env.device) == torch.bfloat16
    amp = torch.autocast(env.device.type, dtype=torch.bfloat16, enabled=bf16)
    return model, amp, cuda


def _sync(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()


def run_seed(a, cfg, ds, env, *, bf16: bool) -> float:
    """The seed's loop (bench/seed_loop.py) on the bench's model and data."""
    from seed_loop import seed_loop

    from trainforge.training.models import build_model

    model = build_model(cfg).to(env.device)
    return seed_loop(model, ds.inputs, ds.targets, device=env.device, batch_size=a.batch_size,
                     steps=a.steps, warmup=WARMUP, bf16=bf16)  # fmt: skip


def floor_loop(a, cfg, ds, env) -> float:
    """DDP over batches preloaded per rank: forward, backward, optimizer step, nothing else."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from trainforge.training.loop import build_optimizer

    model, amp, cuda = _model_and_amp(a, cfg, env)
    loss_fn = model.loss_from_logits
    model = DDP(model, device_ids=[env.local_rank] if cuda else None, gradient_as_bucket_view=True)
    # the runtime's optimizer (fused AdamW on CUDA, foreach on CPU; the GPT's biases and norms
    # in a second group without weight decay): the same optimizer work in both loops
    opt = build_optimizer(model, cfg, env.device)
    world = env.world_size
    n_batches = len(ds.inputs) // (a.batch_size * world)
    perm = torch.randperm(len(ds.inputs), generator=torch.Generator().manual_seed(0))
    mine = perm[: n_batches * a.batch_size * world].view(n_batches, world, a.batch_size)[
        :, env.rank
    ]
    xs, ys = ds.inputs[mine].to(env.device), ds.targets[mine].to(env.device)
    t0 = 0.0
    for step in range(WARMUP + a.steps):
        if step == WARMUP:
            _sync(cuda)
            dist.barrier()
            t0 = time.perf_counter()
        i = step % n_batches
        with amp:
            loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    loss.item()
    _sync(cuda)
    dist.barrier()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------ ops per step

# the 1-based steady step whose ops are counted in a runtime run of COUNT_STEPS steps: not
# logged (the last step is), after DDP's bucket rebuild (step 2); the floor's per-step count
# is the difference of runs of FLOOR_STEPS[1] and FLOOR_STEPS[0] steps (its warm-up and its
# final read cancel)
COUNT_STEP, COUNT_STEPS = 4, 6
FLOOR_STEPS = (3, 6)


def _op_counter(key):
    """A TorchDispatchMode counting every aten op dispatched while active, per ``key()``."""
    import collections

    from torch.utils._python_dispatch import TorchDispatchMode

    class OpCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: dict = collections.defaultdict(collections.Counter)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.counts[key()][func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    return OpCounter()


def count_ops(a, cfg, ds, env, out: Path) -> dict[str, dict[str, int]]:
    """Aten ops of one steady step: {"floor": {op: n}, "runtime": {op: n}} (a collective:
    every rank runs both loops). Ops, not time: what the runtime's step adds to the bare
    loop's, exactly, on any device (on CUDA each is about one kernel launch, or a collective)."""
    from trainforge.training import exits
    from trainforge.training.config import TrainConfig
    from trainforge.training.loop import _train

    floor = []
    for steps in FLOOR_STEPS:
        mode = _op_counter(lambda: None)
        with mode:
            floor_loop(argparse.Namespace(**{**vars(a), "steps": steps}), cfg, ds, env)
        floor.append(mode.counts[None])
    n = FLOOR_STEPS[1] - FLOOR_STEPS[0]
    per_floor = {}
    for op in set(floor[0]) | set(floor[1]):
        d, r = divmod(floor[1][op] - floor[0][op], n)
        if r:  # not the same ops every step: no per-step count to compare
            raise RuntimeError(f"the floor's {op} count is not the same every step")
        if d:
            per_floor[op] = d
    exits.context = exits.Context()  # the runtime's step numbers key its ops (train() does it)
    run_cfg = TrainConfig(
        **{**cfg.__dict__, "steps": COUNT_STEPS, "log_every": COUNT_STEPS, "output_dir": str(out)}
    )
    mode = _op_counter(lambda: exits.context.step)
    with mode:
        assert _train(run_cfg, env) == 0
    return {"floor": per_floor, "runtime": dict(mode.counts[COUNT_STEP])}


def ops_per_step(a, cfg, ds, env, out: Path) -> dict:
    """count_ops and what the runtime adds (``extra``: op -> count, negative = fewer); an
    error where counting fails, so that the timed rounds still report."""
    try:
        ops = count_ops(a, cfg, ds, env, out)
    except Exception as e:  # noqa: BLE001 - the timing above stands on its own
        return {"error": f"{type(e).__name__}: {e}"}
    floor, runtime = ops["floor"], ops["runtime"]
    extra = {op: runtime.get(op, 0) - floor.get(op, 0) for op in sorted(set(floor) | set(runtime))}
    return {
        "floor": sum(floor.values()),
        "runtime": sum(runtime.values()),
        "extra": {op: n for op, n in extra.items() if n},
        "floor_ops": floor,
        "runtime_ops": runtime,
    }


def ops_line(ops: dict | None) -> str:
    if not ops:
        return "aten ops per steady step: not counted"
    if "error" in ops:
        return f"aten ops per steady step: not counted ({ops['error']})"
    extra = ", ".join(f"{n:+d} {op}" for op, n in ops["extra"].items()) or "none"
    return (
        f"aten ops per steady step: floor {ops['floor']}, runtime {ops['runtime']} "
        f"(the runtime's extra: {extra})"
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cuda: NCCL, 1 GPU per worker"
    )
    p.add_argument("--workers", type=int, default=2, help="ranks (GPUs with --device cuda)")
    p.add_argument(
        "--threads", type=int, default=0, help="intra-op threads per worker (0 = cores/workers)"
    )
    p.add_argument("--model", choices=["mlp", "gpt"], default="mlp")
    p.add_argument(
        "--strategy",
        choices=["ddp", "fsdp"],
        default="ddp",
        help="the runtime's strategy (seed and floor are DDP)",
    )
    p.add_argument("--steps", type=int, default=200, help="steps per loop per round")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--dataset-size", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    p.add_argument("--compile", action="store_true", help="the runtime compiles its blocks")
    p.add_argument("--log-every", type=int, default=50, help="the runtime's loss-sync interval")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median reported)")
    p.add_argument("--json", help="also write the results to this file")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    if args.device == "cuda" and not args.worker:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device visible")
    sys.exit(main_worker(args) if args.worker else main_parent(args))
