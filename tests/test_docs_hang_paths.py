"""troubleshooting.md's "NCCL timeouts" says what each way of creating the process group does
(review, wave 20: it gave own code the runtime's 960 s collective timeout and watchdog, while
`run-local mycode/mismatch.py --workers 2` hung silently). Each figure is read from its
source: the runtime's timeouts (trainforge/training/timeouts.py), torch's defaults (the
installed torch's constants and headers), the pod environment of an own-code job."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed.constants as torch_constants

from tests.conftest import ROOT
from tests.jobs.helpers import CPU_POOL, target
from trainforge.jobs.entrypoint import contract_env
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training.timeouts import DEFAULT_HANG_TIMEOUT_S, Timeouts


def _nccl_section() -> str:
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    return " ".join(text.split("\n## NCCL timeouts\n", 1)[1].split("\n## ", 1)[0].split())


def _torch_nccl_default() -> timedelta:
    """ProcessGroupNCCL's default timeout, from the installed torch's header (a CPU build of
    torch has no `default_pg_nccl_timeout` to ask)."""
    header = (
        Path(torch.__file__).parent / "include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"
    )
    m = re.search(
        r"kProcessGroupNCCLDefaultTimeout\s*=\s*std::chrono::milliseconds\(([\d\s*]+)\)",
        header.read_text(),
    )
    assert m, header
    ms = 1
    for factor in m[1].split("*"):
        ms *= int(factor)
    return timedelta(milliseconds=ms)


def test_the_runtime_path_and_own_code_path_have_their_own_timeouts():
    said = _nccl_section()
    runtime = Timeouts.from_hang_timeout(DEFAULT_HANG_TIMEOUT_S)
    assert f"({runtime.collective:g} s with the default {DEFAULT_HANG_TIMEOUT_S:g})" in said
    gloo = int(torch_constants.default_pg_timeout.total_seconds() // 60)
    nccl = int(_torch_nccl_default().total_seconds() // 60)
    assert f"torch's defaults, {gloo} min for gloo and {nccl} min for NCCL" in said
    assert f"torch {torch.__version__.split('+')[0]}" in said
    # the runtime's watchdog is not promised to own code: only where it starts one
    assert "With the watchdog on (the default)" not in said
    assert "Your own code has a watchdog only where it starts `Watchdog.from_env()`" in said


def test_own_code_pods_get_the_hang_timeout_and_none_of_the_nccl_settings():
    """What the doc says own code's pods get: TRAINFORGE_HANG_TIMEOUT, no TORCH_NCCL_* (the
    runtime's NCCL settings are made in-process by init_distributed)."""
    raw = {"name": "own", "team": "research", "pool": CPU_POOL.name,
           "entrypoint": {"script": "examples/mnist/train.py"}}  # fmt: skip
    t = target(CPU_POOL)
    env = {e["name"] for e in contract_env(resolve_job(parse_job(raw, "W"), t, "W"), t)}
    assert "TRAINFORGE_HANG_TIMEOUT" in env
    assert not [n for n in env if n.startswith("TORCH_NCCL_")], env
    said = _nccl_section()
    assert "the pods get `TRAINFORGE_HANG_TIMEOUT`, none of the `TORCH_NCCL_*` settings" in said
