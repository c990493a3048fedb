"""The GPU check anyone can run: `make gpu-check` (one H100 or H200, under 10 minutes).

    .venv/bin/python bench/gpu_check.py [--out build/gpu-check] [--budget-s 540]
    .venv/bin/python bench/gpu_check.py --dry-run      # CPU, tiny sizes: what CI runs

Writes ``gpu_check.json`` and ``gpu_check.md`` (a markdown table for docs/performance.md)
under ``--out``. Each check runs the real runtime (``python -m trainforge.training``) or a
bench script in its own process with a time limit; a check that fails or runs out of time is
recorded as such and the others still run. Checks, in order:

1. ``smoke``: GPT-150M trains 30 steps in bf16; its loss is finite and falls.
2. ``gpt_1p3b``: the 1.3B GPT (24 layers x 2048, seq 2048, vocab 32768, batch 8, FSDP2 + bf16
   + compile): the summary's steady MFU and tokens/s, the whole loop's beside them, set-up
   and start-up (compile) time, the set-up split by phase (process start and imports, process
   group, the imports set-up needs, dataset, model build/shard, the wait for the CUDA
   context, the weights' allocation and draw, the rest; beside them the context's own seconds
   on its thread), and the memory model
   (trainforge/jobs/estimate) against the peak PyTorch allocated.
2b. ``gpt_1p3b_fp8``: the same run with ``--precision fp8`` (torchao float8 Linear layers;
   one FSDP rank gathers the weights in bf16, training/fp8.py): steady tokens/s beside the bf16 run's (the ratio) and its MFU
   against the bf16 peak (bf16-equivalent). torchao missing: installed from the wheel in
   bench/wheels/ (``make fp8-wheel`` on a machine with a network), never from the network.
2c. ``fp8_profile``: bench/fp8_profile.py on the same 1.3B (FSDP2 + compile, one process):
   bf16, FP8 as the runtime runs it on one rank (bf16 all-gather) and FP8 with the float8
   all-gather forced (what it ran before), each a few steps timed and two profiled: ms per
   step, and each step's GPU kernel time by what launched it (FP8 and bf16 matmuls,
   attention, inductor's fused kernels, eager kernels, optimizer, NCCL) -- where FP8's time
   goes, and what the float8 all-gather costs on one GPU.
3. ``loops``: bench/throughput.py on GPT-124M (12 x 768, seq 1024; no compile in any loop:
   like for like, and compile gained nothing at this size) and on the MLP: the runtime vs
   the bare loop vs the seed's loop (fp32 as written, and bf16), steady state; and the aten
   ops of one steady step of the runtime beyond the bare loop's, named (counted, not timed).
4. ``checkpoint_stall``: a 150M GPT with AdamW saving every 200 steps (a real interval: the
   previous async write has long finished), sync and then --async-checkpoint: how long
   training was blocked per save (the first save on its own, then the median of the later
   ones), and the async stall as a share of the sync one (all periodic saves, and those after
   the first). Async also: when the first save was complete (its background write included)
   and when DCP's checkpoint process, started at set-up, was ready (and any wait for it).
5. ``kill_resume``: a small GPT (4 x 512) killed with SIGKILL after step 12 (the runtime's test hook), run
   again: it resumes from the step-10 checkpoint and finishes; its final loss against an
   uninterrupted run's (bit-identical where the kernels are deterministic: reported, not
   required, on a GPU).

``--dry-run`` runs every check on the CPU at tiny sizes (no compile): it proves the script,
its parsing and its table, not a GPU figure; the JSON says ``"dry_run": true``. Its fp8 run
goes through torchao's emulated float8 matmuls (the runtime's test hook
TRAINFORGE_TEST_FP8_ON_CPU, set for that run only): the FP8 wiring, not its speed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPT_1P3B = ["--model", "gpt", "--layers", "24", "--d-model", "2048", "--heads", "16",
            "--seq-len", "2048", "--vocab-size", "32768", "--batch-size", "8"]  # fmt: skip
GPT_124M = ["--model", "gpt", "--layers", "12", "--d-model", "768", "--heads", "12",
            "--seq-len", "1024", "--vocab-size", "50304"]  # fmt: skip
GPT_150M = ["--model", "gpt", "--layers", "12", "--d-model", "896", "--heads", "14",
            "--seq-len", "1024", "--vocab-size", "32768", "--batch-size", "8"]  # fmt: skip
TINY_GPT = ["--model", "gpt", "--layers", "2", "--d-model", "64", "--heads", "4",
            "--seq-len", "32", "--vocab-size", "256", "--batch-size", "8"]  # fmt: skip

# (real GPU sizes, dry-run sizes) of each check
SIZES: dict[str, dict[str, Any]] = {
    # GPT-150M (vocab 32768): GPT-124M's 50304-token bigram chain does not move its loss in
    # 20 steps (10.977 -> 10.977 on an H200, 2026-11-27), which says nothing about the GPU
    "smoke": {"gpu": [*GPT_150M, "--steps", "30", "--log-every", "5"],
              "dry": [*TINY_GPT, "--steps", "6", "--log-every", "2"]},
    "gpt_1p3b": {"gpu": [*GPT_1P3B, "--strategy", "fsdp", "--precision", "bf16", "--compile",
                         "--steps", "40", "--log-every", "5", "--dataset-size", "4096"],
                 "dry": [*TINY_GPT, "--strategy", "fsdp", "--steps", "8", "--log-every", "2"]},
    "gpt_1p3b_fp8": {"gpu": [*GPT_1P3B, "--strategy", "fsdp", "--precision", "fp8",
                             "--compile", "--steps", "40", "--log-every", "5",
                             "--dataset-size", "4096"],
                     "dry": [*TINY_GPT, "--strategy", "fsdp", "--precision", "fp8", "--steps",
                             "8", "--log-every", "2"]},
    # three variants, each compiled in turn: (its own steps, the runtime's flags)
    "fp8_profile": {"gpu": [["--warmup", "3", "--timed", "6", "--profiled", "2"],
                            [*GPT_1P3B, "--strategy", "fsdp", "--compile"]],
                    "dry": [["--warmup", "1", "--timed", "2", "--profiled", "1"],
                            [*TINY_GPT, "--strategy", "fsdp"]]},
    # saves at steps 200 and 400 (and the final one at 410): a real interval
    "checkpoint": {"gpu": [*GPT_150M, "--steps", "410", "--log-every", "50",
                           "--checkpoint-every", "200", "--dataset-size", "4096"],
                   "dry": [*TINY_GPT, "--steps", "8", "--log-every", "2",
                           "--checkpoint-every", "2"]},
    "kill_resume": {"gpu": ["--model", "gpt", "--layers", "4", "--d-model", "512", "--heads",
                            "8", "--seq-len", "512", "--vocab-size", "32768", "--batch-size",
                            "8", "--steps", "20", "--log-every", "5", "--checkpoint-every", "10"],
                    "dry": [*TINY_GPT, "--steps", "20", "--log-every", "5",
                            "--checkpoint-every", "10"]},
    "loops": {"gpu": [["--model", "gpt", "--layers", "12", "--d-model", "768", "--heads", "12",
                       "--seq-len", "1024", "--vocab-size", "50304", "--batch-size", "8",
                       "--dataset-size", "2048", "--steps", "100", "--rounds", "3",
                       "--log-every", "50"],
                      # 1000 steps (~1.6 s a loop on an H200): 300 (0.45 s) swung the floor
                      # by +-15% between rounds (2026-11-29), more than the gap measured
                      ["--model", "mlp", "--batch-size", "256", "--dataset-size", "65536",
                       "--steps", "1000", "--rounds", "3", "--log-every", "50"]],
              "dry": [["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2",
                       "--seq-len", "16", "--vocab-size", "64", "--batch-size", "4",
                       "--dataset-size", "128", "--steps", "4", "--rounds", "1",
                       "--log-every", "2"],
                      ["--model", "mlp", "--batch-size", "8", "--dataset-size", "256",
                       "--steps", "4", "--rounds", "1", "--log-every", "2"]]},
}  # fmt: skip
KILL_AFTER = 12  # the kill_resume run's SIGKILL, after this step (checkpoint at 10)


class Check:
    """Runs commands under the check's time limit and the whole script's budget."""

    def __init__(self, out: Path, dry: bool, deadline: float) -> None:
        self.out, self.dry, self.deadline = out, dry, deadline
        self.results: dict[str, dict[str, Any]] = {}  # the checks run so far (fp8 vs bf16)
        self.runs = 0  # numbers each run's log under out/logs/ (a device session's only record)

    def fresh(self, name: str) -> Path:
        """A run folder emptied first: a second `gpu-check` into the same --out must not
        resume the first one's checkpoints (it would save nothing and measure nothing)."""
        d = self.out / name
        shutil.rmtree(d, ignore_errors=True)
        return d

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def sizes(self, name: str) -> Any:
        return SIZES[name]["dry" if self.dry else "gpu"]

    def run(self, args: list[str], *, limit: float, env: dict[str, str] | None = None,
            script: str | None = None) -> tuple[int, str]:  # fmt: skip
        """(exit code, output) of the runtime (or `script`) with `args`; -1 on time out."""
        cmd = [sys.executable, script] if script else [sys.executable, "-m", "trainforge.training"]
        e = {
            k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_TEST_", "MLFLOW_"))
        }
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            e.pop(k, None)
        e.update(PYTHONPATH=str(ROOT), **(env or {}))
        limit = max(1.0, min(limit, self.left()))
        try:
            p = subprocess.run([*cmd, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                               timeout=limit)  # fmt: skip
            code, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as t:
            out = t.stdout.decode() if isinstance(t.stdout, bytes) else (t.stdout or "")
            code, out = -1, out + f"\n[gpu_check: timed out after {limit:.0f}s]"
        self.runs += 1
        log = self.out / "logs" / f"{self.runs:02d}-{Path(cmd[-1]).stem}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join([*cmd, *args])}\nexit {code}\n{out}")
        return code, out


