"""Dated facts and stated assumptions behind the estimate, and the calibration file.

Peak FLOP/s and memory bandwidth per GPU model are in `trainforge.training.gpus` (one table
with the runtime's MFU). Per-node network bandwidth comes from AWS through the platform
contract: `PoolFacts.network_gbps` / `primary_network_gbps` are EC2 DescribeInstanceTypes'
`NetworkInfo.NetworkCards[].BaselineBandwidthInGbps` (sustained, not the "up to" burst),
summed over the cards / of card 0, as `aws.ec2.get_instance_type` returns them at preview (in
the offline plan, moto 5.2.5's bundled copy of that catalog, read 2026-11-23: p5.48xlarge 32
cards x 100 Gbps, p4d.24xlarge 4 x 100, g5.12xlarge 40, g5.xlarge 2.5). What is here has no
vendor source: the MFU a job can expect, the bandwidth NCCL gets out of a link, and the
memory the CUDA runtime takes besides PyTorch's tensors. Each figure says what it rests on;
`calibration.json` replaces the MFU guess for a GPU model with a measured one: the file shipped
in the package (entries committed with their runs) merged with the user's own
(`$XDG_CONFIG_HOME/trainforge/calibration.json`, written by `trainforge calibrate RUN_DIR`),
the user's entry winning for a GPU both name. The installed package is never written to: it
may be read-only, and a reinstall would silently drop what was measured.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainforge.core import catalog
from trainforge.core.errors import JobConfigError

FACTS_DATE = "2026-11-23"
# shipped with the package (pyproject.toml package-data); read, never written, by calibrate
CALIBRATION_FILE = Path(__file__).with_name("calibration.json")

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class MfuFacts:
    """Expected model-FLOPs utilisation (model FLOPs per step / step time / peak), as a range.

    ``basis`` is "anchored" when a published measurement of a comparable job on this GPU
    backs it, "extrapolated" when it is borrowed from another GPU, "calibrated" when it
    comes from one of our own runs (calibration.json).
    """

    low: float
    mid: float
    high: float
    basis: str
    source: str
    reference_d_model: int = 4096  # the hidden width of the anchoring model


# Expected MFU per GPU model: the GPU/instance catalog's gpus.*.mfu (source "mfu" there: the
# torchtitan anchors, H100 33-39% and A100 50-58% with FSDP2 bf16; the other GPUs borrow the
# H100 range, widened). A GPU without an entry gets the catalog's defaults.mfu.
def _mfu(d: dict[str, Any]) -> MfuFacts:
    return MfuFacts(float(d["low"]), float(d["mid"]), float(d["high"]), d["basis"], d["source"])


MFU: dict[str, MfuFacts] = {g: _mfu(m) for g, m in catalog.gpu_field("mfu").items()}
DEFAULT_MFU = _mfu(catalog.defaults()["mfu"])

# Our models are far narrower than the anchors' 4096. Matmuls of a narrow model keep a GPU
# busy for a shorter time per launch, so MFU falls; we scale by sqrt(d / reference), floored
# at 0.35. An ASSUMPTION (no measurement): calibrate to replace it.
WIDTH_EXPONENT = 0.5
WIDTH_FLOOR = 0.35

# Activation checkpointing recomputes each block's forward: 8 instead of 6 FLOPs per
# parameter per token of hardware work for the same model FLOPs.
RECOMPUTE_FACTOR = 8 / 6

# `precision: fp8` (torchao float8 Linear layers, training/fp8.py): tokens/s over the same job
# in bf16, as (low, mid, high). Anchor: torchtitan's Llama 3.1 8B on 8 and 128 H100s, FSDP +
# torch.compile -> + Float8: 6,667 -> 8,532 and 6,514 -> 8,380 TPS/GPU (1.28x, 1.29x;
# pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, read 2026-11-29). Low 1.0:
# at small widths the casts cost what the FP8 matmuls save (an assumption, no measurement).
# The ceiling is the GPU's FP8/BF16 peak ratio (the catalog's fp8Flops), never reached: only
# the Linear layers' matmuls run in FP8. Torchtitan reports no MFU for such runs ("not
# well-defined"); trainforge reports MFU against the bf16 peak, and says so.
FP8_SPEEDUP = (1.0, 1.28, 1.29)
FP8_SPEEDUP_SOURCE = (
    "torchtitan Llama 3.1 8B, 8 H100, FSDP + compile: 6,667 -> 8,532 TPS/GPU with Float8 "
    "(benchmarks/llama3_h100_202412_torchtitan.md)"
)
# The anchor's width: the Llama 3.1 8B's dim 4096 (torchtitan torchtitan/models/llama3/
# __init__.py, "8B", v0.2.2, read 2026-11-29). A narrower model is planned at bf16 speed (low
# and mid 1.0; the anchor stays its best case): its Linear layers are a smaller share of the
# step and gain less each (torchao's roofline, bench/fp8_roofline.py: at d_model 2048 at most
# 1.44-1.60x per layer on an H200 before any overhead), and the 1.3B GPT at d_model 2048
# gained well under the anchor's 1.28x on an H200 (bench/gpu_check.py's gpt_1p3b_fp8 row,
# 2026-11-29). No measurement between 2048 and 4096 says where the gain starts: a threshold,
# not a curve.
FP8_ANCHOR_D_MODEL = 4096


def fp8_speedup(d_model: int) -> tuple[float, float, float]:
    """(low, mid, high) FP8 speed-up of the bf16 compute for a model `d_model` wide."""
    if d_model >= FP8_ANCHOR_D_MODEL:
        return FP8_SPEEDUP
    return (1.0, 1.0, FP8_SPEEDUP[2])


# Bandwidth NCCL gets out of a link, as a fraction of the link's rate. ASSUMPTIONS, stated
# so they can be checked: EFA with the aws-ofi-nccl plugin is designed for NCCL's traffic;
# NCCL over TCP sockets on ENA (`efa: false`) typically achieves well below line rate.
NETWORK_EFFICIENCY = {"efa": (0.6, 0.8), "tcp": (0.3, 0.6)}

# Per-GPU bus bandwidth of intra-node collectives (bytes/s): (low, high). ASSUMPTIONS by
# interconnect (catalog source "intra-node-bus"): an NVLink GPU's own gpus.*.intraNodeBusBps; a
# GPU the catalog marks PCIe (gpus.*.intraNodeLink "pcie") the catalog's
# defaults.pcieIntraNodeBusBps. Any other GPU has no entry: unknown, never taken for PCIe (an
# NVLink GPU such as the B200 would be planned at a PCIe figure).
PCIE_INTRA_NODE_BUS = (
    float(catalog.defaults()["pcieIntraNodeBusBps"][0]),
    float(catalog.defaults()["pcieIntraNodeBusBps"][1]),
)
INTRA_NODE_BUS: dict[str, tuple[float, float]] = {
    **{
        g: PCIE_INTRA_NODE_BUS for g, k in catalog.gpu_field("intraNodeLink").items() if k == "pcie"
    },
    **{g: (float(b[0]), float(b[1])) for g, b in catalog.gpu_field("intraNodeBusBps").items()},
}

# Fixed cost per collective launch (NCCL latency), seconds.
COLLECTIVE_LATENCY = (20e-6, 80e-6)

# Host -> storage rates for a blocking checkpoint and device -> host for async staging
# (pageable memory: DCP's default stager does not pin). ASSUMPTIONS.
CHECKPOINT_WRITE_BPS = (0.3e9, 1.0e9)
STAGING_BPS = (3e9, 10e9)
# Pod start to first step: image pull (cached or not), rendezvous, torch.compile.
STARTUP_SECONDS = (60.0, 600.0)

# GPU memory PyTorch's allocator does not see, per process (ASSUMPTIONS, conservative):
# the CUDA context with lazily loaded kernels and cuBLAS/cuDNN workspaces, and NCCL's
# buffers when there is more than one rank; plus the caching allocator's fragmentation
# (reserved minus allocated), taken as a fraction of the allocated peak.
CUDA_CONTEXT_BYTES = 768 * MIB
NCCL_BYTES = 512 * MIB
FRAGMENTATION = 0.10
# Process memory of a rank outside its tensors (Python, torch and CUDA libraries), host side;
# a CPU-only rank (no CUDA libraries) is smaller. ASSUMPTIONS.
HOST_PROCESS_BYTES = 3 * GIB
CPU_PROCESS_BYTES = 512 * MIB
# DCP's checkpoint process: with async checkpoints every rank starts one at set-up
# (training/checkpoint.py `_WriterStart`; the runtime has a process group even on one rank:
# distributed.py), a second interpreter importing torch that lives for the whole run. What it
# adds to the pod's memory is its anonymous memory (RssAnon): its file pages are the rank's
# own shared libraries (page cache, charged to the pod once) and its shared memory is the
# rank's staging buffers (counted as staging). MEASURED: 190.4 MiB,
# steady from its start through two saves (2 ranks, 256 MiB of state each, torch 2.13.0+cpu,
# `bench/dcp_child_memory.py`, 2026-11-30); rounded up. A CUDA build of torch loads more
# libraries in it (it creates no CUDA context: torch's `_checkpointing_subprocess` uses gloo
# only), so on a GPU it is expected to be larger, not yet measured there: the runtime records
# it (summary.json `checkpoint_process_memory`, gpu_check's checkpoint_stall row).
CHECKPOINT_PROCESS_BYTES = 192 * MIB

HIGH_WATER = 0.90  # warn above this fraction of the GPU's memory


def user_calibration_file() -> Path:
    """Where `trainforge calibrate` writes by default: the user's config directory
    (`$XDG_CONFIG_HOME/trainforge/calibration.json`, `~/.config/...` when it is unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "trainforge" / "calibration.json"


class CalibrationFileError(JobConfigError):
    """A calibration file that cannot be read: one line naming it, not a traceback from every
    plan, preview and estimate that reads it."""

    def __init__(self, path: Path, why: str) -> None:
        ValueError.__init__(
            self,
            f"calibration file {path}: {why}; expected the JSON `trainforge calibrate` writes "
            '({"version": 1, "gpus": {GPU: {"mfu": ...}}}): fix it or remove it',
        )
        self.where, self.value, self.expected = str(path), why, "a calibration file"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationFileError(path, getattr(e, "strerror", None) or "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise CalibrationFileError(path, f"not JSON ({e})") from None
    gpus = data.get("gpus") if isinstance(data, dict) else None
    entries = gpus.values() if isinstance(gpus, dict) else []
    if not isinstance(data, dict) or not isinstance(gpus, dict | None):
        raise CalibrationFileError(path, "not a calibration file (no gpus mapping)")
    for gpu, entry in zip(gpus or {}, entries, strict=True):
        if not isinstance(entry, dict) or not isinstance(entry.get("mfu"), int | float):
            raise CalibrationFileError(path, f"gpus.{gpu}: no numeric mfu")
    return dict(gpus or {})


def load_calibration(path: Path | None = None) -> dict[str, Any]:
    """GPU entries ({} when there are none): of `path` alone when given, else the shipped
    file's merged with the user's (the user's entry wins for a GPU both name)."""
    if path is not None:
        return _read(path)
    return {**_read(CALIBRATION_FILE), **_read(user_calibration_file())}


def mfu_for(gpu: str | None, calibration: dict[str, Any] | None = None) -> MfuFacts:
    """Expected MFU for a GPU model: a calibration entry wins over the table."""
    calibration = load_calibration() if calibration is None else calibration
    if gpu and gpu in calibration:
        c = calibration[gpu]
        m = float(c["mfu"])
        return MfuFacts(
            m * 0.85,
            m,
            m * 1.15,
            "calibrated",
            f"run {c.get('run', '?')} on {c.get('date', '?')} ({c.get('device_name', gpu)})",
            reference_d_model=int(c.get("d_model") or 4096),
        )
    return MFU.get(gpu or "", DEFAULT_MFU)


def width_factor(d_model: int, reference: int) -> float:
    if d_model >= reference:
        return 1.0
    return max(WIDTH_FLOOR, (d_model / reference) ** WIDTH_EXPONENT)
