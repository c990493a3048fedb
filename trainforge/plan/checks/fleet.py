"""Plan check: a fleet manager's section, where each of its jobs may run (MultiKueue), with its
findings; only a manager's plan has workers (`PlanContext.fleet_workers`, plan/fleet.py). Each
job's Workload is admitted and priced per worker by the one Kueue model (`queues.dispatches`,
which the cost section and the queue simulation read too). The dispatchers (with their Kueue
0.19 sources) and why each finding is one: docs/fleet.md.
"""

from __future__ import annotations

from typing import Any

import yaml

from trainforge.core.image_routes import ecr_region
from trainforge.core.pods import containers, get
from trainforge.jobs.backends import job_shape, pod_templates
from trainforge.jobs.duration import EXPECTED_SECONDS, duration_text
from trainforge.jobs.entrypoint import checkpoint_dir, checkpoints_mirrored
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.plan import resource_types as T
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import iam_eval as iam
from trainforge.plan.checks import queues as Q
from trainforge.plan.checks.existence import BUILTIN, pod_refs
from trainforge.plan.checks.iam_stack import read_stack
from trainforge.plan.checks.ordering import chart_name
from trainforge.plan.fleet import region
from trainforge.plan.price_facts import usd
from trainforge.stack.fleet import MULTIKUEUE_CONTROLLER as MULTIKUEUE

TITLE = "Fleet (MultiKueue): the workers that may run each job"
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"

RULE_NO_WORKER = "TRAINFORGE_FLEET_NO_WORKER"
RULE_SHAPE = "TRAINFORGE_FLEET_SHAPE"
RULE_MANAGED_BY = "TRAINFORGE_FLEET_MANAGED_BY"
RULE_CHECKPOINTS = "TRAINFORGE_FLEET_CHECKPOINTS"
RULE_INPUTS = "TRAINFORGE_FLEET_JOB_INPUTS"
RULES = {
    RULE_NO_WORKER: "give a worker a pool (and its team a quota there) that holds the job, or "
    "make the job fit a worker's pool (docs/fleet.md, 'Which worker runs a job')",
    RULE_SHAPE: "give every worker the manager's teams, runtimes and job controllers (the same "
    "trainforge:teams, trainforge:jobBackend(s) and operator settings in each "
    "Pulumi.<worker>.yaml; docs/fleet.md, 'Same shape everywhere')",
    RULE_MANAGED_BY: "emit the manager's jobs with managedBy kueue.x-k8s.io/multikueue "
    "(the platform does so for every backend of a manager; docs/fleet.md)",
    RULE_CHECKPOINTS: "keep the job's checkpoints where every worker that may run it reaches "
    "them: mirrored to S3 (checkpoint.s3Mirror: true) in a bucket each such worker's team role "
    "may write (docs/fleet.md, 'Data')",
    RULE_INPUTS: "a job's code ConfigMaps reach a worker through the manager's "
    "fleetJobConfigMaps: `pulumi up` the manager, then each worker again (docs/fleet.md, "
    "'Bootstrap order'); or ship the code in the image (codeSource: image). Declare any other "
    "Secret, PersistentVolumeClaim or ServiceAccount the pods read in every worker stack",
}
SHAPE_KINDS = ("team namespace", "LocalQueue", "ClusterTrainingRuntime", "training operator")


def shape(docs: list[dict[str, Any]], declared: Any, inv: Any) -> dict[str, set[str]]:
    """What MultiKueue needs alike on the manager and every worker, by the object's kind."""
    out: dict[str, set[str]] = {k: set() for k in SHAPE_KINDS}
    for d in docs:
        meta, spec, kind = d.get("metadata") or {}, d.get("spec") or {}, d.get("kind")
        if kind == "Namespace" and TEAM_LABEL in (meta.get("labels") or {}):
            out["team namespace"].add(str(meta.get("name")))
        elif kind == "LocalQueue":
            cq = spec.get("clusterQueue")
            out[kind].add(f"{meta.get('namespace')}/{meta.get('name')} -> {cq}")
        elif kind == "ClusterTrainingRuntime":
            policy = yaml.safe_dump(spec.get("mlPolicy") or {}, default_flow_style=True).strip()
            out[kind].add(f"{meta.get('name')} (mlPolicy {policy})")
    backends = {b for c in getattr(declared, "contracts", None) or [] for b in c.backends}
    out["training operator"] |= {f"backend {b}" for b in backends} | operators(inv)
    return out


