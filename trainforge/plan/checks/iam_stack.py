"""The IAM a stack renders, read from the program's recorded resources.

Why from the recording: the rehearsal must judge the policies the platform actually declares
(the same RolePolicy, RolePolicyAttachment, PodIdentityAssociation, BucketPolicy and KMS key
resources `pulumi up` would create), not a copy of the functions that build them.

Stand-ins: in a preview, every document built from an ARN the cloud assigns (the bucket's,
the KMS key's, a role's) is unknown. The plan therefore reads these resources from its
stand-in run (`trainforge.plan.runner.standin_mocks`: the same program, with the platform's
mocks inventing plausible ids and ARNs such as `arn:aws:iam::123456789012:role/<name>-mock`),
in which every `apply` runs and every document exists. Resources are linked by the URNs the
engine records for each input (`Recorded.dependencies`), so a policy is tied to its role even
though its ARN is a stand-in. What could still not be read (an unknown document, a managed
policy we do not ship) is listed in `unreadable`, and the rehearsal reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainforge.plan.checks.aws_calls import BucketFacts
from trainforge.plan.checks.iam_eval import Policy, as_list
from trainforge.plan.checks.iam_reference import default_key_policy, managed_policy
from trainforge.plan.checks.rules import policy_doc
from trainforge.plan.runner import UNKNOWN, Inventory

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
MANAGED = "aws:iam/policy:Policy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
BUCKET_SSE = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
)
KMS_KEY = "aws:kms/key:Key"
KMS_KEY_POLICY = "aws:kms/keyPolicy:KeyPolicy"
ADDON = "aws:eks/addon:Addon"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass
class RoleFacts:
    urn: str
    name: str  # the Pulumi resource name
    arn: str
    trust: Policy | None
    policies: list[Policy] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"role {self.name}"


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
        if not urn_or_arn:
            return None
        if urn_or_arn in self.roles:
            return self.roles[urn_or_arn]
        return next((r for r in self.roles.values() if r.arn == urn_or_arn), None)

    def associations_for(self, namespace: str, service_account: str) -> list[Association]:
        return [
            a
            for a in self.associations
            if a.namespace == namespace and a.service_account == service_account
        ]

    def role_of(self, a: Association) -> RoleFacts | None:
        """The declared role an association hands out (None: one this stack does not declare)."""
        return self.role(a.role_urn) or self.role(a.role_arn)

    def roles_for(self, namespace: str, service_account: str) -> list[RoleFacts]:
        """The declared roles the ServiceAccount's associations give its pods."""
        found = (self.role_of(a) for a in self.associations_for(namespace, service_account))
        return [r for r in found if r is not None]

    def node_roles(self) -> list[RoleFacts]:
        """Roles EC2 instances assume (node roles): trusted by ec2.amazonaws.com."""
        out = []
        for r in self.roles.values():
            if r.trust is None:
                continue
            services = {
                str(s)
                for st in r.trust.statements()
                for s in as_list((st.get("Principal") or {}).get("Service"))
            }
            if any(s.startswith("ec2.amazonaws.com") for s in services):
                out.append(r)
        return out

    def key_policy(self, key_arn: str) -> tuple[Policy, bool]:
        """(key policy, declared in this stack?) -- the default key policy otherwise."""
        if key_arn in self.key_policies:
            return self.key_policies[key_arn], True
        return default_key_policy(self.account, self.partition), False


def _dep(rec: Any, prop: str) -> str | None:
    urns = rec.dependencies.get(prop) or []
    return urns[0] if urns else None


