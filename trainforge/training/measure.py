"""Measure your model for the planner: `modelSize`'s declared form, from one training step.

The planner sizes memory and step time of a job with its own code from `modelSize`. For a
model that is not a GPT decoder, state what it is rather than a shape it is not: parameters,
training FLOPs per sample and the activation bytes one sample keeps for backward. This
measures all three on this machine (CPU is fine) from one forward and backward pass::

    from trainforge.training.measure import model_size
    model_size(model, batch, loss_fn=lambda out: criterion(out, targets))

and writes them to `$TRAINFORGE_OUTPUT_DIR/model_size.json` (or `out_dir`);
`trainforge calibrate --declared RUN_DIR` prints the `modelSize` block for the stack.

FLOPs come from `torch.utils.flop_counter.FlopCounterMode` (matrix products and convolutions,
forward and backward: what dominates; elementwise work is not counted, as in MFU accounting);
activation bytes are the tensors autograd saves for backward (`saved_tensors_hooks`), each
storage once, parameters excluded. Both are per sample of the batch given.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainforge.training.contract import OUTPUT_DIR

FILE = "model_size.json"


def model_size(
    model: Any,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    tokens_per_sample: int = 1,
    out_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """One training step's parameters, FLOPs per sample and saved activation bytes per
    sample of `model` on `batch` (a tensor whose first dimension is the batch, or a tuple of
    them passed as arguments). Gradients are cleared afterwards."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    args = batch if isinstance(batch, tuple | list) else (batch,)
    samples = int(args[0].shape[0])
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set[int] = set()
    saved = 0

    def pack(t: Any) -> Any:
        nonlocal saved
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen:
            seen.add(ptr)
            saved += t.untyped_storage().nbytes()
        return t

    with FlopCounterMode(display=False) as counter:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(*args)
            loss = loss_fn(out) if loss_fn is not None else out.float().sum()
        loss.backward()
    model.zero_grad(set_to_none=True)
    result = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "flopsPerSample": counter.get_total_flops() / samples,
        "activationBytesPerSample": -(-saved // samples),
        "tokensPerSample": tokens_per_sample,
        "measured": {"samples": samples, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }
    folder = out_dir if out_dir is not None else os.environ.get(OUTPUT_DIR)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / FILE).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result
