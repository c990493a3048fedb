"""Setup of an FSDP job: seconds and each rank's peak host memory, this checkout vs another.

    .venv/bin/python bench/setup_memory.py [--before DIR] [--rounds 3] [--workers 2] [--json OUT]

Runs ``--workers`` ranks of the runtime (gloo on CPU; one GPU per rank where CUDA is present)
on a 1-step FSDP job of a GPT (default: the job of tests/training/test_setup_memory.py, 83.9M
parameters, 336 MB in fp32), each rank through bench/_setup_probe.py, which measures from
outside the runtime: setup seconds (start of ``_train`` to the loop), with the CPU seconds of
the process in that time (steadier on a loaded machine), and the resident set's
peak during setup above its start (VmHWM, reset at setup's start). ``--before DIR`` runs the
same job from another checkout (e.g. ``git archive <commit> trainforge | tar -x -C DIR``) in
the same rounds, interleaved, so that both see the same load; the probe relies only on what
both have. For this checkout it also prints what the runtime measured itself
(summary.json's ``setup_host_memory``), which should agree with the probe.

A rank's shard is ``4 x parameters / workers`` bytes (fp32 master weights). Medians over the
rounds; results in docs/performance.md ("Setup: host memory").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBE = str(ROOT / "bench" / "_setup_probe.py")
MiB = 1 << 20


def candidate_port() -> int:
    """A port free a moment ago; a job that lost it (EADDRINUSE) is run again on another."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clashed(logs: list[str]) -> bool:
    return any(re.search(r"EADDRINUSE|address already in use|Errno 98\b", x, re.I) for x in logs)


def job_flags(a: argparse.Namespace) -> list[str]:
    return [
        "--strategy", "fsdp", "--model", "gpt", "--layers", str(a.layers),
        "--d-model", str(a.d_model), "--heads", str(a.heads), "--seq-len", "16",
        "--vocab-size", str(a.vocab_size), "--dataset-size", "64", "--batch-size", "2",
        "--steps", "1", "--log-every", "1", "--warmup-steps", "0",
    ]  # fmt: skip


def run_job(tree: Path, flags: list[str], workers: int, tmp: Path) -> dict[str, Any]:
    """One job of ``tree``'s runtime; per-rank probe records and rank 0's summary."""
    for _ in range(4):  # a new rendezvous port when another process took the candidate
        out = Path(tempfile.mkdtemp(dir=tmp))
        port = str(candidate_port())
        procs = []
        for rank in range(workers):
            env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
            env.update(
                PYTHONPATH=str(tree), OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                WORLD_SIZE=str(workers), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(workers),
                SETUP_PROBE_OUT=str(out / "probe"),
            )  # fmt: skip
            cmd = [sys.executable, PROBE, *flags, "--output-dir", str(out / "run")]
            procs.append(
                subprocess.Popen(
                    cmd,
                    env=env,
                    cwd="/",
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )  # fmt: skip
            )
        logs = [p.communicate(timeout=1200)[0] for p in procs]
        if clashed(logs):
            continue
        for rank, (p, log) in enumerate(zip(procs, logs, strict=True)):
            if p.returncode != 0:
                raise SystemExit(f"{tree}: rank {rank} exited {p.returncode}:\n{log[-3000:]}")
        ranks = [json.loads((out / "probe" / f"rank{r}.json").read_text()) for r in range(workers)]
        return {"ranks": ranks, "summary": json.loads((out / "run" / "summary.json").read_text())}
    raise SystemExit("no free rendezvous port after 4 tries")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", default=None, help="another checkout to run in the same rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--vocab-size", type=int, default=16384)
    ap.add_argument("--json", default=None, help="also write the results as JSON here")
    a = ap.parse_args(argv)
    flags = job_flags(a)
    trees = {"after": ROOT}
    if a.before:
        trees["before"] = Path(a.before).resolve()
    jobs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory(prefix="tf-setupmem-") as tmp:
        for i in range(a.rounds):
            for name, tree in trees.items():
                jobs[name].append(run_job(tree, flags, a.workers, Path(tmp)))
                r = jobs[name][-1]["ranks"]
                print(
                    f"round {i + 1} {name:<6}: setup "
                    + ", ".join(f"{x['setup_s']:.1f}s ({x['setup_cpu_s']:.1f}s CPU)" for x in r)
                    + " | peak +"
                    + ", ".join(f"{(x['rss_peak'] - x['rss_start']) / MiB:.0f}" for x in r)
                    + " MiB",
                    flush=True,
                )
    params = jobs["after"][0]["summary"]["parameters"]
    shard = 4 * params / a.workers
    results: dict[str, Any] = {
        "job": flags,
        "workers": a.workers,
        "parameters": params,
        "full_fp32_mib": round(4 * params / MiB, 1),
        "shard_mib": round(shard / MiB, 1),
        "rounds": a.rounds,
        "load_average": round(os.getloadavg()[0], 1),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, runs in jobs.items():
        grew = [max(x["rss_peak"] - x["rss_start"] for x in j["ranks"]) for j in runs]
        setup = [max(x["setup_s"] for x in j["ranks"]) for j in runs]
        cpu = [max(x["setup_cpu_s"] for x in j["ranks"]) for j in runs]
        results[name] = {
            "setup_s_median": round(statistics.median(setup), 2),
            "setup_cpu_s_median": round(statistics.median(cpu), 2),
            "peak_increase_mib_median": round(statistics.median(grew) / MiB, 1),
            "peak_increase_minus_shard_mib": round((statistics.median(grew) - shard) / MiB, 1),
            "peak_reset": all(x["peak_reset"] for j in runs for x in j["ranks"]),
            "all_setup_s": [round(s, 2) for s in setup],
            "all_setup_cpu_s": [round(s, 2) for s in cpu],
            "all_peak_increase_mib": [round(g / MiB, 1) for g in grew],
        }
    own = [
        max(r["rss_peak_increase_bytes"] for r in j["summary"]["setup_host_memory"])
        for j in jobs["after"]
    ]
    results["after"]["runtime_own_peak_increase_mib"] = [round(g / MiB, 1) for g in own]
    print(json.dumps(results, indent=2))
    line = (
        f"\nFSDP x {a.workers}, {params / 1e6:.1f}M parameters ({results['full_fp32_mib']} MiB "
        f"fp32, shard {results['shard_mib']} MiB), medians of {a.rounds} (largest rank): "
    )
    line += "; ".join(
        f"{n}: setup {results[n]['setup_s_median']}s ({results[n]['setup_cpu_s_median']}s CPU), "
        f"host peak +"
        f"{results[n]['peak_increase_mib_median']} MiB = shard + "
        f"{results[n]['peak_increase_minus_shard_mib']} MiB"
        for n in jobs
    )
    print(line)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
