"""`python -m trainforge.training.acceptance.allreduce`: an all-reduce bandwidth test through
torch.distributed, judged on the spot.

Why our own benchmark rather than nccl-tests: nccl-tests needs MPI (mpirun plus ssh or an MPI
operator) to span nodes; this runs under torchrun like every training job, in the same image
and with the same NCCL, plugin and environment a job gets, so it tests what training will use.
It prints nccl-tests' table (size, count, type, redop, root, time, algbw, busbw, #wrong; the
in-place half: torch's all_reduce is in place) so the same parser (parse.py) reads both, and
``busbw = algbw x 2(n-1)/n`` exactly as nccl-tests computes it for all-reduce.

Every rank checks its results (each rank contributes rank+1; every element must equal
n(n+1)/2) and reports which network NCCL chose (the ``NCCL_DEBUG=INFO`` lines from
``NCCL_DEBUG_FILE``); rank 0 prints them, judges the run (``parse.parse_allreduce``) and exits
1 on a failure, so the Job fails.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import sys
import time

from trainforge.training.acceptance.parse import parse_allreduce

HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
)
_EFA_LINE = ("NET/OFI Selected provider", "NET/OFI Selected Provider", "Using network",
             "NET/OFI Initializing aws-ofi-nccl", "NET/OFI Using Libfabric")  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainforge.training.acceptance.allreduce")
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--max-bytes", type=int, default=4 << 30)
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--min-busbw", type=float, default=None, metavar="GBPS")
    p.add_argument("--floor-why", default="", help="where the floor comes from (printed)")
    p.add_argument("--require-efa", action="store_true", help="fail unless NCCL used EFA")
    p.add_argument("--timeout", type=float, default=900.0, help="collective timeout, seconds")
    a = p.parse_args(argv)
    if a.min_bytes < 4 or a.max_bytes < a.min_bytes or a.factor < 2:
        p.error("need 4 <= --min-bytes <= --max-bytes and --factor >= 2")
    return a


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s - s % 4)
        s *= factor
    return out


def bus_bandwidth(size: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for an all-reduce of `size` bytes (nccl-tests' definitions)."""
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return algbw, algbw * 2 * (ranks - 1) / ranks


def format_row(size: int, seconds: float, algbw: float, busbw: float, wrong: int) -> str:
    return (
        f"{size:12d}  {size // 4:12d}     float     sum      -1  {seconds * 1e6:7.1f}  "
        f"{algbw:6.2f}  {busbw:6.2f}  {wrong:5d}"
    )


def _nccl_lines() -> list[str]:
    """This process's NCCL INFO lines about its network (from NCCL_DEBUG_FILE)."""
    pattern = os.environ.get("NCCL_DEBUG_FILE", "")
    if not pattern:
        return []
    paths = glob.glob(pattern.replace("%h", "*").replace("%p", str(os.getpid())))
    lines: list[str] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [ln.rstrip() for ln in f if any(k in ln for k in _EFA_LINE)]
        except OSError:
            continue
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    from trainforge.training.distributed import cleanup

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(
        "nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=args.timeout)
    )
    rank, n = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    expected = n * (n + 1) / 2
    big = torch.empty(args.max_bytes // 4, dtype=torch.float32, device=device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    rows = []
    for size in sizes(args.min_bytes, args.max_bytes, args.factor):
        buf = big[: size // 4]
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        wrong = int((buf != expected).sum().item())
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        sync()
        dt = torch.tensor([(time.perf_counter() - t0) / args.iters], dtype=torch.float64)
        counts = torch.tensor([wrong], dtype=torch.int64)
        if cuda:
            dt, counts = dt.to(device), counts.to(device)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the slowest rank's time, like nccl-tests
        dist.all_reduce(counts)
        seconds = float(dt.item())
        algbw, busbw = bus_bandwidth(size, seconds, n)
        rows.append(format_row(size, seconds, algbw, busbw, int(counts.item())))

    gathered: list[list[str]] = [[] for _ in range(n)]
    dist.all_gather_object(gathered, _nccl_lines())
    code = 0
    if rank == 0:
        nodes = int(os.environ.get("GROUP_WORLD_SIZE") or os.environ.get("PET_NNODES") or 1)
        text = [
            f"# trainforge allreduce: {n} ranks, torch {torch.__version__}, "
            f"backend {dist.get_backend()}, {nodes} node(s), in place",
            HEADER,
            *rows,
        ]
        busbws = [float(r.split()[7]) for r in rows]
        text.append("# Out of bounds values : 0 OK")
        text.append(f"# Avg bus bandwidth    : {sum(busbws) / max(len(busbws), 1):.3f}")
        for r, lines in enumerate(gathered):
            text += [f"# rank {r}: {ln}" for ln in lines[:8]]
        out = "\n".join(text)
        print(out, flush=True)
        verdict = parse_allreduce(
            out,
            min_busbw_gbps=args.min_busbw,
            floor_why=args.floor_why,
            require_efa=args.require_efa,
        )
        print(verdict.render(), flush=True)
        code = 0 if verdict.passed else 1
    cleanup()  # the runtime's one teardown: destroys the group and frees it (its threads end)
    return code


if __name__ == "__main__":
    sys.exit(main())
