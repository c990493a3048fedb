"""One rank of the runtime with its setup measured from outside (bench/setup_memory.py).

    SETUP_PROBE_OUT=DIR RANK=.. WORLD_SIZE=.. ... python bench/_setup_probe.py RUNTIME_FLAGS...

Runs ``python -m trainforge.training`` of whichever checkout is on PYTHONPATH (today's or an
older one: it relies only on ``loop._train`` and ``Reporter.start_loop``, which both have),
and writes DIR/rank<R>.json: setup seconds (entry of ``_train`` to the start of the loop, what
summary.json's ``setup_seconds`` counts), the process's CPU seconds in that time (all its
threads; steadier than wall time on a loaded machine) and the resident set at setup's start and its peak up
to the loop (VmHWM, reset at setup's start). Self-contained, so that it measures an old
checkout the same way as the new one.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> int:
    from trainforge.training import loop
    from trainforge.training.__main__ import main as runtime_main
    from trainforge.training.metrics import Reporter

    out = Path(os.environ["SETUP_PROBE_OUT"])
    rank = os.environ.get("RANK", "0")
    record: dict[str, float | int | bool] = {}
    train, start_loop = loop._train, Reporter.start_loop

    def measured_train(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        try:
            Path("/proc/self/clear_refs").write_text("5")
            record["peak_reset"] = True
        except OSError:
            record["peak_reset"] = False
        record.update(rss_start=_rss(), t0=time.perf_counter(), c0=time.process_time())
        return train(*args, **kwargs)

    def measured_start_loop(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if "rss_peak" not in record:
            record.update(
                rss_peak=_hwm(),
                setup_s=time.perf_counter() - record["t0"],
                setup_cpu_s=time.process_time() - record["c0"],
            )
        return start_loop(self, *args, **kwargs)

    loop._train = measured_train
    Reporter.start_loop = measured_start_loop
    code = runtime_main(argv)
    record.pop("t0", None)
    record.pop("c0", None)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
