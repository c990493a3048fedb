"""`trainforge calibrate RUN_DIR`: feed a run's measured throughput back into the planner.

Reads the runtime's `RUN_DIR/summary.json` (written by rank 0 at the end of a run), works out
the MFU the run achieved against the peak the planner uses for its GPU and precision
(`trainforge.training.gpus`), compares the run's measured peak GPU memory with what the
memory model says for the same configuration, and records the MFU for that GPU model with
the run it came from and its date in the user's calibration file
(`$XDG_CONFIG_HOME/trainforge/calibration.json`, or `--file PATH`), never in the installed
package. From then on `estimate` (and so the plan and the cost table) plans that GPU with the
measured MFU instead of the table's guess. To share a measurement with everyone, write it
into the repository's copy (`--file trainforge/jobs/estimate/calibration.json`, which the
package ships) and commit it with the run's summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainforge.core.contract import PoolFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs.estimate import estimate, facts, gib
from trainforge.jobs.estimate.shape import NoEstimate
from trainforge.jobs.spec import parse_job
from trainforge.training import gpus


class CalibrationError(ValueError):
    """A summary that cannot calibrate anything; the message says why and what to run."""


def _load(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(
            f"{path}: no such file; RUN_DIR is a run's --output-dir (rank 0 writes "
            "summary.json there when the run ends)"
        ) from None
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: not JSON ({e})") from None
    except UnicodeDecodeError:
        raise CalibrationError(f"{path}: not UTF-8 text (not a summary.json)") from None
    except OSError as e:
        raise CalibrationError(f"{path}: {e.strerror}") from None
    if not isinstance(summary, dict):
        raise CalibrationError(f"{path}: not a summary.json (a JSON object)")
    return summary


def _need(summary: dict[str, Any], key: str, path: str) -> Any:
    value = summary.get(key)
    if value is None:
        raise CalibrationError(
            f"{path}: has no {key!r}; it was written by an older runtime, re-run the job"
        )
    return value


def _steady(summary: dict[str, Any], path: str) -> dict[str, Any]:
    """The run's steady-state rates: the planner's MFU is the steady state's, never a whole
    run's (start-up and compilation halved the 1.3B GPT's on an H200: 26.7% against 53-55%)."""
    steady = summary.get("steady")
    if not isinstance(steady, dict) or "samples_per_second" not in steady:
        raise CalibrationError(
            f"{path}: no steady-state rates (written by a runtime before they existed: its "
            "samples_per_second includes start-up and compilation); rerun with this runtime"
        )
    if not steady.get("windows"):
        raise CalibrationError(
            f"{path}: no steady log window (every window held one of the first steps); run "
            "more steps, or log more often (--log-every), so that some windows follow them"
        )
    return steady


def _job_for(summary: dict[str, Any]) -> Any:
    """The run as a job spec, so the memory model can be asked about the same configuration."""
    c = summary["config"]
    raw = {
        "name": "calibration",
        "team": "calibration",
        "pool": "calibration",
        "strategy": c["strategy"],
        "workers": 1,
        "procsPerWorker": summary["world_size"],
        "gpusPerWorker": summary["world_size"],
        "model": c["model"],
        "batchSize": c["batch_size"],
        "gradAccum": c["grad_accum"],
        "precision": c["precision"],
        "activationCheckpointing": c["activation_checkpointing"],
        "compile": c["compile"],
        "steps": c["steps"],
    }
    if c["model"] == "gpt":
        raw.update(
            layers=c["layers"],
            dModel=c["d_model"],
            heads=c["heads"],
            seqLen=c["seq_len"],
            vocabSize=c["vocab_size"],
        )
    return parse_job(raw, "summary.config")


def calibrate(run_dir: Path, calibration_file: Path | None = None) -> dict[str, Any]:
    """Compute the calibration entry for the run in `run_dir` (does not write it)."""
    s = _load(run_dir)
    path = str(run_dir / "summary.json")
    if s.get("device") != "cuda":
        raise CalibrationError(
            f"{path}: a {s.get('device', 'unknown')} run; calibration needs a GPU run "
            "(the planner has no CPU FLOP facts). See docs/performance.md, 'Planning a job'"
        )
    name = _need(s, "device_name", path)
    gpu = gpus.match_gpu(name)
    if gpu is None:
        known = ", ".join(gpus.GPUS)
        raise CalibrationError(
            f"{path}: device {name!r} is not in trainforge/training/gpus.py (known: {known}); "
            "add its peak FLOP/s there first"
        )
    precision = _need(s, "precision", path)
    if precision == "fp8":
        # its bf16-equivalent MFU would make every bf16 job on this GPU look faster
        raise CalibrationError(
            f"{path}: an fp8 run; its MFU against the bf16 peak is not a bf16 MFU, and the "
            "planner's MFU is per GPU, not per precision. Calibrate with a bf16 run"
        )
    peak = gpu.bf16_flops if precision == "bfloat16" else gpu.tf32_flops
    world = int(_need(s, "world_size", path))
    steady = _steady(s, path)
    sps = float(steady["samples_per_second"])
    flops_per_sample = float(_need(s, "flops_per_sample", path))
    if sps <= 0 or s.get("steps_this_run", 0) < 2:
        raise CalibrationError(f"{path}: the run made no measurable progress; run more steps")
    mfu = sps * flops_per_sample / world / peak
    cfg = s.get("config", {})
    # what the planner uses now: shipped + user entries, and those of the file to be written
    known = facts.load_calibration()
    if calibration_file is not None:
        known.update(facts.load_calibration(calibration_file))
    previous = facts.mfu_for(gpu.name, known)
    entry: dict[str, Any] = {
        "mfu": float(f"{mfu:.4g}"),  # 4 significant digits: a tiny MFU must not round to 0
        "device_name": name,
        "run": s.get("run_name"),
        "run_dir": str(run_dir),
        "date": str(s.get("finished_at", ""))[:10] or None,
        "precision": precision,
        "strategy": cfg.get("strategy"),
        "model": cfg.get("model"),
        "d_model": cfg.get("d_model") if cfg.get("model") == "gpt" else None,
        "compile": cfg.get("compile"),
        "activation_checkpointing": cfg.get("activation_checkpointing"),
        "world_size": world,
        "tokens_per_second": steady.get("tokens_per_second"),
        # what the MFU is of: the steady windows, start-up and compilation left out
        "measured_over": f"steady state, steps {steady['from_step']}-{steady['to_step']} "
        f"({steady['windows']} log windows)",
        "previous_mfu": round(previous.mid, 4),
        "previous_basis": previous.basis,
    }
    measured = s.get("peak_memory_allocated_bytes")
    if measured:
        entry["peak_memory_allocated_bytes"] = int(measured)
        try:
            pool = PoolFacts(
                name="calibration",
                gpus_per_node=world,
                gpu_name=gpu.name,
                gpu_memory_mib=int(gpu.memory_gib * 1024),
                gpu_models=(gpu.name,),
            )
            est = estimate(_job_for(s), pool).detail
            if est is not None:
                entry["estimated_peak_bytes"] = est.peak
        except (NoEstimate, JobConfigError, KeyError):
            pass
    if cfg.get("model") == "mlp":
        # MFU of the tiny MLP says nothing about transformer jobs: refuse to record it.
        raise CalibrationError(
            f"{path}: an MLP run; calibrate with a GPT run (the planner's MFU is for "
            "transformer matmuls)"
        )
    return {"gpu": gpu.name, "entry": entry}


def write(result: dict[str, Any], calibration_file: Path | None = None) -> Path:
    """Record the entry in `calibration_file` (default: the user's), creating its folder."""
    calibration_file = calibration_file or facts.user_calibration_file()
    calibration_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(calibration_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    data.setdefault("version", 1)
    data.setdefault("gpus", {})[result["gpu"]] = result["entry"]
    calibration_file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", "utf-8")
    return calibration_file


def report(result: dict[str, Any]) -> list[str]:
    e = result["entry"]
    lines = [
        f"{result['gpu']}: expected MFU {e['previous_mfu']:.1%} ({e['previous_basis']}) -> "
        f"{e['mfu']:.1%} measured by run {e['run']} on {e['date']} ({e['device_name']}, "
        f"{e['world_size']} GPU(s), {e['strategy']}, {e['precision']}, "
        f"compile {'on' if e['compile'] else 'off'})"
    ]
    if "peak_memory_allocated_bytes" in e:
        measured = e["peak_memory_allocated_bytes"]
        est = e.get("estimated_peak_bytes")
        if est:
            lines.append(
                f"peak GPU memory (allocated by PyTorch): measured {gib(measured)}, memory model "
                f"{gib(est)} ({est / measured - 1:+.0%})"
            )
        else:
            lines.append(f"peak GPU memory (allocated by PyTorch): measured {gib(measured)}")
    return lines


def declared_model_size(run_dir: Path) -> list[str]:
    """The `modelSize` block (declared form) for the stack, from what your code measured on a
    local run (trainforge/training/measure.py); add batchSize, gradAccum and steps."""
    path = run_dir / "model_size.json"
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
        values = {
            k: m[k]
            for k in ("parameters", "flopsPerSample", "activationBytesPerSample", "tokensPerSample")
        }
    except FileNotFoundError:
        raise CalibrationError(
            f"{path}: no such file; call trainforge.training.measure.model_size(model, batch, "
            "loss_fn) in your code and run it (run-local writes it to ./runs/JOB)"
        ) from None
    except (ValueError, KeyError, TypeError) as e:
        raise CalibrationError(f"{path}: not a model_size measurement ({e})") from None
    at = (m.get("measured") or {}).get("at", "?")
    return [
        f"modelSize:   # measured by trainforge.training.measure at {at}",
        f"  parameters: {int(values['parameters'])}",
        f"  flopsPerSample: {float(values['flopsPerSample']):.6g}",
        f"  activationBytesPerSample: {int(values['activationBytesPerSample'])}",
        *(
            [f"  tokensPerSample: {int(values['tokensPerSample'])}"]
            if values["tokensPerSample"] != 1
            else []
        ),
        "  batchSize: 1   # per GPU: set yours (and gradAccum, steps)",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="trainforge calibrate",
        description="Record a run's measured MFU (and compare its peak memory) for its GPU "
        "model in the user's calibration file, which the planner reads over the shipped one.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's --output-dir (summary.json)")
    p.add_argument(
        "--file",
        default=None,
        help="calibration file to update (default: $XDG_CONFIG_HOME/trainforge/"
        "calibration.json, ~/.config/trainforge/calibration.json when unset)",
    )
    p.add_argument("--dry-run", action="store_true", help="show old vs new, write nothing")
    p.add_argument(
        "--declared",
        action="store_true",
        help="print the modelSize block (declared form) your code measured with "
        "trainforge.training.measure.model_size into RUN_DIR/model_size.json; writes no "
        "file (not with --file or --dry-run)",
    )
    args = p.parse_args(argv)
    if args.declared:
        # --declared prints a block and writes no file: a --file or --dry-run given with it
        # would be read by nothing, so it is refused rather than ignored
        ignored = [
            f for f, on in (("--file", args.file is not None), ("--dry-run", args.dry_run)) if on
        ]
        if ignored:
            print(
                f"trainforge calibrate: {' and '.join(ignored)} with --declared: --declared "
                "prints the modelSize block and writes no calibration file; drop "
                f"{' and '.join(ignored)}, or drop --declared to record the run's MFU",
                file=sys.stderr,
            )
            return 2
        try:
            lines = declared_model_size(Path(args.run_dir))
        except CalibrationError as e:
            print(f"trainforge calibrate: {e}", file=sys.stderr)
            return 2
        print("\n".join(lines))
        return 0
    target = Path(args.file) if args.file else facts.user_calibration_file()
    try:
        result = calibrate(Path(args.run_dir), target)
    except (CalibrationError, facts.CalibrationFileError) as e:
        print(f"trainforge calibrate: {e}", file=sys.stderr)
        return 2
    for line in report(result):
        print(line)
    if not args.dry_run:
        try:
            write(result, target)
        except OSError as e:
            print(f"trainforge calibrate: cannot write {target}: {e.strerror}", file=sys.stderr)
            return 2
        print(f"wrote {target}")
    return 0
