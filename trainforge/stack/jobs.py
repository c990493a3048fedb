"""The jobs' keys: `trainforge:jobs[]` (read by trainforge/jobs/spec.py)."""

from __future__ import annotations

from trainforge.stack.base import StackModel


class JobKeys(StackModel):
    """The jobs' top-level `trainforge:` keys."""
