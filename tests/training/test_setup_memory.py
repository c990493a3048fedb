"""A rank's host memory during setup stays at its own shard plus a constant (FSDP, 2 ranks).

A real 2-rank FSDP job of the runtime on a GPT whose fp32 parameters (320 MiB) are twice a
rank's shard. The runtime measures each rank's resident set from the start of setup to the
first step (trainforge/training/hostmem.py: VmHWM, reset at the start of setup) and writes it
to summary.json. Building the whole model on the host first, as the runtime did before it
built on the meta device, costs the whole model: 423 MiB on this job, against 252 MiB now
(docs/performance.md, "Setup: host memory").

The constant, 128 MiB, is what setup costs besides the parameters, independent of the model's
size (measured on this job, docs/performance.md): the modules torch imports the first time a
model is built (sympy, torch._dynamo: ~72 MB), FSDP2's import (~7 MB), the synthetic dataset
(~6 MB) and at most one generator block of models/init.py (4 MiB).
"""

from __future__ import annotations

from pathlib import Path

from runtime_helpers import run_ranks, summary

MiB = 1 << 20
CONSTANT = 128 * MiB

# 4 blocks of d 1024 (12.6M parameters each) + 16384-row embedding and head: 83.9M
# parameters, 336 MB in fp32; each rank's shard is half. One step of 2 x 16 tokens.
JOB = [
    "--strategy", "fsdp", "--model", "gpt", "--layers", "4", "--d-model", "1024",
    "--heads", "8", "--seq-len", "16", "--vocab-size", "16384", "--dataset-size", "64",
    "--batch-size", "2", "--steps", "1", "--log-every", "1", "--warmup-steps", "0",
]  # fmt: skip


def test_each_rank_s_setup_peak_is_its_shard_plus_a_constant(tmp_path: Path) -> None:
    run_ranks(2, [*JOB, "--output-dir", str(tmp_path)], timeout=600)
    s = summary(tmp_path)
    full = 4 * s["parameters"]
    # The job tells the two ways apart: the half a rank does not hold is over the constant,
    # so a rank that held the whole model would be over the bound whatever else setup costs.
    assert full / 2 >= CONSTANT + 16 * MiB
    ranks = s["setup_host_memory"]
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["peak_since_setup_start"] is True, r  # VmHWM reset at setup's start
        shard = r["parameter_bytes"]
        assert 0.49 * full <= shard <= 0.51 * full, r  # its own half (FSDP2 pads a row)
        assert 0 < r["rss_peak_increase_bytes"] <= shard + CONSTANT, (
            f"rank {r['rank']}: setup grew the resident set by "
            f"{r['rss_peak_increase_bytes'] / MiB:.0f} MiB, over its shard "
            f"{shard / MiB:.0f} MiB + {CONSTANT / MiB:.0f} MiB"
        )
        assert r["rss_peak_bytes"] == r["rss_start_bytes"] + r["rss_peak_increase_bytes"]
