"""Offline plan time for a stack with N jobs (default: prod with 10, 100 and 1000 jobs).

    .venv/bin/python bench/plan.py [--stack prod] [--sizes 10,100,1000] [--project-dir .]
    .venv/bin/python bench/plan.py --cli [--ref REF | --before DIR] [--rounds 3] [--sizes 100]

`--cli` times what a user (and CI) runs: a fresh `python -m trainforge plan --stack STACK
--out DIR` process, imports included, for the stack as configured and for each size; with
`--before DIR` (another checkout, e.g. `git worktree add /tmp/base main`) the same commands
run with that checkout's code, interleaved round by round so that the machine's load hits
both alike, and the table gives after/before ratios of the medians. `--ref REF` (a commit,
branch or tag of this repository, e.g. `--ref HEAD~1`) is the same with the tree of REF,
exported by `git archive` into a temporary folder (no worktree, no checkout) and removed after.

Jobs are synthesised into the stack config `trainforge:jobs` by copying the stack's first job
(renamed job-0001, job-0002, ...), or, when the stack declares none, a small job on the first
team and node pool of the stack config. Each size is timed in phases: running the program
under mocks (preview); validation, policy rules and the plan checks (rehearsals, queues,
estimates, cost), including the stand-in pass (the program again with invented ids/ARNs, which
the IAM rehearsal and the rules on policy documents need); writing the manifests. Imports and the first run are
paid once before timing (a warm-up plan of the stack as it is) and reported separately.
Target: 100 jobs within 10 s on the 2-core dev machine, time growing linearly.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def stack_config(root: pathlib.Path, stack: str) -> dict[str, Any]:
    from trainforge.stack.file import read_stack  # noqa: PLC0415 - after the sys.path insert

    return read_stack(root, stack).config


def _first_name(value: Any) -> str | None:
    if isinstance(value, list) and value:
        first = value[0]
        return first.get("name") if isinstance(first, dict) else str(first)
    if isinstance(value, dict) and value:
        return next(iter(value))
    return None


def job_template(cfg: dict[str, Any]) -> dict[str, Any]:
    """The stack's first job, else a 2-pod DDP GPT job on its first team's GPU pool."""
    jobs = cfg.get("trainforge:jobs") or []
    if jobs:
        return copy.deepcopy(jobs[0])
    team = _first_name(cfg.get("trainforge:teams")) or "research"
    pools = [p.get("name") for p in cfg.get("trainforge:nodePools") or [] if isinstance(p, dict)]
    pool = "gpu-workloads" if "gpu-workloads" in pools else (pools[0] if pools else "gpu-workloads")
    return {
        "name": "bench",
        "team": team,
        "pool": pool,
        "preset": "ddp",
        "workers": 2,
        "model": "gpt",
    }


def synth_jobs(template: dict[str, Any], n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        job = copy.deepcopy(template)
        job["name"] = f"job-{i:04d}"
        out.append(job)
    return out


def measure(root: pathlib.Path, stack: str, jobs: list[dict] | None) -> dict[str, float]:
    """What `trainforge plan --out` does, phase by phase (see trainforge.plan.core)."""
    from trainforge.plan import core
    from trainforge.plan.manifests import write_manifests
    from trainforge.plan.runner import run_project

    overrides = {"trainforge:jobs": jobs} if jobs is not None else None
    c0 = time.process_time()
    t0 = time.perf_counter()
    inv = run_project(root, stack, config_overrides=overrides)
    t1 = time.perf_counter()
    standin = core.standin_pass(root, stack, overrides)
    result = core.evaluate(inv, core.waivers_from(inv), root, standin, rejudge=True)
    t3 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_manifests(result.objects, pathlib.Path(tmp) / "out")
    t4 = time.perf_counter()
    return {
        "resources": len(inv.resources),
        "objects": len(result.objects),
        "violations": len(result.failing),
        "program": t1 - t0,
        "evaluate": t3 - t1,
        "write": t4 - t3,
        "total": t4 - t0,
        "cpu": time.process_time() - c0,  # less sensitive than wall time to a busy machine
    }


def project_farm(tree: pathlib.Path, stack: str, cfg_file: dict[str, Any], dest: pathlib.Path):
    """A project folder that is `tree` (links to its entries) with its own stack file."""
    dest.mkdir(parents=True)
    for entry in tree.iterdir():
        if entry.name in (f"Pulumi.{stack}.yaml", "build", ".git") or entry.name.startswith("."):
            continue
        (dest / entry.name).symlink_to(entry)
    (dest / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(cfg_file, sort_keys=False))
    return dest


def time_cli(project: pathlib.Path, stack: str, work: pathlib.Path) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one fresh `trainforge plan --out` process."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    cmd = [sys.executable, "-m", "trainforge", "plan", "--stack", stack]
    cmd += ["--out", str(work / "out"), "--report", str(work / "report.txt")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run(cmd, cwd=project, env=env, capture_output=True).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def cli_main(args: argparse.Namespace, sizes: list[int]) -> int:
    root = args.project_dir.resolve()
    data = yaml.safe_load((root / f"Pulumi.{args.stack}.yaml").read_text()) or {}
    template = job_template(data.get("config") or {})
    trees = {"after": root}
    if args.before is not None:
        trees = {"before": args.before.resolve(), "after": root}
    cases: list[tuple[str, dict[str, Any]]] = [(f"{args.stack} as configured", data)]
    for n in sizes:
        cfg = copy.deepcopy(data)
        cfg.setdefault("config", {})["trainforge:jobs"] = synth_jobs(template, n)
        cases.append((f"{args.stack} with {n} jobs", cfg))
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp:
        farms = {}
        for label, tree in trees.items():
            for i, (_case, cfg) in enumerate(cases):
                farms[label, i] = project_farm(
                    tree, args.stack, cfg, pathlib.Path(tmp) / f"{label}-{i}"
                )
        for r in range(args.rounds):
            for i, (case, _cfg) in enumerate(cases):
                for label in trees:
                    work = pathlib.Path(tmp) / f"w-{label}-{i}-{r}"
                    wall, cpu, rc = time_cli(farms[label, i], args.stack, work)
                    if rc not in (0, 1):
                        print(f"{label}: {case}: trainforge plan exited {rc}", file=sys.stderr)
                        return 2
                    times.setdefault((label, case), []).append((wall, cpu))
                    print(f"  round {r + 1} {label:>6} {case}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    print(
        f"\ncold `trainforge plan --out` processes, median of {args.rounds} rounds (load {os.getloadavg()[0]:.1f}):"
    )
    print(
        f"{'case':<28} {'tree':>6} {'wall s':>7} {'CPU s':>6} {'wall/before':>11} {'CPU/before':>10}"
    )
    for case, _cfg in cases:
        base = times.get(("before", case))
        for label in trees:
            wall = statistics.median(w for w, _ in times[label, case])
            cpu = statistics.median(c for _, c in times[label, case])
            ratio = ""
            if base and label != "before":
                bw = statistics.median(w for w, _ in base)
                bc = statistics.median(c for _, c in base)
                ratio = f"{wall / bw:>11.2f} {cpu / bc:>10.2f}"
            print(f"{case:<28} {label:>6} {wall:>7.2f} {cpu:>6.2f} {ratio}")
    return 0


def plan_outputs(
    project: pathlib.Path, stack: str, work: pathlib.Path, tree: pathlib.Path
) -> dict[str, str]:
    """The plan's outputs (the --json inventory, the full report, every manifest) as text."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    cmd = [sys.executable, "-m", "trainforge", "plan", "--stack", stack, "--out"]
    cmd += [str(work / "out"), "--json", str(work / "plan.json"), "--report", str(work / "r.txt")]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)

    # the folders differ between the two checkouts; a farm's entries link to its tree, so the
    # plan may also name the tree through the farm (PROJECT/../../tmpXXXX/ref), or relative to
    # it (the runtime image's build context: ../../tmpXXXX/ref)
    rel = os.path.relpath(tree, project)
    via_farm = f"{project}/{rel}"

    def masked(text: str) -> str:
        pairs = ((via_farm, "PROJECT"), (work, "WORK"), (project, "PROJECT"))
        if rel != ".":
            pairs += ((rel, "PROJECT"),)
        for path, name in pairs:
            text = text.replace(str(path), name)
        return text.replace(str(tree), "PROJECT")

    files = {"exit code": str(proc.returncode), "stdout": masked(proc.stdout)}
    for f in sorted(work.rglob("*")):
        if f.is_file():
            files[str(f.relative_to(work))] = masked(f.read_text())
    return files


