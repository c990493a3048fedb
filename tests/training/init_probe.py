"""Run as every rank of a job: build models the runtime's way (meta, parallelize, then
materialise and initialise each rank's part) and write the digests of their full parameters.

    RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. python tests/training/init_probe.py \
        OUT.json '[[STRATEGY, BLOCK_ELEMENTS, [FLAG, ...]], ...]'

BLOCK_ELEMENTS overrides models/init.py's generator block size, so that small test models have
blocks that straddle the shard boundaries. Rank 0 writes, per case, {name: digest}
(agreement.py's exact bit digests) and each rank's own row count of every parameter.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch


def probe(strategy: str, block: int, flags: list[str], env: Any) -> dict[str, Any]:
    from trainforge.training import agreement
    from trainforge.training.config import parse_args
    from trainforge.training.models import build_model, init
    from trainforge.training.parallel import parallelize, resolve_precision, unwrap

    init.BLOCK_ELEMENTS = block
    cfg = parse_args(["--strategy", strategy, *flags])
    model = build_model(cfg, device="meta")
    model = parallelize(model, cfg, env, resolve_precision(cfg, env.device))
    digests, rows = {}, {}
    for name, p in unwrap(model).named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        digests[name] = list(agreement.tensor_digest(full.detach()))
        local = p.to_local() if hasattr(p, "to_local") else p
        rows[name] = int(local.shape[0]) if local.dim() else 1
    gathered: list[Any] = [None] * env.world_size
    torch.distributed.all_gather_object(gathered, rows)
    return {"digests": digests, "rows": gathered}


def main(out: str, cases: str) -> int:
    from trainforge.training.distributed import cleanup, init_distributed

    torch.set_num_threads(1)
    env = init_distributed()
    try:
        results = [probe(s, int(b), list(f), env) for s, b, f in json.loads(cases)]
        torch.distributed.barrier()  # both ranks done before either tears gloo down
    finally:
        cleanup()
    if env.rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(results, f)
    return 0


if __name__ == "__main__":
    # As the runtime's ranks end (trainforge/core/process.py: a quick exit; `cleanup` above
    # has already freed the group and ended gloo's threads, tests/training/test_teardown.py).
    from trainforge.core.process import exit_code

    sys.exit(exit_code(main(*sys.argv[1:])))
