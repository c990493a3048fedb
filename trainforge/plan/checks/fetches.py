"""Plan check: a job's code that downloads from the internet (`jobs/fetches.py` reads it: the
container's command, the Python files it mounts from ConfigMaps, the function the Kubeflow
SDK sent) in a namespace whose egress reaches no internet address (`submitted.open_egress`,
the one reading of the NetworkPolicies): the call fails when the job reaches it. Why and
what to do instead: docs/teams.md, "Network".
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from trainforge.core import pods
from trainforge.jobs import backends
from trainforge.jobs import fetches as F
from trainforge.plan import cost as C
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import pod_files
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.checks.iam_stack import stack_iam
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.checks.s3_reach import outside_bucket, s3_endpoints
from trainforge.plan.checks.submitted import open_egress, packages, pod_line_at
from trainforge.plan.sdk import SENT_URN

RULE = F.RULE
NO_KEY = "No stack key opens a team namespace's internet egress (docs/teams.md, Network)"
RULES = {
    RULE: (
        "read it from where the pods can: the team's FSx volume (an S3 data repository "
        "appears there) or an image built FROM the runtime image (docs/images.md). " + NO_KEY
    )
}


def fix(volumes: list[str]) -> str:
    """What this job can do: its pods' volumes that outlive them (`volumes`), else an image."""
    if volumes:
        return (
            f"stage it on the team's FSx volume, mounted at {volumes[0]} in these pods (an S3 "
            "data repository appears there, docs/teams.md), and read it from there: "
            "torchvision's download=True finds files already under its root; for the Hugging "
            f"Face Hub, HF_HOME under {volumes[0]} with HF_HUB_OFFLINE=1. Or bake it into an "
            "image built FROM the runtime image (docs/images.md). " + NO_KEY
        )
    return (
        "these pods mount no volume that outlives them (the Kubeflow SDK's runtime has none): "
        "bake it into an image built FROM the runtime image (docs/images.md; from the SDK, "
        "CustomTrainer(image=...)), or declare the job with trainforge (TrainingJob.function "
        "is CustomTrainer(func=...)'s equivalent), whose pods mount the team's FSx volume. "
        + NO_KEY
    )


def kept(spec: dict[str, Any], c: Any) -> tuple[str, ...]:
    """Mount paths of the container's volumes that outlive the pod (claims: FSx)."""
    return tuple(m.path for m in P._mounts(spec, c) if "persistentVolumeClaim" in m.volume)


def code_fetches(
    ctx: PlanContext, namespace: str, spec: dict[str, Any], program: str | None = None
) -> list[F.Fetch]:
    """What every container of pod `spec` fetches: its command line, and the Python files
    it mounts from ConfigMaps (named by their path in the pod); in a file the SDK writes,
    at the line of the `program` that sent it too (`submitted.pod_line_at`)."""
    sdk_install = packages({"spec": spec}) is not None  # judged as RULE_PACKAGES
    out: list[F.Fetch] = []
    configmaps = {
        o.obj_name: o.doc.get("data") or {}
        for o in reversed(ctx.objects)
        if o.kind == "ConfigMap" and o.namespace == namespace
    }
    for c in pods.containers(spec):
        files = []
        for m in P._mounts(spec, c):
            cm = m.volume.get("configMap") or {}
            data = configmaps.get(cm.get("name", ""), {})
            for item in cm.get("items") or [{"key": k, "path": k} for k in data]:
                if str(item.get("path")).endswith(".py") and item.get("key") in data:
                    files.append((posixpath.join(m.path, item["path"]), data[item["key"]]))
        where = f"container {c.get('name')} command"
        sent = {w.file: w for w in pod_files.written(spec, c)}
        written = {name: w.read for name, w in sent.items()}  # as the pod's bash writes it
        env = pods.literal_env(c)
        found = F.container_fetches(pods.argv(c), where, files, env, kept(spec, c), written)
        out += [
            _at_program(f, sent, program)
            for f in found
            if not (sdk_install and f.fetcher == "pip install" and " command:" in f.where)
        ]
    return out


