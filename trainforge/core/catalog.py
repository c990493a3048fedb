"""The GPU/instance catalog: one data file of every GPU, family and instance-type fact.

Why: a new GPU family used to touch seven Python tables (RDMA families, compute capability,
ENI limits, the health agent's DCGM list, peak FLOP/s, all-reduce floors, prices). Now it is
one entry in `core/data/gpu_catalog.json` (package data, shipped in the wheel and in the
runtime's code bundle, jobs/codeship.py) with its source under "sources"; every module that
needs such a fact reads it through this reader. `tests/test_gpu_catalog.py` proves each
consumer does.

Standard library only: the runtime in pods (trainforge/training) imports it too.
`TRAINFORGE_GPU_CATALOG` may name another catalog file (tests use it to add a family and watch
it reach every consumer); it is read once per process, at first use.
"""

from __future__ import annotations

import functools
import json
import os
from importlib import resources
from typing import Any

ENV = "TRAINFORGE_GPU_CATALOG"


@functools.cache
def load() -> dict[str, Any]:
    """The catalog as parsed JSON (read once)."""
    override = os.environ.get(ENV)
    if override:
        with open(override, encoding="utf-8") as f:
            return json.load(f)
    text = resources.files("trainforge.core").joinpath("data/gpu_catalog.json").read_text("utf-8")
    return json.loads(text)


def families() -> dict[str, dict[str, Any]]:
    """Instance family ("p5", "g6e", "p6-b200") -> its facts (gpu, rdma, dcgmServerSizes)."""
    return load()["families"]


def gpus() -> dict[str, dict[str, Any]]:
    """GPU model as EC2 names it ("H100", "L40S") -> its facts."""
    return load()["gpus"]


def instance_types() -> dict[str, dict[str, Any]]:
    """Instance type -> the per-type facts the catalog holds (ENI limits, all-reduce figures)."""
    return load()["instanceTypes"]


def defaults() -> dict[str, Any]:
    """Figures used for a GPU the catalog has no entry for."""
    return load()["defaults"]


def family_of(instance_type: str) -> str:
    """The family of an instance type: p5.48xlarge -> p5."""
    return instance_type.split(".", 1)[0]


def gpu_field(field: str) -> dict[str, Any]:
    """GPU model -> `field` for every GPU that has it."""
    return {name: g[field] for name, g in gpus().items() if field in g}


def type_field(field: str) -> dict[str, Any]:
    """Instance type -> `field` for every type that has it."""
    return {name: t[field] for name, t in instance_types().items() if field in t}


def rdma_families() -> tuple[str, ...]:
    return tuple(f for f, v in families().items() if v.get("rdma"))


def family_instance_types(field: str = "dcgmServerSizes") -> tuple[str, ...]:
    """Every `family.size` the families list under `field`, sorted."""
    return tuple(sorted(f"{f}.{s}" for f, v in families().items() for s in v.get(field, ())))


def nvidia_gpu_family(instance_type: str) -> bool:
    """Whether an instance type belongs to a family the catalog lists as NVIDIA GPU capacity:
    one with a GPU model (EC2's GpuInfo) or with sizes in the monitoring agent's DCGM list.

    The catalog is the one answer: a family it does not list (g4ad, AMD Radeon with no
    nvidia.com/gpu; trn1, Trainium; a family newer than the catalog) is not NVIDIA GPU capacity
    by its name. Adding a family to data/gpu_catalog.json is how a new one becomes one."""
    facts = families().get(family_of(instance_type), {})
    return bool(facts.get("gpu") or facts.get("dcgmServerSizes"))


def gpu_families(gpu: str | None = None) -> tuple[str, ...]:
    """Families with a known GPU model (that model only, when given)."""
    return tuple(f for f, v in families().items() if v.get("gpu") and gpu in (None, v["gpu"]))


# FP8 Tensor Cores arrived with compute capability 8.9 (Ada Lovelace) and 9.0 (Hopper): the
# catalog's "fp8" source (torchao gates its float8 GEMMs on sm_89; training/fp8.py).
FP8_MIN_COMPUTE_CAPABILITY = 89


def fp8_capable(gpu_name: str | None) -> bool | None:
    """Whether a GPU (as EC2 or torch names it: "H100", "NVIDIA L40S") has FP8 Tensor Cores;
    None when the catalog has no compute capability for it. The longest catalog name inside
    `gpu_name` wins, so "L40S" is not read as "L4"."""
    if not gpu_name:
        return None
    caps = gpu_field("computeCapability")
    hits = [k for k in caps if k.lower() in gpu_name.lower()]
    if not hits:
        return None
    return int(caps[max(hits, key=len)]) >= FP8_MIN_COMPUTE_CAPABILITY
