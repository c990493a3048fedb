"""The plan's keys: cost caps and policy waivers (read by trainforge/plan/)."""

from __future__ import annotations

from trainforge.stack.base import StackModel


class PolicyKeys(StackModel):
    """The plan's top-level `trainforge:` keys."""