def canonical(name: str, text: str | None) -> Any:
    """An output with its order and timings taken out: the plan's resource registration order (and with
    it the order of dependency lists and of the report's tree) varies from run to run, since
    the program's outputs resolve concurrently; the content must not."""
    if text is None:
        return None
    if name.endswith(".json"):

        def norm(v: Any) -> Any:
            if isinstance(v, dict):  # "seconds": the pod script rehearsal's own run time
                return {k: norm(x) for k, x in v.items() if k != "seconds"}
            if isinstance(v, list):
                return sorted((norm(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
            return v

        return json.dumps(norm(json.loads(text)), sort_keys=True)
    return sorted(text.splitlines())


def compare_main(args: argparse.Namespace, sizes: list[int]) -> int:
    """Plan dev, STACK and STACK with each size with both checkouts; every output must match."""
    if args.before is None:
        print("--compare needs --before DIR", file=sys.stderr)
        return 2
    root = args.project_dir.resolve()
    trees = {"before": args.before.resolve(), "after": root}
    stacks = sorted({"dev", args.stack})
    cases: list[tuple[str, str, dict[str, Any] | None]] = [(s, s, None) for s in stacks]
    data = yaml.safe_load((root / f"Pulumi.{args.stack}.yaml").read_text()) or {}
    for n in sizes:
        cfg = copy.deepcopy(data)
        cfg.setdefault("config", {})["trainforge:jobs"] = synth_jobs(
            job_template(data.get("config") or {}), n
        )
        cases.append((f"{args.stack} with {n} jobs", args.stack, cfg))
    differ = 0
    with tempfile.TemporaryDirectory(prefix="plan-compare-") as tmp:
        for case, stack, cfg in cases:
            outs = {}
            for label, tree in trees.items():
                project = tree
                if cfg is not None:
                    project = project_farm(tree, stack, cfg, pathlib.Path(tmp) / f"p-{label}")
                work = pathlib.Path(tmp) / f"w-{label}"
                outs[label] = plan_outputs(project, stack, work, tree)
                subprocess.run(["rm", "-rf", str(work), str(pathlib.Path(tmp) / f"p-{label}")])
            a, b = outs["before"], outs["after"]
            keys = sorted(a.keys() | b.keys())
            ordered = [k for k in keys if a.get(k) != b.get(k)]
            bad = [k for k in ordered if canonical(k, a.get(k)) != canonical(k, b.get(k))]
            differ += len(bad)
            print(
                f"{case}: {len(keys)} outputs, {len(keys) - len(ordered)} byte-identical, "
                f"{len(ordered) - len(bad)} identical up to order ({', '.join(ordered)}), "
                f"{len(bad)} differ{': ' if bad else ''}{', '.join(bad[:10])}"
            )
    return 1 if differ else 0


def export_ref(root: pathlib.Path, ref: str, dest: pathlib.Path) -> pathlib.Path:
    """The committed tree of `ref` as a plain folder (`git archive`): the "before" of --ref."""
    sha = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if sha.returncode != 0:
        raise SystemExit(f"--ref: {ref!r} is not a commit of {root} (try HEAD~1, main or a sha)")
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", sha.stdout.strip()],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    print(f"before: {ref} = {sha.stdout.strip()[:12]} (git archive into {dest})")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod", help="stack whose config is used (default prod)")
    ap.add_argument("--sizes", default="10,100,1000", help="comma-separated job counts")
    ap.add_argument("--project-dir", type=pathlib.Path, default=ROOT, help="project folder")
    ap.add_argument("--cli", action="store_true", help="time fresh CLI processes (see above)")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="with --before: plan dev, STACK and STACK with each size with both checkouts "
        "and compare every output (exit 1 when any differs)",
    )
    ap.add_argument("--before", type=pathlib.Path, help="with --cli: the checkout to compare")
    ap.add_argument(
        "--ref",
        help="with --cli or --compare: compare with this commit of the repository "
        "(exported by git archive into a temporary folder), e.g. HEAD~1",
    )
    ap.add_argument("--rounds", type=int, default=3, help="with --cli: rounds (default 3)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.ref is not None and args.before is not None:
        ap.error("--ref and --before both name the checkout to compare with: give one")
    if args.ref is not None and (args.cli or args.compare):
        with tempfile.TemporaryDirectory(prefix="plan-bench-ref-") as tmp:
            args.before = export_ref(
                args.project_dir.resolve(), args.ref, pathlib.Path(tmp) / "ref"
            )
            return cli_main(args, sizes) if args.cli else compare_main(args, sizes)
    if args.ref is not None:
        ap.error("--ref needs --cli or --compare")
    if args.cli:
        return cli_main(args, sizes)
    if args.compare:
        return compare_main(args, sizes)

    cfg = stack_config(args.project_dir, args.stack)
    template = job_template(cfg)
    root = args.project_dir
    print(f"program: {root / '__main__.py'}")
    t = time.perf_counter()
    warm = measure(root, args.stack, None)
    print(
        f"warm-up (imports + stack as configured): {time.perf_counter() - t:.2f} s, "
        f"{warm['resources']} resources"
    )
    print(f"job template: {template}")
    print(
        f"{'jobs':>6} {'resources':>9} {'k8s objs':>8} {'program s':>9} {'checks s':>8} "
        f"{'write s':>7} {'total s':>7} {'cpu s':>6} {'ms/job':>7}"
    )
    for n in sizes:
        r = measure(root, args.stack, synth_jobs(template, n))
        print(
            f"{n:>6} {r['resources']:>9} {r['objects']:>8} {r['program']:>9.2f} "
            f"{r['evaluate']:>8.2f} {r['write']:>7.2f} {r['total']:>7.2f} {r['cpu']:>6.2f} "
            f"{1000 * r['total'] / n:>7.1f}"
        )
        if r["violations"]:
            print(f"       ({r['violations']} violations in this plan)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
