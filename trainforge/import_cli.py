"""`trainforge import FILE [--stack STACK]`: print the stack job entry for a PyTorchJob, TrainJob
or indexed Job YAML, write the code it ships (`--out DIR`), and say what changed and why.

The translation is `trainforge.jobs.importer`; this module reads the stack's pools, teams and
image routes the way the offline plan does (the platform's contract, its instance-type facts
answered by the plan's mocks, so no AWS call), and checks the entry with the stack's own job
checks before printing it, so what it prints is an entry the stack accepts.
"""

from __future__ import annotations

import argparse
import contextlib
import posixpath
import sys
from pathlib import Path
from typing import Any

from trainforge.core.errors import JobConfigError
from trainforge.jobs.entrypoint import NOT_LOCAL_COMMAND
from trainforge.jobs.fetches import RULE as FETCH_RULE
from trainforge.jobs.import_read import job_namespace, read_documents
from trainforge.jobs.importer import Imported, ImportProblem, choose_team, import_workload
from trainforge.jobs.local import image_dir
from trainforge.stack import file as stack_file
from trainforge.stack import pulumi_yaml

PROG = "trainforge import"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Turn a kubeflow.org/v1 PyTorchJob, a Kubeflow Trainer TrainJob or an "
        "indexed batch/v1 Job (YAML; ConfigMaps with its code may be in the same file) into "
        "a trainforge:jobs entry of a stack, the files it ships, and every field changed or "
        "dropped with the reason. YAML only: a Kubeflow SDK program is not read here.",
    )
    p.add_argument("file", metavar="FILE", help="the YAML file")
    p.add_argument(
        "--stack", help="the stack whose pools and teams to use (default: the only stack, else dev)"
    )
    p.add_argument(
        "--team",
        help="the team (default: the one whose namespace the file's metadata.namespace is, "
        "else the stack's only team)",
    )
    p.add_argument("--pool", help="the pool (default: chosen from the pod's GPUs and nodeSelector)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write the job's code to DIR/<job>/ (inside the project); without it nothing is written",
    )
    p.add_argument("--project-dir", default=".", help="folder with the Pulumi.<stack>.yaml files")
    return p


class _Refused(Exception):
    """A flag or the stack cannot be used: one line."""


def _stack_name(root: Path, wanted: str | None) -> str:
    stacks = stack_file.stacks_in(root)
    if wanted is not None:
        if wanted not in stacks:
            known = ", ".join(stacks) or "none"
            raise _Refused(f"--stack: got {wanted!r}; stacks in {root}: {known}")
        return wanted
    if len(stacks) == 1:
        return stacks[0]
    if "dev" in stacks:
        return "dev"
    raise _Refused(f"--stack: required; stacks in {root}: {', '.join(stacks) or 'none'}")


def _contract(root: Path, stack: str) -> tuple[Any, dict[str, Any] | None]:
    """The platform contract of the stack, as the plan's program builds it (under mocks,
    `plan.stack_platform`), and each team's nominal quota per pool (Kueue's split,
    platform.queues; None without Kueue): team -> pool -> resource -> quantity, zero left out."""
    from trainforge.plan.stack_platform import StackRefused, stack_platform  # noqa: PLC0415

    try:
        built = stack_platform(root, stack)
    except StackRefused as e:
        raise _Refused(f"stack {stack}: {e}") from None
    contract = built.contract
    if built.kueue is None:
        return contract, None
    return contract, _quotas(built.platform.services.teams, list(contract.pools.values()))


def _quotas(teams: Any, pools: list[Any]) -> dict[str, Any]:
    from trainforge.platform.queues import format_quantity, quota_plan  # noqa: PLC0415

    nominal = quota_plan(teams, pools).nominal
    return {
        team: {
            pool: {r: format_quantity(r, v) for r, v in held.items() if v}
            for pool, held in by_pool.items()
        }
        for team, by_pool in nominal.items()
    }


