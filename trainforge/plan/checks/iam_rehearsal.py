"""Plan check: the IAM rehearsal -- real AWS calls through the policies the platform renders.

What it proves, per principal:

* Team training roles: every call the runtime's S3 mirror really makes (recorded from botocore
  against moto, trainforge.plan.checks.aws_calls) is allowed on the team's own prefix, through the
  team role's identity policies, the bucket policy and the KMS key policy; the same calls on
  another team's prefix and on another bucket are denied; the role's trust lets only its own
  Pod Identity association (cluster, namespace, ServiceAccount) assume it.
* Controllers we give a role (Karpenter, the EBS and FSx CSI drivers, and the node roles for
  the VPC CNI and the Pod Identity agent): each call the controller makes is allowed, each
  call its reference policy exists to refuse is denied, and no statement of ours grants more
  than the controller's reference policy for the pinned version (trainforge.plan.checks.iam_reference).

A finding names the principal, the call (API operation, IAM action, resource ARN and request
context) and why (the deciding statement, or the statements that almost applied and which
condition failed). The section lists how many calls were checked per principal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.aws_calls import (
    ApiCall,
    Authz,
    BucketFacts,
    Caller,
    UnmappedCall,
    rehearse_s3_mirror,
    s3_requests,
)
from trainforge.plan.checks.iam_eval import Decision, Policy, Request, beyond_reference, evaluate
from trainforge.plan.checks.iam_reference import (
    AMAZON_EBS_CSI_DRIVER_POLICY,
    EBS_CSI_KMS_ACTIONS,
    FSX_CSI_REFERENCE,
    KARPENTER_REFERENCE_VERSION,
    ExpectedCall,
    KarpenterFacts,
    ebs_csi_calls,
    fsx_csi_calls,
    karpenter_calls,
    karpenter_reference,
    pod_identity_agent_calls,
    vpc_cni_calls,
)
from trainforge.plan.checks.iam_stack import RoleFacts, StackIam, read_stack

DENIED = "TRAINFORGE_IAM_DENIED"
TOO_BROAD = "TRAINFORGE_IAM_TOO_BROAD"
BEYOND = "TRAINFORGE_IAM_BEYOND_REFERENCE"
UNREHEARSED = "TRAINFORGE_IAM_UNREHEARSED"
RULES = {
    DENIED: "grant exactly this call in the principal's policy (or stop making it): see the "
    "request context in the message and docs/rehearsals.md#iam-rehearsal",
    TOO_BROAD: "narrow the policy so this call is denied (another team's prefix, another bucket, "
    "a node the controller did not launch, another ServiceAccount assuming the role)",
    BEYOND: "keep the controller's policy within its upstream reference policy for the pinned "
    "version (trainforge/plan/checks/iam_reference.py), with the same conditions",
    UNREHEARSED: "make the call or policy readable to the rehearsal (map the S3 operation in "
    "trainforge/plan/checks/aws_calls.py, ship the managed policy in iam_reference.py)",
}

POD_IDENTITY_SERVICE = "svc:pods.eks.amazonaws.com"
KARPENTER_CHART_SUFFIX = "/karpenter"
EBS_CSI_SA = ("kube-system", "ebs-csi-controller-sa")
FSX_CSI_SA = ("kube-system", "fsx-csi-controller-sa")
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
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        s = f"{self.principal}: {self.allowed} calls allowed, {self.denied} denied as required"
        if self.failed:
            s += f", {self.failed} FAILED"
        return s + ("; " + "; ".join(self.notes) if self.notes else "")


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

    def expect(
        self,
        t: Tally,
        role: RoleFacts,
        request: Request,
        decision: Decision,
        allowed: bool,
        call: str,
        why: str = "",
    ) -> None:
        if decision.allowed == allowed:
            if allowed:
                t.allowed += 1
            else:
                t.denied += 1
            return
        t.failed += 1
        ctx = ", ".join(f"{k}={v}" for k, v in sorted(request.context.items()))
        what = f"{call}: {request.action} on {request.resource} [{ctx}]"
        if allowed:
            msg = f"{role.label} ({role.arn}) is denied {what}{' (' + why + ')' if why else ''}"
            msg += f" -- {decision.explain()}"
            rule = DENIED
        else:
            by = ", ".join(f"{m.policy} {m.sid}" for m in decision.allows) or "?"
            msg = f"{role.label} ({role.arn}) is allowed {what}, which must be denied ({why}); allowed by {by}"
            rule = TOO_BROAD
        self.findings.append(
            Finding(
                resource=role.label,
                rule=rule,
                message=msg,
                fix=RULES[rule],
                urn=role.urn,
                names=frozenset({role.name, role.arn}),
            )
        )

    def finding(self, role: RoleFacts | None, rule: str, message: str, label: str = "") -> None:
        self.findings.append(
            Finding(
                resource=role.label if role else label,
                rule=rule,
                message=message,
                fix=RULES[rule],
                urn=role.urn if role else "",
                names=frozenset({role.name, role.arn}) if role else frozenset({label}),
            )
        )


def check(ctx: PlanContext) -> CheckResult:
    inv = ctx.standin_inventory() or ctx.inventory
    stack = read_stack(inv)
    run = _Run(stack)
    _rehearse_trust(run)
    _rehearse_teams(run, ctx)
    objects = _k8s_docs(inv)
    _rehearse_karpenter(run, inv, objects)
    _rehearse_csi(run, inv, objects)
    _rehearse_node_roles(run, inv)
    lines = [t.line() for t in run.tallies] + stack.notes
    if not run.tallies:
        lines = ["no IAM role with a Pod Identity association or a known caller in this stack"]
    data = {
        "principals": [
            {"principal": t.principal, "allowed": t.allowed, "denied": t.denied, "failed": t.failed}
            for t in run.tallies
        ],
        "notes": stack.notes,
    }
    return CheckResult(findings=run.findings, sections=[Section("IAM rehearsal", lines, data)])


# --------------------------------------------------------------------------------------------
# Trust policies (Pod Identity)


def pod_identity_request(
    action: str,
    role_arn: str,
    account: str,
    cluster: str,
    namespace: str,
    service_account: str,
    region: str,
) -> Request:
    """What EKS Pod Identity sends STS for a pod (EKS User Guide, "Create IAM role with trust
    policy required by EKS Pod Identity" and "Enable or disable session tags")."""
    tags = {
        "eks-cluster-arn": f"arn:aws:eks:{region}:{account}:cluster/{cluster}",
        "eks-cluster-name": cluster,
        "kubernetes-namespace": namespace,
        "kubernetes-service-account": service_account,
        "kubernetes-pod-name": f"{service_account}-0",
        "kubernetes-pod-uid": "00000000-0000-0000-0000-000000000000",
    }
    ctx: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    ctx["aws:TagKeys"] = list(tags)
    ctx["aws:SourceAccount"] = account
    return Request(POD_IDENTITY_SERVICE, action, role_arn, ctx)


def _rehearse_trust(run: _Run) -> None:
    stack = run.stack
    for assoc in stack.associations:
        role = stack.role_of(assoc)
        if role is None:
            continue  # a role this stack does not declare: nothing of it to read
        if role.trust is None:
            run.finding(
                role,
                UNREHEARSED,
                f"{role.label}: cannot read its trust policy, so who may assume it through "
                f"{assoc.via} {assoc.name} ({assoc.namespace}/{assoc.service_account}) is not "
                "rehearsed",
            )
            continue
        t = run.tally(f"trust of {role.label} ({assoc.namespace}/{assoc.service_account})")
        for action in ("sts:AssumeRole", "sts:TagSession"):
            args = (action, role.arn, stack.account, assoc.cluster)
            own = pod_identity_request(*args, assoc.namespace, assoc.service_account, stack.region)
            other = pod_identity_request(*args, "some-other-namespace", "default", stack.region)
            foreign = replace(own, context={**own.context, "aws:SourceAccount": "999999999999"})
            # (request, allowed, call, why): its own ServiceAccount, another one, another account
            for rq, allowed, call, why in (
                (own, True, f"{assoc.via} {assoc.name}", ""),
                (other, False, "a Pod Identity association for another ServiceAccount",
                 "only its own ServiceAccount may assume the role"),
                (foreign, False, "a Pod Identity association in another account",
                 "confused deputy: aws:SourceAccount"),
            ):  # fmt: skip
                run.expect(t, role, rq, evaluate(rq, resource=[role.trust]), allowed, call, why)


# --------------------------------------------------------------------------------------------
# Team roles: the runtime's S3 calls


_MIRROR_CACHE: dict[tuple[str, str, str], list[ApiCall]] = {}


def _mirror_calls(bucket: str, prefix: str, region: str) -> list[ApiCall]:
    """The runtime's calls (recorded once per process: they depend only on these three)."""
    key = (bucket, prefix, region)
    if key not in _MIRROR_CACHE:
        _MIRROR_CACHE[key] = distinct_calls(rehearse_s3_mirror(bucket, prefix, region).calls)
    return _MIRROR_CACHE[key]


# parameters that differ between the parts of one upload and never reach IAM's request
_PER_PART = frozenset({"PartNumber", "ContentLength", "ContentMD5"})


def distinct_calls(calls: list[ApiCall]) -> list[ApiCall]:
    """One call per distinct request IAM judges (scenario, operation, bucket, key, TLS).

    Why: s3transfer uploads parts from several threads, so how many UploadPart calls are
    sent before the injected failure stops them varies from run to run; each part is the
    same request to IAM. Without this the rehearsal's counts (which the tests pin exactly)
    would depend on thread timing.
    """
    seen: set[tuple] = set()
    out = []
    for c in calls:
        k = (
            c.scenario,
            c.service,
            c.operation,
            c.secure,
            repr(sorted((k, v) for k, v in c.params.items() if k not in _PER_PART)),
        )
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def _rebind(call: ApiCall, bucket: str, old: str, new: str) -> ApiCall:
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


def _teams(ctx: PlanContext) -> list[Any]:
    declared = ctx.declared
    teams: dict[str, Any] = {}
    for contract in getattr(declared, "contracts", []) or []:
        if contract.checkpoint_bucket is None:
            continue
        for t in contract.teams.values():
            teams[t.name] = t
    return list(teams.values())


def _bucket_for(stack: StackIam, role: RoleFacts) -> BucketFacts | None:
    text = json.dumps([p.document for p in role.policies])
    named = [b for name, b in stack.buckets.items() if f":::{name}" in text]
    return named[0] if named else None


def _authorize(stack: StackIam, role: RoleFacts, a: Authz, bucket: BucketFacts) -> Decision:
    if a.resource_policy == "kms-key":
        key_policy, _ = stack.key_policy(a.request.resource)
        return evaluate(a.request, role.policies, [key_policy], key_policy=True)
    bp = stack.bucket_policies.get(a.request.resource.split(":::", 1)[-1].split("/", 1)[0])
    return evaluate(a.request, role.policies, [bp] if bp else [])


def _expect_bucket_denies(
    run: _Run,
    tally: Tally,
    role: RoleFacts,
    caller: Caller,
    bucket: BucketFacts,
    calls: list[ApiCall],
    network: dict[str, Any],
    where: str,
    why: str,
) -> None:
    """Each call's request that the bucket's policy judges must be denied (isolation)."""
    for call in calls:
        try:
            authz = s3_requests(call, caller, bucket, network)
        except UnmappedCall:
            continue
        for a in authz:
            if a.resource_policy == "bucket":
                decision = _authorize(run.stack, role, a, bucket)
                run.expect(tally, role, a.request, decision, False, call.describe() + where, why)


def _rehearse_teams(run: _Run, ctx: PlanContext) -> None:
    stack = run.stack
    for team in _teams(ctx):
        role = next(iter(stack.roles_for(team.namespace, team.service_account)), None)
        if role is None:
            continue  # no checkpoint role: the controller-identity check reports missing ones
        t = run.tally(f"{role.label} (team {team.name}, {team.namespace}/{team.service_account})")
        unreadable = [u for u in role.unreadable if u != "trust policy"]  # reported above
        if unreadable:
            run.finding(role, UNREHEARSED, f"{role.label}: cannot read {', '.join(unreadable)}")
        bucket = _bucket_for(stack, role)
        if bucket is None:
            run.finding(
                role,
                UNREHEARSED,
                f"{role.label}: none of its policies names a bucket this stack declares",
            )
            continue
        prefix = (team.checkpoint_prefix or f"{team.name}/").strip("/")
        own = f"{prefix}/{REHEARSAL_JOB}"
        caller = Caller(role.arn, stack.account, stack.region, stack.partition)
        calls = _mirror_calls(bucket.name, own, stack.region)
        # Pods reach S3 through the VPC's S3 gateway endpoint where the stack declares one.
        vpce = stack.bucket_endpoints.get(bucket.name)
        network = {"aws:SourceVpce": vpce} if vpce else {}
        for call in calls:
            try:
                authz = s3_requests(call, caller, bucket, network)
            except UnmappedCall as e:
                run.finding(role, UNREHEARSED, str(e))
                continue
            for a in authz:
                run.expect(
                    t,
                    role,
                    a.request,
                    _authorize(stack, role, a, bucket),
                    True,
                    f"{call.describe()} during '{call.scenario}'",
                )
        if vpce:
            # the same calls with the team's credentials from outside the VPC (lifted from a
            # pod): the bucket policy must refuse them
            _expect_bucket_denies(
                run, t, role, caller, bucket, calls, {},
                " from outside the VPC",
                "the team's credentials must be useless outside the VPC endpoint",
            )  # fmt: skip
        # isolation: the same calls on another team's prefix and on another bucket
        other_prefix = f"{OTHER_TEAM}/{REHEARSAL_JOB}"
        for label, target, new_prefix in (
            ("another team's prefix", bucket, other_prefix),
            (
                "another bucket",
                BucketFacts(OTHER_BUCKET, bucket.kms_key_arn, bucket.bucket_key),
                own,
            ),
        ):
            moved = [_rebind(call, target.name, own, new_prefix) for call in calls]
            _expect_bucket_denies(
                run, t, role, caller, target, moved, network, "", f"{label} must be out of reach"
            )


# --------------------------------------------------------------------------------------------
# Controllers


def _k8s_docs(inv: Any) -> list[dict]:
    """Kubernetes objects of the inventory as plain dicts (kind, metadata, spec, ...)."""
    from trainforge.plan.manifests import k8s_objects

    return [o.doc for o in k8s_objects(inv)]


def _controller_role(run: _Run, namespace: str, service_account: str) -> RoleFacts | None:
    return next(iter(run.stack.roles_for(namespace, service_account)), None)


def _expect_calls(
    run: _Run, t: Tally, role: RoleFacts, calls: list[ExpectedCall], who: str
) -> None:
    for c in calls:
        d = evaluate(c.request, role.policies)
        run.expect(t, role, c.request, d, c.allowed, who, c.why)


def _beyond(run: _Run, role: RoleFacts, reference: list[Policy], what: str) -> None:
    for p in role.policies:
        extra = beyond_reference(p, reference)
        if extra:
            run.finding(
                role,
                BEYOND,
                f"{role.label}: {p.name} statements {', '.join(extra)} grant more than {what} "
                "(an action, resource or missing condition no reference statement covers)",
            )


def _rehearse_karpenter(run: _Run, inv: Any, objects: list[dict]) -> None:
    stack = run.stack
    for rec in inv.resources:
        if rec.type != "kubernetes:helm.sh/v3:Release":
            continue
        chart = str(rec.inputs.get("chart", ""))
        if not chart.endswith(KARPENTER_CHART_SUFFIX):
            continue
        values = rec.inputs.get("values") or {}
        namespace = str(rec.inputs.get("namespace", "default"))
        sa = str((values.get("serviceAccount") or {}).get("name") or "karpenter")
        settings = values.get("settings") or {}
        cluster = str(settings.get("clusterName", ""))
        queue = str(settings.get("interruptionQueue", ""))
        role = _controller_role(run, namespace, sa)
        if role is None:
            continue  # reported by the controller-identity check
        classes = [o for o in objects if o.get("kind") == "EC2NodeClass"]
        pools = [o["metadata"]["name"] for o in objects if o.get("kind") == "NodePool"]
        node_role_name = next((str(o["spec"].get("role")) for o in classes if o.get("spec")), "")
        node_role = next(
            (r for r in stack.roles.values() if r.arn.rsplit("/", 1)[-1] == node_role_name), None
        )
        facts = KarpenterFacts(
            cluster=cluster,
            region=stack.region,
            account=stack.account,
            queue_arn=f"arn:{stack.partition}:sqs:{stack.region}:{stack.account}:{queue}",
            node_role_arn=node_role.arn
            if node_role
            else f"arn:{stack.partition}:iam::{stack.account}:role/{node_role_name}",
            node_pools=tuple(pools) or ("default",),
            node_classes=tuple(o["metadata"]["name"] for o in classes) or ("default",),
            partition=stack.partition,
        )
        t = run.tally(f"{role.label} (Karpenter {rec.inputs.get('version')}, {namespace}/{sa})")
        _expect_calls(run, t, role, karpenter_calls(facts, role.arn), "Karpenter")
        _beyond(
            run,
            role,
            [karpenter_reference(facts)],
            f"Karpenter v{KARPENTER_REFERENCE_VERSION}'s reference controller policy",
        )


def _addon_installed(inv: Any, name: str) -> bool:
    return any(
        r.type == "aws:eks/addon:Addon" and r.inputs.get("addonName") == name for r in inv.resources
    )


def _ebs_csi(stack: StackIam, role: RoleFacts, objects: list[dict]) -> tuple[list, list, str]:
    """The EBS CSI controller's calls (a customer-key StorageClass's KMS calls included) and
    its reference: AmazonEBSCSIDriverPolicy and docs/install.md's KMS statement."""
    keys = sorted(
        {
            str(o.get("parameters", {}).get("kmsKeyId"))
            for o in objects
            if o.get("kind") == "StorageClass"
            and o.get("provisioner") == "ebs.csi.aws.com"
            and o.get("parameters", {}).get("kmsKeyId")
        }
    )
    reference = [Policy("AmazonEBSCSIDriverPolicy", AMAZON_EBS_CSI_DRIVER_POLICY)]
    if keys:
        kms = {"Effect": "Allow", "Action": list(EBS_CSI_KMS_ACTIONS), "Resource": keys}
        reference.append(Policy("EBS CSI KMS statement (docs/install.md)", {"Statement": [kms]}))
    calls = ebs_csi_calls(role.arn, stack.account, stack.region, keys, stack.partition)
    return calls, reference, "aws-ebs-csi-driver's reference policy (AmazonEBSCSIDriverPolicy)"


def _fsx_csi(stack: StackIam, role: RoleFacts, objects: list[dict]) -> tuple[list, list, str]:
    """The FSx CSI controller's calls on the file systems its PersistentVolumes name."""
    handles = sorted(
        {
            str(((o.get("spec") or {}).get("csi") or {}).get("volumeHandle"))
            for o in objects
            if o.get("kind") == "PersistentVolume"
            and ((o.get("spec") or {}).get("csi") or {}).get("driver") == "fsx.csi.aws.com"
        }
    )
    arn = f"arn:{stack.partition}:fsx:{stack.region}:{stack.account}:file-system/"
    calls = fsx_csi_calls(role.arn, stack.account, stack.region, [arn + h for h in handles])
    reference = [Policy("FSx CSI reference", FSX_CSI_REFERENCE)]
    return calls, reference, "aws-fsx-csi-driver's reference policy"


# add-on -> its controller's ServiceAccount, who calls, its expected calls and reference
_CSI_DRIVERS = (
    ("aws-ebs-csi-driver", EBS_CSI_SA, "EBS CSI controller", _ebs_csi),
    ("aws-fsx-csi-driver", FSX_CSI_SA, "FSx CSI controller", _fsx_csi),
)


def _rehearse_csi(run: _Run, inv: Any, objects: list[dict]) -> None:
    """Each installed CSI driver's controller: its calls allowed, nothing beyond upstream's."""
    for addon, sa, who, facts in _CSI_DRIVERS:
        role = _controller_role(run, *sa) if _addon_installed(inv, addon) else None
        if role is None:
            continue
        calls, reference, what = facts(run.stack, role, objects)
        t = run.tally(f"{role.label} ({addon}, {'/'.join(sa)})")
        _expect_calls(run, t, role, calls, who)
        _beyond(run, role, reference, what)


def _rehearse_node_roles(run: _Run, inv: Any) -> None:
    """Node roles: the VPC CNI (unless it has its own identity) and the Pod Identity agent."""
    stack = run.stack
    cni_own = bool(stack.associations_for("kube-system", "aws-node"))
    for role in stack.node_roles():
        t = run.tally(f"{role.label} (node role)")
        calls: list[ExpectedCall] = []
        if _addon_installed(inv, "eks-pod-identity-agent"):
            calls += pod_identity_agent_calls(role.arn, stack.account, stack.region)
        if _addon_installed(inv, "vpc-cni") and not cni_own:
            calls += vpc_cni_calls(role.arn, stack.account, stack.region)
        _expect_calls(run, t, role, calls, "node")
