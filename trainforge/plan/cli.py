"""`trainforge plan`: preview-grade review of a stack with no Pulumi CLI, credentials or network.

Exit status: 0 clean; 1 with every violation listed (resource, rule, why, how to fix);
2 for configuration errors (bad stack config, missing project or stack file, bad waiver).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
from typing import Any

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_CONFIG = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="trainforge plan",
        description="Offline plan of a stack: run the Pulumi program under mocks (preview "
        "mode), list its resources, write its Kubernetes manifests, validate them and run "
        "the policy rules. Exit 0 clean, 1 violations, 2 configuration error.",
    )
    ap.add_argument("--stack", required=True, help="stack name: reads Pulumi.<STACK>.yaml")
    ap.add_argument(
        "--project-dir",
        type=pathlib.Path,
        default=None,
        help="folder with Pulumi.yaml and __main__.py (default: nearest at or above cwd)",
    )
    ap.add_argument(
        "--program",
        metavar="FILE",
        help="a Python file of the project to run as the Pulumi program instead of "
        "__main__.py (relative to the project directory, inside it)",
    )
    ap.add_argument(
        "--sdk",
        metavar="PROGRAM",
        type=pathlib.Path,
        help="also run this Kubeflow SDK program (TrainerClient) with the real SDK (.sdk-venv: "
        "`make sdk-venv`) against an API stand-in answering from the plan, and judge every "
        "TrainJob it sends like the stack's jobs (docs/jobs.md, The Kubeflow SDK)",
    )
    ap.add_argument(
        "--namespace",
        help="with --sdk: the team namespace the program's kubeconfig points at (default: "
        "the stack's only team's)",
    )
    ap.add_argument("--out", type=pathlib.Path, help="write one YAML per Kubernetes object here")
    ap.add_argument("--json", type=pathlib.Path, help="write the whole inventory as JSON here")
    ap.add_argument(
        "--diff",
        type=pathlib.Path,
        metavar="BASE",
        help="compare with a base: a plan folder written earlier by --out (e.g. of the base "
        "branch), the deployed state as `pulumi stack export` (version 3) or "
        "`pulumi preview --json` output, or /dev/null for no base (everything is new); "
        "anything else is refused before the plan runs",
    )
    ap.add_argument(
        "--report",
        type=pathlib.Path,
        metavar="FILE",
        help="where the full report goes (default: build/plan/<STACK>-report.txt in the "
        "project, <STACK>-<PROGRAM>-report.txt with --program); stdout shows the verdict",
    )
    ap.add_argument(
        "--full", action="store_true", help="also print the full report after the verdict"
    )
    ap.add_argument(
        "--diff-md", type=pathlib.Path, help="also write the --diff markdown to this file"
    )
    ap.add_argument(
        "--no-checkov-wrappers",
        action="store_true",
        help="do not write the pod templates of custom-resource workloads (PyTorchJob, "
        "TrainJob and its runtimes, JobSet) wrapped as Jobs under OUT/_checkov",
    )
    ap.add_argument(
        "--summary",
        action="store_true",
        help="the full report (--report, --full) lists counts by type instead of the resource tree",
    )
    ap.add_argument(
        "--no-standins",
        action="store_true",
        help="do not judge again, with stand-in ids/ARNs, the cloud resources whose preview "
        "inputs hold unknowns (policy documents built from unassigned ARNs then go unjudged by "
        "the resource rules, as in a real preview; the stand-in pass still runs for the IAM, "
        "existence and fleet checks)",
    )
    return ap


def _tree(inventory: Any) -> list[str]:
    """The resources indented under their parents (the inventory is in runner.tree_order)."""
    depth: dict[str, int] = {}
    lines = []
    for r in inventory.resources:
        depth[r.urn] = depth.get(r.parent or "", 0) + 1
        extra = " [delete-before-replace]" if r.options.get("deleteBeforeReplace") else ""
        lines.append(f"{'  ' * depth[r.urn]}+ {r.type}  {r.name}{extra}")
    name = f"{inventory.project}-{inventory.stack}"
    head = f"Resources (stack {inventory.stack}, project {inventory.project}):"
    return [head, f"+ pulumi:pulumi:Stack  {name}", *lines, ""]


def write_report(
    result: Any, args: argparse.Namespace, root: pathlib.Path, md: str | None
) -> pathlib.Path:
    """The full report into its file (returned)."""
    from trainforge.plan.waivers import stale_note  # noqa: PLC0415 - light, plan-only

    inv, checked = result.inventory, result.validation
    lines = [] if args.summary else _tree(inv)
    lines.append(f"{inv.to_create} resources to create, by type:")
    lines += [f"  {n:5d}  {t}" for t, n in result.counts_by_type()]
    if helm := result.helm():
        lines.append("\nHelm releases, charts and manifest bundles (installed by the provider):")
        for h in helm:
            what = h["chart"] or h["directory"] or h["files"] or ""
            ver = f" {h['version']}" if h["version"] else ""
            repo = f" from {h['repo']}" if h["repo"] else ""
            lines.append(f"  {h['name']}: {h['type']} {what}{ver}{repo}")
    if inv.outputs:
        lines += ["\nStack outputs:", *(f"  {k}: {v}" for k, v in inv.outputs.items())]
    for section in result.sections:
        lines += [f"\n{section.title}:", *(f"  {line}" for line in section.lines)]
    lines.append(
        f"\nKubernetes objects: {len(result.objects)} "
        f"(validated: {checked['pass']} pass, {checked['fail']} fail, "
        f"{checked['unchecked']} without a schema)"
    )
    if autonamed := [o.ident for o in result.objects if o.autonamed]:
        lines.append(
            f"  {len(autonamed)} autonamed by the provider at apply time (random suffix): "
            f"names shown here end in a stable stand-in"
        )
    if result.standin_judged:
        lines.append(
            f"  {result.standin_judged} cloud resources with unknown inputs (e.g. policy documents "
            "built from ARNs) also judged with stand-in ids/ARNs"
        )
    if result.waived:
        lines.append(f"\nWaived ({len(result.waived)}):")
        lines += [
            f"  [{w.rule}] {w.resource}: {w.message}\n      reason: {w.waived}"
            for w in result.waived
        ]
    lines += [f"\nNote: {stale_note(w)}" for w in result.unused_waivers]
    if result.failing:
        lines.append(f"\nViolations ({len(result.failing)}):")
        lines += [
            f"  [{f.rule}] {f.resource}\n      why: {f.message}\n      fix: {f.fix}"
            for f in result.failing
        ]
    else:
        lines.append("\nPolicy and validation: clean")
    if md is not None:
        lines.append("\n" + md)
    # a --program's plan is another program's: its report does not replace the stack's own
    program = f"-{pathlib.Path(args.program).stem}" if args.program else ""
    path = args.report or root / "build" / "plan" / f"{args.stack}{program}-report.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _root(args: argparse.Namespace) -> pathlib.Path:
    """--project-dir, else the nearest directory at or above the cwd with a Pulumi.yaml."""
    from trainforge.plan.runner import ProjectError  # noqa: PLC0415

    if args.project_dir:
        return args.project_dir.resolve()
    start = pathlib.Path.cwd().resolve()
    for d in [start, *start.parents]:
        if (d / "Pulumi.yaml").is_file():
            return d
    raise ProjectError(f"no Pulumi.yaml in {start} or any parent directory")


def _sdk_submit(args: argparse.Namespace, sdk: Any) -> Any:
    """--sdk's hook (plan/sdk.py): run the program against the planned objects, add what it
    sends. The program and the SDK's venv are checked first, before a plan's seconds."""
    program = args.sdk.resolve()
    if not program.is_file() or program.suffix != ".py":
        raise sdk.SdkError(f"--sdk {args.sdk}: no such Python file; expected PROGRAM.py")
    from trainforge.plan.runner import ProjectError  # noqa: PLC0415

    try:
        root = _root(args)
    except ProjectError:
        root = pathlib.Path.cwd()  # the plan reports the missing project itself, next
    python = sdk.sdk_python(root)

    def submit(inv: Any) -> None:
        from trainforge.plan.manifests import k8s_objects  # noqa: PLC0415

        namespace = sdk.namespace_for(inv, args.namespace, args.stack)
        docs = [o.doc for o in k8s_objects(inv)]
        sdk.add_sent(inv, sdk.run_program(program, docs, namespace, python))

    return submit


def _output_error(args: argparse.Namespace) -> str | None:
    """Why an output flag cannot be written, or a flag lacks the one it needs; None when all
    can. Checked before a plan's seconds, so a typo costs no plan and shows no traceback."""
    if args.diff_md is not None and args.diff is None:
        return f"--diff-md {args.diff_md}: only with --diff BASE (the markdown is the diff's)"
    if args.no_checkov_wrappers and args.out is None:
        return "--no-checkov-wrappers: only with --out DIR (the wrappers are written there)"
    wanted = [("--out", args.out, True), ("--json", args.json, False)]
    wanted += [("--report", args.report, False), ("--diff-md", args.diff_md, False)]
    for flag, path, folder in wanted:
        if path is None:
            continue
        if folder and path.exists() and not path.is_dir():
            return f"--out {path}: not a folder; expected a folder for the manifests"
        if not folder and path.is_dir():
            return f"{flag} {path}: a folder; expected a file to write"
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            return f"{flag} {path}: {above} is a file, not a folder"
    if args.namespace is not None and args.sdk is None:
        return f"--namespace {args.namespace}: only with --sdk PROGRAM"
    return None


