"""`python -m trainforge.training [flags]`: one process of a DDP/FSDP2 training job."""

from __future__ import annotations

import os
import sys

from trainforge.training.config import ConfigError, parse_args


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)  # bad flags: usage + message, exit 2, before anything starts
    from trainforge.training.checkpoint import CheckpointError
    from trainforge.training.loop import train

    try:
        return train(cfg)
    except (ConfigError, CheckpointError) as e:
        # Raised identically on every rank (they see the same flags and data); print once.
        if os.environ.get("RANK", "0") == "0":
            print(f"error: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
