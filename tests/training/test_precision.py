"""`precision: auto` picks bf16 only on GPUs with bf16 units, in the pod and in the plan alike.

No GPU here: torch's capability question is monkeypatched with torch's own rule (compute
capability 8.0+ natively; older GPUs such as a T4 can still create bf16 tensors, emulated)."""

from __future__ import annotations

import pytest
import torch

from trainforge.training.config import TrainConfig
from trainforge.training.parallel import resolve_precision


def _gpu(monkeypatch, capability: int) -> None:
    """A CUDA device of `capability` (75: a T4) as torch.cuda.is_bf16_supported sees it."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return capability >= 80 or including_emulation  # emulated: a bf16 tensor can be made

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)


@pytest.mark.parametrize(("capability", "dtype"), [(75, torch.float32), (86, torch.bfloat16)])
def test_auto_is_bf16_only_where_the_gpu_has_bf16_units(monkeypatch, capability, dtype):
    _gpu(monkeypatch, capability)
    cuda = torch.device("cuda", 0)
    assert resolve_precision(TrainConfig(precision="auto"), cuda) == dtype
    # stated precisions are kept as stated, on any GPU
    assert resolve_precision(TrainConfig(precision="bf16"), cuda) == torch.bfloat16
    assert resolve_precision(TrainConfig(precision="fp32"), cuda) == torch.float32


def test_auto_is_fp32_on_cpu(monkeypatch):
    _gpu(monkeypatch, 90)
    assert resolve_precision(TrainConfig(precision="auto"), torch.device("cpu")) == torch.float32
