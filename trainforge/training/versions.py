"""Which torch versions the runtime supports, and the refusal of any other before a step runs.

Why: a team's own image may carry an older torch. The runtime's APIs then fail hours into a
run (the first checkpoint, the first FSDP wrap) with an error that reads like the user's.
The floor is the newest of the torch APIs the runtime calls, each with where its release was
read (2026-11-27):

* ``torch.distributed.fsdp.fully_shard`` / ``MixedPrecisionPolicy`` on the public path
  (parallel.py): torch 2.6 -- pytorch/pytorch PR #141868 "[FSDP2] Move to public
  `torch.distributed.fsdp`", "targeting 2.6 release" (before it, ``torch.distributed.
  _composable.fsdp``).
* ``torch.distributed.checkpoint.staging.DefaultStager`` / ``StagingOptions`` and
  ``dcp.async_save(..., async_stager=)`` (checkpoint.py, async saves): torch 2.9 --
  pytorch/tutorials issue #3710 and PR #3711 ("DefaultStager ... introduced in PyTorch 2.9",
  ``.. versionadded:: 2.9``). The runtime stages through DCP's ``StateDictStager``
  (``torch.distributed.checkpoint._state_dict_stager``, the class ``DefaultStager`` wraps):
  ``StateDictStager(pin_memory, share_memory)``, ``stage(state_dict, non_blocking)`` and
  ``close()`` read the same in the 2.9.0, 2.11.0 and 2.13.0 wheels (2026-11-27).
* ``AsyncCheckpointerType.PROCESS`` and ``AsyncSaveResponse.upload_completion``
  (checkpoint.py): present in 2.9 (the DCP docs list both); ``upload_completion`` is read
  with a fallback, so it sets no floor of its own.

So the floor is 2.9. The top of the range is the next major version (a 3.x may drop what
2.x deprecated); the newest version this repository's tests ran on is the pinned one
(pyproject.toml's ``train`` extra, ``TESTED``). A newer 2.x runs, said once at start-up.

Standard library only: `--self-check` reads it without importing torch.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

MINIMUM = (2, 9)
BELOW = (3, 0)  # first unsupported version
TESTED = "2.13.0"  # pyproject.toml [project.optional-dependencies] train


def supported_range() -> str:
    """`>= 2.9, < 3.0` as people write it."""
    return f">= {MINIMUM[0]}.{MINIMUM[1]}, < {BELOW[0]}.{BELOW[1]}"


def parse(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string (`2.11.0+cu130`, `2.10.0a0+git1234`)."""
    m = re.match(r"^\s*(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_version() -> str | None:
    """The torch this process runs: the imported module's own `__version__` when torch is
    imported (what a monkeypatch or a vendored build says), else the installed distribution's."""
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__version__", None):
        return str(torch.__version__)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def problem(version: str | None) -> str | None:
    """Why `version` cannot run the runtime, in one sentence; None when it is supported."""
    if version is None:
        return f"torch is not installed; the runtime needs torch {supported_range()}"
    parsed = parse(version)
    if parsed is None:
        return (
            f"torch {version!r}: not a version this runtime can read; it needs {supported_range()}"
        )
    if parsed < MINIMUM or parsed >= BELOW:
        return (
            f"torch {version} is not supported: the runtime needs torch {supported_range()} "
            f"(tested with {TESTED}); use an image with a supported torch (docs/images.md)"
        )
    return None


def describe(version: str | None) -> str:
    """The self-check's line about torch."""
    why = problem(version)
    if why is not None:
        return f"torch: {why}"
    return f"torch: {version} supported ({supported_range()}, tested with {TESTED})"