def _at_program(f: F.Fetch, sent: dict[str, Any], program: str | None) -> F.Fetch:
    """`f` named at `program`'s FILE:LINE where it is in a file the SDK writes (`sent`)."""
    file, _, line = f.where.rpartition(":")
    if program is None or file not in sent or not line.isdigit():
        return f
    return replace(f, where=pod_line_at(sent[file], int(line), program))


def internet_fetches(ctx: PlanContext, o: Any) -> tuple[list[F.Fetch], list[Any]]:
    """(what object `o`'s pods fetch from outside the stack's region's AWS hosts, its pod
    templates): what this check and `trainforge run-local` (its note) read. ([], []) for an
    object with no pods, or a malformed one (the schema and runtime checks say why)."""
    if not o.namespace or o.kind in ("ConfigMap", "NetworkPolicy", "Secret"):
        return [], []
    try:
        templates = backends.pod_templates(o.doc, runtimes=runtime_docs(ctx))
        sub = getattr(getattr(ctx, "inventory", None), "submitted", None)
        program = sub.program if sub is not None and o.urn.startswith(SENT_URN) else None
        found = [f for t in templates for f in code_fetches(ctx, o.namespace, t.spec, program)]
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
        return [], []
    if found and hasattr(ctx, "inventory"):
        region = C.plan_region(ctx.inventory)
        found = [
            f
            for f in F.outside_aws(found, region)
            if not F.in_region_s3(f, region) or s3_refusal(ctx, f) is not None
        ]
    return list(dict.fromkeys(found)), templates


def s3_refusal(ctx: PlanContext, f: F.Fetch) -> str | None:
    """What the stack's S3 gateway endpoint does with `f`, a request to a bucket of the
    stack's region, where it refuses it (s3_reach.outside_bucket), else None: a bucket the
    stack declares, an endpoint that lets it through, or no endpoint (NAT, no policy)."""
    if not s3_endpoints(ctx.inventory):  # S3 through NAT: no policy between (no stack read)
        return None
    _, stack = stack_iam(ctx)
    verdict = outside_bucket(ctx.inventory, f.bucket, stack.account, set(stack.buckets), f.upload)
    return verdict[1] if verdict is not None and verdict[0] else None


def check(ctx: PlanContext) -> CheckResult:
    findings: list[Finding] = []
    lines: list[str] = []
    for o in ctx.objects:
        found, templates = internet_fetches(ctx, o)
        if not found:
            continue
        opened = open_egress(ctx, o.namespace)
        ident = o.ident
        volumes = sorted(
            {p for t in templates for c in pods.containers(t.spec) for p in kept(t.spec, c)}
        )
        for f in found:
            what = f.describe()
            s3 = s3_refusal(ctx, f) if f.bucket else None
            if opened is not None and s3 is None:
                lines.append(f"{ident}: {what}; egress open over HTTPS ({opened}): not refused")
                continue
            error = f" ({f.error})" if f.error else ""
            does = "uploads" if f.upload else "downloads"
            if s3 is not None:
                message = (
                    f"{ident} {does} when it runs ({what}): bucket {f.bucket} is not this "
                    f"stack's, and {s3}"
                )
            else:
                message = (
                    f"{ident} {does} {'to' if f.upload else 'from'} the internet when it runs "
                    f"({what}), but namespace {o.namespace}'s NetworkPolicies let its pods reach "
                    "only DNS, the VPC's interface endpoints, S3 of the stack's region over "
                    "HTTPS (the buckets the S3 endpoint's policy admits) and the Pod Identity "
                    f"agent: the connection is blocked, so the call fails when the job reaches "
                    f"it{error}"
                )
            lines.append(f"REFUSED: {ident}: {what}")
            findings.append(Finding(ident, RULE, message, fix(volumes), o.urn, frozenset({ident})))
    title = "Code that downloads from or uploads to the internet or another account's S3"
    return CheckResult(findings=findings, sections=[Section(title, lines, {})] if lines else [])
