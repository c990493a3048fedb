"""The checkpoint directory layout and its error type, without torch.

Why a module of its own: the S3 mirror and the offline plan's IAM rehearsal (which runs the
mirror's real calls against moto) need the names of the files in a checkpoint, not torch;
importing torch costs seconds. `trainforge.training.checkpoint` re-exports all of these.
"""

from __future__ import annotations

import re

STEP_DIR_RE = re.compile(r"^step_(\d{6,})$")
METADATA_FILE = ".metadata"
EXTRAS_FMT = "trainforge_rank{rank:05d}.pt"


class CheckpointError(Exception):
    """A checkpoint problem the user must act on; the message says what and how."""


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


def parse_step(name: str) -> int | None:
    m = STEP_DIR_RE.match(name)
    return int(m.group(1)) if m else None