def _runtime_image(contract: Any) -> str | None:
    images = contract.images
    image = images.standard or images.efa if images is not None else None
    if image is None:
        return None
    return (
        f"the platform's runtime image ({image.target}: torch {image.facts.torch}, mlflow, boto3)"
    )


def _out_dir(root: Path, out: str | None) -> str:
    if out is None:
        return "imported"
    full = (Path.cwd() / out).resolve()
    try:
        rel = full.relative_to(root.resolve())
    except ValueError:
        raise _Refused(
            f"--out: got {out!r}; expected a folder inside the project {root.resolve()} (the "
            "entry names the files it ships relative to it)"
        ) from None
    return posixpath.normpath(rel.as_posix())


def _write(root: Path, result: Imported) -> None:
    for rel, text in result.files.items():
        path = root / rel
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocked is not None or path.is_dir():
            what = f"{blocked.relative_to(root)} is a file" if blocked else f"{rel} is a folder"
            raise _Refused(f"--out: cannot write {rel}: {what}; choose another --out")
        if path.exists() and path.read_bytes() != text.encode("utf-8"):
            raise _Refused(
                f"--out: {rel} exists with other content; remove it or choose another --out"
            )
    result.write_to(root)


def _check(contract: Any, root: Path, result: Imported, written: bool) -> list[str]:
    """The stack's own checks of the entry (its files too, once written)."""
    from trainforge.core.errors import JobConfigError  # noqa: PLC0415
    from trainforge.jobs.declare import check_jobs  # noqa: PLC0415
    from trainforge.jobs.spec import parse_jobs  # noqa: PLC0415
    from trainforge.jobs.wiring import resolve_job  # noqa: PLC0415
    from trainforge.stack.base import StackError  # noqa: PLC0415

    where = f"trainforge:jobs[{result.entry['name']}]"
    try:
        if written:
            with contextlib.chdir(root):
                check_jobs(contract, [result.entry])
        else:
            (spec,) = parse_jobs([result.entry], "trainforge:jobs")
            resolve_job(spec, contract.target(spec.team, spec.pool, where), where)
    except (JobConfigError, StackError) as e:
        lines = getattr(e, "errors", None) or [str(e)]
        return [str(x).replace("trainforge:jobs[0]", where) for x in lines]
    return []


def plan_flags(
    contract: Any, result: Imported, root: Path | None = None, stack: str = ""
) -> list[str]:
    """What `trainforge plan` will flag on the imported job, by its own checks (not a copy):
    the resource rules on every object the job emits (plan/checks/rules.check_resource:
    TRAINFORGE_DOCKER_HUB, CKV_K8S_14, ...), its image check (plan/checks/images.
    piece_findings: TRAINFORGE_IMAGE_PIECE) and, where its pods run a shell script, the pod
    script rehearsal (plan/checks/pod_scripts.check: TRAINFORGE_POD_SCRIPT_FAILS, ...) on the
    job's objects beside the stack's (`rehearsal_flags`); its shipped files read from a
    scratch copy so that the list is the same with or without --out. [] where the stack
    refuses the entry (its own lines say why)."""
    import tempfile  # noqa: PLC0415

    from trainforge.core.errors import JobConfigError  # noqa: PLC0415
    from trainforge.jobs import codeship, entrypoint  # noqa: PLC0415
    from trainforge.jobs.backends import emit  # noqa: PLC0415
    from trainforge.jobs.spec import parse_jobs  # noqa: PLC0415
    from trainforge.jobs.wiring import resolve_job  # noqa: PLC0415
    from trainforge.plan.checks import images, rules  # noqa: PLC0415
    from trainforge.stack.base import StackError  # noqa: PLC0415

    where = f"trainforge:jobs[{result.entry['name']}]"
    try:
        (spec,) = parse_jobs([result.entry], "trainforge:jobs")
        target = contract.target(spec.team, spec.pool, where)
        job = resolve_job(spec, target, where)
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
            result.write_to(Path("."))
            bundle = entrypoint.user_code(job, ".", where)
        emitted = emit(job, target, codeship.collect(), bundle)
    except (JobConfigError, StackError):
        return []
    found = [(f.rule, f.message) for f in images.piece_findings(job, target, emitted)]
    objects = (emitted.workload, emitted.service, emitted.podmonitor, emitted.user_configmap)
    docs = [d for d in objects if d is not None]
    for doc in docs:
        found += [(rule.id, msg) for rule, msg in rules.check_resource(_type(doc), doc)]
    found += rehearsal_flags(docs, root, stack)
    return [f"{rule}: {msg}" for rule, msg in found]