def operators(inv: Any) -> set[str]:
    """The job controllers' installs: the training operator's kustomize overlay (its ref) and
    the Trainer's and JobSet's Helm charts (chart and version)."""
    out = set()
    for r in getattr(inv, "resources", None) or []:
        inputs = r.inputs if isinstance(r.inputs, dict) else {}
        if r.type == T.KUSTOMIZE and "training-operator" in r.name:
            out.add(f"overlay {inputs.get('directory')}")
        elif r.type == T.HELM_RELEASE and any(k in chart_name(r) for k in ("trainer", "jobset")):
            out.add(f"chart {inputs.get('chart')} {inputs.get('version')}")
    return out


def shape_findings(ctx: PlanContext) -> list[Finding]:
    mine = shape([o.doc for o in ctx.objects], ctx.declared, ctx.inventory)
    out = []
    for name, w in ctx.fleet_workers.items():
        if not w.planned:
            continue
        theirs = shape(w.docs, w.declared, w.inventory)
        for kind, have in mine.items():
            missing, extra = sorted(have - theirs[kind]), sorted(theirs[kind] - have)
            parts = [f"lacks the manager's {kind} {', '.join(missing)}"] if missing else []
            parts += [f"has {kind} {', '.join(extra)} that the manager has not"] if extra else []
            if parts:
                ident = f"worker/{name}"
                message = (
                    f"worker {name} (stack {w.stack}) differs from the manager: "
                    f"{'; '.join(parts)} (MultiKueue creates each job on a worker as it is on "
                    "the manager)"
                )
                names = frozenset({ident, name, w.stack})
                out.append(Finding(ident, RULE_SHAPE, message, RULES[RULE_SHAPE], names=names))
    return out


def recorded_run(doc: dict[str, Any]) -> float | None:
    """The expected run a job's object records (`EXPECTED_SECONDS`, estimated on the manager's
    pool; `trainforge status` on the worker that runs the copy counts it); None without one."""
    try:
        return float(((doc.get("metadata") or {}).get("annotations") or {})[EXPECTED_SECONDS])
    except (KeyError, ValueError, TypeError):
        return None


def dispatcher(ctx: PlanContext) -> str:
    """The manager's Kueue Configuration's multiKueue.dispatcherName, else Kueue's default."""
    for rec in ctx.inventory.resources:
        values = rec.inputs.get("values") if isinstance(rec.inputs, dict) else None
        text = get(values, "managerConfig", "controllerManagerConfigYaml")
        if not isinstance(text, str) or "kueue" not in str(rec.inputs.get("chart", "")):
            continue
        try:
            name = get(yaml.safe_load(text) or {}, "multiKueue", "dispatcherName")
        except yaml.YAMLError:
            continue
        if isinstance(name, str):
            return name
    return ALL_AT_ONCE


# What each dispatcher does with a job's Workload, after "dispatcher <name>".
DISPATCH_WORDS = {
    ALL_AT_ONCE: " (Kueue 0.19's default): every worker below gets the job's Workload at once; "
    "the first worker to admit it runs it, the others' copies are deleted (no worker is "
    "preferred: cost does not decide)",
    INCREMENTAL: ": workers are tried in name order, 3 more at a time, until one admits it",
}


def dispatch_words(name: str) -> str:
    other = ": an external dispatcher nominates the workers (not modelled)"
    return f"dispatcher {name}{DISPATCH_WORDS.get(name, other)}"


def tried_first(may: list[str], how: str, every: list[str]) -> str:
    """Which of the workers that may run a job MultiKueue tries first (`every`: all workers of
    the MultiKueueConfig, which the incremental dispatcher walks)."""
    if len(may) == 1:
        return f"{may[0]} (the only worker that can run it)"
    if how == ALL_AT_ONCE:
        return f"all {len(may)} at once ({', '.join(may)}); the first to admit it runs it"
    if how == INCREMENTAL:
        first = ", ".join(sorted(every)[:3])
        return f"{first} (every worker in name order, 3 at a time, until one admits it)"
    return "as the external dispatcher nominates them"


