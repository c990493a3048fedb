"""Host memory of this process during setup: resident set at the start, its peak since.

Why: a rank that builds the whole model on the host before sharding needs the whole fp32
model in host memory (eight ranks per node: eight copies); the runtime builds on the meta
device so that a rank's setup stays near its own shard (models/init.py). This module measures
that, so that summary.json says what setup cost and a test can hold the runtime to it.

Linux only (``/proc/self``): the peak is ``VmHWM``, reset at the start of setup by writing
``5`` to ``/proc/self/clear_refs`` (proc(5), "since Linux 4.0"), so it is the peak of setup
itself. Where the reset is refused, the peak is the process's lifetime peak (``ru_maxrss``,
which also counts imports before setup): an upper bound, said by ``peak_since_start``.
"""

from __future__ import annotations

import dataclasses
import resource
from pathlib import Path
from typing import Any

_PAGE = resource.getpagesize()


def rss_bytes() -> int | None:
    """Resident set size now (``/proc/self/statm``), or None where there is no /proc."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def _hwm_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def process_memory(pid: int) -> dict[str, int] | None:
    """Another process's resident set now (``VmRSS``), its peak (``VmHWM``) and its anonymous
    part (``RssAnon``: what it adds to a container's memory beside shared libraries and shared
    memory), in bytes, from ``/proc/<pid>/status``; None where it cannot be read (no /proc, the
    process gone)."""
    keys = ("VmRSS", "VmHWM", "RssAnon")
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        found = {k: int(r.split()[0]) * 1024 for k, _, r in (ln.partition(":") for ln in lines)
                 if k in keys}  # fmt: skip
    except (OSError, ValueError, IndexError):
        return None
    return {k: found[k] for k in keys} if all(k in found for k in keys) else None


def reset_peak() -> bool:
    """Reset this process's peak resident set to its current size; False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_bytes() -> int:
    """The peak resident set since the last reset (VmHWM), else the lifetime peak."""
    hwm = _hwm_bytes()
    if hwm is not None:
        return hwm
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@dataclasses.dataclass
class SetupMemory:
    """``start()`` at the start of setup, ``stop(model)`` before the first step."""

    start_bytes: int | None = None
    peak_bytes: int | None = None
    peak_since_start: bool = False
    parameter_bytes: int | None = None

    @classmethod
    def start(cls) -> SetupMemory:
        reset = reset_peak()
        return cls(start_bytes=rss_bytes(), peak_since_start=reset)

    def stop(self, model: Any) -> None:
        self.peak_bytes = peak_bytes()
        self.parameter_bytes = local_parameter_bytes(model)

    def as_dict(self, rank: int) -> dict[str, Any]:
        grew = (
            self.peak_bytes - self.start_bytes
            if self.peak_bytes is not None and self.start_bytes is not None
            else None
        )
        return {
            "rank": rank,
            "rss_start_bytes": self.start_bytes,
            "rss_peak_bytes": self.peak_bytes,
            "rss_peak_increase_bytes": grew,
            "peak_since_setup_start": self.peak_since_start,
            "parameter_bytes": self.parameter_bytes,
        }


def local_parameter_bytes(model: Any) -> int:
    """Bytes of the parameters this rank holds: its shards under FSDP2, the replica under
    DDP (DDP's module), each storage once."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        local = storage_tensor(p.to_local() if hasattr(p, "to_local") else p)
        if local.is_meta:
            continue
        seen[local.untyped_storage().data_ptr()] = local.untyped_storage().nbytes()
    return sum(seen.values())


def storage_tensor(t: Any) -> Any:
    """The tensor whose storage holds `t`'s bytes: `t` itself, or what a wrapper subclass
    wraps. FP8 runs' weights under FSDP2 are torchao's ``WeightWithDynamicFloat8CastTensor``
    (fp8.py), which has no storage of its own: asking it for one raises."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass  # noqa: PLC0415

    while is_traceable_wrapper_subclass(t):
        t = getattr(t, t.__tensor_flatten__()[0][0])
    return t