def _type(doc: dict[str, Any]) -> str:
    """The Pulumi type of a Kubernetes object (kubernetes:apiVersion:Kind), as the plan's."""
    version = str(doc.get("apiVersion"))
    return f"kubernetes:{version if '/' in version else 'core/' + version}:{doc.get('kind')}"


def rehearsal_flags(
    docs: list[dict[str, Any]], root: Path | None, stack: str
) -> list[tuple[str, str]]:
    """(rule, message) of what the plan's pod script rehearsal (plan/checks/pod_scripts.check,
    the plan's one) finds on the job's objects `docs`: run on them beside the objects of the
    stack's program run offline (`trainforge.local.planned_context`: the team's claims, the
    file system setup Jobs that run first, the Trainer runtimes), as the plan runs it once
    the entry is in the stack; the job's objects alone for a project without a program.
    The program runs (seconds) only where a pod of the job runs a shell script, a program it
    cannot execute or code that writes off its volumes."""
    from trainforge.jobs import trainjob  # noqa: PLC0415
    from trainforge.jobs.backends import pod_templates  # noqa: PLC0415
    from trainforge.local import planned_context  # noqa: PLC0415
    from trainforge.plan.check_types import PlanContext  # noqa: PLC0415
    from trainforge.plan.checks import pod_scripts  # noqa: PLC0415
    from trainforge.plan.manifests import K8sObject  # noqa: PLC0415
    from trainforge.plan.runner import Inventory  # noqa: PLC0415

    def scripts(doc: dict[str, Any]) -> bool:
        pods = [t.spec for t in pod_templates(doc, build=False)]
        if doc.get("kind") == trainjob.KIND:  # the trainer's container, as the job writes it
            pods.append({"containers": [(doc.get("spec") or {}).get("trainer") or {}]})
            with contextlib.suppress(KeyError, TypeError, AttributeError, StopIteration):
                built = trainjob.built_pod(doc)  # and its pod, on the platform's runtime
                pods += [built.get("spec") or {}] if built is not None else []
        # a shell script to rehearse, a program the pod cannot execute (a file of a
        # ConfigMap without an execute bit), or code that writes off its volumes
        return any(
            pod_scripts.shell_script(c) is not None
            or pod_scripts.unexecutable(p, c)
            or pod_scripts.unwritable_writes(p, c, configmaps)
            for p in pods
            for c in p.get("containers") or ()
            if isinstance(c, dict)
        )

    configmaps = {str(d["metadata"]["name"]): d for d in docs if d.get("kind") == "ConfigMap"}

    if not any(scripts(d) for d in docs):
        return []
    mine = [K8sObject(urn="", name=str(d["metadata"]["name"]), type=_type(d), doc=d) for d in docs]
    idents = {o.ident for o in mine}
    ctx = None
    if root is not None and stack:
        with contextlib.suppress(JobConfigError):  # the program fails: the plan says why
            ctx = planned_context(stack, root)
    if ctx is None:
        ctx = PlanContext(inventory=Inventory(project="", stack=stack, resources=[]), objects=[])
    # the stack's objects but one of the same job already declared there: the entry's instead
    objects = [o for o in ctx.objects if o.ident not in idents] + mine
    judged = PlanContext(inventory=ctx.inventory, objects=objects, declared=ctx.declared)
    found = pod_scripts.check(judged).findings
    return [(f.rule, f.message) for f in found if idents & {f.resource, *f.names}]