def _refuse(message: str) -> int:
    print(f"trainforge plan: {message}", file=sys.stderr)
    return EXIT_CONFIG


def main(argv: list[str] | None = None) -> int:
    from trainforge.plan import lazy_sdk
    from trainforge.plan.runner import tune_gc

    tune_gc()  # before the imports below: most of a plan's objects live to its end
    lazy_sdk.install()  # and the SDKs' modules a plan never reads are never imported
    args = build_parser().parse_args(argv)
    if bad := _output_error(args):  # before a plan's seconds
        return _refuse(bad)
    from trainforge.plan import core, diff, manifests, sdk, sides, verdict
    from trainforge.plan.runner import ProjectError, find_config_error

    base = None  # --diff's base, read before a plan's seconds and its files
    if args.diff is not None:
        try:
            base = sides.load_side(args.diff)
        except sides.SideError as e:
            return _refuse(str(e))

    try:
        submit = _sdk_submit(args, sdk) if args.sdk is not None else None
        root = _root(args)
        if args.project_dir and not (root / "Pulumi.yaml").is_file():
            raise ProjectError(f"--project-dir {root}: no Pulumi.yaml there")
        result = core.plan_project(  # its warnings are in the verdict, not echoed above it
            root,
            args.stack,
            standins=not args.no_standins,
            program=args.program,
            echo_warnings=False,
            submit=submit,
            fork=True,  # the checks that read the stand-in run on the second CPU, if one
        )
    except sdk.SdkError as e:
        return _refuse(str(e))
    except Exception as e:  # noqa: BLE001 - classified below
        err = find_config_error(e)
        if err is None:
            raise
        return _refuse(f"configuration error: {err}")

    out_dir, tmp = args.out, None
    if out_dir is None and args.diff is not None:
        tmp = tempfile.TemporaryDirectory(prefix="trainforge-plan-")
        out_dir = pathlib.Path(tmp.name) / "plan"
    notes: list[str] = []
    md, rev = None, None
    try:
        if out_dir is not None:
            try:
                n = manifests.write_manifests(
                    result.objects, out_dir, checkov=not args.no_checkov_wrappers
                )
            except ProjectError as e:
                return _refuse(f"configuration error: {e}")
            inventory = out_dir / diff.INVENTORY_FILE
            manifests.write_inventory(result.inventory, inventory, {"plan": result.to_json()})
            if args.out is not None:
                notes.append(
                    f"Wrote {n} manifests to {out_dir}/ (one file per object, by namespace)"
                )
        if args.diff is not None:
            from trainforge.plan import review  # noqa: PLC0415 - with --diff only

            rev = review.review(base, sides.load_side(out_dir), result)  # its findings join
            md = "\n".join([*verdict.verdict_markdown(result, rev, args.stack), rev.markdown])
            if args.diff_md:
                args.diff_md.parent.mkdir(parents=True, exist_ok=True)
                args.diff_md.write_text(md + "\n")
                notes.append(f"Wrote the PR comment markdown to {args.diff_md}")
        if args.json is not None:  # with the --diff checks' findings (review.review adds them)
            manifests.write_inventory(result.inventory, args.json, {"plan": result.to_json()})
            notes.append(f"Wrote the inventory to {args.json}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    report_path = write_report(result, args, root, md)
    for line in verdict.verdict_lines(result, rev, str(report_path), args.stack):
        print(line)
    if args.sdk is not None:  # what the program sent and how each fared, under the verdict
        from trainforge.plan.checks.submitted import TITLE  # noqa: PLC0415

        for section in (s for s in result.sections if s.title == TITLE):
            print(f"{section.title}:")
            for line in section.lines:
                print(f"  {line}")
    for line in notes:
        print(line)
    if args.full:
        print()
        print(report_path.read_text(), end="")
    elif md is not None:
        print("\n" + md)
    return EXIT_CLEAN if result.clean else EXIT_VIOLATIONS
