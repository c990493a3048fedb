"""`make mutation`: cosmic-ray over the rehearsal and check modules, one module at a time.

Why: a rehearsal is only worth what it catches. Each mutant is the module with one small
change (a comparison flipped, a constant changed, a condition negated); the module's tests
must fail on it ("killed"). A mutant they pass ("survived") is a defect the tests would let
through, or a change that makes no difference (an equivalent mutant, written down in
docs/rehearsals.md).

How: the working tree (tracked and untracked, not ignored) is copied to build/mutation/tree,
so that cosmic-ray's in-place mutations never touch the checkout; per module a cosmic-ray
config is written (mutation/modules.toml: the module, its tests, optional functions and
excluded operators), then `cosmic-ray init`, the filters (mutation/filter_annotations.py drops
the mutants that only change a type annotation), `cosmic-ray baseline` (the tests
must pass unmutated) and `cosmic-ray exec`. The summary line per module and the survivors
(with their diffs) go to stdout and build/mutation/<module>.txt.

Usage: python mutation/run.py --tool .mutation-venv/bin --python .venv/bin/python [MODULE ...]
(`--rejudge`: only the last run's survivors again, after tests were added for them;
`--resume`: go on with an interrupted run, in its tree as it was.)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "mutation"


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked + untracked, not ignored), nothing else."""
    if dest.exists():
        shutil.rmtree(dest)
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def function_lines(path: Path, names: list[str]) -> list[str]:
    """'start-end' line ranges of the named top-level functions (and methods) of a module."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            out.append(f"{node.lineno}-{node.end_lineno}")
    missing = set(names) - {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if missing:
        raise SystemExit(f"mutation/modules.toml: no function {sorted(missing)} in {path}")
    return out


def toml_value(v: object) -> str:
    return json.dumps(v)  # strings, numbers, lists of strings: the same in TOML


def write_config(name: str, spec: dict, tree: Path, python: str, suffix: str = "") -> Path:
    tests = " ".join(shlex.quote(t) for t in spec["tests"])
    command = (
        f"env PYTHONPATH={shlex.quote(str(tree))} {shlex.quote(python)} -m pytest -x -q "
        f"-p no:cacheprovider {tests}"
    )
    lines = [
        "[cosmic-ray]",
        f"module-path = {toml_value(spec['path'])}",
        f"timeout = {float(spec.get('timeout', 300))}",
        "excluded-modules = []",
        f"test-command = {toml_value(command)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = {toml_value(spec.get('exclude_operators', []))}",
    ]
    if spec.get("functions"):
        ranges = function_lines(tree / spec["path"], spec["functions"])
        lines += [
            "",
            "[cosmic-ray.filters.line-filter.lines]",
            f"{toml_value(spec['path'])} = {toml_value(ranges)}",
        ]
    cfg = OUT / f"{name}{suffix}.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def run(cmd: list[str], cwd: Path) -> None:
    print("+", " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def summarize(name: str, path: str, db: Path, tool: Path, tree: Path) -> str:
    dump = subprocess.run(
        [str(tool / "cosmic-ray"), "dump", str(db)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: Counter[str] = Counter()
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            counts["not run"] += 1
            continue
        if result["worker_outcome"] == "skipped":
            output = result.get("output") or ""
            if output.startswith("Filtered: annotation"):
                counts["annotation"] += 1
            elif output.startswith("Filtered: not in the sample"):
                counts["not in sample"] += 1
            else:
                counts["skipped"] += 1
            continue
        outcome = result.get("test_outcome") or result["worker_outcome"]
        counts[outcome] += 1
        if outcome == "survived":
            m = item["mutations"][0]
            survivors.append(
                f"- {m['operator_name']} #{m['occurrence']} at line {m['start_pos'][0]}"
                f" ({m.get('definition_name') or '?'})\n{result.get('diff') or ''}"
            )
    killed, survived = counts["killed"], counts["survived"]
    judged = killed + survived
    rate = f"{100 * killed / judged:.1f}%" if judged else "n/a"
    line = (
        f"{name} ({path}): {judged} mutants judged, {killed} killed, {survived} survived: "
        f"kill rate {rate}; incompetent {counts['incompetent']}, skipped by filters "
        f"{counts['skipped']}, in annotations (equivalent, not run) {counts['annotation']}, "
        f"not run {counts['not run']}"
        + (f", not in the sample {counts['not in sample']}" if counts["not in sample"] else "")
    )
    (OUT / f"{name}.txt").write_text(line + "\n\nSurvivors:\n" + "\n".join(survivors))
    return line


def rejudge(name: str, spec: dict, tool: Path, tree: Path, cfg: Path) -> str:
    """Run the survivors of the last session of `name` again against today's tests (after
    tests were added for them), each applied alone with `cosmic-ray apply` and reverted."""
    db = OUT / f"{name}.sqlite"
    dump = subprocess.run(
        [str(tool / "cosmic-ray"), "dump", str(db)], capture_output=True, text=True, check=True
    ).stdout
    command = tomllib.loads(cfg.read_text())["cosmic-ray"]["test-command"]
    module = tree / spec["path"]
    original = module.read_bytes()
    # a second rejudge runs only what the last one left (its list, "- OPERATOR #N at line L")
    last = OUT / f"{name}-rejudged.txt"
    left = (
        {tuple(x[2:].split(" at line ")[0].rsplit(" #", 1)) for x in last.read_text().split("\n")
         if x.startswith("- ")}
        if last.exists() else None
    )  # fmt: skip
    killed, still = 0, []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if not result or result.get("test_outcome") != "survived":
            continue
        m = item["mutations"][0]
        if left is not None and (m["operator_name"], str(m["occurrence"])) not in left:
            continue
        try:
            subprocess.run(
                [str(tool / "cosmic-ray"), "apply", spec["path"], m["operator_name"],
                 str(m["occurrence"])],
                cwd=tree, check=True, capture_output=True,
            )  # fmt: skip
            r = subprocess.run(command, shell=True, cwd=tree, capture_output=True)
        finally:
            module.write_bytes(original)
        if r.returncode != 0:
            killed += 1
        else:
            still.append(f"- {m['operator_name']} #{m['occurrence']} at line {m['start_pos'][0]}")
    out = (
        f"{name}: of {killed + len(still)} survivors of the last run"
        + (" left by the last rejudge" if left is not None else "")
        + f", {killed} are killed by today's tests, {len(still)} still survive"
    )
    (OUT / f"{name}-rejudged.txt").write_text(out + "\n" + "\n".join(still) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", required=True, help="folder with cosmic-ray's executables")
    ap.add_argument("--python", required=True, help="the project's Python (runs the tests)")
    ap.add_argument("modules", nargs="*", help="names in mutation/modules.toml (default: all)")
    ap.add_argument(
        "--rejudge",
        action="store_true",
        help="only run the last session's survivors again, against today's tests",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="go on with an interrupted session: its tree and database as they are",
    )
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="run a seeded random sample of this many mutants per module (default: all)",
    )
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    args = ap.parse_args(argv)
    specs = tomllib.loads((ROOT / "mutation" / "modules.toml").read_text())["modules"]
    unknown = [m for m in args.modules if m not in specs]
    if unknown:
        print(f"unknown module(s) {unknown}; known: {', '.join(specs)}", file=sys.stderr)
        return 2
    tool, python = Path(args.tool).resolve(), str(Path(args.python).absolute())
    OUT.mkdir(parents=True, exist_ok=True)
    # a rejudge may run beside a session: its own tree and config files
    suffix = "-rejudge" if args.rejudge else ""
    tree = OUT / f"tree{suffix}"
    if not args.resume:
        copy_tree(tree)
    lines = []
    for name in args.modules or list(specs):
        spec = specs[name]
        cfg = write_config(name, spec, tree, python, suffix)
        if args.rejudge:
            lines.append(rejudge(name, spec, tool, tree, cfg))
            print(lines[-1], flush=True)
            continue
        db = OUT / f"{name}.sqlite"
        if not (args.resume and db.exists()):
            db.unlink(missing_ok=True)
            run([str(tool / "cosmic-ray"), "init", str(cfg), str(db)], tree)
            run([str(tool / "cr-filter-operators"), str(db), str(cfg)], tree)
            if spec.get("functions"):
                run([str(tool / "cr-filter-lines"), str(db), "--config", str(cfg)], tree)
            run([str(tool / "python"), "mutation/filter_annotations.py", str(db)], tree)
            if args.sample:
                run([str(tool / "python"), "mutation/filter_sample.py", str(db),
                     "--size", str(args.sample), "--seed", str(args.seed)], tree)  # fmt: skip
            run([str(tool / "cosmic-ray"), "baseline", str(cfg)], tree)
        run([str(tool / "cosmic-ray"), "exec", str(cfg), str(db)], tree)
        lines.append(summarize(name, spec["path"], db, tool, tree))
        print(lines[-1], flush=True)
    print("\n".join(["", "Kill rates:", *lines]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
