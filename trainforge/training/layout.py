"""The checkpoint directory layout, its error type and completeness check, without torch.

Why a module of its own: the S3 mirror and the offline plan's IAM rehearsal (which runs the
mirror's real calls against moto) need the names of the files in a checkpoint, not torch;
importing torch costs seconds (`inspect_checkpoint` imports it only when called). `trainforge.training.checkpoint` re-exports all of these.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

STEP_DIR_RE = re.compile(r"^step_(\d{6,})$")
METADATA_FILE = ".metadata"
EXTRAS_FMT = "trainforge_rank{rank:05d}.pt"


class CheckpointError(Exception):
    """A checkpoint problem the user must act on; the message says what and how."""


class CheckpointSaveError(Exception):
    """A save that failed after its retries: the platform's fault (storage, DCP), never the
    user's; the run exits `checkpoint_failed` (204, restartable) and resumes from the last
    complete checkpoint."""


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


def parse_step(name: str) -> int | None:
    m = STEP_DIR_RE.match(name)
    return int(m.group(1)) if m else None


@dataclasses.dataclass(frozen=True)
class CheckpointStatus:
    path: Path
    step: int
    complete: bool
    reason: str  # why it is not complete ("" when complete)


def inspect_checkpoint(path: Path) -> CheckpointStatus:
    """Is ``path`` a complete checkpoint? Never raises for bad content, only reports it."""
    step = parse_step(path.name)
    if step is None:
        return CheckpointStatus(path, -1, False, "name is not step_NNNNNN")
    if not path.is_dir():
        return CheckpointStatus(path, step, False, "not a directory")
    meta = path / METADATA_FILE
    if not meta.is_file():
        return CheckpointStatus(
            path, step, False, "no .metadata (save was interrupted; partial checkpoint)"
        )
    try:
        from torch.distributed.checkpoint import FileSystemReader

        FileSystemReader(str(path)).read_metadata()
    except Exception as e:  # noqa: BLE001 - any parse failure means "corrupt", reported
        return CheckpointStatus(path, step, False, f".metadata is corrupt ({type(e).__name__})")
    return CheckpointStatus(path, step, True, "")
