"""The numbers an all-reduce acceptance test is judged by, with where each comes from.

Checked 2026-11-23 in github.com/aws-samples/awsome-distributed-training:

* HEALTHCHECK_FLOORS_GBPS: ``4.validation_and_observability/2.gpu-cluster-healthcheck/checks/
  5-nccl-allreduce.sh`` (``get_min_bus_bw``, commit 7217859f, 2026-02-21): p4d 300, p5/p5e/
  p5en 800, p6-b200 900 GB/s of all-reduce bus bandwidth, "conservative defaults" that the
  script reports as a *warning* only, for any number of nodes.
* REFERENCE_TWO_NODE_GBPS: ``micro-benchmarks/nccl-tests/README.md``, "Results" (commit
  39c17d60, 2025-09-26): AWS's published all_reduce_perf runs on two nodes, peak bus
  bandwidth 78.33 GB/s on 2 x p4de.24xlarge (8 B - 2 GB) and 487.09 GB/s on 2 x p5.48xlarge
  (8 B - 16 GB).

The two disagree for the two-node test this platform runs: AWS's own healthy two-node p5 run
(487 GB/s) is far below the 800 GB/s floor, and a p4d's EFA (4 x 100 Gbps = 50 GB/s per node)
bounds a two-node all-reduce's bus bandwidth near 50 x 2 x 15/16 = 94 GB/s, below 300. Judging a
two-node run by the floors would fail every healthy pair of nodes. So a two-node test passes at
PASS_FRACTION of the published two-node reference of its instance family (p4d: the p4de run,
same EFA and A100 GPUs; p5e/p5en: the p5 run, same 3200 Gbps EFA -- assumptions, marked in
the verdict), and reports the healthcheck floor beside it. For other node counts there is no
published reference: set ``acceptanceTest.minBusBandwidthGBps`` for the pool.
"""

from __future__ import annotations

import dataclasses

from trainforge.core import catalog

FACTS_CHECKED = "2026-11-23"
SOURCE_REPO = "github.com/aws-samples/awsome-distributed-training"
HEALTHCHECK_SOURCE = (
    f"{SOURCE_REPO} 4.validation_and_observability/2.gpu-cluster-healthcheck/checks/"
    "5-nccl-allreduce.sh @7217859f"
)
REFERENCE_SOURCE = f"{SOURCE_REPO} micro-benchmarks/nccl-tests/README.md Results @39c17d60"

# The figures are the GPU/instance catalog's (core/data/gpu_catalog.json, instanceTypes.*:
# allreduceFloorGBps, twoNodeAllreduceGBps, twoNodeReference; sources "awsome-healthcheck" and
# "awsome-nccl-tests" there).
HEALTHCHECK_FLOORS_GBPS: dict[str, float] = catalog.type_field("allreduceFloorGBps")
REFERENCE_TWO_NODE_GBPS: dict[str, float] = catalog.type_field("twoNodeAllreduceGBps")
# instance type -> the type whose published two-node run stands for it (same EFA bandwidth)
REFERENCE_STANDS_FOR: dict[str, str] = catalog.type_field("twoNodeReference")
PASS_FRACTION = 0.8

# DCGM diagnostic levels (dcgmi diag -r): what they are for and how long they take (NVIDIA
# DCGM user guide, "DCGM Diagnostics"); the Job's deadline allows twice that.
DCGM_LEVEL_SECONDS = {1: 120, 2: 600, 3: 3600, 4: 7200}


@dataclasses.dataclass(frozen=True)
class Floor:
    gbps: float | None  # the pass threshold; None = no threshold (numbers are reported)
    why: str


def allreduce_floor(instance_types: list[str] | tuple[str, ...], nodes: int) -> Floor:
    """The pass threshold for an all-reduce across `nodes` nodes of these types (the lowest
    over the types, so a pool of mixed types is judged by its slowest)."""
    floors = []
    for t in instance_types:
        ref_type = REFERENCE_STANDS_FOR.get(t)
        hc = HEALTHCHECK_FLOORS_GBPS.get(t)
        hc_note = (
            f"; AWS healthcheck floor {hc:g} GB/s (a warning there, any node count)" if hc else ""
        )
        if nodes == 2 and ref_type:
            ref = REFERENCE_TWO_NODE_GBPS[ref_type]
            assumed = "" if ref_type == t else f" (the {ref_type} run stands for {t}: same EFA)"
            floors.append(
                Floor(
                    round(PASS_FRACTION * ref, 2),
                    f"{PASS_FRACTION:.0%} of AWS's published 2-node {ref_type} result "
                    f"{ref:g} GB/s{assumed}{hc_note}; {REFERENCE_SOURCE}, checked {FACTS_CHECKED}",
                )
            )
        else:
            floors.append(
                Floor(
                    None,
                    f"no published {nodes}-node reference for {t}{hc_note}; set "
                    "acceptanceTest.minBusBandwidthGBps",
                )
            )
    known = [f for f in floors if f.gbps is not None]
    if known:
        return min(known, key=lambda f: f.gbps or 0.0)
    return floors[0] if floors else Floor(None, "no instance type given")