def downloads(contract: Any, root: Path, stack: str, team: str, result: Imported) -> list[str]:
    """What the imported job's command and shipped Python files download from the internet,
    read as `trainforge plan` reads a container (jobs/fetches.container_fetches): one
    line each, `where: fetcher reaches host`."""
    from trainforge.jobs.fetches import container_fetches, outside_aws  # noqa: PLC0415
    from trainforge.plan.mocks import DEFAULT_REGION  # noqa: PLC0415 - what the plan uses

    entry = result.entry
    point = entry.get("entrypoint") or {}
    target = contract.target(team, entry.get("pool", ""), "import")
    staged = tuple(str(v.get("mountPath")) for v in entry.get("volumes") or [])
    if target.claim_name:  # the team's FSx claim, mounted in every pod
        staged += (target.fsx_mount_path,)
    files = [(p, t) for p, t in result.files.items() if p.endswith(".py")]
    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    argv = [str(w) for w in point.get("command") or []]
    found = container_fetches(argv, "entrypoint.command", files, env, staged)
    region = stack_file.read_stack(root, stack).namespace("aws").get("region") or DEFAULT_REGION
    return [f.describe() for f in outside_aws(found, region)]


RULE_REF = f"{FETCH_RULE}; docs/teams.md, Network"
# without a Pulumi program there are no policies to read: the platform's (platform/teams.py
# network_policies: default-deny, egress to DNS, the VPC's endpoints, S3), which no key opens
UNREAD_EGRESS = (
    "# Downloads from the internet: on the cluster each call fails where the team's "
    "namespace denies internet egress, as the platform's team NetworkPolicies do, and "
    f"`trainforge plan` refuses it ({RULE_REF}):"
)


def egress_line(root: Path, stack: str, namespace: str) -> str:
    """The heading of the downloads: what the stack's NetworkPolicies do for `namespace`, read
    as the plan reads them (`submitted.open_egress`) from the stack's program run offline
    (`trainforge.local.planned_context`); UNREAD_EGRESS for a project without a program."""
    from trainforge.local import planned_context  # noqa: PLC0415
    from trainforge.plan.checks.submitted import open_egress  # noqa: PLC0415

    try:
        ctx = planned_context(stack, root)
    except JobConfigError:  # the program fails on the stack: `trainforge plan` says why
        ctx = None
    if ctx is None:
        return UNREAD_EGRESS
    opened = open_egress(ctx, namespace)
    head = f"# Downloads from the internet: in stack {stack}, namespace {namespace}"
    if opened is None:
        return (
            f"{head}'s NetworkPolicies let its pods reach no internet address, so each call "
            f"fails on the cluster and `trainforge plan` refuses it ({RULE_REF}):"
        )
    how = (
        "has no NetworkPolicy restricting egress"
        if opened == "no egress policy"
        else f"opens HTTPS to every address (NetworkPolicy {opened})"
    )
    return f"{head} {how}, so these calls go out and `trainforge plan` does not refuse them:"


