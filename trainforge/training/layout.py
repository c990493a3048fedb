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


# Any code's checkpoint, by the name docs/jobs.md asks your own code to give it: `step_<N>`
# (a `step_<N>.pt` file as examples/plain saves, or the `step_NNNNNN` folder
# CheckpointManager writes; `step-<N>`, `step<N>` too). Hidden names (a save's `.tmp` file,
# the ledger's `.trainforge`) are none. What `trainforge report` counts and what your code's
# wrapper reads its progress from (usercode.py): one rule.
OWN_STEP_RE = re.compile(r"^step[_-]?(\d+)")


@dataclasses.dataclass(frozen=True)
class SavedCheckpoint:
    step: int
    name: str
    complete: bool  # a DCP folder with shards but without `.metadata` was cut short


def saved_checkpoints(folder: str | Path | None) -> list[SavedCheckpoint]:
    """The checkpoints in `folder` named by `OWN_STEP_RE`, oldest step first ([] where the
    folder is not there or cannot be read). Never raises: it is read by bookkeeping."""
    if not folder:
        return []
    out = []
    try:
        for p in Path(folder).iterdir():
            m = OWN_STEP_RE.match(p.name)
            if m is None or p.name.startswith("."):
                continue
            complete = (
                not p.is_dir() or (p / METADATA_FILE).is_file() or not any(p.glob("*.distcp"))
            )
            out.append(SavedCheckpoint(int(m.group(1)), p.name, complete))
    except OSError:
        return []
    return sorted(out, key=lambda c: (c.step, c.name))


def newest_saved(folder: str | Path | None) -> SavedCheckpoint | None:
    """The newest complete checkpoint in `folder` (`saved_checkpoints`), None where none."""
    done = [c for c in saved_checkpoints(folder) if c.complete]
    return done[-1] if done else None


def other_entries(folder: str | Path) -> list[str]:
    """Names in `folder` that `saved_checkpoints` does not count (not step_<N>, not hidden):
    a checkpoint of your own code under another name, which neither `trainforge report` nor
    your code's wrapper reads as progress."""
    try:
        return sorted(
            p.name
            for p in Path(folder).iterdir()
            if not p.name.startswith(".") and not OWN_STEP_RE.match(p.name)
        )
    except OSError:
        return []


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


# The start of every Ctrl-C exit line, the bundled runtime's and your code's under the wrapper
# (`ctrl_c_detail`): a Ctrl-C saves nothing new, a SIGTERM is the stop that saves. Of your
# code the wrapper can say only that it saved nothing (your code's own handler may have).
CTRL_C_RUNTIME = (
    "Ctrl-C: nothing saved (a Ctrl-C saves none; SIGTERM does: kill -TERM stops at the next "
    "step boundary with a checkpoint)"
)
CTRL_C_OWN_CODE = (
    "Ctrl-C: trainforge saved nothing (a Ctrl-C saves none; SIGTERM is the stop your code can "
    'save on: docs/jobs.md, "The contract for your code")'
)


def ctrl_c_detail(
    root: str | Path | None, saved_step: int | None = None, step: int | None = None
) -> str:
    """The detail of a Ctrl-C's exit line: what is saved and what the next run resumes from.

    One wording for both stops a Ctrl-C ends. The bundled runtime (`Checkpointing.interrupted`)
    passes `saved_step`, the newest checkpoint its CheckpointManager saved in `root`
    (--checkpoint-dir), and `step`, where it stopped: the line names the steps lost. Your code
    under the wrapper (usercode.py) passes neither: the wrapper knows only `root`
    (TRAINFORGE_CHECKPOINT_DIR) and reads progress from the newest step_<N> there
    (`newest_saved`, the ledger's progress rule); your code resumes from it only if it restores
    it, and a SIGTERM (not a Ctrl-C) is the stop it can save on (docs/jobs.md)."""
    own = step is None
    said = CTRL_C_OWN_CODE if own else CTRL_C_RUNTIME
    if root is None:
        if own:
            return f"{said}; no TRAINFORGE_CHECKPOINT_DIR: no checkpoint of your code is seen"
        return f"{said}; no --checkpoint-dir: nothing of this run is saved"
    if own:
        newest = newest_saved(root)
        if newest is not None:
            return (
                f"{said}; the newest checkpoint your code saved is {Path(root) / newest.name}: "
                "the next run resumes from it only if your code restores it"
            )
        others = other_entries(root)
        if others:
            return (
                f"{said}; your code's checkpoints in {root} ({', '.join(others[:3])}) are not "
                "step_<N>: the next run resumes from them only if your code restores them"
            )
        return f"{said}; your code saved none in {root}: the next run starts from the beginning"
    if saved_step is None:
        return f"{said}; none saved yet in {root}: the next run starts at step 0"
    newest_dir = Path(root) / step_dir_name(saved_step)
    since = step - saved_step
    if since <= 0:  # stopped before training past it (start-up, restore, right after a save)
        return f"{said}; the next run resumes from {newest_dir}: no step trained since it is lost"
    return (
        f"{said}; the next run resumes from {newest_dir}: "
        f"the {since} step(s) trained since it are lost"
    )


def ctrl_c_detail_before_steps(root: str | Path | None) -> str:
    """The bundled runtime's Ctrl-C before it resumed its step (imports, process group, model
    build, the restore itself): `ctrl_c_detail` with the newest complete step_NNNNNN in `root`
    (`newest_saved`) as both the saved step and the stop, since this process trained nothing
    yet. Why: such a Ctrl-C left with the bare word `KeyboardInterrupt` (or, in the imports, a
    traceback) where one in the step loop named the checkpoint the next run resumes from;
    every Ctrl-C of the runtime now ends with the one line. No torch: it may come before torch
    is imported (`newest_saved` reads `.metadata`'s presence, not its contents)."""
    newest = newest_saved(root) if root else None
    saved = None if newest is None else newest.step
    return ctrl_c_detail(root, saved, 0 if saved is None else saved)
