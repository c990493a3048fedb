"""The IAM a stack renders, read from the program's recorded resources (the stand-in run's,
linked by `Recorded.dependencies`): the policies the platform actually declares, not a copy of
the functions that build them. docs/rehearsals.md, "Where the policies come from".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainforge.jobs.pod import TEAM_LABEL
from trainforge.plan import resource_types as T
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks.aws_calls import BucketFacts
from trainforge.plan.checks.iam_eval import Policy, as_list, policy_doc
from trainforge.plan.checks.iam_reference import default_key_policy, managed_policy
from trainforge.plan.checks.s3_reach import s3_endpoints
from trainforge.plan.cost import plan_region
from trainforge.plan.runner import UNKNOWN, Inventory

ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
KMS_KEY_POLICY = "aws:kms/keyPolicy:KeyPolicy"
TRUST = "trust policy"  # what RoleFacts.unreadable says of a trust policy it could not read


@dataclass
class RoleFacts:
    urn: str
    name: str  # the Pulumi resource name
    arn: str
    trust: Policy | None
    policies: list[Policy] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    team: str | None = None  # its trainforge.io/team tag

    @property
    def label(self) -> str:
        return f"role {self.name}"

    @property
    def policies_known(self) -> bool:
        """Whether every permission policy of the role was read (its trust policy aside)."""
        return all(u == TRUST for u in self.unreadable)

    def trusted(self, kind: str) -> list[tuple[Mapping[str, Any], list[Any]]]:
        """(statement, principals) of each trust statement naming `kind` principals ("Service",
        "Federated"): the one reading of who may assume the role, for node roles and IRSA."""
        return [
            (st, as_list(p[kind]))
            for st in (self.trust.statements() if self.trust else [])
            if isinstance(p := st.get("Principal"), Mapping) and kind in p
        ]

    def add(self, document: Any, name: str, what: str) -> None:
        """A policy of the role, or `what` could not be read (an unknown document)."""
        doc = policy_doc(document)
        if doc:
            self.policies.append(Policy(name, doc))
        else:
            self.unreadable.append(what)


@dataclass
class Association:
    """A Pod Identity association (or an add-on's own association / IRSA role)."""

    name: str
    urn: str
    namespace: str
    service_account: str
    cluster: str
    role_urn: str | None
    role_arn: str
    via: str = "PodIdentityAssociation"


@dataclass
class StackIam:
    account: str
    region: str
    partition: str
    roles: dict[str, RoleFacts]  # by URN
    associations: list[Association]
    bucket_policies: dict[str, Policy]  # by bucket name
    buckets: dict[str, BucketFacts]  # by bucket name (only buckets with a known name)
    key_policies: dict[str, Policy]  # by key ARN
    notes: list[str] = field(default_factory=list)
    # bucket name -> the id of the S3 gateway endpoint this stack declares: pods in the VPC
    # reach S3 through it, so their requests carry that aws:SourceVpce. Read from the declared
    # endpoint resources, never from the bucket policy the rehearsal judges.
    bucket_endpoints: dict[str, str] = field(default_factory=dict)

    def role(self, urn_or_arn: str | None) -> RoleFacts | None:
        by_arn = (r for r in self.roles.values() if r.arn == urn_or_arn)
        return self.roles.get(urn_or_arn or "") or next(by_arn, None)

    def associations_for(self, namespace: str, service_account: str) -> list[Association]:
        at = (namespace, service_account)
        return [a for a in self.associations if (a.namespace, a.service_account) == at]

    def role_of(self, a: Association) -> RoleFacts | None:
        """The declared role an association hands out (None: one this stack does not declare)."""
        return self.role(a.role_urn) or self.role(a.role_arn)

    def roles_for(self, namespace: str, service_account: str) -> list[RoleFacts]:
        """The declared roles the ServiceAccount's associations give its pods."""
        found = (self.role_of(a) for a in self.associations_for(namespace, service_account))
        return [r for r in found if r is not None]

    def node_roles(self) -> list[RoleFacts]:
        """Roles EC2 instances assume (node roles): trusted by ec2.amazonaws.com."""
        return [r for r in self.roles.values() if any(_ec2(ss) for _, ss in r.trusted("Service"))]

    def key_policy(self, key_arn: str) -> Policy:
        """The key's policy as this stack declares it, else the one KMS gives a key without."""
        return self.key_policies.get(key_arn) or default_key_policy(self.account, self.partition)


def _ec2(services: list[Any]) -> bool:
    return any(str(s).startswith("ec2.amazonaws.com") for s in services)


def _association(a: Any) -> Association:
    got = [str(a.inputs.get(k, "")) for k in ("namespace", "serviceAccount", "clusterName")]
    return Association(a.name, a.urn, *got, _dep(a, "roleArn"), str(a.inputs.get("roleArn", "")))


def _dep(rec: Any, prop: str) -> str | None:
    urns = rec.dependencies.get(prop) or []
    return urns[0] if urns else None


def stack_iam(ctx: PlanContext) -> tuple[Inventory, StackIam]:
    """The inventory the IAM checks read (the stand-in run's where there is one) and its IAM,
    read once per plan: the IAM rehearsal and the controller-identity check both need it."""
    inv = ctx.standin_inventory() or ctx.inventory
    if "iam_stack" not in ctx.memo:
        ctx.memo["iam_stack"] = read_stack(inv)
    return inv, ctx.memo["iam_stack"]


def read_stack(inv: Inventory) -> StackIam:
    """Every role, association, bucket and key policy the program declared."""
    from trainforge.plan.mocks import DEFAULT_ACCOUNT

    by_type: dict[str, list[Any]] = {}
    for r in inv.resources:
        by_type.setdefault(r.type, []).append(r)
    # roles: their ARN from whatever names it (an association, an explicit name); the account
    # from the first association's role ARN
    assocs = [_association(a) for a in by_type.get(ASSOCIATION, [])]
    arns = [(a.role_urn, a.role_arn) for a in assocs if a.role_arn.startswith("arn:")]
    accounts = [arn.split(":")[4] for _, arn in arns if arn.count(":") > 3]
    region = plan_region(inv)  # the one reader of the stack's region (the cost's too)
    stack = StackIam((accounts or [DEFAULT_ACCOUNT])[0], region, "aws", {}, assocs, {}, {}, {})
    role_arns = {urn: arn for urn, arn in arns if urn}
    for r in by_type.get(T.IAM_ROLE, []):
        name = r.inputs.get("name")
        # a role's ARN carries its path (IAM: arn:aws:iam::<account>:role/<path><name>)
        path = r.inputs.get("path")
        path = path if isinstance(path, str) and path.startswith("/") else "/"
        name = name if isinstance(name, str) and name != UNKNOWN else f"{r.name}-standin"
        arn = role_arns.get(r.urn) or f"arn:aws:iam::{stack.account}:role{path}{name}"
        trust_doc = policy_doc(r.inputs.get("assumeRolePolicy"))
        trust = Policy(f"trust of role {r.name}", trust_doc) if trust_doc else None
        team = (r.inputs.get("tags") or {}).get(TEAM_LABEL)
        facts = RoleFacts(r.urn, r.name, arn, trust, [], [] if trust else [TRUST], team)
        for i, inline in enumerate(as_list(r.inputs.get("inlinePolicies"))):
            doc = inline.get("policy") if isinstance(inline, dict) else None
            facts.add(doc, f"role {r.name} inline {i}", f"inline policy {i}")
        for arn_ in as_list(r.inputs.get("managedPolicyArns")):
            _attach(facts, str(arn_), None, by_type)
        stack.roles[r.urn] = facts

    def role_of(rec: Any) -> RoleFacts | None:
        ref = rec.inputs.get("role")
        named = (x for x in stack.roles.values() if ref in (x.name, x.arn, x.arn.rsplit("/")[-1]))
        return stack.role(_dep(rec, "role")) or next(named, None)

    for rp in by_type.get(T.IAM_ROLE_POLICY, []):
        facts = role_of(rp)
        if facts is not None:
            name = f"role {facts.name} inline policy {rp.name}"
            facts.add(rp.inputs.get("policy"), name, f"inline policy {rp.name}")
    for att in by_type.get(ATTACHMENT, []):
        facts = role_of(att)
        if facts is not None:
            _attach(facts, str(att.inputs.get("policyArn", "")), _dep(att, "policyArn"), by_type)

    for addon in by_type.get(T.EKS_ADDON, []):
        cluster = str(addon.inputs.get("clusterName", ""))
        role_urn = _dep(addon, "podIdentityAssociations")
        via = f"add-on {addon.inputs.get('addonName')} podIdentityAssociations"
        for i, pia in enumerate(as_list(addon.inputs.get("podIdentityAssociations"))):
            if isinstance(pia, dict):
                sa, arn = str(pia.get("serviceAccount", "")), str(pia.get("roleArn", ""))
                at = ("kube-system", sa, cluster, role_urn, arn, via)
                stack.associations.append(Association(f"{addon.name}#{i}", addon.urn, *at))

    key_urn_to_arn: dict[str, str] = {}  # the bucket keys' URNs (a key may be from outside)
    for sse in by_type.get(T.S3_SSE, []):
        name = sse.inputs.get("bucket")
        if not isinstance(name, str) or name == UNKNOWN:
            continue
        rule = (as_list(sse.inputs.get("rules")) or [{}])[0]
        default = rule.get("applyServerSideEncryptionByDefault") or {}
        algorithm = default.get("sseAlgorithm")
        # SSE-KMS and dual-layer DSSE-KMS both have S3 call KMS with the bucket's key; S3
        # Bucket Keys exist only for SSE-KMS (S3 User Guide: not supported for DSSE-KMS)
        key = default.get("kmsMasterKeyId") if algorithm in ("aws:kms", "aws:kms:dsse") else None
        bucket_key = algorithm == "aws:kms" and bool(rule.get("bucketKeyEnabled"))
        stack.buckets[name] = BucketFacts(name, str(key) if key else None, bucket_key)
        if key:
            key_urn_to_arn.update((urn, str(key)) for urn in sse.dependencies.get("rules") or [])
    # The S3 gateway endpoints this stack declares, by URN -> their id. Their existence, never
    # the bucket policy under test, says that pods reach S3 through them.
    s3_gateways = {e.urn: e.vpce for e in s3_endpoints(inv)}
    linked: dict[str, str] = {}  # bucket -> the gateway its policy is built from
    for bp in by_type.get(T.S3_POLICY, []):
        name = bp.inputs.get("bucket")
        doc = policy_doc(bp.inputs.get("policy"))
        if isinstance(name, str) and doc:
            stack.bucket_policies[name] = Policy(f"bucket policy {bp.name}", doc)
            stack.buckets.setdefault(name, BucketFacts(name))
        for urn in bp.dependencies.get("policy") or []:
            if urn in s3_gateways:
                linked[str(name)] = s3_gateways[urn]
    if s3_gateways:
        # every bucket: pods in the VPC reach it through the gateway (the one its policy is
        # built from where it names one, else the first declared)
        first = next(iter(s3_gateways.values()))
        stack.bucket_endpoints = {name: linked.get(name, first) for name in stack.buckets}

    for k in by_type.get(T.KMS_KEY, []) + by_type.get(KMS_KEY_POLICY, []):
        doc = policy_doc(k.inputs.get("policy"))
        own = k.type == T.KMS_KEY
        urn = k.urn if own else _dep(k, "keyId")
        if doc and urn in key_urn_to_arn:
            name = f"key policy of {k.name}" if own else f"key policy {k.name}"
            stack.key_policies[key_urn_to_arn[urn]] = Policy(name, doc)
    declared_keys = {key_urn_to_arn.get(k.urn) for k in by_type.get(T.KMS_KEY, [])}
    default = "KMS's default key policy (delegates to IAM)"
    outside = "a key policy outside this stack; assumed to delegate to IAM"
    for b in stack.buckets.values():
        if b.kms_key_arn and b.kms_key_arn not in stack.key_policies:
            has = default if b.kms_key_arn in declared_keys else outside
            stack.notes.append(f"bucket {b.name}: key {b.kms_key_arn} has {has}")
    return stack


def _attach(facts: RoleFacts, arn: str, policy_urn: str | None, by_type: dict) -> None:
    p = next((p for p in by_type.get(T.IAM_POLICY, []) if policy_urn and p.urn == policy_urn), None)
    if p is not None:
        facts.add(p.inputs.get("policy"), f"policy {p.name}", f"managed policy {p.name}")
        return
    known, policy = managed_policy(arn)
    if policy is not None:
        facts.policies.append(policy)
    elif not known:
        facts.unreadable.append(f"managed policy {arn} (not shipped with trainforge)")
