"""FP8 training (``--precision fp8``): torchao's float8 Linear layers, refused where they cannot run.

What it does, following torchao's float8 training API and torchtitan's float8 recipe
(pytorch/torchtitan docs/float8.md, read 2026-11-29):

* ``torchao.float8.convert_to_float8_training`` swaps the model's ``nn.Linear`` layers for
  ``Float8Linear`` (tensorwise dynamic scaling, torchao's default recipe): their matmuls run on
  the GPU's FP8 Tensor Cores; everything else computes in bf16, as ``--precision bf16`` does.
  The swap is a module swap, so it runs on the meta-device model before FSDP2 shards it and
  before ``torch.compile`` wraps the blocks (torchtitan converts before parallelising too).
* Left in bf16: the output head (torchtitan's recipe filters its ``output`` projection: the
  logits are the most precision-sensitive matmul) and any Linear whose dimensions are not
  multiples of 16 (torchao's own filter, ``_auto_filter_for_recipe``: "All dims must be
  divisible by 16 due to float8 hardware requirements" -- the MLP's 10-class head).
* FSDP2 across several ranks: ``enable_fsdp_float8_all_gather`` casts each weight shard to
  float8 *before* the all-gather (half the bytes of a bf16 gather), and after every optimizer
  step ``precompute_float8_dynamic_scale_for_fsdp`` computes every weight's scale in one
  all-reduce instead of one per weight (both torchtitan flags of the same name).
* FSDP2 on ONE rank: neither. Torchtitan turns the float8 all-gather on only where FSDP
  shards (``parallel_dims.dp_shard_enabled and enable_fsdp_float8_all_gather``,
  torchtitan/components/quantization/float8.py at v0.2.2; ``dp_shard_enabled`` is
  ``dp_shard > 1``, torchtitan/distributed/parallel_dims.py; read 2026-11-29). With one rank
  there are no bytes to save, and the cast is paid in the wrong place: torchao's
  ``fsdp_pre_all_gather`` (torchao/float8/fsdp_utils.py, 0.18.0) casts the fp32 shard
  *eagerly*, as three kernels over fp32 (``tensor * scale``, ``clamp``, ``.to(float8)``:
  ``hp_tensor_and_scale_to_float8`` / ``to_fp8_saturated``), at every all-gather -- forward
  and again in backward, as every block but the last reshards after forward -- plus the
  per-step precompute reading every fp32 weight. Without it the weight arrives in bf16 and
  ``Float8Linear`` casts it inside the compiled block, where inductor fuses the amax and the
  cast. ``TRAINFORGE_TEST_FP8_ALL_GATHER=1`` forces the float8 all-gather on one rank too:
  the test hook behind bench/gpu_check.py's side-by-side FP8 row and the tests that keep
  that path working; the first log line and ``summary.json`` (``float8_all_gather``) say
  which ran.

Refusals, one line each, before a process group does any work: no CUDA device (CPU runs
cannot do FP8 matmuls), a GPU below compute capability 8.9 (FP8 Tensor Cores arrived with Ada
Lovelace, sm_89, and Hopper, sm_90; torchao gates its float8 GEMMs on ``is_sm_at_least_89``,
torchao/float8/inference.py in the 0.18.0 wheel), or torchao not installed (the ``fp8``
extra; bench/gpu_check.py's folder carries the wheel for machines without a network).
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

MIN_CAPABILITY = (8, 9)  # Ada Lovelace (L4, L40S); Hopper is (9, 0), Blackwell (10, 0)
INSTALL = "pip install 'trainforge[fp8]' (torchao; offline: make fp8-wheel, docs/performance.md)"


def problem(
    device_type: str, capability: tuple[int, int] | None, name: str = "", torchao: bool = True
) -> str | None:
    """Why ``--precision fp8`` cannot run on this device, in one line; None when it can.

    Pure (no torch.cuda calls) so that the GPU branches are tested on a CPU machine;
    `device_problem` asks torch for the arguments. ``torchao=False``: the device only; the
    runtime imports torchao in its set-up's imports phase (`torchao_problem`)."""
    if device_type != "cuda":
        return (
            f"--precision fp8 needs an NVIDIA GPU with FP8 Tensor Cores (compute capability "
            f"{_cc(MIN_CAPABILITY)}+: L4, L40S, H100, H200, B200); this run is on "
            f"{device_type}: use --precision bf16, or auto"
        )
    if capability is None or tuple(capability) < MIN_CAPABILITY:
        what = f"{name or 'this GPU'} (compute capability {_cc(capability)})"
        return (
            f"--precision fp8 needs FP8 Tensor Cores (compute capability "
            f"{_cc(MIN_CAPABILITY)}+: L4, L40S, H100, H200, B200); {what} has none: use "
            "--precision bf16, or auto"
        )
    return torchao_problem() if torchao else None


