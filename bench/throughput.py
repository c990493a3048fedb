"""Training throughput, side by side on identical work: the runtime vs the seed's loop vs the floor.

Three loops train the same model with the same per-rank batch, dataset size, optimizer and number
of steps on the same number of workers (separate process groups, run one after another, each
timed from a barrier before its first step to a host sync after its last):

  runtime  `python -m trainforge.training` (tensors batched by index, loss synced every
           --log-every steps, DDP gradient_as_bucket_view / FSDP2)
  seed     the seed documents' loop: DataLoader + DistributedSampler over an in-memory
           TensorDataset (per-sample __getitem__ + collate), DDP, `.item()` every step
  floor    the barest correct DDP loop: batches preloaded per rank, forward, backward (DDP's
           bucketed gradient all-reduce overlapped with it), optimizer step; nothing else

Default (CPU, 2 workers, gloo, MLP): `python bench/throughput.py` (about 2 minutes).
GPU: `python bench/throughput.py --device cuda --workers 1 --model gpt --strategy fsdp --compile`
(see docs/performance.md for the sizes used).
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


# ------------------------------------------------------------------------------ the parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], workers: int, threads: int) -> list[str]:
    """Start `workers` ranks of `cmd` with the env torchrun would give them."""
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
            raise SystemExit(f"rank {rank} of {cmd[:4]} failed ({p.returncode}):\n{out[-3000:]}")
    return outs


def training_flags(a: argparse.Namespace) -> list[str]:
    flags = ["--model", a.model, "--strategy", a.strategy, "--steps", str(a.steps)]
    flags += ["--batch-size", str(a.batch_size), "--dataset-size", str(a.dataset_size)]
    flags += ["--lr", "1e-3", "--warmup-steps", "0", "--seed", "0", "--precision", a.precision]
    if a.model == "gpt":
        flags += ["--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads)]
        flags += ["--seq-len", str(a.seq_len), "--vocab-size", str(a.vocab_size)]
    if a.compile:
        flags.append("--compile")
    return flags


def run_runtime(a: argparse.Namespace, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "trainforge.training", *training_flags(a)]
        cmd += ["--log-every", str(a.log_every), "--output-dir", out]
        launch(cmd, a.workers, threads)
        s = json.loads((Path(out) / "summary.json").read_text())
    return {"seconds": s["elapsed_seconds"], "mfu": s.get("mfu"), "loss": s["final_loss"]}


def run_worker_mode(mode: str, a: argparse.Namespace, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", mode, *training_flags(a), "--device", a.device]
    outs = launch(cmd, a.workers, threads)
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main_parent(a: argparse.Namespace) -> int:
    threads = a.threads or max(1, (os.cpu_count() or 1) // a.workers)
    modes = {
        "runtime": lambda: run_runtime(a, threads),
        "seed": lambda: run_worker_mode("seed", a, threads),
        "floor": lambda: run_worker_mode("floor", a, threads),
    }
    print(
        f"throughput bench: {a.model} {a.strategy} on {a.workers} x {a.device}, batch {a.batch_size}"
        f"/rank, {a.dataset_size} samples, {a.steps} steps, {threads} thread(s)/worker, "
        f"{a.repeats} repeat(s), interleaved",
        flush=True,
    )
    times: dict[str, list[float]] = {m: [] for m in modes}
    extra: dict[str, dict] = {}
    for r in range(a.repeats):
        for name, fn in modes.items():
            res = fn()
            times[name].append(res["seconds"])
            extra[name] = res
            print(
                f"  repeat {r + 1}: {name:<8} {a.steps / res['seconds']:8.1f} steps/s", flush=True
            )
    samples = a.batch_size * a.workers
    tokens = samples * (a.seq_len if a.model == "gpt" else 1)
    best = {m: min(t) for m, t in times.items()}
    med = {m: statistics.median(t) for m, t in times.items()}
    print()
    print("| loop | steps/s (best) | steps/s (median) | samples/s | vs seed | vs floor |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = {}
    for m in modes:
        sps = a.steps / best[m]
        rows[m] = {
            "steps_per_s_best": sps,
            "steps_per_s_median": a.steps / med[m],
            "samples_per_s": sps * samples,
            "tokens_per_s": sps * tokens,
            "vs_seed": best["seed"] / best[m],
            "vs_floor": best["floor"] / best[m],
        }
        r_ = rows[m]
        print(
            f"| {m} | {sps:.1f} | {r_['steps_per_s_median']:.1f} | {r_['samples_per_s']:,.0f} | "
            f"{r_['vs_seed']:.2f}x | {100 * r_['vs_floor']:.0f}% |"
        )
    mfu = extra["runtime"].get("mfu")
    if mfu is not None:
        print(f"\nruntime MFU: {100 * mfu:.1f}%  tokens/s: {rows['runtime']['tokens_per_s']:,.0f}")
    if a.json:
        Path(a.json).write_text(
            json.dumps({"args": vars(a), "rows": rows, "times": times}, indent=2)
        )
    return 0


# ------------------------------------------------------------------------------ the workers


def main_worker(a: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    from trainforge.training.config import TrainConfig
    from trainforge.training.data import build_dataset
    from trainforge.training.models import build_model

    cuda = a.device == "cuda"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    cfg = TrainConfig(
        model=a.model, layers=a.layers, d_model=a.d_model, heads=a.heads, seq_len=a.seq_len,
        vocab_size=a.vocab_size, dataset_size=a.dataset_size, seed=0,
    )  # fmt: skip
    ds = build_dataset(cfg)
    x_all, y_all = ds.inputs, ds.targets
    model = build_model(cfg).to(device)
    loss_fn = model.loss_from_logits
    bf16 = cuda and a.precision != "fp32"
    amp = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if bf16
        else torch.autocast("cpu", enabled=False)
    )

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    if a.worker == "seed":
        # The seed's loop: per-sample Dataset indexing, default collate, .item() every step.
        model = DDP(model, device_ids=[device.index] if cuda else None)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        sampler = DistributedSampler(
            TensorDataset(x_all, y_all), shuffle=True, seed=0, drop_last=True
        )
        loader = DataLoader(
            TensorDataset(x_all, y_all), batch_size=a.batch_size, sampler=sampler, drop_last=True
        )
        step, epoch = 0, 0
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        while step < a.steps:
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                opt.zero_grad()
                with amp:
                    loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                last = loss.item()  # the per-step host sync
                step += 1
                if step == a.steps:
                    break
            epoch += 1
    else:
        # The floor: DDP (bucketed all-reduce overlapped with backward) over batches
        # preloaded per rank; no loss sync, no logging, nothing else.
        model = DDP(
            model, device_ids=[device.index] if cuda else None, gradient_as_bucket_view=True
        )
        extra = {"fused": True} if cuda else {}
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, **extra)
        n_batches = len(x_all) // (a.batch_size * world)
        g = torch.Generator().manual_seed(0)
        perm = torch.randperm(len(x_all), generator=g)[: n_batches * a.batch_size * world]
        mine = perm.view(n_batches, world, a.batch_size)[:, rank]
        xs, ys = x_all[mine].to(device), y_all[mine].to(device)
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for step in range(a.steps):
            i = step % n_batches
            with amp:
                loss = loss_fn(model(xs[i]), ys[i])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        last = loss.item()
    sync()
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        print("RESULT " + json.dumps({"seconds": seconds, "loss": last, "mfu": None}), flush=True)
    dist.destroy_process_group()
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", choices=["seed", "floor"], help=argparse.SUPPRESS)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--workers", type=int, default=2, help="ranks (GPUs on cuda)")
    p.add_argument(
        "--threads", type=int, default=0, help="intra-op threads per worker (0 = cores/workers)"
    )
    p.add_argument("--model", choices=["mlp", "gpt"], default="mlp")
    p.add_argument(
        "--strategy",
        choices=["ddp", "fsdp"],
        default="ddp",
        help="runtime only; seed/floor are DDP-style",
    )
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--dataset-size", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    p.add_argument("--compile", action="store_true", help="runtime only: torch.compile blocks")
    p.add_argument("--log-every", type=int, default=50, help="runtime's loss-sync interval")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", help="also write the results here")
    # worker-side names for the training flags
    p.add_argument("--lr", help=argparse.SUPPRESS)
    p.add_argument("--warmup-steps", help=argparse.SUPPRESS)
    p.add_argument("--seed", help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    sys.exit(main_worker(args) if args.worker else main_parent(args))