# a bucket no statement names: what a NotResource or a wildcard lets a role write besides
_ELSEWHERE = "another-stacks-bucket-of-trainforge"


def s3_grants(inv: Any) -> tuple[set[str], set[str]] | None:
    """(the buckets a stack creates, what its IAM policies let a role write: a bucket, "*" for
    any its statements do not name, or an access point's ARN), each by the plan's IAM evaluator
    (`iam.evaluate`: NotAction, NotResource, Deny, wildcards); None when a policy is not known
    (a preview without stand-ins)."""
    own: set[str] = set()
    granted: set[str] = set()
    for r in getattr(inv, "resources", None) or []:
        name = r.inputs.get("bucket") if isinstance(r.inputs.get("bucket"), str) else r.id
        if r.type in T.S3_BUCKETS and name:
            own.add(name)
        if r.type not in (T.IAM_ROLE_POLICY, T.IAM_POLICY):
            continue
        doc = iam.policy_doc(r.inputs.get("policy"))
        if doc is None:
            return None
        policy = iam.Policy(r.name, doc)
        for arn, where in _s3_targets(policy):
            if iam.evaluate(iam.Request("role/any", "s3:PutObject", arn), [policy]).allowed:
                granted.add(where)
    return own, granted


def _s3_targets(policy: Any) -> list[tuple[str, str]]:
    """(a write's resource ARN, what it reaches) for each S3 resource `policy` names (the
    pattern itself, which its own wildcards match) and for a bucket it does not name ("*")."""
    partitions = {"aws"}
    out = []
    for st in policy.statements():
        for pattern in iam.as_list(st.get("Resource")) + iam.as_list(st.get("NotResource")):
            parts = iam.arn_parts(str(pattern))
            if parts is not None and parts[1] and "*" not in parts[1]:
                partitions.add(parts[1])
            where = _access_point(str(pattern)) or _bucket_of(pattern)
            if where is not None:
                out.append((str(pattern), where))
    return out + [(f"arn:{p}:s3:::{_ELSEWHERE}/{_ELSEWHERE}", "*") for p in sorted(partitions)]


def _access_point(pattern: str) -> str | None:
    """The S3 access point an ARN pattern names (`arn:aws:s3:<region>:<account>:accesspoint/
    <name>[/object/<key>]`: a write lands in its bucket), else None."""
    parts = iam.arn_parts(pattern)
    if parts is None or not (parts[3] and parts[4]):  # a bucket's ARN has neither
        return None
    if not iam.arn_like(f"arn:{parts[1]}:s3:*:*:accesspoint/*", pattern):
        return None
    return ":".join(parts[:5]) + ":accesspoint/" + parts[5].split("/")[1]


def _bucket_of(pattern: Any) -> str | None:
    """The bucket an IAM resource pattern names ("*": any), None when it covers no S3 bucket,
    by the evaluator's ARN matching: any partition, wildcards over service, region, account."""
    text = str(pattern)
    if text == "*":
        return "*"
    parts = iam.arn_parts(text)
    if parts is None or not iam.arn_like(text, f"arn:{parts[1]}:s3:::{parts[5]}"):
        return None
    return parts[5].split("/", 1)[0]


def team_reaches(inv: Any, bucket: str, team: str) -> bool | None:
    """Whether a stack's roles of `team` (their `trainforge.io/team` tag, as `read_stack` reads
    them) may write and read its team's prefix of `bucket`; None when a policy is not known."""
    roles = [r for r in read_stack(inv).roles.values() if r.team == team]
    if not all(r.policies_known for r in roles):
        return None
    policies = [p for r in roles for p in r.policies]
    key = f"arn:aws:s3:::{bucket}/{team}/checkpoint"
    return all(
        iam.evaluate(iam.Request(f"role/{team}", action, key), policies).allowed
        for action in ("s3:PutObject", "s3:GetObject")
    )