def torchao_problem() -> str | None:
    """Import torchao's float8 training (seconds: all of torchao loads); why not, or None."""
    try:
        import torchao.float8  # noqa: F401, PLC0415 - only fp8 runs need it
    except ImportError:
        return f"--precision fp8 needs torchao, which this image lacks: {INSTALL}"
    return None


def _cc(capability: tuple[int, int] | None) -> str:
    return "unknown" if capability is None else f"{capability[0]}.{capability[1]}"


def device_problem(device: Any, torchao: bool = True) -> str | None:
    """`problem` for a torch device (the runtime's call)."""
    if device.type != "cuda":
        return problem(device.type, None)
    import torch  # noqa: PLC0415

    return problem(
        "cuda",
        torch.cuda.get_device_capability(device),
        torch.cuda.get_device_name(device),
        torchao=torchao,
    )


def keep_high_precision(module: nn.Module, fqn: str) -> bool:
    """True for the Linear layers that stay bf16: the output head, and dims not % 16."""
    if fqn == "head" or fqn.endswith(".head"):
        return True
    out_f, in_f = module.weight.shape
    return out_f % 16 != 0 or in_f % 16 != 0


# Test hook (see the module docstring): the float8 all-gather on one FSDP rank as well.
FORCE_ALL_GATHER_ENV = "TRAINFORGE_TEST_FP8_ALL_GATHER"


def float8_all_gather(strategy: str, world_size: int) -> bool:
    """Whether FSDP2 gathers the weights in float8 (and the loop precomputes their scales):
    only where FSDP shards them across ranks, as torchtitan does (module docstring)."""
    if strategy != "fsdp":
        return False
    return world_size > 1 or os.environ.get(FORCE_ALL_GATHER_ENV) == "1"


def convert(model: nn.Module, strategy: str, world_size: int) -> list[str]:
    """Swap `model`'s eligible Linear layers for torchao's Float8Linear in place; returns the
    names of the converted layers (what the run's first line and summary report). Sets
    ``model.float8_all_gather`` (`float8_all_gather`): what the loop and the summary read."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: PLC0415

    converted: list[str] = []

    def take(module: nn.Module, fqn: str) -> bool:
        if not isinstance(module, nn.Linear) or keep_high_precision(module, fqn):
            return False
        converted.append(fqn)
        return True

    gather = float8_all_gather(strategy, world_size)
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=gather)
    convert_to_float8_training(model, module_filter_fn=take, config=config)
    model.float8_all_gather = gather
    return converted


def after_optimizer_step(model: nn.Module) -> None:
    """FSDP2 + float8 all-gather: each weight's next scale, all at once (one all-reduce).

    torchao's docs: call it after ``optimizer.step()`` when ``enable_fsdp_float8_all_gather``
    is on; it needs no host sync (the amaxes stay on the device)."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp  # noqa: PLC0415

    precompute_float8_dynamic_scale_for_fsdp(model)
