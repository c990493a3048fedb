"""Plan check: the IAM rehearsal, real AWS calls through the policies the platform renders.

Per principal: the team roles' S3 calls as the runtime really makes them (aws_calls), who may
assume each Pod Identity role, and each controller's calls and upstream reference policy
(iam_reference). What it proves and how to read a finding: docs/rehearsals.md, IAM rehearsal.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from trainforge.core import pods
from trainforge.core.pods import get
from trainforge.jobs import backends, fetches
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import aws_calls as aws
from trainforge.plan.checks import iam_reference as ref
from trainforge.plan.checks.controller_identity import ADDONS, CHARTS
from trainforge.plan.checks.iam_eval import Decision, Policy, Request, beyond_reference, evaluate
from trainforge.plan.checks.iam_stack import TRUST, RoleFacts, StackIam, stack_iam
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.checks.ordering import chart_name
from trainforge.plan.checks.s3_reach import ANOTHER_ACCOUNT, s3_endpoints, through
from trainforge.plan.cost import plan_region
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.resource_types import EKS_ADDON, HELM_RELEASE
from trainforge.training.s3_mirror import CheckpointError, parse_s3_uri

DENIED = "TRAINFORGE_IAM_DENIED"
TOO_BROAD = "TRAINFORGE_IAM_TOO_BROAD"
BEYOND = "TRAINFORGE_IAM_BEYOND_REFERENCE"
UNREHEARSED = "TRAINFORGE_IAM_UNREHEARSED"
JOB_PATH = "TRAINFORGE_IAM_JOB_PATH"
RULES = {
    DENIED: "grant exactly this call in the principal's policy (or stop making it): see the "
    "request context in the message and docs/rehearsals.md#iam-rehearsal",
    TOO_BROAD: "narrow the policy so this call is denied (another team's prefix, another bucket, "
    "a node the controller did not launch, another ServiceAccount assuming the role)",
    BEYOND: "keep the controller's policy within its upstream reference policy for the pinned "
    "version (trainforge/plan/checks/iam_reference.py), with the same conditions",
    UNREHEARSED: "make the call or policy readable to the rehearsal (map the S3 operation in "
    "trainforge/plan/checks/aws_calls.py, ship the managed policy in iam_reference.py)",
    JOB_PATH: "point the job at its team's prefix of the checkpoint bucket (the runtime's "
    "--checkpoint-s3 is set there for you: docs/jobs.md), or stage the data on the team's FSx "
    "volume (an S3 data repository appears there: docs/teams.md)",
}

T = TypeVar("T")
POD_IDENTITY_SERVICE = "svc:pods.eks.amazonaws.com"
REHEARSAL_JOB = "rehearsal-job"
OTHER_TEAM = "another-team"
OTHER_BUCKET = "another-teams-bucket"


@dataclass
class Tally:
    """Calls checked for one principal, for the section."""

    principal: str
    allowed: int = 0
    denied: int = 0
    failed: int = 0

    def count(self, allowed: bool, decided: bool) -> bool:
        """Count a call that must be `allowed` and was `decided` so; whether the two agree."""
        if decided != allowed:
            self.failed += 1
            return False
        self.allowed += allowed
        self.denied += not allowed
        return True

    def line(self) -> str:
        s = f"{self.principal}: {self.allowed} calls allowed, {self.denied} denied as required"
        return s + (f", {self.failed} FAILED" if self.failed else "")


class _Run:
    """Collects findings and tallies while the rehearsal runs."""

    def __init__(self, stack: StackIam) -> None:
        self.stack = stack
        self.findings: list[Finding] = []
        self.tallies: list[Tally] = []

    def tally(self, principal: str) -> Tally:
        t = Tally(principal)
        self.tallies.append(t)
        return t

    def expect(self, t: Tally, role: RoleFacts, request: Request, decision: Decision,
               allowed: bool, call: str, why: str = "") -> None:  # fmt: skip
        if t.count(allowed, decision.allowed):
            return
        ctx = ", ".join(f"{k}={v}" for k, v in sorted(request.context.items()))
        who = f"{role.label} ({role.arn})"
        what = f"{call}: {request.action} on {request.resource} [{ctx}]"
        if allowed:
            why = f" ({why})" if why else ""
            self.finding(role, DENIED, f"{who} is denied {what}{why} -- {decision.explain()}")
        else:
            by = ", ".join(f"{m.policy} {m.sid}" for m in decision.allows) or "?"
            msg = f"{who} is allowed {what}, which must be denied ({why}); allowed by {by}"
            self.finding(role, TOO_BROAD, msg)

    def judge(self, role: RoleFacts, label: str, who: str, calls: list[ref.ExpectedCall],
              reference: Sequence[Policy] = (), what: str = "") -> None:  # fmt: skip
        """A controller's (or node's) expected calls under a tally of their own; given its
        upstream `reference` (`what`), its statements no reference statement covers."""
        t = self.tally(label)
        for c in calls:
            d = evaluate(c.request, role.policies)
            self.expect(t, role, c.request, d, c.allowed, who, c.why)
        for p in role.policies if reference else []:
            if extra := beyond_reference(p, reference):
                msg = (
                    f"{role.label}: {p.name} statements {', '.join(extra)} grant more than {what} "
                    "(an action, resource or missing condition no reference statement covers)"
                )
                self.finding(role, BEYOND, msg)

    def finding(self, role: RoleFacts, rule: str, message: str) -> None:
        names = frozenset({role.name, role.arn})
        self.findings.append(Finding(role.label, rule, message, RULES[rule], role.urn, names))


def check(ctx: PlanContext) -> CheckResult:
    inv, stack = stack_iam(ctx)
    run = _Run(stack)
    _rehearse_trust(run)
    _rehearse_teams(run, ctx)
    objects = [o.doc for o in k8s_objects(inv)]  # as plain dicts (kind, metadata, spec, ...)
    addons = {r.inputs.get("addonName") for r in inv.resources if r.type == EKS_ADDON}
    _rehearse_karpenter(run, inv, objects)
    _rehearse_csi(run, addons, objects)
    _rehearse_node_roles(run, addons)
    _rehearse_s3_endpoints(run, inv)
    lines = [t.line() for t in run.tallies] + stack.notes
    if not run.tallies:
        lines = ["no IAM role with a Pod Identity association or a known caller in this stack"]
    data = {"principals": [asdict(t) for t in run.tallies], "notes": stack.notes}
    return CheckResult(findings=run.findings, sections=[Section("IAM rehearsal", lines, data)])


def pod_identity_context(stack: StackIam, cluster: str, namespace: str, sa: str) -> dict:
    """What EKS Pod Identity sends STS for a pod (EKS User Guide, "Create IAM role with trust
    policy required by EKS Pod Identity" and "Enable or disable session tags")."""
    arn = f"arn:{stack.partition}:eks:{stack.region}:{stack.account}:cluster/{cluster}"
    tags = {
        "eks-cluster-arn": arn,
        "eks-cluster-name": cluster,
        "kubernetes-namespace": namespace,
        "kubernetes-service-account": sa,
        "kubernetes-pod-name": f"{sa}-0",
        "kubernetes-pod-uid": "00000000-0000-0000-0000-000000000000",
    }
    return {**ref.request_tags(tags), "aws:SourceAccount": stack.account}


def _rehearse_trust(run: _Run) -> None:
    stack = run.stack
    for assoc in stack.associations:
        role = stack.role_of(assoc)
        if role is None:
            continue  # a role this stack does not declare: nothing of it to read
        if role.trust is None:
            msg = (
                f"{role.label}: cannot read its trust policy, so who may assume it through "
                f"{assoc.via} {assoc.name} ({assoc.namespace}/{assoc.service_account}) is not "
                "rehearsed"
            )
            run.finding(role, UNREHEARSED, msg)
            continue
        t = run.tally(f"trust of {role.label} ({assoc.namespace}/{assoc.service_account})")
        own = pod_identity_context(stack, assoc.cluster, assoc.namespace, assoc.service_account)
        other = pod_identity_context(stack, assoc.cluster, "some-other-namespace", "default")
        foreign = {**own, "aws:SourceAccount": "999999999999"}
        for action in ("sts:AssumeRole", "sts:TagSession"):
            # (context, allowed, call, why): its own ServiceAccount, another one, another account
            for ctx, allowed, call, why in (
                (own, True, f"{assoc.via} {assoc.name}", ""),
                (other, False, "a Pod Identity association for another ServiceAccount",
                 "only its own ServiceAccount may assume the role"),
                (foreign, False, "a Pod Identity association in another account",
                 "confused deputy: aws:SourceAccount"),
            ):  # fmt: skip
                rq = Request(POD_IDENTITY_SERVICE, action, role.arn, ctx)
                run.expect(t, role, rq, evaluate(rq, resource=[role.trust]), allowed, call, why)


# The bucket and prefix the runtime's calls are recorded with, then rebound to each team's.
RECORDED_BUCKET = "trainforge-rehearsal-bucket"
RECORDED_PREFIX = "trainforge-rehearsal-team/" + REHEARSAL_JOB


def _teams(ctx: PlanContext) -> dict[str, Any]:
    """The teams of the stack's checkpoint buckets: each one's role is rehearsed."""
    return {
        t.name: t
        for contract in getattr(ctx.declared, "contracts", []) or []
        if contract.checkpoint_bucket is not None
        for t in contract.teams.values()
    }


# region -> its recording, started early in a child of its own (`ahead`)
_early: dict[str, Callable[[], list[aws.ApiCall]]] = {}


def ahead(ctx: PlanContext, start: Callable[[Callable[[], T]], Callable[[], T]]) -> None:
    """Start the recording the teams' rehearsals will read with `start` (registry.run_checks:
    in a child, beside the stand-in run this check waits for; ~40% of the stand-in child's CPU)."""
    if _teams(ctx):
        region = plan_region(ctx.inventory)
        _early[region] = start(functools.partial(_recorded_calls, region))


def _mirror_calls(bucket: str, prefix: str, region: str) -> list[aws.ApiCall]:
    """The runtime's calls for `bucket` and `prefix`: recorded once per region and process
    (a recording is ~0.6 CPU s of multipart uploads through moto) and rebound. The mirror
    names its bucket and prefix only in its calls' `Bucket` and in keys that start with the
    prefix (training/s3_mirror.py `S3Mirror.key`); tests/plan/test_iam_rehearsal.py holds a
    rebound recording equal to one made with the names."""
    calls = _early[region]() if region in _early else _recorded_calls(region)
    return [_rebind(c, bucket, RECORDED_PREFIX, prefix) for c in calls]


@functools.cache
def _recorded_calls(region: str) -> list[aws.ApiCall]:
    return distinct_calls(aws.rehearse_s3_mirror(RECORDED_BUCKET, RECORDED_PREFIX, region))


# parameters that differ between the parts of one upload and never reach IAM's request
_PER_PART = frozenset({"PartNumber", "ContentLength", "ContentMD5"})


def distinct_calls(calls: list[aws.ApiCall]) -> list[aws.ApiCall]:
    """One call per distinct request IAM judges (scenario, operation, bucket, key, TLS): how
    many UploadPart calls s3transfer's threads send before the injected failure varies from
    run to run, and the counts the tests pin must not."""
    out: dict[tuple, aws.ApiCall] = {}
    for c in calls:
        params = sorted((k, v) for k, v in c.params.items() if k not in _PER_PART)
        out.setdefault((c.scenario, c.service, c.operation, c.secure, repr(params)), c)
    return list(out.values())


def _rebind(call: aws.ApiCall, bucket: str, old: str, new: str) -> aws.ApiCall:
    """The same call for another bucket / prefix (isolation checks)."""

    def swap(v: Any) -> Any:
        if isinstance(v, str) and v.startswith(old):
            return new + v[len(old) :]
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    params = {k: swap(v) for k, v in call.params.items() if k != "Bucket"}
    params["Bucket"] = bucket
    return replace(call, params=params)


def _authorize(stack: StackIam, role: RoleFacts, a: aws.Authz) -> Decision:
    if a.resource_policy == "kms-key":
        key_policy = stack.key_policy(a.request.resource)
        return evaluate(a.request, role.policies, [key_policy], key_policy=True)
    bp = stack.bucket_policies.get(a.request.resource.split(":::", 1)[-1].split("/", 1)[0])
    return evaluate(a.request, role.policies, [bp] if bp else [])


def _judge_calls(run: _Run, t: Tally, role: RoleFacts, bucket: aws.BucketFacts,
                 calls: list[aws.ApiCall], network: dict[str, Any], denied_because: str = "",
                 where: str = "") -> None:  # fmt: skip
    """Every request of the calls allowed; or, given why they must be denied, every request
    the bucket's policy judges denied (isolation)."""
    for call, a in _requests(run, role, calls, bucket, network, report=not denied_because):
        if denied_because and a.resource_policy != "bucket":
            continue
        label = call.describe() + (where if denied_because else f" during '{call.scenario}'")
        decision = _authorize(run.stack, role, a)
        run.expect(t, role, a.request, decision, not denied_because, label, denied_because)


def _requests(
    run: _Run,
    role: RoleFacts,
    calls: list[aws.ApiCall],
    bucket: aws.BucketFacts,
    network: dict[str, Any],
    report: bool,
) -> Iterator[tuple[aws.ApiCall, aws.Authz]]:
    """Each IAM request of each call, as the role makes it; a call with no IAM mapping is an
    UNREHEARSED finding where `report` (said once: of the calls that must be allowed)."""
    for call in calls:
        try:
            authz = aws.s3_requests(call, _caller(run.stack, role), bucket, network)
        except aws.UnmappedCall as e:
            if report:
                run.finding(role, UNREHEARSED, str(e))
            continue
        yield from ((call, a) for a in authz)


def _rehearse_teams(run: _Run, ctx: PlanContext) -> None:
    stack = run.stack
    for team in _teams(ctx).values():
        role = next(iter(stack.roles_for(team.namespace, team.service_account)), None)
        if role is None:
            continue  # no checkpoint role: the controller-identity check reports missing ones
        t = run.tally(f"{role.label} (team {team.name}, {team.namespace}/{team.service_account})")
        unreadable = [u for u in role.unreadable if u != TRUST]  # reported above
        if unreadable:
            run.finding(role, UNREHEARSED, f"{role.label}: cannot read {', '.join(unreadable)}")
        text = json.dumps([p.document for p in role.policies])
        bucket = next((b for name, b in stack.buckets.items() if f":::{name}" in text), None)
        if bucket is None:
            msg = f"{role.label}: none of its policies names a bucket this stack declares"
            run.finding(role, UNREHEARSED, msg)
            continue
        prefix = (team.checkpoint_prefix or f"{team.name}/").strip("/")
        own = f"{prefix}/{REHEARSAL_JOB}"
        calls = _mirror_calls(bucket.name, own, stack.region)
        # Pods reach S3 through the VPC's S3 gateway endpoint where the stack declares one.
        vpce = stack.bucket_endpoints.get(bucket.name)
        network = {"aws:SourceVpce": vpce} if vpce else {}
        _judge_calls(run, t, role, bucket, calls, network)
        if vpce:
            # the same calls with the team's credentials from outside the VPC (lifted from a
            # pod): the bucket policy must refuse them
            _judge_calls(
                run, t, role, bucket, calls, {},
                "the team's credentials must be useless outside the VPC endpoint",
                " from outside the VPC",
            )  # fmt: skip
        # isolation: the same calls on another team's prefix and on another bucket
        other_bucket = aws.BucketFacts(OTHER_BUCKET, bucket.kms_key_arn, bucket.bucket_key)
        for label, target, new_prefix in (
            ("another team's prefix", bucket, f"{OTHER_TEAM}/{REHEARSAL_JOB}"),
            ("another bucket", other_bucket, own),
        ):
            moved = [_rebind(call, target.name, own, new_prefix) for call in calls]
            why = f"{label} must be out of reach"
            _judge_calls(run, t, role, target, moved, network, why)
        reach = f"{bucket.name}/{prefix}"
        _job_paths(run, role, team, reach, network, ctx.objects, runtime_docs(ctx))


def _job_paths(run: _Run, role: RoleFacts, team: Any, own: str, network: dict[str, Any],
               objects: list[Any], runtimes: dict[str, Any]) -> None:  # fmt: skip
    """The S3 URLs the team's jobs name (jobs/fetches.py `s3_urls`): the runtime's calls for a
    checkpoint URL, a PutObject for one a command uploads to (the one model of uploads, the
    internet-fetch check's), a read (list and get) for any other, each allowed to the team's
    role, or the job fails there with AccessDenied (docs/rehearsals.md, IAM rehearsal)."""
    stack, team_sa = run.stack, team.service_account
    for o in (o for o in objects if o.namespace == team.namespace):
        try:
            templates = backends.pod_templates(o.doc, runtimes=runtimes)
        except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
            continue  # a malformed object: the schema checks say why
        # pods of the team's ServiceAccount: the role's (another one has another identity)
        ours = [t.spec for t in templates if get(t.spec, "serviceAccountName") == team_sa]
        found = {
            (url, use): f"{where} of container {c.get('name')}"
            for c in (c for spec in ours for c in pods.containers(spec))
            for where, url, use in fetches.s3_urls(pods.argv(c), pods.literal_env(c))
        }
        for (url, use), where in found.items():
            try:
                name, prefix = parse_s3_uri(url)
            except CheckpointError:
                continue  # no bucket: the runtime refuses it before any call
            calls = _path_calls(name, prefix, stack.region, use)
            facts = stack.buckets.get(name) or aws.BucketFacts(name)
            denied = _first_denied(run, role, calls, facts, network)
            if denied is None:
                continue
            does = _DOES[use]
            unless = "" if name in stack.buckets else (
                f" (unless bucket {name}, not in this stack, has a policy that grants it)"
            )  # fmt: skip
            msg = (
                f"job {o.ident} {does} {url} ({where}), but {role.label} ({role.arn}), its "
                f"pods' identity, is denied {denied.action} on {denied.resource}{unless}: the "
                f"job fails there with AccessDenied. The role may reach s3://{own}/ (team "
                f"{team.name}'s prefix of the checkpoint bucket)"
            )
            names = frozenset({o.ident, o.name})
            run.findings.append(Finding(o.ident, JOB_PATH, msg, RULES[JOB_PATH], o.urn, names))


_DOES = {"checkpoints": "writes checkpoints to", "uploads": "writes", "reads": "reads"}


def _path_calls(bucket: str, prefix: str, region: str, use: fetches.S3Use) -> list[aws.ApiCall]:
    """The calls a job makes on `s3://bucket/prefix` as it uses it (`fetches.s3_urls`): the
    runtime's recorded calls for checkpoints; an upload's PutObject (the AWS CLI's multipart
    parts are authorized as s3:PutObject too: Amazon S3 User Guide, "Multipart upload and
    permissions"); a read's list and get."""
    if use == "checkpoints":
        return _mirror_calls(bucket, prefix, region)
    if use == "uploads":
        return [aws.ApiCall("s3", "PutObject", {"Bucket": bucket, "Key": prefix}, True)]
    return [
        aws.ApiCall("s3", "ListObjectsV2", {"Bucket": bucket, "Prefix": prefix}, True),
        aws.ApiCall("s3", "GetObject", {"Bucket": bucket, "Key": prefix}, True),
    ]


def _first_denied(run: _Run, role: RoleFacts, calls: list[aws.ApiCall],
                  bucket: aws.BucketFacts, network: dict[str, Any]) -> Request | None:  # fmt: skip
    """The first request of `calls` the role is denied (an unmapped call: reported above)."""
    requests = _requests(run, role, calls, bucket, network, report=False)
    return next(
        (a.request for _, a in requests if not _authorize(run.stack, role, a).allowed), None
    )


def _caller(stack: StackIam, role: RoleFacts) -> aws.Caller:
    return aws.Caller(role.arn, stack.account, stack.region, stack.partition)


def _rehearse_karpenter(run: _Run, inv: Any, objects: list[dict]) -> None:
    stack = run.stack
    p, r, a = stack.partition, stack.region, stack.account
    for rec in inv.resources:
        if rec.type != HELM_RELEASE or chart_name(rec) != "karpenter":
            continue
        values = rec.inputs.get("values") or {}
        ns, sa = CHARTS["karpenter"].where(str(rec.inputs.get("namespace", "default")), values)
        settings = values.get("settings") or {}
        role = next(iter(stack.roles_for(ns, sa)), None)
        if role is None:
            continue  # reported by the controller-identity check
        classes = [o for o in objects if o.get("kind") == "EC2NodeClass"]
        pools = [o["metadata"]["name"] for o in objects if o.get("kind") == "NodePool"]
        node_role = next((str(o["spec"].get("role")) for o in classes if o.get("spec")), "")
        declared = (x.arn for x in stack.roles.values() if x.arn.rsplit("/", 1)[-1] == node_role)
        facts = ref.KarpenterFacts(
            str(settings.get("clusterName", "")), r, a,
            f"arn:{p}:sqs:{r}:{a}:{settings.get('interruptionQueue', '')}",
            next(declared, f"arn:{p}:iam::{a}:role/{node_role}"),
            (pools or ["default"])[0],
            classes[0]["metadata"]["name"] if classes else "default",
            p,
        )  # fmt: skip
        label = f"{role.label} (Karpenter {rec.inputs.get('version')}, {ns}/{sa})"
        what = f"Karpenter v{ref.KARPENTER_REFERENCE_VERSION}'s reference controller policy"
        calls = ref.karpenter_calls(facts, role.arn)
        run.judge(role, label, "Karpenter", calls, [ref.karpenter_reference(facts)], what)


def _ebs_csi(run: _Run, role: RoleFacts, label: str, objects: list[dict]) -> None:
    """The EBS CSI controller's calls (a customer-key StorageClass's KMS calls included) and
    its reference: AmazonEBSCSIDriverPolicy as AWS serves it (moto's copy, the document the
    attachment is evaluated with; its version named in the finding) and docs/install.md's KMS
    statement."""
    sc = [o for o in objects if o.get("kind") == "StorageClass"]
    ebs = [
        get(o, "parameters", "kmsKeyId") for o in sc if o.get("provisioner") == "ebs.csi.aws.com"
    ]
    keys = sorted({str(k) for k in ebs if k})
    managed = ref.EBS_CSI_DRIVER_POLICY
    reference = [Policy(managed, ref.aws_managed_document(managed))]
    if keys:
        kms = {"Effect": "Allow", "Action": list(ref.EBS_CSI_KMS_ACTIONS), "Resource": keys}
        reference.append(Policy("EBS CSI KMS statement (docs/install.md)", {"Statement": [kms]}))
    what = f"AWS managed {managed} ({ref.managed_version(managed)})"
    calls = ref.ebs_csi_calls(_caller(run.stack, role), keys)
    run.judge(role, label, "EBS CSI controller", calls, reference, what)


def _fsx_csi(run: _Run, role: RoleFacts, label: str, objects: list[dict]) -> None:
    """The FSx CSI controller's calls on the file systems its PersistentVolumes name."""
    pvs = [get(o, "spec", "csi") or {} for o in objects if o.get("kind") == "PersistentVolume"]
    fsx = {str(v.get("volumeHandle")) for v in pvs if v.get("driver") == "fsx.csi.aws.com"}
    caller = _caller(run.stack, role)
    fs = [caller.arn("fsx", f"file-system/{h}") for h in sorted(fsx)]
    reference = [Policy("FSx CSI reference", ref.FSX_CSI_REFERENCE)]
    what = "aws-fsx-csi-driver's reference policy"
    run.judge(role, label, "FSx CSI controller", ref.fsx_csi_calls(caller, fs), reference, what)


def _rehearse_csi(run: _Run, addons: set[str], objects: list[dict]) -> None:
    """Each installed CSI driver's controller (its ServiceAccount: ADDONS): its calls allowed,
    nothing beyond upstream's."""
    for addon, rehearse in (("aws-ebs-csi-driver", _ebs_csi), ("aws-fsx-csi-driver", _fsx_csi)):
        namespace, sa = ADDONS[addon].where("kube-system")
        role = next(iter(run.stack.roles_for(namespace, sa)), None) if addon in addons else None
        if role is not None:
            rehearse(run, role, f"{role.label} ({addon}, {namespace}/{sa})", objects)


def _rehearse_node_roles(run: _Run, addons: set[str]) -> None:
    """Node roles: the VPC CNI (unless it has its own identity) and the Pod Identity agent."""
    stack = run.stack
    cni_sa = ADDONS["vpc-cni"].where("kube-system")
    cni = "vpc-cni" in addons and not stack.associations_for(*cni_sa)
    for role in stack.node_roles():
        agent = "eks-pod-identity-agent" in addons
        calls = ref.node_role_calls(_caller(stack, role), vpc_cni=cni, pod_identity_agent=agent)
        run.judge(role, f"{role.label} (node role)", "node", calls)


EXFIL = (
    "another account's bucket: a pod holding its credentials or a presigned URL could carry "
    "the team's data there"
)
_PUT_GET = ("s3:PutObject", "s3:GetObject")


def _rehearse_s3_endpoints(run: _Run, inv: Any) -> None:
    """Each S3 gateway endpoint's policy (s3_reach): a bucket the stack declares (this account's,
    the checkpoint bucket) read and written, ECR's layer bucket (AWS-owned) read, so nodes pull
    images, and another account's bucket neither written nor read: a pod holding that account's
    credentials or a presigned URL cannot carry the team volume out through the VPC
    (docs/teams.md, Network).
    The principal is this account's node or team role, or another account's, alike."""
    stack = run.stack
    ours = next(iter(stack.buckets), None)
    layers = f"prod-{stack.region}-starport-layer-bucket"
    me = f"arn:{stack.partition}:iam::{stack.account}:role/{REHEARSAL_JOB}"
    declared = "a bucket this stack declares (this account's)"
    cases = [
        *((action, ours, stack.account, True, declared) for action in _PUT_GET),
        ("s3:GetObject", layers, "AWS", True, "ECR's image layers (AWS-owned)"),
        ("s3:PutObject", layers, "AWS", False, "ECR's layer bucket is only read"),
        *((action, OTHER_BUCKET, ANOTHER_ACCOUNT, False, EXFIL) for action in _PUT_GET),
    ]
    for ep in s3_endpoints(inv):
        t = run.tally(f"S3 gateway endpoint {ep.name} (policy)")
        for action, bucket, owner, allowed, why in cases:
            if bucket is None:
                continue
            d = through(ep, action, bucket, "rehearsal/object", principal=me,
                        principal_account=stack.account, resource_account=owner)  # fmt: skip
            if t.count(allowed, d.allowed):
                continue
            gate, what = f"S3 gateway endpoint {ep.name}", f"{action} on s3://{bucket}/"
            what += f" ({why}; aws:ResourceAccount={owner})"
            if allowed:
                rule, msg = DENIED, f"{gate} denies {what}: {d.explain()}"
            else:
                rule, msg = (
                    TOO_BROAD,
                    f"{gate} lets {what} through, which must be denied: {d.reason}",
                )
            names = frozenset({ep.name})
            run.findings.append(Finding(ep.name, rule, msg, RULES[rule], ep.urn, names))
