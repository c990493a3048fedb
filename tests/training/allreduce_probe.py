"""Run as every rank: the all-reduce acceptance test (`acceptance.allreduce.main`), then write
which of the process group's threads still run in this process once it has returned.

    RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. python tests/training/allreduce_probe.py \
        OUT_PREFIX [ALLREDUCE FLAG ...]

Each rank writes OUT_PREFIX.RANK.json: {"code": main's exit code, "during": [name, ...],
"after": [name, ...]} (thread names as tests/training/teardown_probe.py reads them; "during":
from inside main's last collective, where the group is up).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.training.teardown_probe import group_threads  # noqa: E402


def main(prefix: str, *flags: str) -> int:
    import torch.distributed as dist

    from trainforge.training.acceptance import allreduce

    during: list[str] = []
    gather = dist.all_gather_object

    def all_gather_object(*a, **k):  # the group is up here: its threads run
        during.extend(group_threads())
        return gather(*a, **k)

    dist.all_gather_object = all_gather_object
    code = allreduce.main(list(flags))
    out = {"code": code, "during": during, "after": group_threads()}
    Path(f"{prefix}.{os.environ.get('RANK', '0')}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