def _summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())


def _tail(text: str, n: int = 6) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-n:])


def _failed(code: int, out: str) -> dict[str, Any]:
    why = "timed out" if code == -1 else f"exit {code}"
    return {"ok": False, "error": f"{why}: {_tail(out)}"}


def check_smoke(c: Check) -> dict[str, Any]:
    d = c.fresh("smoke")
    code, out = c.run([*c.sizes("smoke"), "--output-dir", str(d)], limit=120)
    if code != 0:
        return _failed(code, out)
    s = _summary(d)
    losses = [loss for _, loss in s["losses"]]
    ok = all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    return {"ok": ok, "first_loss": losses[0], "final_loss": losses[-1],
            "device_name": s["device_name"], "precision": s["precision"]}  # fmt: skip


def memory_model_bytes(summary: dict[str, Any]) -> int | None:
    """What the planner's memory model (trainforge/jobs/estimate) says this run's peak is,
    on the GPU it ran on (an H100's facts in a dry run on CPU)."""
    from trainforge.core.contract import PoolFacts
    from trainforge.jobs.estimate import estimate
    from trainforge.jobs.estimate.calibrate import _job_for
    from trainforge.training import gpus

    gpu = gpus.match_gpu(summary.get("device_name", "")) or gpus.GPUS["H100"]
    pool = PoolFacts(name="gpu-check", gpus_per_node=int(summary["world_size"]),
                     gpu_name=gpu.name, gpu_memory_mib=int(gpu.memory_gib * 1024),
                     gpu_models=(gpu.name,))  # fmt: skip
    detail = estimate(_job_for(summary), pool).detail
    return int(detail.peak) if detail is not None else None


