"""Start-up cost of `trainforge run-local --stack dev mnist-user --dry-run` for a job whose
pool-dependent fields are all in config (gpusPerWorker, procsPerWorker, restartPolicy,
backend), so run-local needs no program run to find or resolve it.

    .venv/bin/python bench/run_local_start.py [--rounds 3] [--before DIR] [--download]

A copy of the repository's project (Pulumi.yaml, __main__.py, Pulumi.dev.yaml, examples/) in a
temporary folder; each round a fresh interpreter, wall time from spawn to exit and CPU time
(user + system of its process tree, the steadier figure on a shared machine). `--before DIR`
times another checkout's trainforge (e.g. `git archive 5907cbea trainforge | tar -x -C DIR`)
in the same rounds; `--download` adds a download to the job's script (the note then needs the
stack's program run, once).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
JOB = "mnist-user"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def project(dest: Path, download: bool) -> Path:
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "examples", dest / "examples")
    data = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    (job,) = [j for j in data["config"]["trainforge:jobs"] if j["name"] == JOB]
    job.update(gpusPerWorker=0, procsPerWorker=1, restartPolicy="OnFailure", backend="pytorchjob")
    (dest / "Pulumi.dev.yaml").write_text(yaml.safe_dump(data))
    if download:
        script = dest / job["entrypoint"]["script"]
        script.write_text(
            script.read_text()
            + "\nimport torchvision\ntorchvision.datasets.MNIST('/d', download=True)\n"
        )
    return dest


def timed(code: Path, cwd: Path) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_")}
    env["PYTHONPATH"] = str(code)
    cmd = [sys.executable, "-m", "trainforge", "run-local", "--stack", "dev", JOB, "--dry-run"]
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{code}: run-local failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, cpu, proc.stderr


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--before", type=Path, help="another checkout's root (holding trainforge/)")
    p.add_argument("--download", action="store_true")
    args = p.parse_args()
    sides = {"this": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    times: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = project(Path(tmp), args.download)
        for _ in range(args.rounds):
            for side, code in sides.items():
                wall, cpu, err = timed(code, cwd)
                times[side].append((wall, cpu))
        notes = [x for x in err.splitlines() if " note: " in x]
    for side, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{side}: median wall {wall:.2f} s, CPU {cpu:.2f} s over {len(rows)} run(s)")
    print(f"notes of the last run: {len(notes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
