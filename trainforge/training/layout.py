"""The checkpoint directory layout, its error type and completeness check, without torch.

Why a module of its own: the S3 mirror and the offline plan's IAM rehearsal (which runs the
mirror's real calls against moto) need the names of the files in a checkpoint, not torch;
importing torch costs seconds (`inspect_checkpoint` reads `.metadata` without it until DCP is loaded). `trainforge.training.checkpoint` re-exports all of these.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

STEP_DIR_RE = re.compile(r"^step_(\d{6,})$")
METADATA_FILE = ".metadata"
EXTRAS_FMT = "trainforge_rank{rank:05d}.pt"
LogFn = Callable[[str], None]


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
    """Is ``path`` a complete checkpoint? Never raises for bad content, only reports it. No
    torch (`metadata_unreadable`): the restore's choice (`latest_complete`), the S3 mirror's
    and a Ctrl-C line before torch is imported read this one answer."""
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
    error = metadata_unreadable(meta)
    if error:
        return CheckpointStatus(path, step, False, f".metadata is corrupt ({error})")
    return CheckpointStatus(path, step, True, "")


# The class DCP's FileSystemWriter pickles as `.metadata` (torch 2.13.0
# torch/distributed/checkpoint/filesystem.py: `pickle.dump(metadata, metadata_file)`, a
# torch.distributed.checkpoint.metadata.Metadata; read 2026-12-01 in the pinned wheel).
_DCP_METADATA = ("torch.distributed.checkpoint.metadata", "Metadata")


class _Stand:
    """What every class a `.metadata` names unpickles as: it takes any construction, state,
    item or append, so the whole stream is read without importing torch or running code."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __setstate__(self, state: object) -> None:
        pass

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def append(self, item: object) -> None:
        pass

    def extend(self, items: object) -> None:
        pass


class _MetadataReader(pickle.Unpickler):
    """pickle.load as DCP's `FileSystemReader.read_metadata` runs it over `.metadata`, every
    class a stand-in (`_Stand`, one per name): the same opcodes, memo and stack, no torch."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.stands: dict[tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> type:
        key = (module, name)
        if key not in self.stands:
            self.stands[key] = type(name, (_Stand,), {"__module__": module})
        return self.stands[key]


def metadata_unreadable(meta: Path) -> str:
    """Why DCP cannot read the `.metadata` file `meta` ("" when it can): the whole pickle
    stream read as `FileSystemReader.read_metadata` reads it (`pickle.load`), whose result is
    DCP's Metadata (`_DCP_METADATA`). Why not torch's own read: importing torch costs
    seconds, and a Ctrl-C during the imports names the checkpoint the restore would take
    (`ctrl_c_detail_before_steps`) by this same answer; a stand-in per class also runs none of
    the file's code. What it cannot see, a Metadata this torch cannot load, the restore says
    when it loads.

    Where DCP is already imported (the trainer, after its imports: every restore, every save's
    check, the S3 mirror in a pod) the answer is DCP's own read, at no import cost: the
    stand-in is for the one moment torch is not loaded yet, never a second model of the read
    the restore acts on."""
    dcp = sys.modules.get("torch.distributed.checkpoint")
    if dcp is not None:
        try:
            obj = dcp.FileSystemReader(str(meta.parent)).read_metadata()
        except Exception as e:  # noqa: BLE001 - any failure to read means "corrupt", reported
            return type(e).__name__
        if not isinstance(obj, dcp.Metadata):
            return f"a pickled {type(obj).__name__}, not DCP's Metadata"
        return ""
    try:
        with meta.open("rb") as f:
            obj = _MetadataReader(f).load()
    except Exception as e:  # noqa: BLE001 - any failure to read means "corrupt", reported
        return type(e).__name__
    got = (type(obj).__module__, type(obj).__name__)
    if not isinstance(obj, _Stand) or got != _DCP_METADATA:
        return f"a pickled {got[1]}, not DCP's Metadata"
    return ""


def scan_checkpoints(root: Path, log: LogFn | None = None) -> list[CheckpointStatus]:
    """All step directories under ``root``, oldest first; foreign entries are logged, skipped."""
    if not root.is_dir():
        return []
    found: list[CheckpointStatus] = []
    for entry in sorted(root.iterdir()):
        if parse_step(entry.name) is None:
            if log and not entry.name.startswith(".trainforge"):
                log(f"checkpoint: ignoring foreign entry {entry} (not a step_NNNNNN directory)")
            continue
        found.append(inspect_checkpoint(entry))
    found.sort(key=lambda s: s.step)
    return found


def latest_complete(root: Path, log: LogFn | None = None) -> Path | None:
    """Newest complete checkpoint under ``root``; partial/corrupt newer ones are logged. The
    restore's choice (`CheckpointManager._choose_resume`) and the Ctrl-C line before it
    (`ctrl_c_detail_before_steps`): one answer."""
    for status in reversed(scan_checkpoints(root, log)):
        if status.complete:
            return status.path
        if log:
            log(f"checkpoint: skipping {status.path}: {status.reason}")
    return None


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
    build, the restore itself): `ctrl_c_detail` with the checkpoint the restore resumes from
    (`latest_complete`: the newest step_NNNNNN whose `.metadata` DCP can read, not merely the
    newest with one) as both the saved step and the stop, since this process trained nothing
    yet. Why: such a Ctrl-C left with the bare word `KeyboardInterrupt` (or, in the imports, a
    traceback) where one in the step loop named the checkpoint the next run resumes from;
    every Ctrl-C of the runtime now ends with the one line. No torch: it may come before torch
    is imported (`metadata_unreadable` reads the pickle without it)."""
    newest = latest_complete(Path(root)) if root else None
    saved = None if newest is None else parse_step(newest.name)
    return ctrl_c_detail(root, saved, 0 if saved is None else saved)