def check_gpt_1p3b(c: Check, name: str = "gpt_1p3b", env: dict[str, str] | None = None
                   ) -> dict[str, Any]:  # fmt: skip
    d = c.fresh(name)
    code, out = c.run([*c.sizes(name), "--output-dir", str(d)], limit=300, env=env)
    if code != 0:
        return _failed(code, out)
    s = _summary(d)
    steady, whole, startup = s["steady"], s["whole_run"], s["startup"]
    measured = s.get("peak_memory_allocated_bytes")
    try:  # the planner's side needs the platform's deps (pydantic): its absence is no GPU fault
        model, model_error = memory_model_bytes(s), None
    except ImportError as e:  # the run's own figures still stand (2026-11-29: a bare GPU image)
        model, model_error = None, f"memory model not computed: {e}"
    return {
        "ok": s["rates_basis"] == "steady",
        "steady_mfu": steady["mfu"],
        "steady_tokens_per_second": steady["tokens_per_second"],
        "steady_steps": [steady["from_step"], steady["to_step"]],
        "whole_run_mfu": whole["mfu"],
        "whole_run_tokens_per_second": whole["tokens_per_second"],
        "setup_seconds": s["setup_seconds"],
        "setup_phases": s.get("setup_phases"),
        "startup_seconds": startup["seconds"],
        "precision": s["precision"],
        "float8_all_gather": s.get("float8_all_gather"),
        "startup_steps": startup["windows"],
        "memory_model_bytes": model,
        "peak_allocated_bytes": measured,
        "peak_reserved_bytes": s.get("peak_memory_reserved_bytes"),
        "memory_model_vs_allocated": (model / measured - 1) if model and measured else None,
        **({"memory_model_error": model_error} if model_error else {}),
    }


WHEELS = ROOT / "bench" / "wheels"  # `make fp8-wheel`


def _torchao_installed() -> bool:
    """Whether this Python has torchao with its float8 package, found on its path without
    importing either (`find_spec` of "torchao.float8" would import torchao)."""
    importlib.invalidate_caches()  # a wheel installed since this process started is seen
    spec = importlib.util.find_spec("torchao")
    return spec is not None and any(
        (Path(where) / "float8" / "__init__.py").is_file()
        for where in spec.submodule_search_locations or ()
    )