def render(
    result: Imported,
    stack: str,
    file: str,
    out: str | None,
    refused: bool = False,
    fetches: list[str] | tuple[str, ...] = (),
    egress: str = UNREAD_EGRESS,
    flags: list[str] | tuple[str, ...] = (),
) -> str:
    """What the command prints: the entry (YAML to paste), the files, the changes, what its
    code downloads (`fetches`: `downloads`, under `egress`: `egress_line`) and the next step
    (`refused`: the stack's checks refuse the entry, so the plan would too)."""
    lines = [
        f"# trainforge import {file}: {result.source} -> stack {stack}",
        f"# Add under trainforge:jobs in Pulumi.{stack}.yaml:",
        # as Pulumi reads the stack file: `--lr, "3e-5"` stays quoted, or it would be a number
        pulumi_yaml.dump([result.entry], sort_keys=False, width=100).rstrip(),
    ]
    if result.files:
        head = "written" if out is not None else "nothing written; run again with --out DIR"
        lines.append(f"# Files to ship ({head}):")
        lines += [f"#   {p} ({len(t.encode())} bytes)" for p, t in result.files.items()]
    lines.append("# Changed or dropped:")
    lines += [f"#   - {c}" for c in result.changes]
    if fetches:
        lines.append(egress)
        lines += [f"#   - {f}" for f in fetches]
    if flags:
        lines.append(
            "# What `trainforge plan` will flag on this entry (its own checks, run on the "
            "objects the entry emits):"
        )
        lines += [f"#   - {f}" for f in flags]
    name = result.entry["name"]
    nxt = f"trainforge plan --stack {stack}; trainforge run-local --stack {stack} {name}"
    entry = result.entry.get("entrypoint") or {}
    if "command" in entry:
        # run-local refuses a command (trainforge.jobs.entrypoint.not_local): say so here
        # rather than name a next step that stops
        nxt = f"trainforge plan --stack {stack} ({NOT_LOCAL_COMMAND})"
    elif (why := image_dir(entry.get("workingDir"))) is not None:
        # and code of the image run from a workingDir this machine lacks (jobs.local.image_dir)
        nxt = (
            f"trainforge plan --stack {stack} (run-local runs this job from its "
            f"entrypoint.workingDir {entry['workingDir']}: {why})"
        )
    if result.files and out is None:  # the entry names files that do not exist yet
        shipped = posixpath.dirname(posixpath.dirname(next(iter(result.files))))
        nxt = (
            f"run this import again with --out {shipped} (nothing was written, so the files "
            f"the entry names do not exist yet), then {nxt}"
        )
    if flags and not refused:
        nxt = f"fix or waive what the plan will flag (above), then {nxt}"
    if refused:  # the plan stops on the same lines: they come first
        nxt = f"fix what the stack refuses (below), then {nxt}"
    lines.append(f"# Next: {nxt}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = Path(args.project_dir)
    try:
        if not root.is_dir():
            raise _Refused(f"--project-dir: got {args.project_dir!r}; no such folder")
        stack = _stack_name(root, args.stack)
        contract, quotas = _contract(root, stack)
        # without --team, the namespace the file names may name the team (choose_team)
        namespace = (
            job_namespace(read_documents(Path(args.file)), args.file) if args.team is None else None
        )
        try:
            team, team_by = choose_team(args.team, namespace, contract.teams)
        except ValueError as e:
            raise _Refused(f"--team: {e}") from None
        routes = contract.images.routes if contract.images is not None else None
        result = import_workload(
            Path(args.file),
            pools=contract.pools,
            team=team,
            out_dir=_out_dir(root, args.out),
            docker_hub_routed=routes is not None and "docker-hub" in routes.prefixes,
            runtime_image=_runtime_image(contract),
            pool_name=args.pool,
            backends=tuple(contract.backends),
            queue=contract.teams[team].queue,
            quota=quotas.get(team, {}) if quotas is not None else None,
            teams=contract.teams,
            team_by=team_by,
        )
        if args.out is not None:
            _write(root, result)
    except (ImportProblem, _Refused, stack_file.StackFileError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    problems = _check(contract, root, result, args.out is not None)
    try:
        fetches = downloads(contract, root, stack, team, result)
    except JobConfigError:  # an unknown pool: the stack's own lines (problems) say it
        fetches = []
    # the stack's program runs (seconds) only for code that downloads
    egress = egress_line(root, stack, contract.teams[team].namespace) if fetches else ""
    print(
        render(
            result,
            stack,
            args.file,
            args.out,
            bool(problems),
            fetches,
            egress or UNREAD_EGRESS,
            [] if problems else plan_flags(contract, result, root, stack),
        )
    )
    if problems:
        print(f"{PROG}: the stack refuses this entry as it stands:", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
