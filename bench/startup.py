"""Start-up cost of the runtime, as ratios to a bare ``import torch, torch.distributed``.

    .venv/bin/python bench/startup.py [--rounds 5] [--json OUT]

Five commands, interleaved over ``--rounds`` rounds so background load hits them alike, each
a fresh interpreter, wall time from spawn to exit and CPU time (user + system of its process
tree; on a shared machine its ratios are the steady ones):

* ``import``: ``python -c "import torch, torch.distributed"`` -- the floor any torch job pays;
* ``import_dynamo``: the same plus ``torch._dynamo``, which torch 2.13 imports on its own the
  first time a ``torch.optim`` optimizer or DDP is constructed (``torch._disable_dynamo``): the
  floor for any job that trains, so ``job / import_dynamo`` is what the runtime itself adds;
* ``optimizer``: ``import torch, torch.distributed`` and one ``AdamW`` built, nothing else:
  the floor of any job that trains with ``torch.optim``;
* ``help``: ``python -m trainforge.training --help`` (argument parsing; should import no torch);
* ``job``: a 1-step, 1-process job (``--model mlp``, 64 samples, gloo on CPU or NCCL on a GPU):
  imports, process group, model, one step, summary, exit.

Reports the medians and ``job / import`` and ``help / import`` (targets: job <= 1.5x), and, once,
which of the pieces every training job constructs import ``torch._dynamo`` (``pulls_dynamo``).
``--before DIR`` also times ``help`` and ``job`` from another checkout (e.g. main's), in the
same rounds, so a before/after comparison sees the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# commands run from "/" so `-m` finds trainforge through PYTHONPATH only (--before works)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: str = "/") -> tuple[float, float]:
    """(wall, CPU) seconds of one command. CPU time (user + system of the process tree) moves
    far less than wall time with the load of a shared machine: its ratios are the steadier ones."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return wall, cpu


# What every training job builds, each checked in a fresh interpreter for `import torch._dynamo`
# (torch 2.13: Optimizer.__init__ -> add_param_group and zero_grad are `torch._disable_dynamo`
# wrappers that import it on first call, `step` imports it in `_use_grad_for_differentiable`;
# DistributedDataParallel.__init__ reads torch._dynamo.utils.get_optimize_ddp_mode()).
_MODEL = "m = torch.nn.Linear(4, 4)\n"
PIECES = {
    "AdamW(foreach=True)": _MODEL + "torch.optim.AdamW(m.parameters(), foreach=True)",
    "AdamW(foreach=False)": _MODEL + "torch.optim.AdamW(m.parameters(), foreach=False)",
    "SGD": _MODEL + "torch.optim.SGD(m.parameters(), lr=0.1)",
    "DDP (1-rank gloo)": _MODEL
    + (
        "import os, tempfile\n"
        "torch.distributed.init_process_group('gloo', rank=0, world_size=1,"
        " init_method='file://' + tempfile.mktemp())\n"
        "torch.nn.parallel.DistributedDataParallel(m)"
    ),
}


def pulls_dynamo(py: str, env: dict[str, str]) -> dict[str, bool]:
    out = {}
    for name, code in PIECES.items():
        check = (
            f"import sys, torch, torch.distributed\n{code}\nprint('torch._dynamo' in sys.modules)"
        )
        proc = subprocess.run([py, "-c", check], env=env, capture_output=True, text=True)
        out[name] = proc.stdout.strip().endswith("True")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", default=None, help="another checkout to time in the same rounds")
    ap.add_argument("--json", default=None, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    py = sys.executable
    times: dict[str, list[float]] = {
        "import": [], "import_dynamo": [], "optimizer": [], "help": [], "job": [],
    }  # fmt: skip
    imp_dynamo = [py, "-c", "import torch, torch.distributed, torch._dynamo"]
    optimizer = [py, "-c", f"import torch, torch.distributed\n{PIECES['AdamW(foreach=True)']}"]
    before_env = dict(env, PYTHONPATH=str(Path(args.before).resolve())) if args.before else None
    if before_env:
        times.update(help_before=[], job_before=[])
    cpu: dict[str, list[float]] = {k: [] for k in times}

    def run(name: str, cmd: list[str], env: dict[str, str]) -> None:
        wall, cpu_s = timed(cmd, env)
        times[name].append(wall)
        cpu[name].append(cpu_s)

    with tempfile.TemporaryDirectory(prefix="tf-startup-") as tmp:
        job = [
            py, "-m", "trainforge.training", "--model", "mlp", "--steps", "1",
            "--dataset-size", "64", "--batch-size", "8", "--warmup-steps", "0",
            "--log-every", "1",
        ]  # fmt: skip
        timed([py, "-c", "import torch, torch.distributed"], env)  # warm the page cache
        for i in range(args.rounds):
            run("import", [py, "-c", "import torch, torch.distributed"], env)
            run("import_dynamo", imp_dynamo, env)
            run("optimizer", optimizer, env)
            run("help", [py, "-m", "trainforge.training", "--help"], env)
            run("job", [*job, "--output-dir", f"{tmp}/run{i}"], env)
            if before_env:
                help_cmd = [py, "-m", "trainforge.training", "--help"]
                run("help_before", help_cmd, before_env)
                run("job_before", [*job, "--output-dir", f"{tmp}/b{i}"], before_env)
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    results = {
        "rounds": args.rounds,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "median_cpu_s": {k: round(v, 3) for k, v in cpu_med.items()},
        "cpu_job_over_import": round(cpu_med["job"] / cpu_med["import"], 2),
        "cpu_job_over_optimizer": round(cpu_med["job"] / cpu_med["optimizer"], 2),
        "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "all_cpu_s": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
        "job_over_import": round(med["job"] / med["import"], 2),
        "help_over_import": round(med["help"] / med["import"], 2),
        "job_over_import_dynamo": round(med["job"] / med["import_dynamo"], 2),
        "optimizer_over_import": round(med["optimizer"] / med["import"], 2),
        "job_over_optimizer": round(med["job"] / med["optimizer"], 2),
        "pulls_dynamo": pulls_dynamo(py, env),
        **(
            {
                "job_before_over_import": round(med["job_before"] / med["import"], 2),
                "help_before_over_import": round(med["help_before"] / med["import"], 2),
            }
            if before_env
            else {}
        ),
        "load_average": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(results, indent=2))
    print(
        f"\n1-step job {med['job']:.2f}s = {results['job_over_import']}x "
        f"`import torch, torch.distributed` ({med['import']:.2f}s); --help {med['help']:.2f}s "
        f"= {results['help_over_import']}x; job = {results['job_over_import_dynamo']}x "
        f"`import torch, torch.distributed, torch._dynamo` ({med['import_dynamo']:.2f}s), "
        f"{results['job_over_optimizer']}x import + one AdamW ({med['optimizer']:.2f}s) "
        f"(medians of {args.rounds}, load {results['load_average']}); CPU time: job = "
        f"{results['cpu_job_over_import']}x import, {results['cpu_job_over_optimizer']}x import "
        f"+ one AdamW; torch._dynamo imported "
        f"by: {', '.join(k for k, v in results['pulls_dynamo'].items() if v) or 'none'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