def torchao_ready(c: Check) -> str | None:
    """None when torchao is installed in this Python; else installs the wheel from
    bench/wheels/ (offline: --no-index --no-deps) and says why it could not, if it could not.

    Found, not imported: importing torchao here loads its native kernel libraries into this
    driver (`torch.ops.load_library`), which every check's result depends on, and a process
    only to import it cost ~4 CPU s. Whether it imports is proved where it runs: the fp8 run's
    own ranks check it first (training/fp8.py, `problem`) and refuse in one line if not."""
    if _torchao_installed():
        return None
    wheels = sorted(WHEELS.glob("torchao-*.whl"))
    if not wheels:
        return f"torchao is not installed and {WHEELS} has no wheel: run `make fp8-wheel` first"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                        str(wheels[-1])], capture_output=True, text=True, timeout=300)  # fmt: skip
    if p.returncode != 0 or not _torchao_installed():
        return f"installing {wheels[-1].name} failed: {_tail(p.stdout + p.stderr, 2)}"
    return None


def check_gpt_1p3b_fp8(c: Check) -> dict[str, Any]:
    """The 1.3B in FP8 beside the bf16 run of the same check: tokens/s ratio, and the MFU
    against the bf16 peak (what the runtime reports for FP8, bf16-equivalent)."""
    if (why := torchao_ready(c)) is not None:
        return {"ok": False, "error": why}
    env = {"TRAINFORGE_TEST_FP8_ON_CPU": "1"} if c.dry else None  # the CPU rehearsal only
    r = check_gpt_1p3b(c, "gpt_1p3b_fp8", env)
    if "steady_tokens_per_second" not in r:
        return r
    r["ok"] = r["ok"] and r["precision"] == "fp8"
    bf16 = c.results.get("gpt_1p3b", {}).get("steady_tokens_per_second")
    r["tokens_per_second_vs_bf16"] = r["steady_tokens_per_second"] / bf16 if bf16 else None
    return r


PROFILED = ("bf16", "fp8", "fp8_ag")  # bench/fp8_profile.py's variants, in its order


def check_fp8_profile(c: Check) -> dict[str, Any]:
    """bench/fp8_profile.py: each variant's ms per step and its GPU time by category; the
    step time of each over bf16's (a speed-up: above 1 is faster)."""
    if (why := torchao_ready(c)) is not None:
        return {"ok": False, "error": why}
    path = c.out / "fp8_profile.json"
    path.unlink(missing_ok=True)
    steps, runtime = c.sizes("fp8_profile")
    code, out = c.run([*steps, "--json", str(path), "--", *runtime], limit=180,
                      script=str(ROOT / "bench" / "fp8_profile.py"))  # fmt: skip
    if not path.exists():
        return _failed(code, out)
    report = json.loads(path.read_text())
    variants = {v: report[v] for v in PROFILED if v in report}
    bf16 = variants.get("bf16", {}).get("step_ms")
    for x in variants.values():
        if bf16 and x.get("step_ms"):
            x["speedup_vs_bf16"] = bf16 / x["step_ms"]
    ok = code == 0 and len(variants) == len(PROFILED)
    ok = ok and all("error" not in x and x.get("losses_finite") for x in variants.values())
    return {"ok": ok, "variants": variants, **({} if code == 0 else _failed(code, out))}


def _ops(ops: dict[str, Any] | None) -> dict[str, Any]:
    """bench/throughput.py's op count, without the per-op tables (they stay in its JSON)."""
    if not ops or "error" in ops:
        return {"error": (ops or {}).get("error", "not counted")}
    return {k: ops[k] for k in ("floor", "runtime", "extra")}


def check_loops(c: Check) -> dict[str, Any]:
    results: dict[str, Any] = {"ok": True}
    device = ["--device", "cpu" if c.dry else "cuda", "--workers", "1"]
    for name, args in zip(("gpt_124m", "mlp"), c.sizes("loops"), strict=True):
        path = c.out / f"loops_{name}.json"
        code, out = c.run([*device, *args, "--json", str(path)], limit=180,
                          script=str(ROOT / "bench" / "throughput.py"))  # fmt: skip
        if code != 0:
            results[name] = _failed(code, out)
            results["ok"] = False
            continue
        bench = json.loads(path.read_text())
        rows = bench["rows"]
        results[name] = {
            "steps_per_second": {m: r["steps_per_s_median"] for m, r in rows.items()},
            "runtime_vs_floor": rows["runtime"]["vs_floor"],
            "runtime_vs_floor_paired": rows["runtime"].get("vs_floor_paired"),
            "runtime_vs_seed": rows["runtime"]["vs_seed"],
            # what a steady runtime step dispatches beyond the bare loop's, op by op (counted)
            "ops_per_step": _ops(bench.get("ops_per_step")),
        }
        if "seed_bf16" in rows:
            results[name]["runtime_vs_seed_bf16"] = (
                rows["runtime"]["steps_per_s_median"] / rows["seed_bf16"]["steps_per_s_median"]
            )
    return results


