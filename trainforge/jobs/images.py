"""The default training image: pinned with every other version in the platform's versions module."""

from __future__ import annotations

from trainforge.platform.versions import PYTORCH_IMAGE


def default_image() -> str:
    return PYTORCH_IMAGE