def manager_bucket(ctx: PlanContext) -> str | None:
    """The manager's checkpoint bucket as its workers read it (`fleetCheckpoints`, exported by
    platform/fleet.py) from its stand-in run; None when not known."""
    outputs = getattr(ctx.standin_inventory(), "outputs", None) or {}
    value = outputs.get("fleetCheckpoints") if isinstance(outputs, dict) else None
    name = value.get("bucketName") if isinstance(value, dict) else None
    return name if isinstance(name, str) and name else None


def pod_inputs(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of what a pod spec reads from its namespace to start: its required
    references (`existence.pod_refs`) less Kubernetes' own, and its imagePullSecrets."""
    refs = {(r.kind, r.name) for r in pod_refs(pod, "", "")} - BUILTIN
    pulls = {("Secret", s["name"]) for s in pod.get("imagePullSecrets") or [] if s.get("name")}
    return refs | pulls


def _declared_in(docs: list[dict[str, Any]], namespace: str) -> set[tuple[str, str]]:
    return {
        (str(d.get("kind")), str((d.get("metadata") or {}).get("name")))
        for d in docs
        if (d.get("metadata") or {}).get("namespace") == namespace
    }


def image_regions(pods: list[dict[str, Any]]) -> dict[str, str]:
    """image -> the region of the ECR registry it is pulled from (ECR images only, by
    image_routes' host grammar: `ecr_region`)."""
    images = {str(c.get("image") or "") for pod in pods for c in containers(pod)}
    return {i: r for i in images if (r := ecr_region(i))}


def check(ctx: PlanContext) -> CheckResult:
    workers = getattr(ctx, "fleet_workers", None) or {}
    if not workers:
        return CheckResult()
    findings = shape_findings(ctx)
    how = dispatcher(ctx)
    lines = [dispatch_words(how)]
    data: dict[str, Any] = {"dispatcher": how, "workers": {}, "jobs": []}
    for name, w in workers.items():
        planned_ = f"worker {name}: stack {w.stack}, region {w.region or 'unknown'}"
        lines.append(planned_ if w.planned else f"note: {w.note}")
        data["workers"][name] = {"stack": w.stack, "region": w.region, "planned": w.planned}
    planned = {n: w for n, w in workers.items() if w.planned}
    home = region(getattr(ctx.inventory, "config", None) or {})
    for dj in getattr(ctx.declared, "jobs", None) or []:
        spec, target = dj.spec, dj.target
        obj = Q.workload_object(ctx, spec.name, target.namespace)
        if obj is None:
            continue
        urn, names = getattr(obj, "urn", "") or "", frozenset({spec.name, obj.ident})

        def finding(rule: str, message: str, urn: str = urn, names=names, ident=obj.ident) -> None:
            findings.append(Finding(ident, rule, message, RULES[rule], urn=urn, names=names))

        shape_ = job_shape(obj.doc)  # a job's workload (workload_object): its backend's shape
        if shape_ is not None and shape_.manager(obj.doc) != MULTIKUEUE:
            finding(
                RULE_MANAGED_BY,
                f"job {spec.name}: {obj.kind} {'.'.join(shape_.managed_by)} is "
                f"{shape_.manager(obj.doc)!r}, not {MULTIKUEUE!r}: the manager's own controller "
                "would run it on the manager instead of MultiKueue on a worker",
            )
        pods = [t.spec for t in pod_templates(obj.doc, build=False)]
        dispatch = Q.dispatches(ctx)[(spec.team, spec.name)]
        runs, refused = list(dispatch.runs), list(dispatch.refused)
        recorded = recorded_run(obj.doc)
        rows = [
            {"worker": r.worker, "pool": r.pool, "onDemandPerHour": r.hourly, "cost": r.why,
             "runSeconds": r.cost.duration.seconds if r.cost else None}
            for r in runs
        ]  # fmt: skip
        data["jobs"].append(
            {"job": spec.name, "team": spec.team, "workers": rows, "refused": refused,
             "recordedSeconds": recorded}
        )  # fmt: skip
        head = f"job {spec.name} (team {spec.team}, {dispatch.pods} pod(s)):"
        if not runs and not planned:
            lines.append(f"{head} not judged: no worker of the fleet could be planned here")
            continue
        if not runs:
            lines.append(f"{head} no worker can run it")
            finding(
                RULE_NO_WORKER,
                f"job {spec.name}: no worker of the fleet can admit it ({'; '.join(refused)})",
            )
            continue
        may = [r.worker for r in runs]
        lines += [head, *(f"  {r.worker}: pool {r.pool}, {r.why}" for r in runs)]
        lines += [f"  not {r}" for r in refused]
        seconds = {r.worker: r.cost.duration.seconds if r.cost else None for r in runs}
        # the object records whole seconds (`f"{seconds:.0f}"`)
        longer = [
            (n, t) for n, t in seconds.items() if None not in (t, recorded) and round(t) > recorded
        ]
        if longer and recorded is not None:
            lines.append(
                f"  recorded run: {duration_text(recorded)} on its object (estimated on the "
                "manager's pool; `trainforge status` on a worker counts it), shorter than the "
                + ", ".join(f"{n}'s {duration_text(t)}" for n, t in longer)
                + ": a job queued behind it there is promised an earlier start than the plan's"
            )
        lines.append("  tried first: " + tried_first(may, how, list(workers)))
        priced = sorted((r.hourly, r.worker) for r in runs if r.hourly is not None)
        if len(may) > 1 and priced and len(priced) == len(may) and priced[0][0] == priced[-1][0]:
            lines.append("  cheapest: none, the same on-demand price on every worker")
        elif len(may) > 1 and priced:
            lines.append(f"  cheapest: {priced[0][1]} ({usd(priced[0][0])}/h)")
        inputs = set().union(*(pod_inputs(p) for p in pods)) if pods else set()
        for n in may:
            missing = sorted(inputs - _declared_in(planned[n].docs, target.namespace))
            if missing:
                finding(
                    RULE_INPUTS,
                    f"job {spec.name}: its pods read "
                    + ", ".join(f"{k} {target.namespace}/{m}" for k, m in missing)
                    + f", which worker {n} does not declare (MultiKueue copies the job object "
                    "alone): there its pods would not start",
                )
        for image, at in sorted(image_regions(pods).items()):
            far = [n for n in may if planned[n].region not in (None, at)]
            if far:
                lines.append(
                    f"  image: {image.split('/', 1)[1]} from ECR in {at}; {', '.join(far)} "
                    f"{'pulls' if len(far) == 1 else 'pull'} it across regions (inter-region "
                    "data transfer)"
                )
        ckpt = checkpoint_dir(spec, target)
        mirrored = checkpoints_mirrored(spec, target, dj.emitted)
        fsx = bool(target.claim_name) and ckpt.startswith(target.fsx_mount_path)
        if fsx and not mirrored and len(may) > 1:
            finding(
                RULE_CHECKPOINTS,
                f"job {spec.name}: its checkpoints ({ckpt}) live on the FSx of whichever "
                f"cluster runs it, and {len(may)} workers may ({', '.join(may)}):"
                " admitted again on another worker after an eviction it starts over",
            )
        if not mirrored:
            continue
        # the mirror is the manager's own bucket (each stack creates its own): by the worker's
        # role of the job's team at its prefix; the bucket's name unknown: any bucket but its own
        bucket, shut = manager_bucket(ctx), []
        for n in may:
            if (grants := s3_grants(inv := planned[n].inventory)) is None:
                continue
            own, granted = grants
            if team_reaches(inv, bucket, spec.team) is False if bucket else not (granted - own):
                shut.append(n)
        if shut:
            finding(
                RULE_CHECKPOINTS,
                f"job {spec.name}: it mirrors its checkpoints to the manager's bucket"
                + (f" {bucket}" if bucket else "")
                + f", and the team {spec.team} role of worker(s) {', '.join(shut)} may not "
                f"write its {spec.team}/ prefix (by their planned IAM policies): there it "
                "can neither save nor resume from S3",
            )
        far = [n for n in may if planned[n].region != home and n not in shut]
        if far:
            lines.append(
                f"  data: checkpoints mirrored to the manager's bucket in {home}; "
                f"{', '.join(far)} {'reads and writes' if len(far) == 1 else 'read and write'}"
                " it across regions (inter-region data transfer: no price in the price "
                "facts, see docs/fleet.md)"
            )
    return CheckResult(findings, [Section(TITLE, lines, data)])
