"""Plan check: a fleet manager's section, where each of its jobs may run (MultiKueue), with
its findings. Only a manager's plan has one (`PlanContext.fleet_workers`, planned by
trainforge.plan.fleet). Each job's object becomes the Workload each planned worker's Kueue
builds (`queues.object_workload`, the queue simulation's, with the worker's LimitRanges and
runtimes), admitted by the one Kueue model and priced there as the cost section prices it
(`cost.job_cost` of the pods its object makes, the worker's region; `queues.dispatches`,
which the cost section and the queue simulation read too). What the section says and why
each finding is one (the dispatchers, with their Kueue 0.19 sources; same shape; data; job
inputs): docs/fleet.md.
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


# --- same shape everywhere ---------------------------------------------------------------------


def shape(docs: list[dict[str, Any]], declared: Any, inv: Any) -> dict[str, set[str]]:
    """What MultiKueue needs alike on the manager and every worker, by the object's kind (of
    a stack's planned objects, declared contracts and inventory)."""
    out: dict[str, set[str]] = {
        "team namespace": set(),
        "LocalQueue": set(),
        "ClusterTrainingRuntime": set(),
        "training operator": set(),
    }
    for d in docs:
        meta = d.get("metadata") or {}
        kind = d.get("kind")
        if kind == "Namespace" and TEAM_LABEL in (meta.get("labels") or {}):
            out["team namespace"].add(str(meta.get("name")))
        elif kind == "LocalQueue":
            cq = (d.get("spec") or {}).get("clusterQueue")
            out["LocalQueue"].add(f"{meta.get('namespace')}/{meta.get('name')} -> {cq}")
        elif kind == "ClusterTrainingRuntime":
            policy = (d.get("spec") or {}).get("mlPolicy") or {}
            out["ClusterTrainingRuntime"].add(
                f"{meta.get('name')} (mlPolicy {yaml.safe_dump(policy, default_flow_style=True).strip()})"
            )
    contracts = getattr(declared, "contracts", None) or []
    out["training operator"] |= {f"backend {b}" for c in contracts for b in c.backends}
    out["training operator"] |= operators(inv)
    return out


def operators(inv: Any) -> set[str]:
    """The job controllers' installs and their versions: the training operator's kustomize
    overlay (its ref) and the Trainer's and JobSet's Helm charts (chart and version)."""
    out = set()
    for r in getattr(inv, "resources", None) or []:
        inputs = r.inputs if isinstance(r.inputs, dict) else {}
        if r.type == T.KUSTOMIZE and "training-operator" in r.name:
            out.add(f"overlay {inputs.get('directory')}")
        elif r.type == T.HELM_RELEASE:
            chart = str(inputs.get("chart") or "")
            if any(k in chart.rsplit("/", 1)[-1] for k in ("trainer", "jobset")):
                out.add(f"chart {chart} {inputs.get('version')}")
    return out


def shape_findings(ctx: PlanContext) -> list[Finding]:
    mine = shape([o.doc for o in ctx.objects], ctx.declared, ctx.inventory)
    out = []
    for name, w in ctx.fleet_workers.items():
        if not w.planned:
            continue
        theirs = shape(w.docs, w.declared, w.inventory)
        for kind, have in mine.items():
            missing = sorted(have - theirs[kind])
            extra = sorted(theirs[kind] - have)
            if not missing and not extra:
                continue
            parts = []
            if missing:
                parts.append(f"lacks the manager's {kind} {', '.join(missing)}")
            if extra:
                parts.append(f"has {kind} {', '.join(extra)} that the manager has not")
            ident = f"worker/{name}"
            out.append(
                Finding(
                    resource=ident,
                    rule=RULE_SHAPE,
                    message=f"worker {name} (stack {w.stack}) differs from the manager: "
                    + "; ".join(parts)
                    + " (MultiKueue creates each job on a worker as it is on the manager)",
                    fix=RULES[RULE_SHAPE],
                    names=frozenset({ident, name, w.stack}),
                )
            )
    return out


def recorded_run(doc: dict[str, Any]) -> float | None:
    """The expected run a job's object records (its emitter's `EXPECTED_SECONDS`, estimated on
    the manager's pool), which `trainforge status` on whichever worker runs it counts (the
    object is copied as it is); None without one."""
    try:
        return float(((doc.get("metadata") or {}).get("annotations") or {})[EXPECTED_SECONDS])
    except (KeyError, ValueError, TypeError):
        return None


