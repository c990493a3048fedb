"""The whole `trainforge:` config block: every area's keys in one flat model."""

from __future__ import annotations

from trainforge.stack.jobs import JobKeys
from trainforge.stack.platform import PlatformKeys
from trainforge.stack.policy import PolicyKeys
from trainforge.stack.services import ServiceKeys


class StackConfig(PlatformKeys, ServiceKeys, JobKeys, PolicyKeys):
    """Every `trainforge:` key of Pulumi.<stack>.yaml (each declared in its area's module)."""