def read_stack(inv: Inventory) -> StackIam:
    """Every role, association, bucket and key policy the program declared."""
    from trainforge.plan.mocks import DEFAULT_ACCOUNT, DEFAULT_REGION

    region = str(inv.config.get("aws:region") or DEFAULT_REGION)
    by_type: dict[str, list[Any]] = {}
    for r in inv.resources:
        by_type.setdefault(r.type, []).append(r)

    account = DEFAULT_ACCOUNT
    for a in by_type.get(ASSOCIATION, []):
        arn = str(a.inputs.get("roleArn", ""))
        if arn.startswith("arn:") and len(arn.split(":")) > 4:
            account = arn.split(":")[4]
            break
    partition = "aws"

    # roles: their ARN from whatever names it (an association, an explicit name)
    role_arns: dict[str, str] = {}
    for a in by_type.get(ASSOCIATION, []):
        urn = _dep(a, "roleArn")
        if urn and str(a.inputs.get("roleArn", "")).startswith("arn:"):
            role_arns[urn] = str(a.inputs["roleArn"])
    roles: dict[str, RoleFacts] = {}
    for r in by_type.get(ROLE, []):
        name = r.inputs.get("name")
        # a role's ARN carries its path (IAM: arn:aws:iam::<account>:role/<path><name>)
        path = r.inputs.get("path")
        path = path if isinstance(path, str) and path.startswith("/") else "/"
        arn = role_arns.get(r.urn) or (
            f"arn:{partition}:iam::{account}:role{path}{name}"
            if isinstance(name, str) and name != UNKNOWN
            else f"arn:{partition}:iam::{account}:role{path}{r.name}-standin"
        )
        trust_doc = policy_doc(r.inputs.get("assumeRolePolicy"))
        facts = RoleFacts(
            r.urn, r.name, arn, Policy(f"trust of role {r.name}", trust_doc) if trust_doc else None
        )
        if trust_doc is None:
            facts.unreadable.append("trust policy")
        for i, inline in enumerate(as_list(r.inputs.get("inlinePolicies"))):
            doc = policy_doc(inline.get("policy") if isinstance(inline, dict) else None)
            if doc:
                facts.policies.append(Policy(f"role {r.name} inline {i}", doc))
            else:
                facts.unreadable.append(f"inline policy {i}")
        for arn_ in as_list(r.inputs.get("managedPolicyArns")):
            _attach(facts, str(arn_), None, by_type)
        roles[r.urn] = facts

    def role_of(rec: Any) -> RoleFacts | None:
        urn = _dep(rec, "role")
        if urn in roles:
            return roles[urn]
        ref = rec.inputs.get("role")
        return next(
            (x for x in roles.values() if ref in (x.name, x.arn, x.arn.rsplit("/", 1)[-1])), None
        )

    for rp in by_type.get(ROLE_POLICY, []):
        facts = role_of(rp)
        if facts is None:
            continue
        doc = policy_doc(rp.inputs.get("policy"))
        if doc:
            facts.policies.append(Policy(f"role {facts.name} inline policy {rp.name}", doc))
        else:
            facts.unreadable.append(f"inline policy {rp.name}")
    for att in by_type.get(ATTACHMENT, []):
        facts = role_of(att)
        if facts is not None:
            _attach(facts, str(att.inputs.get("policyArn", "")), _dep(att, "policyArn"), by_type)

    associations = [
        Association(
            name=a.name,
            urn=a.urn,
            namespace=str(a.inputs.get("namespace", "")),
            service_account=str(a.inputs.get("serviceAccount", "")),
            cluster=str(a.inputs.get("clusterName", "")),
            role_urn=_dep(a, "roleArn"),
            role_arn=str(a.inputs.get("roleArn", "")),
        )
        for a in by_type.get(ASSOCIATION, [])
    ]
    for addon in by_type.get(ADDON, []):
        for i, pia in enumerate(as_list(addon.inputs.get("podIdentityAssociations"))):
            if isinstance(pia, dict):
                urn = _dep(addon, "podIdentityAssociations")
                associations.append(
                    Association(
                        name=f"{addon.name}#{i}",
                        urn=addon.urn,
                        namespace="kube-system",
                        service_account=str(pia.get("serviceAccount", "")),
                        cluster=str(addon.inputs.get("clusterName", "")),
                        role_urn=urn,
                        role_arn=str(pia.get("roleArn", "")),
                        via=f"add-on {addon.inputs.get('addonName')} podIdentityAssociations",
                    )
                )

    buckets: dict[str, BucketFacts] = {}
    for sse in by_type.get(BUCKET_SSE, []):
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
        buckets[name] = BucketFacts(name, str(key) if key else None, bucket_key)
    bucket_policies: dict[str, Policy] = {}
    # The S3 gateway endpoints this stack declares, by URN -> their id (the stand-in run's id;
    # a marker naming the endpoint where it is unknown). Their existence, never the bucket
    # policy under test, says that pods reach S3 through them.
    s3_gateways = {
        e.urn: e.id or f"<id of VPC endpoint {e.name}>"
        for e in by_type.get(VPC_ENDPOINT, [])
        # the provider's default type is Gateway (an S3 endpoint declared without a type is one)
        if (e.inputs.get("vpcEndpointType") or "Gateway") == "Gateway"
        and str(e.inputs.get("serviceName", "")).endswith(".s3")
    }
    for bp in by_type.get(BUCKET_POLICY, []):
        name = bp.inputs.get("bucket")
        doc = policy_doc(bp.inputs.get("policy"))
        if isinstance(name, str) and doc:
            bucket_policies[name] = Policy(f"bucket policy {bp.name}", doc)
            buckets.setdefault(name, BucketFacts(name))
    bucket_endpoints: dict[str, str] = {}
    if s3_gateways:
        # every bucket: pods in the VPC reach it through the gateway (the one its policy is
        # built from where it names one, else the first declared)
        first = next(iter(s3_gateways.values()))
        linked = {
            str(bp.inputs.get("bucket")): s3_gateways[urn]
            for bp in by_type.get(BUCKET_POLICY, [])
            for urn in bp.dependencies.get("policy") or []
            if urn in s3_gateways
        }
        for name in buckets:
            bucket_endpoints[name] = linked.get(name, first)

    key_policies: dict[str, Policy] = {}
    key_urn_to_arn: dict[str, str] = {}
    for sse in by_type.get(BUCKET_SSE, []):
        urns = sse.dependencies.get("rules") or []
        name = sse.inputs.get("bucket")
        facts = buckets.get(name) if isinstance(name, str) else None
        for urn in urns:
            if facts is not None and facts.kms_key_arn:
                key_urn_to_arn[urn] = facts.kms_key_arn
    for k in by_type.get(KMS_KEY, []):
        doc = policy_doc(k.inputs.get("policy"))
        if doc and k.urn in key_urn_to_arn:
            key_policies[key_urn_to_arn[k.urn]] = Policy(f"key policy of {k.name}", doc)
    for kp in by_type.get(KMS_KEY_POLICY, []):
        doc = policy_doc(kp.inputs.get("policy"))
        urn = _dep(kp, "keyId")
        if doc and urn in key_urn_to_arn:
            key_policies[key_urn_to_arn[urn]] = Policy(f"key policy {kp.name}", doc)

    notes = []
    # the ARNs of the keys this stack declares (a bucket's key may also come from outside)
    declared_keys = {
        key_urn_to_arn[k.urn] for k in by_type.get(KMS_KEY, []) if k.urn in key_urn_to_arn
    }
    for b in buckets.values():
        if b.kms_key_arn and b.kms_key_arn not in key_policies:
            own = b.kms_key_arn in declared_keys
            notes.append(
                f"bucket {b.name}: key {b.kms_key_arn} has "
                + (
                    "KMS's default key policy (delegates to IAM)"
                    if own
                    else "a key policy outside this stack; assumed to delegate to IAM"
                )
            )
    return StackIam(
        account=account,
        region=region,
        partition=partition,
        roles=roles,
        associations=associations,
        bucket_policies=bucket_policies,
        buckets=buckets,
        key_policies=key_policies,
        notes=notes,
        bucket_endpoints=bucket_endpoints,
    )


def _attach(facts: RoleFacts, arn: str, policy_urn: str | None, by_type: dict) -> None:
    if policy_urn is not None:
        for p in by_type.get(MANAGED, []):
            if p.urn == policy_urn:
                doc = policy_doc(p.inputs.get("policy"))
                if doc:
                    facts.policies.append(Policy(f"policy {p.name}", doc))
                else:
                    facts.unreadable.append(f"managed policy {p.name}")
                return
    known, policy = managed_policy(arn)
    if policy is not None:
        facts.policies.append(policy)
    elif not known:
        facts.unreadable.append(f"managed policy {arn} (not shipped with trainforge)")