# --- the dispatcher ----------------------------------------------------------------------------


def dispatcher(ctx: PlanContext) -> str:
    """The manager's Kueue Configuration's multiKueue.dispatcherName, else Kueue's default."""
    for rec in ctx.inventory.resources:
        values = rec.inputs.get("values") if isinstance(rec.inputs, dict) else None
        if not isinstance(values, dict):
            continue
        text = get(values, "managerConfig", "controllerManagerConfigYaml")
        if not isinstance(text, str) or "kueue" not in str(rec.inputs.get("chart", "")):
            continue
        try:
            cfg = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            continue
        name = get(cfg, "multiKueue", "dispatcherName")
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
    """Which of the workers that may run a job MultiKueue tries first, by its dispatcher
    (`every`: all workers of the MultiKueueConfig, which the incremental one walks)."""
    if len(may) == 1:
        return f"{may[0]} (the only worker that can run it)"
    if how == ALL_AT_ONCE:
        return f"all {len(may)} at once ({', '.join(may)}); the first to admit it runs it"
    if how == INCREMENTAL:
        order = sorted(every)
        return (
            ", ".join(order[:3]) + " (every worker in name order, 3 at a time, until one admits it)"
        )
    return "as the external dispatcher nominates them"


# --- where each job may run --------------------------------------------------------------------


_WRITE = "s3:PutObject"  # what a checkpoint mirror's upload asks


def s3_grants(inv: Any) -> tuple[set[str], set[str]] | None:
    """(the buckets a stack creates, the buckets its IAM policies let a role write: "*" for
    every bucket its statements do not name, an access point's ARN for one it may write
    through, whose bucket no policy names), from its planned documents; None when the
    documents are not known (a preview without stand-ins). Each document is decided by the
    plan's IAM evaluator (`iam.evaluate`: NotAction, NotResource, Deny, wildcards) for a write
    to every S3 resource its statements name and to a bucket none names."""
    own: set[str] = set()
    granted: set[str] = set()
    for r in getattr(inv, "resources", None) or []:
        if r.type in T.S3_BUCKETS:
            name = r.inputs.get("bucket") if isinstance(r.inputs.get("bucket"), str) else r.id
            if name:
                own.add(name)
        if r.type not in (T.IAM_ROLE_POLICY, T.IAM_POLICY):
            continue
        doc = iam.policy_doc(r.inputs.get("policy"))
        if doc is None:
            return None  # not known at preview: the worker was not planned with stand-ins
        policy = iam.Policy(r.name, doc)
        for arn, where in _s3_targets(policy):
            if iam.evaluate(iam.Request("role/any", _WRITE, arn), [policy]).allowed:
                granted.add(where)
    return own, granted


# a bucket no statement names: what a NotResource or a wildcard lets a role write besides
_ELSEWHERE = "another-stacks-bucket-of-trainforge"


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
    """The S3 access point an ARN pattern names ("arn:aws:s3:us-east-1:123456789012:
    accesspoint/ckpt", with /object/<key> for its objects), None when it names none: a write
    through it lands in whichever bucket the access point was made for."""
    parts = iam.arn_parts(pattern)
    if parts is None or not (parts[3] and parts[4]):  # a bucket's ARN has neither
        return None
    if not iam.arn_like(f"arn:{parts[1]}:s3:*:*:accesspoint/*", pattern):
        return None
    return ":".join(parts[:5]) + ":accesspoint/" + parts[5].split("/")[1]


def _bucket_of(pattern: Any) -> str | None:
    """The bucket an IAM resource pattern names ("*": any), None when it covers no S3 bucket:
    by the evaluator's ARN matching (`iam.arn_like`), so any partition (arn:aws-cn:s3:::, which
    a China stack writes) and a wildcard over the service or the empty region and account."""
    text = str(pattern)
    if text == "*":
        return "*"
    parts = iam.arn_parts(text)
    if parts is None or not iam.arn_like(text, f"arn:{parts[1]}:s3:::{parts[5]}"):
        return None
    return parts[5].split("/", 1)[0]