_BLOCKED = re.compile(
    r"checkpoint: saved \S+step_(\d+) \((\w+)\) in [\d.]+s, training blocked ([\d.]+)s"
    r"(?: \(([\d.]+)s of it waiting for the previous save)?"
)
# the first periodic save: how long until it was complete (async: its background write too)
_FIRST_COMPLETE = re.compile(r"checkpoint: saved \S+step_\d+ \(periodic\) in ([\d.]+)s")
# async: DCP's checkpoint process, started at set-up, and any wait for it at the first save
_WRITER_READY = re.compile(
    r"DCP's checkpoint process was started at set-up and ready ([\d.]+)s later"
)
_WRITER_WAITED = re.compile(r"([\d.]+)s of it waiting for DCP's checkpoint process to start")


def check_checkpoint(c: Check) -> dict[str, Any]:
    results: dict[str, Any] = {"ok": True}
    for mode, extra in (("sync", []), ("async", ["--async-checkpoint"])):
        d = c.fresh(f"ckpt_{mode}")
        args = [*c.sizes("checkpoint"), *extra, "--checkpoint-dir", str(d / "ckpt"),
                "--output-dir", str(d), "--keep-last", "2"]  # fmt: skip
        code, out = c.run(args, limit=150)
        if code != 0:
            results[mode] = _failed(code, out)
            results["ok"] = False
            continue
        found = _BLOCKED.findall(out)
        summary = _summary(d) if (d / "summary.json").is_file() else {}
        saves = [(int(st), why, float(b)) for st, why, b, _ in found]
        periodic = [b for _, why, b in saves if why == "periodic"]
        # the save's own stall: blocked less the wait for the previous save still writing
        own = [float(b) - float(w or 0) for _, why, b, w in found if why == "periodic"]
        results[mode] = {
            "saves": len(saves),
            "first_blocked_s": periodic[0] if periodic else None,
            "steady_blocked_s_median": statistics.median(periodic[1:])
            if len(periodic) > 1
            else None,
            "blocked_s": [b for _, _, b in saves],
            "periodic_blocked_s": periodic,
            "every": int(
                c.sizes("checkpoint")[c.sizes("checkpoint").index("--checkpoint-every") + 1]
            ),
            "own_blocked_s_median": statistics.median(own[1:]) if len(own) > 1 else None,
            "waited_for_previous_s": [float(w or 0) for *_, w in found],
            "first_complete_s": float(m.group(1)) if (m := _FIRST_COMPLETE.search(out)) else None,
            # async only: when the writer process was ready (None: not started at set-up)
            "writer_ready_s": float(m.group(1)) if (m := _WRITER_READY.search(out)) else None,
            "writer_waited_s": float(m.group(1)) if (m := _WRITER_WAITED.search(out)) else 0.0,
            # async starts DCP's checkpoint process during set-up: what that costs set-up
            "setup_s": summary.get("setup_seconds"),
            "setup_checkpoint_start_s": (summary.get("setup_phases") or {}).get(
                "checkpoint_start_s"
            ),
            # DCP's checkpoint process (rank 0's, after its last save): pid, VmRSS, VmHWM,
            # RssAnon bytes; the plan counts it as facts.CHECKPOINT_PROCESS_BYTES per rank
            "process_memory": summary.get("checkpoint_process_memory"),
            "async_fell_back": "WARNING: the async save" in out,
            # a small /dev/shm (a container's 64 MiB default) makes every "async" save sync
            "shm_too_small": "--async-checkpoint needs" in out,
        }
        results["ok"] = results["ok"] and len(periodic) >= 2
        if mode == "async" and (results[mode]["async_fell_back"] or results[mode]["shm_too_small"]):
            results["ok"] = False  # "async" saves that were synchronous are not what we measure
    sync, asy = results.get("sync", {}), results.get("async", {})
    if sync.get("blocked_s") and asy.get("blocked_s"):
        # the periodic saves' median stall, async over sync (the goal: <= 10%)
        med = {m: statistics.median(_periodic(x)) for m, x in (("sync", sync), ("async", asy))}
        results["async_vs_sync"] = med["async"] / med["sync"] if med["sync"] else None
        # the saves after the first (the first async one allocates the staging buffers)
        steady = (sync.get("steady_blocked_s_median"), asy.get("steady_blocked_s_median"))
        results["async_vs_sync_after_first"] = (
            steady[1] / steady[0] if steady[0] and steady[1] is not None else None
        )
    return results


