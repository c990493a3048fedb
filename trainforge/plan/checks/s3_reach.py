"""What a pod can reach in S3: the one reading of the stack's S3 gateway endpoint policy.

Why: a team namespace's NetworkPolicies open HTTPS to the region's S3 address ranges, which
are every bucket's; what keeps a pod from writing the team volume to a bucket of another
account is the S3 gateway endpoint's policy (`platform/network.py` `s3_endpoint_policy`),
through which every S3 request from the private subnets goes. The IAM rehearsal proves the
policy (this account's checkpoint bucket and ECR's layer bucket allowed, another account's
bucket denied) and the internet-fetch check says what a job's S3 URL meets, both with this
module and the same evaluator (`iam_eval.evaluate`) over the policy the program declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainforge.plan.checks.iam_eval import Decision, Policy, Request, evaluate, policy_doc
from trainforge.plan.resource_types import VPC_ENDPOINT

# the account a bucket not declared by this stack is judged in: unknown, so not this one
ANOTHER_ACCOUNT = "another account"


@dataclass(frozen=True)
class S3Endpoint:
    """An S3 gateway endpoint the program declares, and its policy (None: AWS's default,
    full access to every bucket of every account)."""

    name: str
    urn: str
    policy: Policy | None
    vpce: str = ""  # its id (the stand-in run's), or a marker naming it where that is unknown


def s3_endpoints(inv: Any) -> list[S3Endpoint]:
    """The S3 gateway endpoints of inventory `inv` (the provider's default type is Gateway:
    an S3 endpoint declared without a type is one)."""
    return [
        S3Endpoint(
            r.name,
            r.urn,
            Policy(f"endpoint policy {r.name}", doc) if doc else None,
            getattr(r, "id", None) or f"<id of VPC endpoint {r.name}>",
        )
        for r in getattr(inv, "resources", [])
        if r.type == VPC_ENDPOINT
        and str(r.inputs.get("serviceName", "")).endswith(".s3")
        and (r.inputs.get("vpcEndpointType") or "Gateway") == "Gateway"
        for doc in [policy_doc(r.inputs.get("policy"))]
    ]


def through(
    endpoint: S3Endpoint,
    action: str,
    bucket: str,
    key: str | None,
    *,
    principal: str,
    principal_account: str,
    resource_account: str,
) -> Decision:
    """Whether `endpoint`'s policy lets `action` on `bucket` (object `key`, None: the bucket)
    through, for `principal` of `principal_account` on a bucket of `resource_account`. An
    endpoint without a policy lets everything through (AWS's default)."""
    if endpoint.policy is None:
        return Decision(True, f"{endpoint.name} has no policy: AWS's default, full access")
    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    context = {"aws:ResourceAccount": resource_account, "aws:PrincipalAccount": principal_account}
    request = Request(principal, action, resource, context, principal_account)
    return evaluate(request, (), [endpoint.policy])


def outside_bucket(
    inv: Any, bucket: str, account: str, own: set[str], upload: bool
) -> tuple[bool, str] | None:
    """For a job's request to `bucket`, not one of the stack's (`own`): (refused, what the
    stack's S3 endpoint does with it), None where the stack has no S3 endpoint (S3 is then
    reached through NAT, with no policy between). The bucket's account is unknown, so it is
    judged as another account's, which is what the sentence says."""
    endpoints = s3_endpoints(inv)
    if bucket in own or not endpoints:
        return None
    ep = endpoints[0]
    action = "s3:PutObject" if upload else "s3:GetObject"
    decision = through(
        ep, action, bucket, "object", principal="*", principal_account=account,
        resource_account=ANOTHER_ACCOUNT,
    )  # fmt: skip
    if decision.allowed:
        return False, (
            f"the VPC's S3 gateway endpoint {ep.name} lets it through "
            f"({decision.reason}): a bucket of any account is reachable"
        )
    return True, (
        f"the VPC's S3 gateway endpoint {ep.name} denies {action} on a bucket of another "
        f"account (its policy admits this account's buckets, {account}, the AWS-owned "
        "buckets the nodes read and the stack's data repository), so the request fails "
        "with AccessDenied unless the bucket is in this account"
    )
