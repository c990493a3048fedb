"""Plan check: every job's image, what it carries (jobs/image_facts.py) and each feature's
state at run time in the runtime's words (training/selfcheck.py; on and unable to work: a
finding); the runtime image builds (base, build context) and the images components install,
where Docker Hub without credentials is a finding. docs/images.md, "What the plan and the pods
say".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainforge.core import image_routes
from trainforge.jobs import dockerfile, images
from trainforge.jobs.dockerfile import Source
from trainforge.jobs.entrypoint import checkpoints_mirrored as mirrored
from trainforge.jobs.entrypoint import logs_to_mlflow, mirrors_to_s3, shipped_files
from trainforge.jobs.image_facts import ImageFacts, facts_for, missing_pieces, runtime_way
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.fleet import region as stack_region

RULES = {
    "TRAINFORGE_IMAGE_PIECE": "where the job's code ships, run it on the trainforge runtime image "
    "(each finding names the keys to unset); build yours FROM it and declare it in imageFacts "
    "(docs/images.md); or turn the feature off",
    "TRAINFORGE_IMAGE_CREDENTIAL": "name a secret ecr-pullthroughcache/<name> in the stack's own "
    "Region and account (create it there: docs/images.md), or unset the key",
    "TRAINFORGE_BUILD_CONTEXT": "let the source through the build's ignore file (an `!path` "
    'exception after the pattern that drops it), or remove the COPY (docs/images.md, "Build '
    'context")',
}
BUILD_TYPE = "docker-build:index:Image"


def _finding(r: Any, rule: str, message: str, fix: str = "", **more: Any) -> Finding:
    return Finding(r.name, rule, message, fix or RULES[rule], urn=r.urn, **more)


def _features(
    job: Any, target: Any, facts: ImageFacts, mlflow_used: bool, mirrored: bool
) -> list[str]:
    """What the runtime will say about MLflow, the S3 mirror and NCCL's network."""

    def has(piece: Any) -> str:
        return "yes" if piece not in (None, False) else ("no" if piece is False else "unknown")

    out = []
    if target.mlflow_tracking_uri is None:
        out.append("MLflow: off (the platform runs no MLflow)")
    elif not mlflow_used:
        out.append("MLflow: not used (no file your entry runs imports mlflow or trainforge)")
    elif facts.mlflow is False:
        out.append("MLflow: off (mlflow not installed) <- the platform runs MLflow")
    else:
        out.append(f"MLflow: on (mlflow in image: {has(facts.mlflow)})")
    if mirrors_to_s3(job, target) and not mirrored:
        out.append("S3 mirror: not used (no file your entry runs imports trainforge)")
    elif mirrored:
        state = "on" if facts.boto3 is not False else "off (boto3 not installed)"
        out.append(f"S3 mirror: {state} (boto3 in image: {has(facts.boto3)})")
    else:
        out.append("S3 mirror: off (checkpoint.s3Mirror, or no checkpoint bucket)")
    if job.efa:
        ok = facts.libfabric is not False and facts.aws_ofi_nccl is not False
        net = "AWS Libfabric" if ok else "Socket (no aws-ofi-nccl/libfabric in the image)"
        out.append(f"NCCL net: {net} over {target.pool.efa_interfaces} EFA interface(s)")
    elif job.gpus_per_worker:
        out.append("NCCL net: Socket (no EFA on this pool/job)")
    if _fp8(job):
        state = "on" if facts.torchao is not False else "refused at pod start (no torchao)"
        out.append(f"fp8: {state} (torchao in image: {has(facts.torchao)})")
    return out


def _fp8(job: Any) -> bool:
    return getattr(job.training, "precision", None) == "fp8"


def _build_lines(ctx: PlanContext, findings: list[Finding]) -> list[str]:
    """The runtime image builds, each with its base and build context (findings: appended)."""
    lines: list[str] = []
    builds = ctx.resources_of(BUILD_TYPE)
    if not builds:
        return lines
    df = dockerfile.parse(dockerfile.ROOT / dockerfile.DOCKERFILE)
    for r in builds:
        target = r.inputs.get("target") or ""
        args = {k: v for k, v in (r.inputs.get("buildArgs") or {}).items() if isinstance(v, str)}
        base = df.base(target, args)
        tags = r.inputs.get("tags") or []
        lines.append(f"  build {target}: FROM {base} -> {', '.join(map(str, tags))}")
        lines += _context_lines(r, target, ctx.root or Path.cwd(), findings)
        if image_routes.is_docker_hub(base):
            message = f"build {target} pulls its base {base} from Docker Hub without credentials"
            fix = (
                "set trainforge:images.dockerHubCredentialArn (the build then pulls through the "
                "cache's docker-hub rule)"
            )
            findings.append(_finding(r, "TRAINFORGE_DOCKER_HUB", message, fix, image=base))
    return lines