def _periodic(x: dict[str, Any]) -> list[float]:
    return x["periodic_blocked_s"] or x["blocked_s"]


def check_kill_resume(c: Check) -> dict[str, Any]:
    base = c.sizes("kill_resume")
    whole_dir, killed_dir = c.fresh("kill_whole"), c.fresh("kill_resumed")
    code, out = c.run([*base, "--output-dir", str(whole_dir), "--checkpoint-dir",
                       str(whole_dir / "ckpt")], limit=120)  # fmt: skip
    if code != 0:
        return _failed(code, out)
    args = [*base, "--output-dir", str(killed_dir), "--checkpoint-dir", str(killed_dir / "ckpt")]
    code, out = c.run(args, limit=120, env={"TRAINFORGE_TEST_FAULT": f"0:{KILL_AFTER}:KILL"})
    if code != -9:
        return {
            "ok": False,
            "error": f"the killed run exited {code}, not -9 (SIGKILL): {_tail(out)}",
        }
    code, out = c.run(args, limit=120)
    if code != 0:
        return _failed(code, out)
    resumed = re.search(r"checkpoint: resumed from \S+ at step (\d+)", out)
    a, b = _summary(whole_dir), _summary(killed_dir)
    same = a["param_stats"] == b["param_stats"]
    close = abs(a["final_loss"] - b["final_loss"]) <= 1e-2 * max(1.0, abs(a["final_loss"]))
    return {
        "ok": bool(resumed) and b["steps"] == a["steps"] and close,
        "killed_after_step": KILL_AFTER,
        "resumed_at_step": int(resumed.group(1)) if resumed else None,
        "final_loss": b["final_loss"],
        "uninterrupted_final_loss": a["final_loss"],
        "bit_identical": same,
    }


CHECKS = (
    ("smoke", check_smoke),
    ("gpt_1p3b", check_gpt_1p3b),
    ("gpt_1p3b_fp8", check_gpt_1p3b_fp8),
    ("fp8_profile", check_fp8_profile),
    ("loops", check_loops),
    ("checkpoint_stall", check_checkpoint),
    ("kill_resume", check_kill_resume),
)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _gib(v: float | None) -> str:
    if not v:
        return "n/a"
    return f"{v / 2**30:.1f} GiB" if v >= 2**30 else f"{v / 2**20:.1f} MiB"


def _s(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} s"


BEFORE_SETUP = {"process_start_s": "process start + imports", "process_group_s": "process group"}
IN_SETUP = {"fp8_check_s": "fp8 check", "imports_s": "imports (dynamo, compile, FSDP2, torchao)", "dataset_s": "dataset",
            "checkpoint_start_s": "checkpoint process start (DCP import)",
            "model_s": "model", "cuda_init_s": "waiting for the CUDA context",
            "weights_s": "weights (allocate, draw)", "restore_and_other_s": "rest",
            "loop_start_s": "first barrier"}  # fmt: skip
# beside the phases, not added to them: the CUDA context's own seconds, on a thread
BESIDE_SETUP = {"cuda_context_s": "CUDA context + first allocation, on a thread"}


def _phases(p: dict[str, float] | None) -> str:
    """' (dataset 0.01 s, model 2.10 s, ...; before it: process start + imports 3.10 s, ...)':
    the summary's set-up split, the phases inside `setup_seconds` first."""
    if not p:
        return ""

    def words(names: dict[str, str]) -> str:
        return ", ".join(f"{w} {_s(p[k])}" for k, w in names.items() if k in p)

    beside = f"; beside them: {words(BESIDE_SETUP)}" if any(k in p for k in BESIDE_SETUP) else ""
    return f" ({words(IN_SETUP)}{beside}; before it: {words(BEFORE_SETUP)})"


def _gathered(g: dict[str, Any]) -> str:
    """' (float8 all-gather off)': how FSDP2 gathered an FP8 run's weights (its summary)."""
    on = g.get("float8_all_gather")
    return "" if on is None else f" (float8 all-gather {'on' if on else 'off'})"


def _profiled(name: str, x: dict[str, Any]) -> str:
    """'fp8: 230 ms/step = 1.15x bf16 (float8 all-gather off), GPU busy 228 ms (99%): fp8_matmul
    95.0, ...; 3,100 kernels/step': one variant of bench/fp8_profile.py, in words."""
    if "error" in x:
        return f"{name}: {x['error']}"
    vs = x.get("speedup_vs_bf16")
    gather = "" if name == "bf16" else _gathered(x)
    cats = ", ".join(f"{k} {v:.1f}" for k, v in x.get("gpu_ms_per_step", {}).items())
    share = x.get("gpu_busy_share")
    return (f"{name}: {x['step_ms']:.0f} ms/step{f' = {vs:.2f}x bf16' if vs and name != 'bf16' else ''}"
            f"{gather}, GPU busy {x.get('gpu_busy_ms_per_step', 0):.0f} ms"
            f"{f' ({100 * share:.0f}%)' if share else ''}"
            f"{f': {cats} ms' if cats else ''}; {x.get('kernels_per_step', 0):,.0f} kernels/step")  # fmt: skip


