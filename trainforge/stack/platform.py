"""The platform's keys: cluster, network, endpoint, admins, node groups and pools, Karpenter,
node health, tags, images (read by trainforge/platform/config.py)."""

from __future__ import annotations

from trainforge.stack.base import StackModel


class PlatformKeys(StackModel):
    """The platform's top-level `trainforge:` keys."""