def _location(value: Any, root: Path) -> Path | None:
    """A build input's local path; a relative one against the project's root, where `pulumi
    up` runs the program (as the provider resolves it)."""
    loc = value.get("location") if isinstance(value, dict) else None
    if not isinstance(loc, str) or "://" in loc:
        return None
    return root / loc


def _context_lines(r: Any, target: str, root: Path, findings: list[Finding]) -> list[str]:
    """Is every file a build's Dockerfile copies in the context Docker is sent?
    (docs/rehearsals.md, "Build context")"""
    context = _location(r.inputs.get("context"), root)
    if context is None:
        return []
    df = _location(r.inputs.get("dockerfile"), root) or context / "Dockerfile"
    if not context.is_dir() or not df.is_file():
        message = f"build {target}: context {context} or Dockerfile {df} does not exist"
        findings.append(_finding(r, "TRAINFORGE_BUILD_CONTEXT", f"{message} in this checkout"))
        return []
    ignore, problems = judge(context, df, target)
    shown = _shown(ignore, root) if ignore is not None else "(no ignore file)"
    srcs = dockerfile.sources(dockerfile.parse(df), target)
    findings += [
        _finding(r, "TRAINFORGE_BUILD_CONTEXT", f"build {target}: {p.message(shown)}")
        for p in problems
    ]
    verdict = "all in the context" if not problems else f"{len(problems)} NOT in the context"
    return [
        f"    context {_shown(context, root)} after {shown}: {len(srcs)} COPY/ADD source(s), "
        f"{verdict}"
    ]


@dataclass(frozen=True)
class Problem:
    source: Source
    missing: tuple[str, ...]  # files the build should carry that the context lacks
    absent: bool  # the checkout has nothing at the source path
    total: int = 0  # files under the source the build should carry

    def message(self, ignore: str) -> str:
        where = f"{self.source.instruction} {self.source.path} (stage {self.source.stage})"
        if self.absent:
            return f"{where}: nothing at that path in the build context's directory"
        if len(self.missing) == self.total:
            return (
                f'{where}: {ignore} keeps it out of the build context: the build fails with "'
                f'/{self.source.path.strip("/")}": not found'
            )
        shown = ", ".join(self.missing[:3]) + (" ..." if len(self.missing) > 3 else "")
        return (
            f"{where}: {ignore} keeps {len(self.missing)} of its files out of the build "
            f"context ({shown}): the image is built without them"
        )


def judge(context: Path, df: Path, target: str) -> tuple[Path | None, list[Problem]]:
    """(the ignore file read, every source whose files are not all in the context)."""
    problems = []
    for src, named, sent in dockerfile.build_reads(context, df, target):
        wanted = [f for f in named if "__pycache__" not in f.split("/") and not f.endswith(".pyc")]
        if not wanted:
            problems.append(Problem(src, (), absent=True))
            continue
        missing = tuple(f for f in wanted if f not in sent)
        if missing:
            problems.append(Problem(src, missing, absent=False, total=len(wanted)))
    return dockerfile.ignore_file(context, df), problems


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return path.as_posix()


DOCKER_HUB_FIX = (
    "set trainforge:images.dockerHubCredentialArn to the ARN of a Secrets Manager secret named "
    "ecr-pullthroughcache/<name> holding a Docker Hub username and access token "
    "(docs/images.md); the cache's docker-hub rule then serves the image"
)


def _installed_lines(declared: Any, findings: list[Finding]) -> list[str]:
    """The images components install inside charts and overlays (findings: appended)."""
    lines: list[str] = []
    for rec in getattr(declared, "installed_images", []):
        lines.append(f"  {rec.component} installs {rec.image} -> pulls {rec.pulled}")
        if image_routes.is_docker_hub(rec.pulled):
            message = (
                f"{rec.component} installs {rec.image} (inside its chart or overlay) and its "
                "nodes pull it from Docker Hub without credentials (10 pulls per hour per NAT "
                "address)"
            )
            rule = "TRAINFORGE_DOCKER_HUB"
            findings.append(Finding(rec.component, rule, message, DOCKER_HUB_FIX, image=rec.image))
    return lines