def team_reaches(inv: Any, bucket: str, team: str) -> bool | None:
    """Whether a stack's role of `team` (its `trainforge.io/team` tag) may write and read its
    team's prefix of `bucket`, by the plan's IAM evaluator over that role's inline policies;
    None when they are not known (a preview without stand-ins)."""
    resources = getattr(inv, "resources", None) or []
    roles = {
        r.id
        for r in resources
        if r.type == T.IAM_ROLE and r.id and ((r.inputs.get("tags") or {}).get(TEAM_LABEL) == team)
    }
    policies = []
    for r in resources:
        if r.type != T.IAM_ROLE_POLICY or r.inputs.get("role") not in roles:
            continue
        doc = iam.policy_doc(r.inputs.get("policy"))
        if doc is None:
            return None
        policies.append(iam.Policy(r.name, doc))
    key = f"arn:aws:s3:::{bucket}/{team}/checkpoint"
    return all(
        iam.evaluate(iam.Request(f"role/{team}", action, key), policies).allowed
        for action in ("s3:PutObject", "s3:GetObject")
    )


def manager_bucket(ctx: PlanContext) -> str | None:
    """The manager's checkpoint bucket as its workers read it (`fleetCheckpoints`, exported
    by platform/fleet.py), from the manager's stand-in run; None when it is not known."""
    inv = ctx.standin_inventory()
    outputs = getattr(inv, "outputs", None) or {}
    value = outputs.get("fleetCheckpoints") if isinstance(outputs, dict) else None
    name = value.get("bucketName") if isinstance(value, dict) else None
    return name if isinstance(name, str) and name else None