def _ops_words(loops: dict[str, Any]) -> str:
    """The loops row's op count: the runtime's ops a steady step beyond the floor's, named."""
    ops = loops.get("ops_per_step")
    if not ops:
        return ""
    if "error" in ops:
        return f"; ops/step not counted ({ops['error']})"
    extra = ", ".join(f"{n:+d} {op}" for op, n in ops["extra"].items()) or "none"
    return f"; ops/step floor {ops['floor']}, runtime {ops['runtime']} ({extra})"


def markdown(report: dict[str, Any]) -> str:
    """The table for docs/performance.md: one row per check, its figures in words."""
    r = report["checks"]
    rows = []

    def row(name: str, figures: str) -> None:
        if name not in r:
            return  # not asked for (--only)
        res = r[name]
        verdict = "skipped" if res.get("skipped") else ("ok" if res.get("ok") else "FAILED")
        if res.get("error") or res.get("skipped"):
            figures = res.get("error") or res.get("skipped")
        rows.append(f"| {name} | {verdict} | {figures} |")

    sm = r.get("smoke", {})
    row("smoke", f"loss {sm.get('first_loss', 0):.3f} -> {sm.get('final_loss', 0):.3f} "
        f"({sm.get('precision')})")  # fmt: skip
    for name in ("gpt_1p3b", "gpt_1p3b_fp8"):
        g = r.get(name, {})
        fp8 = name.endswith("fp8")
        vs = g.get("tokens_per_second_vs_bf16")
        row(name, (
            f"steady MFU {_pct(g.get('steady_mfu'))}{' (bf16-equivalent)' if fp8 else ''}, "
            f"{g.get('steady_tokens_per_second') or 0:,.0f} tokens/s"
            f"{f' = {vs:.2f}x bf16' if fp8 and vs else ''}{_gathered(g) if fp8 else ''} "
            f"(steps {g.get('steady_steps')}); "
            f"whole loop MFU {_pct(g.get('whole_run_mfu'))}; "
            f"setup {_s(g.get('setup_seconds'))}{_phases(g.get('setup_phases'))}, start-up "
            f"steps {_s(g.get('startup_seconds'))}; "
            f"memory model {_gib(g.get('memory_model_bytes'))} vs allocated "
            f"{_gib(g.get('peak_allocated_bytes'))} (reserved {_gib(g.get('peak_reserved_bytes'))})"
        ))  # fmt: skip
    row("fp8_profile", "; ".join(_profiled(v, x) for v, x in
                                 r.get("fp8_profile", {}).get("variants", {}).items()))  # fmt: skip
    lp = r.get("loops", {})
    parts = []
    for name in ("gpt_124m", "mlp"):
        x = lp.get(name, {})
        if "steps_per_second" in x:
            sps = ", ".join(f"{m} {v:.1f}" for m, v in x["steps_per_second"].items())
            parts.append(f"{name}: steps/s {sps}; runtime/floor {x['runtime_vs_floor']:.2f}x, "
                         f"runtime/seed {x['runtime_vs_seed']:.2f}x{_ops_words(x)}")  # fmt: skip
        elif x:
            parts.append(f"{name}: {x.get('error')}")
    row("loops", "; ".join(parts))
    ck = r.get("checkpoint_stall", {})
    parts = []
    for mode in ("sync", "async"):
        x = ck.get(mode, {})
        if "saves" in x:
            setup = f", set-up {_s(x['setup_s'])}" if x.get("setup_s") is not None else ""
            if x.get("setup_checkpoint_start_s") is not None:
                setup += f" of which {_s(x['setup_checkpoint_start_s'])} starting its writer"
            parts.append(f"{mode}: first {_s(x['first_blocked_s'])}, then median "
                         f"{_s(x['steady_blocked_s_median'])} blocked ({x['saves']} saves{setup})")  # fmt: skip
            if any(x.get("waited_for_previous_s") or []):
                parts[-1] += (f", of which the save itself {_s(x.get('own_blocked_s_median'))} "
                              "(the rest: waiting for the previous write)")  # fmt: skip
            if mode == "async" and x.get("first_complete_s") is not None:
                parts[-1] += f"; the first complete after {_s(x['first_complete_s'])}"
            if mode == "async" and x.get("writer_ready_s") is not None:
                parts[-1] += (f", its checkpoint process started at set-up and ready "
                              f"{_s(x['writer_ready_s'])} later, waited for "
                              f"{_s(x.get('writer_waited_s'))}")  # fmt: skip
            elif mode == "async" and "first_complete_s" in x:
                parts[-1] += ", its checkpoint process not started at set-up"
            if mode == "async" and (pm := x.get("process_memory")):
                parts[-1] += (f"; the checkpoint process holds {pm['RssAnon'] / 2**20:.0f} MiB "
                              f"of its own (RssAnon; VmRSS {pm['VmRSS'] / 2**20:.0f} MiB, peak "
                              f"{pm['VmHWM'] / 2**20:.0f} MiB)")  # fmt: skip
            elif (mode == "async" and "process_memory" in x
                  and not (x.get("shm_too_small") or x.get("async_fell_back"))):  # fmt: skip
                parts[-1] += "; the checkpoint process's memory NOT recorded"
            if mode == "async" and (x.get("shm_too_small") or x.get("async_fell_back")):
                why = "/dev/shm too small" if x.get("shm_too_small") else "a save failed"
                parts[-1] += f" -- NOT async: {why}, saved synchronously"
        elif x:
            parts.append(f"{mode}: {x.get('error')}")
    if ck.get("async_vs_sync") is not None:
        every = ck.get("sync", {}).get("every")
        parts.append(f"async stall {_pct(ck['async_vs_sync'])} of sync"
                     f"{f' (saves every {every} steps)' if every else ''}")  # fmt: skip
        if ck.get("async_vs_sync_after_first") is not None:
            parts[-1] += f", {_pct(ck['async_vs_sync_after_first'])} after the first save"
    row("checkpoint_stall", "; ".join(parts))
    k = r.get("kill_resume", {})
    row("kill_resume", f"killed after step {k.get('killed_after_step')}, resumed at "
        f"{k.get('resumed_at_step')}; final loss {k.get('final_loss')} vs "
        f"{k.get('uninterrupted_final_loss')} uninterrupted; bit-identical "
        f"{k.get('bit_identical')}")  # fmt: skip
    head = (f"GPU check on {report['device']} ({report['torch']}), "
            f"{report['wall_seconds']:.0f} s{' -- DRY RUN on CPU, tiny sizes' if report['dry_run'] else ''}")  # fmt: skip
    return "\n".join([head, "", "| check | result | figures |", "|---|---|---|", *rows]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (what CI runs)")
    p.add_argument("--out", default="build/gpu-check", help="where the JSON, table and runs go")
    p.add_argument("--budget-s", type=float, default=540.0,
                   help="stop starting checks after this many seconds (default 540: 9 min)")  # fmt: skip
    p.add_argument("--only", default="", help="comma-separated checks to run (default: all)")
    a = p.parse_args(argv)
    names = [n for n, _ in CHECKS]
    only = [x for x in a.only.split(",") if x]
    if bad := [x for x in only if x not in names]:
        p.error(f"--only {','.join(bad)}: unknown; valid: {', '.join(names)}")
    import torch

    if not a.dry_run and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here; run with --dry-run for the CPU rehearsal",
              file=sys.stderr)  # fmt: skip
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    c = Check(out, a.dry_run, started + a.budget_s)
    device = "cpu" if a.dry_run else torch.cuda.get_device_name(0)
    report: dict[str, Any] = {"device": device, "torch": f"torch {torch.__version__}",
                              "python": platform.python_version(), "dry_run": a.dry_run,
                              "checks": {}}  # fmt: skip
    for name, fn in CHECKS:
        if only and name not in only:
            continue
        if c.left() < 20:
            report["checks"][name] = {"ok": False, "skipped": f"budget of {a.budget_s:.0f} s spent"}
            continue
        t0 = time.monotonic()
        try:
            result = fn(c)
        except Exception as e:  # noqa: BLE001 - one check's bug must not hide the others
            result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        result["seconds"] = time.monotonic() - t0
        report["checks"][name] = c.results[name] = result
        print(f"gpu-check: {name}: {'ok' if result.get('ok') else 'FAILED'} "
              f"({result['seconds']:.0f} s)", flush=True)  # fmt: skip
        # the checks so far, on disk at once: a run cut short (a lease's end, a kill) keeps them
        (out / "gpu_check.json").write_text(json.dumps({**report, "partial": True}, indent=2,
                                                       sort_keys=True) + "\n")  # fmt: skip
    report["wall_seconds"] = time.monotonic() - started
    report["ok"] = all(r.get("ok") for r in report["checks"].values())
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    table = markdown(report)
    (out / "gpu_check.md").write_text(table)
    print(table, end="")
    print(f"gpu-check: wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
