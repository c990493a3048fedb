"""Run as every rank of a job: train with the runtime (`loop.train`), then write which of the
process group's threads still run in this process once `train` has returned.

    RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. python tests/training/teardown_probe.py \
        OUT_PREFIX [TRAINING FLAG ...]

Each rank writes OUT_PREFIX.RANK.json: {"code": train's exit code, "during": [name, ...],
"after": [name, ...]}, the names (from /proc/self/task/*/comm) of gloo's and the TCP store's
threads while the group is up (after one all-reduce) and once `train` has returned.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# gloo's worker threads, its TCP device's event loop, the rendezvous store's server loop
GROUP_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop", "pt_tcpstore_uv")


def group_threads() -> list[str]:
    names = []
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:  # the thread ended while we listed them
            continue
        if name in GROUP_THREADS:
            names.append(name)
    return sorted(names)


def main(prefix: str, *flags: str) -> int:
    import torch

    from trainforge.training.config import parse_args
    from trainforge.training.distributed import init_distributed
    from trainforge.training.loop import train

    cfg = parse_args(list(flags))
    # the group `train` then uses (it initialises none when one exists) and tears down
    torch.distributed.all_reduce(torch.ones(1, device=init_distributed().device))
    during = group_threads()
    code = train(cfg)
    out = {"code": code, "during": during, "after": group_threads()}
    Path(f"{prefix}.{os.environ.get('RANK', '0')}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    from trainforge.core.process import exit_code

    sys.exit(exit_code(main(*sys.argv[1:])))
