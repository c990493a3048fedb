"""The cluster services' keys: FSx, checkpoints, the training operator, device plugins,
monitoring and alerts, MLflow, teams and their quotas, Kueue (read by
trainforge/platform/services_config.py)."""

from __future__ import annotations

from trainforge.stack.base import StackModel


class ServiceKeys(StackModel):
    """The services' top-level `trainforge:` keys."""
