"""Host memory of DCP's checkpoint process (one per rank of an ``--async-checkpoint`` run).

    .venv/bin/python bench/dcp_child_memory.py [--workers 2] [--state-mib 256] [--saves 2]

Starts ``--workers`` ranks (gloo, CPU), each of which starts DCP's checkpoint process the way
the runtime does at set-up (`training/checkpoint.py` `_WriterStart`), then saves a state of
``--state-mib`` MiB per rank asynchronously ``--saves`` times through that process (the
runtime's `_RunStager`: staging buffers in shared memory, written by the process with the
runtime's `TrainforgeWriter`). After the start and after every save, each rank reads its
checkpoint process's /proc/<pid>/status and /proc/<pid>/smaps_rollup, and its own.

What the process adds to the pod's memory (the container's cgroup) is its anonymous memory
(``RssAnon``): its file pages are the parent's shared libraries, already in the page cache
(charged once), and its ``RssShmem`` is the staging buffers, which the parent allocated
(counted by the memory model as staging). Results in docs/performance.md ("Host memory of
DCP's checkpoint process").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KIB = 1024
MIB = 1 << 20
STATUS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
ROLLUP_KEYS = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Private_Dirty", "Anonymous")


def read_memory(pid: int) -> dict[str, float]:
    """MiB of the keys above, from /proc/<pid>/status and /proc/<pid>/smaps_rollup."""
    out: dict[str, float] = {}
    for name, keys in (("status", STATUS_KEYS), ("smaps_rollup", ROLLUP_KEYS)):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in keys:
                out[key] = round(int(rest.split()[0]) * KIB / MIB, 1)
    return out


def rank_main(state_mib: int, saves: int) -> None:
    import multiprocessing  # noqa: PLC0415

    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415
    from torch.distributed.checkpoint.state_dict_saver import (  # noqa: PLC0415
        AsyncCheckpointerType,
    )

    from trainforge.training import checkpoint  # noqa: PLC0415
    from trainforge.training.dcp_writer import TrainforgeWriter  # noqa: PLC0415

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    result: dict[str, Any] = {"rank": rank, "parent_before": read_memory(os.getpid())}
    start = checkpoint._WriterStart.begin()
    start.wait()
    if start.error is not None:
        raise SystemExit(f"rank {rank}: the checkpoint process did not start: {start.error!r}")
    (child,) = multiprocessing.active_children()
    result["child_pid"] = child.pid
    result["after_start"] = read_memory(child.pid)
    result["parent_after_start"] = read_memory(os.getpid())
    n = state_mib * MIB // 4 // 3
    state = {"weight": torch.randn(n), "exp_avg": torch.randn(n), "exp_avg_sq": torch.rand(n)}
    stager = checkpoint._RunStager(cuda=False)
    with tempfile.TemporaryDirectory(prefix="dcp-child-mem-") as tmp:
        for i in range(saves):
            path = Path(tmp) / f"step_{i}"
            path.mkdir()
            fut = dcp.async_save(
                state,
                storage_writer=TrainforgeWriter(str(path)),
                async_checkpointer_type=AsyncCheckpointerType.PROCESS,
                async_stager=stager,
            )
            getattr(fut, "upload_completion", fut).result()
            dist.barrier()
            result[f"after_save_{i + 1}"] = read_memory(child.pid)
    result["parent_end"] = read_memory(os.getpid())
    stager.close()
    print(json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--state-mib", type=int, default=256)
    ap.add_argument("--saves", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every rank's readings here")
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank_main(args.state_mib, args.saves)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    env["WORLD_SIZE"] = str(args.workers)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # the script is guarded by `if __name__ == "__main__":`: safe for spawn's re-import
    cmd = [sys.executable, __file__]
    extra = ["--rank", "--state-mib", str(args.state_mib), "--saves", str(args.saves)]
    procs = [
        subprocess.Popen([*cmd, *extra], env={**env, "RANK": str(r)}, stdout=subprocess.PIPE)
        for r in range(args.workers)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a rank exited {p.returncode}")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    print(f"torch {__import__('torch').__version__}, {args.workers} ranks, "
          f"{args.state_mib} MiB of state per rank, MiB:")  # fmt: skip
    for res in results:
        for phase in ("after_start", *(f"after_save_{i + 1}" for i in range(args.saves))):
            print(f"rank {res['rank']} child {phase}: {res[phase]}")
        print(f"rank {res['rank']} parent before start: {res['parent_before']}")
        print(f"rank {res['rank']} parent at the end: {res['parent_end']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
