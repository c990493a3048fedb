"""The checkpointing flags and their validated form, without torch.

Why a module of its own: `python -m trainforge.training --help`, argument parsing and
`run-local`'s validation need the flags and their checks, not torch or DCP (which take seconds
to import); `trainforge.training.checkpoint` re-exports everything here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainforge.training.layout import CheckpointError


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """What the training flags ask of checkpointing (``--checkpoint-*``, ``--resume``...)."""

    directory: str | None = None
    every: int = 0  # save every N optimizer steps; 0 = only at the end and on SIGTERM
    keep_last: int = 3  # complete checkpoints to keep; 0 = keep all
    resume: str = "auto"  # auto | never | PATH to a step directory
    async_save: bool = False
    s3_uri: str | None = None
    grace_period: float = 90.0

    def validate(self) -> None:
        """Fail fast with the flag name, the bad value and what is valid."""
        if self.every < 0:
            raise CheckpointError(f"--checkpoint-every must be >= 0 (0 = off), got {self.every}")
        if self.keep_last < 0:
            raise CheckpointError(f"--keep-last must be >= 0 (0 = keep all), got {self.keep_last}")
        if self.grace_period <= 0:
            raise CheckpointError(f"--grace-period must be > 0 seconds, got {self.grace_period}")
        if self.directory is None:
            for flag, value in (
                ("--checkpoint-every", self.every),
                ("--async-checkpoint", self.async_save),
                ("--checkpoint-s3", self.s3_uri),
            ):
                if value:
                    raise CheckpointError(f"{flag} {value} needs --checkpoint-dir DIR")
        if self.s3_uri is not None and not self.s3_uri.startswith("s3://"):
            raise CheckpointError(
                f"--checkpoint-s3 must look like s3://bucket/prefix, got {self.s3_uri!r}"
            )

    @property
    def enabled(self) -> bool:
        return self.directory is not None


def add_checkpoint_arguments(parser: Any) -> None:
    """The checkpointing flags, for the runtime's argparse parser."""
    g = parser.add_argument_group("checkpointing")
    g.add_argument(
        "--checkpoint-dir",
        default=None,
        metavar="DIR",
        help="directory for step_NNNNNN checkpoints, shared by all ranks (off if unset)",
    )
    g.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="N",
        help="save every N optimizer steps (0 = only at the end and on SIGTERM)",
    )
    g.add_argument(
        "--keep-last",
        type=int,
        default=3,
        metavar="N",
        help="keep the newest N complete checkpoints (0 = keep all)",
    )
    g.add_argument(
        "--resume",
        default="auto",
        metavar="auto|never|PATH",
        help="auto: newest complete checkpoint in --checkpoint-dir (or S3); "
        "never: start fresh; PATH: that step_NNNNNN directory",
    )
    g.add_argument(
        "--async-checkpoint",
        action="store_true",
        help="write checkpoints in the background (training waits only for staging)",
    )
    g.add_argument(
        "--checkpoint-s3",
        default=None,
        metavar="s3://bucket/prefix",
        help="mirror complete checkpoints to S3; download the newest when the "
        "local dir has none (needs boto3)",
    )
    g.add_argument(
        "--grace-period",
        type=float,
        default=90.0,
        metavar="SECONDS",
        help="time budget to checkpoint and exit after SIGTERM (default 90)",
    )


def config_from_args(args: Any) -> CheckpointConfig:
    return CheckpointConfig(
        directory=getattr(args, "checkpoint_dir", None),
        every=getattr(args, "checkpoint_every", 0) or 0,
        keep_last=getattr(args, "keep_last", 3),
        resume=str(getattr(args, "resume", "auto") or "auto"),
        async_save=bool(getattr(args, "async_checkpoint", False)),
        s3_uri=getattr(args, "checkpoint_s3", None),
        grace_period=float(getattr(args, "grace_period", 90.0)),
    )