def pod_inputs(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of what a pod spec reads from its namespace to start: its required
    references as the existence check reads them (`existence.pod_refs`), less what Kubernetes
    makes in every namespace, and its imagePullSecrets."""
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
    """image -> the region of the ECR registry it is pulled from (ECR images only), China
    partition hosts too: the host grammar is image_routes' (`ecr_region`)."""
    out = {}
    for pod in pods:
        for c in containers(pod):
            image = str(c.get("image") or "")
            where = ecr_region(image)
            if where:
                out[image] = where
    return out


def check(ctx: PlanContext) -> CheckResult:
    workers = getattr(ctx, "fleet_workers", None) or {}
    if not workers:
        return CheckResult()
    findings = shape_findings(ctx)
    how = dispatcher(ctx)
    lines = [dispatch_words(how)]
    data: dict[str, Any] = {"dispatcher": how, "workers": {}, "jobs": []}
    for name, w in workers.items():
        if w.planned:
            lines.append(f"worker {name}: stack {w.stack}, region {w.region or 'unknown'}")
        else:
            lines.append(f"note: {w.note}")
        data["workers"][name] = {"stack": w.stack, "region": w.region, "planned": w.planned}
    planned = {n: w for n, w in workers.items() if w.planned}
    home = region(getattr(ctx.inventory, "config", None) or {})
    for dj in getattr(ctx.declared, "jobs", None) or []:
        spec, target = dj.spec, dj.target
        obj = Q.workload_object(ctx, spec.name, target.namespace)
        ident = obj.ident if obj is not None else f"{target.namespace}/job/{spec.name}"
        names = frozenset({spec.name, ident})

        def finding(rule: str, message: str, ident: str = ident, names=names, obj=obj) -> None:
            findings.append(
                Finding(
                    resource=ident,
                    rule=rule,
                    message=message,
                    fix=RULES[rule],
                    urn=getattr(obj, "urn", "") or "",
                    names=names,
                )
            )

        if obj is None:
            continue
        shape_ = job_shape(obj.doc)  # a job's workload (workload_object): its backend's shape
        if shape_ is not None and shape_.manager(obj.doc) != MULTIKUEUE:
            finding(
                RULE_MANAGED_BY,
                f"job {spec.name}: {obj.kind} {'.'.join(shape_.managed_by)} is "
                f"{shape_.manager(obj.doc)!r}, not {MULTIKUEUE!r}: the manager's own controller "
                "would run it on the manager instead of MultiKueue on a worker",
            )
        pods = [t.spec for t in pod_templates(obj.doc, build=False)]
        where = Q.dispatches(ctx)[(spec.team, spec.name)]
        may = [(r.worker, r.pool, r.hourly, r.why) for r in where.runs]
        refused = list(where.refused)
        seconds = {r.worker: r.cost.duration.seconds if r.cost else None for r in where.runs}
        recorded = recorded_run(obj.doc)
        job_data: dict[str, Any] = {
            "job": spec.name,
            "team": spec.team,
            "workers": [
                {"worker": n, "pool": f, "onDemandPerHour": h, "cost": c, "runSeconds": seconds[n]}
                for n, f, h, c in may
            ],
            "refused": refused,
            "recordedSeconds": recorded,
        }
        data["jobs"].append(job_data)
        head = f"job {spec.name} (team {spec.team}, {where.pods} pod(s)):"
        if not may:
            if planned:
                lines.append(f"{head} no worker can run it")
                finding(
                    RULE_NO_WORKER,
                    f"job {spec.name}: no worker of the fleet can admit it ("
                    + "; ".join(refused)
                    + ")",
                )
            else:
                lines.append(f"{head} not judged: no worker of the fleet could be planned here")
            continue
        lines.append(head)
        for n, f, _, c in may:
            lines.append(f"  {n}: pool {f}, {c}")
        for r in refused:
            lines.append(f"  not {r}")
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
        lines.append("  tried first: " + tried_first([n for n, *_ in may], how, list(workers)))
        priced = sorted((h, n) for n, _, h, _ in may if h is not None)
        if len(may) > 1 and priced:
            if len(priced) == len(may) and priced[0][0] == priced[-1][0]:
                lines.append("  cheapest: none, the same on-demand price on every worker")
            else:
                lines.append(f"  cheapest: {priced[0][1]} ({usd(priced[0][0])}/h)")
        inputs = set().union(*(pod_inputs(p) for p in pods)) if pods else set()
        for n, *_ in may:
            missing = sorted(inputs - _declared_in(planned[n].docs, target.namespace))
            if missing:
                finding(
                    RULE_INPUTS,
                    f"job {spec.name}: its pods read "
                    + ", ".join(f"{k} {target.namespace}/{m}" for k, m in missing)
                    + f", which worker {n} does not declare (MultiKueue copies the job object "
                    "alone): there its pods would not start",
                )
        for image, where in sorted(image_regions(pods).items()):
            far = [n for n, *_ in may if planned[n].region not in (None, where)]
            if far:
                lines.append(
                    f"  image: {image.split('/', 1)[1]} from ECR in {where}; {', '.join(far)} "
                    f"{'pulls' if len(far) == 1 else 'pull'} it across regions (inter-region "
                    "data transfer)"
                )
        where, mirrored = (
            checkpoint_dir(spec, target),
            checkpoints_mirrored(spec, target, dj.emitted),
        )
        fsx = bool(target.claim_name) and where.startswith(target.fsx_mount_path)
        if fsx and not mirrored and len(may) > 1:
            finding(
                RULE_CHECKPOINTS,
                f"job {spec.name}: its checkpoints ({where}) live on the FSx of whichever "
                f"cluster runs it, and {len(may)} workers may ({', '.join(n for n, *_ in may)}):"
                " admitted again on another worker after an eviction it starts over",
            )
        if mirrored:
            # the mirror is the manager's own bucket (each stack creates its own): a worker
            # whose roles may write only buckets of its own stack cannot reach it
            bucket = manager_bucket(ctx)
            shut = []
            for n, *_ in may:
                grants = s3_grants(planned[n].inventory)
                if grants is None:
                    continue
                own, granted = grants
                # the manager's bucket (its name from the manager's run) at the job's team
                # prefix, for the worker's role of that team; unknown: any bucket but its own
                if bucket:
                    if team_reaches(planned[n].inventory, bucket, spec.team) is False:
                        shut.append(n)
                elif not (granted - own):
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
            far = [n for n, *_ in may if planned[n].region != home and n not in shut]
            if far:
                lines.append(
                    f"  data: checkpoints mirrored to the manager's bucket in {home}; "
                    f"{', '.join(far)} {'reads and writes' if len(far) == 1 else 'read and write'}"
                    " it across regions (inter-region data transfer: no price in the price "
                    "facts, see docs/fleet.md)"
                )
    return CheckResult(findings, [Section(TITLE, lines, data)])
