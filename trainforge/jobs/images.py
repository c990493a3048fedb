"""The default training image, read from the platform's versions module when it names one.

Versions live in one module (`trainforge/platform/versions.py`, constant `PYTORCH_IMAGE`);
the fallback here keeps jobs usable while that module does not define it.
"""

from __future__ import annotations

# Stock PyTorch CUDA runtime image: torch + CUDA + cuDNN, no trainforge code (that ships in
# a ConfigMap). Its torch matches the version the runtime is developed and tested with
# (requirements.lock); torchrun honours TORCH_ELASTIC_SHUTDOWN_TIMEOUT from 2.12 on, which
# the checkpoint-on-SIGTERM grace period relies on. Pinned by tag; digests are accepted too.
FALLBACK_IMAGE = "pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime"


def default_image() -> str:
    try:
        from trainforge.platform import versions
    except ImportError:
        return FALLBACK_IMAGE
    return str(getattr(versions, "PYTORCH_IMAGE", FALLBACK_IMAGE))