RULE_TYPE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"


def _credential_findings(ctx: PlanContext) -> list[Finding]:
    """A rule's credential in another Region than the stack: CreatePullThroughCacheRule refuses
    it at `pulumi up` (the account, which the offline plan does not know, the program checks
    at `pulumi preview`: ImageCache)."""
    if (region := stack_region(getattr(ctx.inventory, "config", None) or {})) is None:
        return []
    out = []
    for r in ctx.resources_of(RULE_TYPE):
        arn, prefix = r.inputs.get("credentialArn"), r.inputs.get("ecrRepositoryPrefix")
        if not isinstance(arn, str):
            continue
        key = image_routes.CREDENTIAL_KEYS.get(str(prefix), "trainforge:images")
        for why in image_routes.credential_problems(arn, region, None):
            message = (
                f"{key}: {arn}: {why}; ECR refuses the {prefix} rule (CreatePullThroughCacheRule)"
            )
            out.append(_finding(r, "TRAINFORGE_IMAGE_CREDENTIAL", message, names=frozenset({key})))
    return out


def _reading(job: Any, target: Any, emitted: Any) -> tuple[str, ImageFacts, str, bool, bool]:
    """(the image the emitters put in the pods, its facts, namespace/job, whether the job's code
    logs to MLflow, whether its checkpoints are mirrored): what the section and the findings
    both judge."""
    image = images.image_for(job, target.pool)
    facts = job.image_facts or facts_for(image, None)
    mlflow = logs_to_mlflow(job, shipped_files(emitted))
    return image, facts, f"{target.namespace}/{job.name}", mlflow, mirrored(job, target, emitted)


def piece_findings(job: Any, target: Any, emitted: Any, resource_name: str = "") -> list[Finding]:
    """TRAINFORGE_IMAGE_PIECE of one job: the pieces its features need that its image is known
    to lack. The plan's, and `trainforge import`'s list of what the plan will flag."""
    image, facts, name, mlflow, s3_mirror = _reading(job, target, emitted)
    mlflow = target.mlflow_tracking_uri is not None and mlflow
    rule = "TRAINFORGE_IMAGE_PIECE"
    names = frozenset({job.name, name, resource_name})
    return [
        Finding(resource_name or job.name, rule, f"{name}: {miss.message(image)}", miss.fix,
                names=names)
        for miss in missing_pieces(
            facts, mlflow=mlflow, s3_mirror=s3_mirror,
            efa=bool(job.efa), where=name, fp8=_fp8(job), runtime=runtime_way(job, target),
            waive=rule,
        )
    ]  # fmt: skip


def check(ctx: PlanContext) -> CheckResult:
    result = CheckResult()
    declared = ctx.declared
    if declared is None:
        return result
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for dj in declared.jobs:
        job, target = dj.spec, dj.target
        _, facts, name, mlflow_used, s3_mirror = _reading(job, target, dj.emitted)
        feats = _features(job, target, facts, mlflow_used, s3_mirror)
        lines += [
            f"  {name}: {job.image or '(pool default)'}",
            f"    facts: {facts.describe()}",
            f"    from: {facts.source}",
            f"    {'; '.join(feats)}",
        ]
        if (unchecked := images.archs_unknown(facts.cuda, target.pool)) is not None:
            lines.append(f"    {unchecked}")
        data.append({"job": name, "image": job.image, "facts": asdict(facts), "features": feats})
        result.findings += piece_findings(job, target, dj.emitted, dj.resource_name)
    result.findings += _credential_findings(ctx)
    build_lines = _build_lines(ctx, result.findings)
    installed_lines = _installed_lines(declared, result.findings)
    routes = getattr(declared, "image_routes", None)
    cache = (
        f"  pull-through cache {routes.registry}: rules {', '.join(sorted(routes.prefixes))}"
        if routes is not None
        else "  pull-through cache: off (images pulled from their registries)"
    )
    if lines or build_lines or installed_lines:
        title = "Images (what each job's image carries; docs/images.md)"
        result.sections.append(
            Section(title, [cache, *build_lines, *installed_lines, *lines], data)
        )
    return result
