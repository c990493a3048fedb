"""The plan's taint/toleration matcher is the project's one (trainforge.core.taints, stdlib
only, so the platform's DaemonSet placement reads it too)."""

from trainforge.core.taints import schedules, tolerates, untolerated

__all__ = ["schedules", "tolerates", "untolerated"]
